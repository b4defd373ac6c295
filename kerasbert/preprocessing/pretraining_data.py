"""Pretraining data: documents of sentences -> an endless, resumable stream
of masked batches for masked-LM (RoBERTa, ELECTRA), MLM+NSP (BERT) and
MLM+SOP (ALBERT) pretraining.

The examples (packed rows) are built once, in Python and numpy, then
streamed by `tf.data` in a fresh order each epoch and masked anew each
batch. Every batch is a pure function of `(seed, step)`: epoch `e` is
ordered by `numpy.random.default_rng((seed, e))` and batch `k` is masked
with the stateless `MaskedLMMasker(batch, seed=[seed, k])`, so a run that
resumes at step `k` (`start_step=k`) sees exactly the batches it would have
seen, without computing the skipped ones.
"""

import itertools
import math

import numpy as np

from kerasbert.preprocessing.masking import MaskedLMMasker
from kerasbert.preprocessing.packer import Packer
from kerasbert.preprocessing.sentence_pairs import check_documents, make_sentence_pairs
from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.checks import check_bool, check_choice, check_int, check_number
from kerasbert.utils.optional import do_not_convert, tf

OBJECTIVES = ("mlm", "mlm+nsp", "mlm+sop", "electra")
_PAIR_TASKS = {"mlm+nsp": "nsp", "mlm+sop": "sop"}
_TOKENIZE_BATCH = 4096  # sentences per tokenizer call


def _tokenize_documents(documents, tokenizer):
    """Documents of strings -> documents of sentences as lists of ids (empty
    sentences and documents dropped), tokenized in large batches."""
    sentences = [s for document in documents for s in document]
    ids, lengths = [], []
    for start in range(0, len(sentences), _TOKENIZE_BATCH):
        ragged = tokenizer(sentences[start:start + _TOKENIZE_BATCH])  # (batch, None)
        ids.append(ragged.flat_values.numpy())
        lengths.append(ragged.row_lengths().numpy())
    flat = np.concatenate(ids).tolist() if ids else []
    ends = np.cumsum(np.concatenate(lengths)).tolist() if lengths else []
    tokenized, i = [], 0
    for document in documents:
        sentences_ids = []
        for _ in document:
            start = ends[i - 1] if i else 0
            if ends[i] > start:
                sentences_ids.append(flat[start:ends[i]])
            i += 1
        if sentences_ids:
            tokenized.append(sentences_ids)
    return tokenized


def _chunks(tokenized, body):
    """Consecutive whole sentences of each document, at most `body` ids a
    chunk; a sentence longer than `body` is cut into pieces of its own."""
    chunks = []
    for document in tokenized:
        current = []
        for sentence in document:
            if len(sentence) > body:
                if current:
                    chunks.append(current)
                    current = []
                chunks += [sentence[i:i + body] for i in range(0, len(sentence), body)]
            elif len(current) + len(sentence) > body:
                chunks.append(current)
                current = list(sentence)
            else:
                current += sentence
        if current:
            chunks.append(current)
    return chunks


def _full_sentence_rows(tokenized, tokenizer, sequence_length):
    """RoBERTa's full-sentence rows: chunks wrapped in start/end ids, packed
    greedily in order, each chunk its own document id (as `pack_documents`)."""
    ids = tokenizer.special_token_ids
    start_id, end_id, pad_id = ids["cls"], ids["sep"], ids["pad"]
    chunks = _chunks(tokenized, sequence_length - 2)
    # Greedy packing: (row, column) where each chunk lands.
    placement, row, used = [], 0, 0
    for chunk in chunks:
        size = len(chunk) + 2
        if used + size > sequence_length:
            row, used = row + 1, 0
        placement.append((row, used))
        used += size
    rows = row + 1 if chunks else 0
    token_ids = np.full((rows, sequence_length), pad_id, np.int32)
    padding_mask = np.zeros((rows, sequence_length), np.int32)
    documents_in_row = np.zeros(rows, np.int32)
    for chunk, (row, column) in zip(chunks, placement):
        end = column + len(chunk) + 2
        token_ids[row, column] = start_id
        token_ids[row, column + 1:end - 1] = chunk
        token_ids[row, end - 1] = end_id
        documents_in_row[row] += 1
        padding_mask[row, column:end] = documents_in_row[row]
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": padding_mask,
    }


