"""Learned absolute position embeddings, with RoBERTa's offset convention."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class PositionEmbedding(keras.layers.Layer):
    """A learned table of position vectors, looked up from the padding mask.

    With `position_offset=0` (BERT, ALBERT, ELECTRA) position `i` of every row
    uses table row `i`. With `position_offset=k > 0` (RoBERTa, fairseq
    convention) rows `0..k-1` are reserved: real tokens count from row `k` in
    the order they appear, skipping padding, and padded positions use row
    `k - 1` (the padding row). The table therefore has
    `max_sequence_length + position_offset` rows.

    Args:
        max_sequence_length: the longest sequence the table covers.
        output_dim: the width of each position vector.
        position_offset: the number of reserved rows before position 0.
        embeddings_initializer: initializer for the table.

    Examples:
    >>> import numpy as np
    >>> layer = PositionEmbedding(max_sequence_length=8, output_dim=4)
    >>> tuple(layer(np.ones((2, 5), "int32")).shape)
    (2, 5, 4)
    """

    def __init__(
        self,
        max_sequence_length,
        output_dim,
        position_offset=0,
        embeddings_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.max_sequence_length = max_sequence_length
        self.output_dim = output_dim
        self.position_offset = position_offset
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
        )

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_sequence_length + self.position_offset, self.output_dim),
            initializer=self.embeddings_initializer,
        )

    def call(self, padding_mask):
        # padding_mask: (batch, seq), nonzero at real tokens.
        if self.position_offset == 0:
            positions = ops.arange(ops.shape(padding_mask)[1], dtype="int32")
            positions = positions[None, :]  # (1, seq)
        else:
            real = ops.cast(ops.not_equal(padding_mask, 0), "int32")
            # Real tokens: offset, offset+1, ...; padding: offset - 1.
            positions = ops.cumsum(real, axis=1) * real + (self.position_offset - 1)
        vectors = ops.take(self.embeddings, positions, axis=0)  # (b|1, seq, dim)
        return ops.broadcast_to(
            vectors, (ops.shape(padding_mask)[0], ops.shape(padding_mask)[1], self.output_dim)
        )

    def compute_output_shape(self, input_shape):
        return (*input_shape, self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_sequence_length": self.max_sequence_length,
                "output_dim": self.output_dim,
                "position_offset": self.position_offset,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
