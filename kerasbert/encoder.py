"""The one encoder: BERT, ALBERT, RoBERTa, XLM-RoBERTa, ELECTRA, DistilBERT,
DeBERTa-v3 and ModernBERT are presets of it."""

import keras
from keras import ops

from kerasbert.distribution import check_shardable, megatron_layout_map
from kerasbert.encoder_arguments import check_encoder_arguments
from kerasbert.layers import lora, quantization
from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.embeddings import PositionEmbedding
from kerasbert.layers.initializers import TruncatedNormal, clone_initializer
from kerasbert.layers.relative import RelativePositions
from kerasbert.layers.rotary import RotaryEmbedding
from kerasbert.layers.transformer_block import TransformerBlock
from kerasbert.utils.features import check_host_features
from kerasbert.utils.preset_files import write_preset


def document_attention_mask(padding_mask):
    """The boolean attention mask `(batch, 1, seq, seq)` of a padding mask
    `(batch, seq)` holding 0 at padding and a document id >= 1 at real tokens:
    True where query `i` may attend key `j`. A real query attends the real
    keys of its own document; a padding query attends every real key (as in
    Hugging Face models, so outputs at padding positions match theirs too).
    For a 0/1 mask every query attends every real key.

    Examples:
    >>> import numpy as np
    >>> mask = document_attention_mask(np.array([[1, 1, 2, 0]]))
    >>> ops.convert_to_numpy(mask).astype(int)[0, 0].tolist()
    [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0]]
    """
    # expand_dims, not [:, None]: LiteRT has no kernel for a strided slice that adds an axis to a dynamic shape.
    query = ops.expand_dims(padding_mask, 2)  # (batch, seq, 1)
    key = ops.expand_dims(padding_mask, 1)  # (batch, 1, seq)
    allowed = ops.not_equal(key, 0) & (ops.equal(query, key) | ops.equal(query, 0))
    return ops.expand_dims(allowed, 1)  # (batch, 1, seq, seq): one mask for all heads


def _embed(layers, inputs, token_vectors=None):
    """Token + segment + position embeddings, LayerNorm, dropout:
    `(batch, seq, width)`, before any projection to `hidden_dim`."""
    x = token_vectors
    if x is None:
        x = layers["token_embedding"](inputs["token_ids"])  # (batch, seq, width)
    if layers["segment_embedding"] is not None:
        segments = inputs["segment_ids"]
        if layers["segment_embedding"].input_dim == 1:
            # One segment (RoBERTa): 0 is the only valid id, whatever the
            # placeholder values Keras builds the graph with on torch.
            segments = ops.zeros_like(segments)
        x = x + layers["segment_embedding"](segments)
    if layers["position_embedding"] is not None:
        x = x + layers["position_embedding"](inputs["padding_mask"])
    return layers["embeddings_dropout"](layers["embeddings_layer_norm"](x))


def _attention_kinds(config):
    """Per layer, "global" or "local": layer `i` attends globally when `i`
    is a multiple of `global_attention_every`, or when there is no local
    window."""
    every, window = config["global_attention_every"], config["local_attention_window"]
    return ["global" if window is None or i % every == 0 else "local" for i in range(config["num_layers"])]


def _transform(layers, config, x, padding_mask, positions=None):
    """Embeddings `(batch, seq, width)` -> sequence output `(batch, seq, hidden)`:
    the projection (if any), the transformer blocks and the final LayerNorm
    (pre-norm encoders). With `positions (batch, n)` the last block runs at
    those rows only: `(batch, n, hidden)`."""
    if layers["embeddings_projection"] is not None:
        x = layers["embeddings_projection"](x)  # (batch, seq, hidden)
    kinds = _attention_kinds(config)
    # Global layers: a (batch, 1, seq, seq) mask; local ones: the padding mask and their window.
    attention = {"global": {"attention_mask": document_attention_mask(padding_mask)},  # layer 0 is global
                 "local": {"local_window": config["local_attention_window"], "padding_mask": padding_mask}}
    rotary = {kind: None for kind in attention}
    if layers["rotary_embeddings"] is not None:
        rotary = {kind: layers["rotary_embeddings"][kind](padding_mask) for kind in set(kinds)}
    relative = None
    if layers["relative_positions"] is not None:
        relative = layers["relative_positions"](padding_mask)  # (table, index)
    blocks = layers["transformer_blocks"]
    num_layers, num_inner_layers = config["num_layers"], config["num_inner_layers"]
    groups = config["num_layer_groups"] or num_layers
    for i in range(num_layers):
        group = int(i / (num_layers / groups))  # the Hugging Face ALBERT rule
        for j in range(num_inner_layers):
            last = i == num_layers - 1 and j == num_inner_layers - 1
            x = blocks[group * num_inner_layers + j](
                x, query_positions=positions if last else None, rotary=rotary[kinds[i]], relative=relative,
                **attention[kinds[i]],
            )
    if layers["final_layer_norm"] is not None:
        x = layers["final_layer_norm"](x)
    return x


