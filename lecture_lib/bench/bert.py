"""``python -m lecture_lib.bench bert``: training throughput of our BertForPreTraining against transformers'.

Both models hold the same weights, read the same masked batch and take full AdamW steps; transformers
runs with its default attention (PyTorch's fused SDPA) and computes the MLM logits at every position,
ours only at the ~15% selected ones (same loss, same gradients). A third run, ours with the MLM head
on every position, shows how much of the difference that one technique makes. The step times are
interleaved and their medians compared, so machine noise hits all alike.

Every run uses fused AdamW (``--no-fused-optimizer`` for PyTorch's default); on CUDA (``--device cuda``),
bf16 autocast. ``--compile`` compiles both models, ``--unpad`` adds ours on packed tokens
(:mod:`lecture_lib.models.unpadding`), and ``--table`` replaces the rows with the techniques one at a time:
ours with none of them (bf16 on CUDA all the same), then adding the MLM head on masked positions, the fused
attention kernel, unpadding, ``torch.compile`` and the fused optimizer, beside transformers eager and compiled.
Our masked positions and packing are found before the timed steps, on the host, as a data loader finds them
(:func:`found_before_the_step`): the step reads no value of the batch. Throughput counts the real
(unpadded) tokens. Model FLOP utilisation, on CUDA or with ``--peak-tflops``: the FLOPs of the real tokens,
Σ_b T_b · (6 N + 12 L T_b H) per step with the dense MLM head in N as MFU is usually counted
(:func:`lecture_lib.models.bert.training_flops_per_token`), over the GPU's dense bf16 peak (H100 SXM and
H200: 989 TFLOP/s).

    python -m lecture_lib.bench bert                       # CPU, a BERT-mini sized model
    python -m lecture_lib.bench bert --device cuda --size base --batch-size 128 --table
    python -m lecture_lib.bench bert --device cuda --size base --batch-size 128 --table --min-len 32

Taught in: 04_bert_pretraining ("How fast").
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from lecture_lib.config import FlagParser, Range, add_ranged, flag_type
from lecture_lib.measure import interleaved_medians
from lecture_lib.models.bert import (
    BertConfig,
    BertForPreTraining,
    training_flops_per_token,
)
from lecture_lib.models.masked_lm import LabelledPositions
from lecture_lib.models.unpadding import Packing
from lecture_lib.objectives.masking import mask_tokens
from lecture_lib.runtime import existing_device, generator

SIZES = {
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}
# dense bf16 FLOP/s from the vendors' data sheets; the first name contained in the device's name is taken
PEAK_BF16_FLOPS = {
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "H200": 989e12,
    "A100": 312e12,
    "L4": 121e12,
    "A10": 125e12,
}


def random_pretraining_batch(
    config: BertConfig, batch_size: int, seq_len: int, device: torch.device, min_len: int | None = None
) -> dict[str, torch.Tensor]:
    """Random pairs masked with the 80/10/10 rule: a quarter of them padded to 3/4 length, or with ``min_len``
    every length drawn uniformly from [min_len, seq_len] (the padding unpadding saves)."""
    g = generator("bench pretraining batch")
    ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=g)
    attention_mask = torch.ones_like(ids)
    if min_len is None:
        attention_mask[: batch_size // 4, 3 * seq_len // 4 :] = 0
    else:
        lengths = torch.randint(min_len, seq_len + 1, (batch_size, 1), generator=g)
        attention_mask = (torch.arange(seq_len)[None, :] < lengths).long()
    ids[attention_mask == 0] = 0
    token_type_ids = (torch.arange(seq_len) >= seq_len // 2).long().expand(batch_size, -1).clone()
    masked, labels = mask_tokens(
        ids, mask_token_id=4, vocab_size=config.vocab_size, special_tokens_mask=attention_mask == 0, generator=g
    )
    batch = dict(
        input_ids=masked,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        labels=labels,
        next_sentence_label=torch.randint(2, (batch_size,), generator=g),
    )
    return {k: v.to(device) for k, v in batch.items()}


@dataclass(frozen=True)
class Setup:
    """One row of the benchmark: whose model, and which techniques it trains with."""

    name: str
    transformers: bool = False
    masked_only: bool = True  # the MLM head on the selected positions only (ours)
    unpad: bool = False  # the encoder on the real tokens only (ours)
    fused_attention: bool = True  # PyTorch's fused SDPA kernel; False forces its written-out math kernel
    compile: bool = False
    fused_optimizer: bool = True


def setups(args: argparse.Namespace) -> list[Setup]:
    """The rows: ours against transformers' best configuration, or with ``--table`` the techniques one at a time."""
    fused = args.fused_optimizer
    if not args.table:
        rows = [
            Setup("ours", compile=args.compile, fused_optimizer=fused),
            Setup("ours, dense head", masked_only=False, compile=args.compile, fused_optimizer=fused),
        ]
        if args.unpad:
            rows.append(Setup("ours, unpadded", unpad=True, compile=args.compile, fused_optimizer=fused))
        return rows + [Setup("transformers", transformers=True, compile=args.compile, fused_optimizer=fused)]
    plain = Setup("ours, none of them", masked_only=False, fused_attention=False, fused_optimizer=False)
    # fused attention before unpadding: on CUDA the unpadded attention is a fused (flash) kernel whatever the row
    steps = [
        ("+ MLM head on masked positions", "masked_only"),
        ("+ fused attention", "fused_attention"),
        ("+ unpadding", "unpad"),
        ("+ torch.compile", "compile"),
        ("+ fused AdamW", "fused_optimizer"),
    ]
    rows = [plain]
    for name, field in steps:
        rows.append(Setup(**{**rows[-1].__dict__, "name": name, field: True}))
    return rows + [
        Setup("transformers", transformers=True),
        Setup("transformers, compiled", transformers=True, compile=True),
    ]


