"""What T5 and BART share around their two stacks: text in, text out, trained by teacher forcing.

The decoder reads the labels shifted right behind ``decoder_start_token_id`` (unless ``decoder_input_ids``
are given), the loss is the mean cross-entropy over the labels that are not -100, and
:mod:`lecture_lib.decoding` calls ``encode(src)`` once and ``decode_step(prefix, state)`` per token.

What differs stays in each family's file, where the chapter reads it: the stacks themselves (T5's RMS norm and
relative position bias; BART's learned positions around chapter 02's layers), where they sit in the state dict
(:meth:`EncoderDecoderLM.stacks`), and how decoder states become logits (:meth:`EncoderDecoderLM.lm_logits`:
T5 rescales by d_model^-1/2 before the tied matrix, BART adds ``final_logits_bias``).

Taught in: 09_t5_bart ("T5: the model", "BART: the Transformer, denoising").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.labels import IGNORE_INDEX, shift_right
from lecture_lib.models.hf import PreTrainedModule


@dataclass
class EncoderDecoderOutput:
    """Next-token logits (B, T, V); the mean cross-entropy over labels that are not -100; the encoder's states.

    Taught in: 09_t5_bart ("T5: the model").
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    encoder_last_hidden_state: torch.Tensor | None = None


class EncoderDecoderLM(PreTrainedModule):
    """An encoder-decoder with a language-model head; a family says where its stacks are and how it makes logits.

    ``labels`` (B, T): target ids, -100 where nothing is to be predicted; without ``decoder_input_ids`` the
    decoder reads them shifted right behind ``decoder_start_token_id``.
    """

    def stacks(self) -> tuple[nn.Module, nn.Module]:
        """(encoder, decoder): ``encoder(ids, attention_mask)`` -> (B, S, C) and
        ``decoder(ids, attention_mask, memory, memory_attention_mask)`` -> (B, T, C)."""
        raise NotImplementedError

    def lm_logits(self, decoder_states: torch.Tensor) -> torch.Tensor:
        """Decoder states (B, T, C) -> next-token logits (B, T, V)."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> EncoderDecoderOutput:
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError("expected decoder_input_ids or labels (the decoder needs an input)")
            decoder_input_ids = shift_right(
                labels, start=self.config.decoder_start_token_id, pad=self.config.pad_token_id
            )
        encoder, decoder = self.stacks()
        memory = encoder(input_ids, attention_mask)  # (B, S, C)
        states = decoder(decoder_input_ids, decoder_attention_mask, memory, attention_mask)  # (B, T, C)
        logits = self.lm_logits(states)  # (B, T, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)
        return EncoderDecoderOutput(logits=logits, loss=loss, encoder_last_hidden_state=memory)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Source ids (B, S), right-padded with ``pad_token_id`` -> (memory, attention mask), the decoding state."""
        attention_mask = (src != self.config.pad_token_id).long()
        return self.stacks()[0](src, attention_mask), attention_mask

    def decode_step(self, prefix: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Logits (B, V) of the token after ``prefix`` (B, t), which starts with ``decoder_start_token_id``."""
        memory, attention_mask = state
        return self.lm_logits(self.stacks()[1](prefix, None, memory, attention_mask)[:, -1:])[:, 0]
