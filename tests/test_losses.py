"""kerasbert.losses against Keras's sparse cross-entropy and accuracy (the
reference): values, weighting, gradients through a train step, saving."""

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert.losses import SparseAccuracy, SparseCrossEntropy, sparse_accuracy, sparse_cross_entropy
from tests.helpers import tiny_encoder

CLASSES = 50


def logits_and_targets(shape=(4, 6), seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, (*shape, CLASSES)).astype("float32")
    targets = rng.integers(0, CLASSES, shape).astype("int32")
    # Some targets that are the arg-max, so accuracy is neither 0 nor 1.
    targets[:, :2] = logits[:, :2].argmax(-1)
    return logits, targets


def numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_per_position_loss_is_keras_sparse_crossentropy():
    logits, targets = logits_and_targets()
    expected = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
    np.testing.assert_allclose(numpy(sparse_cross_entropy(targets, logits)), numpy(expected), rtol=1e-5, atol=1e-5)


def test_weighted_mean_loss_is_keras_loss():
    logits, targets = logits_and_targets()
    weights = (np.arange(24).reshape(4, 6) % 3 != 0).astype("float32")
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
    expected = float(numpy(reference(targets, logits, sample_weight=weights)))
    actual = float(numpy(SparseCrossEntropy()(targets, logits, sample_weight=weights)))
    assert actual == pytest.approx(expected, rel=1e-5)
    # Zero-weight slots do not count: changing their targets changes nothing.
    moved = np.where(weights > 0, targets, (targets + 1) % CLASSES)
    assert float(numpy(SparseCrossEntropy()(moved, logits, sample_weight=weights))) == pytest.approx(actual, rel=1e-6)


def test_accuracy_is_keras_sparse_categorical_accuracy():
    logits, targets = logits_and_targets()
    weights = np.random.default_rng(1).uniform(0, 1, (4, 6)).astype("float32")
    reference = keras.metrics.SparseCategoricalAccuracy()
    reference.update_state(targets, logits, sample_weight=weights)
    metric = SparseAccuracy()
    metric.update_state(targets, logits, sample_weight=weights)
    assert 0 < float(numpy(metric.result())) < 1
    assert float(numpy(metric.result())) == pytest.approx(float(numpy(reference.result())), rel=1e-6)
    np.testing.assert_array_equal(numpy(sparse_accuracy(targets, logits)), (logits.argmax(-1) == targets) * 1.0)


def test_targets_that_are_not_classes_cost_nothing_and_are_never_right():
    logits, targets = logits_and_targets((2, 3))
    targets[0, 0], targets[1, 2] = -1, CLASSES
    loss = numpy(sparse_cross_entropy(targets, logits))
    right = numpy(sparse_accuracy(targets, logits))
    assert loss[0, 0] == 0 and loss[1, 2] == 0 and right[0, 0] == 0 and right[1, 2] == 0
    valid = np.ones((2, 3), bool)
    valid[0, 0] = valid[1, 2] = False
    expected = keras.losses.sparse_categorical_crossentropy(np.where(valid, targets, 0), logits, from_logits=True)
    np.testing.assert_allclose(loss[valid], numpy(expected)[valid], rtol=1e-5, atol=1e-5)


def test_a_tie_for_the_largest_logit_counts_as_right():
    logits = np.array([[2.0, 2.0, 0.0]], "float32")
    np.testing.assert_array_equal(numpy(sparse_accuracy(np.array([1]), logits)), [1.0])


def test_bfloat16_logits_are_read_in_float32():
    logits, targets = logits_and_targets()
    low = keras.ops.cast(logits, "bfloat16")
    loss = sparse_cross_entropy(targets, low)
    assert keras.backend.standardize_dtype(loss.dtype) == "float32"
    rounded = numpy(keras.ops.cast(low, "float32"))
    expected = keras.losses.sparse_categorical_crossentropy(targets, rounded, from_logits=True)
    np.testing.assert_allclose(numpy(loss), numpy(expected), rtol=1e-5, atol=1e-5)


def _masked_lm_after_one_step(loss):
    keras.utils.set_random_seed(0)
    model = kerasbert.MaskedLM(tiny_encoder(dropout=0.0))
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss, weighted_metrics=[])
    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(5, model.encoder.vocabulary_size, (4, 12)).astype("int32"),
         "segment_ids": np.zeros((4, 12), "int32"), "padding_mask": np.ones((4, 12), "int32"),
         "mask_positions": np.tile(np.array([1, 4, 7], "int32"), (4, 1))}
    x = {k: v for k, v in x.items() if k in {i.name for i in model.inputs}}
    y = rng.integers(0, model.encoder.vocabulary_size, (4, 3)).astype("int32")
    weights = np.array([[1, 1, 0]] * 4, "float32")
    logs = model.train_on_batch(x, y, sample_weight=weights, return_dict=True)
    return logs["loss"], [numpy(v) for v in model.trainable_variables]


def test_gradients_through_a_train_step_are_kerass():
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")
    loss, weights = _masked_lm_after_one_step(SparseCrossEntropy())
    expected_loss, expected = _masked_lm_after_one_step(reference)
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    for actual, wanted in zip(weights, expected):
        np.testing.assert_allclose(actual, wanted, rtol=1e-4, atol=1e-6)
    # The step moved the weights (so the comparison above compares gradients).
    keras.utils.set_random_seed(0)
    initial = [numpy(v) for v in kerasbert.MaskedLM(tiny_encoder(dropout=0.0)).trainable_variables]
    moved = sum(not np.allclose(a, b) for a, b in zip(weights, initial))
    assert moved > len(weights) // 2


def test_masked_lm_and_pretrainer_compile_with_them():
    model = kerasbert.MaskedLM(tiny_encoder())
    model.compile()
    assert isinstance(model.loss, SparseCrossEntropy)
    pretrainer = kerasbert.BertPretrainer(tiny_encoder(), sentence_task=None)
    pretrainer.compile()
    config = str(pretrainer.get_compile_config())
    assert "SparseCrossEntropy" in config and "SparseAccuracy" in config and "SparseCategorical" not in config


@pytest.mark.parametrize("make", [lambda: SparseCrossEntropy(reduction="sum"), lambda: SparseAccuracy(name="acc")])
def test_config_round_trip(make):
    original = make()
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(original))
    assert type(restored) is type(original) and restored.get_config() == original.get_config()
