"""Packed rows: several examples or documents to a row, the padding mask
numbering them 1, 2, 3, ... (0 at padding), so that `kerasbert.Encoder`
keeps every token's attention and position inside its own example and a
task pools each example apart: few padded positions, few input shapes.

- Pretraining streams (`pack_documents`): documents packed greedily in
  stream order inside `tf.data`.
- Prediction (`packed_batches`, `pack_in_graph`): a task whose outputs are
  one per example (a classifier's logits, an embedder's vector) predicts on
  rows that pack several examples each, first-fit decreasing (`pack_rows`).
  Rows are one width, or two when some examples are longer than
  `PACKED_WIDTH`. An exported task packs in its serving graph too.
- Training (`packed_training_batches`): a batch holds `batch_size`
  examples in as many rows as first-fit decreasing needs, rounded up to one
  of a few fitted row counts; its features carry `EXAMPLE_SLOTS`, each
  example's row and number, which `kerasbert.tasks.packed_training` reads to
  give the task's outputs one per example. Examples longer than
  `PACKED_WIDTH` tokens are not packed.
"""

import keras
import numpy as np

from kerasbert.distribution import check_global_batch
from kerasbert.preprocessing.batching import (
    COMPILED_SHAPES,
    PADDING_MULTIPLE,
    SHAPE_COST,
    checked_batch_size,
    fitted_boundaries,
    length_boundaries,
    rows_per_batch,
)
from kerasbert.preprocessing.datasets import (
    check_last_batch_splits,
    tokenized_lengths,
)
from kerasbert.utils.checks import INT32_MAX, abbreviated, check_choice, check_id, check_int
from kerasbert.utils.optional import do_not_convert, is_dataset, tf

LONG_DOCUMENTS = ("split", "truncate")


