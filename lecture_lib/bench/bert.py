"""``python -m lecture_lib.bench bert``: training throughput of our BertForPreTraining against transformers'.

Both models hold the same weights, read the same masked batch and take full AdamW steps; transformers
runs with its default attention (PyTorch's fused SDPA) and computes the MLM logits at every position,
ours only at the ~15% selected ones (same loss, same gradients). A third run, ours with the MLM head
on every position, shows how much of the difference that one technique makes. The step times are
interleaved and their medians compared, so machine noise hits all alike.

On CUDA (``--device cuda``) the run uses bf16 autocast, fused AdamW for both, optionally
``torch.compile`` for ours, and prints model FLOP utilisation: 6 N + 12 L T H FLOPs per token
(:func:`lecture_lib.models.bert.training_flops_per_token`, dense head, as MFU is usually counted) over the
GPU's peak bf16 rate.

    python -m lecture_lib.bench bert                       # CPU, a BERT-mini sized model
    python -m lecture_lib.bench bert --device cuda --size base --batch-size 128 --compile

Taught in: 04_bert_pretraining ("How fast").
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Callable

import torch

from lecture_lib.measure import interleaved_medians
from lecture_lib.models.bert import (
    BertConfig,
    BertForPreTraining,
    training_flops_per_token,
)
from lecture_lib.objectives.masking import mask_tokens
from lecture_lib.runtime import generator

SIZES = {
    "mini": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12, "L4": 121e12, "A10": 125e12}  # dense


def random_pretraining_batch(config: BertConfig, batch_size: int, seq_len: int,
                             device: torch.device) -> dict[str, torch.Tensor]:
    """Random pairs, a quarter of them padded to 3/4 length, masked with the 80/10/10 rule."""
    g = generator("bench pretraining batch")
    ids = torch.randint(5, config.vocab_size, (batch_size, seq_len), generator=g)
    attention_mask = torch.ones_like(ids)
    attention_mask[: batch_size // 4, 3 * seq_len // 4:] = 0
    ids[attention_mask == 0] = 0
    token_type_ids = (torch.arange(seq_len) >= seq_len // 2).long().expand(batch_size, -1).clone()
    masked, labels = mask_tokens(ids, mask_token_id=4, vocab_size=config.vocab_size,
                                 special_tokens_mask=attention_mask == 0, generator=g)
    batch = dict(input_ids=masked, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels,
                 next_sentence_label=torch.randint(2, (batch_size,), generator=g))
    return {k: v.to(device) for k, v in batch.items()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m lecture_lib.bench bert")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per model (after 2 warm-up steps)")
    parser.add_argument("--compile", action="store_true", help="torch.compile our model")
    parser.add_argument("--peak-tflops", type=float, help="peak bf16 TFLOP/s of the GPU, for MFU")
    parser.add_argument("--threads", type=int, help="CPU threads (default: PyTorch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.manual_seed(0)
    config = BertConfig(**SIZES[args.size], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ours = BertForPreTraining(config).to(device)
    theirs = ours.to_hf(attn_implementation="sdpa").to(device)
    batch = random_pretraining_batch(config, args.batch_size, args.seq_len, device)
    ours_forward = torch.compile(ours) if args.compile else ours
    dense = BertForPreTraining(config).to(device)  # ours again, MLM head on every position: the same work as theirs
    dense.load_state_dict(ours.state_dict())
    dense_forward = torch.compile(dense) if args.compile else dense
    runs = {
        "ours": (ours, lambda: ours_forward(**batch, masked_only=True).loss),
        "ours, dense head": (dense, lambda: dense_forward(**batch).loss),
        "transformers": (theirs, lambda: theirs(**batch).loss),
    }
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
                  for name, (model, _) in runs.items()}

    def step(name: str) -> Callable[[], None]:
        model, loss_fn = runs[name]

        def run() -> None:
            with torch.autocast(device.type, dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
                loss = loss_fn()
            loss.backward()
            optimizers[name].step()
            optimizers[name].zero_grad(set_to_none=True)
        return run

    seconds = interleaved_medians({name: step(name) for name in runs}, repeats=args.steps, warmup=2, device=device)
    tokens = args.batch_size * args.seq_len
    rate = {name: tokens / t for name, t in seconds.items()}
    print(f"BertForPreTraining, {args.size} ({config.num_hidden_layers} layers, H={config.hidden_size}, "
          f"V={config.vocab_size}), batch {args.batch_size} x {args.seq_len} tokens, {device.type}"
          f"{', bf16 autocast' if cuda else ', fp32'}{', compiled' if args.compile else ''}")
    print(f"  threads: {torch.get_num_threads()}")
    for name in runs:
        print(f"  {name:>16}: {rate[name]:10.0f} training tokens/s (median of {args.steps} steps)")
    print(f"  ratio ours / transformers: {rate['ours'] / rate['transformers']:.2f} "
          f"(with the dense head: {rate['ours, dense head'] / rate['transformers']:.2f})")
    if cuda:
        peak = args.peak_tflops * 1e12 if args.peak_tflops else next(
            (v for k, v in PEAK_BF16_FLOPS.items() if k in torch.cuda.get_device_name(device)), None)
        flops = training_flops_per_token(config, args.seq_len)
        for name in runs:
            mfu = f"{rate[name] * flops / peak:.1%}" if peak else "unknown peak: pass --peak-tflops"
            print(f"  MFU {name}: {mfu}")
