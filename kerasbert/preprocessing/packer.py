"""Packing token ids into encoder inputs: special tokens, truncation, padding."""

import keras
import tensorflow as tf

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.preprocessing_layer import PreprocessingLayer

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
        cls_id, sep_id, pad_id: the special token ids.
        style: "bert" or "roberta".
        truncate: "longest_first" or "round_robin".
        pad_to_sequence_length: `False` pads each batch only to its longest
            row (dynamic padding) instead of `sequence_length`.

    Call arguments:
        first: token ids `(batch, None)`, ragged (what a tokenizer returns).
        second: optional, the second sequence of each pair.

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
        **kwargs,
    ):
        super().__init__(**kwargs)
        if style not in STYLES:
            raise ValueError(f"style={style!r}; expected one of {STYLES}.")
        if truncate not in TRUNCATIONS:
            raise ValueError(f"truncate={truncate!r}; expected one of {TRUNCATIONS}.")
        minimum = 4 if style == "roberta" else 3
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int) or sequence_length < minimum:
            raise ValueError(
                f"sequence_length must be an integer >= {minimum} (room for the "
                f"special tokens of a pair); got {sequence_length!r}."
            )
        self.sequence_length = sequence_length
        self.cls_id, self.sep_id, self.pad_id = cls_id, sep_id, pad_id
        self.style, self.truncate = style, truncate
        self.pad_to_sequence_length = pad_to_sequence_length

    @classmethod
    def from_tokenizer(cls, tokenizer, sequence_length, **kwargs):
        """A packer using `tokenizer`'s special tokens and style."""
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
        ids = tokenizer.special_token_ids
        kwargs.setdefault("style", getattr(tokenizer, "packing_style", "bert"))
        return cls(sequence_length, ids["cls"], ids["sep"], ids["pad"], **kwargs)

    def call(self, first, second=None):
        first = _as_ragged(first, "first")
        if second is None:
            return self._pack_single(first)
        second = _as_ragged(second, "second")
        return self._pack_pair(first, second)

    def _pack_single(self, first):
        budget = self.sequence_length - 2
        first = first[:, :budget]
        batch = first.nrows()
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        tokens = tf.concat([cls, first, sep], axis=1)  # (batch, None)
        return self._pad(tokens, tf.zeros_like(tokens))

    def _pack_pair(self, first, second):
        batch = first.nrows()
        specials = 4 if self.style == "roberta" else 3
        keep_first, keep_second = _lengths_after_truncation(
            first.row_lengths(), second.row_lengths(), self.sequence_length - specials, self.truncate
        )
        first = tf.ragged.boolean_mask(first, tf.ragged.range(first.row_lengths()) < keep_first[:, None])
        second = tf.ragged.boolean_mask(second, tf.ragged.range(second.row_lengths()) < keep_second[:, None])
        cls = tf.fill([batch, 1], self.cls_id)
        sep = tf.fill([batch, 1], self.sep_id)
        if self.style == "roberta":
            head = tf.concat([cls, first, sep, sep], axis=1)
            segments_second = tf.zeros_like
        else:
            head = tf.concat([cls, first, sep], axis=1)
            segments_second = tf.ones_like
        tail = tf.concat([second, sep], axis=1)
        tokens = tf.concat([head, tail], axis=1)
        segments = tf.concat([tf.zeros_like(head), segments_second(tail)], axis=1)
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
            pad_to_sequence_length=self.pad_to_sequence_length,
        )
        return config


def _as_ragged(ids, name):
    if isinstance(ids, tf.RaggedTensor):
        ragged = ids
    elif isinstance(ids, tf.Tensor):
        if ids.shape.rank != 2:
            raise ValueError(f"{name} must be a batch of id sequences (rank 2); got shape {ids.shape}.")
        ragged = tf.RaggedTensor.from_tensor(ids)
    else:
        try:
            ragged = tf.ragged.constant(ids, dtype=tf.int32)
        except (ValueError, TypeError) as e:
            raise TypeError(f"{name} must be a batch of integer id sequences; got {ids!r:.80} ({e}).") from None
        if ragged.shape.rank != 2:
            raise ValueError(f"{name} must be a batch of id sequences (rank 2); got rank {ragged.shape.rank}.")
    if not ragged.dtype.is_integer:
        raise TypeError(f"{name} must hold integer token ids; got {ragged.dtype.name}.")
    # Tokenizers give int32 or int64 row splits depending on the path; one dtype here.
    return tf.cast(ragged, tf.int32).with_row_splits_dtype(tf.int64)
