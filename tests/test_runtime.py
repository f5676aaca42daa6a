"""runtime.seed_of / generator: a stream is a fixed function of its keys, in any process; runtime.parallel_map:
the loop's results, in order, from worker processes (fine-tuning in workers: tests/chapters/test_course_language.py)."""

import hashlib
import io
import math
import os
import subprocess
import sys

import pytest
import torch

from lecture_lib import runtime
from lecture_lib.runtime import (
    available_devices,
    cpu_workers,
    existing_device,
    generator,
    in_worker,
    module_device,
    parallel_map,
    progress_bar,
    seed_of,
    to_device,
)

DRAW = "import torch; from lecture_lib.runtime import generator; print(torch.rand(4, generator=generator('s', 7, 'x')).tolist())"


def draw_in_subprocess(hash_seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run([sys.executable, "-c", DRAW], env=env, capture_output=True, text=True, check=True).stdout


def test_same_stream_in_other_processes_under_any_hash_seed():
    here = str(torch.rand(4, generator=generator("s", 7, "x")).tolist()) + "\n"
    assert draw_in_subprocess("1") == draw_in_subprocess("12345") == here


def test_seed_is_sha256_of_the_json_list_of_keys():
    # Independent reference: hashlib on the encoding written out by hand.
    digest = hashlib.sha256(b'["reversal",0,3]').digest()
    assert seed_of("reversal", 0, 3) == int.from_bytes(digest[:8], "big") >> 1
    assert 0 <= seed_of("reversal", 0, 3) < 2**63
    assert torch.equal(
        torch.rand(5, generator=generator("reversal", 0, 3)),
        torch.rand(5, generator=torch.Generator().manual_seed(seed_of("reversal", 0, 3))),
    )


@pytest.mark.parametrize(
    "keys, other",
    [
        (("a", 1), ("a1",)),
        ((1, 23), (12, 3)),
        (("a", 1), ("a", "1")),
        (("reversal", 0, 1), ("reversal", 1, 0)),
        (("reversal", 0), ("reversal", 0, 0)),
    ],
)
def test_different_keys_give_different_streams(keys, other):
    assert seed_of(*keys) != seed_of(*other)
    assert not torch.equal(torch.rand(8, generator=generator(*keys)), torch.rand(8, generator=generator(*other)))


@pytest.mark.parametrize("bad", [1.5, None, True, b"x", (1, 2)])
def test_keys_of_the_wrong_type_are_refused(bad):
    with pytest.raises(TypeError, match="expected keys of type str or int"):
        generator("stream", bad)


def test_no_keys_is_refused():
    with pytest.raises(ValueError, match="at least one key"):
        seed_of()


def test_parallel_map_keeps_the_order_of_the_jobs():
    jobs = [(2, k) for k in range(7)]
    assert parallel_map(pow, jobs, workers=2) == parallel_map(pow, jobs, workers=1) == [2**k for k in range(7)]
    assert parallel_map(pow, [], workers=2) == []


def bar_text(steps: int) -> str:
    """What a job's progress bar of ``steps`` writes (a module function, so the pool's workers can import it)."""
    out = io.StringIO()
    for _ in progress_bar(range(steps), desc="counting", file=out):
        pass
    return out.getvalue()


def test_a_jobs_bars_are_silent_in_the_pools_workers_and_shown_in_the_notebooks_process():
    """A worker's bars would print to the notebook as text, beside the pool's own bar that counts the jobs."""
    assert parallel_map(in_worker, [(), ()], workers=2) == [True, True] and not in_worker()
    assert parallel_map(bar_text, [(3,), (4,)], workers=2) == ["", ""]
    assert "counting: 100%" in bar_text(3)
    assert "counting: 100%" in parallel_map(bar_text, [(3,)], workers=1)[0]  # one worker: the loop, in this process


@pytest.mark.parametrize("device, expected", [("cpu", len(os.sched_getaffinity(0))), ("cuda", 1), ("mps", 1)])
def test_one_worker_per_core_on_a_cpu_and_one_in_all_on_a_gpu(monkeypatch, device, expected):
    monkeypatch.setattr(runtime, "default_device", lambda: torch.device(device))
    assert cpu_workers() == expected


def test_parallel_map_raises_a_jobs_error_and_refuses_what_a_worker_cannot_import():
    with pytest.raises(ValueError, match="math domain error"):
        parallel_map(math.sqrt, [(4.0,), (-1.0,)], workers=2)
    assert parallel_map(math.sqrt, [(4.0,), (9.0,)], workers=2) == [2.0, 3.0]  # the pool survives an error
    with pytest.raises(ValueError, match="a new process can import"):
        parallel_map(lambda x: x, [(1,), (2,)], workers=2)
    with pytest.raises(ValueError, match="workers >= 1"):
        parallel_map(pow, [(2, 1)], workers=0)


def test_a_device_is_taken_only_if_this_machine_has_it():
    assert existing_device("cpu") == torch.device("cpu") and available_devices()[0] == "cpu"
    missing = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    with pytest.raises(ValueError, match=f"device '{missing}' is not available here; available: cpu"):
        existing_device(missing)
    with pytest.raises(ValueError, match="expected a device such as cpu.*, got 'gpu'"):
        existing_device("gpu")


def test_to_device_moves_every_tensor_of_nested_containers_and_dataclasses():
    from collections import namedtuple

    from lecture_lib.data.toy import make_batch

    Pair = namedtuple("Pair", "a b")
    batch = {
        "seq": make_batch([torch.tensor([5, 6])], [torch.tensor([7])]),
        "pairs": [Pair(torch.ones(2), "name")],
        "step": 3,
    }
    moved = to_device(batch, "meta")
    assert moved["seq"].src.device.type == "meta" and moved["seq"].tgt_out.device.type == "meta"
    assert isinstance(moved["pairs"][0], Pair) and moved["pairs"][0].a.device.type == "meta"
    assert moved["pairs"][0].b == "name" and moved["step"] == 3
    assert batch["seq"].src.device.type == "cpu"  # the original is left as it was


def test_module_device_is_the_first_parameters_or_buffers_else_the_cpu():
    assert module_device(torch.nn.Linear(2, 2, device="meta")).type == "meta"
    assert module_device(torch.nn.BatchNorm1d(2, affine=False, device="meta")).type == "meta"
    assert module_device(torch.nn.ReLU()) == torch.device("cpu")


def test_epoch_batch_shows_each_row_once_an_epoch_in_a_new_order_each_epoch():
    from lecture_lib.runtime import epoch_batch

    epochs = [[epoch_batch(e * 3 + k, 10, 3, "test order", 0) for k in range(3)] for e in range(3)]
    for e, batches in enumerate(epochs):
        rows = torch.cat([r for _, r in batches])
        assert {epoch for epoch, _ in batches} == {e} and len(set(rows.tolist())) == 9  # row 10 sits it out
    assert epochs[0][0][1].tolist() != epochs[1][0][1].tolist()
    assert torch.equal(epoch_batch(4, 10, 3, "test order", 0)[1], epochs[1][1][1])  # any step, any time
    with pytest.raises(ValueError, match=r"expected batch_size in \[1, 10\], got 11"):
        epoch_batch(0, 10, 11, "test order", 0)


def test_invoke_lets_one_parallel_map_run_different_functions():
    assert runtime.parallel_map(runtime.invoke, [(sorted, [3, 1, 2]), (max, 4, 7)], workers=2) == [[1, 2, 3], 7]


def test_kept_workers_start_afresh_once_the_cache_or_profile_changes(monkeypatch, tmp_path):
    """A worker reads the environment once, when it starts: a pool kept from before a change would still build
    into the old cache, or at the old profile's sizes."""
    ask = [("LECTURE_CACHE",), ("LECTURE_PROFILE",)] * 2
    for cache, profile in ((tmp_path / "a", "quick"), (tmp_path / "b", "quick"), (tmp_path / "b", "full")):
        monkeypatch.setenv("LECTURE_CACHE", str(cache))
        monkeypatch.setenv("LECTURE_PROFILE", profile)
        assert parallel_map(os.getenv, ask, workers=2) == [str(cache), profile] * 2
