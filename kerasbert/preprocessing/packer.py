"""Packing token ids into encoder inputs: special tokens, truncation, padding."""

import keras

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.checks import INT32_MAX, abbreviated, check_bool, check_choice, check_id, check_int, token_ids
from kerasbert.utils.optional import tf
from kerasbert.utils.preprocessing_layer import PreprocessingLayer
from kerasbert.utils.ragged import column, concat_rows, truncate_rows

STYLES = ("bert", "roberta")
TRUNCATIONS = ("longest_first", "round_robin")


def _lengths_after_truncation(first, second, budget, truncate):
    """Kept lengths (first, second) for sequences of `first`/`second` tokens
    when at most `budget` fit. Tensors of shape (batch,)."""
    budget = tf.constant(budget, first.dtype)  # Python ints would be int32 in graphs
    if truncate == "longest_first":
        # transformers' fast tokenizers: the shorter keeps what it can of
        # half; when both exceed half, the longer gets the odd token.
        short = tf.minimum(first, second)
        long_target = tf.where(short > budget, short, tf.maximum(short, budget - short))
        over = short + long_target > budget
        short_target = tf.where(over, budget // 2, short)
        long_target = tf.where(over, budget // 2 + budget % 2, long_target)
        first_is_long = first > second
        first_target = tf.where(first_is_long, long_target, short_target)
        second_target = tf.where(first_is_long, short_target, long_target)
    else:  # round_robin: one token at a time, first sequence first
        half_up, half_down = (budget + 1) // 2, budget // 2
        first_target = tf.where(second < half_down, budget - second, half_up)
        second_target = tf.where(first < half_up, budget - first, half_down)
    return tf.minimum(first, first_target), tf.minimum(second, second_target)


@keras.saving.register_keras_serializable(package="kerasbert")
class Packer(PreprocessingLayer):
    """Builds encoder inputs from one or two batches of token ids.

    BERT style (BERT, ALBERT, ELECTRA): `[CLS] A [SEP] B [SEP]` with segment
    ids 0 for the first part and 1 for `B [SEP]`. RoBERTa style:
    `<s> A </s></s> B </s>`, all segment ids 0. Pairs are truncated to fit
    `sequence_length` as transformers' fast tokenizers do
    (`truncate="longest_first"`) or by giving each sequence one token in turn
    (`"round_robin"`); single sequences keep their first tokens.

    Args:
        sequence_length: the length of every output row, specials included.
        cls_id: the id of the start token (`[CLS]`, `<s>`).
        sep_id: the id of the separator token (`[SEP]`, `</s>`).
        pad_id: the id of the padding token.
        style: "bert" or "roberta".
        truncate: "longest_first" or "round_robin".
        pad_to_sequence_length: `False` pads each batch only to its longest
            row (dynamic padding) instead of `sequence_length`.
        vocabulary_size: optional; with it, eager calls refuse ids outside
            `[0, vocabulary_size)` (`from_tokenizer` sets it).

    Call arguments:
        first: token ids `(batch, None)`: a ragged tensor (what a tokenizer
            returns), a dense integer tensor, or a list of lists of ints.
            Longer sequences are truncated, so that every output row has
            `sequence_length` positions.
        second: optional, the second sequence of each pair (as many rows).

    Returns:
        A dict of `token_ids`, `segment_ids`, `padding_mask`, int32
        `(batch, sequence_length)`.

    Examples:
    >>> packer = Packer(8, cls_id=101, sep_id=102, pad_id=0)
    >>> out = packer([[7, 8, 9]], [[4, 5, 6, 3]])
    >>> out["token_ids"].numpy().tolist()
    [[101, 7, 8, 102, 4, 5, 6, 102]]
    >>> out["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1, 1, 1]]
    """

    def __init__(
        self,
        sequence_length,
        cls_id,
        sep_id,
        pad_id,
        style="bert",
        truncate="longest_first",
        pad_to_sequence_length=True,
        vocabulary_size=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.style = check_choice("style", style, STYLES)
        self.truncate = check_choice("truncate", truncate, TRUNCATIONS)
        minimum = 4 if style == "roberta" else 3
        self.sequence_length = check_int(
            "sequence_length", sequence_length, minimum, INT32_MAX, " (room for the special tokens of a pair)"
        )
        self.vocabulary_size = check_int("vocabulary_size", vocabulary_size, 1, INT32_MAX, allow_none=True)
        self.cls_id = check_id("cls_id", cls_id, self.vocabulary_size)
        self.sep_id = check_id("sep_id", sep_id, self.vocabulary_size)
        self.pad_id = check_id("pad_id", pad_id, self.vocabulary_size)
        self.pad_to_sequence_length = check_bool("pad_to_sequence_length", pad_to_sequence_length)

    @classmethod
    def from_tokenizer(cls, tokenizer, sequence_length, **kwargs):
        """A packer using `tokenizer`'s special tokens and style."""
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
        ids = tokenizer.special_token_ids
        kwargs.setdefault("style", getattr(tokenizer, "packing_style", "bert"))
        kwargs.setdefault("vocabulary_size", tokenizer.vocabulary_size())
        return cls(sequence_length, ids["cls"], ids["sep"], ids["pad"], **kwargs)

    def __call__(self, first, second=None, **kwargs):
        # Checked before Keras, which would append the whole arguments to
        # the error message.
        first = self._as_batch(first, "first")
        second = None if second is None else self._as_batch(second, "second")
        return super().__call__(first, second, **kwargs)

    def call(self, first, second=None):
        first = self._as_batch(first, "first")
        if second is None:
            return self._pack_single(first)
        second = self._as_batch(second, "second")
        rows, other = first.nrows(), second.nrows()
        if tf.get_static_value(rows) is not None and tf.get_static_value(other) is not None:
            if tf.get_static_value(rows) != tf.get_static_value(other):
                raise ValueError(
                    f"first and second must have one row per pair; got {tf.get_static_value(rows)} "
                    f"and {tf.get_static_value(other)} rows."
                )
        else:
            check = tf.debugging.assert_equal(rows, other, message="first and second must have one row per pair")
            with tf.control_dependencies([check]):
                first = tf.identity(first)
        return self._pack_pair(first, second)

    def _as_batch(self, ids, name):
        """Token ids `(batch, None)` in any accepted form -> ragged int32
        with int64 row splits, checked."""
        batch, single = token_ids(name, ids, self.vocabulary_size)
        if single and isinstance(ids, (list, tuple)) and not ids:
            return batch[:0]  # []: an empty batch
        if single:
            raise ValueError(
                f"{name} must be a batch of token-id sequences (batch, None); got one sequence, "
                f"{abbreviated(ids)}. Wrap it as [{name}] for one example"
                + (", or batch the dataset before mapping the packer." if not tf.executing_eagerly() else ".")
            )
        return batch

    def _pack_single(self, first):
        budget = self.sequence_length - 2
        first = first[:, :budget]
        batch = first.nrows()
        tokens = concat_rows(column(self.cls_id, batch), first, column(self.sep_id, batch))  # (batch, None)
        return self._pad(tokens, tf.zeros_like(tokens))

    def _pack_pair(self, first, second):
        batch = first.nrows()
        specials = 4 if self.style == "roberta" else 3
        keep_first, keep_second = _lengths_after_truncation(
            first.row_lengths(), second.row_lengths(), self.sequence_length - specials, self.truncate
        )
        first, second = truncate_rows(first, keep_first), truncate_rows(second, keep_second)
        cls, sep = column(self.cls_id, batch), column(self.sep_id, batch)
        if self.style == "roberta":
            head = concat_rows(cls, first, sep, sep)
            segments_second = tf.zeros_like
        else:
            head = concat_rows(cls, first, sep)
            segments_second = tf.ones_like
        tail = concat_rows(second, sep)
        tokens = concat_rows(head, tail)
        segments = concat_rows(tf.zeros_like(head), segments_second(tail))
        return self._pad(tokens, segments)

    def _pad(self, tokens, segments):
        # tokens, segments: ragged (batch, None) -> dense (batch, length)
        if self.pad_to_sequence_length:
            shape = [None, self.sequence_length]
        else:
            shape = None
        token_ids = tokens.to_tensor(default_value=self.pad_id, shape=shape)
        segment_ids = segments.to_tensor(default_value=0, shape=shape)
        mask = tf.ones_like(tokens).to_tensor(default_value=0, shape=shape)
        return {
            "token_ids": tf.cast(token_ids, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(mask, tf.int32),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            sequence_length=self.sequence_length, cls_id=self.cls_id, sep_id=self.sep_id,
            pad_id=self.pad_id, style=self.style, truncate=self.truncate,
            pad_to_sequence_length=self.pad_to_sequence_length, vocabulary_size=self.vocabulary_size,
        )
        return config