def _pair_rows(tokenized, tokenizer, sequence_length, task, short_sequence_probability, seed):
    """BERT's sentence pairs (NSP) or ALBERT's (SOP), packed by `Packer`."""
    num_special_tokens = 4 if getattr(tokenizer, "packing_style", "bert") == "roberta" else 3
    pairs = make_sentence_pairs(
        tokenized, sequence_length, task=task, short_sequence_probability=short_sequence_probability,
        num_special_tokens=num_special_tokens, seed=seed,
    )
    if not pairs:
        return None

    def ragged(part):
        values = np.fromiter(itertools.chain.from_iterable(part), np.int32)
        lengths = np.fromiter(map(len, part), np.int64, len(part))
        return tf.RaggedTensor.from_row_lengths(values, lengths)  # (pairs, None)

    first, second, labels = zip(*pairs)
    packed = Packer.from_tokenizer(tokenizer, sequence_length)(ragged(first), ragged(second))
    rows = {key: value.numpy().astype(np.int32) for key, value in packed.items()}
    rows["labels"] = np.asarray(labels, np.int32)
    return rows


def pretraining_examples(
    documents, tokenizer, objective, sequence_length, short_sequence_probability=0.1, seed=0
):
    """Builds the unmasked pretraining rows of a corpus, as numpy arrays.

    - "mlm" and "electra" (RoBERTa's full-sentence rows): each document is
      cut into chunks of consecutive whole sentences of at most
      `sequence_length - 2` tokens (a longer sentence is cut into pieces),
      each chunk is wrapped in the tokenizer's start and end tokens
      (`[CLS] ... [SEP]`, `<s> ... </s>`), and chunks are packed greedily, in
      order, into rows: `padding_mask` numbers the chunks of a row 1, 2, 3,
      ... (0 at padding), so that the Encoder keeps attention inside each
      chunk (see `pack_documents`); `segment_ids` are 0.
    - "mlm+nsp" (BERT) and "mlm+sop" (ALBERT): `make_sentence_pairs` pairs,
      packed by `Packer.from_tokenizer` (`padding_mask` 0/1), with their
      labels (0 = the natural order).

    Args:
        documents: a list of documents, each a list of sentence strings (what
            `read_documents` returns).
        tokenizer: a kerasbert `Tokenizer`; sentences are tokenized once, in
            large batches.
        objective: "mlm", "mlm+nsp", "mlm+sop" or "electra".
        sequence_length: the length of every row, special tokens included.
        short_sequence_probability: for sentence pairs, how often a pair
            targets a random shorter length.
        seed: the seed of the sentence-pair choices.

    Returns:
        A dict of int32 numpy arrays: `token_ids`, `segment_ids`,
        `padding_mask`, each `(num_examples, sequence_length)`, and for
        sentence pairs `labels` `(num_examples,)`.

    Examples:
    >>> import kerasbert
    >>> tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    >>> documents = [["The cat sat.", "It purred."], ["Rain fell all day."]]
    >>> rows = pretraining_examples(documents, tokenizer, "mlm", sequence_length=20)
    >>> tokenizer.detokenize(rows["token_ids"][:1]).numpy()[0].decode()
    '[CLS] the cat sat. it purred. [SEP] [CLS] rain fell all day. [SEP] [PAD] [PAD] [PAD]'
    >>> rows["padding_mask"][0].tolist()
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0]
    """
    check_choice("objective", objective, OBJECTIVES)
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
    check_documents(documents, text=True)
    task = _PAIR_TASKS.get(objective)
    if task is None:
        check_int("sequence_length", sequence_length, 3, why=" (a start token, an end token and one token)")
    else:
        minimum = (4 if getattr(tokenizer, "packing_style", "bert") == "roberta" else 3) + 2
        check_int("sequence_length", sequence_length, minimum,
                  why=f" (the special tokens of a pair and two tokens, for objective={objective!r})")
    check_number("short_sequence_probability", short_sequence_probability, 0.0, 1.0)
    check_int("seed", seed, 0)
    if seed >= 2**63:
        raise ValueError(f"seed must be an integer in [0, 2**63) (an int64); got {seed!r}.")

    tokenized = _tokenize_documents(documents, tokenizer)
    if task is None:
        rows = _full_sentence_rows(tokenized, tokenizer, int(sequence_length))
    else:
        if task == "nsp" and len(tokenized) < 2:
            raise ValueError(
                f"objective={objective!r} needs at least two documents with text (random next "
                f"sentences come from another document); got {len(tokenized)}."
            )
        rows = _pair_rows(tokenized, tokenizer, int(sequence_length), task, short_sequence_probability, seed)
    if rows is None or len(rows["token_ids"]) == 0:
        raise ValueError(
            f"documents give no {objective!r} examples: they hold no tokens"
            + ("" if task is None else " or no document has two sentences")
            + "."
        )
    return rows


