"""lecture_lib.pretraining: the nested config, the data pipeline, evaluation and fill-mask against transformers,
the disk cache, and the command line (its files load in transformers)."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
import transformers

from lecture_lib import pretraining as pretraining_module
from lecture_lib.analysis.fill_mask import fill_mask
from lecture_lib.chapters.ch04_bert_pretraining import chapter_config, main, small_pretrained_bert
from lecture_lib.config import FieldError, merge_dicts
from lecture_lib.labels import IGNORE_INDEX
from lecture_lib.models.bert import BertForPreTraining
from lecture_lib.objectives.sentence_pairs import IS_NEXT, NOT_NEXT
from lecture_lib.pretraining import (
    DataConfig,
    ObjectiveConfig,
    PretrainConfig,
    PretrainingData,
    check_output_folder,
    config_leaves,
    evaluate,
    evaluate_at_masks,
    evaluate_left_to_right,
    left_to_right_logits,
    left_to_right_loss,
    masked_lm_counts,
    unmasked_text,
    write_recipe,
)
from lecture_lib.pretraining import run as pretraining_run
from lecture_lib.tokenization import WordPieceTokenizer
from tests.command_line import (
    MISSING_DEVICE,
    Built,
    assert_refused,
    recipe_passed_to_pretrain,
    refused_in_process,
    rule_rows,
    run_command,
    trap,
    trap_pretraining,
)

TINY = dict(
    model=dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32),
    data=dict(seq_len=32, eval_pairs=64),
    train=dict(batch_size=8, steps=3, warmup_steps=1, eval_every=0),
)


@pytest.fixture(autouse=True)
def _float32():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(scope="module")
def real_vocab_data(minilm):
    """Pairs tokenized with bert-base-uncased's real vocabulary (no tokenizer training: fast)."""
    tokenizer = WordPieceTokenizer.from_vocab_file(minilm / "vocab.txt")
    config = PretrainConfig.from_dict(TINY, dict(data=dict(vocab_size=tokenizer.vocab_size)))
    return PretrainingData.from_corpus(config, tokenizer=tokenizer)


def test_batches_are_deterministic_masked_and_reshuffled_each_epoch(real_vocab_data):
    data = real_vocab_data
    first = data.batch(0)
    assert all(torch.equal(first[k], v) for k, v in data.batch(0).items())
    assert set(first) == {"input_ids", "attention_mask", "token_type_ids", "labels", "next_sentence_label"}
    selected = first["labels"] != IGNORE_INDEX
    specials = torch.isin(first["input_ids"], torch.tensor(data.tokenizer.special_token_ids))
    original = torch.where(selected, first["labels"], first["input_ids"])
    assert not torch.isin(original[selected], torch.tensor(data.tokenizer.special_token_ids)).any()
    assert (first["input_ids"][selected] == data.tokenizer.mask_token_id).float().mean() > 0.5
    assert not (selected & (first["attention_mask"] == 0)).any()
    assert specials[:, 0].all()  # [CLS] first
    next_epoch = data.batch(data.batches_per_epoch)
    assert not torch.equal(next_epoch["labels"], first["labels"])  # another order, other masks
    labels = data.train["next_sentence_label"].float()
    assert set(labels.unique().tolist()) == {IS_NEXT, NOT_NEXT} and 0.35 < labels.mean() < 0.7


def test_held_out_pairs_never_appear_in_training(real_vocab_data):
    train_rows = {tuple(r.tolist()) for r in real_vocab_data.train["input_ids"]}
    assert not any(tuple(r.tolist()) in train_rows for r in real_vocab_data.test["input_ids"])


