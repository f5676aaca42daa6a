"""BART (Lewis et al. 2020): chapter 02's post-LN Transformer, with learned positions, trained to denoise.

The stacks are :class:`~lecture_lib.models.transformer.Encoder` and :class:`~lecture_lib.models.transformer.Decoder`
themselves (post-LN blocks: x <- LayerNorm(x + Dropout(F(x))), GELU, biases everywhere, no final LayerNorm). What
BART adds around them:

1. **Learned positions with an offset of 2**: position t reads row t + 2 of a (max_position_embeddings + 2, d)
   table (a leftover of fairseq, where rows 0 and 1 were kept for padding); padding does not shift positions.
2. **A LayerNorm right after the embeddings** (``layernorm_embedding``), in both stacks; no sqrt(d) scaling
   (``scale_embedding=False`` in bart-base and bart-large).
3. **One embedding matrix** for encoder, decoder and output (its pad row gets no gradient), and
   ``final_logits_bias``, a buffer added to the logits.
4. **Decoding starts from </s>** (``decoder_start_token_id`` = 2), the labels shifted right behind it.
5. **Classification reads the decoder at the last </s>** (Figure 3a): the whole input goes to the encoder and,
   shifted right, to the decoder; the decoder's state at the input's last </s> has attended to every token
   of both, and a small head (:class:`BartForSequenceClassification`) maps it to the labels.

Our chapter 02 names differ from ``transformers``' in the feed-forward only (``ffn.fc1``, ``ffn_layer_norm``
for ``fc1``, ``final_layer_norm``): the family's rename table holds them.

Taught in: 09_t5_bart ("BART: the Transformer, denoising").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from lecture_lib.attention import causal_mask
from lecture_lib.config import FieldError, Range, check_divisible, check_fields, check_indices, same_rule_as
from lecture_lib.labels import shift_right
from lecture_lib.models.encoder_decoder import EncoderDecoderLM
from lecture_lib.models.heads import LabelCount, SequenceClassifierOutput, sequence_classification_loss
from lecture_lib.models.hf import Family, HFConfig, PreTrainedModule
from lecture_lib.models.transformer import Decoder, Encoder, LearnedPositionEmbedding, TransformerConfig

POSITION_OFFSET = 2

# ---------------------------------------------------------------- configuration


@dataclass
class BartConfig(HFConfig):
    """The sizes of a BART, with ``transformers``' field names; the defaults are bart-base.

    (``transformers``' own ``BartConfig()`` defaults to bart-large: d_model 1024, 12 + 12 layers, 16 heads.)
    Encoder and decoder must have equal heads and feed-forward widths, as in every BART.

    Taught in: 09_t5_bart ("BART: the Transformer, denoising").
    """

    vocab_size: int = field(default=50265, metadata=same_rule_as(TransformerConfig, "vocab_size"))
    max_position_embeddings: int = field(
        default=1024, metadata=same_rule_as(TransformerConfig, "max_position_embeddings")
    )
    d_model: int = field(default=768, metadata=same_rule_as(TransformerConfig, "d_model"))
    encoder_layers: int = field(default=6, metadata=same_rule_as(TransformerConfig, "encoder_layers"))
    decoder_layers: int = field(default=6, metadata=same_rule_as(TransformerConfig, "decoder_layers"))
    encoder_attention_heads: int = field(default=12, metadata=same_rule_as(TransformerConfig, "num_attention_heads"))
    decoder_attention_heads: int = field(default=12, metadata=same_rule_as(TransformerConfig, "num_attention_heads"))
    encoder_ffn_dim: int = field(default=3072, metadata=same_rule_as(TransformerConfig, "ffn_dim"))
    decoder_ffn_dim: int = field(default=3072, metadata=same_rule_as(TransformerConfig, "ffn_dim"))
    activation_function: str = field(default="gelu", metadata=same_rule_as(TransformerConfig, "activation_function"))
    dropout: float = field(default=0.1, metadata=same_rule_as(TransformerConfig, "dropout"))
    attention_dropout: float = field(default=0.0, metadata=same_rule_as(TransformerConfig, "attention_dropout"))
    activation_dropout: float = field(default=0.0, metadata=same_rule_as(TransformerConfig, "activation_dropout"))
    init_std: float = field(default=0.02, metadata=Range(0).rule())
    classifier_dropout: float = field(default=0.0, metadata=Range(0, 1).rule())
    scale_embedding: bool = False
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2

    def __post_init__(self) -> None:
        check_fields(self)
        if (self.encoder_attention_heads, self.encoder_ffn_dim) != (self.decoder_attention_heads, self.decoder_ffn_dim):
            raise FieldError(
                ["decoder_attention_heads", "decoder_ffn_dim"],
                "expected encoder and decoder with equal heads and ffn_dim, got "
                f"{(self.encoder_attention_heads, self.encoder_ffn_dim)} and "
                f"{(self.decoder_attention_heads, self.decoder_ffn_dim)}",
            )
        check_divisible(self, "d_model", "encoder_attention_heads")
        check_indices(self, "vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
        self.transformer_config()  # and what chapter 02's stacks need besides (an even d_model)

    @property
    def initializer_range(self) -> float:
        """``init_std`` under BERT's name, for the shared initialisation."""
        return self.init_std

    def transformer_config(self) -> TransformerConfig:
        """The same sizes as chapter 02's config: post-LN, learned positions, no final LayerNorm, eps 1e-5."""
        return TransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            encoder_layers=self.encoder_layers,
            decoder_layers=self.decoder_layers,
            num_attention_heads=self.encoder_attention_heads,
            ffn_dim=self.encoder_ffn_dim,
            activation_function=self.activation_function,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            max_position_embeddings=self.max_position_embeddings,
            position_embedding_type="learned",
            norm_first=False,
            final_layer_norm=False,
            layer_norm_eps=1e-5,
            scale_embedding=self.scale_embedding,
            pad_token_id=self.pad_token_id,
            bos_token_id=self.bos_token_id,
            eos_token_id=self.eos_token_id,
        )


