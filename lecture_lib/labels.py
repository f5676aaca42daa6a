"""The one label convention every loss in the course shares.

``IGNORE_INDEX`` marks a position that carries no loss: PyTorch's ``cross_entropy`` skips targets equal
to its ``ignore_index``, whose default is -100, and Hugging Face's models label unused positions the same
way. Masked LM labels every unselected token with it; token tagging labels the continuation pieces of a
word and the special tokens with it.

Taught in: 04_bert_pretraining ("Masked LM").
"""

IGNORE_INDEX = -100
