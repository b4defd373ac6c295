"""Raw strings -> model inputs: a tokenizer and a packer (and a masker)."""

import keras

from kerasbert.preprocessing.masking import MaskedLMMasker
from kerasbert.preprocessing.packer import Packer
from kerasbert.tokenizers.base import Tokenizer, to_string_tensor
from kerasbert.utils.optional import tf
from kerasbert.utils.preprocessing_layer import PreprocessingLayer


class TokenizingPreprocessor(PreprocessingLayer):
    """The base of the preprocessors built on a tokenizer: `from_preset`,
    and a config holding the serialised tokenizer plus `options()`."""

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """The preprocessor for a preset's tokenizer (see `Tokenizer.from_preset`)."""
        return cls(Tokenizer.from_preset(preset), **kwargs)

    def options(self):
        """The constructor arguments besides the tokenizer."""
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update(tokenizer=keras.saving.serialize_keras_object(self.tokenizer), **self.options())
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="kerasbert")
class TextPreprocessor(TokenizingPreprocessor):
    """Turns raw text, single sentences or pairs, into encoder inputs.

    Call it on a batch of strings, or on a tuple `(first, second)` of two
    batches for sentence pairs. It also accepts `(x, y)` and
    `(x, y, sample_weight)` so it can be mapped over a `tf.data` dataset of
    labelled examples; labels pass through untouched.

    Args:
        tokenizer: a `kerasbert.Tokenizer`.
        sequence_length: the longest packed sequence, special tokens included.
        truncate: "longest_first" (transformers' rule) or "round_robin".
        pad_to_sequence_length: `False` pads each batch to its longest row.

    Examples:
    >>> import kerasbert
    >>> preprocessor = kerasbert.preprocessing.TextPreprocessor.from_preset(
    ...     "all_minilm_l6_v2", sequence_length=8)
    >>> preprocessor(["Hello, world!"])["token_ids"].numpy().tolist()
    [[101, 7592, 1010, 2088, 999, 102, 0, 0]]
    """

    def __init__(self, tokenizer, sequence_length=512, truncate="longest_first",
                 pad_to_sequence_length=True, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
        self.tokenizer = tokenizer
        self.packer = Packer.from_tokenizer(
            tokenizer, sequence_length, truncate=truncate, pad_to_sequence_length=pad_to_sequence_length
        )

    @property
    def sequence_length(self):
        return self.packer.sequence_length

    @staticmethod
    def _batch(texts, name):
        """A batch of strings -> tf.string (batch,), checked."""
        texts, single = to_string_tensor(texts, name)
        if single:
            raise ValueError(
                f"{name} must be a batch (a list) of strings, not a single string; "
                f"wrap it: [{name}]."
            )
        return texts

    def _texts(self, x):
        """x -> a string batch, or a pair of them, checked."""
        if not isinstance(x, tuple):
            return self._batch(x, "x")
        if len(x) != 2:
            raise ValueError(f"x must be a batch of strings or a pair (first, second); got a {len(x)}-tuple.")
        first, second = self._batch(x[0], "first"), self._batch(x[1], "second")
        if tf.executing_eagerly() and first.shape[0] is not None and first.shape[0] != second.shape[0]:
            raise ValueError(
                f"x=(first, second): the two sides of the pairs differ in length: {first.shape[0]} and "
                f"{second.shape[0]}; give one second text per first text."
            )
        return first, second

    def tokenize_examples(self, x):
        """The first, tokenizing half of `call`: raw text -> ragged ids
        `(batch, None)`, a pair of them for sentence pairs. Tasks run it
        once, eagerly, on in-memory examples and map `pack_examples` over
        the result in `tf.data`."""
        x = self._texts(x)
        return tuple(map(self.tokenizer, x)) if isinstance(x, tuple) else self.tokenizer(x)

    def pack_examples(self, ids, y=None, sample_weight=None):
        """The second half of `call`: ids from `tokenize_examples` -> encoder
        inputs (and the label and weight, passed through)."""
        inputs = self.packer(*ids) if isinstance(ids, tuple) else self.packer(ids)
        return keras.utils.pack_x_y_sample_weight(inputs, y, sample_weight)

    def __call__(self, x, y=None, sample_weight=None, **kwargs):
        # Checked before Keras, which would append all the text to the
        # error message.
        return super().__call__(self._texts(x), y, sample_weight, **kwargs)

    def call(self, x, y=None, sample_weight=None):
        return self.pack_examples(self.tokenize_examples(x), y, sample_weight)

    def options(self):
        return {"sequence_length": self.packer.sequence_length, "truncate": self.packer.truncate,
                "pad_to_sequence_length": self.packer.pad_to_sequence_length}


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLMPreprocessor(TextPreprocessor):
    """Raw text -> masked-LM training examples: packed, corrupted inputs
    with `mask_positions`, and `(mask_ids, mask_weights)` as label and
    sample weight, ready for `fit`. A new mask is drawn at every call.

    Args:
        tokenizer: as `TextPreprocessor`.
        sequence_length: as `TextPreprocessor`.
        truncate: as `TextPreprocessor`.
        pad_to_sequence_length: as `TextPreprocessor`.
        **masker_kwargs: `MaskedLMMasker` arguments (`mask_rate`,
            `max_predictions`, `whole_word`, `seed`, ...).
    """

    def __init__(self, tokenizer, sequence_length=512, truncate="longest_first",
                 pad_to_sequence_length=True, **masker_kwargs):
        layer_kwargs = {k: masker_kwargs.pop(k) for k in ("name", "dtype", "trainable") if k in masker_kwargs}
        super().__init__(tokenizer, sequence_length, truncate, pad_to_sequence_length, **layer_kwargs)
        self.masker = MaskedLMMasker.from_tokenizer(tokenizer, **masker_kwargs)

    def call(self, x, y=None, sample_weight=None):
        inputs = super().call(x)
        masked = self.masker(inputs)
        features = {k: masked[k] for k in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
        return features, masked["mask_ids"], masked["mask_weights"]

    def get_config(self):
        config = super().get_config()
        masker = self.masker.get_config()
        config.update({k: masker[k] for k in _MASKER_OPTIONS})
        return config


_MASKER_OPTIONS = ("mask_rate", "max_predictions", "mask_token_rate", "random_token_rate", "whole_word", "seed")
