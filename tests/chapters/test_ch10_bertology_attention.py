"""Chapter 10's inputs: documentation pairs framed as BERT's, masked sentences as in pretraining, word maps."""

import copy
from collections import Counter

import pytest
import torch
import transformers

from lecture_lib.analysis import head_classes
from lecture_lib.analysis.attention_stats import attention_maps
from lecture_lib.analysis.head_classes import pattern_shares
from lecture_lib.analysis.head_importance import head_importance, pruning_order
from lecture_lib.analysis.syntactic_heads import align_words, syntactic_heads, word_attention
from lecture_lib.chapters.ch10_bertology_attention import (
    DEPENDENCY_RELATIONS,
    chapter_config,
    documentation_pairs,
    gated_task_loss,
    iterative_pruning_order,
    masked_lm_forward,
    masked_sentences,
    mlm_loss,
    parser_scores,
    pattern_fractions,
    rare_token_null,
    shuffled_within_rows,
    similarity_forward,
    similarity_pairs,
    summed_row_attention,
    task_pruning,
    threshold_for_few_heterogeneous,
    token_frequencies,
    word_maps,
)
from lecture_lib.chapters.course_language import build_tasks
from lecture_lib.data.corpus import load_corpus
from lecture_lib.data.synthetic import SyntheticLanguage
from lecture_lib.finetuning.finetune import finetune, finetune_budget, new_head, score
from lecture_lib.models.bert import BertConfig, BertForPreTraining, BertModel
from lecture_lib.pretraining import PretrainResult
from lecture_lib.tokenization.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tokenizer(minilm):
    return WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")


def test_documentation_pairs_are_framed_as_transformers_frames_them(tokenizer, minilm):
    pairs = documentation_pairs(tokenizer, chapter_config(pairs=6, max_length=40))
    theirs = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    assert pairs["input_ids"].shape[0] == 6 and pairs["input_ids"].shape[1] <= 40
    for row in range(6):
        n = int(pairs["attention_mask"][row].sum())
        ids = pairs["input_ids"][row, :n].tolist()
        first_sep = ids.index(tokenizer.sep_token_id)
        a, b = (theirs.decode(part) for part in (ids[1:first_sep], ids[first_sep + 1 : -1]))
        encoded = theirs(a, b)
        assert ids == encoded["input_ids"] and pairs["token_type_ids"][row, :n].tolist() == encoded["token_type_ids"]
        assert pairs["special_tokens_mask"][row].nonzero().flatten().tolist() == [0, first_sep, n - 1]
        assert (pairs["input_ids"][row, n:] == tokenizer.pad_token_id).all()


def test_token_frequencies_count_the_documentation(tokenizer):
    frequency = token_frequencies(tokenizer)
    counts = Counter(i for doc in load_corpus()["sentences"][:50] for s in doc for i in tokenizer.encode(s))
    token, count = counts.most_common(1)[0]
    assert frequency.shape == (tokenizer.vocab_size,) and frequency[token] >= count
    assert frequency[tokenizer.cls_token_id] == 0 and int(frequency.sum()) > 100_000


def test_masked_sentences_select_words_only_and_keep_the_originals_as_labels(tokenizer):
    sentences = SyntheticLanguage(0).sentences(40, seed=5)
    result = PretrainResult(model=None, tokenizer=tokenizer, history=None, config=None)
    batches = masked_sentences(result, sentences, seed=0, batch_size=16)
    assert [len(b["input_ids"]) for b in batches] == [16, 16, 8]
    for batch in batches:
        selected = batch["labels"] != -100
        assert selected.any()
        assert not (selected & (batch["attention_mask"] == 0)).any()
        assert not (selected[:, 0]).any()  # never [CLS]
        kept = ~selected & (batch["attention_mask"] == 1)
        assert not (batch["input_ids"][kept] == tokenizer.mask_token_id).any()
    again = masked_sentences(result, sentences, seed=0, batch_size=16)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(batches, again))


def test_word_maps_of_a_padded_batch_are_those_of_each_sentence_alone(tokenizer):
    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            initializer_range=0.5,
        )
    )
    sentences = SyntheticLanguage(0).sentences(5, seed=6)
    batched = word_maps(model, tokenizer, sentences, batch_size=3)
    for sentence, maps in zip(sentences, batched):
        ids, word_of_piece = align_words(tokenizer, sentence.words)
        alone = attention_maps(model, torch.tensor([ids]))[0]
        torch.testing.assert_close(maps, word_attention(alone, word_of_piece), atol=1e-5, rtol=1e-5)
        assert maps.shape == (2, 2, len(sentence), len(sentence))


