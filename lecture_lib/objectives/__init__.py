"""Pretraining objectives: token ids in, (inputs, labels) out; seeded, without parameters.

- :mod:`~lecture_lib.objectives.masking`: masked LM's selection and the 80/10/10 replacement rule;
- :mod:`~lecture_lib.objectives.sentence_pairs`: next-sentence prediction pairs cut from documents;
- :mod:`~lecture_lib.objectives.replaced_tokens`: ELECTRA's replaced-token detection (exact 15%, 85/15, samples).
"""
