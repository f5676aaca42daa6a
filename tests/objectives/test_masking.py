"""lecture_lib.objectives.masking: the 15% / 80-10-10 rule held to binomial tolerances over a million tokens,
its invariants, and static vs dynamic masking; compared with transformers' MLM data collator."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecture_lib.objectives.masking import (
    ABLATION_STRATEGIES,
    BERT_MASKING,
    IGNORE_INDEX,
    MaskedDataset,
    MaskingStrategy,
    mask_tokens,
)

VOCAB, MASK = 1000, 4


def corpus(rows=1000, length=1024, seed=0):
    """About a million tokens; position 0 and the tail of every row are "special" (CLS, padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, length), generator=g)
    special = torch.zeros(rows, length, dtype=torch.bool)
    special[:, 0] = True
    lengths = torch.randint(length // 2, length, (rows,), generator=g)
    special |= torch.arange(length)[None, :] >= lengths[:, None]
    ids[special] = 0
    ids[:, 0] = 2
    return ids, special


def rates(ids, special, masked, labels):
    selected = labels != IGNORE_INDEX
    n_selected = selected.sum().item()
    to_mask = (masked == MASK) & selected
    unchanged = (masked == ids) & selected
    return {
        "selected": n_selected / (~special).sum().item(),
        "mask": to_mask.sum().item() / n_selected,
        "same": unchanged.sum().item() / n_selected,
        "n_selected": n_selected,
    }


def test_selection_and_replacement_rates_over_a_million_tokens():
    ids, special = corpus()
    assert (~special).sum() > 700_000 and ids.numel() >= 1_000_000
    masked, labels = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_tokens_mask=special,
        generator=torch.Generator().manual_seed(1),
    )
    r = rates(ids, special, masked, labels)
    # Binomial standard deviations: sqrt(.15 * .85 / 770k) = 4e-4 and sqrt(.8 * .2 / 115k) = 1.2e-3.
    assert r["selected"] == pytest.approx(0.15, abs=0.002)
    assert r["mask"] == pytest.approx(0.80, abs=0.006)
    # "same" = left unchanged (10%) + a random token that happens to be the original (10% / 1000)
    assert r["same"] == pytest.approx(0.10 + 0.10 / VOCAB, abs=0.005)
    random = ((masked != MASK) & (masked != ids) & (labels != IGNORE_INDEX)).sum().item() / r["n_selected"]
    assert random == pytest.approx(0.10 * (1 - 1 / VOCAB), abs=0.005)


def test_random_replacements_are_uniform_over_the_vocabulary():
    ids = torch.full((2000, 500), 7)
    masked, labels = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=10,
        mlm_probability=1.0,
        strategy=MaskingStrategy(0.0, 0.0, 1.0),
        generator=torch.Generator().manual_seed(0),
    )
    counts = torch.bincount(masked.flatten(), minlength=10).double()
    expected = ids.numel() / 10
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    assert chi2 < 27.9  # the 99.9% quantile of chi-square with 9 degrees of freedom


def test_same_rates_as_transformers_data_collator():
    from tokenizers import Tokenizer, models
    from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, **{f"w{i}": i for i in range(5, VOCAB)}}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="[UNK]")),
        pad_token="[PAD]",
        mask_token="[MASK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )
    ids, special = corpus(rows=300)
    torch.manual_seed(0)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, return_tensors="pt")
    theirs = collator.torch_mask_tokens(ids.clone(), special_tokens_mask=special.clone())
    ours = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_tokens_mask=special,
        generator=torch.Generator().manual_seed(0),
    )
    r_theirs, r_ours = rates(ids, special, *theirs), rates(ids, special, *ours)
    for key in ("selected", "mask", "same"):
        assert r_ours[key] == pytest.approx(r_theirs[key], abs=0.01), key


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from(ABLATION_STRATEGIES), st.floats(0.0, 1.0))
def test_invariants(seed, strategy, p):
    ids, special = corpus(rows=4, length=64, seed=seed % 1000)
    before = ids.clone()
    masked, labels = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_tokens_mask=special,
        mlm_probability=p,
        strategy=strategy,
        generator=torch.Generator().manual_seed(seed),
    )
    selected = labels != IGNORE_INDEX
    assert torch.equal(ids, before)  # the input is not modified
    assert not (selected & special).any()  # never a special or padding position
    assert torch.equal(labels[selected], ids[selected])  # labels are the originals
    assert torch.equal(masked[~selected], ids[~selected])  # unselected positions are untouched
    if strategy.mask == 0:  # [MASK] only as a random draw, like any other of the 1000 ids
        assert (masked[selected] == MASK).sum() <= 3
    if strategy.random == 0:
        assert torch.all((masked[selected] == MASK) | (masked[selected] == ids[selected]))
    if strategy.same == 0 and strategy.random == 0:
        assert torch.all(masked[selected] == MASK)


