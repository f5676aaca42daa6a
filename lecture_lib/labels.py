"""The one label convention every loss in the course shares.

``IGNORE_INDEX`` marks a position that carries no loss: PyTorch's ``cross_entropy`` skips targets equal
to its ``ignore_index``, whose default is -100, and Hugging Face's models label unused positions the same
way. Masked LM labels every unselected token with it; token tagging labels the continuation pieces of a
word and the special tokens with it.

Taught in: 04_bert_pretraining ("Masked LM").
"""

import torch

IGNORE_INDEX = -100


def shift_right(labels: torch.Tensor, *, start: int, pad: int) -> torch.Tensor:
    """A decoder's inputs from its labels (B, T): ``start`` then the labels but the last, ``IGNORE_INDEX`` as ``pad``.

    Teacher forcing: position t reads the label of position t - 1 and predicts the label of position t.

    >>> shift_right(torch.tensor([[7, 8, -100]]), start=0, pad=0)
    tensor([[0, 7, 8]])

    Taught in: 09_t5_bart ("T5: the model").
    """
    shifted = torch.cat([torch.full_like(labels[:, :1], start), labels[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == IGNORE_INDEX, pad)
