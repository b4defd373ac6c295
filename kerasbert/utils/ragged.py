"""Ragged-tensor helpers for the TensorFlow preprocessing graphs."""

import tensorflow as tf


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
