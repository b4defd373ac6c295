"""Raw examples -> batches a task can train or predict on.

Tasks take what users have: lists of strings (or pairs of lists), numpy
arrays, or `tf.data` datasets of strings, batched or not. Each batch goes
through the task's preprocessor inside `tf.data` and is padded to the
smallest boundary that holds its longest row: short text is not padded to
`sequence_length`. For in-memory examples the boundaries are fitted to the
examples' lengths (`fitted_boundaries`): each batch's own longest row when
the step runs eagerly (any shape costs the same), and for a model XLA
compiles per input shape a few multiples of 8 (`COMPILED_SHAPES`), so it
compiles a few programs, not one per batch length. Training batches are drawn
from runs of shuffled examples sorted by length, and `predict` on lists
sorts the examples by length (`sorted_batches`, which packs them eagerly,
without tf.data; the outputs go back in order), so that batches hold rows of
similar length and little padding; its batches of short rows hold more rows
(`PREDICT_POSITIONS`). Under XLA, tasks with one output per example train
and predict on packed rows instead (`kerasbert.tasks.packed_training`,
`kerasbert.tasks.packed_prediction`).
"""

import contextlib
import dataclasses
import numbers
import re
import weakref

import numpy as np

from kerasbert.distribution import check_global_batch
from kerasbert.utils.checks import show
from kerasbert.utils.features import (
    SEQUENCE,
    as_array,
    feature_ranges,
    indexed,
    plain,
)

# tf.data traces the functions it maps through AutoGraph, which rewrote this
# package's Python source on every new pipeline: 1.5 s of the 1.75 s trace of
# a packing map. No kerasbert function branches on tensors in Python, so every
# function kerasbert gives tf.data is traced as written (`do_not_convert`),
# and with it what it calls: a preprocessor subclass's methods too, as Keras
# already traces every layer's `call` (write tensor-dependent branches there
# with `tf.cond`).
from kerasbert.utils.optional import do_not_convert, is_dataset, is_ragged, is_tensor, tf

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
# Examples `sorted_batches` packs at a time, at full `sequence_length`.
PACKING_CHUNK = 4096
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


def _to_slices(value):
    """Lists of variable-length rows (words, word tags, word weights) -> a
    ragged tensor: strings, int32, or float32 when any value is a float."""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, np.ndarray)):
        rows = [np.asarray(row).tolist() if isinstance(row, np.ndarray) else list(row) for row in value]
        if any(isinstance(item, (str, bytes)) for row in rows for item in row[:1]):
            return tf.ragged.constant(rows, dtype=tf.string)
        floats = any(isinstance(item, float) for row in rows for item in row)
        return tf.ragged.constant(rows, dtype=tf.float32 if floats else tf.int32)
    return value


def _example_count(x):
    first = x[0] if isinstance(x, tuple) else x
    return len(first)


def check_example_counts(x, y, sample_weight):
    """The number of in-memory examples in `x`, or a ValueError when the
    two sides of pairs, `y` or `sample_weight` hold another."""
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
    for batch in dataset.batch(1024).map(do_not_convert(preprocess), num_parallel_calls=tf.data.AUTOTUNE):
        features = batch[0] if isinstance(batch, tuple) else batch
        lengths.append(np.count_nonzero(np.asarray(features["padding_mask"]), axis=1))
    return np.concatenate(lengths) if lengths else np.zeros([0], np.int64)


def checked_batch_size(batch_size):
    """`batch_size`, 32 for None, or a ValueError naming it."""
    return checked_count(batch_size, "batch_size", default=32)


