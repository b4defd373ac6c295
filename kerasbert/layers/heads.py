"""Pretraining heads: masked-LM logits at the masked positions only, with the
decoder tied to the token embeddings."""

import keras
from keras import ops

from kerasbert.layers.activations import get_activation
from kerasbert.layers.attention import gather_rows
from kerasbert.layers.dense import Dense
from kerasbert.layers.initializers import clone_initializer
from kerasbert.layers.quantization import embedding_table


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLMHead(keras.layers.Layer):
    """Vocabulary logits at the masked positions of a sequence output.

    Gathers the hidden vectors at `mask_positions` first, so the transform
    and the vocabulary projection run on `num_masked` vectors per row rather
    than on the whole sequence (15% of it in BERT's recipe). Then, as in every
    model of the family: a dense layer to the embedding width, the encoder's
    activation, LayerNorm, and a decoder that multiplies by the transposed
    token-embedding table (tied: the head owns only its transform and an
    output bias).

    Logits are float32 whatever the dtype policy, so that the softmax
    cross-entropy over a large vocabulary is computed in full precision.

    Args:
        token_embedding: the encoder's token `keras.layers.Embedding`; its
            table is the decoder (not serialized: a task passes it again
            when it is rebuilt from its config).
        activation: the transform's activation name (see `ACTIVATIONS`).
        layer_norm_epsilon: the transform's LayerNorm epsilon.
        kernel_initializer: initializer of the transform's kernel.
        use_bias: whether the transform's dense layer and LayerNorm have
            biases (ModernBERT's have none); the output bias is always there.

    Call arguments:
        sequence_output: `(batch, seq, hidden_dim)`.
        mask_positions: `(batch, num_masked)` integer positions, or None
            when `sequence_output` holds the masked positions' vectors
            already (`(batch, num_masked, hidden_dim)`, from
            `Encoder.outputs_at`).

    Examples:
    >>> import numpy as np
    >>> embedding = keras.layers.Embedding(50, 8)
    >>> head = MaskedLMHead(embedding)
    >>> logits = head(np.random.rand(2, 6, 16).astype("float32"),
    ...               np.array([[1, 4], [0, 0]]))
    >>> tuple(logits.shape)
    (2, 2, 50)
    """

    def __init__(
        self,
        token_embedding,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        use_bias=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_embedding = token_embedding
        self.use_bias = use_bias
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self._activation_fn = get_activation(activation)
        self.dense = Dense(
            token_embedding.output_dim,
            use_bias=use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=use_bias, dtype=self.dtype_policy, name="layer_norm"
        )

    def build(self, sequence_output_shape, mask_positions_shape=None):
        if not self.token_embedding.built:  # a table not used by anything else yet
            self.token_embedding.build((None,))
        self.dense.build(sequence_output_shape)
        self.layer_norm.build((*sequence_output_shape[:-1], self.token_embedding.output_dim))
        self.bias = self.add_weight(
            name="bias", shape=(self.token_embedding.input_dim,), initializer="zeros"
        )

    def call(self, sequence_output, mask_positions=None):
        x = sequence_output  # None: already (batch, num_masked, hidden)
        if mask_positions is not None:
            # Gather first: (batch, num_masked, hidden), never (batch, seq, vocab).
            x = gather_rows(sequence_output, mask_positions)
        x = self.layer_norm(self._activation_fn(self.dense(x)))  # (batch, num_masked, width)
        table = embedding_table(self.token_embedding, self.compute_dtype)  # (vocab, width)
        logits = ops.matmul(x, ops.transpose(table))  # (batch, num_masked, vocab)
        return ops.cast(logits, "float32") + ops.cast(self.bias, "float32")

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape=None):
        rows = sequence_output_shape[:-1] if mask_positions_shape is None else mask_positions_shape
        return (*rows, self.token_embedding.input_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            use_bias=self.use_bias,
        )
        return config
