"""kerasbert's Dropout: the realised rate, unbiased scaling, independent
draws, and the same behaviour as keras.layers.Dropout where it falls back."""

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert.layers import Dropout

N = 1 << 20


def _apply(layer, x, training=True):
    """The layer on `x`; on TensorFlow inside an XLA-compiled function, where
    it hashes its mask as on JAX (outside XLA it is Keras's dropout)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(lambda v: layer(v, training=training), jit_compile=True)(x).numpy()
    return keras.ops.convert_to_numpy(layer(x, training=training))


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_realised_rate_and_scale_match_the_rate(rate):
    layer = Dropout(rate, seed=3)
    y = _apply(layer, np.ones((64, N // 64), "float32"))
    dropped = y == 0
    sigma = (rate * (1 - rate) / N) ** 0.5
    assert abs(dropped.mean() - rate) < 5 * sigma
    kept = np.unique(y[~dropped])
    assert kept.size == 1
    np.testing.assert_allclose(kept[0], 1 / (1 - rate), rtol=1e-4)
    # Unbiased: the mean of the output is the mean of the input.
    assert abs(y.mean() - 1) < 5 * sigma / (1 - rate)


def test_draws_are_independent_within_a_word_and_across_calls():
    # Each 32-bit word feeds two neighbouring elements; their drops must be
    # independent, and a second call must draw a new mask.
    rate = 0.5
    layer = Dropout(rate, seed=5)
    x = np.ones((256, 4096), "float32")
    first, second = _apply(layer, x) == 0, _apply(layer, x) == 0
    both_neighbours = (first[:, 0::2] & first[:, 1::2]).mean()
    assert abs(both_neighbours - rate**2) < 0.005
    assert abs((first & second).mean() - rate**2) < 0.005


def test_masks_are_independent_across_strides_and_successive_calls():
    # TensorFlow's masks hash each element's flat index under a key from the
    # call's seed, and successive calls' seeds differ by small steps: no
    # stride of the index, nor a pair of the first calls, may correlate.
    rate, rows, cols = 0.5, 256, 4096
    layer = Dropout(rate, seed=7)
    x = np.ones((rows, cols), "float32")
    calls = [_apply(layer, x) == 0 for _ in range(6)]
    flat = calls[0].ravel()
    for stride in (1, 2, 3, 16, 64, 255, 256, 4096, 65536):
        assert abs((flat[:-stride] & flat[stride:]).mean() - rate**2) < 0.005, stride
    for i in range(len(calls)):
        for j in range(i + 1, len(calls)):
            assert abs((calls[i] & calls[j]).mean() - rate**2) < 0.005, (i, j)
    # Uniform bits: the realised rate is right at every threshold, not only at one.
    for other in (0.05, 0.3, 0.7, 0.95):
        dropped = (_apply(Dropout(other, seed=11), x) == 0).mean()
        assert abs(dropped - other) < 5 * (other * (1 - other) / x.size) ** 0.5, other


def test_seeded_layers_repeat_and_different_seeds_differ():
    x = np.ones((8, 300), "float32")
    a = _apply(Dropout(0.3, seed=1), x)
    b = _apply(Dropout(0.3, seed=1), x)
    c = _apply(Dropout(0.3, seed=2), x)
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 1), (11,)])
def test_odd_and_small_shapes_keep_shape_and_dtype(shape):
    y = _apply(Dropout(0.4, seed=0), np.ones(shape, "float32"))
    assert y.shape == shape
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / (1 - 0.4), rtol=1e-4)


def test_inference_and_zero_rate_are_the_identity():
    x = np.random.default_rng(0).normal(size=(4, 6)).astype("float32")
    np.testing.assert_array_equal(_apply(Dropout(0.5), x, training=False), x)
    np.testing.assert_array_equal(_apply(Dropout(0.0), x), x)


def test_bfloat16_inputs_stay_bfloat16():
    layer = Dropout(0.2, seed=0, dtype="mixed_bfloat16")
    y = layer(keras.ops.ones((4, 64), "bfloat16"), training=True)
    assert keras.backend.standardize_dtype(y.dtype) == "bfloat16"


def test_a_new_mask_every_compiled_train_step():
    # Under jit the seed lives in a state variable; it must advance each step.
    inputs = keras.Input((64,))
    hidden = keras.layers.Dense(64, kernel_initializer="identity")(inputs)
    model = keras.Model(inputs, Dropout(0.5, seed=0)(hidden))
    drops = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            drops.append(float(logs["loss"]))

    # XLA where the backend has it, so that TensorFlow's step takes the hash too.
    jit_compile = keras.backend.backend() != "torch" or "auto"
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.0), jit_compile=jit_compile)
    x = np.ones((4, 64), "float32")
    model.fit(x, np.zeros_like(x), batch_size=4, epochs=6, verbose=0, callbacks=[Record()])
    # The learning rate is 0: the loss, 4 * (fraction kept), varies only with the mask.
    assert len(set(drops)) > 1


def test_hashed_under_xla_and_keras_dropout_elsewhere():
    # The hash is fused only by XLA: TensorFlow outside it and torch keep
    # Keras's own kernel, whose mask a keras.layers.Dropout of the same seed draws.
    x = np.ones((16, 256), "float32")
    ours = keras.ops.convert_to_numpy(Dropout(0.3, seed=4)(x, training=True))
    theirs = keras.ops.convert_to_numpy(keras.layers.Dropout(0.3, seed=4)(x, training=True))
    hashed = keras.backend.backend() == "jax"
    assert (ours != theirs).any() if hashed else (ours == theirs).all()
    if keras.backend.backend() == "tensorflow":
        under_xla = _apply(Dropout(0.3, seed=4), x)
        assert (under_xla != theirs).any()
        assert abs((under_xla == 0).mean() - 0.3) < 0.03


def test_the_encoder_and_heads_use_it():
    encoder = kerasbert.Encoder(
        vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    dropouts = [layer for layer in encoder._flatten_layers() if isinstance(layer, keras.layers.Dropout)]
    assert dropouts and all(isinstance(layer, Dropout) for layer in dropouts)
