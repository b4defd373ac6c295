"""Batches that waste little: the few static shapes a batch is padded to
(fitted to the examples' lengths, or length buckets), the padding they
leave, and the plan of batches of rows of similar length.

Each batch is padded to the smallest boundary that holds its longest row:
short text is not padded to `sequence_length`. For in-memory examples the
boundaries are fitted to the examples' lengths (`fitted_boundaries`): each
batch's own longest row when the step runs eagerly (any shape costs the
same), and for a model XLA compiles per input shape a few multiples of 8
(`COMPILED_SHAPES`), so it compiles a few programs, not one per batch
length.
"""

import collections.abc

import numpy as np

from kerasbert.utils.checks import abbreviated, check_id, check_int
from kerasbert.utils.optional import do_not_convert, is_dataset, tf

DEFAULT_BOUNDARIES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


# Batches regrouped by length at a time (see `make_dataset`).
GROUP_BY_LENGTH = 16


# Padded lengths under XLA are multiples of this (see `fitted_boundaries`);
# eager steps take exact lengths, which measured 6-8% faster on MiniLM
# (docs/performance_history.md).
PADDING_MULTIPLE = 8


# Padded lengths below `sequence_length` for models that XLA compiles once per
# input shape: each costs a compilation (seconds), fewer cost padding.
COMPILED_SHAPES = 4


# What one more compiled length must save, in padded positions (rows x
# tokens): all-MiniLM-L6-v2's training step took ~10 s to compile on 2 CPU
# cores, and ~1 ms per position of its 32-row batches.
SHAPE_COST = 8192


# Padded positions (rows x tokens) `predict` puts in a batch of short rows:
# at least `batch_size` rows, more while they fit (`batch_plan`). On
# all-MiniLM-L6-v2's 2,000 test snippets batches of 2,048 positions
# predicted 12% faster than batches of 32 rows on TensorFlow, and 2,496
# positions 6% faster on torch; 4,992 were 13% slower on torch
# (docs/performance_history.md).
PREDICT_POSITIONS = 2048

def length_boundaries(sequence_length, boundaries=DEFAULT_BOUNDARIES):
    """The padded lengths used for `sequence_length`: the defaults up to it,
    and `sequence_length` itself last."""
    return tuple(b for b in boundaries if b < sequence_length) + (int(sequence_length),)


