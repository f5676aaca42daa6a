"""Pretraining objectives: token ids in, (inputs, labels) out; seeded, without parameters.

- :mod:`~lecture_lib.objectives.masking`: masked LM's selection and the 80/10/10 replacement rule;
- :mod:`~lecture_lib.objectives.sentence_pairs`: next-sentence prediction pairs cut from documents;
- :mod:`~lecture_lib.objectives.span_corruption`: T5's span corruption, sentinels and random spans;
- :mod:`~lecture_lib.objectives.denoising`: the other objectives of T5's Table 3, as words in, (inputs, targets) out;
- :mod:`~lecture_lib.objectives.noising`: BART's five document corruptions.
"""
