"""Pooling a sequence to one vector: the first token or the mean."""

import keras
from keras import ops

POOLINGS = ("mean", "cls")


@keras.saving.register_keras_serializable(package="kerasbert")
class Pooling(keras.layers.Layer):
    """Pools `sequence_output (batch, seq, hidden)` to `(batch, hidden)`:
    the mean over real tokens (`padding_mask` > 0) or the first token
    ("cls"), optionally scaled to unit L2 norm. Float32 output.

    With `documents=n`, for rows that pack several examples (their
    `padding_mask` numbering them 1, 2, ..., each contiguous, as
    `kerasbert.Encoder` reads it), it pools each example apart: `(batch, n,
    hidden)`, slot `d` the example numbered `d + 1` (zeros where a row holds
    fewer).

    Examples:
    >>> import numpy as np
    >>> pool = Pooling("mean")
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
    >>> np.asarray(pool(x, np.array([[1, 1, 0]]))).tolist()
    [[2.0, 3.0]]
    >>> np.asarray(Pooling("mean", documents=2)(x, np.array([[1, 2, 2]]))).tolist()
    [[[1.0, 2.0], [6.0, 6.5]]]
    """

    def __init__(self, pooling="mean", normalize=False, documents=None, **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}; expected one of {POOLINGS}.")
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True or False; got {normalize!r}.")
        if documents is not None and (isinstance(documents, bool) or not isinstance(documents, int)
                                      or documents < 1):
            raise ValueError(f"documents must be a positive integer or None; got {documents!r}.")
        self.pooling, self.normalize, self.documents = pooling, normalize, documents

    def call(self, sequence_output, padding_mask):
        x = ops.cast(sequence_output, "float32")
        if self.documents is not None:
            pooled = self._per_document(x, padding_mask, self.documents)
        elif self.pooling == "cls":
            pooled = x[:, 0, :]  # (batch, hidden)
        else:
            mask = ops.expand_dims(ops.cast(ops.greater(padding_mask, 0), "float32"), 2)  # (batch, seq, 1)
            total = ops.sum(x * mask, axis=1)  # (batch, hidden)
            pooled = total / ops.maximum(ops.sum(mask, axis=1), 1e-9)
        if self.normalize:
            # x / max(|x|, 1e-12), through the squared norm: the norm's
            # gradient at a zero vector (a slot with no example) is NaN.
            squared = ops.sum(ops.square(pooled), axis=-1, keepdims=True)
            pooled = pooled * ops.rsqrt(ops.maximum(squared, 1e-24))
        return pooled

    def _per_document(self, x, padding_mask, documents):
        ids = ops.arange(1, documents + 1, dtype="int32")  # (documents,)
        member = ops.equal(ops.cast(padding_mask, "int32")[:, :, None], ids)
        member = ops.cast(member, "float32")  # (batch, seq, documents): 1 at each document's tokens
        if self.pooling == "cls":  # each document's first token
            member = member * ops.cast(ops.equal(ops.cumsum(member, axis=1), 1.0), "float32")
            return ops.einsum("bsd,bsh->bdh", member, x)  # (batch, documents, hidden)
        total = ops.einsum("bsd,bsh->bdh", member, x)  # (batch, documents, hidden)
        return total / ops.maximum(ops.sum(member, axis=1), 1e-9)[:, :, None]

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape=None):
        if self.documents is not None:
            return (sequence_output_shape[0], self.documents, sequence_output_shape[-1])
        return (sequence_output_shape[0], sequence_output_shape[-1])

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize,
                "documents": self.documents}