def test_same_generator_state_same_masks():
    ids, special = corpus(rows=8, length=32)
    one = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_tokens_mask=special,
        generator=torch.Generator().manual_seed(3),
    )
    two = mask_tokens(
        ids,
        mask_token_id=MASK,
        vocab_size=VOCAB,
        special_tokens_mask=special,
        generator=torch.Generator().manual_seed(3),
    )
    assert all(torch.equal(a, b) for a, b in zip(one, two))


def test_static_masks_repeat_and_dynamic_masks_change():
    ids, special = corpus(rows=20, length=32)
    options = dict(mask_token_id=MASK, vocab_size=VOCAB, seed=5)
    static = MaskedDataset(ids, special, dynamic=False, **options)
    static10 = MaskedDataset(ids, special, dynamic=False, copies=10, **options)
    dynamic = MaskedDataset(ids, special, dynamic=True, **options)
    rows = [3, 7, 11]
    assert all(torch.equal(a, b) for a, b in zip(static.batch(rows, 0), static.batch(rows, 5)))
    assert all(torch.equal(a, b) for a, b in zip(static.batch(rows, 0), dynamic.batch(rows, 0)))
    assert all(torch.equal(a, b) for a, b in zip(static10.batch(rows, 2), static10.batch(rows, 12)))
    assert all(torch.equal(a, b) for a, b in zip(static10.batch(rows, 4), dynamic.batch(rows, 4)))
    assert not torch.equal(dynamic.batch(rows, 0)[1], dynamic.batch(rows, 1)[1])
    # a row's mask does not depend on which other rows share its batch
    assert torch.equal(dynamic.batch([11], 3)[0][0], dynamic.batch(rows, 3)[0][2])
    long_ids, long_special = corpus(rows=2, length=512)
    bert_style = MaskedDataset(long_ids, long_special, dynamic=False, copies=10, **options)
    masks_seen = {tuple(bert_style.batch([0], e)[1][0].tolist()) for e in range(40)}
    assert len(masks_seen) == 10  # BERT: ten masks per sequence over forty epochs


def test_strategy_names_and_validation():
    names = ["80/10/10", "100/0/0", "80/0/20", "80/20/0", "0/20/80", "0/0/100"]
    assert [s.name for s in ABLATION_STRATEGIES] == names
    assert [MaskingStrategy.from_name(n) for n in names] == list(ABLATION_STRATEGIES)
    assert BERT_MASKING == MaskingStrategy(mask=0.8, same=0.1, random=0.1)
    with pytest.raises(ValueError, match="summing to 1"):
        MaskingStrategy(0.8, 0.1, 0.2)


def test_bad_inputs_raise():
    ids = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="integer"):
        mask_tokens(ids.float(), mask_token_id=1, vocab_size=10)
    with pytest.raises(ValueError, match="special_tokens_mask of shape"):
        mask_tokens(ids, mask_token_id=1, vocab_size=10, special_tokens_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask_token_id"):
        mask_tokens(ids, mask_token_id=10, vocab_size=10)
    with pytest.raises(ValueError, match="mlm_probability"):
        mask_tokens(ids, mask_token_id=1, vocab_size=10, mlm_probability=1.5)
