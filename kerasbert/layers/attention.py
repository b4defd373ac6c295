"""Multi-head self-attention with one fused QKV projection."""

import keras
from keras import ops

from kerasbert.layers.dropout import Dropout
from kerasbert.layers.initializers import clone_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class SelfAttention(keras.layers.Layer):
    """Bidirectional multi-head self-attention.

    Queries, keys and values come from one `Dense(3 * hidden_dim)` projection
    (one matmul instead of three). Attention runs through
    `keras.ops.dot_product_attention`, which picks the backend's fused kernel;
    only when attention-probability dropout is active (training with
    `dropout > 0`) does it fall back to an explicit softmax so that dropout can
    be applied to the probabilities. Logits and softmax are computed in
    float32 under mixed precision.

    Args:
        num_heads: number of attention heads.
        hidden_dim: model width; must be divisible by `num_heads`.
        dropout: dropout rate on the attention probabilities.
        kernel_initializer: initializer for the projection kernels.

    Examples:
    >>> import numpy as np
    >>> layer = SelfAttention(num_heads=2, hidden_dim=8)
    >>> x = np.random.rand(3, 5, 8).astype("float32")
    >>> mask = np.ones((3, 1, 1, 5), bool)
    >>> tuple(layer(x, attention_mask=mask).shape)
    (3, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        hidden_dim,
        dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // num_heads
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.qkv = keras.layers.Dense(
            3 * hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="qkv",
        )
        self.output_dense = keras.layers.Dense(
            hidden_dim,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="output_dense",
        )
        self.probs_dropout = Dropout(
            dropout, dtype=self.dtype_policy, name="probs_dropout"
        )

    def build(self, input_shape):
        self.qkv.build(input_shape)
        self.output_dense.build((*input_shape[:-1], self.hidden_dim))
        self.built = True

    def call(self, inputs, attention_mask=None, training=None):
        # inputs: (batch, seq, hidden); attention_mask: bool, broadcastable
        # to (batch, heads, seq, seq), True where a query may attend a key.
        batch, seq = ops.shape(inputs)[0], ops.shape(inputs)[1]
        qkv = self.qkv(inputs)  # (batch, seq, 3 * hidden)
        qkv = ops.reshape(qkv, (batch, seq, 3, self.num_heads, self.head_dim))
        query, key, value = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        # query, key, value: (batch, seq, heads, head_dim)
        if training and self.dropout > 0:
            context = self._attend_with_dropout(query, key, value, attention_mask)
        else:
            context = ops.dot_product_attention(query, key, value, mask=attention_mask)
        context = ops.reshape(context, (batch, seq, self.hidden_dim))
        return self.output_dense(context)

    def _attend_with_dropout(self, query, key, value, attention_mask):
        scale = 1.0 / float(self.head_dim) ** 0.5
        logits = ops.einsum("btnh,bsnh->bnts", query, key)  # (batch, heads, seq, seq)
        logits = ops.cast(logits, "float32") * scale
        if attention_mask is not None:
            logits = ops.where(attention_mask, logits, -1e9)
        probs = ops.softmax(logits, axis=-1)
        probs = self.probs_dropout(ops.cast(probs, value.dtype), training=True)
        return ops.einsum("bnts,bsnh->btnh", probs, value)  # (batch, seq, heads, head_dim)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
