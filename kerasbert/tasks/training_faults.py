"""Stopping training at a NaN or infinite loss, naming the step.

Every task's training step passes its loss to a `NonFiniteLoss` tracker. It
is a metric, so its state travels with the compiled step on every backend
and nothing is copied to the host per step. `NonFiniteLossGuard`, a callback
that `Task.fit` puts first, reads it at the end of each epoch (pretraining:
every `log_every` steps) and raises `FloatingPointError` naming the first
such step and likely causes, before later callbacks save checkpoints or
presets from broken weights.

Loss-scaled float16 training (Keras's `LossScaleOptimizer`, which `compile`
adds under "mixed_float16") skips steps whose *gradients* overflow and lowers
the scale; that is expected and never trips the guard. A non-finite *loss*
is a different fault.
"""

import math

import keras
from keras import ops


class NonFiniteLoss(keras.metrics.Metric):
    """Counts training steps and remembers the first whose loss was NaN or
    infinite, and that loss. Reports nothing to the logs; Keras's resets
    at each epoch leave it alone (`start` resets it)."""

    def __init__(self, name="non_finite_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        # Replicas see the same step; the first replica's count stands for all.
        state = dict(shape=(), aggregation="only_first_replica")
        self.steps = self.add_variable(**state, initializer="zeros", dtype="int32", name="steps")
        self.first_step = self.add_variable(**state, initializer="zeros", dtype="int32", name="first_step")
        self.first_loss = self.add_variable(**state, initializer="zeros", dtype="float32", name="first_loss")

    def update_state(self, loss):
        loss = ops.sum(ops.cast(loss, "float32"))  # a scalar; NaN or inf if any part is
        step = self.steps.value + 1
        first = ops.logical_and(ops.logical_not(ops.isfinite(loss)), ops.equal(self.first_step.value, 0))
        self.first_step.assign(ops.where(first, step, self.first_step.value))
        self.first_loss.assign(ops.where(first, loss, self.first_loss.value))
        self.steps.assign(step)

    def result(self):
        return {}

    def reset_state(self):
        pass

    def start(self, step):
        """Starts counting after training step `step` (0 for a fresh model)."""
        self.steps.assign(step)
        self.first_step.assign(0)
        self.first_loss.assign(0.0)


class NonFiniteLossGuard(keras.callbacks.Callback):
    """Raises FloatingPointError at the end of the epoch in which the
    training loss first became NaN or infinite."""

    def __init__(self, tracker):
        super().__init__()
        self.tracker = tracker

    def on_train_begin(self, logs=None):
        optimizer = self.model.optimizer
        self.tracker.start(int(ops.convert_to_numpy(optimizer.iterations)) if optimizer is not None else 0)

    def on_epoch_end(self, epoch, logs=None):
        self._check()

    def on_train_end(self, logs=None):
        self._check()

    def _check(self):
        step = int(ops.convert_to_numpy(self.tracker.first_step))
        if step:
            self.model.stop_training = True
            loss = float(ops.convert_to_numpy(self.tracker.first_loss))
            raise FloatingPointError(non_finite_message(step, loss, self.model))


def non_finite_message(step, loss, model):
    """What a user reads when the loss of training step `step` was `loss`."""
    value = "NaN" if math.isnan(loss) else f"{loss:+}"
    policy = model.dtype_policy.name
    causes = [
        "the learning rate is too high for this model or batch size: try 3-10x lower, or a longer warmup",
        "gradients explode: clip them (clipnorm=1.0 in the optimizer; kerasbert's recipes do)",
        "the data: labels outside [0, num_classes), all-padding rows or an empty batch with no loss weight",
    ]
    if policy == "mixed_float16":
        causes.insert(0, "float16 overflows in the forward pass (loss scaling only guards the gradients): "
                         "train with precision/dtype 'mixed_bfloat16' or 'float32'")
    listed = "".join(f"\n  - {cause}" for cause in causes)
    return (
        f"The training loss became {value} at step {step}; training stopped (the weights after that step "
        f"are not usable, checkpoints and presets saved before it are). Likely causes:{listed}"
    )


def is_out_of_memory(error):
    """Whether `error` is a backend's out-of-memory error: TensorFlow's
    ResourceExhaustedError, XLA's RESOURCE_EXHAUSTED (JAX), torch's
    OutOfMemoryError, or a host MemoryError."""
    if isinstance(error, MemoryError):
        return True
    kind = type(error).__name__
    text = str(error)
    return (
        kind in ("ResourceExhaustedError", "OutOfMemoryError")
        or "RESOURCE_EXHAUSTED" in text
        or (kind in ("RuntimeError", "XlaRuntimeError", "JaxRuntimeError") and "out of memory" in text.lower())
    )


def out_of_memory_message(model, batch_size):
    """Guidance for a model that ran out of memory training batches of
    `batch_size` rows (None: unknown)."""
    preprocessor = getattr(model, "preprocessor", None)
    length = getattr(preprocessor, "sequence_length", None)
    steps = []
    if batch_size and batch_size > 1:
        steps.append(f"halve the batch: batch_size={batch_size // 2}; to keep the effective batch, accumulate "
                     "gradients over 2 steps (kerasbert.pretrain(accumulation_steps=2), or "
                     "gradient_accumulation_steps=2 in a Keras optimizer)")
    else:
        steps.append("use a smaller batch_size, and accumulate gradients to keep the effective batch")
    if length:
        steps.append(f"shorten the sequences: sequence_length={max(length // 2, 8)} (now {length}); attention "
                     "memory grows with its square")
    else:
        steps.append("shorten the sequences (the preprocessor's sequence_length)")
    if model.dtype_policy.name == "float32":
        steps.append("train in mixed precision: dtype/precision 'mixed_bfloat16' (or 'mixed_float16' on GPUs "
                     "without bfloat16) roughly halves activation memory")
    listed = "".join(f"\n  - {step}" for step in steps)
    shape = f"batch_size={batch_size}" if batch_size else "this batch size"
    return f"Training ran out of memory at {shape}. Try, in this order:{listed}"