BART = Family(
    model_type="bart",
    config_class=BartConfig,
    hf_config_class="BartConfig",
    renames=(("ffn.fc1", "fc1"), ("ffn.fc2", "fc2"), ("ffn_layer_norm", "final_layer_norm")),
    unsupported={"encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "is_decoder": False},
)


# ---------------------------------------------------------------- embeddings around chapter 02's stacks


class BartLearnedPositionEmbedding(LearnedPositionEmbedding):
    """Chapter 02's learned positions, two rows longer: position t reads row t + 2.

    >>> positions = BartLearnedPositionEmbedding(4, 3)
    >>> tuple(positions.weight.shape), torch.equal(positions(2), positions.weight[2:4])
    ((6, 3), True)
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__(max_len + POSITION_OFFSET, d_model)

    def forward(self, length: int) -> torch.Tensor:
        return super().forward(length + POSITION_OFFSET)[POSITION_OFFSET:]  # (T, C)


def _keys_mask(attention_mask: torch.Tensor | None, ids: torch.Tensor) -> torch.Tensor:
    """(B, 1, 1, T) bool, True on the keys to attend to; all True without an ``attention_mask``."""
    if attention_mask is None:
        return torch.ones(ids.shape[0], 1, 1, ids.shape[1], dtype=torch.bool, device=ids.device)
    if attention_mask.shape != ids.shape:
        raise ValueError(f"expected an attention mask of shape {tuple(ids.shape)}, got {tuple(attention_mask.shape)}")
    return attention_mask.bool()[:, None, None, :]


class BartEmbeddings:
    """What both BART stacks add in front of chapter 02's layers: embeddings, ``layernorm_embedding``, dropout."""

    def add_embeddings(self, config: BartConfig, embed_tokens: nn.Embedding) -> None:
        self.embed_tokens = embed_tokens
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = BartLearnedPositionEmbedding(config.max_position_embeddings, config.d_model)
        self.layernorm_embedding = nn.LayerNorm(config.d_model)
        self.embed_dropout = nn.Dropout(config.dropout)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """LayerNorm(E[ids] · scale + P[2 : T + 2]), then dropout: (B, T) -> (B, T, C)."""
        x = self.embed_tokens(ids) * self.embed_scale + self.embed_positions(ids.shape[1])
        return self.embed_dropout(self.layernorm_embedding(x))


class BartEncoder(BartEmbeddings, Encoder):
    """The embeddings, then chapter 02's encoder layers (bidirectional self-attention over the unpadded keys)."""

    def __init__(self, config: BartConfig, embed_tokens: nn.Embedding) -> None:
        Encoder.__init__(self, config.transformer_config())
        self.add_embeddings(config, embed_tokens)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        return super().forward(self.embed(input_ids), _keys_mask(attention_mask, input_ids)).last_hidden_state


class BartDecoder(BartEmbeddings, Decoder):
    """The same embeddings, then chapter 02's decoder layers (causal self-attention, cross-attention)."""

    def __init__(self, config: BartConfig, embed_tokens: nn.Embedding) -> None:
        Decoder.__init__(self, config.transformer_config())
        self.add_embeddings(config, embed_tokens)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        memory: torch.Tensor,
        memory_attention_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        self_mask = causal_mask(input_ids.shape[1], input_ids.device) & _keys_mask(attention_mask, input_ids)
        memory_ids = torch.ones(memory.shape[:2], dtype=torch.long, device=memory.device)
        memory_mask = _keys_mask(memory_attention_mask, memory_ids)
        return super().forward(self.embed(input_ids), memory, self_mask, memory_mask).last_hidden_state


class BartModel(nn.Module):
    """The shared embedding (pad row without gradient) and the two stacks, under ``transformers``' names."""

    def __init__(self, config: BartConfig) -> None:
        super().__init__()
        self.shared = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.encoder = BartEncoder(config, self.shared)
        self.decoder = BartDecoder(config, self.shared)


# ---------------------------------------------------------------- the model


class BartForConditionalGeneration(EncoderDecoderLM):
    """BART with its tied language-model head, as ``transformers``' class of that name.

    ``forward``, ``encode`` and ``decode_step`` are :class:`~lecture_lib.models.encoder_decoder.EncoderDecoderLM`'s
    (labels shifted right behind ``decoder_start_token_id``, </s> in BART); the stacks and :meth:`lm_logits` are BART's.

    >>> model = BartForConditionalGeneration(BartConfig(vocab_size=50, d_model=16, encoder_layers=2,
    ...     decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
    ...     decoder_ffn_dim=32, max_position_embeddings=32)).eval()
    >>> out = model(torch.tensor([[0, 5, 6, 2]]), labels=torch.tensor([[0, 8, 2]]))
    >>> tuple(out.logits.shape), out.loss.dim()
    ((1, 3, 50), 0)

    Taught in: 09_t5_bart ("BART: the Transformer, denoising").
    """

    family = BART
    hf_class = "BartForConditionalGeneration"
    base_model_prefix = "model"

    def __init__(self, config: BartConfig) -> None:
        super().__init__()
        self.config = config
        self.model = BartModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.register_buffer("final_logits_bias", torch.zeros(1, config.vocab_size))
        self.apply(self._init_weights)
        self.lm_head.weight = self.model.shared.weight

    def tied_keys(self) -> set[str]:
        return {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight"}

    def stacks(self) -> tuple[BartEncoder, BartDecoder]:
        return self.model.encoder, self.model.decoder

    def lm_logits(self, decoder_states: torch.Tensor) -> torch.Tensor:
        """logits = h Eᵀ + final_logits_bias: the tied matrix, and a bias that is a buffer, not a weight."""
        return self.lm_head(decoder_states) + self.final_logits_bias  # (B, T, V)


# ---------------------------------------------------------------- classification from the last </s>


class BartClassificationHead(nn.Module):
    """dropout -> dense -> tanh -> dropout -> out_proj: (B, C) -> (B, num_labels), as ``transformers``' head."""

    def __init__(self, d_model: int, num_labels: int, dropout: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.out_proj = nn.Linear(d_model, num_labels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(x)))))


