"""Raw examples -> batches a task can train or predict on.

Tasks take what users have: lists of strings (or pairs of lists), numpy
arrays, or `tf.data` datasets of strings, batched or not. Each batch goes
through the task's preprocessor inside `tf.data` and is padded to the
smallest boundary that holds its longest row: short text is not padded to
`sequence_length`. Boundaries are multiples of 8; for in-memory examples
they are fitted to the examples' lengths (`fitted_boundaries`), and for a
model XLA compiles per input shape there are only a few of them
(`COMPILED_SHAPES`), so it compiles a few programs, not one per batch
length. Training batches are drawn
from runs of shuffled examples sorted by length, and `predict` on lists
sorts the examples by length (and puts the outputs back in order), so that
batches hold rows of similar length and little padding.
"""

import numpy as np
import tensorflow as tf

from kerasbert.distribution import check_global_batch

DEFAULT_BOUNDARIES = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
# Batches regrouped by length at a time (see `make_dataset`).
GROUP_BY_LENGTH = 16
# Padded lengths are multiples of this (see `fitted_boundaries`).
PADDING_MULTIPLE = 8
# Padded lengths below `sequence_length` for models that XLA compiles once per
# input shape: each costs a compilation (seconds), fewer cost padding.
COMPILED_SHAPES = 4
# What one more compiled length must save, in padded positions (rows x
# tokens): all-MiniLM-L6-v2's training step took ~10 s to compile on 2 CPU
# cores, and ~1 ms per position of its 32-row batches.
SHAPE_COST = 8192


def length_boundaries(sequence_length, boundaries=DEFAULT_BOUNDARIES):
    """The padded lengths used for `sequence_length`: the defaults up to it,
    and `sequence_length` itself last."""
    return tuple(b for b in boundaries if b < sequence_length) + (int(sequence_length),)


def fitted_boundaries(lengths, sequence_length, shapes=None, multiple=PADDING_MULTIPLE, shape_cost=0):
    """Padded lengths for rows of these `lengths` (tokens, specials
    included): multiples of `multiple` (for the matrix units), at most
    `shapes` of them below `sequence_length` (None: as many as the lengths
    need), chosen to pad the fewest positions; `sequence_length` is always
    last. XLA compiles one program per padded length, so compiled models
    take a few; eager ones take every multiple the data needs. With
    `shapes`, each length beyond the first must also save more than
    `shape_cost` padded positions (rows x tokens) to be kept: a compilation
    costs as much as that much padding, so few examples get fewer lengths.

    >>> fitted_boundaries([3, 9, 10, 30, 31], 128)
    (8, 16, 32, 128)
    >>> fitted_boundaries([3, 9, 10, 30, 31], 128, shapes=2)
    (16, 32, 128)
    >>> fitted_boundaries([3, 9, 10, 30, 31], 128, shapes=2, shape_cost=100)
    (32, 128)
    """
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


def is_raw(x):
    """Whether `x` holds text (str lists/arrays, or a pair of them) rather
    than already-packed features."""
    if isinstance(x, tuple) and len(x) == 2:
        return is_raw(x[0]) and is_raw(x[1])
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO"
    if isinstance(x, (list, tuple)):
        return len(x) > 0 and isinstance(x[0], (str, bytes, list, tuple))
    return isinstance(x, tf.Tensor) and x.dtype == tf.string or isinstance(x, tf.RaggedTensor)


