"""Transformer benchmark: training throughput of our encoder-decoder against ``torch.nn.Transformer``.

``python -m lecture_lib.bench transformer [--repeats N]`` times one training step (forward, backward,
AdamW update) of both models with identical weights, sizes and batches, interleaved in one run, and
prints tokens per second and their ratio (ours / PyTorch; target >= 1.0 on CPU).

Taught in: 02_transformer ("Checking against PyTorch").
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from lecture_lib.attention import causal_mask
from lecture_lib.chapters.ch02_transformer import reversal_experiment, seq2seq_loss
from lecture_lib.config import FlagParser, Range, add_ranged
from lecture_lib.data.seq2seq_tasks import ReversalTask
from lecture_lib.data.toy import Seq2SeqBatch
from lecture_lib.measure import interleaved_medians
from lecture_lib.models.transformer import (
    Seq2SeqOutput,
    Transformer,
    TransformerConfig,
)
from lecture_lib.profile import pick
from lecture_lib.runtime import default_device
from lecture_lib.train import to_device


class TorchSeq2Seq(nn.Module):
    """``torch.nn.Transformer`` between the same embeddings and output projection as ours, masked PyTorch's way
    (boolean masks where True means *may not attend*).

    Taught in: 02_transformer ("Checking against PyTorch").
    """

    def __init__(self, ours: Transformer, stack: nn.Transformer) -> None:
        super().__init__()
        self.config, self.stack = ours.config, stack
        self.embed_tokens = nn.Embedding.from_pretrained(ours.embed_tokens.weight.detach().clone(), freeze=False)
        self.register_buffer("positions", ours.encoder_positions(ours.config.max_position_embeddings).clone())
        self.embed_scale = ours.embed_scale
        self.dropout = nn.Dropout(ours.config.dropout)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed_tokens(ids) * self.embed_scale + self.positions[: ids.shape[1]])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> Seq2SeqOutput:
        pad = self.config.pad_token_id
        causal = ~causal_mask(tgt_in.shape[1], device=src.device)
        out = self.stack(
            self.embed(src),
            self.embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt_in == pad,
            memory_key_padding_mask=src == pad,
            tgt_is_causal=True,
        )
        return Seq2SeqOutput(out @ self.embed_tokens.weight.T)  # (B, T, V), tied output projection


def models_with_equal_weights(config: TransformerConfig, device: torch.device | str) -> tuple[Transformer, nn.Module]:
    """Our Transformer and the PyTorch reference, post-LN, with the same weights.

    Taught in: 02_transformer ("Checking against PyTorch").
    """
    stack = nn.Transformer(
        config.d_model,
        config.num_attention_heads,
        config.encoder_layers,
        config.decoder_layers,
        config.ffn_dim,
        config.dropout,
        batch_first=True,
    )
    ours = Transformer.from_torch(stack, config.vocab_size, max_position_embeddings=config.max_position_embeddings)
    return ours.to(device), TorchSeq2Seq(ours, stack).to(device)


def tokens_per_second(
    config: TransformerConfig, batch: Seq2SeqBatch, repeats: int = 20, device: torch.device | str = "cpu", seed: int = 0
) -> dict[str, float]:
    """Training tokens (real source + target tokens) per second of one AdamW step, ours and PyTorch's.

    The two models' steps alternate so that a slow moment of a shared machine hits both.

    Taught in: 02_transformer ("Checking against PyTorch").
    """
    torch.manual_seed(seed)
    ours, theirs = models_with_equal_weights(config, device)
    batch = to_device(batch, torch.device(device))
    tokens = int((batch.src != config.pad_token_id).sum() + (batch.tgt_out != config.pad_token_id).sum())

    def step(model: nn.Module, optimizer: torch.optim.Optimizer):
        def run():
            seq2seq_loss(model, batch, label_smoothing=0.1).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    runs = {
        name: step(model.train(), torch.optim.AdamW(model.parameters(), lr=1e-4))
        for name, model in (("ours", ours), ("torch", theirs))
    }
    seconds = interleaved_medians(runs, repeats=repeats, warmup=2, device=device)
    return {name: tokens / t for name, t in seconds.items()}


def settings() -> list[tuple[str, TransformerConfig, Seq2SeqBatch]]:
    """The sizes compared: the chapter's reversal model, and the paper's widths at a few layers.

    Taught in: 02_transformer ("Checking against PyTorch").
    """
    chapter = reversal_experiment()
    chapter_batch = chapter.task.train_batch(chapter.task.batch_size, step=0)
    wide_task = ReversalTask(num_symbols=1000, min_len=16, max_len=pick(quick=32, full=64))
    wide = replace(
        TransformerConfig(vocab_size=wide_task.vocab_size, max_position_embeddings=wide_task.max_len + 2),
        encoder_layers=pick(quick=2, full=6),
        decoder_layers=pick(quick=2, full=6),
    )
    wide_batch = wide_task.train_batch(pick(quick=16, full=64), step=0)
    return [("chapter model", chapter.model, chapter_batch), ("paper widths", wide, wide_batch)]


def main(argv: list[str]) -> None:
    parser = FlagParser(prog="python -m lecture_lib.bench transformer")
    add_ranged(parser, "--repeats", int, Range(1), "timed repeats", default=15)
    args = parser.parse_args(argv)
    device = default_device()
    print(f"device: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print("training step (forward + backward + AdamW), median over interleaved repeats:")
    for name, config, batch in settings():
        tps = tokens_per_second(config, batch, repeats=args.repeats, device=device)
        print(
            f"  {name}: d_model {config.d_model}, {config.encoder_layers}+{config.decoder_layers} layers, "
            f"{config.num_attention_heads} heads, ffn {config.ffn_dim}, batch {tuple(batch.src.shape)}"
        )
        print(f"    ours  {tps['ours']:>10.0f} tokens/s")
        print(f"    torch {tps['torch']:>10.0f} tokens/s")
        print(f"    ratio ours / torch = {tps['ours'] / tps['torch']:.3f}  (target >= 1.0)")
