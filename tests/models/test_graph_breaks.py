"""A compiled pretraining step is one graph: BERT padded and unpadded, with the labelled positions and the packing
found before the step (``LabelledPositions.of``, ``Packing.of``), reads no value of the batch inside it.

``torch._dynamo.explain`` traces the step on the CPU and lists every graph break; a break is where a compiled
step would leave the graph for Python (on a GPU, also where the host waits for the device). The same compiled
step, backward included (``fullgraph=True`` refuses any break), gives the eager padded model's loss and every
gradient in float64.
"""

import pytest
import torch
import torch._dynamo

from lecture_lib.models.bert import BertConfig, BertForPreTraining
from lecture_lib.models.masked_lm import LabelledPositions
from lecture_lib.models.unpadding import Packing
from tests.models.test_unpadding import SMALL, pretraining_batch


def prepared(batch: dict, unpad: bool) -> dict:
    """What the host finds before the step: the labelled positions, and the packing when unpadded."""
    options = dict(masked_only=LabelledPositions.of(batch["labels"], batch["attention_mask"]))
    if unpad:
        options["unpad"] = Packing.of(batch["attention_mask"])
    return options


def explained(model: torch.nn.Module, batch: dict, options: dict):
    torch._dynamo.reset()
    return torch._dynamo.explain(lambda: model(**batch, **options).loss)()


@pytest.mark.parametrize("unpad", [False, True], ids=["padded", "unpadded"])
def test_the_training_forward_with_positions_found_before_the_step_is_one_graph(unpad):
    model = BertForPreTraining(BertConfig(**SMALL))
    batch = pretraining_batch()
    explanation = explained(model, batch, prepared(batch, unpad))
    assert explanation.graph_break_count == 0, [str(r.reason)[:200] for r in explanation.break_reasons]
    assert explanation.graph_count == 1


def test_finding_the_positions_inside_the_step_breaks_the_graph():
    """The check can see a break: ``masked_only=True`` and ``unpad=True`` find sizes from the batch's values."""
    model = BertForPreTraining(BertConfig(**SMALL))
    batch = pretraining_batch()
    explanation = explained(model, batch, dict(masked_only=True, unpad=True))
    assert explanation.graph_break_count > 0
    reasons = " ".join(str(r.reason) for r in explanation.break_reasons)
    assert "nonzero" in reasons or "data-dependent" in reasons.lower() or "item" in reasons.lower(), reasons


@pytest.mark.usefixtures("float64")
def test_the_compiled_unpadded_step_equals_the_eager_padded_model_in_loss_and_every_gradient():
    torch.manual_seed(0)
    compiled_model = BertForPreTraining(BertConfig(**SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    eager_model = BertForPreTraining(compiled_model.config)
    eager_model.load_state_dict(compiled_model.state_dict())
    batch = pretraining_batch()
    torch._dynamo.reset()
    step = torch.compile(compiled_model, backend="aot_eager", fullgraph=True)  # any graph break raises
    ours = step(**batch, **prepared(batch, unpad=True)).loss
    reference = eager_model(**batch).loss  # padded, the MLM head on every position
    torch.testing.assert_close(ours, reference, atol=1e-10, rtol=1e-10)
    ours.backward()
    reference.backward()
    for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-10, rtol=1e-10, msg=f"gradient of {name}")


def test_positions_and_packing_found_before_the_step():
    batch = pretraining_batch()
    positions = LabelledPositions.of(batch["labels"])
    selected = batch["labels"] != -100
    assert torch.equal(positions.targets, batch["labels"][selected])  # the boolean index's order: row-major
    hidden = torch.randn(*batch["labels"].shape, 3)
    assert torch.equal(hidden.flatten(0, 1)[positions.rows], hidden[selected])
    labels = batch["labels"].clone()
    labels[1, 3] = 7  # position 3 of the one-token sequence is padding
    with pytest.raises(ValueError, match="labels -100 wherever attention_mask is 0"):
        LabelledPositions.of(labels, batch["attention_mask"])
    packing = Packing.of(batch["attention_mask"])
    assert packing.key_mask[:, 0, 0].sum(dim=1).tolist() == [5, 1, 16, 9]
    moved = packing.to("meta")
    assert moved.indices.is_meta and moved.key_mask.is_meta and moved.max_len == packing.max_len
    with pytest.raises(ValueError, match=r"shape \(4, 16, \.\.\.\) like the packed attention_mask"):
        packing.gather(torch.zeros(4, 15))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the variable-length flash kernel runs on CUDA only")
def test_the_unpadded_step_on_cuda_in_bf16_is_one_graph_through_the_flash_kernel():
    model = BertForPreTraining(BertConfig(**SMALL)).cuda()
    batch = pretraining_batch()
    options = {k: v.to("cuda") for k, v in prepared(batch, unpad=True).items()}
    batch = {k: v.cuda() for k, v in batch.items()}
    with torch.autocast("cuda", dtype=torch.bfloat16):
        explanation = explained(model, batch, options)
    assert explanation.graph_break_count == 0, [str(r.reason)[:200] for r in explanation.break_reasons]


def test_new_length_mixes_stop_recompiling_once_the_sizes_are_dynamic():
    """Every batch has its own token count N, masked count M and longest length: after the first recompiles
    mark those sizes dynamic, a new mix reuses the compiled graph instead of compiling another."""
    from torch._dynamo.utils import counters

    model = BertForPreTraining(BertConfig(**SMALL))
    torch._dynamo.reset()
    counters.clear()
    step = torch.compile(model, backend="aot_eager", fullgraph=True)
    graphs = []
    for lengths in ([5, 1, 16, 9], [3, 8, 2, 7], [12, 4, 6, 10], [2, 14, 9, 3], [7, 7, 11, 1]):
        batch = pretraining_batch(lengths)
        step(**batch, **prepared(batch, unpad=True)).loss.backward()
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[-1] == graphs[-3] <= 3, graphs
