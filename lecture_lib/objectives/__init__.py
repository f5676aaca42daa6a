"""Pretraining objectives: token ids in, (inputs, labels) out; seeded, without parameters.

- :mod:`~lecture_lib.objectives.masking`: masked LM's selection and the 80/10/10 replacement rule;
- :mod:`~lecture_lib.objectives.sentence_pairs`: next-sentence prediction and sentence-order pairs cut from documents;
- :mod:`~lecture_lib.objectives.input_formats`: RoBERTa's four input formats and its ``<s> A </s></s> B </s>`` framing;
- :mod:`~lecture_lib.objectives.masking_units`: the words a whole-unit scheme masks together (entities, noun phrases);
- :mod:`~lecture_lib.objectives.span_masking`: whole-word, unit and SpanBERT's geometric-span masking, span boundaries;
- :mod:`~lecture_lib.objectives.replaced_tokens`: ELECTRA's replaced-token detection (exact 15%, 85/15, samples);
- :mod:`~lecture_lib.objectives.span_corruption`: T5's span corruption, sentinels and random spans;
- :mod:`~lecture_lib.objectives.denoising`: the other objectives of T5's Table 3, as words in, (inputs, targets) out;
- :mod:`~lecture_lib.objectives.noising`: BART's five document corruptions.
"""
