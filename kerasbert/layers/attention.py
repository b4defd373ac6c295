"""Multi-head self-attention with one fused QKV kernel."""

import keras
from keras import ops

from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.initializers import clone_initializer
from kerasbert.layers.local_attention import local_attention
from kerasbert.layers.rotary import rotate
from kerasbert.layers.sublayer import call_sublayer
from kerasbert.utils.hardware import xla_on_cpu


def gather_rows(x, positions):
    """`x (batch, seq, width)` at `positions (batch, n)`, any integer
    dtype: `(batch, n, width)`."""
    return ops.take_along_axis(x, ops.expand_dims(ops.cast(positions, "int32"), 2), axis=1)


def disentangled_bias(query, key, position_queries, position_keys, index):
    """DeBERTa's content-to-position and position-to-content logits, float32
    `(batch, heads, queries, seq)`: `query (batch, queries, heads, head_dim)`
    times the position keys at `index[i, j]`, plus `key (batch, seq, heads,
    head_dim)` times the position queries at the same rows. `position_queries`
    and `position_keys` are the relative table through the query and key
    projections, `(2 * span, heads, head_dim)`; `index` is `(queries, seq)`
    or `(batch, queries, seq)` rows of the table."""
    batch, queries, heads = ops.shape(query)[0], ops.shape(query)[1], ops.shape(query)[2]
    seq = ops.shape(key)[1]
    index = ops.broadcast_to(index, (batch, queries, seq))[:, None, :, :]  # (batch, 1, queries, seq)
    index = ops.broadcast_to(index, (batch, heads, queries, seq))
    # Every query (key) against every table row, then the row each pair reads.
    content_to_position = ops.einsum("bqhd,rhd->bhqr", query, position_keys)  # (batch, heads, queries, 2 * span)
    position_to_content = ops.einsum("bkhd,rhd->bhkr", key, position_queries)  # (batch, heads, seq, 2 * span)
    c2p = ops.take_along_axis(content_to_position, index, axis=-1)  # (batch, heads, queries, seq)
    p2c = ops.take_along_axis(position_to_content, ops.transpose(index, (0, 1, 3, 2)), axis=-1)  # (.., seq, queries)
    return ops.cast(c2p, "float32") + ops.cast(ops.transpose(p2c, (0, 1, 3, 2)), "float32")


