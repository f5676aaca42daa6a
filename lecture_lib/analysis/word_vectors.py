"""Word vectors from every layer of a BERT: what a probe reads.

A probe asks a question about *words* (this word's part of speech, the distance between two words in the
tree), while BERT holds vectors of *WordPiece tokens*. Each word's vector at a layer is the mean of its
pieces' vectors (as Hewitt and Manning 2019 do; BERT's NER head reads the first piece instead). Layer 0 is
the embedding layer's output (word-piece, position and segment embeddings, normalised), the layers 1..L the
encoder's blocks.

Taught in: 11_bertology_probing ("Word vectors from every layer").
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from lecture_lib.analysis.syntactic_heads import PieceTokenizer, align_words, word_membership


def piece_means(hidden: torch.Tensor, word_of_piece: Sequence[int]) -> torch.Tensor:
    """Piece vectors (..., T, H) of one sentence -> word vectors (..., W, H), each the mean of its pieces;
    pieces of word -1 ([CLS], [SEP]) are left out.

    >>> piece_means(torch.tensor([[9., 9.], [1., 2.], [3., 4.], [5., 6.]]), [-1, 0, 0, 1])
    tensor([[2., 3.],
            [5., 6.]])

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    member = word_membership(word_of_piece, hidden.shape[-2], hidden)  # (W, T)
    return (member / member.sum(-1, keepdim=True)) @ hidden


def word_vectors(
    model: nn.Module, tokenizer: PieceTokenizer, sentences: Sequence[Sequence[str]], batch_size: int = 64
) -> list[torch.Tensor]:
    """Each sentence's word vectors at every layer, (L + 1, W, H), layer 0 the embeddings; ``sentences``
    are lists of words. ``model`` is a bare BERT or one with a head (its ``base_model`` is used), run in
    eval mode without gradients.

    Taught in: 11_bertology_probing ("Word vectors from every layer").
    """
    encoder = getattr(model, "base_model", model)
    was_training = encoder.training
    encoder.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            aligned = [align_words(tokenizer, words) for words in sentences[start : start + batch_size]]
            ids = [torch.tensor(piece_ids) for piece_ids, _ in aligned]
            input_ids = pad_sequence(ids, batch_first=True, padding_value=0)  # any id: the mask hides it
            attention_mask = pad_sequence([torch.ones_like(i) for i in ids], batch_first=True)
            hidden = torch.stack(encoder(input_ids, attention_mask, output_hidden_states=True).hidden_states, 1)
            for row, (piece_ids, word_of_piece) in enumerate(aligned):
                out.append(piece_means(hidden[row, :, : len(piece_ids)], word_of_piece))
    encoder.train(was_training)
    return out
