"""BERT's encoder read left to right: the "LTR & No NSP" model of BERT's Table 5 at fine-tuning time.

Devlin et al. (2019, section 5.1) pretrained a left-to-right LM (GPT's objective) on BERT's network and
kept its left-only attention when fine-tuning it ("removing it introduced a pre-train/fine-tune mismatch
that degraded downstream performance"). :class:`LeftToRightBertModel` is that encoder: BERT's modules and
weights, with a causal mask added to the padding mask in every layer, so that the output at position i is a
function of tokens 0..i only. :func:`left_to_right_head` gives any task head the same encoder, so that a
left-to-right model is fine-tuned exactly as a bidirectional one, through the same head and loop.

Taught in: 04_bert_pretraining ("Bidirectional or left to right").
"""

from __future__ import annotations

from functools import cache

import torch

from lecture_lib.attention import causal_mask
from lecture_lib.models.bert import BertModel, BertModelOutput, check_head_mask, check_inputs, keys_mask, run_layers


class LeftToRightBertModel(BertModel):
    """:class:`~lecture_lib.models.bert.BertModel` with a causal mask in every layer: query i attends to the
    real tokens among 0..i. The weights and module names are BERT's, so a BERT state dict loads unchanged.

    >>> from lecture_lib.models.bert import BertConfig
    >>> model = LeftToRightBertModel(BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...                                         num_attention_heads=2, intermediate_size=16)).eval()
    >>> a, b = model(torch.tensor([[2, 7, 9, 3]])), model(torch.tensor([[2, 7, 5, 3]]))
    >>> torch.equal(a.last_hidden_state[:, :2], b.last_hidden_state[:, :2])  # position 2 changed: 0 and 1 cannot tell
    True

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        unpad: bool = False,
        head_mask: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """As :meth:`BertModel.forward <lecture_lib.models.bert.BertModel.forward>`, each position reading only
        itself and the positions on its left; ``unpad=True`` is refused (packing attends per sequence, both ways)."""
        if unpad:
            raise ValueError("unpad=True attends both ways within each packed sequence: expected unpad=False")
        check_inputs(self.config, input_ids, token_type_ids)
        check_head_mask(self.config, head_mask)
        mask = causal_mask(input_ids.shape[1], input_ids.device)  # (T, T)
        keys = keys_mask(attention_mask, input_ids)
        mask = mask if keys is None else mask & keys  # (B, 1, T, T)
        x = self.embeddings(input_ids, token_type_ids, position_ids)  # (B, T, H)
        return run_layers(
            self.encoder.layer,
            x,
            mask,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            head_mask=head_mask,
            pooler=self.pooler,
        )


@cache
def left_to_right_head(head: type) -> type:
    """The task head class ``head`` (e.g. :class:`~lecture_lib.models.heads.BertForTokenClassification`) on a
    :class:`LeftToRightBertModel`: ``left_to_right_head(BertForTokenClassification).from_encoder(encoder, 9)`` copies
    ``encoder``'s weights into a tagger whose tag at position i reads tokens 0..i only. One class per head.

    Taught in: 04_bert_pretraining ("Bidirectional or left to right").
    """
    if "encoder_class" not in dir(head) or not issubclass(head.encoder_class, BertModel):
        raise ValueError(f"expected a BERT task head (with a BertModel encoder_class), got {head.__name__}")
    return type(
        f"LeftToRight{head.__name__}",
        (head,),
        {"encoder_class": LeftToRightBertModel, "__doc__": f"{head.__name__}, read left to right."},
    )
