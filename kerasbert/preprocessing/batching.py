"""Batches that waste little: length buckets with a few static shapes (and
the padding they leave; packing documents is in `document_packing.py`)."""

import tensorflow as tf


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
    boundaries = [int(b) for b in boundaries]
    if not boundaries or boundaries != sorted(set(boundaries)) or boundaries[0] < 1:
        raise ValueError(f"boundaries must be increasing positive lengths; got {boundaries}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")

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
    ).map(lambda *batch: _pad_to_boundary(batch, boundaries, length_key, pad_id))


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
    real = total = 0
    for batch in batches:
        features = batch[0] if isinstance(batch, tuple) else batch
        mask = features[mask_key]
        real += int(tf.math.count_nonzero(mask, dtype=tf.int64))
        total += int(tf.size(mask, tf.int64))
    return 1.0 - real / total if total else 0.0
