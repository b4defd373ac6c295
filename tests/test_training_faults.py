"""Training faults: a NaN or infinite loss stops `fit` naming the step it
happened at, float16 gradient overflow is absorbed by loss scaling, and
running out of memory says what to shrink."""

import os
import re

import keras
import numpy as np
import pytest
from helpers import encoder_inputs, kjv_chapters, tiny_encoder, torch_pass_only

import kerasbert
from kerasbert import checkpointing
from kerasbert.utils.io import read_safetensors

BACKEND = keras.backend.backend()


def classifier(seed=0, dtype=None):
    keras.utils.set_random_seed(seed)
    return kerasbert.TextClassifier(tiny_encoder(dtype=dtype), num_classes=3, dropout=0.0)


def data(rows=48, seed=0):
    x = encoder_inputs(tiny_encoder(), lengths=[6] * rows, seq=8, seed=seed)
    y = np.random.default_rng(seed).integers(0, 3, rows).astype("int32")
    return x, y


def first_non_finite_step(model, x, y, weights, batch_size, steps):
    """The reference: train step by step, watching every loss on the host."""
    for step in range(1, steps + 1):
        start = (step - 1) * batch_size % len(y)
        rows = slice(start, start + batch_size)
        loss = model.train_on_batch({k: v[rows] for k, v in x.items()}, y[rows], sample_weight=weights[rows])
        if not np.isfinite(np.asarray(loss, dtype="float64")).all():
            return step
    return None


@pytest.mark.parametrize("learning_rate, poisoned_rows", [
    (1e30, None),  # diverges
    (1e-2, slice(64, 72)),  # huge loss weights in the 9th batch (the 3rd of the 2nd epoch)
])
def test_a_non_finite_loss_stops_fit_at_the_step_it_happened(learning_rate, poisoned_rows):
    x, y = data(rows=48)
    x, y = {k: np.concatenate([v, v]) for k, v in x.items()}, np.concatenate([y, y])  # 2 epochs' rows
    weights = np.ones(len(y), "float32")
    if poisoned_rows is not None:
        weights[poisoned_rows] = 3e38  # finite, but the weighted loss overflows float32
    reference = classifier()
    reference.compile(optimizer=keras.optimizers.SGD(learning_rate))
    expected = first_non_finite_step(reference, x, y, weights, batch_size=8, steps=12)
    assert expected is not None  # the run does break

    model = classifier()
    model.compile(optimizer=keras.optimizers.SGD(learning_rate))
    seen = []
    keep = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(epoch))
    with pytest.raises(FloatingPointError, match=rf"became (NaN|[+-]inf) at step {expected};") as info:
        model.fit(x, y, sample_weight=weights, batch_size=8, epochs=3, steps_per_epoch=6, shuffle=False,
                  verbose=0, callbacks=[keep])
    assert "learning rate" in str(info.value) and "clipnorm" in str(info.value)
    # It stops at the end of the epoch (6 steps) of that step, before later
    # callbacks (which save checkpoints) see that epoch.
    assert seen == list(range((expected - 1) // 6))


def test_a_finite_run_is_not_stopped_and_resumed_steps_count_on():
    x, y = data()
    model = classifier()
    model.compile(optimizer=keras.optimizers.SGD(1e-2))
    model.fit(x, y, batch_size=8, epochs=2, verbose=0)
    assert int(keras.ops.convert_to_numpy(model._non_finite_loss.steps)) == 12
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # counts from the optimizer's step
    assert int(keras.ops.convert_to_numpy(model._non_finite_loss.steps)) == 18


@pytest.mark.skipif(BACKEND == "jax", reason="XLA:CPU has no float16 matmul; loss scaling on JAX runs on GPUs")
def test_float16_gradient_overflow_is_absorbed_by_loss_scaling():
    x, y = data()
    model = classifier(dtype="mixed_float16")
    model.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    model.optimizer.build(model.trainable_variables)
    model.optimizer.dynamic_scale.assign(2.0**24)  # float16 gradients overflow at this scale
    before = [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_variables]
    model.train_on_batch({k: v[:8] for k, v in x.items()}, y[:8])
    after = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))  # the overflowing step was skipped
    assert float(keras.ops.convert_to_numpy(model.optimizer.dynamic_scale)) == 2.0**23

    history = model.fit(x, y, batch_size=8, epochs=3, verbose=0)  # no FloatingPointError
    assert np.isfinite(history.history["loss"]).all()
    assert float(keras.ops.convert_to_numpy(model.optimizer.dynamic_scale)) < 2.0**23  # more steps skipped
    assert all(np.isfinite(keras.ops.convert_to_numpy(v)).all() for v in model.trainable_variables)
    assert not all(np.array_equal(a, keras.ops.convert_to_numpy(b))
                   for a, b in zip(before, model.trainable_variables))


def _out_of_memory_error():
    """The error this backend raises when an allocation fails."""
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[8,2,8,8]")
    if BACKEND == "jax":
        import jax

        return jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4.00GiB.")
    import torch

    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 GiB")


def test_running_out_of_memory_says_what_to_shrink():
    x, y = data()
    model = classifier()
    model.compile(optimizer="adam")

    def allocate(batch, logs=None):
        raise _out_of_memory_error()

    with pytest.raises(MemoryError, match=r"(?s)batch_size=8.*batch_size=4.*accumulat") as info:
        model.fit(x, y, batch_size=8, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(on_train_batch_begin=allocate)])
    assert "mixed_bfloat16" in str(info.value)
    assert type(info.value.__cause__) is type(_out_of_memory_error())


@torch_pass_only
def test_pretraining_stops_before_checkpointing_broken_weights(tmp_path, capsys):
    from kerasbert.cli import main

    kjv_chapters(tmp_path / "kjv.txt", 20)
    with pytest.raises(SystemExit) as exit_status:
        main(["pretrain", "--preset", "bert_tiny_en_uncased", "--objective", "mlm", "--from-scratch",
              "--train-files", str(tmp_path / "kjv.txt"), "--vocabulary-size", "300", "--sequence-length", "32",
              "--batch-size", "16", "--steps", "8", "--log-every", "1", "--num-layers", "1", "--hidden-dim", "16",
              "--num-heads", "2", "--intermediate-dim", "32", "--learning-rate", "1e30", "--warmup-steps", "0",
              "--jit-compile", "auto", "--verbose", "0", "--output", str(tmp_path / "run")])
    assert exit_status.value.code == 3
    error = capsys.readouterr().err
    assert "kerasbert pretrain: training stopped: The training loss became" in error
    bad_step = int(re.search(r"at step (\d+);", error).group(1))
    saved = checkpointing.list_checkpoints(tmp_path / "run" / "checkpoints")
    assert [step for step, _ in saved][-1] == bad_step - 1  # every step before it, none after
    for _, path in saved:
        tensors = read_safetensors(os.path.join(path, checkpointing.STATE_FILE))
        assert all(np.isfinite(t).all() for t in tensors.values() if t.dtype.kind == "f")