def make_dataset(preprocessor, x, y=None, sample_weight=None, *, batch_size=32, shuffle=False,
                 seed=None, boundaries=None, shapes=None, group_by_length=GROUP_BY_LENGTH, input_names=None,
                 replicas=1, cut_partial_batch=True, check_tokenized=None, tokenized=None):
    """A `tf.data.Dataset` of preprocessed, boundary-padded batches.

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
            `fitted_boundaries` of their lengths: every length they have,
            or with `shapes` at most that many multiples of 8; for datasets
            (lengths unknown up front) every multiple of 8 up to the
            preprocessor's `sequence_length`, or, with `shapes`,
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
        replicas: data-parallel replicas that split every batch
            (`kerasbert.distribution.data_parallel_replicas`); for training.
            Above 1, each batch is cut to a multiple of it and a batch left
            empty is skipped, so at most `replicas - 1` examples sit out an
            epoch (which ones changes with shuffling): JAX's sharding
            cannot split a batch of 4 rows over 8 devices. `batch_size`
            must be a multiple of it.
        cut_partial_batch: False (evaluation, where every example counts):
            a last batch that does not split raises a ValueError instead.
        check_tokenized: in-memory examples: called as `check_tokenized(
            tokenized, y, sample_weight)` once they are tokenized, to check
            the targets against them (e.g. one tag per word) eagerly, before
            any of it runs in tf.data.
        tokenized: in-memory examples already tokenized,
            `preprocessor.tokenize_examples(x)` (then not tokenized again).
    """
    batch_size = checked_batch_size(batch_size)
    check_global_batch(batch_size, replicas)
    batched, in_memory = False, not is_dataset(x)
    if is_dataset(x):
        if y is not None or sample_weight is not None:
            raise ValueError("y and sample_weight must be None when x is a tf.data.Dataset; put them in its elements.")
        batched, dataset = not _is_unbatched(x), x
    else:
        # In-memory examples are tokenized here, once and eagerly (fast, and
        # no tokenizer graph to build per dataset); tf.data packs them.
        count = check_example_counts(x, y, sample_weight)
        tokenized = preprocessor.tokenize_examples(x) if tokenized is None else tokenized
        if check_tokenized is not None:
            check_tokenized(tokenized, y, sample_weight)
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
    if in_memory and boundaries is None:  # lengths read before shuffling
        lengths = _packed_lengths(dataset, preprocess)
        boundaries = fitted_boundaries(lengths, sequence_length, shapes, shape_cost=SHAPE_COST)
    elif boundaries is None:
        boundaries = _unknown_length_boundaries(sequence_length, shapes)
    if in_memory and shuffle:
        dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
    parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
    if batched or group_by_length <= 1:
        dataset = dataset if batched else dataset.batch(batch_size)
        dataset = dataset.map(do_not_convert(preprocess), **parallel)
    else:
        # Batches of similar lengths: sort each run of `group_by_length`
        # batches by length, cut it into batches, shuffle their order.
        examples = dataset.cardinality()
        dataset = dataset.batch(batch_size * group_by_length).map(do_not_convert(preprocess), **parallel)
        dataset = dataset.map(do_not_convert(lambda *b: _rows_by_length(unpack(*b)))).unbatch().batch(batch_size)
        if examples >= 0:  # unbatch() forgets it; fit's schedule needs it
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(-(-examples // batch_size)))
        if shuffle:
            dataset = dataset.shuffle(group_by_length, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.map(do_not_convert(lambda *b: fit_to_boundary(unpack(*b), boundaries)), **parallel)
    if in_memory and not cut_partial_batch:
        check_last_batch_splits(count, batch_size, replicas)
    if replicas > 1 and cut_partial_batch:
        dataset = _whole_replica_batches(dataset, replicas, count if in_memory else None, batch_size)
    if input_names is not None:
        dataset = dataset.map(do_not_convert(lambda *b: select_inputs(unpack(*b), input_names)))
    return without_autotune(dataset.prefetch(2))


def check_last_batch_splits(count, batch_size, replicas):
    """For evaluation, which drops no example: a ValueError unless the last
    batch of `count` examples splits over `replicas` data-parallel replicas."""
    if replicas > 1 and count % batch_size % replicas:
        raise ValueError(
            f"The last batch of {count % batch_size} examples (of {count}, batch_size={batch_size}) cannot be "
            f"split over the {replicas} data-parallel replicas of the active keras.distribution, and evaluation "
            f"drops none. Choose a batch_size that is a multiple of {replicas} and leaves a last batch that is "
            "one too (or divides the number of examples), or evaluate outside the distribution's scope."
        )


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
        whole = dataset.map(do_not_convert(lambda *batch: tf.cast(rows(batch) >= replicas, tf.int64)))
        batches = int(whole.reduce(tf.constant(0, tf.int64), do_not_convert(lambda total, n: total + n)))
    else:
        batches = None
    dataset = dataset.map(do_not_convert(cut)).filter(do_not_convert(lambda *batch: rows(batch) > 0))
    if batches is not None:
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset


def sorted_batches(preprocessor, x, *, batch_size=32, shapes=None, input_names=None, check=None):
    """In-memory raw examples, for prediction, as batches of packed NumPy
    features in order of their packed length, shortest first, each padded
    as `make_dataset` pads its batches (`fitted_boundaries`); and `order`:
    the i-th row of the batches, in sequence, is example `order[i]`, or a
    filler row when `order[i]` is -1.

    A batch holds at least `batch_size` rows, and short rows more while
    they fit in `PREDICT_POSITIONS` padded positions (`batch_plan`): the
    forward pass of a batch of short rows costs more per position (32 rows
    of 8 tokens 1.5x as much as 32 of 32 on this project's CPU). With
    `shapes` (XLA, one program per input shape) every batch of one padded
    length has the same rows: one that holds fewer, at most one per padded
    length and the last, is filled up with copies of its first row, whose
    outputs are dropped, instead of compiling another program.

    The examples are tokenized once and packed eagerly, `PACKING_CHUNK` at
    a time (which bounds the rows held at full `sequence_length`): once in
    their order, for their lengths and `check(features)` (which raises on
    bad features), then in the sorted order as the batches are drawn, with
    no packing for a single chunk. No tf.data pipeline: its tracing took
    ~0.4 s a call, and its threads the cores the model's forward passes
    run on (docs/performance_history.md).

    Returns `(batches, order)`, `batches` an iterator that packs as it goes.
    """
    batch_size = checked_batch_size(batch_size)
    pack, lengths, first, chunk = tokenized_lengths(preprocessor, x, batch_size=batch_size,
                                                    input_names=input_names, check=check)
    by_length = np.argsort(lengths, kind="stable")
    boundaries = np.asarray(fitted_boundaries(lengths, preprocessor.sequence_length, shapes,
                                              shape_cost=SHAPE_COST))
    # Each example's padded length: the smallest boundary that holds it.
    widths = np.maximum(boundaries[np.minimum(np.searchsorted(boundaries, lengths), len(boundaries) - 1)], lengths)
    plan = batch_plan(widths[by_length], batch_size, fill=shapes is not None)
    order = np.concatenate([np.concatenate([by_length[begin:end], np.full(rows - (end - begin), -1)])
                            for begin, end, _, rows in plan]) if plan else by_length

    def batches():
        group = 0
        while group < len(plan):
            # Consecutive batches of at most `chunk` rows in all, packed at once.
            last = group + 1
            while last < len(plan) and plan[last][1] - plan[group][0] <= chunk:
                last += 1
            begin = plan[group][0]
            rows = by_length[begin:plan[last - 1][1]]
            features = {k: v[rows] for k, v in first.items()} if first is not None else pack(rows)
            packed_width = features["token_ids"].shape[1]
            for start, end, width, size in plan[group:last]:
                batch = {k: _fit_width(v[start - begin:end - begin], packed_width, width) for k, v in features.items()}
                if size > end - start:  # filler rows: copies of the first
                    batch = {k: np.concatenate([v, np.repeat(v[:1], size - (end - start), axis=0)])
                             for k, v in batch.items()}
                yield batch
            group = last

    return batches(), order


def tokenized_lengths(preprocessor, x, *, batch_size=32, input_names=None, check=None, tokenized=None):
    """The first pass of `predict` over in-memory raw examples: tokenized
    once (or given `tokenized`, `preprocessor.tokenize_examples(x)`), packed
    `PACKING_CHUNK` at a time (whole batches) for their lengths and
    `check(features)`. Returns `(pack, lengths, first, chunk)`:
    `pack(rows)` packs the examples at `rows` (a slice or indices) as NumPy
    features; `lengths` each example's packed length; `first` the packed
    features of all of them when they were one chunk, else None; `chunk`
    how many examples are packed at a time."""
    batch_size = checked_batch_size(batch_size)
    tokenized = preprocessor.tokenize_examples(x) if tokenized is None else tokenized
    count = int(tf.nest.flatten(tokenized)[0].shape[0])
    chunk = batch_size * max(1, PACKING_CHUNK // batch_size)  # whole batches

    def pack(rows):
        ids = tf.nest.map_structure(lambda t: t[rows] if isinstance(rows, slice) else tf.gather(t, rows), tokenized)
        features = preprocessor.pack_examples(ids)
        features = features if input_names is None else select_inputs(features, input_names)
        return {k: np.asarray(v) for k, v in features.items()}

    lengths, first = [], None
    for start in range(0, count, chunk):
        features = pack(slice(start, start + chunk))
        if check is not None:
            check(features)
        lengths.append(np.count_nonzero(features["padding_mask"], axis=1))
        first = features if start == 0 else None  # kept when it is the only chunk
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)
    return pack, lengths, first, chunk


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


def _fit_width(array, width, target):
    """A `(batch, width, ...)` array trimmed or zero-padded to `target`
    positions; arrays of other shapes as they are."""
    if array.ndim < 2 or array.shape[1] != width:
        return array
    if target <= width:
        return array[:, :target]
    return np.pad(array, [(0, 0), (0, target - width)] + [(0, 0)] * (array.ndim - 2))


def pack_batch(preprocessor, x, *, shapes=None, input_names=None):
    """In-memory raw examples packed as one batch, without tf.data:
    padded to its longest row, or with `shapes` to the smallest of the few
    `length_boundaries` that holds it (as `make_dataset` pads a batch of
    unknown lengths). For predicting a handful of examples, where
    building and tracing a tf.data pipeline costs far more than the model.
    The first batch a preprocessor packs this way runs eagerly; later ones
    go through one traced function (see `_packing_function`)."""
    length = preprocessor.sequence_length
    table = tuple(range(1, length + 1) if shapes is None else _unknown_length_boundaries(length, shapes))
    batch = _packing_function(preprocessor, table)(preprocessor.tokenize_examples(x))
    return batch if input_names is None else select_inputs(batch, input_names)


# preprocessor -> {boundaries: its traced packing function, or None once seen}
_PACKING = weakref.WeakKeyDictionary()


def _packing_function(preprocessor, table):
    """Tokenized ids -> a packed batch padded to `table`. Eagerly, packing
    one batch of MiniLM's preprocessor ran ~200 small TensorFlow ops, 9.3 ms
    for one string; traced, 1.9 ms, after a trace of 0.5 s. So a
    preprocessor's first such batch (a one-off `predict` in a script) runs
    eagerly, and from its second (a serving loop) the traced function,
    relaxed to any batch size and length after one retrace."""
    functions = _PACKING.setdefault(preprocessor, {})
    if table not in functions:
        functions[table] = None  # seen once
        return lambda ids: fit_to_boundary(preprocessor.pack_examples(ids), table)
    if functions[table] is None:
        # A weak reference: the function must not keep its key alive.
        owner = weakref.ref(preprocessor)
        functions[table] = tf.function(lambda ids: fit_to_boundary(owner().pack_examples(ids), table),
                                       reduce_retracing=True, autograph=False)
    return functions[table]


def without_autotune(dataset):
    """`dataset` with tf.data's autotuning off. With it on, deleting an
    iterator (at the end of every epoch and of `predict`) waited seconds
    for the autotuning thread whenever another library (torch, XLA) had
    kept the CPU busy: 23 s of a 150 s epoch here. Parallel maps then run
    on as many threads as there are cores."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


# -- Checks of what users pass ------------------------------------------------
# Bad data must fail here, with a message naming the argument, rather than as
# an error of a framework's gather (TensorFlow on CPU), a silent clamp or NaN
# (JAX), or a model whose weights a NaN loss has spoilt. In-memory data is
# checked eagerly with NumPy before `fit`; a `tf.data.Dataset` gets the same
# checks as assertions in its pipeline (`checked_dataset`), so nothing is
# added to the compiled step and the data stays on the input threads.

# The start of the messages of the pipeline's assertions (`input_errors`).
INPUT_CHECK = "kerasbert input check: "


def checked_count(value, name, default=None):
    """`value` as an int (`default` for None), or a ValueError naming it
    unless it is a positive integer."""
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {show(value)}.")
    return int(value)


def check_examples(x, name="x", word_lists=False, pairs=True, datasets=True):
    """Raw in-memory examples: a batch (list, tuple, 1-D array or tensor) of
    strings, a pair `(first, second)` of such batches (with `pairs`), or with
    `word_lists` also a batch of word lists. Checks the container (the
    preprocessor checks the items): a ValueError or TypeError naming `name`
    for None, a single string, numbers, a batch of the wrong rank or an empty
    one. `datasets`: a `tf.data.Dataset` is also taken (said when x is None)."""
    accepted = "a list of strings" + (" or of word lists" if word_lists else "") + (
        ", or a pair (first, second) of them" if pairs else "")
    if pairs and isinstance(x, tuple) and len(x) == 2 and not all(isinstance(v, (str, bytes)) for v in x):
        for i, side in enumerate(x):
            check_examples(side, f"{name}[{i}]", word_lists, pairs=False, datasets=datasets)
        return
    if x is None:
        raise ValueError(f"{name} is None; give {accepted}" + (" (or a tf.data.Dataset)." if datasets else "."))
    rank = x.ndim if isinstance(x, np.ndarray) else x.shape.rank if is_tensor(x) else None
    if isinstance(x, (str, bytes)) or rank == 0:
        raise TypeError(f"{name} must be a batch of examples, not a single string; wrap it: [{name}]. "
                        f"Got {show(x)}.")
    if not (isinstance(x, (list, tuple, np.ndarray)) or is_tensor(x)):
        hint = " (a set has no order: make it a list)" if isinstance(x, (set, frozenset)) else ""
        raise TypeError(f"{name} must be {accepted}; got {type(x).__name__} {show(x)}{hint}.")
    dtype = getattr(x, "dtype", None)
    if isinstance(x, np.ndarray) and dtype.kind not in "USO" or is_tensor(x) and dtype != tf.string:
        raise TypeError(f"{name} must hold text ({accepted}); got an array of {dtype.name}. Packed features "
                        "go in a dict (token_ids, padding_mask, ...).")
    if rank is not None and not (rank == 1 or word_lists and rank == 2):
        raise ValueError(f"{name} must be a 1-D batch of strings" + (" or a 2-D batch of words" if word_lists else "")
                         + f"; got an array of shape {tuple(x.shape)}.")
    if len(x) == 0:
        raise ValueError(f"{name} holds no examples; give at least one.")


def check_text_dataset(dataset, name="x"):
    """A `tf.data.Dataset` of raw examples for a preprocessor: its elements
    `x`, `(x, y)` or `(x, y, sample_weight)` with `x` strings, a pair of
    them or packed features (a dict); else a TypeError describing them."""
    spec = dataset.element_spec
    x = spec[0] if isinstance(spec, tuple) and not _is_string_pair(spec) else spec
    if isinstance(x, dict) or _is_string_pair(x):
        return
    if not (isinstance(x, (tf.TensorSpec, tf.RaggedTensorSpec)) and x.dtype == tf.string):
        raise TypeError(f"{name}: the dataset's elements must be text (x, (x, y) or (x, y, sample_weight), x "
                        f"a string, a pair of them or a dict of packed features); they are {show(spec, 200)}.")


def _is_string_pair(spec):
    return isinstance(spec, tuple) and len(spec) == 2 and all(
        isinstance(s, (tf.TensorSpec, tf.RaggedTensorSpec)) and s.dtype == tf.string for s in spec)


@dataclasses.dataclass(frozen=True)
class Targets:
    """What a task's `y` holds, for `check_targets` and `checked_dataset`.

    Attributes:
        classes: ids are integers in `[0, classes)` (`SEQUENCE`: positions in
            the packed sequence); None: finite numbers.
        what: their name in messages ("class ids", "token ids", ...).
        rank: dimensions of `y`: 1 per example, 2 per position (a trailing
            dimension of 1 is also taken for 1).
        width: numbers: the size of each example's vector (rank 2).
        per_word: `y` holds a list of ids per example, one per word;
            negative ids mark words left out of the loss.
    """

    classes: object = None
    what: str = "class ids"
    rank: int = 1
    width: int | None = None
    per_word: bool = False

    def accepted(self, sequence=None):
        if self.classes is None:
            return f"{self.what}: finite numbers" + (f", {self.width} per example" if self.width else "")
        high = sequence if self.classes == SEQUENCE else self.classes
        bound = f"in [0, {high})" if high is not None else "within the sequence"
        return f"{self.what}: integers {bound}" + (" (negative: left out)" if self.per_word else "")


def _rows(value, name, accepted):
    """Per-example rows of a ragged `value` (a list of lists, an object
    array, a ragged tensor) -> (flat values, the (row, column) of each)."""
    if is_ragged(value):
        value = value.to_list()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must hold one list of {accepted} per example; got {type(value).__name__} "
                        f"{show(value)}.")
    flat, where = [], []
    for i, row in enumerate(value):
        if isinstance(row, (str, bytes)) or not (isinstance(row, (list, tuple, np.ndarray)) or is_tensor(row)):
            raise TypeError(f"{name}[{i}] must be a list of {accepted}, one per word; got {show(row)}.")
        row = list(np.asarray(row).tolist() if isinstance(row, np.ndarray) or is_tensor(row) else row)
        flat += row
        where += [(i, j) for j in range(len(row))]
    if any(isinstance(v, (list, tuple)) for v in flat):
        j = next(k for k, v in enumerate(flat) if isinstance(v, (list, tuple)))
        raise TypeError(f"{name}[{where[j][0]}][{where[j][1]}] must be a number; got {show(flat[j])}.")
    return np.asarray(flat, dtype=object if any(not isinstance(v, numbers.Number) for v in flat) else None), where


def _check_numbers(values, name, what, where=None, shape=None, ids=False):
    """Numbers only, and finite; the first bad value named by its index
    (`ids`: they stand for names, which a message tells to map to ids)."""
    kind = values.dtype.kind
    if kind in "biu":
        return
    if kind != "f":
        flat = values.ravel()
        bad = next((i for i, v in enumerate(flat) if isinstance(v, bool) or not isinstance(v, numbers.Real)), None)
        if bad is None:
            values = flat.astype(np.float64).reshape(values.shape)
        else:
            value = plain(flat[bad])
            hint = " (map names to ids first, e.g. [labels.index(name) for name in names])" \
                if ids and isinstance(value, (str, bytes)) else ""
            raise TypeError(f"{indexed(name, bad, where, shape or values.shape)} must be a number ({what}); got "
                            f"{type(value).__name__} {show(value)}{hint}.")
    bad = np.flatnonzero(~np.isfinite(values.astype(np.float64).ravel()))
    if bad.size:
        raise ValueError(f"{indexed(name, bad[0], where, shape or values.shape)} is "
                         f"{plain(values.ravel()[bad[0]])!r}; {what} must be finite numbers.")


def check_targets(y, targets, name="y", count=None, sequence=None):
    """In-memory targets `y` as `targets` (a `Targets`, or a dict of them per
    output) describes them: a TypeError or ValueError naming `name` and the
    first bad value, else `y` unchanged. `count`: the examples `y` must have
    (packed features; raw examples are counted by `make_dataset`);
    `sequence`: the packed length, for `SEQUENCE` targets."""
    targets = _single(targets, y)
    if isinstance(targets, dict):
        if not isinstance(y, dict):
            raise TypeError(f"{name} must be a dict with the targets of {sorted(targets)}; got "
                            f"{type(y).__name__} {show(y)}.")
        missing = sorted(set(targets) - set(y))
        if missing:
            raise ValueError(f"{name} lacks {missing}: it needs {sorted(targets)}.")
        return {k: check_targets(v, targets[k], f"{name}[{k!r}]", count, sequence) if k in targets else v
                for k, v in y.items()}
    accepted = targets.accepted(sequence)
    if y is None:
        raise ValueError(f"{name} is None; training and evaluation need the targets: {accepted}.")
    if isinstance(y, (str, bytes)):
        raise TypeError(f"{name} must hold {accepted}; got a string {show(y)}.")
    where = None
    if targets.per_word and not (isinstance(y, np.ndarray) and y.dtype != object):
        values, where = _rows(y, name, targets.what)
    else:
        values = as_array(y)
        if values is None:
            return y
        if values.dtype == object and values.ndim != targets.rank:
            raise ValueError(f"{name} must be a rectangular array of {accepted}; got rows of different lengths.")
    shape = values.shape
    if count is not None and where is None and values.ndim and len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries but x has {count} examples.")
    if where is None:
        rank = values.ndim - (values.ndim == targets.rank + 1 and shape[-1] == 1 and targets.width is None)
        if rank != targets.rank or targets.width is not None and shape[-1] != targets.width:
            wanted = ("(examples,)" if targets.rank == 1 else "(examples, positions)") if targets.width is None \
                else f"(examples, {targets.width})"
            hint = f" (one-hot? give the ids: {name}.argmax(-1))" if targets.classes is not None and \
                targets.rank == 1 and values.ndim == 2 else ""
            raise ValueError(f"{name} must have shape {wanted}, {accepted}; got shape {shape}{hint}.")
    _check_numbers(values, name, targets.what, where, shape, ids=targets.classes is not None)
    if where is None and values.ndim == targets.rank + 1 and targets.width is None:
        y = values.reshape(shape[:-1])  # (examples, 1) -> (examples,), as the loss takes it
    if targets.classes is None or values.size == 0:
        return y
    flat = values.astype(np.float64).ravel()
    fractional = np.flatnonzero(flat != np.round(flat))
    if fractional.size:
        raise TypeError(f"{indexed(name, fractional[0], where, shape)}={plain(flat[fractional[0]])!r} is not an "
                        f"integer; {name} must hold {accepted}.")
    if targets.per_word and values.dtype.kind == "f":  # ragged rows of ids are read as integers
        raise TypeError(f"{indexed(name, 0, where, shape)}={plain(flat[0])!r} is a float; {name} must hold "
                        f"{accepted}.")
    high = sequence if targets.classes == SEQUENCE else targets.classes
    low = -np.inf if targets.per_word else 0
    bad = np.flatnonzero((flat < low) | (flat >= (high if high is not None else np.inf)))
    if bad.size:
        raise ValueError(f"{indexed(name, bad[0], where, shape)}={int(flat[bad[0]])} is out of range: {name} must "
                         f"hold {accepted}.")
    return y


def _single(targets, y):
    """The targets of a model with one output, which Keras also takes out of a dict."""
    if isinstance(targets, dict) and len(targets) == 1 and not isinstance(y, dict):
        return next(iter(targets.values()))
    return targets


def check_sample_weight(sample_weight, name="sample_weight", count=None):
    """Weights: finite numbers >= 0 (a NaN or negative weight gives a NaN
    or unbounded loss, and spoils the weights it trains), per example or per
    position, or a dict of them per output; else a ValueError naming the
    first bad one."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, dict):
        return {k: check_sample_weight(v, f"{name}[{k!r}]", count) for k, v in sample_weight.items()}
    values, where = as_array(sample_weight), None
    if values is not None and values.dtype == object:
        values, where = _rows(sample_weight, name, "weights")
    if values is None:
        return sample_weight
    if count is not None and where is None and values.ndim and len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries but x has {count} examples.")
    _check_numbers(values, name, "weights", where, values.shape)
    bad = np.flatnonzero(values.astype(np.float64).ravel() < 0)
    if bad.size:
        value = plain(values.ravel()[bad[0]])
        raise ValueError(f"{indexed(name, bad[0], where, values.shape)}={value!r} is negative; {name} must hold "
                         "weights >= 0.")
    return sample_weight


def checked_dataset(dataset, encoder, names, targets=None):
    """`dataset` of packed features, `(features, y)` or `(features, y,
    sample_weight)` batches with the checks of `check_features`,
    `check_targets` and `check_sample_weight` as assertions in its
    pipeline (on the input threads, not in the model's step); run the model
    on it inside `input_errors()` to get a ValueError. Elements that are
    not packed features pass untouched."""
    spec = dataset.element_spec
    features_spec = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features_spec, dict) or "token_ids" not in features_spec:
        return dataset
    ranges = feature_ranges(encoder, names)
    if isinstance(spec, tuple) and len(spec) > 1 and targets is not None:
        _check_target_spec(spec[1], targets)
    limit = encoder.max_sequence_length

    def check(*element):
        features = element[0]
        tokens = features["token_ids"]
        seq = tf.shape(tokens)[-1]
        _assert(seq <= limit, f"x['token_ids'] holds sequences longer than the encoder's max_sequence_length="
                f"{limit} (its position table); sequence length", seq)
        for key, (low, high, what) in ranges.items():
            if key in features:
                _assert_range(features[key], low, seq if high == SEQUENCE else high, f"x[{key!r}] must be {what}")
        if len(element) > 1 and targets is not None:
            _assert_targets(element[1], targets, "y", seq)
        if len(element) > 2:
            for weight in tf.nest.flatten(element[2]):
                _assert_range(weight, 0, np.inf, "sample_weight must hold finite weights >= 0")
        return element if len(element) > 1 else element[0]

    return dataset.map(do_not_convert(check))


def _check_target_spec(spec, targets):
    """The dtypes of a dataset's targets, checked when it is built."""
    targets = _single(targets, spec)
    if isinstance(targets, dict):
        if not isinstance(spec, dict) or set(targets) - set(spec):
            raise ValueError(f"y: the dataset's targets must be a dict with {sorted(targets)}; they are {show(spec)}.")
        for key, value in targets.items():
            _check_target_spec(spec[key], value)
        return
    dtype = getattr(spec, "dtype", None)
    if dtype is not None and not (dtype.is_integer or dtype.is_floating or dtype == tf.bool):
        raise TypeError(f"y: the dataset's targets must be {targets.accepted()}; they are {dtype.name} "
                        "(map names to ids first).")


def _assert_targets(y, targets, name, seq):
    targets = _single(targets, y)
    if isinstance(targets, dict):
        for key, value in targets.items():
            _assert_targets(y[key], value, f"{name}[{key!r}]", seq)
        return
    if targets.classes is None:
        if y.dtype.is_floating:
            _assert(tf.reduce_all(tf.math.is_finite(y)),
                    f"{name} must hold finite numbers; a batch of the dataset holds NaN or infinite ones")
        return
    sequence = targets.classes == SEQUENCE
    # Per-word targets reach the model as (batch, seq) ids of the labelled words: all in [0, classes).
    _assert_range(y, 0, seq if sequence else targets.classes,
                  f"{name} must hold {targets.what} in [0, {'seq' if sequence else targets.classes})")


def _assert_range(values, low, high, message):
    values = values.flat_values if isinstance(values, tf.RaggedTensor) else values
    values = tf.cast(values, tf.float64)
    ok = tf.reduce_all((values >= low) & (values < tf.cast(high, tf.float64)) & ~tf.math.is_nan(values))
    _assert(ok, message + "; found values from", tf.reduce_min(values), "to", tf.reduce_max(values))


def _assert(condition, message, *data):
    tf.debugging.Assert(condition, [INPUT_CHECK + message, *data])


@contextlib.contextmanager
def input_errors():
    """Runs a model on a `checked_dataset`: a failed check of its pipeline,
    which reaches the caller as a framework error, becomes the ValueError it
    describes."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        text = str(error)
        if INPUT_CHECK not in text:
            raise
        found = text.split(INPUT_CHECK, 1)[1].split("\n")[0].replace("\\'", "'")
        parts = [p for p in re.split(r"\]\s*\[", found.rstrip().rstrip("]")) if p]
        message = " ".join(parts).replace("; found values from ", "; a batch of the dataset holds values from ")
        raise ValueError(message.rstrip(". ") + ".") from None
