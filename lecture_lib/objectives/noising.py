"""BART's five ways to corrupt a document (Lewis et al. 2020, Figure 2); the target is always the whole document.

On the document "A B C . D E ." (two sentences):

=====================  =========================================================  ================
transformation         what it does                                               example
=====================  =========================================================  ================
token masking          random tokens become <mask> (as BERT)                      A <mask> C . <mask> E .
token deletion         random tokens are deleted; the model must find where      A . C . E .
text infilling         spans of Poisson(3) length each become ONE <mask>;         A <mask> . D <mask> E .
                       a 0-length span inserts a <mask>
sentence permutation   the sentences in a random order                            D E . A B C .
document rotation      the document rotated to start at a random token            C . D E . A B
=====================  =========================================================  ================

Infilling hides how many tokens are missing, so the model must predict the length of each span too.

Taught in: 09_t5_bart ("BART's noising functions").
"""

from __future__ import annotations

from typing import Sequence

import torch

MASK = "<mask>"


def _chosen(length: int, probability: float, generator: torch.Generator | None) -> list[bool]:
    if not 0 <= probability <= 1:
        raise ValueError(f"expected a probability in [0, 1], got {probability}")
    return (torch.rand(length, generator=generator) < probability).tolist()


def token_masking(
    words: Sequence[str], *, probability: float = 0.3, generator: torch.Generator | None = None, mask_token: str = MASK
) -> list[str]:
    """Each word becomes ``mask_token`` with ``probability``, independently; the length is unchanged.

    >>> token_masking("A B C . D E .".split(), probability=0.0)
    ['A', 'B', 'C', '.', 'D', 'E', '.']

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    return [mask_token if hit else w for w, hit in zip(words, _chosen(len(words), probability, generator))]


def token_deletion(
    words: Sequence[str], *, probability: float = 0.3, generator: torch.Generator | None = None
) -> list[str]:
    """Each word is deleted with ``probability``, independently, leaving no mark where it was.

    >>> token_deletion("A B C . D E .".split(), probability=1.0)
    []

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    return [w for w, hit in zip(words, _chosen(len(words), probability, generator)) if not hit]


def infill_spans(words: Sequence[str], spans: Sequence[tuple[int, int]], mask_token: str = MASK) -> list[str]:
    """Replace each span (start, length) of ``words`` by one ``mask_token``; a span of length 0 inserts one.

    Overlapping or touching spans merge into one masked run, one ``mask_token``.

    >>> " ".join(infill_spans("A B C . D E .".split(), [(1, 2), (5, 0)]))
    'A <mask> . D <mask> E .'

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    n = len(words)
    hidden, inserts = [False] * n, set()
    for start, length in spans:
        if not (0 <= start and length >= 0 and start + length <= n):
            raise ValueError(
                f"expected spans inside the {n} words (0 <= start, start + length <= {n}), got ({start}, {length})"
            )
        hidden[start : start + length] = [True] * length
        if length == 0:
            inserts.add(start)
    out = []
    for i in range(n + 1):
        after_hidden = i > 0 and hidden[i - 1]
        if i in inserts and not after_hidden and not (i < n and hidden[i]):
            out.append(mask_token)
        if i < n and hidden[i] and not after_hidden:
            out.append(mask_token)
        elif i < n and not hidden[i]:
            out.append(words[i])
    return out


def text_infilling(
    words: Sequence[str],
    *,
    mask_ratio: float = 0.3,
    poisson_lambda: float = 3.0,
    generator: torch.Generator | None = None,
    mask_token: str = MASK,
) -> list[str]:
    """Hide about ``mask_ratio`` of the words in spans of Poisson(``poisson_lambda``) length, one mask per span.

    Span lengths are drawn until they cover round(mask_ratio · n) words (the last one cut to fit); each span
    starts at a uniform position where it fits; :func:`infill_spans` writes the result.

    >>> text_infilling("A B C . D E .".split(), mask_ratio=0.0)
    ['A', 'B', 'C', '.', 'D', 'E', '.']

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    if not 0 <= mask_ratio <= 1 or poisson_lambda <= 0:
        raise ValueError(f"expected 0 <= mask_ratio <= 1 and poisson_lambda > 0, got {mask_ratio}, {poisson_lambda}")
    n, spans, covered = len(words), [], 0
    budget = round(mask_ratio * n)
    rate = torch.tensor(float(poisson_lambda))
    while covered < budget:
        length = min(int(torch.poisson(rate, generator=generator)), budget - covered)
        start = int(torch.randint(n - length + 1, (), generator=generator))
        spans.append((start, length))
        covered += length
    return infill_spans(words, spans, mask_token)


def sentences_of(words: Sequence[str], end: str = ".") -> list[list[str]]:
    """The document cut after every ``end`` word (a last sentence without one is kept too).

    >>> sentences_of("A B C . D E .".split())
    [['A', 'B', 'C', '.'], ['D', 'E', '.']]
    """
    sentences, current = [], []
    for w in words:
        current.append(w)
        if w == end:
            sentences.append(current)
            current = []
    return sentences + ([current] if current else [])


def sentence_permutation(
    words: Sequence[str], *, generator: torch.Generator | None = None, end: str = "."
) -> list[str]:
    """The sentences (cut by :func:`sentences_of`) in a uniformly random order.

    >>> sentence_permutation(["A", "."])
    ['A', '.']

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    sentences = sentences_of(words, end)
    return [w for i in torch.randperm(len(sentences), generator=generator).tolist() for w in sentences[i]]


def rotate(words: Sequence[str], start: int) -> list[str]:
    """The document begun at ``start`` and wrapped around.

    >>> " ".join(rotate("A B C . D E .".split(), 2))
    'C . D E . A B'

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    if not 0 <= start < max(len(words), 1):
        raise ValueError(f"expected 0 <= start < {len(words)}, got {start}")
    return list(words[start:]) + list(words[:start])


def document_rotation(words: Sequence[str], *, generator: torch.Generator | None = None) -> list[str]:
    """:func:`rotate` at a uniformly random token: the model must find where the document starts.

    Taught in: 09_t5_bart ("BART's noising functions").
    """
    return rotate(words, int(torch.randint(max(len(words), 1), (), generator=generator)))


NOISING = {
    "token_masking": token_masking,
    "token_deletion": token_deletion,
    "text_infilling": text_infilling,
    "sentence_permutation": sentence_permutation,
    "document_rotation": document_rotation,
}
