"""Prediction on packed rows: several examples to a row, one input shape.

A model that XLA compiles once per input shape (JAX; TensorFlow or torch
with `jit_compile=True`) predicts on sorted batches padded to a few lengths
(`kerasbert.tasks.inputs.sorted_batches`): one compilation per length, and
positions of padding between the lengths. A task whose outputs are one per
example (a classifier's logits, an embedder's vector) predicts instead on
rows that pack several examples each: the padding mask numbers them 1, 2,
3, ..., so that `kerasbert.Encoder` keeps every token's attention and
position inside its own example (each example's outputs are what they are
alone, to float rounding), and the task pools each example's tokens apart
(`kerasbert.layers.Pooling(..., documents=n)`). Every batch then has one
shape, `(PREDICT_POSITIONS // width, width)`, and holds few padded positions.
"""

import numpy as np

from kerasbert.tasks.inputs import DEFAULT_BOUNDARIES, PREDICT_POSITIONS, tokenized_lengths

# A row holds at most `width // DOCUMENT_TOKENS` examples: the slots a task's
# packed outputs have per row, `(rows, documents, ...)`.
DOCUMENT_TOKENS = 8


def packed_width(longest, sequence_length):
    """The row width for examples of at most `longest` tokens: the smallest
    of `DEFAULT_BOUNDARIES` that holds them, or `sequence_length` (a few
    widths, so that few programs are compiled across calls)."""
    return min([b for b in DEFAULT_BOUNDARIES if b >= longest] + [int(sequence_length)])


def pack_rows(lengths, width, documents):
    """The examples of these `lengths` (tokens, each at most `width`) packed
    into rows of `width` tokens and at most `documents` examples: a list of
    rows, each a list of example indices. Longest first, each row filled by
    the longest examples left that fit (best fit decreasing), in
    `O(len(lengths) + rows * width)`.

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


def packed_batches(preprocessor, x, *, batch_size=32, input_names=None, check=None):
    """In-memory raw examples as batches of packed rows, for a task's
    packed outputs. Returns `(batches, where, documents)`: `batches` an
    iterator of feature dicts `(rows, width)` (every batch the same shape;
    the last one filled up with copies of its first row), whose `padding_mask` numbers
    each row's examples 1 to at most `documents`; and `where`, `(count, 2)`:
    example `i` is document `where[i, 1] + 1` of row `where[i, 0]`, counting
    the rows of all batches in sequence.

    The examples are tokenized and packed once, for their lengths (and
    `check`), as `sorted_batches` does; each batch's rows are then built
    from the packed features of its examples (`batch_size` sets how many are
    packed at a time, in chunks).
    """
    pack, lengths, first, chunk = tokenized_lengths(preprocessor, x, batch_size=batch_size,
                                                    input_names=input_names, check=check)
    sequence_length = preprocessor.sequence_length
    width = packed_width(int(lengths.max()) if lengths.size else 1, sequence_length)
    documents = max(1, width // DOCUMENT_TOKENS)
    rows = pack_rows(np.maximum(lengths, 1), width, documents)
    per_batch = max(1, PREDICT_POSITIONS // width)
    where = np.zeros((len(lengths), 2), np.int64)
    for r, row in enumerate(rows):
        where[row, 0], where[row, 1] = r, np.arange(len(row))

    def place(features, batch_rows):
        """One batch: the packed features of its examples, in row order,
        placed token by token into `(per_batch, width)` rows."""
        counts = [len(row) for row in batch_rows]
        real = features["padding_mask"] > 0  # (examples, sequence_length)
        sizes = real.sum(axis=1)
        starts = np.cumsum(sizes) - sizes  # each example's first token, counting all the batch's
        row_of = np.repeat(np.arange(len(batch_rows)), counts)  # each example's row
        document = np.concatenate([np.arange(1, n + 1) for n in counts])  # ... and its id there
        first_of_row = np.cumsum(counts) - counts  # each row's first example
        column = starts - starts[first_of_row][row_of]  # each example's first column in its row
        example, position = np.nonzero(real)  # every real token, each example's in order
        token_column = column[example] + np.arange(len(example)) - starts[example]
        batch = {}
        for key, value in features.items():
            packed = np.zeros((per_batch, width), value.dtype)
            packed[row_of[example], token_column] = (document[example] if key == "padding_mask"
                                                     else value[example, position])
            packed[len(batch_rows):] = packed[0]  # filler rows (the last batch): copies of the first
            batch[key] = packed
        return batch

    def batches():
        plan = [rows[begin:begin + per_batch] for begin in range(0, len(rows), per_batch)]
        group = 0
        while group < len(plan):
            # Consecutive batches of at most `chunk` examples in all (at least one), packed at once.
            last, count = group + 1, sum(map(len, plan[group]))
            while last < len(plan) and count + sum(map(len, plan[last])) <= chunk:
                count += sum(map(len, plan[last]))
                last += 1
            examples = np.concatenate([np.asarray(row, np.int64) for batch in plan[group:last] for row in batch])
            features = {k: v[examples] for k, v in first.items()} if first is not None else pack(examples)
            offset = 0
            for batch_rows in plan[group:last]:
                n = sum(map(len, batch_rows))
                yield place({k: v[offset:offset + n] for k, v in features.items()}, batch_rows)
                offset += n
            group = last

    return batches(), where, documents
