"""Chapter 01's exercise answers: exercise 1, the decoder's attention made additive (Bahdanau et al. 2015).

:class:`AdditiveAttentionSeq2Seq` scores with e^t_i = vᵀ tanh(W_1 h_i + W_2 s_t) where
:class:`~lecture_lib.models.rnn_seq2seq.RNNSeq2Seq` takes the dot product s_tᵀh_i; the chapter trains it with
``train_reversal("additive", exp)``.

Taught in: 01_attention ("Exercises").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.attention import padding_mask
from lecture_lib.models.rnn_seq2seq import RNNSeq2Seq


class AdditiveAttentionSeq2Seq(RNNSeq2Seq):
    """Exercise 1 of chapter 01: the attentive :class:`RNNSeq2Seq` with Bahdanau et al.'s (2015) additive
    score e^t_i = vᵀ tanh(W_1 h_i + W_2 s_t) in place of the dot product s_tᵀh_i."""

    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__(vocab_size, hidden_size, attention=True)
        self.w1 = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w2 = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def decode(
        self, tgt_in: torch.Tensor, states: torch.Tensor, lengths: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s, hidden = self.decoder(self.embed(tgt_in), hidden)  # s: (B, T, h)
        keys = self.w1(states)  # (B, S, h): W_1 h_i, once for all the target positions of this call
        scores = self.v(torch.tanh(keys[:, None] + self.w2(s)[:, :, None]))[..., 0]  # (B, T, S)
        mask = padding_mask(lengths.to(s.device), states.shape[1])[:, 0]  # (B, 1, S)
        alpha = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        a = alpha @ states  # (B, T, h)
        return self.out(torch.tanh(self.combine(torch.cat([a, s], dim=-1)))), hidden, alpha