def test_exercise_1_iterative_pruning_recomputes_the_importance_at_the_pruned_gates(float64):
    """Exercise 1: the first two heads removed are the one-shot order's (the curves coincide at 0 and 2
    heads); every later importance is |∂L/∂ξ_h| at the pruned model's gates, checked here against a central
    finite difference of the loss; each head is removed once."""
    tokenizer = WordPieceTokenizer.train([s.text for s in SyntheticLanguage(0).sentences(200, seed=0)], 120)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
            initializer_range=0.5,
        )
    ).eval()
    result = PretrainResult(model=model, tokenizer=tokenizer, history=None, config=None)
    batches = masked_sentences(result, SyntheticLanguage(0).sentences(16, seed=7), seed=0, batch_size=8)
    order = iterative_pruning_order(model, batches, mlm_loss, step=2)
    assert sorted(order.tolist()) == list(range(8))
    assert order[:2].tolist() == pruning_order(head_importance(model, batches, mlm_loss))[:2].tolist()

    mask = torch.ones(2, 4, dtype=torch.float64)
    mask.view(-1)[order[:4]] = 0  # the model after two steps
    gradient = head_importance(model, batches[:1], mlm_loss, normalize=False, at=mask).view(-1)
    h = 1e-6
    for head in range(8):
        up, down = mask.clone(), mask.clone()
        up.view(-1)[head] += h
        down.view(-1)[head] -= h
        with torch.no_grad():
            by_difference = (float(mlm_loss(model, batches[0], up)) - float(mlm_loss(model, batches[0], down))) / (
                2 * h
            )
        assert abs(by_difference) == pytest.approx(float(gradient[head]), rel=1e-5, abs=1e-9)


def test_similarity_pairs_frame_each_sentence_alone_and_pair_row_i_with_row_n_plus_i(tokenizer, minilm):
    """Rows i and n + i are consecutive sentences of one document, each framed [CLS] s [SEP] as transformers
    frames a single text."""
    batch = similarity_pairs(tokenizer, seed=1, pairs=5, max_length=40)
    theirs = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    assert batch["input_ids"].shape[0] == 10 and batch["input_ids"].shape[1] <= 40
    texts = []
    for row in range(10):
        n = int(batch["attention_mask"][row].sum())
        ids = batch["input_ids"][row, :n].tolist()
        texts.append(theirs.decode(ids[1:-1]))
        assert ids == theirs(texts[-1])["input_ids"]
    documents = [[theirs.decode(tokenizer.encode(s)) for s in d] for d in load_corpus()["sentences"]]
    for i in range(5):
        assert any(texts[i] == d[k] and texts[5 + i] == d[k + 1] for d in documents for k in range(len(d) - 1))


def test_similarity_forward_is_one_minus_cosine_of_mean_pooled_pairs(tokenizer, minilm):
    model = BertModel.from_pretrained(minilm).eval()
    batch = similarity_pairs(tokenizer, seed=0, pairs=2, max_length=24)
    loss, attentions = similarity_forward(model)(batch)
    assert len(attentions) == model.config.num_hidden_layers and attentions[0].requires_grad
    pooled = []
    for row in range(4):
        n = int(batch["attention_mask"][row].sum())
        with torch.no_grad():
            pooled.append(model(batch["input_ids"][row : row + 1, :n]).last_hidden_state.mean(1))
    expected = sum(1 - torch.nn.functional.cosine_similarity(pooled[i], pooled[2 + i]) for i in range(2))
    assert float(loss.detach()) == pytest.approx(float(expected), abs=1e-5)


def test_parser_scores_split_the_sentences_and_read_the_gold_tree_from_a_head_that_holds_it():
    torch.manual_seed(0)
    sentences = SyntheticLanguage(0).sentences(24, seed=2)
    maps = []
    for s in sentences:
        n = len(s.words)
        m = torch.rand(2, 2, n, n)
        for i, h in enumerate(s.heads):
            m[0, 1, i, (h - 1) if h > 0 else i] = 2.0  # head 0-1 points each word to its gold head
        maps.append(m)
    scores = parser_scores(maps, sentences, seed=0, train=16)
    assert scores.probe == 1.0 and scores.single == 1.0 and scores.single_head == ("dependent->head", 0, 1)
    assert scores.right_branching < 1.0
    with pytest.raises(ValueError, match="train"):
        parser_scores(maps, sentences, seed=0, train=24)


