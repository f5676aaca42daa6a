"""lecture_lib.models.masked_lm: the masked-LM tail every encoder family shares."""

import pytest
import torch

from lecture_lib.models.masked_lm import check_mlm_labels, mlm_logits_and_loss


def test_masked_only_gives_the_labelled_rows_and_the_same_loss():
    torch.manual_seed(0)
    head, hidden = torch.nn.Linear(8, 11), torch.randn(3, 5, 8)
    labels = torch.full((3, 5), -100)
    labels[0, 1], labels[2, 4], labels[2, 0] = 3, 7, 10
    dense, dense_loss = mlm_logits_and_loss(head, hidden, labels)
    masked, masked_loss = mlm_logits_and_loss(head, hidden, labels, masked_only=True)
    assert torch.equal(masked, dense[labels != -100]) and torch.allclose(masked_loss, dense_loss)
    assert mlm_logits_and_loss(head, hidden, None)[1] is None


def test_labels_are_checked_before_the_encoder_runs():
    ids = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="masked_only=True needs labels"):
        check_mlm_labels(ids, None, masked_only=True)
    with pytest.raises(ValueError, match=r"expected labels of shape \(2, 4\), got \(2, 3\)"):
        check_mlm_labels(ids, torch.zeros(2, 3, dtype=torch.long), masked_only=False)
