"""The tokenizer base layer: input checks, batching, vocabulary look-ups."""

import functools
import numbers
import os
import re

import numpy as np

from kerasbert.tokenizers.files import tokenizer_arguments
from kerasbert.utils.checks import abbreviated, check_id, check_string, token_ids
from kerasbert.utils.optional import tf
from kerasbert.utils.preprocessing_layer import PreprocessingLayer
from kerasbert.utils.ragged import add_to_rows, concat_rows, join_rows, row_ids
from kerasbert.utils.registry import subclass_named


def to_string_tensor(inputs, name="inputs"):
    """A bare string, a list/array of strings or a tf.string tensor ->
    (tf.string tensor of rank 1, whether the input was a single string).

    Raises a TypeError naming what was given for anything else (None,
    numbers, lists holding other things, ...), and a ValueError for
    nested batches (rank 2 or more).
    """
    if isinstance(inputs, np.ndarray) and inputs.dtype.kind in "USO" and inputs.ndim <= 1:
        inputs = inputs.item() if inputs.ndim == 0 else inputs.tolist()  # a string, or a list of them

    def nested():
        return ValueError(
            f"{name} must be a string or a 1-D batch of strings; got {abbreviated(inputs)}. "
            "Flatten nested batches first (e.g. tf.reshape(texts, [-1]))."
        )

    if isinstance(inputs, np.ndarray):
        if inputs.dtype.kind not in "USO":
            raise TypeError(f"{name} must hold strings; got a {inputs.dtype} numpy array.")
        raise nested()
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            raise TypeError(f"{name} must hold strings; got a {inputs.dtype.name} tensor.")
        if isinstance(inputs, tf.RaggedTensor) or inputs.shape.rank not in (0, 1, None):
            raise nested()
        return (inputs[None], True) if inputs.shape.rank == 0 else (inputs, False)
    if isinstance(inputs, (str, bytes)):
        return tf.constant([_encode(inputs)]), True
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(
            f"{name} must be a string, a list of strings or a tf.string tensor; got {type(inputs).__name__}: "
            f"{abbreviated(inputs)}."
        )
    for item in inputs:
        if not isinstance(item, (str, bytes)):
            what = "None" if item is None else f"{type(item).__name__} {abbreviated(item, 40)}"
            hint = " (numbers are not text)" if isinstance(item, numbers.Number) else ""
            raise TypeError(f"{name} must contain only strings; found {what}{hint}.")
    return tf.constant([_encode(item) for item in inputs], tf.string, shape=[len(inputs)]), False


def utf8_length(code_points, dtype="int32"):
    """(n,) code points -> (n,) UTF-8 byte counts of `dtype`."""
    return 1 + sum(tf.cast(code_points >= first, dtype) for first in (0x80, 0x800, 0x10000))


def _encode(text):
    """str -> UTF-8 bytes; lone surrogates (not valid Unicode) become bytes
    that are invalid UTF-8, which the tokenizers replace with U+FFFD."""
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def regex_split_with_offsets(texts, pattern, keep_pattern):
    """`tensorflow_text.regex_split_with_offsets` on `texts (batch,)`: the
    pieces and their byte offsets, each ragged `(batch, None)` (int64
    offsets), from the same kernel without the checks of its partition
    (tensorflow-text's kernel module is private: the pin in pyproject.toml
    keeps it where it is)."""
    from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

    pieces, begins, ends, splits = gen_regex_split_ops.regex_split_with_offsets(
        tf.reshape(texts, [-1]), f"({pattern})".encode("utf-8"), f"({keep_pattern})".encode("utf-8")
    )
    return tuple(tf.RaggedTensor.from_row_splits(t, splits, validate=False) for t in (pieces, begins, ends))


def split_keeping(texts, pattern):
    """Splits valid UTF-8 texts `(batch,)` at the matches of `pattern`,
    keeping the matches, so that the pieces tile each text.

    Returns:
        `(pieces, starts, ends)`: the pieces, ragged `(batch, None)`, with
        the texts' own bytes, and their flat `(pieces,)` character starts
        and ends (int64) in their texts.

    RE2 stops at NUL, so the split runs on a copy with NUL written "\\x01\\x03"
    and "\\x01" written "\\x01\\x02" (the pattern never matches those
    bytes), undone in the pieces. Nothing is copied once per piece: a text
    of n pieces costs O(its length), not O(n times its length).
    """
    escaped = tf.strings.regex_replace(tf.strings.regex_replace(texts, r"\x01", "\x01\x02"), r"\x00", "\x01\x03")
    pieces, _, _ = regex_split_with_offsets(escaped, pattern, pattern)
    flat = tf.strings.regex_replace(
        tf.strings.regex_replace(pieces.flat_values, r"\x01\x03", "\x00"), r"\x01\x02", "\x01"
    )
    lengths = tf.cast(tf.strings.length(flat, unit="UTF8_CHAR"), tf.int64)
    before = tf.cumsum(lengths, exclusive=True)  # characters before each piece, over the batch
    starts = before - tf.gather(before, tf.gather(pieces.row_starts(), row_ids(pieces)))
    return pieces.with_flat_values(flat), starts, starts + lengths


