"""The dense transform a fine-tuning head may put between the encoder and
its output layer: a dense layer with an activation and, optionally, a
LayerNorm (ModernBERT's heads)."""

import keras

from kerasbert.layers.dense import Dense


def resolved_head_dim(hidden_dim, head_norm, encoder, default):
    """The width of the head's dense layer: `hidden_dim` checked, or when
    None the encoder's width where `head_norm` asks for the transform, else
    `default`."""
    if not isinstance(head_norm, bool):
        raise TypeError(f"head_norm must be True or False; got {head_norm!r}.")
    if hidden_dim is None:
        hidden_dim = encoder.hidden_dim if head_norm else default
    if isinstance(hidden_dim, bool) or not isinstance(hidden_dim, int) or hidden_dim < 0:
        raise ValueError(f"hidden_dim must be a non-negative integer or None; got {hidden_dim!r}.")
    if head_norm and not hidden_dim:
        raise ValueError("head_norm=True normalizes the head's dense layer, but hidden_dim=0 gives it none; "
                         "give hidden_dim > 0 (or None: the encoder's hidden_dim).")
    return hidden_dim


def check_activation(activation):
    try:
        keras.activations.get(activation)
    except ValueError:
        raise ValueError(f"activation={activation!r} is not a Keras activation (e.g. 'tanh', 'gelu', "
                         "'relu').") from None


def head_transform(encoder, hidden_dim, activation, head_norm, prefix):
    """`(dense, norm)`: the head's dense layer of `hidden_dim` with
    `activation` (None when `hidden_dim` is 0) and its LayerNorm (None
    without `head_norm`), named `{prefix}_dense` and `{prefix}_norm`. With
    the norm, both have biases where the encoder's layers have them (the
    encoder's `use_bias`, as ModernBERT's `classifier_bias`/`norm_bias`
    follow its layers'); a plain dense layer always has one."""
    if not hidden_dim:
        return None, None
    policy = encoder.dtype_policy
    use_bias = encoder.use_bias or not head_norm
    dense = Dense(hidden_dim, activation=activation, use_bias=use_bias,
                  kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
                  dtype=policy, name=f"{prefix}_dense")
    norm = None
    if head_norm:
        norm = keras.layers.LayerNormalization(epsilon=encoder.layer_norm_epsilon, center=use_bias, dtype=policy,
                                               name=f"{prefix}_norm")
    return dense, norm
