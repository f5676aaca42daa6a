"""lecture_lib.train against plain PyTorch loops, transformers' schedule, and itself interrupted and resumed.

The data-parallel test runs two real processes under torchrun on the gloo backend.
"""

import os
import pickle
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

from lecture_lib import train as train_module
from lecture_lib.config import FieldError
from lecture_lib.train import (
    CHECKPOINT_NAME,
    History,
    TrainConfig,
    linear,
    load_checkpoint,
    load_trained,
    save_checkpoint,
    save_trained,
    warmup_from_fraction,
)
from tests.fake_accelerator import FakeAccelerator

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _float32():
    """Other test modules may switch the default dtype; these tests are about float32 training."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(previous)


@dataclass
class Pair:
    x: torch.Tensor
    rest: dict


def make_model(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Dropout(dropout), nn.Linear(16, 1))


def batch_fn(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + i)
    x = torch.randn(8, 4, generator=g)
    return x, x.sum(-1, keepdim=True) + 0.1 * torch.randn(8, 1, generator=g)


def mse(model: nn.Module, batch) -> torch.Tensor:
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def train(*args, **kwargs):
    """:func:`lecture_lib.train.train` without its progress bar (a run setting, not a field of the config)."""
    return train_module.train(*args, **{"progress": False, **kwargs})


def quiet(**kwargs) -> TrainConfig:
    return TrainConfig(**kwargs)


def params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def test_train_equals_a_plain_pytorch_loop():
    config = quiet(steps=7, lr=0.01, warmup_steps=3, schedule="linear", grad_clip=0.5, grad_accum=2)
    ours = make_model()
    history = train(ours, batch_fn, mse, config, device="cpu")

    ref = make_model()
    decay = [p for p in ref.parameters() if p.ndim >= 2]
    no_decay = [p for p in ref.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=0.01)
    losses = []
    for step in range(7):
        for group in optimizer.param_groups:
            group["lr"] = 0.01 * min((step + 1) / 3, (7 - step) / 4)
        total = 0.0
        for j in range(2):
            loss = mse(ref, batch_fn(2 * step + j)) / 2
            loss.backward()
            total += loss.item()
        nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(total)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert history.loss == losses
    assert len(history.lr) == 7 and history.lr[2] == pytest.approx(0.01)


def test_losses_read_from_the_device_every_few_steps_are_those_read_at_every_step(monkeypatch):
    config = quiet(steps=7, lr=0.01, grad_accum=2, eval_every=3)
    monkeypatch.setattr(train_module, "LOG_EVERY", 1)
    every_step = train(make_model(), batch_fn, mse, config, device="cpu", evaluate=lambda m: {})
    monkeypatch.setattr(train_module, "LOG_EVERY", 100)
    history = train(make_model(), batch_fn, mse, config, device="cpu", evaluate=lambda m: {})
    assert history.loss == every_step.loss and len(history.loss) == 7 and history.evals == every_step.evals


class Teacher(nn.Module):
    """A loss that needs a module beside the model: the model's outputs pulled to a fixed network's."""

    def __init__(self) -> None:
        super().__init__()
        self.net = make_model(seed=1)

    def forward(self, model: nn.Module, batch) -> torch.Tensor:
        x, _ = batch
        with torch.no_grad():
            target = self.net(x)
        return nn.functional.mse_loss(model(x), target)


def _dataclass_batches(i: int) -> Pair:
    x, y = batch_fn(i)
    return Pair(x, {"y": [y]})


def _dataclass_mse(model: nn.Module, batch: Pair) -> torch.Tensor:
    return nn.functional.mse_loss(model(batch.x), batch.rest["y"][0])


def test_train_moves_dataclass_batches_and_a_loss_module_with_the_model():
    with FakeAccelerator() as device:
        model, teacher = make_model(), Teacher()
        train(model, _dataclass_batches, _dataclass_mse, quiet(steps=2))
        train(model, batch_fn, teacher, quiet(steps=2))
        assert {p.device for p in (*model.parameters(), *teacher.parameters())} == {device}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="runs on CUDA only; make gpu-check runs it on a GPU")
def test_train_moves_batches_and_the_loss_module_on_cuda():
    model, teacher = make_model(), Teacher()
    history = train(model, _dataclass_batches, _dataclass_mse, quiet(steps=2))
    train(model, batch_fn, teacher, quiet(steps=2))
    assert {p.device.type for p in (*model.parameters(), *teacher.parameters())} == {"cuda"}
    assert len(history.loss) == 2


def test_linear_schedule_matches_transformers_after_warmup():
    import transformers  # here, not at the top: the torchrun workers import this file and need not load it

    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = transformers.get_linear_schedule_with_warmup(optimizer, num_warmup_steps=10, num_training_steps=50)
    for step in range(50):
        expected = hf.lr_lambdas[0](step + 1) if step < 10 else hf.lr_lambdas[0](step)
        assert linear(step, 10, 50) == pytest.approx(expected)


def test_gradient_accumulation_equals_one_big_batch():
    config = dict(steps=3, lr=0.05, grad_clip=None)
    small = make_model()
    train(small, batch_fn, mse, quiet(grad_accum=2, **config), device="cpu")

    def big_batch(i):
        (x0, y0), (x1, y1) = batch_fn(2 * i), batch_fn(2 * i + 1)
        return torch.cat([x0, x1]), torch.cat([y0, y1])

    big = make_model()
    train(big, big_batch, mse, quiet(**config), device="cpu")
    for a, b in zip(small.parameters(), big.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


class Interrupted(Exception):
    pass


def test_resume_continues_exactly_as_if_uninterrupted(tmp_path):
    # Dropout makes the run depend on the random-number state, which the checkpoint must restore too.
    config = dict(steps=8, lr=0.02, warmup_steps=2, schedule="linear", eval_every=2)
    evaluate = lambda m: {"loss": mse(m, batch_fn(-1)).item()}  # noqa: E731
    straight = make_model(dropout=0.3)
    expected = train(straight, batch_fn, mse, quiet(**config), evaluate=evaluate, device="cpu")

    def dies_at_step_6(i):
        if i == 6:
            raise Interrupted
        return batch_fn(i)

    checkpointed, run = quiet(**config), dict(checkpoint_dir=str(tmp_path), checkpoint_every=3)
    with pytest.raises(Interrupted):
        train(make_model(dropout=0.3), dies_at_step_6, mse, checkpointed, evaluate=evaluate, device="cpu", **run)
    assert load_checkpoint(tmp_path / CHECKPOINT_NAME)["step"] == 6
    resumed_model = make_model(seed=123, dropout=0.3)  # different initial weights: all must come from the file
    resumed = train(resumed_model, batch_fn, mse, checkpointed, evaluate=evaluate, device="cpu", **run)
    for a, b in zip(resumed_model.parameters(), straight.parameters()):
        assert torch.equal(a, b)
    assert resumed == expected
    assert load_checkpoint(tmp_path / CHECKPOINT_NAME)["step"] == 8


def test_resume_refuses_a_checkpoint_of_another_run(tmp_path):
    train(make_model(), batch_fn, mse, quiet(steps=2), device="cpu", checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="different run"):
        train(make_model(), batch_fn, mse, quiet(steps=2, lr=0.5), device="cpu", checkpoint_dir=tmp_path)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, {"step": 1, "w": torch.ones(3)})

    def dies_half_way(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"step": 2, "w": torch.zeros(3)})
    state = load_checkpoint(path)
    assert state["step"] == 1 and torch.equal(state["w"], torch.ones(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]  # no temporary file left behind


class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_load_checkpoint_never_executes_code(tmp_path):
    marker = tmp_path / "pwned"
    with open(tmp_path / "evil.pt", "wb") as f:
        pickle.dump({"step": _RunsCode(str(marker))}, f, protocol=2)
    with pytest.raises(OSError, match="evil.pt is not a readable training checkpoint"):
        load_checkpoint(tmp_path / "evil.pt")
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_checkpoint_is_named_with_what_to_do(tmp_path, damage):
    path = tmp_path / CHECKPOINT_NAME
    save_checkpoint(path, {"step": 3, "w": torch.ones(1000)})
    data = path.read_bytes()
    path.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"\x00not a zip" * 50, "empty": b""}[damage])
    with pytest.raises(OSError, match=rf"{CHECKPOINT_NAME} is not a readable training checkpoint .* Delete it"):
        load_checkpoint(path)


def test_bf16_autocast_on_request_and_fp32_by_default_on_cpu():
    seen = []

    def recording_mse(model, batch):
        out = model(batch[0])
        seen.append(out.dtype)
        return nn.functional.mse_loss(out.float(), batch[1])

    fp32, bf16 = make_model(), make_model()
    h32 = train(fp32, batch_fn, recording_mse, quiet(steps=5, lr=0.01), device="cpu")
    h16 = train(bf16, batch_fn, recording_mse, quiet(steps=5, lr=0.01, precision="bf16"), device="cpu")
    assert seen == [torch.float32] * 5 + [torch.bfloat16] * 5
    assert all(p.dtype == torch.float32 for p in bf16.parameters())  # master weights stay fp32
    torch.testing.assert_close(torch.tensor(h16.loss), torch.tensor(h32.loss), rtol=0.05, atol=0.02)


def test_fused_adamw_and_compile_agree_with_the_default_path():
    config = dict(steps=4, lr=0.01)
    plain, fused, compiled = make_model(), make_model(), make_model()
    train(plain, batch_fn, mse, quiet(**config), device="cpu")
    train(fused, batch_fn, mse, quiet(fused=True, **config), device="cpu")
    train(compiled, batch_fn, mse, quiet(compile=True, compile_backend="aot_eager", **config), device="cpu")
    for a, b, c in zip(plain.parameters(), fused.parameters(), compiled.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)


def test_cpu_threads_are_set_for_the_run_and_restored():
    seen = []

    def counting_mse(model, batch):
        seen.append(torch.get_num_threads())
        return mse(model, batch)

    before = torch.get_num_threads()
    train(make_model(), batch_fn, counting_mse, quiet(steps=2, num_threads=1), device="cpu")
    assert seen == [1, 1] and torch.get_num_threads() == before


def test_bad_configs_raise():
    for kwargs, name in (
        (dict(steps=0), "steps"),
        (dict(steps=1, grad_accum=0), "grad_accum"),
        (dict(steps=1, schedule="cosine"), "schedule"),
        (dict(steps=1, precision="fp16"), "precision"),
        (dict(steps=1, num_threads=0), "num_threads"),
        (dict(steps=1, batch_size=0), "batch_size"),
    ):
        with pytest.raises(FieldError, match=f"^{name}: expected"):
            TrainConfig(**kwargs)
    with pytest.raises(FieldError, match=r"^checkpoint_every: expected a value >= 0, got -1$"):
        train(make_model(), batch_fn, mse, quiet(steps=1), device="cpu", checkpoint_every=-1)


def test_a_warm_up_fraction_rounds_as_python_does():
    assert [warmup_from_fraction(steps, 0.1) for steps in (2, 15, 75, 150, 300)] == [0, 2, 8, 15, 30]


def test_history_round_trips_through_a_plain_dict():
    history = History([1.0, 0.5], [0.1, 0.2], [(2, {"acc": 0.5})])
    from dataclasses import asdict

    assert History.from_dict(asdict(history)) == history


def test_a_saved_run_loads_into_a_fresh_model_with_its_tied_weights_and_history(tmp_path):
    """What the cached training runs of 01 and 02 store: a Transformer whose output projection is its embedding
    (two names, one tensor, which safetensors refuses to write as one), and the run's History."""
    from lecture_lib.models.transformer import Transformer, TransformerConfig

    small = TransformerConfig(
        vocab_size=12, d_model=8, num_attention_heads=2, encoder_layers=1, decoder_layers=1, ffn_dim=16
    )
    torch.manual_seed(0)
    model, fresh = Transformer(small), Transformer(small)
    history = History([2.5, 2.0], [1e-3, 1e-3], [(2, {"exact_match": 0.25})])
    save_trained(tmp_path / "run", model, history)
    state, loaded = load_trained(tmp_path / "run")
    fresh.load_state_dict(state)
    assert loaded == history
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert not any(path.suffix in (".pt", ".bin", ".pkl") for path in (tmp_path / "run").iterdir())  # no pickle