def pack_documents(
    dataset, sequence_length, start_id=None, end_id=None, pad_id=0, long_documents="split"
):
    """Packs a stream of documents greedily into rows of `sequence_length`.

    Documents are taken in stream order and appended to the current row
    while they fit; the first one that does not fit closes the row (padded
    with `pad_id`) and starts the next. The last partial row is emitted when
    the stream ends. A document is never split between two rows, except a
    document longer than a whole row (see `long_documents`).

    Each row's `padding_mask` numbers its documents 1, 2, 3, ... (0 at
    padding), which is what `kerasbert.Encoder` reads to keep every token's
    attention inside its own document and to restart positions at each
    document: a document gives the same outputs packed as alone.
    `kerasbert.preprocessing.MaskedLMMasker` treats every nonzero entry as a
    real token, so `pack_documents(...)` -> `.batch(...)` -> `.map(masker)`
    is a masked-LM pretraining pipeline.

    To make each packed document look like a `Packer` row (`[CLS] doc [SEP]`,
    or `<s> doc </s>` for RoBERTa) pass the tokenizer's ids as `start_id`
    and `end_id`; without them documents are packed exactly as given.

    Args:
        dataset: a `tf.data.Dataset` of 1-D integer token-id tensors, one
            document (or snippet, sentence...) each, e.g. a tokenizer mapped
            over a dataset of strings, then unbatched. Empty documents are
            skipped.
        sequence_length: the length of every row.
        start_id: optional id put before every document (or piece of a
            split document), e.g. `[CLS]`.
        end_id: optional id put after every document (or piece), e.g. `[SEP]`.
        pad_id: the id of padding positions in `token_ids`.
        long_documents: what to do with a document that does not fit in a
            row on its own (`sequence_length` minus the start/end tokens):
            "split" (default) cuts it into consecutive pieces of that length,
            each its own document of consecutive rows (with its own start and
            end tokens), so that no text is lost; "truncate" keeps its first
            piece only, as `Packer` does.

    Returns:
        A `tf.data.Dataset` of unbatched rows: dicts of `token_ids`,
        `segment_ids` (all 0) and `padding_mask` (the document ids), int32
        tensors of shape `(sequence_length,)`.

    Examples:
    >>> import tensorflow as tf
    >>> documents = tf.data.Dataset.from_tensor_slices(
    ...     tf.ragged.constant([[7, 8, 9], [5], [4, 4, 4, 4]]))
    >>> for row in pack_documents(documents, 8, start_id=101, end_id=102):
    ...     print(row["token_ids"].numpy().tolist(), row["padding_mask"].numpy().tolist())
    [101, 7, 8, 9, 102, 101, 5, 102] [1, 1, 1, 1, 1, 2, 2, 2]
    [101, 4, 4, 4, 4, 102, 0, 0] [1, 1, 1, 1, 1, 1, 0, 0]
    """
    if not is_dataset(dataset):
        raise TypeError(
            f"dataset must be a tf.data.Dataset of 1-D token-id tensors; got {type(dataset).__name__} {abbreviated(dataset)}."
        )
    spec = dataset.element_spec
    if (
        not isinstance(spec, (tf.TensorSpec, tf.RaggedTensorSpec))
        or spec.shape.rank != 1
        or not spec.dtype.is_integer
    ):
        raise ValueError(
            "dataset must yield 1-D integer token-id tensors, one document each "
            f"(unbatch a batched dataset first); got element_spec={spec}."
        )
    start_id = check_id("start_id", start_id, allow_none=True)
    end_id = check_id("end_id", end_id, allow_none=True)
    pad_id = check_id("pad_id", pad_id)
    specials = (start_id is not None) + (end_id is not None)
    length = check_int(
        "sequence_length", sequence_length, specials + 1, INT32_MAX, " (room for the start/end tokens and one token)"
    )
    check_choice("long_documents", long_documents, LONG_DOCUMENTS)
    body = length - specials  # document tokens that fit in one row

    def pieces(ids):
        # One document (n,) -> its pieces, each padded to a row:
        # tokens (pieces, length) and lengths (pieces,).
        ids = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
        # Values are known only as the pipeline runs: an assertion, not a
        # ValueError (ids outside int32 would wrap around silently).
        check = tf.debugging.assert_equal(
            tf.reduce_all((ids >= 0) & (tf.cast(ids, tf.int64) <= INT32_MAX)), True,
            message="pack_documents: the dataset holds a token id < 0 or >= 2**31",
        )
        with tf.control_dependencies([check]):
            ids = tf.cast(ids, tf.int32)
        if long_documents == "truncate":
            ids = ids[:body]
        n = tf.size(ids)
        count = (n + body - 1) // body  # 0 for an empty document
        rows = tf.reshape(tf.pad(ids, [[0, count * body - n]]), [count, body])
        piece = tf.RaggedTensor.from_tensor(rows, lengths=tf.minimum(body, n - body * tf.range(count)))
        parts = [piece]  # ragged (pieces, None)
        if start_id is not None:
            parts.insert(0, tf.fill([count, 1], int(start_id)))
        if end_id is not None:
            parts.append(tf.fill([count, 1], int(end_id)))
        piece = tf.concat(parts, axis=1) if len(parts) > 1 else piece
        tokens = piece.to_tensor(default_value=int(pad_id), shape=[None, length])
        lengths = tf.cast(piece.row_lengths(), tf.int32)
        return tf.data.Dataset.from_tensor_slices((tokens, lengths, tf.zeros_like(lengths, tf.bool)))

    # A sentinel after the last document flushes the last partial row.
    sentinel = tf.data.Dataset.from_tensors(
        (tf.fill([length], int(pad_id)), tf.constant(0), tf.constant(True))
    )
    stream = dataset.flat_map(do_not_convert(pieces)).concatenate(sentinel)
    index = tf.range(length)

    def append(state, element):
        # state: the row being filled: tokens (length,), document ids (length,),
        # positions used and documents so far. element: one piece padded to
        # (length,), its length, and whether it is the sentinel.
        row_tokens, row_documents, used, documents = state
        tokens, size, last = element
        fits = used + size <= length
        emit = (last | ~fits) & (used > 0)
        output = (emit, row_tokens, row_documents)
        # Start a fresh row when the piece does not fit in this one.
        row_tokens = tf.where(fits, row_tokens, int(pad_id))
        row_documents = tf.where(fits, row_documents, 0)
        used = tf.where(fits, used, 0)
        documents = tf.where(fits, documents, 0)
        inside = (index >= used) & (index < used + size)  # (length,)
        row_tokens = tf.where(inside, tf.roll(tokens, used, axis=0), row_tokens)
        row_documents = tf.where(inside, documents + 1, row_documents)
        documents += tf.cast(size > 0, tf.int32)
        return (row_tokens, row_documents, used + size, documents), output

    initial = (
        tf.fill([length], int(pad_id)), tf.zeros([length], tf.int32), tf.constant(0), tf.constant(0)
    )

    def as_inputs(emit, tokens, documents):
        tokens = tf.ensure_shape(tokens, [length])
        return {
            "token_ids": tokens,
            "segment_ids": tf.zeros_like(tokens),
            "padding_mask": tf.ensure_shape(documents, [length]),
        }

    return (
        stream.scan(initial, do_not_convert(append))
        .filter(do_not_convert(lambda emit, tokens, documents: emit))
        .map(do_not_convert(as_inputs), num_parallel_calls=tf.data.AUTOTUNE)
    )