class BartForSequenceClassification(LabelCount, PreTrainedModule):
    """BART's classifier (Lewis et al. 2020, Figure 3a), as ``transformers``' class of that name.

    The input is read by the encoder and, shifted right behind ``decoder_start_token_id``, by the decoder; the
    decoder's final state at the input's *last* </s> (``eos_token_id``) goes through
    :class:`BartClassificationHead`. Every row must hold the same number of </s>, at least one. Cross-entropy
    over the labels, or the mean squared error with ``num_labels=1``.

    >>> model = BartForSequenceClassification(BartConfig(vocab_size=50, d_model=16, encoder_layers=1,
    ...     decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
    ...     decoder_ffn_dim=32, max_position_embeddings=32), num_labels=3).eval()
    >>> tuple(model(torch.tensor([[0, 5, 6, 2], [0, 7, 2, 1]])).logits.shape)
    (2, 3)

    Taught in: 09_t5_bart ("BART: the Transformer, denoising").
    """

    family = BART
    hf_class = "BartForSequenceClassification"
    base_model_prefix = "model"

    def __init__(self, config: BartConfig, num_labels: int = 2) -> None:
        super().__init__()
        self._set_num_labels(num_labels)
        self.config = config
        self.model = BartModel(config)
        self.classification_head = BartClassificationHead(config.d_model, num_labels, config.classifier_dropout)
        self.apply(self._init_weights)

    def tied_keys(self) -> set[str]:
        return {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"}

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None
    ) -> SequenceClassifierOutput:
        c = self.config
        eos = input_ids == c.eos_token_id  # (B, T)
        counts = eos.sum(1)
        if (counts == 0).any() or (counts != counts[0]).any():
            raise ValueError(
                f"expected the same number of </s> (id {c.eos_token_id}) in every row, at least one, "
                f"got {counts.tolist()}"
            )
        memory = self.model.encoder(input_ids, attention_mask)  # (B, T, C)
        decoder_ids = shift_right(input_ids, start=c.decoder_start_token_id, pad=c.pad_token_id)
        states = self.model.decoder(decoder_ids, None, memory, attention_mask)  # (B, T, C)
        last_eos = states[eos].view(len(states), -1, states.shape[-1])[:, -1]  # (B, C): the last </s> of each row
        logits = self.classification_head(last_eos)  # (B, num_labels)
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.num_labels)
        return SequenceClassifierOutput(logits=logits, loss=loss)
