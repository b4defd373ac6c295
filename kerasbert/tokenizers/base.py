"""The tokenizer base layer: input checks, batching, vocabulary look-ups."""

import numbers
import os

import numpy as np
import tensorflow as tf

from kerasbert.utils.preprocessing_layer import PreprocessingLayer


def to_string_tensor(inputs, name="inputs"):
    """A bare string, a list/array of strings or a tf.string tensor ->
    (tf.string tensor of rank 1, whether the input was a single string).

    Raises a TypeError naming what was given for anything else (None,
    numbers, nested lists of mixed types, ...).
    """
    if isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
        if inputs.dtype != tf.string:
            raise TypeError(f"{name} must hold strings; got a {inputs.dtype.name} tensor.")
        if inputs.shape.rank == 0:
            return inputs[None], True
        return inputs, False
    if isinstance(inputs, (str, bytes)):
        return tf.constant([inputs]), True
    if isinstance(inputs, np.ndarray):
        if inputs.dtype.kind not in "USO":
            raise TypeError(f"{name} must hold strings; got a numpy array of {inputs.dtype}.")
        items = inputs.tolist()
        flat = np.ravel(inputs).tolist()
    elif isinstance(inputs, (list, tuple)):
        items = flat = list(inputs)
    else:
        raise TypeError(
            f"{name} must be a string, a list of strings or a tf.string tensor; "
            f"got {type(inputs).__name__}: {inputs!r:.80}."
        )
    for item in flat:
        if not isinstance(item, (str, bytes)):
            what = "None" if item is None else f"{type(item).__name__} {item!r:.40}"
            hint = " (numbers are not text)" if isinstance(item, numbers.Number) else ""
            raise TypeError(f"{name} must contain only strings; found {what}{hint}.")
    if not flat:
        return tf.constant([], tf.string), False
    return tf.constant(items, tf.string), False


class Tokenizer(PreprocessingLayer):
    """Base class of kerasbert's tokenizers.

    Tokenizers are Keras preprocessing layers built from TensorFlow ops, so
    they run eagerly, inside `tf.data` pipelines whatever the Keras backend,
    and inside exported SavedModels. Calling one on a batch of strings
    returns a `tf.RaggedTensor` of token ids without special tokens; on a
    single string, a 1-D `tf.Tensor`.

    Subclasses set `self.vocabulary` (a list of tokens indexed by id) and the
    special tokens, and implement `_tokenize(texts) -> (ids, starts, ends)`
    for a rank-1 string tensor.
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
        from kerasbert.presets import preset_directory
        from kerasbert.tokenizers.files import tokenizer_from_directory

        is_directory = isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset)
        directory = os.fspath(preset) if is_directory else preset_directory(preset)
        tokenizer = tokenizer_from_directory(directory)
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
        self.vocabulary = list(vocabulary)
        self._token_to_id = {t: i for i, t in enumerate(self.vocabulary)}
        self._id_to_token = tf.constant(self.vocabulary, tf.string)

    def vocabulary_size(self):
        return len(self.vocabulary)

    def get_vocabulary(self):
        return list(self.vocabulary)

    def token_to_id(self, token):
        if token not in self._token_to_id:
            raise ValueError(f"token={token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    def id_to_token(self, token_id):
        if not 0 <= int(token_id) < len(self.vocabulary):
            raise ValueError(
                f"token_id={token_id} is outside the vocabulary [0, {len(self.vocabulary)})."
            )
        return self.vocabulary[int(token_id)]

    @property
    def special_token_ids(self):
        """{"cls": id, "sep": id, "pad": id, "mask": id, "unk": id}."""
        return {k: self.token_to_id(v) for k, v in self.special_tokens.items()}

    # -- Calls --------------------------------------------------------------

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
            if tf.executing_eagerly():
                ids, starts, ends = self._compiled_tokenize(texts)
            else:  # already inside tf.data or a tf.function
                ids, starts, ends = self._tokenize(texts)
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

    def id_to_token_tensor(self, ids):
        return tf.gather(self._id_to_token, ids)
