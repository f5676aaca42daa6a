"""lecture_lib.cache: a failed build leaves no result, a finished one is loaded and never rebuilt, writes are
atomic, and keys are the same in every process and change with every part of the recipe."""

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from lecture_lib import cache
from lecture_lib.cache import atomic_write, cache_root, cached, fingerprint, key
from lecture_lib.pretraining import PretrainConfig, config_leaves


class BuildFailed(Exception):
    pass


@pytest.fixture(autouse=True)
def _root(tmp_path, monkeypatch):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path / "cache"))


def write_directory(path: Path) -> None:
    path.mkdir(exist_ok=True)
    (path / "weights.txt").write_text("trained")


def read_directory(path: Path) -> str:
    return (path / "weights.txt").read_text()


def results() -> list[str]:
    """What the cache holds, without its lock files."""
    return sorted(p.name for p in cache_root().iterdir() if p.name != ".locks")


def never_build(path: Path) -> None:
    raise AssertionError("a finished result must be loaded, not built again")


def test_cache_root_is_the_environment_variable_else_the_home_cache(tmp_path, monkeypatch):
    assert cache_root() == tmp_path / "cache"
    monkeypatch.delenv("LECTURE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "lecture_lib"


def test_a_build_that_fails_midway_leaves_no_result_and_the_next_call_completes_it():
    def dies_after_writing_part(path: Path) -> None:
        path.mkdir()
        (path / "half.txt").write_text("half")
        raise BuildFailed

    with pytest.raises(BuildFailed):
        cached("model", dies_after_writing_part, read_directory)
    assert not (cache_root() / "model").exists()
    assert (cache_root() / "model.partial" / "half.txt").is_file()  # what a resumable build continues from

    assert cached("model", write_directory, read_directory) == "trained"
    assert results() == ["model"]
    assert cached("model", never_build, read_directory) == "trained"


def test_a_file_result_is_built_once_then_loaded():
    def build(path: Path) -> None:
        path.write_text(json.dumps({"accuracy": 0.5}))

    assert cached("table.json", build, lambda p: json.loads(p.read_text())) == {"accuracy": 0.5}
    assert cached("table.json", never_build, lambda p: json.loads(p.read_text())) == {"accuracy": 0.5}
    assert results() == ["table.json"]


def test_another_process_finishing_first_wins():
    def slower_than_another_process(path: Path) -> None:
        write_directory(cache_root() / "model")  # the other process renames its result first
        (cache_root() / "model" / "weights.txt").write_text("theirs")
        write_directory(path)

    assert cached("model", slower_than_another_process, read_directory) == "theirs"
    assert results() == ["model"]


BUILD_IN_ANOTHER_PROCESS = """
import sys, time
from pathlib import Path
from lecture_lib.cache import cached

def build(path):
    with open(sys.argv[1], "a") as log:
        log.write("build\\n")
    time.sleep(1.0)  # long enough for the other process to arrive while this one builds
    path.write_text("built")

print(cached("slow.txt", build, lambda p: p.read_text()))
"""


def test_two_processes_wanting_the_same_result_build_it_once(tmp_path):
    log = tmp_path / "builds.log"
    env = {**os.environ, "LECTURE_CACHE": str(cache_root())}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD_IN_ANOTHER_PROCESS, str(log)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [worker.communicate(timeout=120)[0].strip() for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0]
    assert outputs == ["built", "built"]
    assert log.read_text() == "build\n"  # the second process waited, then loaded the first one's result
    assert results() == ["slow.txt"]


def test_atomic_write_keeps_the_old_content_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "out" / "result.json"
    assert atomic_write(path, "old") == path and path.read_text() == "old"
    atomic_write(path, b"\x00new")
    assert path.read_bytes() == b"\x00new"

    def disk_full(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, "newer")
    assert path.read_bytes() == b"\x00new"
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temporary file left behind


def test_keys_are_the_same_in_another_process_under_another_hash_seed():
    config = PretrainConfig.from_dict(dict(train=dict(steps=3), objective=dict(pairs=None)))
    code = "import json, sys; from lecture_lib.cache import key; print(key(json.loads(sys.stdin.read())))"
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(asdict(config)),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert keys == {key(asdict(config))}
    assert len(key(asdict(config))) == 16 and int(key(asdict(config)), 16) >= 0
    assert key({"b": 1, "a": [1, 2]}) == key({"a": [1, 2], "b": 1})  # dict order does not matter, list order does
    assert key({"a": [1, 2]}) != key({"a": [2, 1]})


def _another(value):
    """A different value of the same kind (None becomes a string)."""
    if value is None or isinstance(value, str):
        return f"{value}x"
    return not value if isinstance(value, bool) else value + 1


def test_keys_change_with_every_leaf_of_the_recipe_and_with_the_versions(monkeypatch):
    base = asdict(PretrainConfig.from_dict({}))
    leaves = [("model", "vocab_size"), ("model", "max_position_embeddings"), *(path for path, _ in config_leaves())]
    keys = {key(base)}
    for *parents, leaf in leaves:
        changed = json.loads(json.dumps(base))
        level = changed
        for name in parents:
            level = level[name]
        level[leaf] = _another(level[leaf])
        keys.add(key(changed))
    assert len(keys) == len(leaves) + 1  # every change gives a new key

    for owner, name, value in (
        (cache, "CACHE_FORMAT", 99),
        (cache.torch, "__version__", "0.0"),
        (cache.sys, "version_info", (2, 7, 18)),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(owner, name, value)
            assert key(base) not in keys


def test_a_process_that_waits_for_the_lock_says_so_and_for_how_long(capsys):
    import threading

    held, release = threading.Event(), threading.Event()

    def hold():  # another open file description of the same lock file: flock makes it wait like a process
        with cache.build_lock("bert"):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    threading.Timer(0.3, release.set).start()
    with cache.build_lock("bert"):
        pass
    holder.join()
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "waiting for another process to finish building bert ..."
    assert err[1].startswith("waited ") and err[1].endswith(" s for bert")
    with cache.build_lock("bert"):  # free now: no message
        pass
    assert capsys.readouterr().err == ""


def test_cached_json_runs_once_per_recipe_and_returns_what_it_reads_back():
    runs = []

    def run():
        runs.append(1)
        return {"pair": (1, 2), 3: "three"}

    first = cache.cached_json("scores", {"steps": 5}, run)
    assert first == {"pair": [1, 2], "3": "three"}  # the first call returns the JSON read back, as later calls do
    assert cache.cached_json("scores", {"steps": 5}, run) == first and len(runs) == 1
    assert results() == [f"scores-{key({'steps': 5})}.json"]
    cache.cached_json("scores", {"steps": 6}, run)  # another recipe is another result
    assert len(runs) == 2


def test_a_fingerprint_of_tensors_changes_with_any_value_shape_or_name_and_a_models_is_its_state_dicts():
    features = {"input_ids": torch.tensor([[2, 5, 3]]), "labels": torch.tensor([1])}
    base = fingerprint(features)
    assert fingerprint({k: v.clone() for k, v in features.items()}) == base
    assert fingerprint({**features, "labels": torch.tensor([0])}) != base
    assert fingerprint({**features, "labels": torch.tensor([[1]])}) != base
    assert fingerprint({"ids": features["input_ids"], "labels": features["labels"]}) != base
    layer = torch.nn.Linear(2, 2)
    assert fingerprint(layer) != fingerprint(dict(layer.state_dict()))  # the type is part of it
    assert fingerprint(torch.nn.ReLU()) == fingerprint(torch.nn.ReLU())  # a module without weights
    with pytest.raises(TypeError, match="dict of tensors"):
        fingerprint({"labels": [1]})
