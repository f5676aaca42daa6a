"""The variants of ELECTRA that Clark et al. (2020) compare it with: what each changes, the rest ELECTRA's.

- **Replace MLM** (Table 5): the generator's samples replace the chosen tokens (not [MASK]), and a masked LM of
  the discriminator's size predicts the originals at those positions only.
- **All-Tokens MLM** (Table 5): Replace MLM's input, and the original of *every* token predicted, with a copy
  gate that may keep the input token.
- **Unigram generator** (Figure 3): replacements drawn from the training tokens' frequencies; only the
  discriminator learns.

Each takes ``(batch, sampling_generator)`` and returns its loss; the embeddings are shared as in
:class:`~lecture_lib.models.electra.ElectraPretrainingModel`.

Taught in: 08_electra ("Table 5 at equal FLOPs", "The generator's size").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.electra import (
    ElectraForMaskedLM,
    ElectraForPreTraining,
    ElectraPretrainingModel,
    ElectraPretrainingOutput,
    discriminator_loss,
)
from lecture_lib.objectives.replaced_tokens import DISCRIMINATOR_WEIGHT, replace_tokens, sample_tokens


class ReplaceMLM(ElectraPretrainingModel):
    """Table 5's Replace MLM: the generator's samples (not [MASK]) at the chosen positions, and a masked LM
    of the discriminator's size that predicts the originals there. Embeddings shared as in ELECTRA.

    Taught in: 08_electra ("Table 5 at equal FLOPs").
    """

    def corrupt(
        self, batch: dict[str, torch.Tensor], sampling_generator: torch.Generator
    ) -> tuple[ElectraPretrainingOutput, torch.Tensor, torch.Tensor]:
        """The generator's output, the corrupted ids and the original ids."""
        generated = self.generator(
            batch["input_ids"],
            batch["attention_mask"],
            batch["token_type_ids"],
            labels=batch["labels"],
            masked_only=True,
        )
        original = torch.where(batch["labels"] != IGNORE_INDEX, batch["labels"], batch["input_ids"])
        corrupted, _ = replace_tokens(original, batch["labels"], self.sample(generated.logits, sampling_generator))
        return generated, corrupted, original

    def forward(self, batch: dict[str, torch.Tensor], sampling_generator: torch.Generator) -> torch.Tensor:
        generated, corrupted, _ = self.corrupt(batch, sampling_generator)
        student = self.discriminator(
            corrupted, batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"], masked_only=True
        )
        return generated.loss + student.loss


class AllTokensMLM(ReplaceMLM):
    """Table 5's All-Tokens MLM: Replace MLM's input, but the original of *every* token is predicted, with a
    copy mechanism: p(x_t) = D_t·1[x_t = input_t] + (1 - D_t)·softmax(logits_t)[x_t], D_t = sigmoid(w·h_t).

    Taught in: 08_electra ("Table 5 at equal FLOPs").
    """

    def __init__(
        self, generator: ElectraForMaskedLM, student: ElectraForMaskedLM, sample_from: torch.Tensor | None = None
    ) -> None:
        super().__init__(generator, student, sample_from)
        self.copy_gate = nn.Linear(student.config.hidden_size, 1)

    def forward(self, batch: dict[str, torch.Tensor], sampling_generator: torch.Generator) -> torch.Tensor:
        generated, corrupted, original = self.corrupt(batch, sampling_generator)
        student = self.discriminator
        real = batch["attention_mask"].bool()
        hidden = student.electra(corrupted, batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
        hidden, corrupted, original = hidden[real], corrupted[real], original[real]  # the real tokens: (N, H), (N,)
        log_softmax = F.log_softmax(student.generator_lm_head(student.generator_predictions(hidden)), -1)
        predicted = log_softmax.gather(-1, original[:, None]).squeeze(-1)  # log softmax at the original
        gate = self.copy_gate(hidden).squeeze(-1)
        copied = torch.logaddexp(F.logsigmoid(gate), F.logsigmoid(-gate) + predicted)  # input = original
        log_p = torch.where(corrupted == original, copied, F.logsigmoid(-gate) + predicted)
        return generated.loss - log_p.mean()


class UnigramElectra(nn.Module):
    """Figure 3's unigram generator: replacements drawn from the training tokens' frequencies, nothing
    learned but the discriminator.

    Taught in: 08_electra ("The generator's size").
    """

    def __init__(self, discriminator: ElectraForPreTraining, frequencies: torch.Tensor) -> None:
        super().__init__()
        self.discriminator = discriminator
        self.register_buffer("log_frequencies", frequencies.clamp(min=1e-12).log())

    def corrupt(
        self, batch: dict[str, torch.Tensor], sampling_generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The corrupted ids (a frequency-drawn token at each chosen position) and their replaced labels."""
        labels = batch["labels"]
        chosen = labels != IGNORE_INDEX
        sampled = sample_tokens(self.log_frequencies.expand(int(chosen.sum()), -1), generator=sampling_generator)
        return replace_tokens(torch.where(chosen, labels, batch["input_ids"]), labels, sampled)

    def forward(self, batch: dict[str, torch.Tensor], sampling_generator: torch.Generator) -> torch.Tensor:
        corrupted, replaced = self.corrupt(batch, sampling_generator)
        logits = self.discriminator(corrupted, batch["attention_mask"], batch["token_type_ids"]).logits
        return DISCRIMINATOR_WEIGHT * discriminator_loss(logits, replaced, batch["attention_mask"])