def fitted_boundaries(lengths, sequence_length, shapes=None, multiple=None, shape_cost=0):
    """Padded lengths for rows of these `lengths` (tokens, specials
    included), chosen to pad the fewest positions; `sequence_length` is
    always last. Without `shapes` (eager steps, where any length costs the
    same) every length the rows have, rounded up to `multiple` (default 1).
    XLA compiles one program per padded length, so with `shapes` there are
    at most that many below `sequence_length`, multiples of `multiple`
    (default `PADDING_MULTIPLE`, for the matrix units), and each length
    beyond the first must also save more than `shape_cost` padded positions
    (rows x tokens) to be kept: a compilation costs as much as that much
    padding, so few examples get fewer lengths.

    >>> fitted_boundaries([3, 9, 10, 30, 31], 128)
    (3, 9, 10, 30, 31, 128)
    >>> fitted_boundaries([3, 9, 10, 30, 31], 128, shapes=2)
    (16, 32, 128)
    >>> fitted_boundaries([3, 9, 10, 30, 31], 128, shapes=2, shape_cost=100)
    (32, 128)
    """
    if multiple is None:
        multiple = 1 if shapes is None else PADDING_MULTIPLE
    lengths = np.minimum(np.asarray(lengths, np.int64), sequence_length)
    rounded = np.minimum(-(-np.maximum(lengths, 1) // multiple) * multiple, sequence_length)
    candidates, counts = np.unique(rounded, return_counts=True)
    if shapes is not None and len(candidates) > 1:
        # cost[k][i]: fewest padded positions for the rows up to candidate i
        # (which is a boundary) with k boundaries.
        size, shapes = len(candidates), min(shapes, len(candidates))
        prefix = np.concatenate([[0], np.cumsum(counts)])
        cost = np.full((shapes + 1, size), np.inf)
        choice = np.zeros((shapes + 1, size), np.int64)
        cost[1] = candidates * prefix[1:]
        for k in range(2, shapes + 1):
            for i in range(size):
                # the previous boundary j < i; rows j+1..i padded to candidates[i]
                options = [cost[k - 1][j] + candidates[i] * (prefix[i + 1] - prefix[j + 1]) for j in range(i)]
                if options:
                    j = int(np.argmin(options))
                    cost[k][i], choice[k][i] = options[j], j
        # The number of lengths whose padding plus compilations costs least.
        totals = cost[1:, size - 1] + shape_cost * np.arange(shapes)
        kept, i = [], size - 1
        for k in range(int(np.argmin(totals)) + 1, 0, -1):
            kept.append(int(candidates[i]))
            if k == 1:
                break
            i = int(choice[k][i])
        candidates = np.array(sorted(set(kept)))
    return tuple(int(c) for c in candidates if c < sequence_length) + (int(sequence_length),)


def checked_batch_size(batch_size):
    """`batch_size`, 32 for None, or a ValueError naming it."""
    return check_int("batch_size", 32 if batch_size is None else batch_size, 1)


def unknown_length_boundaries(sequence_length, shapes):
    """Padded lengths for batches whose lengths are not known up front:
    every multiple of 8, or with `shapes` the few `DEFAULT_BOUNDARIES`."""
    table = DEFAULT_BOUNDARIES if shapes is not None else range(PADDING_MULTIPLE, sequence_length, PADDING_MULTIPLE)
    return length_boundaries(sequence_length, tuple(table))


def rows_per_batch(width, batch_size):
    """The rows `predict` puts in a batch of rows `width` tokens wide: at
    least `batch_size`, more while they fit in `PREDICT_POSITIONS`."""
    return max(batch_size, PREDICT_POSITIONS // max(int(width), 1))


def batch_plan(widths, batch_size, fill=False):
    """The batches `predict` makes of examples padded to `widths` (tokens,
    in ascending order): `(begin, end, width, rows)` for each, the examples
    `begin` to `end` padded to `width`, the longest of them, in a batch of
    `rows` rows. A batch of width `w` holds up to `max(batch_size,
    PREDICT_POSITIONS // w)` rows, and each takes as many examples as that
    allows. `rows` is the number of examples, or with `fill` (XLA: one
    program per input shape) that most, so that every batch of one width
    has the same shape.

    >>> batch_plan([100] * 30 + [300] * 10, batch_size=2)
    [(0, 20, 100, 20), (20, 30, 100, 10), (30, 36, 300, 6), (36, 40, 300, 4)]
    >>> batch_plan([100] * 30 + [300] * 10, batch_size=2, fill=True)[1]
    (20, 30, 100, 20)
    """
    plan, begin, count = [], 0, len(widths)
    while begin < count:
        # k examples fit when k <= rows_per_batch(the k-th one's width); as the
        # widths only grow, it only shrinks: the ones that fit are a
        # prefix, found by bisection.
        low, high = 1, min(count - begin, rows_per_batch(widths[begin], batch_size))
        while low < high:
            middle = (low + high + 1) // 2
            if middle <= rows_per_batch(widths[begin + middle - 1], batch_size):
                low = middle
            else:
                high = middle - 1
        end = begin + low
        width = int(widths[end - 1])
        plan.append((begin, end, width, rows_per_batch(width, batch_size) if fill else end - begin))
        begin = end
    return plan


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
        raise TypeError(f"boundaries must be a list of increasing lengths; got {abbreviated(boundaries)}.")
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

    def pad(*batch):  # (features,) or (features, label, ...)
        batch = fit_to_boundary(_checked_width(batch, boundaries, length_key), boundaries, length_key,
                                {length_key: pad_id})
        return batch if len(batch) > 1 else batch[0]

    # tf.data buckets are [b_i, b_i+1); a sequence of length n goes to the
    # bucket padded to n's boundary, hence the +1.
    return dataset.bucket_by_sequence_length(
        length,
        bucket_boundaries=[b + 1 for b in boundaries[:-1]],
        bucket_batch_sizes=[batch_size] * len(boundaries),
        pad_to_bucket_boundary=False,
        padding_values=_padding_values(dataset, length_key, pad_id),
        drop_remainder=False,
    ).map(do_not_convert(pad))


def _feature_specs(dataset, length_key):
    """The element spec of a dataset of unbatched examples, checked -> its
    features' specs (a dict)."""
    if not is_dataset(dataset):
        raise TypeError(f"dataset must be a tf.data.Dataset of unbatched examples; got {abbreviated(dataset)}.")
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


def fit_to_boundary(batch, boundaries, length_key="token_ids", pad_values=None):
    """Trims or pads every `(batch, seq, ...)` tensor of a right-padded
    batch (the features, and token-level labels: every tensor as wide as
    `length_key`) to the smallest of `boundaries` that holds its longest
    row, so that batches take a few static shapes. Row lengths come from
    `padding_mask` where the features have one (else the batch's width);
    a row longer than the last boundary keeps its length. `pad_values`:
    the padding value of each feature by name, 0 for the others.

    >>> batch = {"token_ids": tf.constant([[5, 6, 0]]), "padding_mask": tf.constant([[1, 1, 0]])}
    >>> fit_to_boundary(batch, [4, 8], pad_values={"token_ids": 1})["token_ids"].numpy().tolist()
    [[5, 6, 0, 1]]
    """
    features = batch[0] if isinstance(batch, tuple) else batch
    pad_values = pad_values or {}
    width = tf.shape(features[length_key])[1]
    if "padding_mask" in features:
        longest = tf.cast(tf.reduce_max(tf.math.count_nonzero(features["padding_mask"], axis=1)), tf.int32)
    else:
        longest = width
    table = tf.constant(boundaries, tf.int32)
    index = tf.minimum(tf.searchsorted(table, longest[None], side="left")[0], len(boundaries) - 1)
    target = tf.maximum(table[index], longest)

    def fit(t, pad=0):
        if not isinstance(t, tf.Tensor) or t.shape.rank is None or t.shape.rank < 2:
            return t

        def resize():
            kept = t[:, :target]
            paddings = tf.concat([[[0, 0], [0, target - tf.shape(kept)[1]]],
                                  tf.zeros([t.shape.rank - 2, 2], tf.int32)], axis=0)
            return tf.pad(kept, paddings, constant_values=tf.cast(pad, t.dtype))

        return tf.cond(tf.equal(tf.shape(t)[1], width), resize, lambda: t)

    fitted = {name: fit(value, pad_values.get(name, 0)) for name, value in features.items()}
    if not isinstance(batch, tuple):
        return fitted
    return (fitted, *tf.nest.map_structure(fit, batch[1:]))


def _checked_width(batch, boundaries, length_key):
    """`batch`, after an assertion that no example is longer than the last
    boundary (the dataset's shapes may not say)."""
    width = tf.shape(batch[0][length_key])[1]
    check = tf.debugging.assert_less_equal(
        width, boundaries[-1], message=f"bucket_by_length: an example is longer than boundaries[-1]={boundaries[-1]}"
    )
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, batch)


def padding_fraction(batches, mask_key="padding_mask"):
    """The share of positions that are padding (0 in the padding mask), over
    an iterable of batches (dicts, or (features, label) tuples) holding a
    padding mask of 0/1 or of document ids (`pack_documents`)."""
    if isinstance(batches, (str, bytes, collections.abc.Mapping)) or not isinstance(batches, collections.abc.Iterable):
        raise TypeError(f"batches must be an iterable of batches (e.g. a tf.data.Dataset); got {abbreviated(batches)}.")
    real = total = 0
    for i, batch in enumerate(batches):
        features = batch[0] if isinstance(batch, tuple) else batch
        if not isinstance(features, collections.abc.Mapping) or mask_key not in features:
            raise ValueError(
                f"batch {i} must be a dict holding mask_key={mask_key!r} (or a (features, label) tuple); "
                f"got {abbreviated(features)}."
            )
        mask = features[mask_key]
        real += int(tf.math.count_nonzero(mask, dtype=tf.int64))
        total += int(tf.size(mask, tf.int64))
    return 1.0 - real / total if total else 0.0
