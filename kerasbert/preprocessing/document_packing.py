"""Packing several short documents into one row, for pretraining without
padding: the rows' padding masks number the documents so that the Encoder
keeps attention (and positions) inside each one."""

from kerasbert.utils.checks import INT32_MAX, check_choice, check_id, check_int, show
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
            f"dataset must be a tf.data.Dataset of 1-D token-id tensors; got {type(dataset).__name__} {show(dataset)}."
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
