"""Loading a checkpoint draws no random weights it would overwrite
(`placeholder_weights`); building without one still draws them."""

from unittest import mock

import keras
import numpy as np
import pytest

import kerasbert
from helpers import make_hf_checkpoint, tiny_encoder
from kerasbert.layers.initializers import TruncatedNormal, placeholder_weights


def _no_draws():
    """Any truncated-normal draw fails (the encoder's initializer is one)."""
    return mock.patch.object(keras.initializers.TruncatedNormal, "__call__",
                             side_effect=AssertionError("a random weight was drawn"))


def _same_weights(a, b):
    assert [w.path for w in a.weights] == [w.path for w in b.weights]
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(y), err_msg=x.path)


def test_a_fresh_encoder_draws_truncated_normal_weights():
    encoder = tiny_encoder(initializer_range=0.05)
    kernel = keras.ops.convert_to_numpy(encoder.token_embedding.embeddings)
    assert np.abs(kernel).max() <= 2 * 0.05 + 1e-6
    assert 0.025 < kernel.std() < 0.05  # a normal truncated at 2 sigma has std 0.88 sigma
    with _no_draws(), pytest.raises(AssertionError, match="a random weight was drawn"):
        tiny_encoder()


def test_placeholders_are_zeros_only_inside_the_context():
    init = TruncatedNormal(stddev=0.02, seed=3)
    with placeholder_weights():
        np.testing.assert_array_equal(init((4, 5)), np.zeros((4, 5)))
        with placeholder_weights(False):
            assert np.abs(keras.ops.convert_to_numpy(init((4, 5)))).max() > 0
    with pytest.raises(RuntimeError), placeholder_weights():
        raise RuntimeError
    assert np.abs(keras.ops.convert_to_numpy(init((4, 5)))).max() > 0  # reset, even after an error
    restored = keras.initializers.get(keras.initializers.serialize(init))
    assert type(restored) is TruncatedNormal and restored.get_config() == init.get_config()


def test_loading_a_preset_directory_draws_nothing(tmp_path):
    saved = tiny_encoder()
    saved.save_to_preset(tmp_path / "preset")
    with _no_draws():
        loaded = kerasbert.from_preset(tmp_path / "preset")
    _same_weights(loaded, saved)
    assert {**loaded.get_config(), "name": None} == {**saved.get_config(), "name": None}
    with _no_draws(), pytest.raises(AssertionError, match="a random weight was drawn"):
        kerasbert.from_preset(tmp_path / "preset", load_weights=False)


@pytest.mark.parametrize("model_type,config", [
    ("bert", {}), ("albert", dict(embedding_size=8, num_hidden_groups=1)),
    ("roberta", dict(pad_token_id=1, max_position_embeddings=42)), ("electra", dict(embedding_size=8)),
])
def test_loading_a_huggingface_checkpoint_draws_nothing(tmp_path, model_type, config):
    model = make_hf_checkpoint(str(tmp_path), model_type, vocab_size=50, hidden_size=16, num_hidden_layers=2,
                               num_attention_heads=2, intermediate_size=20, **{"max_position_embeddings": 40, **config})
    with _no_draws():
        loaded = kerasbert.from_preset(str(tmp_path))
    # Every weight comes from the checkpoint (all of whose tensors are
    # random): none is left at its placeholder zeros.
    assert loaded.count_params() == sum(p.numel() for p in model.parameters())
    for weight in loaded.weights:
        assert np.count_nonzero(keras.ops.convert_to_numpy(weight)) > 0.9 * np.prod(weight.shape), weight.path