# Rows are at most this wide, except the rows of examples that are longer
# (a second width): every token attends over its whole row (masked), so one
# long example would make every row cost its width.
PACKED_WIDTH = 128


# A row holds at most `min(width, PACKED_WIDTH) // DOCUMENT_TOKENS` examples
# (`documents_per_row`): the slots of a task's packed outputs, `(rows, documents, ...)`.
DOCUMENT_TOKENS = 4


def documents_per_row(width):
    """The examples a row of `width` tokens holds at most (at least 1)."""
    return max(1, min(width, PACKED_WIDTH) // DOCUMENT_TOKENS)


def packed_width(longest, sequence_length):
    """The row width for examples of at most `longest` tokens (at most
    `sequence_length`): the smallest of `length_boundaries` that holds them
    (a few widths, so that few programs are compiled across calls)."""
    return min(b for b in length_boundaries(sequence_length) if b >= longest)


def pack_rows(lengths, width, documents):
    """The examples of these `lengths` (tokens, each at most `width`) packed
    into rows of `width` tokens and at most `documents` examples: a list of
    rows, each a list of example indices. One row at a time, longest example
    first, filled with the longest examples left that fit: the rows of
    first-fit decreasing, in `O(len(lengths) + rows * width)`.

    >>> pack_rows([5, 3, 8, 2, 6], width=10, documents=4)
    [[2, 3], [4, 1], [0]]
    >>> pack_rows([1, 1, 1], width=10, documents=2)
    [[0, 1], [2]]
    """
    lengths = np.asarray(lengths, np.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > width):
        raise ValueError(f"every length must be in [1, {width}]; got {lengths.min()} to {lengths.max()}.")
    # waiting[n]: the examples of n tokens not yet in a row, the first given last
    waiting = [[] for _ in range(width + 1)]
    for index in np.argsort(lengths, kind="stable")[::-1]:
        waiting[lengths[index]].append(int(index))
    rows, longest = [], width
    while True:
        while longest > 0 and not waiting[longest]:
            longest -= 1
        if longest == 0:
            return rows
        row, space, size = [], width, longest
        while size > 0 and len(row) < documents:
            if waiting[size]:
                row.append(waiting[size].pop())
                space -= size
                size = min(size, space)
            else:
                size -= 1
        rows.append(row)


def place_rows(tokens, sizes, counts, row_count, width):
    """Examples placed token by token into `row_count` rows of `width`:
    `tokens` maps each feature to the real tokens of the examples, one
    example after the other in row order (the first row's first), `sizes`
    is each example's token count and `counts` each row's number of
    examples. The padding mask numbers each row's examples 1, 2, 3, ...;
    rows past `len(counts)` (filler) are copies of the first.

    >>> rows = place_rows({"token_ids": np.array([5, 6, 7, 8]), "padding_mask": np.ones(4, "int32")},
    ...                   sizes=[2, 1, 1], counts=[2, 1], row_count=3, width=4)
    >>> rows["token_ids"].tolist(), rows["padding_mask"].tolist()
    ([[5, 6, 7, 0], [8, 0, 0, 0], [5, 6, 7, 0]], [[1, 1, 2, 0], [1, 0, 0, 0], [1, 1, 2, 0]])
    """
    sizes, counts = np.asarray(sizes, np.int64), np.asarray(counts, np.int64)
    starts = np.cumsum(sizes) - sizes  # each example's first token, counting all the examples'
    first_of_row = np.cumsum(counts) - counts  # each row's first example
    row_of = np.repeat(np.arange(len(counts)), counts)  # each example's row
    document = np.arange(len(sizes)) - first_of_row[row_of] + 1  # ... and its number there
    column = starts - starts[first_of_row][row_of]  # each example's first column in its row
    example = np.repeat(np.arange(len(sizes)), sizes)  # each token's example
    token_column = column[example] + np.arange(len(example)) - starts[example]
    rows = {}
    for key, values in tokens.items():
        packed = np.zeros((row_count, width), values.dtype)
        packed[row_of[example], token_column] = document[example] if key == "padding_mask" else values
        packed[len(counts):] = packed[0]
        rows[key] = packed
    return rows


def packed_batches(preprocessor, x, *, batch_size=32, input_names=None, check=None):
    """In-memory raw examples as batches of packed rows, for a task's
    packed outputs. Returns `(batches, where, documents)`:

    - `batches`, an iterator of feature dicts `(rows, width)`, whose
      `padding_mask` numbers each row's examples 1 to at most `documents`.
      The examples of at most `PACKED_WIDTH` tokens are packed in rows of the
      width that holds the longest of them (`packed_width`), the longer ones
      (if any) in rows of the width that holds theirs; a batch holds
      `rows_per_batch(width, batch_size)` rows, each width's last
      one filled up with copies of its first row: one shape per width.
    - `where`, `(count, 2)`: example `i` is document `where[i, 1] + 1` of
      row `where[i, 0]`, counting the rows of all batches in sequence.

    The examples are tokenized and packed once, for their lengths (and
    `check`), as `sorted_batches` does; each batch's rows are then built
    from the examples packed alone, a chunk of examples at a time
    (`tokenized_lengths`).
    """
    batch_size = checked_batch_size(batch_size)
    pack, lengths, first, chunk = tokenized_lengths(preprocessor, x, batch_size=batch_size,
                                                    input_names=input_names, check=check)
    lengths = np.maximum(lengths, 1)  # never 0: the packer adds special tokens
    sequence_length = preprocessor.sequence_length
    groups = [g for g in (np.flatnonzero(lengths <= PACKED_WIDTH), np.flatnonzero(lengths > PACKED_WIDTH)) if g.size]
    widths = [packed_width(int(lengths[g].max()), sequence_length) for g in groups]
    documents = documents_per_row(widths[0] if widths else 1)
    plan = []  # (width, rows of the batch: lists of example indices)
    where = np.zeros((len(lengths), 2), np.int64)
    for group, width in zip(groups, widths):
        rows = [group[row] for row in pack_rows(lengths[group], width, documents)]
        plan += [(width, rows[begin:begin + rows_per_batch(width, batch_size)])
                 for begin in range(0, len(rows), rows_per_batch(width, batch_size))]
    row = 0  # the first row of each batch, counting all batches' rows
    for width, batch_rows in plan:
        for r, examples in enumerate(batch_rows):
            where[examples, 0], where[examples, 1] = row + r, np.arange(len(examples))
        row += rows_per_batch(width, batch_size)

    def place(features, width, batch_rows):
        """One batch: the packed features of its examples, in row order."""
        real = features["padding_mask"] > 0  # (examples, sequence_length)
        tokens = {k: v[real] for k, v in features.items()}  # each example's real tokens, one after the other
        return place_rows(tokens, real.sum(axis=1), [len(row) for row in batch_rows],
                          rows_per_batch(width, batch_size), width)

    def batches():
        group = 0
        while group < len(plan):
            # Consecutive batches of at most `chunk` examples in all (at least one), packed at once.
            last, count = group + 1, sum(map(len, plan[group][1]))
            while last < len(plan) and count + sum(map(len, plan[last][1])) <= chunk:
                count += sum(map(len, plan[last][1]))
                last += 1
            examples = np.concatenate([row for _, batch_rows in plan[group:last] for row in batch_rows])
            features = {k: v[examples] for k, v in first.items()} if first is not None else pack(examples)
            offset = 0
            for width, batch_rows in plan[group:last]:
                n = sum(map(len, batch_rows))
                yield place({k: v[offset:offset + n] for k, v in features.items()}, width, batch_rows)
                offset += n
            group = last

    return batches(), where, documents


def pack_in_graph(features, documents):
    """In a TensorFlow graph (a SavedModel's serving function): a batch of
    examples, one to a row and padded (`padding_mask` 1 on each row's
    tokens, first), packed into rows of the same width and at most
    `documents` examples, as `pack_rows` packs them (one row at a time, each
    filled with the longest examples left that fit). Returns `(rows,
    where)`: `rows`, the features `(rows, width)` whose `padding_mask`
    numbers each row's examples 1, 2, 3, ...; `where (batch, 2)`, example
    `i` is document `where[i, 1] + 1` of row `where[i, 0]`.

    >>> rows, where = pack_in_graph({"token_ids": tf.constant([[5, 6, 7], [8, 0, 0], [9, 4, 0]]),
    ...                              "padding_mask": tf.constant([[1, 1, 1], [1, 0, 0], [1, 1, 0]])}, 4)
    >>> rows["token_ids"].numpy().tolist(), rows["padding_mask"].numpy().tolist(), where.numpy().tolist()
    ([[5, 6, 7], [9, 4, 8]], [[1, 1, 1], [1, 1, 2]], [[0, 0], [1, 1], [1, 0]])
    """
    real = features["padding_mask"] > 0  # (batch, width)
    lengths = tf.reduce_sum(tf.cast(real, tf.int32), axis=1)  # (batch,)
    batch, width = tf.shape(real)[0], tf.shape(real)[1]

    def place(placed, row, space, count, waiting, row_of, document, start):
        # the longest example waiting that fits the row (the first of equals), if the row takes one more
        fitting = tf.where(waiting & (lengths <= space), lengths, -1)  # (batch,)
        example = tf.argmax(fitting, output_type=tf.int32)
        if_placed = (count < documents) & (fitting[example] >= 0)
        # placed: the example goes to the row; else the row is closed and the next one opened
        one = tf.one_hot(example, batch, on_value=True, off_value=False) & if_placed  # (batch,)
        return (placed + tf.cast(if_placed, tf.int32),
                tf.where(if_placed, row, row + 1),
                tf.where(if_placed, space - lengths[example], width),
                tf.where(if_placed, count + 1, 0),
                waiting & ~one,
                tf.where(one, row, row_of), tf.where(one, count + 1, document), tf.where(one, width - space, start))

    zeros = tf.zeros([batch], tf.int32)
    state = (0, 0, width, 0, tf.ones([batch], tf.bool), zeros, zeros, zeros)
    _, _, _, _, _, row_of, document, start = tf.while_loop(
        lambda placed, *_: placed < batch, place, state, maximum_iterations=2 * batch)
    # each real token's place: (tokens, 2) [row, column], from its (example, index)
    token = tf.where(real)
    example, index = tf.cast(token[:, 0], tf.int32), tf.cast(token[:, 1], tf.int32)
    target = tf.stack([tf.gather(row_of, example), tf.gather(start, example) + index], axis=1)
    shape = tf.stack([tf.reduce_max(tf.concat([row_of + 1, [0]], 0)), width])  # no rows for no examples
    rows = {}
    for key, values in features.items():
        values = tf.gather(document, example) if key == "padding_mask" else tf.gather_nd(values, token)
        rows[key] = tf.scatter_nd(target, tf.cast(values, features[key].dtype), shape)
    return rows, tf.stack([row_of, document - 1], axis=1)


# The feature of a packed batch that says where each example is: `(examples,
# 2)` int32, its row and its number in that row (1 for the row's first).
EXAMPLE_SLOTS = "example_slots"


# Examples a row of the packed graph may hold: rows are at most
# `PACKED_WIDTH` tokens wide and hold at most one example per
# `DOCUMENT_TOKENS` tokens.
TRAINING_DOCUMENTS = documents_per_row(PACKED_WIDTH)


# Random batches whose rows are counted to fit the row counts.
SAMPLED_BATCHES = 512


def epoch_batches(lengths, batch_size, shuffle, rng):
    """One epoch's batches of the examples of these `lengths`: lists of
    example indices, `batch_size` each but the last. In order without
    `shuffle`; with it, stratified by length: all but `len(lengths) %
    batch_size` random examples (the last batch) are sorted by length (equal
    lengths in random order) and cut into `batch_size` strata of
    consecutive lengths, and each batch takes one random example of every
    stratum. Every example is still in one batch an epoch, and each batch is
    a random sample of the examples (stratified sampling), but every batch
    holds about as many tokens, so that nearly all pack into the same number
    of rows: on MiniLM's Rotten Tomatoes snippets 11 or 12 rows of 80
    tokens, where random batches needed 9 to 14.

    >>> batches = epoch_batches(np.array([5, 1, 4, 2, 3, 6, 9]), 3, True, np.random.default_rng(0))
    >>> [len(b) for b in batches], sorted(np.concatenate(batches).tolist())
    ([3, 3, 1], [0, 1, 2, 3, 4, 5, 6])
    """
    count = len(lengths)
    if not shuffle:
        return [np.arange(begin, min(begin + batch_size, count)) for begin in range(0, count, batch_size)]
    full = count // batch_size  # whole batches
    order = rng.permutation(count)
    kept, rest = order[:full * batch_size], order[full * batch_size:]
    kept = kept[np.argsort(lengths[kept], kind="stable")]
    strata = rng.permuted(kept.reshape(batch_size, full), axis=1)  # (batch_size, full): a stratum a row
    return [strata[:, j] for j in range(full)] + ([rest] if len(rest) else [])


def packed_layout(lengths, batch_size, shuffle, rng, replicas=1):
    """`(width, row_counts)` for packed batches of examples of these
    `lengths` (tokens, at most `PACKED_WIDTH`): the row width, a multiple of
    `PADDING_MULTIPLE` from the longest example's up to 24 tokens wider,
    and the row counts batches are padded to, multiples of `replicas` (the
    data-parallel replicas that split each batch's rows), at most
    `COMPILED_SHAPES` below `batch_size` (the most a batch can need), which
    is last. Each width's counts are fitted as `fitted_boundaries` fits
    lengths, to the rows that the batches of a few epochs (`epoch_batches`,
    at most `SAMPLED_BATCHES` batches) need; a count beyond the first must
    save `SHAPE_COST` padded positions an epoch. The width kept pads the
    fewest positions, compilations counted."""
    count = len(lengths)
    steps = -(-count // batch_size)
    batches = []
    while len(batches) < min(steps, SAMPLED_BATCHES):
        epoch = epoch_batches(lengths, batch_size, shuffle, rng)
        # The last, partial batch has a program of its own anyway.
        batches += epoch[:count // batch_size] if count >= batch_size else epoch
        if not shuffle:
            break
    batches = batches[:SAMPLED_BATCHES]
    longest = int(-(-lengths.max() // PADDING_MULTIPLE) * PADDING_MULTIPLE)
    best = None
    for width in range(longest, min(longest + 24, PACKED_WIDTH) + 1, PADDING_MULTIPLE):
        documents = documents_per_row(width)
        needed = np.array([len(pack_rows(lengths[b], width, documents)) for b in batches])
        shape_cost = SHAPE_COST / width * len(needed) / steps  # in rows of the batches counted
        row_counts = fitted_boundaries(needed, batch_size, shapes=COMPILED_SHAPES, multiple=replicas,
                                       shape_cost=shape_cost)
        padded = np.asarray(row_counts)[np.searchsorted(row_counts, needed)]
        used = len(set(padded.tolist()))
        cost = padded.sum() * width * steps / len(needed) + SHAPE_COST * used
        if best is None or cost < best[0]:
            best = (cost, width, row_counts)
    return best[1], best[2]


class PackedBatches(keras.utils.PyDataset):
    """Batches of packed rows for `fit` and `evaluate`, a `keras.utils.PyDataset`:
    each `(features, y[, sample_weight])`, `batch_size` examples (the
    last batch fewer) in rows `width` tokens wide, the features with
    `EXAMPLE_SLOTS`, and each example's `y` and weight in the batch's
    order. Built by `packed_training_batches`.

    Each epoch's batches (`epoch_batches`) are drawn at its start, each
    batch packed as it is read: its examples into rows by first-fit
    decreasing (`pack_rows`, at most `width // DOCUMENT_TOKENS` a row),
    padded to the smallest of `row_counts` that holds them. Batches are
    NumPy arrays made on the thread that trains: no tf.data pipeline, whose
    Python-calling source (`from_generator`) left glibc's allocator mapping
    and unmapping the temporaries of later XLA programs (three times the
    page faults of a MiniLM `predict` after `fit`, 10% of its time).
    """

    def __init__(self, tokens, lengths, targets, *, batch_size, shuffle, width, row_counts, rng, replicas=1):
        super().__init__()
        self.tokens, self.lengths, self.targets = tokens, lengths, targets
        self.offsets = np.cumsum(lengths) - lengths  # each example's first token in `tokens`
        self.batch_size, self.shuffle, self.rng, self.replicas = batch_size, shuffle, rng, replicas
        self.width, self.row_counts = width, np.asarray(row_counts)
        self.documents = documents_per_row(width)
        self.batches = self._epoch()

    def _epoch(self):
        """An epoch's batches; data-parallel replicas split each batch's
        examples and rows, so a last batch is cut to a multiple of them (at
        most `replicas - 1` examples sit out an epoch, as on padded
        batches), and left out if that leaves none."""
        batches = epoch_batches(self.lengths, self.batch_size, self.shuffle, self.rng)
        kept = len(batches[-1]) // self.replicas * self.replicas
        return batches[:-1] + [batches[-1][:kept]] if kept else batches[:-1]

    @property
    def num_batches(self):
        return len(self.batches)

    def __len__(self):
        return len(self.batches)

    def on_epoch_end(self):
        if self.shuffle:
            self.batches = self._epoch()

    def __getitem__(self, index):
        examples = self.batches[index]
        rows = pack_rows(self.lengths[examples], self.width, self.documents)  # lists of indices into `examples`
        in_rows = np.concatenate(rows)
        chosen = examples[in_rows]  # the examples in row order
        sizes = self.lengths[chosen]
        starts = np.cumsum(sizes) - sizes
        where = np.repeat(self.offsets[chosen] - starts, sizes) + np.arange(sizes.sum())  # their tokens
        counts = [len(row) for row in rows]
        row_count = int(self.row_counts[np.searchsorted(self.row_counts, len(rows))])
        features = place_rows({k: v[where] for k, v in self.tokens.items()}, sizes, counts, row_count, self.width)
        slots = np.zeros((len(examples), 2), np.int32)
        slots[in_rows, 0] = np.repeat(np.arange(len(rows)), counts)
        slots[in_rows, 1] = np.concatenate([np.arange(1, n + 1) for n in counts])
        features[EXAMPLE_SLOTS] = slots
        element = (features, *(t[examples] for t in self.targets))
        return element if len(element) > 1 else features


def packed_training_batches(preprocessor, tokenized, y=None, sample_weight=None, *, batch_size=32, shuffle=False,
                            seed=None, input_names=None, replicas=1, cut_partial_batch=True):
    """In-memory examples, tokenized (`preprocessor.tokenize_examples`),
    with their targets and weights, as `PackedBatches` for `fit` (with
    `shuffle`) or `evaluate`; None when some example is longer than
    `PACKED_WIDTH` tokens. The examples are packed alone once, a chunk at a
    time (`tokenized_lengths`), and only their real tokens kept; the rows'
    width and counts are `packed_layout`'s. `seed` (default: drawn from
    NumPy's global generator, which `keras.utils.set_random_seed` seeds)
    draws the epochs' batches. `replicas` and `cut_partial_batch` are
    `make_dataset`'s.
    """
    batch_size = checked_batch_size(batch_size)
    check_global_batch(batch_size, replicas)
    if not cut_partial_batch:
        check_last_batch_splits(int(tf.nest.flatten(tokenized)[0].shape[0]), batch_size, replicas)
    kept = {}

    def keep(features):  # each example's real tokens, one after the other
        real = features["padding_mask"] > 0
        for key, value in features.items():
            kept.setdefault(key, []).append(value[real])

    _, lengths, _, _ = tokenized_lengths(preprocessor, None, batch_size=batch_size, input_names=input_names,
                                         check=keep, tokenized=tokenized)
    if not len(lengths) or lengths.max() > PACKED_WIDTH:
        return None
    rng = np.random.default_rng(np.random.randint(2**31) if seed is None else seed)
    width, row_counts = packed_layout(lengths, batch_size, shuffle, np.random.default_rng(rng.integers(2**31)),
                                      replicas)
    tokens = {key: np.concatenate(values) for key, values in kept.items()}
    targets = [np.asarray(v) for v in (y, sample_weight) if v is not None]
    return PackedBatches(tokens, lengths, targets, batch_size=batch_size, shuffle=shuffle, width=width,
                         row_counts=row_counts, rng=rng, replicas=replicas)