def test_exercise_2_masked_lm_forward_gives_the_mlm_loss_and_every_layers_attention():
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
        )
    ).eval()
    ids = torch.tensor([[2, 7, 4, 9, 3], [2, 5, 6, 4, 3]])
    labels = torch.full_like(ids, -100)
    labels[:, 2], labels[1, 3] = 11, 12
    batch = dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
    loss, attentions = masked_lm_forward(model)(batch)
    logits = model(ids).prediction_logits
    expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert len(attentions) == 2 and attentions[1].shape == (2, 2, 5, 5)


def test_exercise_3_lowering_dominant_empties_heterogeneous(minilm):
    """Exercise 3, on section 3's 48 documentation pairs: heterogeneous holds 65% of MiniLM's maps at 0.5,
    52% at 0.45 and 34% at 0.4, the first threshold of the sweep below one half; the shares match a direct
    reading of the rule (heterogeneous: no share, nor vertical + diagonal with both >= 0.2, reaches it)."""
    model, tokenizer = (
        BertModel.from_pretrained(minilm).eval(),
        WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt"),
    )
    pairs = documentation_pairs(tokenizer, chapter_config(pairs=48, max_length=64))
    maps = attention_maps(model, pairs["input_ids"], pairs["attention_mask"], pairs["token_type_ids"])
    shares = pattern_shares(maps, pairs["attention_mask"], pairs["special_tokens_mask"], pairs["token_type_ids"])
    v, d, b = shares["vertical"], shares["diagonal"], shares["block"]
    mixed = torch.where((v >= 0.2) & (d >= 0.2), v + d, torch.zeros_like(v))
    largest = torch.stack([v, d, b, mixed]).max(0).values
    fractions = {t: pattern_fractions(shares, t)["heterogeneous"] for t in (0.5, 0.45, 0.4)}
    for t, fraction in fractions.items():
        assert fraction == pytest.approx(float((largest < t).double().mean())), t
    assert [round(f, 2) for f in fractions.values()] == [0.65, 0.52, 0.34], fractions
    assert threshold_for_few_heterogeneous(shares) == 0.4
    assert head_classes.DOMINANT == 0.5  # put back


def test_exercise_4_summing_a_words_rows_leaves_clark_s_table_unchanged(tokenizer):
    """Exercise 4: summed rows are the mean rows times each word's piece count; the argmax of every row, hence
    every relation's best head and accuracy, is unchanged."""
    torch.manual_seed(0)
    model = BertModel(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            initializer_range=0.5,
        )
    )
    sentences = SyntheticLanguage(0).sentences(60, seed=6)
    mean_rows, sum_rows = (
        word_maps(model, tokenizer, sentences, to_words=f) for f in (word_attention, summed_row_attention)
    )
    split = 0
    for sentence, mean, summed in zip(sentences, mean_rows, sum_rows):
        _, word_of_piece = align_words(tokenizer, sentence.words)
        pieces = torch.bincount(torch.tensor([w for w in word_of_piece if w >= 0])).to(mean.dtype)  # -1: specials
        split += int((pieces > 1).sum())
        torch.testing.assert_close(summed, mean * pieces[:, None], atol=1e-6, rtol=1e-5)
    assert split > 20  # words of several pieces, whose rows the two conventions weigh differently
    trees = [s.heads for s in sentences], [s.deprels for s in sentences]
    assert syntactic_heads(sum_rows, *trees, DEPENDENCY_RELATIONS) == syntactic_heads(
        mean_rows, *trees, DEPENDENCY_RELATIONS
    )


def _tiny_course() -> PretrainResult:
    tokenizer = WordPieceTokenizer.train([s.text for s in SyntheticLanguage(0).sentences(2000, seed=0)], 600)
    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=32,
        )
    )
    return PretrainResult(model=model, tokenizer=tokenizer, history=None, config=None)


def test_task_pruning_fine_tunes_a_copy_and_scores_its_heads_on_the_task_loss():
    """Michel et al.'s setting: the heads of a model fine-tuned on the task, scored by that task's loss. The
    course model is left as it was; the same fine-tuning seed gives the same scores; the scores are those of
    ``head_importance`` on the task loss of a model fine-tuned alike."""
    course = _tiny_course()
    before = {k: v.clone() for k, v in course.model.state_dict().items()}
    config = finetune_budget(steps=2, batch_size=8)
    run = task_pruning(course, "acceptability", config, seed=3, random_orders=2, batches=1, batch_size=8)
    assert set(run.scores) == {"accuracy", "mcc"}
    assert run.importance.shape == (2, 4) and bool((run.importance >= 0).all()) and float(run.importance.sum()) > 0
    assert all(torch.equal(v, course.model.state_dict()[k]) for k, v in before.items())
    task = build_tasks(course.tokenizer)["acceptability"]
    tuned = finetune(task, new_head(task, course.model.bert, seed=3), config, 3).model.eval()
    expected = head_importance(tuned, [task.train.batch(torch.arange(8))], gated_task_loss, normalize=False)
    torch.testing.assert_close(run.importance, expected)
    other = task_pruning(course, "acceptability", config, seed=4, random_orders=2, batches=1, batch_size=8)
    assert not torch.equal(run.importance, other.importance)  # the seed decides the fine-tuning


