"""RNN sequence-to-sequence models, with and without attention: the problem attention was invented for.

Without attention, the decoder sees the source only through the encoder's last state h_N, one
fixed-size vector (the bottleneck). With attention (Bahdanau et al. 2015; Luong et al. 2015), decoder
step t scores every encoder state, e^t = [s_tᵀh_1, ..., s_tᵀh_N]; takes α^t = softmax(e^t); reads
a_t = Σ_i α^t_i h_i; and predicts from [a_t; s_t].

Taught in: 01_attention ("The bottleneck, measured", "Attention in equations").
"""

from __future__ import annotations

import torch
from torch import nn

from lecture_lib.attention import padding_mask, scaled_dot_product_attention
from lecture_lib.data.toy import BOS, PAD, Seq2SeqBatch


class RNNSeq2Seq(nn.Module):
    """GRU encoder and decoder; ``attention=True`` adds dot-product attention over the encoder states."""

    def __init__(self, vocab_size: int, hidden_size: int, attention: bool) -> None:
        super().__init__()
        self.attention = attention
        self.embed = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.encoder = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.decoder = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.combine = nn.Linear(2 * hidden_size, hidden_size) if attention else None
        self.out = nn.Linear(hidden_size, vocab_size)

    def encode(self, src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder states h_1..h_N (B, S, h) and the last real state of each sequence (1, B, h)."""
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        states, last = self.encoder(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=src.shape[1])
        return states, last

    def decode(
        self, tgt_in: torch.Tensor, states: torch.Tensor, lengths: torch.Tensor, hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Logits (B, T, V), the decoder's final hidden state, and alignments α (B, T, S) or None."""
        s, hidden = self.decoder(self.embed(tgt_in), hidden)  # s: (B, T, h)
        if not self.attention:
            return self.out(s), hidden, None
        mask = padding_mask(lengths.to(s.device), states.shape[1])[:, 0]  # (B, 1, S)
        a, alpha = scaled_dot_product_attention(s, states, states, mask, scale=1.0)  # e = s·h, unscaled
        return self.out(torch.tanh(self.combine(torch.cat([a, s], dim=-1)))), hidden, alpha

    def forward(self, batch: Seq2SeqBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        states, last = self.encode(batch.src, batch.src_lengths)
        logits, _, alpha = self.decode(batch.tgt_in, states, batch.src_lengths, last)
        return logits, alpha

    @torch.no_grad()
    def greedy(
        self, src: torch.Tensor, lengths: torch.Tensor, max_len: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Decode one token at a time, feeding back the argmax; returns tokens (B, max_len) and α."""
        states, hidden = self.encode(src, lengths)
        token = torch.full((src.shape[0], 1), BOS, dtype=torch.long, device=src.device)
        tokens, alphas = [], []
        for _ in range(max_len):
            logits, hidden, alpha = self.decode(token, states, lengths, hidden)
            token = logits.argmax(-1)  # (B, 1)
            tokens.append(token)
            alphas.append(alpha)
        alignments = torch.cat(alphas, dim=1) if self.attention else None
        return torch.cat(tokens, dim=1), alignments