def pretraining_dataset(
    documents,
    tokenizer,
    objective,
    sequence_length,
    batch_size,
    max_predictions=None,
    mask_rate=0.15,
    whole_word=False,
    short_sequence_probability=0.1,
    segment_ids=True,
    seed=0,
    start_step=0,
):
    """An endless, resumable `tf.data` stream of masked pretraining batches.

    The rows of `pretraining_examples` (built once, at call time) are
    streamed forever: epoch `e` visits all of them in the order of
    `numpy.random.default_rng((seed, e)).permutation`, and the stream runs on
    across epoch boundaries, so every batch is full:
    `(batch_size, sequence_length)`. Batch `k` (counted from the start of
    training) is masked by `MaskedLMMasker` with the stateless
    `seed=[seed, k]` (dynamic masking: a row is masked anew each time it
    comes back). The data is thus a pure function of `(seed, k)`, and
    `start_step=s` yields exactly batches `s, s+1, ...` of the full stream,
    without computing the skipped ones: resume a killed run with
    `start_step=optimizer.iterations`.

    Elements are `(x, y, sample_weight)` for `model.fit`:

    - "mlm" and "electra": `x` = {"token_ids", "segment_ids" (with
      `segment_ids=True`), "padding_mask", "mask_positions"} int32; `y` =
      the masked tokens' original ids `(batch, max_predictions)` int32;
      `sample_weight` = 1.0 for real targets, 0.0 for padding slots, float32.
    - "mlm+nsp" and "mlm+sop": the same `x`; `y` = {"mlm": ids, "nsp" (or
      "sop"): labels `(batch,)` int32}; `sample_weight` = {"mlm": weights,
      "nsp" (or "sop"): ones `(batch,)` float32}.

    A row is one example whatever its content; an epoch has
    `len(pretraining_examples(...)["token_ids"]) // batch_size` full batches
    (rounded down; the remainder starts the next epoch's stream).

    Args:
        documents: a list of documents, each a list of sentence strings (what
            `read_documents` returns).
        tokenizer: a kerasbert `Tokenizer` (its special tokens, packing style
            and, for `whole_word`, continuation pieces are used).
        objective: "mlm", "mlm+nsp", "mlm+sop" or "electra" (see
            `pretraining_examples` for the rows of each).
        sequence_length: the length of every row.
        batch_size: rows per batch.
        max_predictions: target slots per row; by default
            `ceil(sequence_length * mask_rate)` (20 for 128 at 0.15).
        mask_rate: a `MaskedLMMasker` argument.
        whole_word: a `MaskedLMMasker` argument.
        short_sequence_probability: for sentence pairs (see
            `make_sentence_pairs`).
        segment_ids: whether `x` holds `segment_ids` (leave it out for models
            without segment embeddings).
        seed: the seed of everything random: pairs, order, masks.
        start_step: the first batch to yield.

    Returns:
        An infinite `tf.data.Dataset` (use `steps_per_epoch` in `fit`).

    Examples:
    >>> import kerasbert
    >>> tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    >>> documents = [["The cat sat on the mat.", "It purred.", "Then it slept."],
    ...              ["Rain fell all day.", "The river rose.", "Nobody went out."]]
    >>> dataset = pretraining_dataset(documents, tokenizer, "mlm+sop",
    ...                               sequence_length=16, batch_size=2)
    >>> x, y, sample_weight = next(iter(dataset))
    >>> sorted(x), sorted(y)
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mlm', 'sop'])
    >>> tuple(x["token_ids"].shape), tuple(y["mlm"].shape), tuple(y["sop"].shape)
    ((2, 16), (2, 3), (2,))

    Resuming at step 5 gives batch 5 of the full stream:

    >>> full = list(dataset.take(6))
    >>> resumed = pretraining_dataset(documents, tokenizer, "mlm+sop", sequence_length=16,
    ...                               batch_size=2, start_step=5)
    >>> x5, _, _ = next(iter(resumed))
    >>> bool((x5["token_ids"] == full[5][0]["token_ids"]).numpy().all())
    True
    """
    check_choice("objective", objective, OBJECTIVES)
    check_int("batch_size", batch_size, 1)
    check_int("start_step", start_step, 0)
    if max_predictions is not None:
        check_int("max_predictions", max_predictions, 1, why=" (or None)")
    check_number("mask_rate", mask_rate, 0.0, 1.0)
    check_bool("whole_word", whole_word)
    check_bool("segment_ids", segment_ids)
    examples = pretraining_examples(
        documents, tokenizer, objective, sequence_length,
        short_sequence_probability=short_sequence_probability, seed=seed,
    )
    if max_predictions is None:
        # round() first: 100 * 0.15 is 15.000000000000002 in floating point.
        max_predictions = max(1, math.ceil(round(sequence_length * mask_rate, 9)))
    masker = MaskedLMMasker.from_tokenizer(
        tokenizer, mask_rate=mask_rate, max_predictions=max_predictions, whole_word=whole_word
    )
    return _stream(examples, masker, _PAIR_TASKS.get(objective), batch_size, segment_ids, seed, start_step)