def test_task_pruning_curve_scores_the_model_with_its_least_important_heads_cut_out():
    """The curve's accuracies, from gated heads, equal those of copies whose heads ``prune_heads`` cut out of
    the weights; it starts at the fine-tuned score and ends at no head at all; the random orders' mean lies
    between the extremes of what any order can score."""
    course = _tiny_course()
    config = finetune_budget(steps=20, batch_size=8, lr=1e-3)
    run = task_pruning(course, "acceptability", config, seed=1, random_orders=2, batches=1, batch_size=8)
    assert len(run.by_importance) == len(run.at_random) == 9
    assert run.by_importance[0] == run.at_random[0] == run.scores["accuracy"]
    assert run.by_importance[-1] == pytest.approx(run.at_random[-1])  # every head gone, whatever the order
    task = build_tasks(course.tokenizer)["acceptability"]
    tuned = finetune(task, new_head(task, course.model.bert, seed=1), config, 1).model.eval()
    order = pruning_order(run.importance).tolist()
    for removed in (1, 2, 3):  # fewer than a layer's 4 heads: prune_heads keeps one per layer
        cut = copy.deepcopy(tuned)
        heads: dict[int, list[int]] = {}
        for flat in order[:removed]:
            heads.setdefault(flat // 4, []).append(flat % 4)
        cut.bert.prune_heads(heads)
        assert score(task, cut)["accuracy"] == pytest.approx(run.by_importance[removed], abs=1e-9)
    lost_by_importance, lost_at_random = run.accuracy_lost(3)
    assert lost_by_importance == pytest.approx(run.by_importance[0] - run.by_importance[3])
    assert lost_at_random == pytest.approx(run.at_random[0] - run.at_random[3])


def test_task_pruning_scores_the_heads_where_fine_tuning_left_the_model():
    """On a GPU the fine-tuned copy stays there: its batches must follow it (the fake accelerator fails as CUDA)."""
    from tests.fake_accelerator import FakeAccelerator

    course = _tiny_course()
    with FakeAccelerator():
        run = task_pruning(
            course, "acceptability", finetune_budget(steps=2, batch_size=8), random_orders=1, batches=1, batch_size=8
        )
    assert run.importance.shape == (2, 4)


def test_shuffling_within_rows_permutes_the_kept_entries_only():
    values = torch.arange(24).reshape(3, 8)
    keep = torch.rand(3, 8, generator=torch.Generator().manual_seed(1)) < 0.6
    out = shuffled_within_rows(values, keep, torch.Generator().manual_seed(0))
    assert torch.equal(out[~keep], values[~keep])
    for row in range(3):
        assert sorted(out[row][keep[row]].tolist()) == sorted(values[row][keep[row]].tolist())
    assert not torch.equal(out, values)


def test_the_rare_token_null_finds_no_head_on_a_word_drawn_at_random():
    """A head that always looks at the rarest word scores 1 on the real frequencies; with them shuffled, its
    argmax falls on the "rarest" word about once in n, and so does every head's: the null is near 1/n."""
    batch, length, words = 200, 12, 10  # [CLS] w1..w10 [SEP]
    special = torch.zeros(batch, length, dtype=torch.bool)
    special[:, [0, -1]] = True
    mask = torch.ones(batch, length, dtype=torch.long)
    frequency = torch.randint(1, 1000, (batch, length), generator=torch.Generator().manual_seed(0))
    rarest = frequency.masked_fill(special, 10**6).argmin(-1)
    attentions = torch.zeros(batch, 1, 2, length, length)
    attentions[torch.arange(batch), 0, 0, :, rarest] = 1.0  # head 0: every query on the rarest word
    attentions[:, 0, 1, :, 1] = 1.0  # head 1: every query on the first word
    assert head_classes.voita_classes(attentions, mask, special, frequency).rare.max() == 1.0
    null = rare_token_null(attentions, mask, special, frequency, seed=0)
    assert abs(null - 1 / words) < 0.08
