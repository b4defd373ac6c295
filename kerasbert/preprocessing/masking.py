"""Masked-language-model masking with static shapes (XLA-friendly)."""

import collections.abc

import keras
import numpy as np

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.checks import (
    INT32_MAX,
    abbreviated,
    check_bool,
    check_id,
    check_id_values,
    check_ids,
    check_int,
    check_number,
    is_eager,
)
from kerasbert.utils.optional import tf
from kerasbert.utils.preprocessing_layer import PreprocessingLayer


def _dense_integers(name, values, allow_bool=False):
    """A (batch, seq) array of integers (or booleans where allowed) in any
    array form -> a tf.Tensor of rank 2 (its values not yet cast)."""
    kinds = "integers or booleans" if allow_bool else "integer token ids"
    if isinstance(values, tf.RaggedTensor):
        raise TypeError(f"{name} must be dense (batch, sequence), as a Packer gives it; got {abbreviated(values)}.")
    if not isinstance(values, tf.Tensor):
        try:
            array = np.asarray(values)
            array = array.astype(np.int64) if array.dtype == object or array.size == 0 else array
        except (TypeError, ValueError, OverflowError):
            raise TypeError(
                f"{name} must be a (batch, sequence) array of {kinds}, rows of one length; got {abbreviated(values)}."
            ) from None
        if array.dtype.kind not in ("iub" if allow_bool else "iu"):
            raise TypeError(f"{name} must hold {kinds}; got {abbreviated(array)}.")
        values = tf.constant(array)
    if not (values.dtype.is_integer or (allow_bool and values.dtype == tf.bool)):
        raise TypeError(f"{name} must hold {kinds}; got {abbreviated(values)}.")
    if values.shape.rank not in (2, None):
        raise ValueError(f"{name} must be a batch of sequences (batch, sequence); got {abbreviated(values)}.")
    return values


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLMMasker(PreprocessingLayer):
    """Chooses masked-LM targets in packed inputs and corrupts them.

    From the real (non-padding, non-special) tokens of each row (real: a
    nonzero `padding_mask`, 1 or the document id of a packed row), selects
    `mask_rate` of them (at least one, at most `max_predictions`), replaces
    80% of the selected with `mask_id`, 10% with a random token, and keeps
    10% (BERT's recipe; the rates are arguments). Each call draws a new
    selection, so mapping the masker over a `tf.data` pipeline masks every
    epoch differently (RoBERTa's dynamic masking).

    Calling it with `seed=` (two integers) instead makes every random draw
    a pure function of the inputs and that seed (stateless random ops): a
    pipeline that masks batch `k` with `seed=[base_seed, k]` re-creates
    exactly the same masks when it resumes at batch `k`.

    With `whole_word=True`, sub-words that continue a word (ids listed in
    `continuation_ids`, e.g. WordPiece's "##" pieces) are masked together
    with the word they belong to; words are added while they fit in the
    row's budget. A word never spans two documents of a packed row.

    Outputs have fixed shapes: `mask_positions`, `mask_ids` (the original
    ids) and `mask_weights` (1.0 for real targets, 0.0 for padding), each
    `(batch, max_predictions)`, so that train steps never recompile.

    Args:
        vocabulary_size: random replacements are drawn from `[0, vocabulary_size)`
            minus `unselectable_ids`.
        mask_id: the mask token id.
        unselectable_ids: ids never selected (the special tokens).
        special_ids: ids never drawn as random replacements; defaults to
            `unselectable_ids` (`from_tokenizer` adds the unknown token, which
            stays selectable where it occurs in the text).
        mask_rate: fraction of real tokens selected.
        max_predictions: the fixed number of target slots per row.
        mask_token_rate: the fraction of the selected tokens replaced by
            `mask_id`.
        random_token_rate: the fraction of the selected tokens replaced by
            a random token.
        whole_word: select whole words.
        continuation_ids: ids that continue the previous token's word.
        seed: an optional integer seed for a reproducible sequence of masks
            (calls without a `seed=` argument).

    Call arguments:
        inputs: a dict of `token_ids` and `padding_mask` (batch, seq), dense
            integer arrays or tensors (a boolean mask too); other entries
            (e.g. `segment_ids`) pass through. Eager ids must be in
            `[0, vocabulary_size)` and masks >= 0.
        seed: optional, an int tensor or array of shape `(2,)`: the masks
            are then a pure function of `(inputs, seed)`, and the layer's own
            random state is neither used nor advanced.

    Examples:
    >>> masker = MaskedLMMasker(vocabulary_size=1000, mask_id=4,
    ...                         unselectable_ids=[0, 2, 3], max_predictions=4)
    >>> out = masker({"token_ids": [[2, 10, 11, 12, 13, 3, 0]],
    ...               "padding_mask": [[1, 1, 1, 1, 1, 1, 0]]})
    >>> sorted(out)
    ['mask_ids', 'mask_positions', 'mask_weights', 'padding_mask', 'token_ids']
    >>> tuple(out["mask_positions"].shape)
    (1, 4)

    Stateless: the same seed, the same masks.

    >>> inputs = {"token_ids": [[2, 10, 11, 12, 13, 14, 15, 16, 3]],
    ...           "padding_mask": [[1, 1, 1, 1, 1, 1, 1, 1, 1]]}
    >>> a = masker(inputs, seed=[7, 0])
    >>> b = masker(inputs, seed=[7, 0])
    >>> bool((a["mask_positions"] == b["mask_positions"]).numpy().all())
    True
    >>> bool((a["token_ids"] == b["token_ids"]).numpy().all())
    True
    """

    def __init__(
        self,
        vocabulary_size,
        mask_id,
        unselectable_ids=(),
        mask_rate=0.15,
        max_predictions=20,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        whole_word=False,
        continuation_ids=None,
        special_ids=None,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = check_int("vocabulary_size", vocabulary_size, 1, INT32_MAX)
        self.mask_id = check_id("mask_id", mask_id, self.vocabulary_size)
        self.unselectable_ids = check_ids("unselectable_ids", unselectable_ids, self.vocabulary_size)
        self.mask_rate = check_number("mask_rate", mask_rate, 0.0, 1.0)
        self.mask_token_rate = check_number("mask_token_rate", mask_token_rate, 0.0, 1.0)
        self.random_token_rate = check_number("random_token_rate", random_token_rate, 0.0, 1.0)
        if mask_token_rate + random_token_rate > 1.0:
            raise ValueError(
                f"mask_token_rate + random_token_rate must be <= 1; got "
                f"{mask_token_rate} + {random_token_rate}."
            )
        self.max_predictions = check_int("max_predictions", max_predictions, 1, INT32_MAX)
        self.whole_word = check_bool("whole_word", whole_word)
        if whole_word and continuation_ids is None:
            raise ValueError("whole_word=True needs continuation_ids (e.g. the ids of '##' pieces).")
        self.continuation_ids = (
            None if continuation_ids is None else check_ids("continuation_ids", continuation_ids, self.vocabulary_size)
        )
        self.special_ids = sorted(set(
            self.unselectable_ids if special_ids is None else check_ids("special_ids", special_ids, self.vocabulary_size)
        ))
        if self.random_token_rate > 0 and len(self.special_ids) >= self.vocabulary_size:
            raise ValueError(
                f"special_ids cover the whole vocabulary of {self.vocabulary_size}, so random_token_rate="
                f"{random_token_rate} has no token to draw; leave some ids out or set random_token_rate=0."
            )
        self.seed = check_int("seed", seed, 0, 2**63 - 1, allow_none=True)
        # A generator keeps its state across dataset iterators, so every
        # epoch masks anew (a plain random op would replay its sequence).
        self._generator = (
            tf.random.Generator.from_seed(seed) if seed is not None
            else tf.random.Generator.from_non_deterministic_state()
        )

    @classmethod
    def from_tokenizer(cls, tokenizer, **kwargs):
        """A masker using `tokenizer`'s mask token, specials and, for whole
        words, its continuation pieces."""
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {abbreviated(tokenizer)}.")
        ids = tokenizer.special_token_ids
        kwargs.setdefault("unselectable_ids", sorted(set(ids.values()) - {ids["unk"]}))
        kwargs.setdefault("special_ids", sorted(set(ids.values())))
        if kwargs.get("whole_word") and "continuation_ids" not in kwargs:
            kwargs["continuation_ids"] = tokenizer.continuation_ids()
        return cls(tokenizer.vocabulary_size(), ids["mask"], **kwargs)

    def _draws(self, seed):
        """`uniform(shape)` functions for the three random draws of a call:
        selection scores, the 80/10/10 choice, the random replacements."""
        if seed is None:
            return [self._generator.uniform] * 3
        try:
            seed = tf.convert_to_tensor(seed)
        except (TypeError, ValueError):
            raise ValueError(f"seed must be two integers (shape (2,)), e.g. [base_seed, step]; got {abbreviated(seed)}.") from None
        if not seed.dtype.is_integer or (seed.shape.rank is not None and seed.shape != [2]):
            raise ValueError(
                f"seed must be two integers (shape (2,)), e.g. [base_seed, step]; "
                f"got a {seed.dtype.name} tensor of shape {seed.shape}."
            )
        # One independent sub-seed per draw, each a function of `seed` only.
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=3)  # (3, 2)
        return [
            lambda shape, s=seeds[i]: tf.random.stateless_uniform(shape, seed=s)
            for i in range(3)
        ]

    def __call__(self, inputs, seed=None, **kwargs):
        # Checked before Keras, which would append the whole arguments to
        # the error message.
        token_ids, padding_mask = self._checked_inputs(inputs)
        return super().__call__({**inputs, "token_ids": token_ids, "padding_mask": padding_mask}, seed=seed, **kwargs)

    def call(self, inputs, seed=None):
        score_uniform, choice_uniform, token_uniform = self._draws(seed)
        token_ids, padding_mask = self._checked_inputs(inputs)  # (batch, seq) int32 each
        shape = tf.shape(token_ids)
        selectable = tf.not_equal(padding_mask, 0)
        for special in self.unselectable_ids:
            selectable &= tf.not_equal(token_ids, special)
        count = tf.reduce_sum(tf.cast(selectable, tf.float32), axis=1)
        budget = tf.cast(tf.round(count * self.mask_rate), tf.int32)
        budget = tf.minimum(tf.maximum(budget, 1), self.max_predictions)
        budget = tf.minimum(budget, tf.cast(count, tf.int32))  # (batch,)

        score = score_uniform(tf.shape(token_ids, out_type=tf.int32))
        if self.whole_word:
            selected = self._select_whole_words(token_ids, padding_mask, selectable, budget, score)
        else:
            score = tf.where(selectable, score, -1.0)
            rank = tf.argsort(tf.argsort(score, axis=1, direction="DESCENDING"), axis=1)
            selected = selectable & (rank < budget[:, None])

        # Positions of the selected tokens, in order, padded to max_predictions.
        position = tf.broadcast_to(tf.range(shape[1])[None, :], shape)
        order = tf.argsort(tf.where(selected, position, shape[1] + position), axis=1)
        positions = tf.gather(order, tf.range(tf.minimum(self.max_predictions, shape[1])), axis=1)
        weights = tf.gather(tf.cast(selected, tf.float32), positions, batch_dims=1)
        extra = self.max_predictions - tf.shape(positions)[1]
        positions = tf.pad(positions, [[0, 0], [0, extra]])
        weights = tf.pad(weights, [[0, 0], [0, extra]])
        positions = tf.where(weights > 0, positions, 0)
        # (A padded column: with no positions at all, index 0 is still valid.)
        mask_ids = tf.where(weights > 0, tf.gather(tf.pad(token_ids, [[0, 0], [0, 1]]), positions, batch_dims=1), 0)

        # 80 / 10 / 10: mask, random token, keep.
        choice = choice_uniform(tf.shape(token_ids, out_type=tf.int32))
        use_mask = selected & (choice < self.mask_token_rate)
        use_random = selected & (choice >= self.mask_token_rate) & (
            choice < self.mask_token_rate + self.random_token_rate
        )
        corrupted = tf.where(use_mask, self.mask_id, token_ids)
        corrupted = tf.where(use_random, self._random_tokens(shape, token_uniform), corrupted)
        outputs = dict(inputs)
        outputs.update(
            token_ids=corrupted,
            mask_positions=positions,
            mask_ids=mask_ids,
            mask_weights=weights,
        )
        return outputs

    def _checked_inputs(self, inputs):
        """inputs -> token_ids and padding_mask, int32 (batch, seq) each,
        checked: dense integer (or boolean mask) arrays of one shape; eager
        ids in the vocabulary and masks >= 0."""
        if not isinstance(inputs, collections.abc.Mapping):
            raise TypeError(
                f"inputs must be a dict of token_ids and padding_mask (a Packer's output); got {abbreviated(inputs)}."
            )
        missing = [key for key in ("token_ids", "padding_mask") if key not in inputs]
        if missing:
            raise ValueError(f"inputs lacks {missing}; it needs token_ids and padding_mask, got keys {sorted(inputs)}.")
        token_ids = _dense_integers("token_ids", inputs["token_ids"])
        padding_mask = tf.cast(_dense_integers("padding_mask", inputs["padding_mask"], allow_bool=True), tf.int32)
        if not token_ids.shape.is_compatible_with(padding_mask.shape):
            raise ValueError(
                f"token_ids and padding_mask must have one shape; got {tuple(token_ids.shape)} and "
                f"{tuple(padding_mask.shape)}."
            )
        if is_eager(token_ids) and is_eager(padding_mask):
            if token_ids.shape != padding_mask.shape:
                raise ValueError(
                    f"token_ids and padding_mask must have one shape; got {tuple(token_ids.shape)} and "
                    f"{tuple(padding_mask.shape)}."
                )
            check_id_values("token_ids", token_ids, self.vocabulary_size)
            if tf.reduce_any(padding_mask < 0):
                raise ValueError(
                    "padding_mask must be 0 at padding and 1 (or a document id >= 1) at real tokens; "
                    f"got negative values: {abbreviated(padding_mask.numpy().tolist())}."
                )
        return tf.cast(token_ids, tf.int32), padding_mask

    def _random_tokens(self, shape, uniform):
        # Uniform over the vocabulary without the special tokens.
        allowed = tf.constant(
            sorted(set(range(self.vocabulary_size)) - set(self.special_ids)), tf.int32
        )
        index = tf.cast(uniform(shape) * tf.cast(tf.size(allowed), tf.float32), tf.int32)
        return tf.gather(allowed, tf.minimum(index, tf.size(allowed) - 1))

    def _select_whole_words(self, token_ids, padding_mask, selectable, budget, score):
        # A dense flag per id: one gather, however many continuation pieces
        # (byte-level BPE has ~18,000).
        ids = self.continuation_ids or []
        flags = np.zeros(max(ids, default=-1) + 2, bool)
        flags[ids] = True
        last = len(flags) - 1  # (len() of a tensor fails inside tf.data and tf.function)
        flags = tf.constant(flags)
        continues = tf.gather(flags, tf.clip_by_value(token_ids, 0, last))  # (batch, seq)
        previous_selectable = tf.concat([tf.zeros_like(selectable[:, :1]), selectable[:, :-1]], 1)
        # A word never continues across documents packed in one row.
        previous_document = tf.concat([tf.zeros_like(padding_mask[:, :1]), padding_mask[:, :-1]], 1)
        previous_selectable &= tf.equal(previous_document, padding_mask)
        starts = selectable & ~(continues & previous_selectable)
        word = tf.where(selectable, tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, -1)  # (batch, seq)
        # Words in random order (by their first token's score).
        order = tf.argsort(tf.where(starts, score, -1.0), axis=1, direction="DESCENDING")
        ranked_word = tf.where(tf.gather(starts, order, batch_dims=1), tf.gather(word, order, batch_dims=1), -1)
        member = (word[:, None, :] == ranked_word[:, :, None]) & (ranked_word[:, :, None] >= 0)
        length = tf.reduce_sum(tf.cast(member, tf.int32), axis=2)  # (batch, rank)

        # As BERT's data generator: take each word in turn if it still fits.
        def take(used, word_length):
            fits = (word_length > 0) & (used + word_length <= budget)
            return used + tf.where(fits, word_length, 0)

        used = tf.scan(take, tf.transpose(length), initializer=tf.zeros_like(budget))  # (rank, batch)
        previous = tf.concat([tf.zeros_like(used[:1]), used[:-1]], 0)
        taken = tf.transpose(used > previous)  # (batch, rank)
        return tf.reduce_any(member & taken[:, :, None], axis=1) & selectable

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary_size=self.vocabulary_size, mask_id=self.mask_id,
            unselectable_ids=self.unselectable_ids, mask_rate=self.mask_rate,
            max_predictions=self.max_predictions, mask_token_rate=self.mask_token_rate,
            random_token_rate=self.random_token_rate, whole_word=self.whole_word,
            continuation_ids=self.continuation_ids, special_ids=self.special_ids, seed=self.seed,
        )
        return config