@keras.saving.register_keras_serializable(package="kerasbert")
class SelfAttention(keras.layers.Layer):
    """Bidirectional multi-head self-attention.

    Queries, keys and values share one `Dense(3 * hidden_dim)` kernel (the
    layout of the checkpoints), applied as three products of its column
    blocks rather than one product split afterwards: the backward pass then
    needs no padding of the three gradients into the fused shape (a train
    step of BERT-small measured 7% faster on JAX under XLA, the same on
    TensorFlow and torch; docs/performance_history.md). Attention runs
    through `keras.ops.dot_product_attention`, which picks the backend's
    fused kernel (torch's `scaled_dot_product_attention`; cuDNN's flash
    attention under JAX on a GPU, where it applies), except in two cases,
    where it is two batched products with the heads in front and an
    explicit softmax: when attention-probability dropout is active
    (training with `dropout > 0`), to drop out the probabilities; and on JAX
    on a CPU, where XLA runs those products faster than the einsums
    `dot_product_attention` lowers to (MiniLM's `predict` 6% faster, its
    fine-tuning 4.5%). Logits and softmax are computed in float32 under
    mixed precision.

    With `rotary=(cos, sin)`, each `(batch, seq, head_dim)` (see
    `kerasbert.layers.rotary`), queries and keys are turned by their
    positions' angles before they meet (RoPE).

    With `relative=(table, index)` (see
    `kerasbert.layers.relative.RelativePositions`) the attention is
    DeBERTa's disentangled one: beside content to content, each query's
    content meets the key's relative position (the table row `index[i, j]`
    through the key projection) and each key's content meets the query's
    (the same row through the query projection); the three sum, scaled by
    `1 / sqrt(3 * head_dim)`.

    A quantized fused kernel (`kerasbert.layers.quantization`) is not read:
    the layer that holds it is called on every row, and the query rows are
    taken from its output.

    With `local_window=w` the attention is a sliding window: a token
    attends only to tokens at most `w // 2` positions away, in blocks whose
    memory is linear in the sequence length (`local_attention`); keys are
    masked by `padding_mask (batch, seq)` (document ids) rather than by a
    `(seq, seq)` mask.

    With `query_positions` only those rows are queries: keys and values come
    from the whole sequence, the query projection, attention and output
    projection run on the chosen rows only, and the result is the full
    output's rows at those positions (a masked LM needs its last layer at the
    masked positions only).

    Args:
        num_heads: number of attention heads.
        hidden_dim: model width; must be divisible by `num_heads`.
        dropout: dropout rate on the attention probabilities.
        kernel_initializer: initializer for the projection kernels.
        use_bias: whether the projections add biases.

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
        use_bias=True,
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
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        # It holds the fused kernel and bias, whose column blocks `_project`
        # multiplies; called only when quantized.
        self.qkv = keras.layers.Dense(
            3 * hidden_dim,
            use_bias=use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="qkv",
        )
        self.output_dense = Dense(
            hidden_dim,
            use_bias=use_bias,
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

    def call(self, inputs, attention_mask=None, training=None, query_positions=None, rotary=None, relative=None,
             local_window=None, padding_mask=None):
        # inputs: (batch, seq, hidden); attention_mask: bool, broadcastable
        # to (batch, heads, seq, seq), True where a query may attend a key;
        # query_positions: None or (batch, queries) int; rotary: None or
        # (cos, sin), each (batch, seq, head_dim); relative: None or
        # (table (2 * span, hidden), index (seq, seq)); local_window: None
        # or the window of sliding-window attention, which then masks keys
        # by padding_mask (batch, seq) instead of attention_mask.
        if local_window is not None and query_positions is not None:
            # The window's blocks take every row as a query: the chosen rows come after.
            context = self.call(inputs, training=training, rotary=rotary, relative=relative,
                                local_window=local_window, padding_mask=padding_mask)
            return gather_rows(context, query_positions)  # (batch, queries, hidden)
        rows = inputs
        query_rotary = rotary
        if query_positions is not None:
            rows = gather_rows(inputs, query_positions)  # (batch, queries, hidden)
            if rotary is not None:
                query_rotary = tuple(gather_rows(r, query_positions) for r in rotary)  # (batch, queries, head_dim)
            if attention_mask is not None and attention_mask.shape[2] != 1:
                # (batch, 1, seq, seq) -> the chosen query rows (batch, 1, queries, seq)
                positions = ops.cast(query_positions, "int32")
                chosen = ops.expand_dims(ops.expand_dims(positions, 1), 3)  # (batch, 1, queries, 1)
                attention_mask = ops.take_along_axis(attention_mask, chosen, axis=2)
        # Each shape read once: on TensorFlow a read of a dynamic dimension
        # is two graph ops, traced per call (docs/performance_history.md).
        batch, seq = ops.shape(inputs)[:2]
        queries = seq if query_positions is None else ops.shape(rows)[1]
        quantized = self.qkv.quantization_mode is not None
        if quantized:
            # Keras's quantized product of the whole fused kernel, on every row.
            query, key, value = ops.split(self.qkv(inputs), 3, axis=-1)  # (batch, seq, hidden) each
            if query_positions is not None:
                query = gather_rows(query, query_positions)  # (batch, queries, hidden)
            query = ops.reshape(query, (batch, queries, self.num_heads, self.head_dim))
            key, value = (ops.reshape(x, (batch, seq, self.num_heads, self.head_dim)) for x in (key, value))
        else:
            # The fused kernel and bias read once, in three column blocks: (hidden, hidden) and (hidden,) each.
            kernels = ops.split(ops.cast(self.qkv.kernel, self.compute_dtype), 3, axis=1)
            biases = ops.split(ops.cast(self.qkv.bias, self.compute_dtype), 3) if self.use_bias else (None,) * 3
            query = self._project(rows, kernels[0], biases[0], (batch, queries))  # (batch, queries, heads, head_dim)
            key = self._project(inputs, kernels[1], biases[1], (batch, seq))  # (batch, seq, heads, head_dim)
            value = self._project(inputs, kernels[2], biases[2], (batch, seq))  # (batch, seq, heads, head_dim)
        if rotary is not None:
            query, key = rotate(query, *query_rotary), rotate(key, *rotary)
        scale = 1.0 / float(self.head_dim) ** 0.5  # a constant, not ops on the head dimension
        dropout = bool(training) and self.dropout > 0
        bias = None
        if relative is not None:
            scale = 1.0 / float(3 * self.head_dim) ** 0.5
            table, index = relative
            heads = (ops.shape(table)[0], self.num_heads, self.head_dim)  # (2 * span, heads, head_dim)
            if quantized:
                position_queries, position_keys, _ = (ops.reshape(x, heads)
                                                      for x in ops.split(self.qkv(table), 3, axis=-1))
            else:
                position_queries = self._project(table[None], kernels[0], biases[0], (1, heads[0]))[0]
                position_keys = self._project(table[None], kernels[1], biases[1], (1, heads[0]))[0]
            if query_positions is not None:
                index = ops.take(index, ops.cast(query_positions, "int32"), axis=0)  # (batch, queries, seq)
            bias = disentangled_bias(query, key, position_queries, position_keys, index)
        if local_window is not None:
            context = local_attention(query, key, value, padding_mask, local_window, scale,
                                      self.probs_dropout if dropout else None)
        elif dropout or xla_on_cpu() or bias is not None:
            context = self._attend(query, key, value, attention_mask, scale, dropout, bias)
        else:
            context = ops.dot_product_attention(query, key, value, mask=attention_mask, scale=scale)
        context = ops.reshape(context, (batch, queries, self.hidden_dim))
        return call_sublayer(self, self.output_dense, context)  # (batch, queries, hidden)

    def _project(self, x, kernel, bias, leading):
        """`x (batch, n, hidden)` times one column block of the fused kernel
        (`kernel (hidden, hidden)`, `bias (hidden,)` or None: the query's,
        key's or value's), split into heads: `(batch, n, heads, head_dim)`; `leading`
        is `(batch, n)`."""
        # One 2-D product on every backend (see `Dense`): the reshape to heads
        # follows anyway.
        rows = ops.reshape(x, (-1, self.hidden_dim))  # (batch * n, hidden)
        projected = ops.matmul(rows, kernel)  # (batch * n, hidden)
        if bias is not None:
            projected = projected + bias
        return ops.reshape(projected, (*leading, self.num_heads, self.head_dim))

    def _attend(self, query, key, value, attention_mask, scale, dropout, bias=None):
        """Attention as two batched products in the heads-major layout, the
        probabilities dropped out when `dropout`: `query (batch, queries,
        heads, head_dim)`, `key` and `value (batch, seq, heads, head_dim)`
        -> `(batch, queries, heads, head_dim)`. `bias (batch, heads,
        queries, seq)`, float32, is added to the logits before scaling."""
        # The heads moved in front explicitly: XLA's CPU code for the same
        # products written as one einsum each (what `dot_product_attention`
        # lowers to on JAX) is slower (docs/performance_history.md).
        query = ops.transpose(query, (0, 2, 1, 3))  # (batch, heads, queries, head_dim)
        key = ops.transpose(key, (0, 2, 3, 1))  # (batch, heads, head_dim, seq)
        value = ops.transpose(value, (0, 2, 1, 3))  # (batch, heads, seq, head_dim)
        logits = ops.cast(ops.matmul(query, key), "float32")  # (batch, heads, queries, seq)
        logits = (logits if bias is None else logits + bias) * scale
        if attention_mask is not None:
            logits = ops.where(attention_mask, logits, -1e9)
        probs = ops.cast(ops.softmax(logits, axis=-1), value.dtype)
        if dropout:
            probs = self.probs_dropout(probs, training=True)
        return ops.transpose(ops.matmul(probs, value), (0, 2, 1, 3))  # (batch, queries, heads, head_dim)

    def compute_output_shape(self, inputs_shape, query_positions_shape=None):
        if query_positions_shape is None:
            return inputs_shape
        return (*query_positions_shape, inputs_shape[-1])  # (batch, queries, hidden)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
