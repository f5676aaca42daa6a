"""Cheap fine-tuning: adapt a pretrained BERT to a task while training a small fraction of its weights.

Four ways, from the fewest trained weights to the most (the head is always trained):

- **frozen encoder**: only the task head learns; BERT is a fixed feature extractor;
- **prompt tuning** (Lester et al. 2021): k learned vectors are put in front of the input's word
  embeddings (after [CLS]); the model stays frozen;
- **BitFit** (Ben Zaken et al. 2022): only the bias terms b of every Wx + b (and of the LayerNorms) learn;
- **adapters** (Houlsby et al. 2019): a small bottleneck MLP with a skip connection,
  a(h) = h + W_up GELU(W_down h), after the attention output projection and after the feed-forward
  output projection of every layer (before the residual sum and LayerNorm); the adapters and the
  LayerNorms learn.

Each function prepares a head model in place (``requires_grad``) and returns it; AdamW then updates
only what is trainable (:func:`lecture_lib.train.parameter_groups` keeps only those).

Taught in: 05_bert_finetuning ("Cheap fine-tuning").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.heads import (
    BertForQuestionAnswering,
    BertForTokenClassification,
)
from lecture_lib.runtime import generator

METHODS = ("frozen", "prompt", "bitfit", "adapters", "full")


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) weights, each shared tensor counted once.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def _train_only(model: nn.Module, keep: callable) -> nn.Module:
    """Freeze the encoder (``bert.*``) except the parameters ``keep(name)`` selects; the head stays trainable."""
    for name, p in model.named_parameters():
        p.requires_grad = not name.startswith("bert.") or keep(name)
    return model


def freeze_encoder(model: nn.Module) -> nn.Module:
    """Train the task head only.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """
    return _train_only(model, lambda name: False)


def bitfit(model: nn.Module) -> nn.Module:
    """Train the head and every bias of the encoder (linear layers and LayerNorms); freeze the rest.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """
    return _train_only(model, lambda name: name.endswith(".bias"))


class Adapter(nn.Module):
    """a(h) = h + W_up GELU(W_down h), W_down (m, H), W_up (H, m): a bottleneck of m units.

    W_up starts at zero, so a freshly added adapter is the identity and the model is unchanged.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """

    def __init__(self, hidden_size: int, bottleneck: int) -> None:
        super().__init__()
        self.down = nn.Linear(hidden_size, bottleneck)
        self.up = nn.Linear(bottleneck, hidden_size)
        nn.init.normal_(self.down.weight, std=0.02)
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.up(nn.functional.gelu(self.down(h)))


class AdaptedLinear(nn.Module):
    """A projection followed by an adapter: x -> a(W x + b).

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """

    def __init__(self, linear: nn.Linear, bottleneck: int) -> None:
        super().__init__()
        self.linear = linear
        self.adapter = Adapter(linear.out_features, bottleneck)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.adapter(self.linear(x))


ADAPTER_POSITIONS = ("attention", "feed-forward")


def add_adapters(model: nn.Module, bottleneck: int = 8, positions: tuple[str, ...] = ADAPTER_POSITIONS) -> nn.Module:
    """Insert Houlsby adapters in every layer of ``model.base_model``; train adapters, LayerNorms and head.

    ``positions`` says where, among :data:`ADAPTER_POSITIONS`: after the attention output projection, after
    the feed-forward output projection, or both (Houlsby's). Exercise 4 of chapter 05: ``("feed-forward",)``
    is Pfeiffer et al.'s (2021) one adapter per layer.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """
    if not positions or not set(positions) <= set(ADAPTER_POSITIONS):
        raise ValueError(f"expected positions among {ADAPTER_POSITIONS}, got {positions}")
    for layer in model.base_model.encoder.layer:
        if "attention" in positions:
            layer.attention.output.dense = AdaptedLinear(layer.attention.output.dense, bottleneck)
        if "feed-forward" in positions:
            layer.output.dense = AdaptedLinear(layer.output.dense, bottleneck)
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    model.to(device=device, dtype=dtype)
    return _train_only(model, lambda name: ".adapter." in name or "LayerNorm" in name)


class PromptTuning(nn.Module):
    """A frozen head model with ``num_prompts`` learned input vectors after [CLS] (Lester et al. 2021).

    The batch is rewritten before the model sees it: k placeholder tokens are inserted after [CLS]
    (attended to, segment 0), and a hook on the word-embedding layer replaces their embeddings with
    the learned prompt P (k, H). The real tokens keep their position ids, so the frozen model sees
    them where pretraining put them. Token labels get -100 on the prompts and span positions move by
    k; token-level outputs come back without the prompt positions.

    Taught in: 05_bert_finetuning ("Cheap fine-tuning").
    """

    def __init__(self, model: nn.Module, num_prompts: int = 8, seed: int = 0) -> None:
        super().__init__()
        if num_prompts < 1:
            raise ValueError(f"expected num_prompts >= 1, got {num_prompts}")
        self.model = freeze_encoder(model)
        self.num_prompts = num_prompts
        embeddings = model.base_model.embeddings.word_embeddings.weight
        rows = torch.randint(embeddings.shape[0], (num_prompts,), generator=generator("prompt init", seed))
        self.prompt = nn.Parameter(embeddings.detach()[rows].clone())  # (k, H): start from real word vectors

    def _insert(self, x: torch.Tensor, value: int | float) -> torch.Tensor:
        """(B, T, ...) -> (B, 1 + k + T - 1, ...): k copies of ``value`` after position 0."""
        filler = torch.full((x.shape[0], self.num_prompts, *x.shape[2:]), value, dtype=x.dtype, device=x.device)
        return torch.cat([x[:, :1], filler, x[:, 1:]], dim=1)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        **labels: torch.Tensor,
    ):
        k, (batch, length) = self.num_prompts, input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(length, device=input_ids.device).expand(batch, length)
        inputs = dict(
            input_ids=self._insert(input_ids, 0),
            attention_mask=self._insert(attention_mask, 1),
            token_type_ids=self._insert(token_type_ids, 0),
            position_ids=self._insert(positions, 0),  # prompts share [CLS]'s position; real tokens keep theirs
        )
        if "labels" in labels and isinstance(self.model, BertForTokenClassification):
            labels["labels"] = self._insert(labels["labels"], IGNORE_INDEX)
        for name in ("start_positions", "end_positions"):
            if name in labels:
                labels[name] = labels[name] + k

        def put_prompt(module: nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor:
            return torch.cat([out[:, :1], self.prompt.expand(out.shape[0], k, -1).to(out.dtype), out[:, 1 + k :]], 1)

        hook = self.model.base_model.embeddings.word_embeddings.register_forward_hook(put_prompt)
        try:
            out = self.model(**inputs, **labels)
        finally:
            hook.remove()
        if isinstance(self.model, BertForTokenClassification):
            out.logits = torch.cat([out.logits[:, :1], out.logits[:, 1 + k :]], 1)
        elif isinstance(self.model, BertForQuestionAnswering):
            out.start_logits = torch.cat([out.start_logits[:, :1], out.start_logits[:, 1 + k :]], 1)
            out.end_logits = torch.cat([out.end_logits[:, :1], out.end_logits[:, 1 + k :]], 1)
        return out
