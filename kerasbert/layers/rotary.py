"""Rotary position encoding (RoPE): positions as rotations of the queries
and keys, in the half-split layout of Hugging Face's RoPE models."""

import keras
from keras import ops

from kerasbert.layers.embeddings import document_positions


@keras.saving.register_keras_serializable(package="kerasbert")
class RotaryEmbedding(keras.layers.Layer):
    """The angles RoPE turns queries and keys by, from the padding mask:
    `padding_mask (batch, seq)` -> `(cos, sin)`, each `(batch, seq,
    head_dim)` float32. Positions follow the padding mask as a learned
    table's do (`kerasbert.layers.embeddings.document_positions`): a packed
    document sees the positions it would see alone. No weights.

    Args:
        head_dim: the width of one attention head (even).
        theta: the base of the rotation frequencies.

    Examples:
    >>> import numpy as np
    >>> cos, sin = RotaryEmbedding(head_dim=4, theta=10000.0)(np.ones((2, 3), "int32"))
    >>> tuple(cos.shape)
    (2, 3, 4)
    """

    def __init__(self, head_dim, theta=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.head_dim = head_dim
        self.theta = theta

    def call(self, padding_mask):
        return rotary_angles(document_positions(padding_mask), self.head_dim, self.theta)

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.head_dim), (*input_shape, self.head_dim)

    def get_config(self):
        return {**super().get_config(), "head_dim": self.head_dim, "theta": self.theta}


def rotary_angles(positions, head_dim, theta):
    """The cosines and sines of RoPE at integer `positions (batch, seq)` for
    heads of `head_dim` (even) dimensions and base `theta`: two float32
    tensors `(batch, seq, head_dim)`. Dimension `d` and `d + head_dim / 2`
    turn by `position / theta ** (2 * d / head_dim)`.

    Examples:
    >>> import numpy as np
    >>> cos, sin = rotary_angles(np.array([[0, 1]]), head_dim=4, theta=10000.0)
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(sin)[0, 1]]
    [0.8415, 0.01, 0.8415, 0.01]
    """
    exponents = ops.arange(0, head_dim, 2, dtype="float32") / float(head_dim)  # (head_dim / 2,)
    inverse_frequencies = ops.power(float(theta), -exponents)
    angles = ops.cast(positions, "float32")[:, :, None] * inverse_frequencies  # (batch, seq, head_dim / 2)
    angles = ops.concatenate([angles, angles], axis=-1)  # (batch, seq, head_dim)
    return ops.cos(angles), ops.sin(angles)


def rotate(x, cos, sin):
    """`x (batch, n, heads, head_dim)` turned by the angles `cos`, `sin`
    `(batch, n, head_dim)`, in float32, returned in `x`'s dtype: the first
    and second halves of each head form the pairs that turn together."""
    dtype = x.dtype
    x = ops.cast(x, "float32")
    first, second = ops.split(x, 2, axis=-1)
    turned = ops.concatenate([-second, first], axis=-1)
    out = x * cos[:, :, None, :] + turned * sin[:, :, None, :]
    return ops.cast(out, dtype)
