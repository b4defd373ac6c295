"""Learned absolute position embeddings, with RoBERTa's offset convention."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class PositionEmbedding(keras.layers.Layer):
    """A learned table of position vectors, looked up from the padding mask.

    The padding mask is `(batch, seq)` integers: 0 at padding, and either 1 at
    every real token or, for rows that pack several documents, the document
    id `1, 2, 3, ...` of each token (documents contiguous, in increasing
    order; see `kerasbert.preprocessing.pack_documents`). Positions restart
    at every document after the first, so a packed document sees the
    positions it would see alone.

    With `position_offset=0` (BERT, ALBERT, ELECTRA) a token of document
    `d > 1` uses table row "its index inside its document"; tokens of
    document 1 and padding use row "index in the row" (so ordinary 0/1 masks,
    right- or left-padded, give row `i` at position `i`). With
    `position_offset=k > 0` (RoBERTa, fairseq convention) rows `0..k-1` are
    reserved: a real token uses row `k + n`, `n` the number of earlier
    tokens of its document (for a 0/1 mask: real tokens count from `k` in
    order, skipping padding), and padding uses row `k - 1` (the padding row).
    The table therefore has `max_sequence_length + position_offset` rows.

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
        # padding_mask: (batch, seq), 0 at padding, a document id >= 1 elsewhere.
        document = ops.cast(padding_mask, "int32")
        batch, seq = ops.shape(document)[0], ops.shape(document)[1]
        if self.position_offset == 0:
            positions = document_positions(document)
        else:
            positions = ops.where(
                ops.not_equal(document, 0),
                tokens_before_in_document(document) + self.position_offset,
                self.position_offset - 1,
            )
        vectors = ops.take(self.embeddings, positions, axis=0)  # (batch, seq, dim)
        return ops.broadcast_to(vectors, (batch, seq, self.output_dim))

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


def document_positions(padding_mask):
    """Each token's position, `(batch, seq)` int32, from a padding mask
    (0 at padding, a document id >= 1 at real tokens): its index in the row
    for document 1 and padding (so a 0/1 mask, padded on either side, gives
    `0, 1, 2, ...`), its index inside its document for documents 2, 3, ...
    (so a packed document sees the positions it would see alone).

    Examples:
    >>> import numpy as np
    >>> ops.convert_to_numpy(document_positions(np.array([[1, 1, 2, 2, 0]]))).tolist()
    [[0, 1, 0, 1, 4]]
    """
    document = ops.cast(padding_mask, "int32")
    index = ops.arange(ops.shape(document)[1], dtype="int32")[None, :]  # (1, seq)
    return ops.where(ops.greater(document, 1), tokens_before_in_document(document), index)


def tokens_before_in_document(document):
    """For each position, the number of real tokens before it in its own
    document, in O(seq): `document` is `(batch, seq)` ints, 0 at padding and
    a document id >= 1 at real tokens, each document id >= 2 contiguous.

    The count of real tokens before a position (an exclusive cumulative sum)
    minus that count at the first token of the same document (a segment
    minimum over (row, document) pairs). Document 1 may be interleaved with
    padding (a left- or right-padded 0/1 mask): its first token has nothing
    before it, so the result is the plain count of earlier real tokens.
    Values at padding positions are meaningless.

    Examples:
    >>> import numpy as np
    >>> counts = tokens_before_in_document(np.array([[1, 1, 1, 2, 2, 3]], "int32"))
    >>> ops.convert_to_numpy(counts).tolist()
    [[0, 1, 2, 0, 1, 0]]
    """
    batch, seq = ops.shape(document)[0], ops.shape(document)[1]
    document = ops.clip(document, 0, seq)  # a valid row has at most seq documents
    real = ops.cast(ops.not_equal(document, 0), "int32")
    before = ops.cumsum(real, axis=1) - real  # (batch, seq) real tokens before each position
    # One segment per (row, document id): (batch, seq) ids in [0, batch * (seq + 1)).
    segment = document + (seq + 1) * ops.arange(batch, dtype="int32")[:, None]
    first = ops.segment_min(
        ops.reshape(before, (-1,)), ops.reshape(segment, (-1,)),
        num_segments=batch * (seq + 1),
    )  # (batch * (seq + 1),): `before` at each document's first token
    first = ops.take(first, segment)  # (batch, seq); torch gives floats, exact here
    return before - ops.cast(first, "int32")
