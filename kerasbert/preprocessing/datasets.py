"""Examples -> the batches a task trains or predicts on.

Tasks take what users have: lists of strings (or pairs of lists), NumPy
arrays, or `tf.data` datasets of strings, batched or not. Each batch goes
through the task's preprocessor inside `tf.data` and is padded to a
boundary (`kerasbert.preprocessing.batching`). Training batches are drawn
from runs of shuffled examples sorted by length, and `predict` on lists
sorts the examples by length (`sorted_batches`, which packs them eagerly,
without tf.data; the outputs go back in order), so that batches hold rows
of similar length and little padding; its batches of short rows hold more
rows (`PREDICT_POSITIONS`). Under XLA, tasks with one output per example
train and predict on packed rows instead
(`kerasbert.preprocessing.packed_rows`).
"""

import weakref

import numpy as np

from kerasbert.distribution import check_global_batch
from kerasbert.preprocessing.batching import (
    GROUP_BY_LENGTH,
    SHAPE_COST,
    batch_plan,
    checked_batch_size,
    fit_to_boundary,
    fitted_boundaries,
    unknown_length_boundaries,
)
from kerasbert.utils.optional import do_not_convert, is_dataset, tf

# Examples `sorted_batches` packs at a time, at full `sequence_length`.
PACKING_CHUNK = 4096


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


def _packed_lengths(dataset, preprocess):
    """The token count of every row `preprocess` makes of `dataset`."""
    lengths = []
    for batch in dataset.batch(1024).map(do_not_convert(preprocess), num_parallel_calls=tf.data.AUTOTUNE):
        features = batch[0] if isinstance(batch, tuple) else batch
        lengths.append(np.count_nonzero(np.asarray(features["padding_mask"]), axis=1))
    return np.concatenate(lengths) if lengths else np.zeros([0], np.int64)


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
        boundaries = unknown_length_boundaries(sequence_length, shapes)
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
    table = tuple(range(1, length + 1) if shapes is None else unknown_length_boundaries(length, shapes))
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
