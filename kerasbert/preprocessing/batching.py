"""Batches that waste little: length buckets with a few static shapes (and
the padding they leave; packing documents is in `document_packing.py`)."""

import collections.abc

import numpy as np

from kerasbert.utils.checks import check_id, check_int, show
from kerasbert.utils.optional import do_not_convert, is_dataset, tf


def bucket_by_length(
    dataset, batch_size, boundaries=(32, 64, 128, 256, 512), length_key="token_ids", pad_id=0
):
    """Groups examples of similar length and pads each batch to its bucket's
    boundary, so that a whole epoch uses only `len(boundaries)` shapes (XLA
    compiles each once) while short inputs are not padded to the longest.

    Args:
        dataset: a `tf.data.Dataset` of unbatched examples: a dict of 1-D
            tensors of one length (e.g. a packer's output for one example),
            or a `(features, label)` tuple of such a dict and a label.
        batch_size: examples per batch.
        boundaries: increasing padded lengths; the last must be at least the
            longest example (the packer's `sequence_length`).
        length_key: the feature whose length decides the bucket.
        pad_id: the padding value of `length_key` (other features pad with 0).

    Returns:
        A dataset of batches padded with zeros to one of `boundaries`.
    """
    features = _feature_specs(dataset, length_key)
    if isinstance(boundaries, np.ndarray):
        boundaries = boundaries.tolist()
    if not isinstance(boundaries, (list, tuple)):
        raise TypeError(f"boundaries must be a list of increasing lengths; got {show(boundaries)}.")
    boundaries = [check_int(f"boundaries[{i}]", b, 1) for i, b in enumerate(boundaries)]
    if not boundaries or boundaries != sorted(set(boundaries)):
        raise ValueError(f"boundaries must be increasing positive lengths; got {boundaries}.")
    check_int("batch_size", batch_size, 1)
    check_id("pad_id", pad_id)
    longest = features[length_key].shape[0]
    if longest is not None and longest > boundaries[-1]:
        raise ValueError(
            f"boundaries={boundaries} end below the examples' length {longest} ({length_key}); "
            "the last boundary must be at least the longest example."
        )

    @do_not_convert
    def length(*element):
        features = element[0]
        return tf.shape(features[length_key])[0]

    # tf.data buckets are [b_i, b_i+1); a sequence of length n goes to the
    # bucket padded to n's boundary, hence the +1.
    return dataset.bucket_by_sequence_length(
        length,
        bucket_boundaries=[b + 1 for b in boundaries[:-1]],
        bucket_batch_sizes=[batch_size] * len(boundaries),
        pad_to_bucket_boundary=False,
        padding_values=_padding_values(dataset, length_key, pad_id),
        drop_remainder=False,
    ).map(do_not_convert(lambda *batch: _pad_to_boundary(batch, boundaries, length_key, pad_id)))


def _feature_specs(dataset, length_key):
    """The element spec of a dataset of unbatched examples, checked -> its
    features' specs (a dict)."""
    if not is_dataset(dataset):
        raise TypeError(f"dataset must be a tf.data.Dataset of unbatched examples; got {show(dataset)}.")
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) and spec else spec
    if not isinstance(features, dict):
        raise TypeError(
            "dataset must yield dicts of features (e.g. a Packer's output) or (features, label) tuples; "
            f"got element_spec={spec}."
        )
    if length_key not in features:
        raise ValueError(f"length_key={length_key!r} is not a feature of the dataset, which has {sorted(features)}.")
    if not isinstance(features[length_key], tf.TensorSpec) or features[length_key].shape.rank != 1:
        raise ValueError(
            f"dataset's {length_key!r} must be 1-D, one unbatched example per element (unbatch a batched "
            f"dataset first); got {features[length_key]}."
        )
    return features


def _padding_values(dataset, length_key, pad_id):
    spec = dataset.element_spec
    features = spec[0] if isinstance(spec, tuple) else spec
    values = {k: tf.constant(pad_id if k == length_key else 0, v.dtype) for k, v in features.items()}
    if isinstance(spec, tuple):
        return (values, *(tf.constant(0, s.dtype) for s in spec[1:]))
    return values


def _pad_to_boundary(batch, boundaries, length_key, pad_id):
    features = batch[0]
    width = tf.shape(features[length_key])[1]
    check = tf.debugging.assert_less_equal(
        width, boundaries[-1], message=f"bucket_by_length: an example is longer than boundaries[-1]={boundaries[-1]}"
    )
    with tf.control_dependencies([check]):
        width = tf.identity(width)
    table = tf.constant(boundaries)
    target = tf.gather(table, tf.minimum(tf.searchsorted(table, [width], side="left")[0], len(boundaries) - 1))
    padded = {
        k: tf.pad(v, [[0, 0], [0, target - tf.shape(v)[1]]], constant_values=pad_id if k == length_key else 0)
        if v.shape.rank == 2 else v
        for k, v in features.items()
    }
    return (padded, *batch[1:]) if len(batch) > 1 else padded


def padding_fraction(batches, mask_key="padding_mask"):
    """The share of positions that are padding (0 in the padding mask), over
    an iterable of batches (dicts, or (features, label) tuples) holding a
    padding mask of 0/1 or of document ids (`pack_documents`)."""
    if isinstance(batches, (str, bytes, collections.abc.Mapping)) or not isinstance(batches, collections.abc.Iterable):
        raise TypeError(f"batches must be an iterable of batches (e.g. a tf.data.Dataset); got {show(batches)}.")
    real = total = 0
    for i, batch in enumerate(batches):
        features = batch[0] if isinstance(batch, tuple) else batch
        if not isinstance(features, collections.abc.Mapping) or mask_key not in features:
            raise ValueError(
                f"batch {i} must be a dict holding mask_key={mask_key!r} (or a (features, label) tuple); "
                f"got {show(features)}."
            )
        mask = features[mask_key]
        real += int(tf.math.count_nonzero(mask, dtype=tf.int64))
        total += int(tf.size(mask, tf.int64))
    return 1.0 - real / total if total else 0.0