def found_before_the_step(batch: dict[str, torch.Tensor], setup: Setup) -> dict[str, object]:
    """Our model's options for ``setup``: the labelled positions and the packing, found on the host as a data
    loader would, so that the timed step reads no value of the batch (no wait for the GPU, no graph break)."""
    host = {k: batch[k].cpu() for k in ("labels", "attention_mask")}
    device = batch["labels"].device
    options: dict[str, object] = {}
    if setup.masked_only:
        options["masked_only"] = LabelledPositions.of(host["labels"], host["attention_mask"]).to(device)
    if setup.unpad:
        options["unpad"] = Packing.of(host["attention_mask"]).to(device)
    return options


def peak_flops(args: argparse.Namespace, device: torch.device) -> float | None:
    """The GPU's dense bf16 peak in FLOP/s: ``--peak-tflops``, else looked up by the CUDA device's name."""
    if args.peak_tflops:
        return args.peak_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in name), None)


def parse_flags(argv: list[str]) -> argparse.Namespace:
    """The flags, each checked as it is read (sizes, steps, an existing device), and ``--min-len`` against
    ``--seq-len``: one line naming the flag, exit status 2, before any model or batch is built."""
    parser = FlagParser(prog="python -m lecture_lib.bench bert")
    parser.add_argument(
        "--device",
        type=flag_type(existing_device),
        default="cpu",
        help="cpu, cuda, cuda:1, mps: one this machine has; default: cpu",
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    add_ranged(parser, "--batch-size", int, Range(1), "sequences per batch", default=16)
    positions = BertConfig.max_position_embeddings
    add_ranged(parser, "--seq-len", int, Range(8, positions), "positions per sequence", default=128)
    add_ranged(
        parser,
        "--min-len",
        int,
        Range(1),
        "lengths uniform in [MIN_LEN, seq-len] (default: a quarter of the sequences padded to 3/4 length)",
    )
    add_ranged(parser, "--steps", int, Range(1), "timed steps per model (after 2 warm-up steps)", default=6)
    parser.add_argument("--compile", action="store_true", help="torch.compile both models")
    parser.add_argument("--compile-backend", default="inductor", help="e.g. aot_eager for a quick CPU check")
    parser.add_argument("--unpad", action="store_true", help="add a row: ours with unpadding")
    parser.add_argument("--table", action="store_true", help="the techniques one at a time, then transformers")
    parser.add_argument(
        "--no-fused-optimizer",
        dest="fused_optimizer",
        action="store_false",
        help="PyTorch's default AdamW instead of the fused one",
    )
    add_ranged(parser, "--peak-tflops", float, Range(0, open=True), "peak dense bf16 TFLOP/s of the GPU, for MFU")
    add_ranged(parser, "--threads", int, Range(1), "CPU threads (default: PyTorch's choice)")
    args = parser.parse_args(argv)
    if args.min_len is not None and args.min_len > args.seq_len:
        parser.error(f"--min-len: expected a value <= --seq-len {args.seq_len}, got {args.min_len}")
    return args


def main(argv: list[str]) -> None:
    args = parse_flags(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    config = BertConfig(**SIZES[args.size], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    reference = BertForPreTraining(config)
    batch = random_pretraining_batch(config, args.batch_size, args.seq_len, device, args.min_len)

    def build(setup: Setup) -> tuple[torch.nn.Module, Callable[[], torch.Tensor]]:
        """The model with the reference weights and the function that returns its loss on the batch."""
        if setup.transformers:  # SDPA attention, the MLM head on every position
            model = reference.to_hf(attn_implementation="sdpa").to(device)
            options = {}
        else:
            model = BertForPreTraining(config).to(device)
            model.load_state_dict(reference.state_dict())
            options = found_before_the_step(batch, setup)
        forward = torch.compile(model, backend=args.compile_backend) if setup.compile else model
        return model, lambda: forward(**batch, **options).loss

    def step(setup: Setup) -> Callable[[], None]:
        model, loss_fn = build(setup)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=setup.fused_optimizer)
        kernel = contextlib.nullcontext if setup.fused_attention else lambda: sdpa_kernel(SDPBackend.MATH)

        def run() -> None:
            with torch.autocast(device.type, dtype=torch.bfloat16) if cuda else contextlib.nullcontext(), kernel():
                loss = loss_fn()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    rows = setups(args)
    seconds = interleaved_medians({s.name: step(s) for s in rows}, repeats=args.steps, warmup=2, device=device)
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    tokens = sum(lengths)
    flops = sum(n * training_flops_per_token(config, n) for n in lengths)  # dense head, as MFU is counted
    rate = {name: tokens / t for name, t in seconds.items()}
    best = max((s.name for s in rows if s.transformers), key=rate.get)
    peak = peak_flops(args, device)
    print(
        f"BertForPreTraining, {args.size} ({config.num_hidden_layers} layers, H={config.hidden_size}, "
        f"V={config.vocab_size}), batch {args.batch_size} x {args.seq_len} ({tokens} real tokens), "
        f"{device.type}{', bf16 autocast' if cuda else ', fp32'}"
        f"{f', compile backend {args.compile_backend}' if any(s.compile for s in rows) else ''}"
    )
    print(
        f"  threads: {torch.get_num_threads()}; median of {args.steps} steps; MFU over "
        + (f"{peak / 1e12:.0f} TFLOP/s dense bf16" if peak else "an unknown peak (pass --peak-tflops)")
    )
    print(f"  {'':>32} {'tokens/s':>10} {'/ ' + best:>26} {'MFU':>6}")
    for s in rows:
        mfu = f"{rate[s.name] * flops / tokens / peak:6.1%}" if peak else f"{'-':>6}"
        print(f"  {s.name:>32} {rate[s.name]:10.0f} {rate[s.name] / rate[best]:26.2f} {mfu}")