DDP_SCRIPT = """
import sys, torch
import torch.distributed as dist
sys.path.insert(0, {tests!r})
from test_train import batch_fn, make_model, mse
from lecture_lib.train import TrainConfig, train

model = make_model()
history = train(model, batch_fn, mse, TrainConfig(steps=4, lr=0.05, grad_accum={accum}), device="cpu",
                progress=False, checkpoint_dir={ckpt!r})
rank = dist.get_rank()
torch.save({{"params": [p.detach() for p in model.parameters()], "loss": history.loss}}, {out!r} + f".{{rank}}")
dist.destroy_process_group()
"""


def test_distributed_data_parallel_on_two_gloo_processes_equals_one_process(tmp_path):
    script = tmp_path / "ddp_run.py"
    script.write_text(
        textwrap.dedent(
            DDP_SCRIPT.format(
                tests=str(ROOT / "tests"), accum=1, ckpt=str(tmp_path / "ckpt"), out=str(tmp_path / "out")
            )
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rank0, rank1 = (torch.load(tmp_path / f"out.{r}", weights_only=True) for r in (0, 1))

    # One process with grad_accum = 2 reads the same micro-batches (0, 1), (2, 3), ... and averages them.
    single = make_model()
    history = train(single, batch_fn, mse, quiet(steps=4, lr=0.05, grad_accum=2), device="cpu")
    for ours, other, ref in zip(rank0["params"], rank1["params"], single.parameters()):
        assert torch.equal(ours, other)  # the workers hold the same weights
        torch.testing.assert_close(ours, ref.detach(), rtol=1e-5, atol=1e-6)
    assert rank0["loss"] == rank1["loss"] == pytest.approx(history.loss, rel=1e-5)
    assert load_checkpoint(tmp_path / "ckpt" / CHECKPOINT_NAME)["world_size"] == 2
    assert train_module.distributed_context() == (0, 1)  # this process never joined a group