@keras.saving.register_keras_serializable(package="kerasbert")
class Encoder(keras.Model):
    """A bidirectional transformer encoder covering the whole BERT family.

    The members of the family differ only in the values below (see the JSON
    files in `presets/` and docs/architecture.md):

    - BERT: post-LN blocks, segment embeddings, a tanh pooler.
    - ALBERT: `embedding_dim` < `hidden_dim` (factorised embeddings, projected
      up) and `num_layer_groups` (cross-layer sharing: layer `i` reuses the
      blocks of group `int(i / (num_layers / num_layer_groups))`).
    - RoBERTa and XLM-RoBERTa: one segment, `position_offset=2` (fairseq
      positions), LayerNorm epsilon 1e-5.
    - ELECTRA: an embedding projection when `embedding_dim != hidden_dim`, no
      pooler.
    - DistilBERT: no segments (`num_segments=0`), no pooler.
    - DeBERTa-v3: `position_encoding="relative"` (256 buckets up to 512
      tokens apart), no segments, no pooler, LayerNorm epsilon 1e-7.
    - ModernBERT: `normalization="pre"`, `feedforward="gated"`,
      `use_bias=False`, `position_encoding="rotary"` with
      `rotary_theta=160000` on global layers and `local_rotary_theta=10000`
      on local ones, `local_attention_window=128` with
      `global_attention_every=3`, no segments, no pooler.

    Inputs are a dict of `token_ids`, `segment_ids` (absent when
    `num_segments=0`) and `padding_mask`, each `(batch, seq)` integers. Outputs
    are a dict: `sequence_output (batch, seq, hidden_dim)` and
    `pooled_output (batch, hidden_dim)`, the tanh-pooled first token, or the
    first token's vector itself when `pooler=False`.

    `padding_mask` holds 0 at padding and, at real tokens, either 1 (one
    sequence per row, padded on either side) or a document id: rows that pack
    several documents (`kerasbert.preprocessing.pack_documents`) number them
    1, 2, 3, ... in order, each document contiguous. A real token then
    attends only to the tokens of its own document and its position restarts
    with the document (see `kerasbert.layers.PositionEmbedding`), so every
    document's `sequence_output` is what it would be alone in a row; padding
    tokens attend to every real token. `pooled_output` comes from the row's
    first token, i.e. document 1. With 0/1 masks nothing changes: outputs
    match Hugging Face's at every position.

    Args:
        vocabulary_size: number of token ids.
        num_layers: number of transformer layers applied.
        num_heads: attention heads per layer; must divide `hidden_dim`.
        hidden_dim: model width.
        intermediate_dim: feed-forward hidden width.
        embedding_dim: embedding width. `None`: embeddings are `hidden_dim`
            wide and used directly; otherwise a Dense layer projects them to
            `hidden_dim` (ALBERT, ELECTRA).
        num_segments: rows of the segment (token type) table; 0 for none.
        max_sequence_length: longest sequence the position table covers.
        position_offset: reserved position rows before position 0 (RoBERTa:
            2); see `kerasbert.layers.PositionEmbedding`.
        dropout: dropout on embeddings and block outputs.
        attention_dropout: dropout on attention probabilities; `None` means
            the same as `dropout`.
        activation: feed-forward activation: "gelu" (erf), "gelu_approximate"
            (tanh), "relu", "silu" or "tanh".
        layer_norm_epsilon: LayerNorm epsilon.
        num_layer_groups: `None` for one block per layer; otherwise the
            number of distinct parameter groups shared across layers (ALBERT).
        num_inner_layers: blocks applied in sequence per layer within a group
            (ALBERT's `inner_group_num`).
        pooler: whether to add the dense tanh pooler on the first token.
        initializer_range: standard deviation of the truncated-normal
            initializer.
        normalization: "post" (LayerNorm after each residual sum, BERT) or
            "pre" (LayerNorm on each sublayer's input and once after the
            last block; the first block's attention reads the embeddings'
            LayerNorm output as it is).
        feedforward: "plain" or "gated" (GeGLU: the first feed-forward
            layer is `2 * intermediate_dim` wide; `activation` of one half
            times the other).
        use_bias: whether the blocks' dense layers and every LayerNorm have
            biases.
        position_encoding: "learned" (a table of `max_sequence_length`
            rows added to the embeddings), "rotary" (RoPE: queries and keys
            turned by their positions) or "relative" (DeBERTa: a table of
            relative positions that every layer's disentangled attention
            reads; see `kerasbert.layers.SelfAttention`).
        rotary_theta: RoPE's base on global-attention layers.
        local_rotary_theta: RoPE's base on local-attention layers; `None`
            means `rotary_theta`.
        local_attention_window: `None` (every layer attends to the whole
            sequence) or the window of the local layers: a token attends to
            those at most `local_attention_window // 2` positions away.
        global_attention_every: layer `i` attends globally when `i` is a
            multiple of it, locally otherwise (needs
            `local_attention_window`).
        relative_buckets: with "relative" positions, the buckets per
            direction (distances from half of it on share log-sized
            buckets); 0 for one row per distance.
        max_relative_distance: with "relative" positions, the distance the
            buckets reach (or, without buckets, the longest distance told
            apart).
        dtype: a dtype or `keras.DTypePolicy` such as "mixed_bfloat16".

    Examples:
    >>> import numpy as np
    >>> encoder = Encoder(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                   hidden_dim=16, intermediate_dim=32)
    >>> outputs = encoder({
    ...     "token_ids": np.array([[2, 7, 9, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... })
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 16), (1, 16))

    Two documents packed into one row give what each gives alone:

    >>> packed = encoder({
    ...     "token_ids": np.array([[2, 7, 9, 3, 2, 8, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 8), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 2, 2, 2, 0]]),
    ... })["sequence_output"]
    >>> alone = encoder({
    ...     "token_ids": np.array([[2, 8, 3]]),
    ...     "segment_ids": np.zeros((1, 3), "int32"),
    ...     "padding_mask": np.ones((1, 3), "int32"),
    ... })["sequence_output"]
    >>> bool(np.allclose(ops.convert_to_numpy(packed)[0, 4:7],
    ...                  ops.convert_to_numpy(alone)[0], atol=1e-5))
    True
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        embedding_dim=None,
        num_segments=2,
        max_sequence_length=512,
        position_offset=0,
        dropout=0.1,
        attention_dropout=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        num_layer_groups=None,
        num_inner_layers=1,
        pooler=True,
        initializer_range=0.02,
        normalization="post",
        feedforward="plain",
        use_bias=True,
        position_encoding="learned",
        rotary_theta=10000.0,
        local_rotary_theta=None,
        local_attention_window=None,
        global_attention_every=1,
        relative_buckets=256,
        max_relative_distance=512,
        dtype=None,
        **kwargs,
    ):
        config = {
            "vocabulary_size": vocabulary_size,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "hidden_dim": hidden_dim,
            "intermediate_dim": intermediate_dim,
            "embedding_dim": embedding_dim,
            "num_segments": num_segments,
            "max_sequence_length": max_sequence_length,
            "position_offset": position_offset,
            "dropout": dropout,
            "attention_dropout": attention_dropout,
            "activation": activation,
            "layer_norm_epsilon": layer_norm_epsilon,
            "num_layer_groups": num_layer_groups,
            "num_inner_layers": num_inner_layers,
            "pooler": pooler,
            "initializer_range": initializer_range,
            "normalization": normalization,
            "feedforward": feedforward,
            "use_bias": use_bias,
            "position_encoding": position_encoding,
            "rotary_theta": rotary_theta,
            "local_rotary_theta": local_rotary_theta,
            "local_attention_window": local_attention_window,
            "global_attention_every": global_attention_every,
            "relative_buckets": relative_buckets,
            "max_relative_distance": max_relative_distance,
        }
        check_encoder_arguments(config)
        check_shardable(config)
        width = hidden_dim if embedding_dim is None else embedding_dim
        groups = num_layers if num_layer_groups is None else num_layer_groups
        init = TruncatedNormal(stddev=initializer_range)

        # === Layers === (kept local: torch modules reject attributes before
        # super().__init__; they become attributes under "Config")
        token_embedding = keras.layers.Embedding(
            vocabulary_size, width, embeddings_initializer=clone_initializer(init),
            dtype=dtype, name="token_embedding",
        )
        segment_embedding = None
        if num_segments:
            segment_embedding = keras.layers.Embedding(
                num_segments, width, embeddings_initializer=clone_initializer(init),
                dtype=dtype, name="segment_embedding",
            )
        position_embedding = None
        if position_encoding == "learned":
            position_embedding = PositionEmbedding(
                max_sequence_length, width, position_offset=position_offset,
                embeddings_initializer=clone_initializer(init),
                dtype=dtype, name="position_embedding",
            )
        embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=use_bias, dtype=dtype, name="embeddings_layer_norm"
        )
        embeddings_dropout = Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        embeddings_projection = None
        if embedding_dim is not None:
            embeddings_projection = Dense(
                hidden_dim, kernel_initializer=clone_initializer(init),
                dtype=dtype, name="embeddings_projection",
            )
        # Blocks are indexed group-major: group g owns blocks
        # g * num_inner_layers ... (g + 1) * num_inner_layers - 1.
        transformer_blocks = [
            TransformerBlock(
                num_heads, hidden_dim, intermediate_dim,
                dropout=dropout,
                attention_dropout=dropout if attention_dropout is None else attention_dropout,
                activation=activation,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=clone_initializer(init),
                normalization=normalization,
                feedforward=feedforward,
                use_bias=use_bias,
                attention_norm=i > 0,  # "pre": the first block reads the embeddings' LayerNorm
                dtype=dtype,
                name=f"transformer_block_{i}",
            )
            for i in range(groups * num_inner_layers)
        ]
        relative_positions = None
        if position_encoding == "relative":
            relative_positions = RelativePositions(
                hidden_dim, relative_buckets, max_relative_distance, layer_norm_epsilon=layer_norm_epsilon,
                embeddings_initializer=clone_initializer(init), dtype=dtype, name="relative_positions",
            )
        rotary_embeddings = None  # by kind of attention layer: their angles
        if position_encoding == "rotary":
            thetas = {"global": rotary_theta, "local": local_rotary_theta or rotary_theta}
            rotary_embeddings = {kind: RotaryEmbedding(hidden_dim // num_heads, theta, dtype=dtype,
                                                       name=f"{kind}_rotary_embedding")
                                 for kind, theta in thetas.items()}
        final_layer_norm = None
        if normalization == "pre":
            final_layer_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, center=use_bias, dtype=dtype, name="final_layer_norm"
            )
        pooler_dense = None
        if pooler:
            pooler_dense = keras.layers.Dense(
                hidden_dim, activation="tanh",
                kernel_initializer=clone_initializer(init),
                dtype=dtype, name="pooler_dense",
            )

        # === Graph ===
        inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids")}
        if num_segments:
            inputs["segment_ids"] = keras.Input((None,), dtype="int32", name="segment_ids")
        inputs["padding_mask"] = keras.Input((None,), dtype="int32", name="padding_mask")

        layers = {
            "token_embedding": token_embedding,
            "segment_embedding": segment_embedding,
            "position_embedding": position_embedding,
            "embeddings_layer_norm": embeddings_layer_norm,
            "embeddings_dropout": embeddings_dropout,
            "embeddings_projection": embeddings_projection,
            "transformer_blocks": transformer_blocks,
            "rotary_embeddings": rotary_embeddings,
            "relative_positions": relative_positions,
            "final_layer_norm": final_layer_norm,
        }
        x = _embed(layers, inputs)  # (batch, seq, width)
        x = _transform(layers, config, x, inputs["padding_mask"])
        first_token = x[:, 0, :]  # (batch, hidden)
        pooled = pooler_dense(first_token) if pooler else first_token
        outputs = {"sequence_output": x, "pooled_output": pooled}
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        quantization.unwrap_quantize(self)
        if dtype is not None:
            # Functional models do not record the policy their layers use.
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Config ===
        self._encoder_config = config
        self.token_embedding = token_embedding
        self.segment_embedding = segment_embedding
        self.position_embedding = position_embedding
        self.embeddings_layer_norm = embeddings_layer_norm
        self.embeddings_dropout = embeddings_dropout
        self.embeddings_projection = embeddings_projection
        self.transformer_blocks = transformer_blocks
        self.rotary_embeddings = rotary_embeddings
        self.relative_positions = relative_positions
        self.final_layer_norm = final_layer_norm
        self.pooler_dense = pooler_dense
        for key, value in config.items():
            setattr(self, key, value)

    def get_config(self):
        policy = quantization.recorded_policy(self.dtype_policy, quantization.quantized_modes(self))
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(policy),
            **self._encoder_config,
        }

    def __call__(self, *args, **kwargs):
        # Ids past the vocabulary or segments, or sequences past the position
        # table: TensorFlow raises a framework error, JAX clamps or gives NaN.
        # NumPy features are checked first.
        check_host_features(args[0] if args else kwargs.get("inputs"), self, tuple(self.input), "inputs")
        return super().__call__(*args, **kwargs)

    def predict(self, x, *args, **kwargs):
        """`keras.Model.predict`; NumPy features are checked first, as in `__call__`."""
        check_host_features(x, self, tuple(self.input), "x")
        return super().predict(x, *args, **kwargs)

    @classmethod
    def from_config(cls, config):
        policy, modes = quantization.split_policy(config.get("dtype"))
        encoder = cls(**{**config, "dtype": policy})
        quantization.requantize(encoder, modes, "the config's dtype")
        return encoder

    def quantize(self, mode, config=None):
        """Quantizes the encoder's dense layers and embedding tables in
        `mode` ("int8", "int4" or "float8"; see
        `kerasbert.layers.quantization`) through Keras's own quantization
        (`config`: a `keras.quantizers.QuantizationConfig` for that mode).
        Presets and `.keras` files record it."""
        quantization.quantize(self, mode, config)

    # -- LoRA (kerasbert.layers.lora) -------------------------------------------

    def enable_lora(self, rank, alpha=None, targets=lora.DEFAULT_TARGETS):
        """Freezes the encoder's weights and puts a rank-`rank` adapter,
        scaled by `alpha / rank` (`alpha` defaults to `rank`), on the dense
        layers `targets` names in every block: "qkv" (the fused query, key
        and value projection), "attention_output", "intermediate", "output".
        Compile after enabling."""
        lora.enable_lora(self, rank, alpha, targets)

    def merge_lora(self):
        """Folds each adapter into its kernel and removes the adapters: the
        encoder computes as before, without them, and trains in full again."""
        lora.merge_lora(self)

    def weight_tensors(self):
        """{variable path: array} of the encoder's weights, adapters folded
        into their kernels (what `save_to_preset` writes): float32, and
        quantized weights in their integer dtype."""
        return lora.weight_tensors(self)

    @classmethod
    def get_layout_map(cls, device_mesh, model_parallel_dim_name="model"):
        """A `keras.distribution.LayoutMap` sharding the encoder and its task
        heads over `device_mesh` for `keras.distribution.ModelParallel`
        (JAX backend): Megatron-style column/row splits of the QKV, attention
        output and FFN kernels, the token table and MLM bias split by
        vocabulary rows, everything else replicated (see
        `kerasbert.distribution`). The mesh's other axis carries the batch.
        Sharded sizes (`vocabulary_size`, `hidden_dim`, `intermediate_dim`)
        must be multiples of the model axis; building an encoder under a
        distribution that would split one unevenly raises a ValueError
        naming it. See docs/distributed.md.

        Args:
            device_mesh: a `keras.distribution.DeviceMesh`, e.g. of shape
                `(2, 4)` with axes `("batch", "model")`.
            model_parallel_dim_name: the mesh axis the weights are split on.

        Examples:
        >>> import keras
        >>> mesh = keras.distribution.DeviceMesh((1, 1), ("batch", "model"), ["cpu:0"])
        >>> layout_map = Encoder.get_layout_map(mesh)
        >>> layout_map["transformer_block_3/intermediate_dense/kernel"].axes
        (None, 'model')
        """
        return megatron_layout_map(device_mesh, model_parallel_dim_name)

    # Pieces of the graph, for tasks that reuse the encoder's layers in a
    # graph of their own (ELECTRA's generator shares the discriminator's
    # embeddings by calling `discriminator.embed`).

    def _layer_map(self):
        return {
            "token_embedding": self.token_embedding,
            "segment_embedding": self.segment_embedding,
            "position_embedding": self.position_embedding,
            "embeddings_layer_norm": self.embeddings_layer_norm,
            "embeddings_dropout": self.embeddings_dropout,
            "embeddings_projection": self.embeddings_projection,
            "transformer_blocks": self.transformer_blocks,
            "rotary_embeddings": self.rotary_embeddings,
            "relative_positions": self.relative_positions,
            "final_layer_norm": self.final_layer_norm,
        }

    @property
    def embedding_width(self):
        """The width of the token embeddings: `embedding_dim`, or `hidden_dim`."""
        return self.hidden_dim if self.embedding_dim is None else self.embedding_dim

    def embed(self, inputs, token_vectors=None):
        """The embeddings of `inputs` (the encoder's input dict), `(batch, seq,
        embedding_width)`: token + segment + position vectors, LayerNorm and
        dropout, before the projection to `hidden_dim`. `token_vectors`
        `(batch, seq, embedding_width)`, when given, stand for the token
        table's (`ElectraPretrainer`'s gradient-disentangled sharing)."""
        return _embed(self._layer_map(), inputs, token_vectors)

    def transform(self, embeddings, padding_mask, positions=None):
        """Embeddings `(batch, seq, embedding_width)` -> `sequence_output`
        `(batch, seq, hidden_dim)`: the projection, then every layer. With
        `positions (batch, n)`, the last layer runs at those rows only and
        the result is `sequence_output` there, `(batch, n, hidden_dim)` (see
        `outputs_at`)."""
        return _transform(self._layer_map(), self._encoder_config, embeddings, padding_mask, positions=positions)

    def outputs_at(self, inputs, positions):
        """The outputs a task reads when it needs only some positions (a
        masked LM: the masked ones): `sequence_output` at `positions`
        `(batch, n)`, i.e. `(batch, n, hidden_dim)`, and `pooled_output`.
        They equal the full outputs gathered at those positions (to float
        rounding), but the last layer runs only at those rows and the first
        token: every token is still a key and value of its attention, while
        its queries, feed-forward network and LayerNorms skip the rest. For
        BERT's 20 masked positions in 128 tokens that is most of one layer's
        work, forward and backward (see docs/performance_history.md). Used by
        `kerasbert.MaskedLM`, `kerasbert.BertPretrainer` and, with
        `pooling="cls"`, `kerasbert.TextClassifier` (the first token only).

        Examples:
        >>> import numpy as np
        >>> encoder = Encoder(vocabulary_size=100, num_layers=2, num_heads=2,
        ...                   hidden_dim=16, intermediate_dim=32)
        >>> features = {"token_ids": np.array([[2, 7, 9, 3, 0]]),
        ...             "segment_ids": np.zeros((1, 5), "int32"),
        ...             "padding_mask": np.array([[1, 1, 1, 1, 0]])}
        >>> at = encoder.outputs_at(features, np.array([[2, 1]]))
        >>> full = encoder(features)
        >>> bool(np.allclose(ops.convert_to_numpy(at["sequence_output"])[0],
        ...                  ops.convert_to_numpy(full["sequence_output"])[0, [2, 1]], atol=1e-5))
        True
        >>> bool(np.allclose(ops.convert_to_numpy(at["pooled_output"]),
        ...                  ops.convert_to_numpy(full["pooled_output"]), atol=1e-5))
        True
        """
        positions = ops.cast(positions, "int32")  # (batch, n)
        first = ops.zeros_like(positions[:, :1])  # (batch, 1): the first token, for the pooler
        x = self.transform(
            self.embed(inputs), inputs["padding_mask"], positions=ops.concatenate([first, positions], axis=1)
        )  # (batch, 1 + n, hidden)
        first_token = x[:, 0, :]  # (batch, hidden)
        pooled = self.pooler_dense(first_token) if self.pooler else first_token
        return {"sequence_output": x[:, 1:, :], "pooled_output": pooled}

    def save_to_preset(self, preset_dir, **metadata):
        """Writes this encoder as a kerasbert preset directory that
        `kerasbert.from_preset(preset_dir)` loads. See
        `kerasbert.save_to_preset`."""
        return write_preset(self, preset_dir, metadata=metadata)
