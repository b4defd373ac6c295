"""Pooling a sequence to one vector: the first token or the mean."""

import keras
from keras import ops

POOLINGS = ("mean", "cls")


def preset_pooling(preset):
    """How a built-in preset trained as a sentence embedder pools: its
    JSON's `pooling` entry as `{"pooling": ..., "normalize": ...}`, or {}
    for other presets and for directories."""
    from kerasbert.presets import get_preset, list_presets

    if not isinstance(preset, str) or preset not in list_presets():
        return {}
    spec = get_preset(preset).get("pooling") or {}
    return {k: spec[k] for k in ("pooling", "normalize") if k in spec}


@keras.saving.register_keras_serializable(package="kerasbert")
class Pooling(keras.layers.Layer):
    """Pools `sequence_output (batch, seq, hidden)` to `(batch, hidden)`:
    the mean over real tokens (`padding_mask` > 0) or the first token
    ("cls"), optionally scaled to unit L2 norm. Float32 output.

    Examples:
    >>> import numpy as np
    >>> pool = Pooling("mean")
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
    >>> np.asarray(pool(x, np.array([[1, 1, 0]]))).tolist()
    [[2.0, 3.0]]
    """

    def __init__(self, pooling="mean", normalize=False, **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}; expected one of {POOLINGS}.")
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True or False; got {normalize!r}.")
        self.pooling, self.normalize = pooling, normalize

    def call(self, sequence_output, padding_mask):
        x = ops.cast(sequence_output, "float32")
        if self.pooling == "cls":
            pooled = x[:, 0, :]  # (batch, hidden)
        else:
            mask = ops.cast(ops.greater(padding_mask, 0), "float32")[:, :, None]  # (batch, seq, 1)
            total = ops.sum(x * mask, axis=1)  # (batch, hidden)
            pooled = total / ops.maximum(ops.sum(mask, axis=1), 1e-9)
        if self.normalize:
            pooled = pooled / ops.maximum(ops.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return pooled

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize}
