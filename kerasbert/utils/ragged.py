"""Ragged-tensor helpers for the TensorFlow preprocessing graphs."""

from kerasbert.utils.optional import tf


def row_ids(ragged):
    """The row of each value of a ragged tensor, in linear memory.

    Same result as `ragged.value_rowids()`, whose implementation (`tf.repeat`)
    pads every row to the longest one: one 100,000-character text in a batch
    of 20,000 short ones took 16 GB there.

    >>> row_ids(tf.ragged.constant([[1, 2], [], [3]])).numpy().tolist()
    [0, 0, 2]
    """
    splits = ragged.row_splits  # (rows + 1,)
    return tf.searchsorted(splits[1:], tf.range(splits[-1], dtype=splits.dtype), side="right", out_type=splits.dtype)


def row_positions(ragged):
    """The place of each value in its row, in linear memory.

    >>> row_positions(tf.ragged.constant([[1, 2], [], [3]])).numpy().tolist()
    [0, 1, 0]
    """
    splits = ragged.row_splits
    return tf.range(splits[-1], dtype=splits.dtype) - tf.gather(splits, row_ids(ragged))


# Ragged tensors from partitions the graph itself computed. TensorFlow's
# ragged ops (broadcasting, `concat(axis=1)`, `merge_dims`, `boolean_mask`;
# tensorflow-text's splitters too: see `tokenizers.base.regex_split_with_offsets`)
# re-check those partitions with asserts,
# each inside a `tf.cond`: 44 of them in the WordPiece tokenizer's graph.
# Built unchecked here, that graph fell from 2,419 to 1,331 ops, and its
# trace and first call from 2.1 to 0.7 s (docs/performance_history.md). They take
# ragged tensors of one ragged dimension, `(rows, None)`.


def _one_ragged_dimension(ragged, name):
    if not isinstance(ragged, tf.RaggedTensor) or ragged.ragged_rank != 1:
        raise ValueError(f"{name} must be a ragged (rows, None) tensor with one ragged dimension; got {ragged!r}.")


def add_to_rows(ragged, values):
    """`ragged (rows, None) + values[:, None]` for `values (rows,)`.

    >>> add_to_rows(tf.ragged.constant([[1, 2], [], [3]]), tf.constant([10, 20, 30])).to_list()
    [[11, 12], [], [33]]
    """
    _one_ragged_dimension(ragged, "ragged")
    return ragged.with_flat_values(ragged.flat_values + tf.gather(values, row_ids(ragged)))


def join_rows(ragged, outer_splits):
    """Each outer row the concatenation of its inner rows: `ragged (inner,
    None)`, `outer_splits (outer + 1,)` the inner rows' partition into outer
    rows -> `(outer, None)`, what `RaggedTensor.from_row_splits(ragged,
    outer_splits).merge_dims(1, 2)` gives.

    >>> join_rows(tf.ragged.constant([[1, 2], [3], [], [4]], tf.int64), tf.constant([0, 2, 2, 4], tf.int64)).to_list()
    [[1, 2, 3], [], [4]]
    """
    _one_ragged_dimension(ragged, "ragged")
    splits = tf.gather(ragged.row_splits, tf.cast(outer_splits, ragged.row_splits.dtype))
    return tf.RaggedTensor.from_row_splits(ragged.flat_values, splits, validate=False)


def splits_of_rows(value_rows, nrows):
    """Row splits `(nrows + 1,)` of values whose rows `value_rows` (sorted)
    are given.

    >>> splits_of_rows(tf.constant([0, 0, 2], tf.int64), 4).numpy().tolist()
    [0, 2, 2, 3, 3]
    """
    value_rows = tf.cast(value_rows, tf.int64)
    return tf.searchsorted(value_rows, tf.range(tf.cast(nrows, tf.int64) + 1), side="left", out_type=tf.int64)


