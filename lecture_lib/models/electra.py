"""ELECTRA (Clark et al. 2020): two BERT encoders trained together, a small generator and a discriminator.

What differs from BERT, and nothing else:

1. **Embeddings of their own width**: the tables are V x E (``embedding_size``), projected to H by
   ``embeddings_project`` *only when E != H* (ELECTRA-Small: E = 128, H = 256; Base and Large: E = H and no
   projection). :class:`~lecture_lib.models.bert.BertEmbeddings` of width E, as ALBERT's.
2. **No pooler.** The encoder layers are BERT's (``encoder.layer.{i}``, post-LayerNorm).
3. **Two heads.** The discriminator (:class:`ElectraForPreTraining`) reads every token:
   ``D(x, t) = sigmoid(w · act(W h_t))``, one logit per token, positive = "replaced". The generator
   (:class:`ElectraForMaskedLM`) is a masked LM whose head maps H -> E, then GELU (``transformers``
   hard-codes the exact ``"gelu"`` here, whatever ``hidden_act`` says), LayerNorm, and the tied V x E table.
4. **Shared embeddings** (:class:`ElectraPretrainingModel`): the generator uses the discriminator's
   embedding module itself, so both networks update one set of tables; the generator's output matrix is
   that same token table.

The discriminator loss is binary cross-entropy over the tokens whose ``attention_mask`` is 1 (padding
ignored), averaged over them, as ``transformers``' ``ElectraForPreTraining`` computes it.

Taught in: 08_electra ("Generator and discriminator", "Sharing embeddings").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.config import Range, check_divisible, check_fields, check_indices, same_rule_as
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.activations import activation
from lecture_lib.models.bert import (
    BertConfig,
    BertEmbeddings,
    BertEncoder,
    BertModelOutput,
    check_inputs,
    keys_mask,
    run_layers,
)
from lecture_lib.models.hf import Family, HFConfig, PreTrainedModule
from lecture_lib.models.masked_lm import check_mlm_labels, mlm_logits_and_loss
from lecture_lib.objectives.replaced_tokens import DISCRIMINATOR_WEIGHT, electra_loss, replace_tokens, sample_tokens

# ---------------------------------------------------------------- configuration


@dataclass
class ElectraConfig(HFConfig):
    """The sizes of one ELECTRA network with ``transformers``' field names; the defaults are ELECTRA-Small's
    discriminator (E = 128, H = 256, 12 layers of 4 heads), as ``transformers``' own defaults.

    Taught in: 08_electra ("Generator and discriminator").
    """

    vocab_size: int = field(default=30522, metadata=same_rule_as(BertConfig, "vocab_size"))
    embedding_size: int = field(default=128, metadata=Range(1).rule())
    hidden_size: int = field(default=256, metadata=same_rule_as(BertConfig, "hidden_size"))
    num_hidden_layers: int = field(default=12, metadata=same_rule_as(BertConfig, "num_hidden_layers"))
    num_attention_heads: int = field(default=4, metadata=same_rule_as(BertConfig, "num_attention_heads"))
    intermediate_size: int = field(default=1024, metadata=same_rule_as(BertConfig, "intermediate_size"))
    hidden_act: str = field(default="gelu", metadata=same_rule_as(BertConfig, "hidden_act"))
    hidden_dropout_prob: float = field(default=0.1, metadata=same_rule_as(BertConfig, "hidden_dropout_prob"))
    attention_probs_dropout_prob: float = field(
        default=0.1, metadata=same_rule_as(BertConfig, "attention_probs_dropout_prob")
    )
    max_position_embeddings: int = field(default=512, metadata=same_rule_as(BertConfig, "max_position_embeddings"))
    type_vocab_size: int = field(default=2, metadata=same_rule_as(BertConfig, "type_vocab_size"))
    initializer_range: float = field(default=0.02, metadata=same_rule_as(BertConfig, "initializer_range"))
    layer_norm_eps: float = field(default=1e-12, metadata=same_rule_as(BertConfig, "layer_norm_eps"))
    pad_token_id: int = field(default=0, metadata=same_rule_as(BertConfig, "pad_token_id"))

    def __post_init__(self) -> None:
        check_fields(self)
        check_divisible(self, "hidden_size", "num_attention_heads")
        check_indices(self, "vocab_size", "pad_token_id")

    def generator(self, size: float = 0.25) -> "ElectraConfig":
        """The generator for this discriminator, as the authors' ``get_generator_config`` builds it: hidden
        round(size·H), the same depth and embedding size, intermediate 4 x hidden, max(1, hidden // 64) heads.

        >>> g = ElectraConfig().generator(0.25)
        >>> g.hidden_size, g.intermediate_size, g.num_attention_heads, g.embedding_size
        (64, 256, 1, 128)
        """
        if not 0 < size <= 1:
            raise ValueError(f"expected a generator size in (0, 1] of the discriminator's, got {size}")
        hidden = max(1, round(self.hidden_size * size))
        return replace(self, hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=max(1, hidden // 64))


ELECTRA = Family(
    model_type="electra",
    config_class=ElectraConfig,
    hf_config_class="ElectraConfig",
    dropped=("embeddings.position_ids", "embeddings.token_type_ids"),  # buffers, not weights
    unsupported={"position_embedding_type": "absolute", "is_decoder": False, "add_cross_attention": False},
)


@dataclass
class ElectraOutput:
    """``logits``: the discriminator's (B, T), positive = replaced; or the generator's (B, T, V), or (N, V) for
    the N labelled positions with ``masked_only=True``. ``loss`` when labels were given."""

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


# ---------------------------------------------------------------- the encoder


class ElectraPreTrainedModel(PreTrainedModule):
    """What every ELECTRA network shares: the family (names, checkpoints) and the encoder under ``electra``.

    Taught in: 08_electra ("Generator and discriminator").
    """

    family = ELECTRA
    base_model_prefix = "electra"


class ElectraModel(ElectraPreTrainedModel):
    """BERT's encoder without the pooler, on embeddings of width E (projected to H when E != H).

    >>> model = ElectraModel(ElectraConfig(vocab_size=100, embedding_size=8, hidden_size=32, num_hidden_layers=2,
    ...                                    num_attention_heads=4, intermediate_size=64)).eval()
    >>> tuple(model(torch.tensor([[2, 7, 9, 3]])).last_hidden_state.shape), model.embeddings_project is None
    ((1, 4, 32), False)

    Taught in: 08_electra ("Generator and discriminator").
    """

    hf_class = "ElectraModel"

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config, width=config.embedding_size)
        projected = config.embedding_size != config.hidden_size
        self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size) if projected else None
        self.encoder = BertEncoder(config)
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """As :class:`~lecture_lib.models.bert.BertModel`, with ``pooler_output=None``."""
        check_inputs(self.config, input_ids, token_type_ids)
        mask = keys_mask(attention_mask, input_ids)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, E)
        if self.embeddings_project is not None:
            x = self.embeddings_project(x)  # (B, T, H)
        return run_layers(
            self.encoder.layer, x, mask, output_attentions=output_attentions, output_hidden_states=output_hidden_states
        )


def discriminator_loss(
    logits: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean binary cross-entropy of "replaced" (label 1) against "original" (0) over the real tokens.

    Positions where ``attention_mask`` is 0 (padding) are left out of the sum *and* of the count, as
    ``transformers``' ``active_loss`` does; without a mask every position counts.

    >>> logits = torch.tensor([[0.0, 0.0, 5.0]])
    >>> round(discriminator_loss(logits, torch.tensor([[1, 0, 1]]), torch.tensor([[1, 1, 0]])).item(), 4)
    0.6931

    Taught in: 08_electra ("Replaced-token detection").
    """
    if labels.shape != logits.shape:
        raise ValueError(f"expected labels of shape {tuple(logits.shape)}, got {tuple(labels.shape)}")
    if attention_mask is None:
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    if attention_mask.shape != logits.shape:
        raise ValueError(f"expected attention_mask of shape {tuple(logits.shape)}, got {tuple(attention_mask.shape)}")
    active = attention_mask == 1
    return F.binary_cross_entropy_with_logits(logits[active], labels[active].to(logits.dtype))


# ---------------------------------------------------------------- the discriminator


class ElectraDiscriminatorPredictions(nn.Module):
    """One logit per token: w · act(W h_t) + b, with W: H -> H and w: H -> 1."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.act(self.dense(hidden))).squeeze(-1)  # (B, T)


class ElectraForPreTraining(ElectraPreTrainedModel):
    """The discriminator: for every token, the logit that it was replaced.

    ``labels`` (B, T): 1 = replaced, 0 = original; the loss is :func:`discriminator_loss`.

    Taught in: 08_electra ("Generator and discriminator", "Replaced-token detection").
    """

    hf_class = "ElectraForPreTraining"

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        self.discriminator_predictions.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ElectraOutput:
        out = self.electra(
            input_ids, attention_mask, token_type_ids, position_ids, output_attentions, output_hidden_states
        )
        logits = self.discriminator_predictions(out.last_hidden_state)  # (B, T)
        loss = discriminator_loss(logits, labels, attention_mask) if labels is not None else None
        return ElectraOutput(logits, loss, out.hidden_states, out.attentions)


# ---------------------------------------------------------------- the generator


class ElectraGeneratorPredictions(nn.Module):
    """LayerNorm(GELU(W h)) with W: H -> E; the exact GELU whatever ``hidden_act`` says (as ``transformers``)."""

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.act = activation("gelu")
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(hidden)))  # (..., E)


class ElectraForMaskedLM(ElectraPreTrainedModel):
    """The generator: a masked LM whose output matrix is its V x E token table (tied), with its own bias.

    ``labels`` (B, T) hold the original token at the masked positions and -100 elsewhere; the loss is
    their mean cross-entropy. ``masked_only=True`` runs the head on the labelled positions only (logits
    (N, V)): the same loss and gradients for less compute.

    Taught in: 08_electra ("Generator and discriminator").
    """

    hf_class = "ElectraForMaskedLM"

    def __init__(self, config: ElectraConfig) -> None:
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config)
        self.generator_predictions = ElectraGeneratorPredictions(config)
        self.generator_lm_head = nn.Linear(config.embedding_size, config.vocab_size)
        self.generator_predictions.apply(self._init_weights)
        nn.init.zeros_(self.generator_lm_head.bias)
        self.tie_output()

    def tie_output(self) -> None:
        """Make the output matrix the word-embedding table itself (again, after the embeddings were replaced)."""
        self.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight

    def tied_keys(self) -> set[str]:
        return {"generator_lm_head.weight"}

    def _lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.generator_lm_head(self.generator_predictions(hidden))  # (..., V)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        masked_only: bool = False,
    ) -> ElectraOutput:
        check_mlm_labels(input_ids, labels, masked_only)
        out = self.electra(
            input_ids, attention_mask, token_type_ids, position_ids, output_attentions, output_hidden_states
        )
        logits, loss = mlm_logits_and_loss(self._lm_logits, out.last_hidden_state, labels, masked_only)
        return ElectraOutput(logits, loss, out.hidden_states, out.attentions)


# ---------------------------------------------------------------- the two together


@dataclass
class ElectraPretrainingOutput:
    """One step of replaced-token detection: ``loss = mlm_loss + λ·discriminator_loss``, the generator's
    logits (N, V) at the N masked positions, the discriminator's (B, T), the corrupted input it read and
    its labels ``replaced`` (1 = replaced)."""

    loss: torch.Tensor
    mlm_loss: torch.Tensor
    discriminator_loss: torch.Tensor
    generator_logits: torch.Tensor
    logits: torch.Tensor
    corrupted_ids: torch.Tensor
    replaced: torch.Tensor


class ElectraPretrainingModel(nn.Module):
    """A generator and a discriminator that share one embedding module (token, position and segment
    tables and their LayerNorm, as the authors' code shares the whole embedding scope).

    ``generator.electra.embeddings is discriminator.electra.embeddings``, so each table is one Parameter
    that both losses update, and the generator's output matrix is that token table too. Both networks
    need the same ``embedding_size`` (the paper: "embeddings the size of the discriminator's hidden
    states"); their hidden sizes may differ, each with its own projection. ``transformers`` has no class
    for the pair: :meth:`to_hf` gives its two halves, each holding the shared tensors. ``sample_from`` (V,)
    bool limits the replacements to those tokens (chapter 08: the tokens of its pretraining text); ``None``, the
    paper's default, draws from the whole vocabulary.

    Taught in: 08_electra ("Sharing embeddings").
    """

    def __init__(
        self,
        generator: ElectraForMaskedLM,
        discriminator: ElectraForPreTraining,
        sample_from: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        g, d = generator.config, discriminator.config
        for name in ("embedding_size", "vocab_size", "max_position_embeddings", "type_vocab_size", "pad_token_id"):
            if getattr(g, name) != getattr(d, name):
                raise ValueError(
                    f"shared embeddings need one {name}: generator {getattr(g, name)}, discriminator {getattr(d, name)}"
                )
        self.generator, self.discriminator = generator, discriminator
        generator.electra.embeddings = discriminator.electra.embeddings
        generator.tie_output()
        # the tokens a replacement may be (V,) bool, None: any; a buffer that follows the model to its device
        # but stays out of the state dict, which is the two networks' and nothing else
        self.register_buffer("sample_from", sample_from, persistent=False)

    def sample(self, logits: torch.Tensor, sampling_generator: torch.Generator | None) -> torch.Tensor:
        """One replacement per row of the generator's ``logits`` (N, V), drawn among :attr:`sample_from`."""
        return sample_tokens(logits, generator=sampling_generator, allowed=self.sample_from)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        *,
        sampling_generator: torch.Generator | None = None,
        discriminator_weight: float = DISCRIMINATOR_WEIGHT,
        masked_positions_only: bool = False,
    ) -> ElectraPretrainingOutput:
        """``input_ids`` as the generator sees them (:func:`~lecture_lib.objectives.replaced_tokens.mask_for_generator`)
        and ``labels``, the originals at the chosen positions (-100 elsewhere). The generator's samples
        replace the chosen tokens (no gradient through the sampling); the discriminator labels every real
        token, or only the chosen ones with ``masked_positions_only`` (the paper's "ELECTRA 15%").

        Taught in: 08_electra ("Replaced-token detection").
        """
        generated = self.generator(input_ids, attention_mask, token_type_ids, labels=labels, masked_only=True)
        chosen = labels != IGNORE_INDEX
        original = torch.where(chosen, labels, input_ids)
        corrupted, replaced = replace_tokens(original, labels, self.sample(generated.logits, sampling_generator))
        logits = self.discriminator(corrupted, attention_mask, token_type_ids).logits  # (B, T)
        counted = chosen.long() if masked_positions_only else attention_mask
        disc_loss = discriminator_loss(logits, replaced, counted)
        return ElectraPretrainingOutput(
            loss=electra_loss(generated.loss, disc_loss, discriminator_weight),
            mlm_loss=generated.loss,
            discriminator_loss=disc_loss,
            generator_logits=generated.logits,
            logits=logits,
            corrupted_ids=corrupted,
            replaced=replaced,
        )

    @classmethod
    def from_config(cls, config: ElectraConfig, generator_size: float = 0.25) -> "ElectraPretrainingModel":
        """A discriminator of ``config`` and its generator of ``generator_size`` times its hidden size.

        Taught in: 08_electra ("Sharing embeddings").
        """
        return cls(ElectraForMaskedLM(config.generator(generator_size)), ElectraForPreTraining(config))

    def to_hf(self, attn_implementation: str = "eager") -> tuple[nn.Module, nn.Module]:
        """(``ElectraForMaskedLM``, ``ElectraForPreTraining``) of ``transformers``, the shared tables in both."""
        return self.generator.to_hf(attn_implementation), self.discriminator.to_hf(attn_implementation)

    @classmethod
    def from_hf(cls, hf_generator: nn.Module, hf_discriminator: nn.Module) -> "ElectraPretrainingModel":
        """From the two ``transformers`` halves; the shared tables are the discriminator's."""
        return cls(ElectraForMaskedLM.from_hf(hf_generator), ElectraForPreTraining.from_hf(hf_discriminator))


# ---------------------------------------------------------------- counting compute


def matmul_weights(config: ElectraConfig, head: str, *, masked_fraction: float = 1.0) -> float:
    """N of :func:`~lecture_lib.models.bert.training_flops_per_token`: the weights of the matrix products a
    token goes through, per token. Encoder L (4H² + 2HI), the projection E·H when E != H, and the head:
    the discriminator's H² + H on every token, or the generator's f·(H·E + E·V), run (``masked_only``) at
    the fraction f of positions that are masked. (Chapter 04's BERT count keeps the head's H² transform on
    every position; at f = 1 the two agree.)

    Taught in: 08_electra ("Matched compute").
    """
    h, e = config.hidden_size, config.embedding_size
    encoder = config.num_hidden_layers * (4 * h * h + 2 * h * config.intermediate_size)
    projection = e * h if e != h else 0
    heads = {"discriminator": h * h + h, "generator": masked_fraction * (h * e + e * config.vocab_size)}
    if head not in heads:
        raise ValueError(f"expected head in {sorted(heads)}, got {head!r}")
    return encoder + projection + heads[head]


def electra_training_flops_per_token(
    config: ElectraConfig, seq_len: int, head: str, *, masked_fraction: float = 1.0
) -> float:
    """The course's formula 6 N + 12 L T H for one ELECTRA network (``head``: ``"generator"`` or
    ``"discriminator"``); a pretraining step costs the sum over both networks.

    Taught in: 08_electra ("Matched compute").
    """
    n = matmul_weights(config, head, masked_fraction=masked_fraction)
    return 6 * n + 12 * config.num_hidden_layers * seq_len * config.hidden_size