# Unicode White_Space, what Rust's char::is_whitespace (transformers' lstrip
# and rstrip of added tokens) accepts.
_WHITESPACE = r"[\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]"


class Tokenizer(PreprocessingLayer):
    """Base class of kerasbert's tokenizers.

    Tokenizers are Keras preprocessing layers built from TensorFlow ops, so
    they run eagerly, inside `tf.data` pipelines whatever the Keras backend,
    and inside exported SavedModels. Calling one on a batch of strings
    returns a `tf.RaggedTensor` of token ids without special tokens; on a
    single string, a 1-D `tf.Tensor`.

    Subclasses set `self.vocabulary` (a list of tokens indexed by id), the
    special tokens (`_set_special_tokens_in_text`), and implement
    `_tokenize_text(texts) -> (ids, starts, ends)` for a rank-1 tensor of
    valid UTF-8 text free of special tokens.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    # -- Presets ------------------------------------------------------------

    @classmethod
    def from_preset(cls, preset):
        """The tokenizer of a built-in preset, a kerasbert preset directory,
        a Hugging Face checkpoint directory or `hf://org/name`, built from
        its files (`tokenizer.json`, or `vocab.txt` with
        `tokenizer_config.json`) with the casing and normalisation settings
        they record.

        Examples:
        >>> import kerasbert
        >>> tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
        >>> tokenizer(["Hello, world!"]).to_list()
        [[7592, 1010, 2088, 999]]
        """
        from kerasbert.presets import is_keras_hub_directory, preset_directory

        is_directory = isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset)
        is_directory = is_directory and not is_keras_hub_directory(preset)  # KerasHub's: converted first
        directory = os.fspath(preset) if is_directory else preset_directory(preset)
        class_name, (args, kwargs) = tokenizer_arguments(directory)
        tokenizer = subclass_named(Tokenizer, class_name)(*args, **kwargs)
        if not isinstance(tokenizer, cls):
            raise TypeError(
                f"preset {preset!r} has a {type(tokenizer).__name__}, not a "
                f"{cls.__name__}; use kerasbert.Tokenizer.from_preset."
            )
        return tokenizer

    def save_to_preset(self, preset_dir):
        """Writes the tokenizer's files into `preset_dir`, in the Hugging Face
        layout that both kerasbert and transformers load."""
        raise NotImplementedError

    # -- Vocabulary ---------------------------------------------------------

    def _set_vocabulary(self, vocabulary):
        """A list of distinct token strings, id = position."""
        if isinstance(vocabulary, (str, bytes)) or not isinstance(vocabulary, (list, tuple)):
            raise TypeError(f"vocabulary must be a list of token strings; got {abbreviated(vocabulary)}.")
        self.vocabulary = list(vocabulary)
        self._token_to_id = {}
        for i, token in enumerate(self.vocabulary):
            check_string(f"vocabulary[{i}]", token)
            if token in self._token_to_id:
                raise ValueError(
                    f"vocabulary[{i}]={token!r} repeats vocabulary[{self._token_to_id[token]}]; "
                    "every token must appear once."
                )
            self._token_to_id[token] = i
        self._id_to_token = tf.constant(self.vocabulary, tf.string)

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def token_to_id(self, token):
        check_string("token", token)
        if token not in self._token_to_id:
            raise ValueError(f"token={token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    def id_to_token(self, token_id):
        return self.vocabulary[check_id("token_id", token_id, len(self.vocabulary))]

    @property
    def special_token_ids(self):
        """{"cls": id, "sep": id, "pad": id, "mask": id, "unk": id}."""
        return {k: self.token_to_id(v) for k, v in self.special_tokens.items()}

    @staticmethod
    def _checked_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token):
        """The special-token arguments, checked -> {"cls": token, ...}."""
        return {
            "cls": check_string("cls_token", cls_token), "sep": check_string("sep_token", sep_token),
            "pad": check_string("pad_token", pad_token), "mask": check_string("mask_token", mask_token),
            "unk": check_string("unknown_token", unknown_token),
        }

    def _set_special_tokens(self, cls_token, sep_token, pad_token, mask_token, unknown_token):
        self.special_tokens = self._checked_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token)
        missing = [t for t in self.special_tokens.values() if t not in self._token_to_id]
        if missing:
            raise ValueError(
                f"The vocabulary lacks the special token(s) {missing}; pass the names this "
                "vocabulary uses (cls_token=, sep_token=, pad_token=, mask_token=, unknown_token=)."
            )

    def _special_token_config(self):
        """The special-token arguments of the constructor, for get_config."""
        t = self.special_tokens
        return {
            "cls_token": t["cls"], "sep_token": t["sep"], "pad_token": t["pad"],
            "mask_token": t["mask"], "unknown_token": t["unk"],
        }

    # -- Special tokens written in the text ----------------------------------

    def _set_special_tokens_in_text(self, tokens, lstrip=(), rstrip=(), later=()):
        """Special tokens found in the raw text ("[MASK]") become their ids,
        matched before normalisation, as transformers' added tokens are.
        Tokens in `lstrip` / `rstrip` also swallow the whitespace on their
        left / right (RoBERTa's and ALBERT's mask token). Tokens in `later`
        match only where none of the others does, as transformers'
        normalised added tokens, matched after its special ones."""
        by_length = functools.partial(sorted, key=len, reverse=True)
        tokens = by_length(set(tokens)) + by_length(set(later) - set(tokens))
        self._special_pattern = None
        if not tokens:
            return
        parts = []
        for token in tokens:
            part = re.escape(token)
            part = (_WHITESPACE + "*" if token in lstrip else "") + part
            part += _WHITESPACE + "*" if token in rstrip else ""
            parts.append(part)
        self._special_pattern = "|".join(parts)
        self._special_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tokens, [self._token_to_id[t] for t in tokens], tf.string, tf.int32
            ),
            default_value=-1,
        )

    # texts: (batch,) -> ids, starts, ends: (batch, None)
    def _tokenize(self, texts):
        texts = tf.strings.unicode_transcode(
            texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        if getattr(self, "_special_pattern", None) is None:
            return self._tokenize_text(texts)
        segments, offset, special_end = split_keeping(texts, self._special_pattern)
        offset, special_end = tf.cast(offset, tf.int32), tf.cast(special_end, tf.int32)
        flat = segments.flat_values
        # A token as matched (a token of spaces too), or stripped of the whitespace it swallowed.
        stripped = tf.strings.regex_replace(flat, f"^{_WHITESPACE}+|{_WHITESPACE}+$", "")
        special_id = self._special_table.lookup(flat)
        special_id = tf.where(special_id >= 0, special_id, self._special_table.lookup(stripped))  # -1: ordinary text
        is_special = special_id >= 0
        ids, starts, ends = self._tokenize_text(tf.where(is_special, "", flat))  # (segments, None)
        starts, ends = add_to_rows(starts, offset), add_to_rows(ends, offset)
        special_lengths = tf.cast(is_special, tf.int64)

        def with_special(pieces, value):
            # (segments, None) pieces, then each special token -> (batch, None)
            extra = tf.RaggedTensor.from_row_lengths(
                tf.boolean_mask(value, is_special), special_lengths, validate=False
            )
            return join_rows(concat_rows(pieces, extra), segments.row_splits)

        return with_special(ids, special_id), with_special(starts, offset), with_special(ends, special_end)

    # -- Calls --------------------------------------------------------------

    def __call__(self, inputs, **kwargs):
        # Checked before Keras, which would append the whole argument (a
        # megabyte of text, say) to the error message.
        texts, single = to_string_tensor(inputs)
        return super().__call__(texts[0] if single else texts, **kwargs)

    def call(self, inputs):
        ids, _, _ = self.tokenize_with_offsets(inputs)
        return ids

    def tokenize(self, inputs):
        return self(inputs)

    def tokenize_with_offsets(self, inputs):
        """Token ids with the character span of each token in the input.

        Returns:
            `(ids, starts, ends)`: ragged `(batch, None)` tensors (1-D for a
            single string). `text[start:end]` (Python string indexing, in
            characters) is the part of the input the token came from.
        """
        texts, single = to_string_tensor(inputs)
        with tf.device("cpu"):
            # One trace per tokenizer, reused by every later call: eager
            # calls, and every tf.data pipeline or tf.function that calls it
            # (they call the traced function instead of retracing it).
            ids, starts, ends = self._compiled_tokenize(texts)
        if single:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    @property
    def _compiled_tokenize(self):
        if getattr(self, "_compiled", None) is None:
            self._compiled = tf.function(
                self._tokenize, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False
            )
        return self._compiled

    def _ids_as_batch(self, ids):
        """Ids for `detokenize`, checked -> (ragged (batch, None) ids,
        whether one sequence was given)."""
        return token_ids("ids", ids, len(self.vocabulary))

    def id_to_token_tensor(self, ids):
        return tf.gather(self._id_to_token, ids)