def _stream(examples, masker, task, batch_size, segment_ids, seed, start_step):
    count, length = examples["token_ids"].shape
    slots = masker.max_predictions
    # The rows as eager tensors: captured by reference, not copied into the graph.
    rows = {key: tf.constant(value) for key, value in examples.items()}

    def order(epoch):
        return np.random.default_rng((seed, int(epoch))).permutation(count).astype(np.int64)

    # Stream position p = step * batch_size + i is example order(p // count)[p % count].
    first_epoch, offset = divmod(start_step * batch_size, count)

    def epoch_indices(epoch):
        permutation = tf.ensure_shape(tf.numpy_function(order, [epoch], tf.int64, stateful=False), [count])
        start = tf.where(epoch == first_epoch, tf.constant(offset, tf.int64), 0)
        return tf.data.Dataset.from_tensor_slices(permutation[start:])

    indices = (
        tf.data.Dataset.counter(first_epoch)
        .flat_map(do_not_convert(epoch_indices))
        .batch(batch_size, drop_remainder=True)  # (batch,)
    )
    steps = tf.data.Dataset.counter(start_step)

    def make_batch(step, index):
        batch = {
            "token_ids": tf.gather(rows["token_ids"], index),  # (batch, seq)
            "padding_mask": tf.gather(rows["padding_mask"], index),
        }
        masked = masker(batch, seed=tf.stack([tf.constant(seed, tf.int64), step]))
        x = {"token_ids": tf.ensure_shape(tf.cast(masked["token_ids"], tf.int32), [batch_size, length])}
        if segment_ids:
            x["segment_ids"] = tf.gather(rows["segment_ids"], index)
        x["padding_mask"] = batch["padding_mask"]
        x["mask_positions"] = tf.ensure_shape(tf.cast(masked["mask_positions"], tf.int32), [batch_size, slots])
        mask_ids = tf.ensure_shape(tf.cast(masked["mask_ids"], tf.int32), [batch_size, slots])
        weights = tf.ensure_shape(tf.cast(masked["mask_weights"], tf.float32), [batch_size, slots])
        if task is None:
            return x, mask_ids, weights
        labels = tf.gather(rows["labels"], index)  # (batch,)
        return x, {"mlm": mask_ids, task: labels}, {"mlm": weights, task: tf.ones([batch_size], tf.float32)}

    return (
        tf.data.Dataset.zip((steps, indices))
        .map(do_not_convert(make_batch), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .prefetch(tf.data.AUTOTUNE)
    )
