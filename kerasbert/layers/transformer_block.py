"""The transformer block of BERT and its relatives: post- or pre-LayerNorm,
a plain or gated feed-forward network, with or without biases."""

import keras
from keras import ops

from kerasbert.layers.activations import get_activation
from kerasbert.layers.attention import SelfAttention, gather_rows
from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.initializers import clone_initializer
from kerasbert.layers.sublayer import call_sublayer
from kerasbert.utils.checks import check_choice

NORMALIZATIONS = ("post", "pre")
FEEDFORWARDS = ("plain", "gated")


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerBlock(keras.layers.Layer):
    """Self-attention then a feed-forward network, each with dropout and a
    residual connection.

    - `normalization="post"` (BERT): LayerNorm after each residual sum.
    - `normalization="pre"` (ModernBERT): LayerNorm on the input of the
      attention and of the feed-forward network, the residual sums left
      unnormalized (the encoder adds a final LayerNorm). With
      `attention_norm=False` the attention takes the block's input as it is
      (the first block, whose input is the embeddings' LayerNorm output).
    - `feedforward="plain"`: `activation(x W1) W2`; `"gated"` (GeGLU):
      `x W1` is `2 * intermediate_dim` wide, its halves `a, g` give
      `(activation(a) * g) W2`.
    - `use_bias=False`: no biases in the dense layers or LayerNorms.

    Called with `query_positions (batch, queries)`, the block returns its
    output at those rows only, `(batch, queries, hidden)`: every row is
    still a key and value of the attention, but the queries, the
    feed-forward network and the LayerNorms run on the chosen rows alone
    (see `SelfAttention`). `rotary=(cos, sin)` turns queries and keys
    (RoPE); `relative=(table, index)` makes the attention DeBERTa's
    disentangled one; `local_window` with `padding_mask` a sliding window
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
        normalization: "post" or "pre".
        feedforward: "plain" or "gated".
        use_bias: whether dense layers and LayerNorms have biases.
        attention_norm: whether a "pre" block normalizes the attention's
            input.

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
        normalization="post",
        feedforward="plain",
        use_bias=True,
        attention_norm=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_choice("normalization", normalization, NORMALIZATIONS)
        check_choice("feedforward", feedforward, FEEDFORWARDS)
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.normalization = normalization
        self.feedforward = feedforward
        self.use_bias = use_bias
        self.attention_norm = attention_norm

        policy = self.dtype_policy
        gated = feedforward == "gated"

        def dense(units, name, activation=None):
            return Dense(units, activation=activation, use_bias=use_bias,
                         kernel_initializer=clone_initializer(self.kernel_initializer), dtype=policy, name=name)

        def layer_norm(name):
            return keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, center=use_bias, dtype=policy,
                                                   name=name)

        self.attention = SelfAttention(
            num_heads,
            hidden_dim,
            dropout=attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            use_bias=use_bias,
            dtype=policy,
            name="attention",
        )
        self.attention_output_dropout = Dropout(
            dropout, dtype=policy, name="attention_output_dropout"
        )
        # "post": after the attention's residual sum; "pre": on its input.
        self.attention_layer_norm = None
        if normalization == "post" or attention_norm:
            self.attention_layer_norm = layer_norm("attention_layer_norm")
        self.intermediate_dense = dense(
            2 * intermediate_dim if gated else intermediate_dim, "intermediate_dense",
            activation=None if gated else get_activation(activation),
        )
        self._gate_activation = get_activation(activation) if gated else None
        self.output_dense = dense(hidden_dim, "output_dense")
        self.output_dropout = Dropout(
            dropout, dtype=policy, name="output_dropout"
        )
        # "post": after the feed-forward residual sum; "pre": on its input.
        self.output_layer_norm = layer_norm("output_layer_norm")

    def build(self, input_shape):
        # input_shape: (batch, seq, hidden)
        self.attention.build(input_shape)
        if self.attention_layer_norm is not None:
            self.attention_layer_norm.build(input_shape)
        self.intermediate_dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.intermediate_dim))
        self.output_layer_norm.build(input_shape)
        self.built = True

    def call(self, inputs, attention_mask=None, training=None, query_positions=None, rotary=None, relative=None,
             local_window=None, padding_mask=None):
        pre = self.normalization == "pre"
        normed = inputs
        if pre and self.attention_layer_norm is not None:
            normed = call_sublayer(self, self.attention_layer_norm, inputs)
        attended = call_sublayer(
            self, self.attention, normed,
            attention_mask=attention_mask, training=training, query_positions=query_positions, rotary=rotary,
            relative=relative, local_window=local_window, padding_mask=padding_mask,
        )  # (batch, queries, hidden); queries = seq without query_positions
        if query_positions is not None:
            inputs = gather_rows(inputs, query_positions)  # the residual at the query rows
        attended = call_sublayer(self, self.attention_output_dropout, attended, training=training)
        hidden = inputs + attended  # (batch, queries, hidden)
        if not pre:
            hidden = call_sublayer(self, self.attention_layer_norm, hidden)
        ffn = call_sublayer(self, self.output_layer_norm, hidden) if pre else hidden
        ffn = call_sublayer(self, self.intermediate_dense, ffn)  # (batch, queries, intermediate or twice it)
        if self._gate_activation is not None:
            value, gate = ops.split(ffn, 2, axis=-1)
            ffn = self._gate_activation(value) * gate  # (batch, queries, intermediate)
        ffn = call_sublayer(self, self.output_dense, ffn)  # (batch, queries, hidden)
        ffn = call_sublayer(self, self.output_dropout, ffn, training=training)
        if pre:
            return hidden + ffn
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
                "normalization": self.normalization,
                "feedforward": self.feedforward,
                "use_bias": self.use_bias,
                "attention_norm": self.attention_norm,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
