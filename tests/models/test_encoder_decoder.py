"""lecture_lib.models.encoder_decoder: what T5 and BART share around their stacks."""

import pytest
import torch

from lecture_lib.models.bart import BartConfig, BartForConditionalGeneration
from lecture_lib.models.t5 import T5Config, T5ForConditionalGeneration


def _t5():
    return T5ForConditionalGeneration(T5Config(vocab_size=40, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4))


def _bart():
    return BartForConditionalGeneration(
        BartConfig(
            vocab_size=40,
            d_model=16,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=16,
        )
    )


@pytest.mark.parametrize("make", [_t5, _bart], ids=["t5", "bart"])
def test_decode_step_is_the_last_position_of_forward(make):
    torch.manual_seed(0)
    model = make().eval()
    src, prefix = torch.tensor([[5, 6, 7, 8], [9, 10, 3, 3]]), torch.tensor([[2, 11, 12], [2, 13, 14]])
    src[src == 3] = model.config.pad_token_id
    out = model(src, (src != model.config.pad_token_id).long(), decoder_input_ids=prefix)
    step = model.decode_step(prefix, model.encode(src))
    assert torch.allclose(step, out.logits[:, -1], atol=1e-6)
    assert torch.equal(model.encode(src)[0], out.encoder_last_hidden_state)


@pytest.mark.parametrize("make", [_t5, _bart], ids=["t5", "bart"])
def test_labels_are_read_shifted_right_behind_the_start_token(make):
    torch.manual_seed(0)
    model = make().eval()
    src, labels = torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9, 10]])
    shifted = torch.tensor([[model.config.decoder_start_token_id, 8, 9]])
    assert torch.equal(model(src, labels=labels).logits, model(src, decoder_input_ids=shifted).logits)
    with pytest.raises(ValueError, match="expected decoder_input_ids or labels"):
        model(src)
