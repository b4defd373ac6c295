"""Cross-entropy and accuracy over a vocabulary, read at the target's logit.

Keras's sparse cross-entropy on logits takes the whole log-softmax, then a
one-hot of the targets; its accuracy takes an arg-max. Over a vocabulary of
30,522 that is several passes over the logits, forward and backward. Here
the loss is `logsumexp(logits) - logits[target]` and a prediction is right
when the target's logit is the largest: one gather of `(..., 1)` values
beside the reductions the log-softmax needs anyway. On JAX (XLA, 2 CPU
cores) the masked-LM head of BERT-small, 320 masked positions, forward and
backward with the accuracy, took 142 instead of 180 ms; whole train steps
1.02x (JAX) and 1.04x (TensorFlow under XLA) as fast (docs/performance_history.md).
On torch the loss stays torch's fused cross-entropy kernel, which was
faster there.

Both agree with Keras's `SparseCategoricalCrossentropy(from_logits=True)`
and `SparseCategoricalAccuracy` to float32 rounding, out-of-range targets
included (loss 0, never right); the accuracy differs only on an exact tie
for the largest logit, which it counts as right where an arg-max would
pick the first of the tied classes.
"""

import keras
from keras import ops

from kerasbert.distribution import batch_share_replicas, sum_over_replicas


def _classes(targets, logits):
    """Integer `targets` as indices into `logits`' last axis: `(index (...),
    whether each target is a class (...))`; the index is 0 where it is not."""
    targets = ops.cast(targets, "int32")
    valid = ops.logical_and(ops.greater_equal(targets, 0), ops.less(targets, ops.shape(logits)[-1]))
    return ops.where(valid, targets, 0), valid


def target_logits(targets, logits):
    """`logits (..., classes)` at `targets (...)`: `(target logits (...),
    whether each target is a class (...))`, in float32."""
    index, valid = _classes(targets, logits)
    chosen = ops.take_along_axis(ops.cast(logits, "float32"), index[..., None], axis=-1)  # (..., 1)
    return chosen[..., 0], valid


def sparse_cross_entropy(targets, logits):
    """Cross-entropy of integer `targets (...)` under `logits (...,
    classes)`, per position `(...)`, float32; 0 where a target is not a
    class."""
    logits = ops.cast(logits, "float32")
    if keras.backend.backend() == "torch":
        # torch's fused kernel (log-softmax, and in the backward softmax
        # minus the one-hot, in single passes) beat the gather form on eager
        # torch: 4% of a BERT-small masked-LM step.
        index, valid = _classes(targets, logits)
        loss = ops.sparse_categorical_crossentropy(index, logits, from_logits=True)
    else:
        chosen, valid = target_logits(targets, logits)
        loss = ops.logsumexp(logits, axis=-1) - chosen  # (...)
    return ops.where(valid, loss, 0.0)


def sparse_accuracy(targets, logits):
    """1.0 where the target's logit is the largest of `logits (...,
    classes)`, else 0.0 (a target that is not a class: 0.0); `(...)`."""
    logits = ops.cast(logits, "float32")
    chosen, valid = target_logits(targets, logits)
    largest = ops.max(logits, axis=-1)
    return ops.cast(ops.logical_and(valid, ops.greater_equal(chosen, largest)), "float32")


@keras.saving.register_keras_serializable(package="kerasbert")
class SparseCrossEntropy(keras.losses.Loss):
    """`sparse_cross_entropy` as a Keras loss (targets: class ids;
    predictions: logits), by default averaged over the sample weights'
    total (`reduction="mean_with_sample_weight"`: a masked LM's mean over
    its real targets).

    Examples:
    >>> import numpy as np
    >>> loss = SparseCrossEntropy()
    >>> logits = np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]], "float32"))
    >>> round(float(loss(np.array([0, 1]), logits, sample_weight=np.array([1.0, 0.0]))), 4)  # -log 0.5
    0.6931
    """

    def __init__(self, reduction="mean_with_sample_weight", name="sparse_cross_entropy", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        replicas = batch_share_replicas()
        if replicas == 1 or sample_weight is None or self.reduction != "mean_with_sample_weight":
            return super().__call__(y_true, y_pred, sample_weight=sample_weight)
        # Replicas that each see a share of the batch divide by the weights of
        # the whole batch, not of their share (a masked LM's targets per share
        # vary), so that their gradients combine to the global mean's:
        # tf.distribute sums the replicas' gradients, DistributedDataParallel
        # averages them.
        weights = ops.cast(sample_weight, "float32")
        share = ops.sum(self.call(y_true, y_pred) * weights)
        mean = ops.divide_no_nan(share, sum_over_replicas(ops.sum(weights)))
        return mean if keras.backend.backend() == "tensorflow" else mean * replicas

    def call(self, y_true, y_pred):
        return sparse_cross_entropy(y_true, y_pred)

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction, "dtype": self.dtype}


@keras.saving.register_keras_serializable(package="kerasbert")
class SparseAccuracy(keras.metrics.MeanMetricWrapper):
    """`sparse_accuracy` as a Keras metric (targets: class ids; predictions:
    logits or probabilities), averaged with the sample weights.

    Examples:
    >>> import numpy as np
    >>> metric = SparseAccuracy()
    >>> metric.update_state(np.array([0, 2]), np.array([[3.0, 1.0, 0.0], [3.0, 1.0, 0.0]]))
    >>> float(metric.result())
    0.5
    """

    def __init__(self, name="accuracy", dtype=None):
        super().__init__(sparse_accuracy, name=name, dtype=dtype)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
