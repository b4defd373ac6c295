"""Prediction on packed rows: several examples to a row, few input shapes.

A model compiled once per input shape (XLA on JAX and TensorFlow; torch
under `jit_compile=True`, `torch.compile`) predicts on sorted batches
padded to a few lengths (`kerasbert.tasks.inputs.sorted_batches`): one
compilation per length, and positions of padding between the lengths. A
task whose outputs are one per example (a classifier's logits, an embedder's
vector) predicts instead on rows that pack several examples each: the
padding mask numbers them 1, 2, 3, ..., so that `kerasbert.Encoder` keeps
every token's attention and position inside its own example (each example's
outputs are what they are alone, to float rounding), and the task pools each
example's tokens apart (`kerasbert.layers.Pooling(..., documents=n)`). Rows
are one width, or two when some examples are longer than `PACKED_WIDTH`:
one or two shapes per call, and few padded positions.

An exported task packs in its serving graph too (`pack_in_graph`): each
request's examples, padded to its longest, are packed into rows of that
width the way `pack_rows` packs them, so that a request of mixed lengths
runs on fewer positions.
"""

import numpy as np

from kerasbert.tasks.inputs import checked_batch_size, length_boundaries, rows_per_batch, tokenized_lengths
from kerasbert.utils.optional import tf

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