def test_evaluate_and_fill_mask_agree_with_transformers(real_vocab_data, minilm):
    data = real_vocab_data
    torch.manual_seed(0)
    model = BertForPreTraining(data.config.model).eval()
    batches = data.eval_batches()
    ours = evaluate(model, batches)
    hf = model.to_hf(attn_implementation="sdpa")
    correct = total = nsp = loss_sum = 0
    with torch.no_grad():
        for batch in batches:
            out = hf(**{k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label")})
            selected = batch["labels"] != IGNORE_INDEX
            logits, targets = out.prediction_logits[selected], batch["labels"][selected]
            correct += int((logits.argmax(-1) == targets).sum())
            total += len(targets)
            loss_sum += torch.nn.functional.cross_entropy(logits, targets, reduction="sum").item()
            nsp += int((out.seq_relationship_logits.argmax(-1) == batch["next_sentence_label"]).sum())
    assert ours["mlm_accuracy"] == correct / total
    # the course's one masked-LM accuracy counts the same, on the selected positions' logits or on all of them
    assert masked_lm_counts(model, batches, masked_only=True) == masked_lm_counts(model, batches) == (correct, total)
    assert ours["mlm_loss"] == pytest.approx(loss_sum / total, rel=1e-4)
    assert ours["nsp_accuracy"] == nsp / len(data.test["input_ids"])

    hf_tokenizer = transformers.BertTokenizerFast(str(minilm / "vocab.txt"))
    masked_lm = transformers.BertForMaskedLM(hf.config).eval()
    missing, unexpected = masked_lm.load_state_dict(hf.state_dict(), strict=False)
    assert not missing and set(unexpected) == {
        "bert.pooler.dense.weight",
        "bert.pooler.dense.bias",
        "cls.seq_relationship.weight",
        "cls.seq_relationship.bias",
    }
    pipe = transformers.pipeline("fill-mask", model=masked_lm, tokenizer=hf_tokenizer, device="cpu")
    text = "the function returns a [MASK] of the values."
    theirs = [(r["token_str"].replace(" ", ""), r["score"]) for r in pipe(text, top_k=5)]
    ours_top = fill_mask(model, data.tokenizer, text, top_k=5)[0]
    assert [t for t, _ in ours_top] == [t for t, _ in theirs]
    assert [p for _, p in ours_top] == pytest.approx([p for _, p in theirs], rel=1e-4)


def test_accuracy_at_masks_and_its_unigram_baseline_agree_with_transformers(real_vocab_data):
    data = real_vocab_data
    torch.manual_seed(1)
    model = BertForPreTraining(data.config.model).eval()
    batches = data.eval_batches()
    frequent = data.most_frequent_token()
    ours = evaluate_at_masks(model, batches, data.tokenizer.mask_token_id, frequent)
    hf = model.to_hf(attn_implementation="sdpa")
    correct = guessed = total = 0
    with torch.no_grad():
        for batch in batches:
            out = hf(**{k: v for k, v in batch.items() if k not in ("labels", "next_sentence_label")})
            at_masks = batch["input_ids"] == data.tokenizer.mask_token_id
            targets = batch["labels"][at_masks]
            correct += int((out.prediction_logits[at_masks].argmax(-1) == targets).sum())
            guessed += int((targets == frequent).sum())
            total += len(targets)
    assert ours == {"mask_accuracy": pytest.approx(correct / total), "unigram_at_masks": pytest.approx(guessed / total)}
    text = data.train["input_ids"][~data.train["special_tokens_mask"]].tolist()
    assert text.count(frequent) == max(text.count(t) for t in set(text))


def test_the_left_to_right_lm_equals_transformers_causal_bert(real_vocab_data):
    data = real_vocab_data
    torch.manual_seed(2)
    model = BertForPreTraining(data.config.model).eval()
    batch = data.eval_batches(batch_size=8)[0]
    text = unmasked_text(batch)
    assert torch.equal(text[batch["labels"] == IGNORE_INDEX], batch["input_ids"][batch["labels"] == IGNORE_INDEX])
    hf_config = model.to_hf(attn_implementation="eager").config
    hf_config.is_decoder = True  # BertLMHeadModel: causal self-attention, next-token loss
    decoder = transformers.BertLMHeadModel(hf_config).eval()
    missing, _ = decoder.load_state_dict(model.to_hf().state_dict(), strict=False)
    assert not missing
    with torch.no_grad():
        ours = left_to_right_logits(model, batch)
        targets = text.masked_fill(batch["attention_mask"] == 0, IGNORE_INDEX)
        theirs = decoder(
            input_ids=text,
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            labels=targets,
        )
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(ours[real], theirs.logits[real], atol=1e-4, rtol=1e-4)
        assert left_to_right_loss(model, batch).item() == pytest.approx(theirs.loss.item(), rel=1e-4)
        # position i sees no later token: the logits equal a bidirectional run on the prefix 0..i
        prefix = {k: v[:1, :6] for k, v in batch.items() if k in ("attention_mask", "token_type_ids")}
        assert bool(real[0, :6].all())
        bidirectional = model(text[:1, :6], **prefix).prediction_logits[0, -1]
        torch.testing.assert_close(ours[0, 5], bidirectional, atol=1e-5, rtol=1e-5)
        scores = evaluate_left_to_right(model, [batch], data.tokenizer.mask_token_id)
    at_masks = batch["input_ids"][:, 1:] == data.tokenizer.mask_token_id  # position 0 is [CLS], never masked
    guesses = ours[:, :-1].argmax(-1)[at_masks]
    assert scores["mask_accuracy"] == pytest.approx((guesses == batch["labels"][:, 1:][at_masks]).float().mean().item())
    assert scores["lm_loss"] == pytest.approx(theirs.loss.item(), rel=1e-4)


def _flags(values: dict, prefix: str = "") -> list[str]:
    """``{"train": {"steps": 3}}`` as ``["--train.steps=3"]``."""
    return [
        flag
        for name, value in values.items()
        for flag in (_flags(value, f"{prefix}{name}.") if isinstance(value, dict) else [f"--{prefix}{name}={value}"])
    ]


def test_command_line_writes_a_checkpoint_transformers_reads_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "--out",
        str(out),
        "--profile",
        "quick",
        "--no-progress",
        "--checkpoint-every",
        "2",
        *_flags(merge_dicts(TINY, dict(data=dict(vocab_size=600)))),
        "--objective.pairs",
        "none",
    ]
    result = main(argv)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["steps"] == 3 and "mlm_accuracy" in summary and "nsp_accuracy" not in summary
    assert {p.name for p in out.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "history.json",
        "pretrain_config.json",
        "checkpoint",
    }
    assert result.tokenizer.vocab_size == 600 and len(result.history.loss) == 3
    assert result.config.objective.pairs is None and result.config.model.hidden_size == 16

    theirs = transformers.BertForPreTraining.from_pretrained(out, attn_implementation="eager").eval()
    assert (theirs.config.vocab_size, theirs.config.max_position_embeddings) == (600, 32)
    hf_tokenizer = transformers.BertTokenizerFast(str(out / "vocab.txt"))
    text = "Return the number of items in a container."
    assert hf_tokenizer(text)["input_ids"] == result.tokenizer.encode(text, add_special_tokens=True)
    ids = torch.tensor([result.tokenizer.encode(text, add_special_tokens=True)])
    with torch.no_grad():
        torch.testing.assert_close(result.model(ids).prediction_logits, theirs(ids).prediction_logits)

    again = main(argv)  # the checkpoint says "done": nothing is retrained
    assert again.history == result.history
    for a, b in zip(again.model.parameters(), result.model.parameters()):
        assert torch.equal(a, b)


def test_command_line_has_one_flag_per_leaf_and_keeps_the_other_defaults(monkeypatch, capsys):
    monkeypatch.setenv("LECTURE_PROFILE", "quick")
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert help_text.startswith("usage: python -m lecture_lib.chapters.ch04_bert_pretraining")
    flat = " ".join(help_text.split())  # each flag's rule, where it has one, then its default
    for shown in (
        "--train.steps INT >= 1; default: 400",
        "--objective.mlm_probability FLOAT in [0, 1]; default: 0.15",
        "--objective.pairs STR|none one of nsp, sop; default: nsp",
        "--objective.dynamic_masking BOOL default",
    ):
        assert shown in flat
    leaves = [".".join(path) for path, _ in config_leaves()]
    assert len(leaves) == len(set(leaves)) > 25
    assert all(f"--{leaf} " in help_text for leaf in leaves)
    assert "--model.vocab_size" not in help_text and "--model.max_position_embeddings" not in help_text

    recipe = recipe_passed_to_pretrain(
        monkeypatch,
        main,
        [
            "--out",
            "x",
            "--model.hidden_size",
            "24",
            "--train.steps",
            "7",
            "--objective.pairs",
            "none",
            "--train.num_threads",
            "none",
            "--objective.dynamic_masking",
            "false",
            "--seed",
            "5",
        ],
    )
    expected = chapter_config()
    expected = replace(
        expected,
        seed=5,
        model=replace(expected.model, hidden_size=24),
        train=replace(expected.train, steps=7, num_threads=None),
        objective=replace(expected.objective, pairs=None, dynamic_masking=False),
    )
    assert recipe == expected


def test_small_pretrained_bert_is_trained_once_then_read_from_the_cache(tmp_path, monkeypatch, real_vocab_data):
    monkeypatch.setenv("LECTURE_CACHE", str(tmp_path))
    monkeypatch.setattr(PretrainingData, "from_corpus", lambda config: real_vocab_data)  # no tokenizer training
    config = real_vocab_data.config
    first = small_pretrained_bert(config)
    assert first.path.parent == tmp_path and first.path.name.startswith("cached_pretraining-")
    assert not (first.path / "checkpoint").exists()  # optimizer state is not kept in the cache

    def no_training(*args, **kwargs):
        raise AssertionError("the cache should have been used")

    monkeypatch.setattr(pretraining_run, "pretrain", no_training)
    second = small_pretrained_bert(config)
    assert second.history == first.history and second.config == config
    for a, b in zip(second.model.parameters(), first.model.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(AssertionError, match="cache"):
        small_pretrained_bert(replace(config, seed=1))  # another recipe


def test_config_round_trips_through_json_and_derives_the_model_sizes_from_the_data():
    config = PretrainConfig.from_dict(TINY, dict(data=dict(vocab_size=500), objective=dict(pairs=None)))
    assert (config.model.vocab_size, config.model.max_position_embeddings) == (500, 32)
    assert config.model.num_attention_heads == 2 and config.train.steps == 3 and config.data.eval_pairs == 64
    assert PretrainConfig.from_dict(json.loads(json.dumps(asdict(config)))) == config
    assert merge_dicts(dict(a=dict(x=1, y=2), b=3), dict(a=dict(y=4)), dict(b=None)) == dict(a=dict(x=1, y=4), b=None)


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="MASK/SAME/RND"):
        ObjectiveConfig(masking="80-10-10")
    with pytest.raises(FieldError, match="pairs: expected one of nsp, sop, got 'rtd'"):
        ObjectiveConfig(pairs="rtd")
    with pytest.raises(FieldError, match=r"^train.steps: expected a value >= 1, got 0$"):
        PretrainConfig.from_dict(dict(train=dict(steps=0)))  # the loop's own rule, checked in the recipe
    with pytest.raises(ValueError, match="expected model.model_type in \\['albert', 'bert'\\], got 'gpt2'"):
        PretrainConfig.from_dict(dict(model=dict(model_type="gpt2")))
    with pytest.raises(FieldError, match=r"seq_len: expected a value >= 5 \(\[CLS\], two \[SEP\]"):
        DataConfig(seq_len=4)
    with pytest.raises(ValueError, match="model.max_position_embeddings = data.seq_len = 64, got 128"):
        PretrainConfig.from_dict(dict(model=dict(max_position_embeddings=128)))
    with pytest.raises(ValueError, match=r"unknown TrainConfig fields \['stpes'\]"):
        PretrainConfig.from_dict(dict(train=dict(stpes=3)))
    with pytest.raises(SystemExit):
        main(["--out", "x", "--objective.dynamic_masking", "maybe"])
    sop = PretrainConfig.from_dict(dict(objective=dict(pairs="sop")))
    with pytest.raises(
        ValueError, match="negative_sources pick NSP's NotNext segments; the objective's pairs are 'sop'"
    ):
        PretrainingData(sop, [["a b", "c d"]] * 2, [["a b", "c d"]] * 2, negative_sources=([[1], [0]], [[1], [0]]))


# ---------------------------------------------------------------- bad input, refused before any work

# The rows; test_every_constrained_flag_is_refused_... adds one per rule of the recipe's fields.
BAD_INPUT = [
    (["--train.steps", "-5"], "--train.steps", "expected a value >= 1, got -5"),
    (["--objective.mlm_probability", "1.5"], "--objective.mlm_probability", "expected a value in [0, 1], got 1.5"),
    (
        ["--data.seq_len", "0"],
        "--data.seq_len",
        "expected a value >= 5 ([CLS], two [SEP] and a token per segment), got 0",
    ),
    (
        ["--model.num_attention_heads", "5"],
        "--model.num_attention_heads",
        "hidden_size 64 is not divisible by num_attention_heads 5",
    ),
    (
        ["--model.hidden_size", "30", "--model.num_attention_heads", "4"],
        "--model.num_attention_heads and --model.hidden_size",
        "hidden_size 30 is not divisible",
    ),
    (["--train.lr", "abc"], "--train.lr", "invalid float value: 'abc'"),
    (["--train.num_threads", "abc"], "--train.num_threads", "invalid int or none value: 'abc'"),
    (["--objective.masking", "80/20/10"], "--objective.masking", "expected non-negative fractions"),
    (["--device", MISSING_DEVICE], "--device", f"device {MISSING_DEVICE!r} is not available here; available: cpu"),
    (["--checkpoint-every", "-1"], "--checkpoint-every", "expected a value >= 0, got -1"),
]


@pytest.fixture
def trapped(monkeypatch, tmp_path):
    return trap_pretraining(monkeypatch, tmp_path)


def test_every_constrained_flag_is_refused_in_one_line_before_any_work(trapped, capsys):
    rows = BAD_INPUT + rule_rows(chapter_config)
    assert len(rows) > 35
    for argv, flag, reason in rows:
        assert_refused(*refused_in_process(main, ["--out", "run", *argv], capsys), flag, reason)
    assert not any(trapped.iterdir()), "no output folder, no cache entry"


def test_the_command_refuses_bad_input_as_a_user_sees_it(tmp_path):
    """Three rows as a subprocess: the real stderr, exit status, and nothing written (the folder stays empty)."""
    (tmp_path / "notes.txt").write_text("mine")
    rows = BAD_INPUT[:2] + [(["--out", "notes.txt/run"], "--out", "notes.txt/run is under notes.txt, which is a file")]
    for argv, flag, reason in rows:
        result = run_command("lecture_lib.chapters.ch04_bert_pretraining", ["--out", "run", *argv], tmp_path)
        assert_refused(result.returncode, result.stderr, result.stdout, flag, reason)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_the_output_folder_is_checked_before_any_work(trapped, capsys):
    (trapped / "notes.txt").write_text("mine")
    (trapped / "mixed").mkdir()
    (trapped / "mixed" / "data.csv").write_text("a,b\n")
    write_recipe(chapter_config(seed=1), trapped / "other")
    (trapped / "broken").mkdir()
    (trapped / "broken" / "pretrain_config.json").write_text("{cut sho")
    rows = [
        ("notes.txt/run", "notes.txt/run is under notes.txt, which is a file"),
        ("notes.txt", "notes.txt is a file, not a folder"),
        ("mixed", "mixed holds data.csv, which this command does not write: choose a new or empty folder"),
        ("other", "other holds a run of another recipe (seed 1 there, 0 here): give its flags to resume it"),
        ("broken", "broken/pretrain_config.json is not a recipe this command wrote"),
    ]
    if Path("/sys").is_dir():  # read-only even for root: a write is tried, not the permissions read
        rows.append(("/sys/lecture-run", "cannot write in /sys: "))
    for out, reason in rows:
        assert_refused(*refused_in_process(main, ["--out", out], capsys), "--out", reason)
    assert sorted(p.name for p in trapped.iterdir()) == ["broken", "mixed", "notes.txt", "other"]
    with pytest.raises(Built):  # the same recipe resumes: the checks pass and the run starts
        main(["--out", "other", "--seed", "1"])


def test_a_run_says_its_recipe_before_training_so_a_rerun_resumes_or_refuses(real_vocab_data, tmp_path, monkeypatch):
    config, out = real_vocab_data.config, tmp_path / "run"
    monkeypatch.setattr(pretraining_run, "train", trap)  # a kill at the first step
    with pytest.raises(Built):
        pretraining_module.pretrain(config, out_dir=out, data=real_vocab_data, progress=False)
    assert [p.name for p in out.iterdir()] == ["pretrain_config.json"]
    check_output_folder(out, config)
    with pytest.raises(ValueError, match=r"another recipe \(train.steps 3 there, 4 here\)"):
        check_output_folder(out, replace(config, train=replace(config.train, steps=4)))


ALBERT_TINY = merge_dicts(
    TINY, dict(model=dict(model_type="albert", embedding_size=8, num_hidden_layers=2), objective=dict(pairs="sop"))
)


def test_an_albert_pretrains_with_sentence_order_pairs_and_reloads(real_vocab_data, tmp_path):
    from lecture_lib.models.albert import AlbertConfig, AlbertForPreTraining
    from lecture_lib.pretraining import load_result, pretrain

    config = PretrainConfig.from_dict(ALBERT_TINY, dict(data=dict(vocab_size=real_vocab_data.tokenizer.vocab_size)))
    assert isinstance(config.model, AlbertConfig) and config.model.vocab_size == real_vocab_data.tokenizer.vocab_size
    data = PretrainingData.from_corpus(config, tokenizer=real_vocab_data.tokenizer)
    batch = data.batch(0)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels", "sentence_order_label"}
    labels = data.train["sentence_order_label"].float()
    assert set(labels.unique().tolist()) == {0, 1} and 0.35 < labels.mean() < 0.65
    result = pretrain(config, out_dir=tmp_path / "run", data=data, progress=False)
    assert isinstance(result.model, AlbertForPreTraining)
    metrics = evaluate(result.model, data.eval_batches())
    assert set(metrics) == {"mlm_loss", "mlm_accuracy", "sop_accuracy"}
    # the same accuracy by hand, from transformers' ALBERT holding the trained weights
    theirs = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "run").eval()
    right = 0
    with torch.no_grad():
        for batch in data.eval_batches():
            inputs = {k: v for k, v in batch.items() if k not in ("labels", "sentence_order_label")}
            right += int((theirs(**inputs).sop_logits.argmax(-1) == batch["sentence_order_label"]).sum())
    assert metrics["sop_accuracy"] == right / len(data.test["input_ids"])
    loaded = load_result(tmp_path / "run")
    assert loaded.config == config and isinstance(loaded.model, AlbertForPreTraining)
    for a, b in zip(loaded.model.parameters(), result.model.parameters()):
        assert torch.equal(a, b)


def test_config_leaves_follow_the_model_family():
    albert = PretrainConfig.from_dict(ALBERT_TINY)
    leaves = {".".join(path) for path, _ in config_leaves(albert)}
    assert {"model.embedding_size", "model.num_hidden_groups", "objective.pairs"} <= leaves
    assert "model.embedding_size" not in {".".join(path) for path, _ in config_leaves()}
