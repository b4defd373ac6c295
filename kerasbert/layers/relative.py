"""DeBERTa's relative positions: log-bucketed distances between tokens and
the table of their vectors, shared by every layer's disentangled
attention."""

import keras
from keras import ops


def relative_buckets(distance, buckets, max_distance):
    """Signed distances `query - key` (integers) -> their buckets, int32:
    distances below `buckets // 2` in size are their own bucket; longer
    ones share buckets whose width grows logarithmically up to
    `max_distance` (DeBERTa-v2's log buckets, computed in float32 as
    transformers does).

    Examples:
    >>> import numpy as np
    >>> ops.convert_to_numpy(relative_buckets(np.array([-300, -3, 0, 3, 300]), 8, 512)).tolist()
    [-7, -3, 0, 3, 7]
    """
    distance = ops.cast(distance, "float32")
    middle = buckets // 2
    size = ops.where(ops.abs(distance) < middle, float(middle - 1), ops.abs(distance))
    # ceil(log(size / middle) / log((max - 1) / middle) * (middle - 1)) + middle, in transformers' order
    reach = ops.log(ops.convert_to_tensor((max_distance - 1) / middle, "float32"))
    log_bucket = ops.ceil(ops.log(size / middle) / reach * (middle - 1)) + middle
    bucket = ops.where(size <= middle, distance, log_bucket * ops.sign(distance))
    return ops.cast(bucket, "int32")


@keras.saving.register_keras_serializable(package="kerasbert")
class RelativePositions(keras.layers.Layer):
    """The relative-position table of DeBERTa and the table row each
    (query, key) pair reads.

    The table has `2 * span` rows (`span = buckets`, or `max_distance`
    without buckets), normalized by a LayerNorm. Called with the padding
    mask `(batch, seq)`, it returns `(table, index)`: the normalized table
    `(2 * span, width)` and `index (seq, seq)` int32, the row of the
    relative position `bucket(i - j) + span` of query `i` and key `j`,
    clipped to the table. Distances are counted in the row, which inside a
    packed document are the document's own.

    Args:
        width: the width of a position vector (the encoder's `hidden_dim`).
        buckets: the number of buckets per direction; 0 for none.
        max_distance: the longest distance the buckets reach.
        layer_norm_epsilon: the LayerNorm's epsilon.
        embeddings_initializer: initializer of the table.

    Examples:
    >>> import numpy as np
    >>> table, index = RelativePositions(8, buckets=4, max_distance=16)(np.ones((1, 3), "int32"))
    >>> tuple(table.shape), ops.convert_to_numpy(index).tolist()
    ((8, 8), [[4, 3, 2], [5, 4, 3], [6, 5, 4]])
    """

    def __init__(self, width, buckets=256, max_distance=512, layer_norm_epsilon=1e-7,
                 embeddings_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.width = width
        self.buckets = buckets
        self.max_distance = max_distance
        self.layer_norm_epsilon = layer_norm_epsilon
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.span = buckets if buckets > 0 else max_distance
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )

    def build(self, input_shape):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(2 * self.span, self.width), initializer=self.embeddings_initializer
        )
        self.layer_norm.build((2 * self.span, self.width))

    def call(self, padding_mask):
        table = self.layer_norm(ops.cast(self.embeddings, self.compute_dtype))  # (2 * span, width)
        index = ops.arange(ops.shape(padding_mask)[1], dtype="int32")  # (seq,)
        distance = index[:, None] - index[None, :]  # (seq, seq): query - key
        if self.buckets > 0:
            distance = relative_buckets(distance, self.buckets, self.max_distance)
        return table, ops.clip(distance + self.span, 0, 2 * self.span - 1)

    def compute_output_shape(self, input_shape):
        return (2 * self.span, self.width), (input_shape[1], input_shape[1])

    def get_config(self):
        return {
            **super().get_config(),
            "width": self.width,
            "buckets": self.buckets,
            "max_distance": self.max_distance,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }
