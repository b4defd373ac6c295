"""The post-LayerNorm transformer block of BERT and its relatives."""

import keras

from kerasbert.layers.activations import get_activation
from kerasbert.layers.attention import SelfAttention, gather_rows
from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.initializers import clone_initializer
from kerasbert.layers.sublayer import call_sublayer


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerBlock(keras.layers.Layer):
    """Self-attention then a feed-forward network, each followed by
    dropout, a residual connection and LayerNorm (post-LN, as in BERT).

    Called with `query_positions (batch, queries)`, the block returns its
    output at those rows only, `(batch, queries, hidden)`: every row is
    still a key and value of the attention, but the queries, the
    feed-forward network and the LayerNorms run on the chosen rows alone
    (see `SelfAttention`).

    Args:
        num_heads: number of attention heads.
        hidden_dim: model width.
        intermediate_dim: width of the feed-forward hidden layer.
        dropout: dropout on the attention and feed-forward outputs.
        attention_dropout: dropout on the attention probabilities.
        activation: feed-forward activation name (see `ACTIVATIONS`).
        layer_norm_epsilon: LayerNorm epsilon.
        kernel_initializer: initializer for all kernels.

    Examples:
    >>> import numpy as np
    >>> block = TransformerBlock(num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> x = np.random.rand(3, 5, 8).astype("float32")
    >>> tuple(block(x, attention_mask=np.ones((3, 1, 1, 5), bool)).shape)
    (3, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.0,
        attention_dropout=0.0,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

        policy = self.dtype_policy
        self.attention = SelfAttention(
            num_heads,
            hidden_dim,
            dropout=attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=policy,
            name="attention",
        )
        self.attention_output_dropout = Dropout(
            dropout, dtype=policy, name="attention_output_dropout"
        )
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="attention_layer_norm"
        )
        self.intermediate_dense = Dense(
            intermediate_dim,
            activation=get_activation(activation),
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=policy,
            name="intermediate_dense",
        )
        self.output_dense = Dense(
            hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=policy,
            name="output_dense",
        )
        self.output_dropout = Dropout(
            dropout, dtype=policy, name="output_dropout"
        )
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=policy, name="output_layer_norm"
        )

    def build(self, input_shape):
        # input_shape: (batch, seq, hidden)
        self.attention.build(input_shape)
        self.attention_layer_norm.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))
        self.output_layer_norm.build(input_shape)
        self.built = True

    def call(self, inputs, attention_mask=None, training=None, query_positions=None):
        attended = call_sublayer(
            self, self.attention, inputs,
            attention_mask=attention_mask, training=training, query_positions=query_positions,
        )  # (batch, queries, hidden); queries = seq without query_positions
        if query_positions is not None:
            inputs = gather_rows(inputs, query_positions)  # the residual at the query rows
        attended = call_sublayer(self, self.attention_output_dropout, attended, training=training)
        hidden = call_sublayer(self, self.attention_layer_norm, inputs + attended)  # (batch, queries, hidden)
        ffn = call_sublayer(self, self.intermediate_dense, hidden)  # (batch, queries, intermediate)
        ffn = call_sublayer(self, self.output_dense, ffn)  # (batch, queries, hidden)
        ffn = call_sublayer(self, self.output_dropout, ffn, training=training)
        return call_sublayer(self, self.output_layer_norm, hidden + ffn)  # (batch, queries, hidden)

    def compute_output_shape(self, inputs_shape, query_positions_shape=None):
        return self.attention.compute_output_shape(inputs_shape, query_positions_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