def concat_rows(*parts):
    """Row by row, each part's values in turn: ragged `(rows, None)`
    tensors of the same rows -> `tf.concat(parts, axis=1)`, with int64 row
    splits.

    >>> concat_rows(tf.ragged.constant([[1], [], [2, 3]]), tf.ragged.constant([[4], [5], []])).to_list()
    [[1, 4], [5], [2, 3]]
    """
    for i, part in enumerate(parts):
        _one_ragged_dimension(part, f"parts[{i}]")
    lengths = [tf.cast(part.row_lengths(), tf.int64) for part in parts]
    splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.add_n(lengths))], 0)
    start = splits[:-1]  # where each row's next part begins
    positions = []
    for part, length in zip(parts, lengths):
        at = tf.gather(start, row_ids(part)) + tf.cast(row_positions(part), tf.int64)
        positions.append(tf.cast(at, tf.int32))
        start = start + length
    values = tf.dynamic_stitch(positions, [part.flat_values for part in parts])
    return tf.RaggedTensor.from_row_splits(values, splits, validate=False)


def truncate_rows(ragged, lengths):
    """The first `lengths[i]` values of each row `i` of `ragged (rows, None)`.

    >>> truncate_rows(tf.ragged.constant([[1, 2, 3], [4], [5, 6]]), tf.constant([2, 0, 5], tf.int64)).to_list()
    [[1, 2], [], [5, 6]]
    """
    _one_ragged_dimension(ragged, "ragged")
    lengths = tf.cast(lengths, ragged.row_splits.dtype)
    keep = row_positions(ragged) < tf.gather(lengths, row_ids(ragged))
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ragged.flat_values, keep), tf.minimum(ragged.row_lengths(), lengths), validate=False
    )


def column(value, rows, dtype="int32"):
    """`rows` rows of the one value: ragged `(rows, 1)`, int64 row splits.

    >>> column(7, 2).to_list()
    [[7], [7]]
    """
    rows = tf.cast(rows, tf.int64)
    return tf.RaggedTensor.from_row_splits(
        tf.fill([rows], tf.constant(value, dtype)), tf.range(rows + 1), validate=False
    )


def run_starts(flags):
    """`(n,)` bool run starts -> `(n,)` index of each element's run start
    (0 before the first run).

    >>> run_starts(tf.constant([True, False, False, True, False])).numpy().tolist()
    [0, 0, 0, 3, 3]
    """
    index = tf.range(tf.size(flags, tf.int64))
    starts = tf.concat([[0], tf.boolean_mask(index, flags)], 0)
    return tf.gather(starts, tf.cumsum(tf.cast(flags, tf.int64)))


def cut_runs(group, length):
    """Sorted group ids `(n,)` -> ids of the consecutive runs of at most
    `length` elements that each group is cut into.

    >>> cut_runs(tf.constant([0, 0, 0, 1, 1], tf.int64), 2).numpy().tolist()
    [0, 0, 1, 2, 2]
    """
    index = tf.range(tf.size(group, tf.int64))
    first = run_starts(tf.not_equal(group, tf.concat([[-1], group[:-1]], 0)))  # each group's start
    return tf.cumsum(tf.cast((index - first) % length == 0, tf.int64)) - 1


def substitute(code_points, keys, lengths, starts, values, dropped):
    """Replaces each code point found in the sorted `keys` by its run of
    `values` (`lengths[k]` of them from `starts[k]`) and drops the `dropped`
    ones -> (values `(m,)`, owner `(m,)` the index of the input code point,
    place `(m,)` in that code point's output).

    >>> out, owner, place = substitute(tf.constant([97, 98, 99]), tf.constant([98]), tf.constant([2]),
    ...                                tf.constant([0]), tf.constant([120, 121]), tf.constant([False, False, True]))
    >>> out.numpy().tolist(), owner.numpy().tolist(), place.numpy().tolist()
    ([97, 120, 121], [0, 1, 1], [0, 0, 1])
    """
    slot = tf.minimum(tf.searchsorted(keys, code_points), tf.size(keys) - 1)
    mapped = tf.equal(tf.gather(keys, slot), code_points)
    length = tf.where(dropped, 0, tf.where(mapped, tf.gather(lengths, slot), 1))
    piece = tf.ragged.range(length)  # (code points, out)
    owner = row_ids(piece)
    place = tf.cast(piece.flat_values, tf.int32)
    source = tf.clip_by_value(tf.gather(tf.gather(starts, slot), owner) + place, 0, tf.size(values) - 1)
    out = tf.where(tf.gather(mapped, owner), tf.gather(values, source), tf.gather(code_points, owner))
    return out, owner, place
