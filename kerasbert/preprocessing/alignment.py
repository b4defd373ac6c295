"""Sub-word alignment for token classification (NER): word-level tags ->
sub-word training targets, and sub-word predictions -> word-level values."""

import itertools
import numbers

import keras
import numpy as np

from kerasbert.preprocessing.packer import Packer
from kerasbert.preprocessing.preprocessors import TokenizingPreprocessor
from kerasbert.tokenizers.base import _WHITESPACE, Tokenizer, split_keeping
from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.utils.checks import check_string
from kerasbert.utils.optional import tf
from kerasbert.utils.ragged import row_ids


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenClassificationPreprocessor(TokenizingPreprocessor):
    """Words and word-level tags -> encoder inputs with sub-word targets.

    `x` is a batch of raw strings, whose words are the runs of characters
    between Unicode whitespace, or a batch of words already split (a list of
    lists of strings, or a ragged `(batch, None)` string tensor, e.g. CoNLL
    sentences), which the word bookkeeping reads as if joined by single
    spaces. Each word is tokenized on its own, as transformers does with
    `is_split_into_words=True`; for byte-level BPE every word, the first
    included, gets its space-prefixed ("Ġ") form, as transformers' required
    `add_prefix_space=True` gives, whatever the tokenizer's own setting.
    The words' tokens are then packed (`[CLS] ... [SEP]` or `<s> ... </s>`),
    keeping the first tokens of sequences that are too long.

    `y`, when given, holds one integer tag per word (`(batch, words)`:
    nested lists, a ragged tensor, or a dense tensor whose rows are read up
    to the number of words). A word's tag becomes the label of its first
    sub-word token with sample weight 1.0; every other position gets label
    0 and weight 0.0, so Keras losses ignore it. Words with no target: those
    truncated away, those that give no token at all (e.g. a lone control
    character), and those tagged with a negative id (-100, transformers'
    ignore index, or -1). A `sample_weight` passed in multiplies these
    weights: per example `(batch,)`, or per word `(batch, words)` like `y`.

    Args:
        tokenizer: a `kerasbert.Tokenizer` (WordPiece, SentencePiece or
            byte-level BPE).
        sequence_length: the longest packed sequence, special tokens included.
        pad_to_sequence_length: `False` pads each batch to its longest row.

    Call arguments:
        x: a batch of raw strings, or a batch of lists of words.
        y: optional word-level tag ids, `(batch, words)`.
        sample_weight: optional, `(batch,)` or `(batch, words)`; needs `y`.

    Returns:
        `features`, or `(features, labels, sample_weight)` when `y` is given.
        `features` holds `token_ids`, `segment_ids`, `padding_mask` and
        `word_starts` (1 at the first sub-word of each word), all int32
        `(batch, seq)`; `labels` is int32 and `sample_weight` float32, both
        `(batch, seq)`.

    Examples:
    >>> preprocessor = TokenClassificationPreprocessor.from_preset(
    ...     "all_minilm_l6_v2", sequence_length=10)
    >>> features, labels, weights = preprocessor(
    ...     [["Thorbjorn", "visited", "Ouagadougou", "."]], [[1, 0, 2, 0]])
    >>> features["token_ids"].numpy().tolist()  # ##go ##u and "." truncated away
    [[101, 15321, 2497, 5558, 6826, 4716, 15068, 16098, 26797, 102]]
    >>> features["word_starts"].numpy().tolist()
    [[0, 1, 0, 0, 0, 1, 1, 0, 0, 0]]
    >>> labels.numpy().tolist()
    [[0, 1, 0, 0, 0, 0, 2, 0, 0, 0]]
    >>> weights.numpy().tolist()
    [[0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]]
    >>> alignment = preprocessor.word_alignment(["Thorbjorn  visited Ouagadougou ."])[0]
    >>> alignment["word_spans"], alignment["first_token"].tolist()
    ([(0, 9), (11, 18), (19, 30), (31, 32)], [1, 5, 6, -1])
    """

    def __init__(self, tokenizer, sequence_length=512, pad_to_sequence_length=True, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.packer = Packer.from_tokenizer(
            tokenizer, sequence_length, pad_to_sequence_length=pad_to_sequence_length
        )
        self._word_tokenizer = _word_tokenizer(tokenizer)

    @property
    def sequence_length(self):
        return self.packer.sequence_length

    # -- Training targets -------------------------------------------------------

    def tokenize_examples(self, x):
        """The first, tokenizing half of `call`: x -> the ids of each word,
        ragged `(batch, words, tokens)`. Tasks run it once, eagerly, on
        in-memory examples and map `pack_examples` over the result."""
        return self._tokenize_words(self._words(x)[0])

    def _tokenize_words(self, words):
        # Each word tokenized on its own: (words, None), then (batch, words, None).
        tokens = self._word_tokenizer(words.flat_values).with_row_splits_dtype(tf.int64)
        return words.with_flat_values(tokens)

    def call(self, x, y=None, sample_weight=None):
        return self.pack_examples(self.tokenize_examples(x), y, sample_weight)

    def pack_examples(self, words, y=None, sample_weight=None):
        """The second half of `call`: word ids `(batch, words, tokens)` ->
        features (and the sub-word targets and weights of y)."""
        words = words.with_row_splits_dtype(tf.int64)
        features, first_token = self._features(words)
        if y is None:
            if sample_weight is not None:
                raise ValueError("sample_weight was given without y; pass the word-level tags as y.")
            return features
        tags = _per_word(y, words, "y")  # (words,)
        weight = tf.ones_like(tags, tf.float32)
        if sample_weight is not None:
            weight = _word_weights(sample_weight, words)
        # Targets: first sub-words of words that kept a token and have a tag.
        labelled = (first_token >= 0) & (tags >= 0)
        index = tf.boolean_mask(tf.stack([row_ids(words), first_token], axis=1), labelled)  # (targets, 2)
        shape = tf.shape(features["token_ids"], out_type=tf.int64)
        labels = tf.scatter_nd(index, tf.boolean_mask(tags, labelled), shape)
        weights = tf.scatter_nd(index, tf.boolean_mask(weight, labelled), shape)
        return keras.utils.pack_x_y_sample_weight(features, labels, weights)

    def _features(self, words):
        """Word ids `(batch, words, tokens)` -> (features, the position of
        each word's first token in its packed row, -1 if none; flat
        `(words,)`)."""
        splits = words.values.row_splits  # token splits per word
        features = self.packer(words.merge_dims(1, 2))
        word_row = row_ids(words)
        # A word's first token among its row's tokens, + 1 for [CLS] / <s>.
        row_first_token = tf.gather(splits, words.row_splits[:-1])  # (batch,)
        position = splits[:-1] - tf.gather(row_first_token, word_row) + 1  # (words,)
        kept = (splits[1:] > splits[:-1]) & (position <= self.sequence_length - 2)
        first_token = tf.where(kept, position, -1)
        index = tf.boolean_mask(tf.stack([word_row, position], axis=1), kept)  # (kept words, 2)
        shape = tf.shape(features["token_ids"], out_type=tf.int64)
        features["word_starts"] = tf.scatter_nd(index, tf.ones(tf.shape(index)[:1], tf.int32), shape)
        return features, first_token

    def _words(self, x):
        """x -> (ragged words `(batch, words)`, texts `(batch,)` or None for
        pre-split words, the words' flat `(words,)` character starts and
        ends (int32) in the texts)."""
        texts, words = _as_batch(x)
        if words is not None:
            return words, None, None, None
        texts = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        pieces, starts, ends = split_keeping(texts, _WHITESPACE + "+")  # words and the whitespace between
        is_word = ~tf.strings.regex_full_match(pieces.flat_values, _WHITESPACE + "+")
        words = tf.ragged.boolean_mask(pieces, pieces.with_flat_values(is_word))
        starts, ends = (tf.cast(tf.boolean_mask(t, is_word), tf.int32) for t in (starts, ends))
        return words.with_row_splits_dtype(tf.int64), texts, starts, ends

    # -- Word bookkeeping for decoding ------------------------------------------

    def text_features(self, texts):
        """Graph-safe, for raw strings `(batch,)`: `(features, words,
        first_token, word_starts, word_ends, texts)`: the packed features,
        the words (ragged `(batch, words)`), each word's first sub-word
        position in its row (flat `(words,)`, -1 for none), the words'
        character starts and ends in their texts (flat `(words,)`, int32) and
        the texts with invalid UTF-8 replaced (what the offsets index)."""
        words, texts, starts, ends = self._words(texts)
        if texts is None:
            raise ValueError("text_features takes raw strings (batch,), not word lists.")
        features, first_token = self._features(self._tokenize_words(words))
        return features, words, first_token, starts, ends, texts

    def word_alignment(self, x):
        """Where each word of `x` is, in its text and in the packed sequence.

        Returns:
            A list with, per example, a dict of `text` (the raw string, or
            the words joined by single spaces), `words` (list of str),
            `word_spans` (list of `(start, end)` character offsets into
            `text`) and `first_token` (np.int32 array: per word, the
            position of its first sub-word in the packed sequence that
            `call` builds, -1 where the word was truncated away or gives no
            token).
        """
        words, texts, starts, ends = self._words(x)
        _, first_token = self._features(self._tokenize_words(words))
        first_token = first_token.numpy().astype(np.int32)
        splits = words.row_splits.numpy()
        flat = [w.decode("utf-8", "replace") for w in words.flat_values.numpy().tolist()]
        rows = list(itertools.pairwise(splits))
        if texts is not None:
            begin, end = starts.numpy(), ends.numpy()
            texts = [t.decode("utf-8", "replace") for t in texts.numpy().tolist()]
        else:
            # Each word starts after the words and spaces before it in its row.
            lengths = np.array([len(w) for w in flat], np.int64)
            begin = np.cumsum(lengths + 1) - (lengths + 1)
            begin = begin - begin[np.repeat(splits[:-1], np.diff(splits))]
            end = begin + lengths
            texts = [" ".join(flat[lo:hi]) for lo, hi in rows]
        return [
            {
                "text": text,
                "words": flat[lo:hi],
                "word_spans": [(int(b), int(e)) for b, e in zip(begin[lo:hi], end[lo:hi])],
                "first_token": first_token[lo:hi],
            }
            for text, (lo, hi) in zip(texts, rows)
        ]

    def word_predictions(self, x, token_predictions):
        """Per-token predictions -> per-word values, read at each word's first
        sub-word.

        Args:
            x: the inputs the predictions were made from (as for `call`).
            token_predictions: `(batch, seq)` (e.g. tag ids) or
                `(batch, seq, k)` (e.g. tag scores), numpy or a tensor.

        Returns:
            A list with, per example, a numpy array `(words,)` or
            `(words, k)` of the values at each word's first sub-word; -1
            where the word has no token (truncated away or none at all).
        """
        predictions = np.asarray(keras.ops.convert_to_numpy(token_predictions))
        alignment = self.word_alignment(x)
        if predictions.ndim < 2 or predictions.shape[0] != len(alignment):
            raise ValueError(
                f"token_predictions must be (batch, seq) or (batch, seq, k) for the {len(alignment)} examples "
                f"of x; got shape {predictions.shape}."
            )
        needed = max((int(a["first_token"].max(initial=-1)) + 1 for a in alignment), default=0)
        if predictions.shape[1] < needed:
            raise ValueError(
                f"token_predictions has {predictions.shape[1]} positions per example but the packed "
                f"sequences of x need {needed}; pass predictions made from this preprocessor's features."
            )
        result = []
        for row, example in zip(predictions, alignment):
            first = example["first_token"]
            values = row[np.maximum(first, 0)]  # (words, ...)
            has_token = (first >= 0).reshape((-1,) + (1,) * (values.ndim - 1))
            result.append(np.where(has_token, values, np.asarray(-1, values.dtype)))
        return result

    # -- Config -----------------------------------------------------------------

    def options(self):
        return {"sequence_length": self.packer.sequence_length,
                "pad_to_sequence_length": self.packer.pad_to_sequence_length}


def _word_tokenizer(tokenizer):
    """The tokenizer for single words. transformers tokenizes pre-split words
    with byte-level BPE only with `add_prefix_space=True`, which gives every
    word (and the text after a special token inside a word) a leading "Ġ":
    a BPE tokenizer without it is rebuilt with it."""
    if isinstance(tokenizer, BytePairTokenizer) and not tokenizer.add_prefix_space:
        config = tokenizer.get_config()
        config.update(add_prefix_space=True, name=f"{tokenizer.name}_words")
        return BytePairTokenizer.from_config(config)
    return tokenizer


def _as_batch(x):
    """x -> (texts `(batch,)`, None) for raw strings, or (None, ragged words
    `(batch, None)`) for pre-split words."""
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        if x.dtype != tf.string:
            raise TypeError(f"x must hold strings; got a {x.dtype.name} tensor.")
        rank = x.shape.rank
        if rank == 1 and isinstance(x, tf.Tensor):
            return x, None
        if rank == 2:
            # A dense batch of words: trailing empty strings are padding.
            words = x if isinstance(x, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(x, padding="")
            return None, words.with_row_splits_dtype(tf.int64)
        raise ValueError(
            f"x must be a batch of strings (rank 1) or a batch of word lists (rank 2, ragged); got shape {x.shape}."
            + (" Batch the dataset before mapping the preprocessor." if rank in (0, None) else "")
        )
    if isinstance(x, (str, bytes)):
        raise TypeError("x must be a batch (a list) of strings or of word lists, not a single string; wrap it: [x].")
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "US" and x.ndim in (1, 2):
            return _as_batch(tf.constant(np.char.encode(x, "utf-8") if x.dtype.kind == "U" else x))
        x = x.tolist()
    if not isinstance(x, (list, tuple)):
        raise TypeError(
            "x must be a list of strings, a list of word lists, or a tf.string tensor; "
            f"got {type(x).__name__}: {x!r:.80}."
        )
    nested = [isinstance(item, (list, tuple, np.ndarray)) for item in x]
    if not any(nested):
        for i, item in enumerate(x):
            check_string(f"x[{i}]", item, what="text or a word", allow_bytes=True)
        return tf.constant([_utf8(t) for t in x], tf.string, shape=[len(x)]), None
    if not all(nested):
        raise TypeError(
            f"x mixes strings and word lists (x[{nested.index(False)}] is a "
            f"{type(x[nested.index(False)]).__name__}); pass either raw strings or lists of words."
        )
    rows = []
    for i, row in enumerate(x):
        row = row.tolist() if isinstance(row, np.ndarray) else row
        for j, word in enumerate(row):
            check_string(f"x[{i}][{j}]", word, what="text or a word", allow_bytes=True)
        rows.append([_utf8(w) for w in row])
    return None, tf.ragged.constant(rows, tf.string, ragged_rank=1, row_splits_dtype=tf.int64)


def _utf8(text):
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def _per_word(values, words, name, dtype="int32"):
    """y or per-word weights, `(batch, words)` -> flat `(words,)` values in
    the order of `words.flat_values`, checked against the words per row."""
    values = _numbers_by_row(values, name, tf.as_dtype(dtype))
    rows = values.nrows() if isinstance(values, tf.RaggedTensor) else tf.shape(values, out_type=tf.int64)[0]
    expected = words.row_lengths()
    eager = tf.executing_eagerly()
    if eager and int(rows) != int(words.nrows()):
        raise ValueError(f"{name} has {int(rows)} rows but x has {int(words.nrows())} examples.")
    if isinstance(values, tf.Tensor):
        # Dense rows (e.g. padded): the first (number of words) values of each row.
        width = tf.shape(values, out_type=tf.int64)[1]
        longest = tf.reduce_max(tf.concat([expected, [0]], 0))
        if eager and int(longest) > int(width):
            raise ValueError(
                f"{name} has {int(width)} columns but an example of x has {int(longest)} words; "
                "give one value per word."
            )
        values = tf.RaggedTensor.from_tensor(values, lengths=tf.minimum(expected, width))
    values = tf.cast(values, dtype).with_row_splits_dtype(tf.int64)
    got = values.row_lengths()
    if eager:
        wrong = np.flatnonzero(expected.numpy() != got.numpy())
        if wrong.size:
            i = int(wrong[0])
            raise ValueError(
                f"{name}[{i}] has {int(got[i])} values but example {i} of x has {int(expected[i])} words; "
                "give one value per word."
            )
        return values.flat_values
    check = tf.debugging.assert_equal(
        tf.size(got), tf.size(expected), message=f"{name} and x differ in their number of examples"
    )
    with tf.control_dependencies([check]):
        check = tf.debugging.assert_equal(got, expected, message=f"{name} must have one value per word of x")
    with tf.control_dependencies([check]):
        return tf.identity(values.flat_values)


def _numbers_by_row(values, name, dtype):
    """Nested lists, arrays or tensors of numbers, `(batch, words)` -> a
    rank-2 tf.Tensor or tf.RaggedTensor, their types checked."""
    integer = dtype.is_integer
    kind = "integer tag ids" if integer else "numbers"
    if isinstance(values, np.ndarray) and values.dtype != object:
        values = tf.constant(values)
    if isinstance(values, (tf.Tensor, tf.RaggedTensor)):
        if not (values.dtype.is_integer or (not integer and values.dtype.is_floating)):
            raise TypeError(f"{name} must hold {kind}; got a {values.dtype.name} tensor.")
        if values.shape.rank != 2:
            raise ValueError(
                f"{name} must be (batch, words), one value per word; got shape {values.shape}."
                + (" Batch the dataset before mapping the preprocessor." if values.shape.rank == 1 else "")
            )
        return values
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)) or not all(isinstance(r, (list, tuple, np.ndarray)) for r in values):
        raise TypeError(f"{name} must be a batch of per-word lists of {kind} (batch, words); got {values!r:.80}.")
    rows = [list(r.tolist() if isinstance(r, np.ndarray) else r) for r in values]
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            if not (isinstance(v, numbers.Integral) if integer else isinstance(v, numbers.Real)):
                hint = " (map tag names to ids first)" if isinstance(v, (str, bytes)) else ""
                raise TypeError(f"{name}[{i}][{j}] must be one of {kind}; got {type(v).__name__} {v!r:.40}{hint}.")
            if integer and not -(2**31) <= v < 2**31:
                raise ValueError(f"{name}[{i}][{j}]={v} is outside the int32 range of tag ids.")
    if not rows:
        return tf.RaggedTensor.from_row_splits(tf.zeros([0], dtype), tf.zeros([1], tf.int64))
    return tf.ragged.constant(rows, dtype, ragged_rank=1)


def _word_weights(sample_weight, words):
    """sample_weight `(batch,)` (per example) or `(batch, words)` (per word)
    -> float32 `(words,)`."""
    if isinstance(sample_weight, (list, tuple)):
        per_example = all(isinstance(v, numbers.Real) for v in sample_weight)
    elif isinstance(sample_weight, (tf.Tensor, np.ndarray)):
        per_example = len(sample_weight.shape) == 1 and sample_weight.dtype != object
    else:
        per_example = False
    if not per_example:
        return _per_word(sample_weight, words, "sample_weight", tf.float32)
    weights = tf.convert_to_tensor(sample_weight)
    if not (weights.dtype.is_floating or weights.dtype.is_integer):
        raise TypeError(f"sample_weight must hold numbers; got {weights.dtype.name}.")
    weights = tf.cast(weights, tf.float32)  # (batch,)
    if tf.executing_eagerly() and int(tf.size(weights)) != int(words.nrows()):
        raise ValueError(
            f"sample_weight has {int(tf.size(weights))} values but x has {int(words.nrows())} examples; "
            "give one weight per example (batch,) or one per word (batch, words)."
        )
    return tf.gather(weights, row_ids(words))
