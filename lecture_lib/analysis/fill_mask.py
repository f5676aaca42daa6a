"""Fill-mask: what a masked-LM head predicts for each ``[MASK]`` of a text.

Taught in: 04_bert_pretraining ("Pretraining a small BERT").
"""

from __future__ import annotations

import torch

from lecture_lib.models.bert import BertForPreTraining
from lecture_lib.tokenization import WordPieceTokenizer


def fill_mask(
    model: BertForPreTraining, tokenizer: WordPieceTokenizer, text: str, top_k: int = 5
) -> list[list[tuple[str, float]]]:
    """For each ``[MASK]`` in ``text``: the ``top_k`` (token, probability) predictions of the MLM head.

    Taught in: 04_bert_pretraining ("Pretraining a small BERT").
    """
    ids, types, _ = tokenizer.frame(tokenizer.encode(text))
    input_ids = torch.tensor([ids], device=next(model.parameters()).device)
    positions = (input_ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    if len(positions) == 0:
        raise ValueError(f"expected at least one [MASK] in the text, got {text!r}")
    model.eval()
    with torch.no_grad():
        logits = model(input_ids, token_type_ids=torch.tensor([types], device=input_ids.device)).prediction_logits
    probabilities = logits[0, positions].softmax(-1)  # (masks, V)
    top = probabilities.topk(top_k, dim=-1)
    return [list(zip(tokenizer.convert_ids_to_tokens(i.tolist()), p.tolist())) for p, i in zip(top.values, top.indices)]