def _to_slices(value):
    """Lists of variable-length rows (words, word tags) -> a ragged tensor."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, np.ndarray)):
        rows = [list(row) for row in value]
        text = any(isinstance(item, (str, bytes)) for row in rows for item in row[:1])
        return tf.ragged.constant(rows, dtype=tf.string if text else tf.int32)
    return value


def _example_count(x):
    first = x[0] if isinstance(x, tuple) else x
    return len(first)


def _check_lengths(x, y, sample_weight):
    count = _example_count(x)
    if isinstance(x, tuple) and len(x[1]) != count:
        raise ValueError(f"the two sides of the pairs differ in length: {count} and {len(x[1])}.")
    for name, value in (("y", y), ("sample_weight", sample_weight)):
        if value is not None and len(value) != count:
            raise ValueError(f"{name} has {len(value)} entries but x has {count} examples.")
    return count


def _is_unbatched(dataset):
    """Whether the dataset's elements are single examples: their `x` (a
    string, a pair of strings, or features) has no batch dimension."""
    spec = dataset.element_spec
    x = spec[0] if isinstance(spec, tuple) else spec
    first = tf.nest.flatten(x)[0]
    if isinstance(x, dict):  # packed features: (seq,) per example
        return first.shape.rank == 1
    return first.shape.rank == 0


def _rows_by_length(batch):
    """The rows of a preprocessed batch, shortest first."""
    features = batch[0] if isinstance(batch, tuple) else batch
    lengths = tf.math.count_nonzero(features["padding_mask"], axis=1)
    order = tf.argsort(lengths, stable=True)
    return tf.nest.map_structure(lambda t: tf.gather(t, order), batch)


def select_inputs(batch, names):
    """A preprocessed batch (features, or a tuple starting with them) with
    only the features named `names`."""
    features = batch[0] if isinstance(batch, tuple) else batch
    features = {k: v for k, v in features.items() if k in names}
    return (features, *batch[1:]) if isinstance(batch, tuple) else features


def fit_to_boundary(batch, boundaries):
    """Trims or pads every `(batch, seq, ...)` tensor of a preprocessed,
    right-padded batch (the features, and token-level labels: every tensor
    whose second dimension is the sequence's) to the smallest boundary that
    holds its longest row."""
    features = batch[0] if isinstance(batch, tuple) else batch
    width = tf.shape(features["token_ids"])[1]
    longest = tf.cast(tf.reduce_max(tf.math.count_nonzero(features["padding_mask"], axis=1)), tf.int32)
    table = tf.constant(boundaries, tf.int32)
    index = tf.minimum(tf.searchsorted(table, longest[None], side="left")[0], len(boundaries) - 1)
    target = tf.maximum(table[index], longest)

    def fit(t):
        if not isinstance(t, tf.Tensor) or t.shape.rank is None or t.shape.rank < 2:
            return t

        def resize():
            kept = t[:, :target]
            paddings = tf.concat([[[0, 0], [0, target - tf.shape(kept)[1]]],
                                  tf.zeros([t.shape.rank - 2, 2], tf.int32)], axis=0)
            return tf.pad(kept, paddings)

        return tf.cond(tf.equal(tf.shape(t)[1], width), resize, lambda: t)

    return tf.nest.map_structure(fit, batch)


def _packed_lengths(dataset, preprocess):
    """The token count of every row `preprocess` makes of `dataset`."""
    lengths = []
    for batch in dataset.batch(1024).map(preprocess, num_parallel_calls=tf.data.AUTOTUNE):
        features = batch[0] if isinstance(batch, tuple) else batch
        lengths.append(np.count_nonzero(np.asarray(features["padding_mask"]), axis=1))
    return np.concatenate(lengths) if lengths else np.zeros([0], np.int64)


def checked_batch_size(batch_size):
    """`batch_size`, 32 for None, or a ValueError naming it."""
    batch_size = 32 if batch_size is None else batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")
    return batch_size


def make_dataset(preprocessor, x, y=None, sample_weight=None, *, batch_size=32, shuffle=False,
                 seed=None, boundaries=None, shapes=None, group_by_length=GROUP_BY_LENGTH, input_names=None,
                 sort_by_length=False, replicas=1, cut_partial_batch=True):
    """A `tf.data.Dataset` of preprocessed, boundary-padded batches (and,
    with `sort_by_length`, the order of its examples).

    Args:
        preprocessor: a layer whose `call(x, y=None, sample_weight=None)`
            packs a batch of raw examples, and the two halves of it:
            `tokenize_examples(x)` and `pack_examples(tokenized, y,
            sample_weight)`.
        x: a list/array of strings, a tuple of two (pairs), a list of word
            lists, or a `tf.data.Dataset` of raw `x` or `(x, y[, weight])`
            elements, batched or not (unbatched ones get `batch_size`).
        y, sample_weight: per-example targets and weights (not with a
            dataset).
        batch_size: rows per batch; None means 32.
        shuffle: reshuffle the examples every epoch (lists only).
        seed: the shuffle seed.
        boundaries: padded lengths. By default, for in-memory examples,
            `fitted_boundaries` of their lengths with at most `shapes`;
            for datasets (lengths unknown up front) every multiple of 8
            up to the preprocessor's `sequence_length`, or, with `shapes`,
            `length_boundaries(sequence_length)`.
        shapes: how many padded lengths below `sequence_length` batches
            may take (None: any). Models compiled per input shape (XLA)
            want few; for in-memory examples each length beyond the
            first must also save `SHAPE_COST` padded positions.
        group_by_length: batches of examples in a row are regrouped by
            length (lists and unbatched datasets); 1: keep batches as
            drawn. Order within an epoch changes, never its examples.
        input_names: the model's inputs; other features the preprocessor
            gives are dropped.
        sort_by_length: in-memory examples only: batch them in order of
            their packed length, shortest first, and return `(dataset,
            order)`, where row i of the dataset is example `order[i]`
            (for prediction: the examples are tokenized once, for both).
        replicas: data-parallel replicas that split every batch
            (`kerasbert.distribution.data_parallel_replicas`); for training.
            Above 1, each batch is cut to a multiple of it and a batch left
            empty is skipped, so at most `replicas - 1` examples sit out an
            epoch (which ones changes with shuffling): JAX's sharding
            cannot split a batch of 4 rows over 8 devices. `batch_size`
            must be a multiple of it.
        cut_partial_batch: False (evaluation, where every example counts):
            a last batch that does not split raises a ValueError instead.
    """
    batch_size = checked_batch_size(batch_size)
    check_global_batch(batch_size, replicas)
    batched, in_memory = False, not isinstance(x, tf.data.Dataset)
    if sort_by_length and (not in_memory or shuffle):
        raise ValueError("sort_by_length needs in-memory examples (not a tf.data.Dataset) and shuffle=False.")
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError("y and sample_weight must be None when x is a tf.data.Dataset; put them in its elements.")
        batched, dataset = not _is_unbatched(x), x
    else:
        # In-memory examples are tokenized here, once and eagerly (fast, and
        # no tokenizer graph to build per dataset); tf.data packs them.
        count = _check_lengths(x, y, sample_weight)
        tokenized = preprocessor.tokenize_examples(x)
        slices = (tokenized,) + tuple(_to_slices(v) for v in (y, sample_weight) if v is not None)
        dataset = tf.data.Dataset.from_tensor_slices(slices)

    def preprocess(*element):
        # Elements are x, (x, y) or (x, y, sample_weight), x a pair for pairs.
        if isinstance(element[0], dict):  # already packed
            return element if len(element) > 1 else element[0]
        if in_memory:
            return preprocessor.pack_examples(*element)
        return preprocessor(*element)

    def unpack(*batch):
        return batch if len(batch) > 1 else batch[0]

    sequence_length = preprocessor.sequence_length
    order = None
    if in_memory and (boundaries is None or sort_by_length):  # lengths read before shuffling
        lengths = _packed_lengths(dataset, preprocess)
        if sort_by_length:
            order = np.argsort(lengths, kind="stable")
            dataset = tf.data.Dataset.from_tensor_slices(tf.nest.map_structure(lambda t: tf.gather(t, order), slices))
        if boundaries is None:
            boundaries = fitted_boundaries(lengths, sequence_length, shapes, shape_cost=SHAPE_COST)
    elif boundaries is None:
        boundaries = _unknown_length_boundaries(sequence_length, shapes)
    if in_memory and shuffle:
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
    if batched or group_by_length <= 1:
        dataset = dataset if batched else dataset.batch(batch_size)
        dataset = dataset.map(preprocess, **parallel)
    else:
        # Batches of similar lengths: sort each run of `group_by_length`
        # batches by length, cut it into batches, shuffle their order.
        examples = dataset.cardinality()
        dataset = dataset.batch(batch_size * group_by_length).map(preprocess, **parallel)
        dataset = dataset.map(lambda *b: _rows_by_length(unpack(*b))).unbatch().batch(batch_size)
        if examples >= 0:  # unbatch() forgets it; fit's schedule needs it
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(-(-examples // batch_size)))
        if shuffle:
            dataset = dataset.shuffle(group_by_length, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(lambda *b: fit_to_boundary(unpack(*b), boundaries), **parallel)
    if replicas > 1 and in_memory and not cut_partial_batch and count % batch_size % replicas:
        raise ValueError(
            f"The last batch of {count % batch_size} examples (of {count}, batch_size={batch_size}) cannot be "
            f"split over the {replicas} data-parallel replicas of the active keras.distribution, and evaluation "
            f"drops none. Choose a batch_size that is a multiple of {replicas} and leaves a last batch that is "
            "one too (or divides the number of examples), or evaluate outside the distribution's scope."
        )
    if replicas > 1 and cut_partial_batch:
        dataset = _whole_replica_batches(dataset, replicas, count if in_memory else None, batch_size)
    if input_names is not None:
        dataset = dataset.map(lambda *b: select_inputs(unpack(*b), input_names))
    dataset = without_autotune(dataset.prefetch(2))
    return (dataset, order) if sort_by_length else dataset


def _unknown_length_boundaries(sequence_length, shapes):
    """Padded lengths for batches whose lengths are not known up front:
    every multiple of 8, or with `shapes` the few `DEFAULT_BOUNDARIES`."""
    table = DEFAULT_BOUNDARIES if shapes is not None else range(PADDING_MULTIPLE, sequence_length, PADDING_MULTIPLE)
    return length_boundaries(sequence_length, tuple(table))


def _whole_replica_batches(dataset, replicas, count, batch_size):
    """Every batch cut to a multiple of `replicas` rows; empty ones skipped."""
    def rows(batch):
        return tf.shape(tf.nest.flatten(batch)[0])[0]

    def cut(*batch):
        keep = rows(batch) // replicas * replicas
        return tf.nest.map_structure(lambda t: t[:keep], batch if len(batch) > 1 else batch[0])

    # filter() forgets the cardinality, which fit's schedule needs: from the
    # count of examples, or else (a dataset of known length) one pass that
    # counts the batches that keep rows.
    if count is not None:
        batches = count // batch_size + (count % batch_size >= replicas)
    elif dataset.cardinality() >= 0:
        whole = dataset.map(lambda *batch: tf.cast(rows(batch) >= replicas, tf.int64))
        batches = int(whole.reduce(tf.constant(0, tf.int64), lambda total, n: total + n))
    else:
        batches = None
    dataset = dataset.map(cut).filter(lambda *batch: rows(batch) > 0)
    if batches is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset


def pack_batch(preprocessor, x, *, shapes=None, input_names=None):
    """In-memory raw examples packed eagerly as one batch, without tf.data:
    the features `make_dataset` gives for a batch of unknown lengths (the
    same boundaries: multiples of 8, or with `shapes` the few
    `length_boundaries`). For predicting a handful of examples, where
    building and tracing a tf.data pipeline costs far more than the model."""
    batch = preprocessor.pack_examples(preprocessor.tokenize_examples(x))
    batch = fit_to_boundary(batch, _unknown_length_boundaries(preprocessor.sequence_length, shapes))
    return batch if input_names is None else select_inputs(batch, input_names)


def without_autotune(dataset):
    """`dataset` with tf.data's autotuning off. With it on, deleting an
    iterator (at the end of every epoch and of `predict`) waited seconds
    for the autotuning thread whenever another library (torch, XLA) had
    kept the CPU busy: 23 s of a 150 s epoch here. Parallel maps then run
    on as many threads as there are cores."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)
