"""Calling a built sublayer from its owner's `call` without Keras's per-call work."""

import keras


def call_sublayer(owner, layer, inputs, **kwargs):
    """`layer(inputs, **kwargs)`, called from the `call` of `owner`, the
    layer that holds it.

    On torch every step runs `keras.layers.Layer.__call__` in Python: input
    conversion, the call context, name and autocast scopes, mask lookups and
    tree walks, about 0.1 ms a call. Inside `owner`'s call none of it changes
    what a built sublayer computes when the sublayer has the owner's dtype
    policy (and, under a mixed one, its autocasting: the owner's autocast
    scope is then the one `__call__` would open) and its inputs already have
    its compute dtype.
    There `layer.call` runs directly: all-MiniLM-L6-v2's forward of one
    8-token string took 12-13 instead of 16 ms, of 32 rows of 32 tokens
    88-89 instead of 97-105 ms (docs/performance_history.md).

    Everything else goes through `__call__` as usual: the other backends
    (their steps are traced once, so this Python runs only when tracing), an
    unbuilt layer, another dtype policy than the owner's, inputs of another
    dtype, a quantized or rematerialized layer, an activity regularizer, an
    active `keras.distribution`, a `training=None` left to the call context.
    The direct path does not run torch module hooks, `input_spec` checks or
    Keras masks; kerasbert's blocks use none of them.
    `tests/test_encoder.py` checks that the outputs are those of `__call__`.
    """
    if (
        keras.backend.backend() == "torch"
        and layer.built
        and kwargs.get("training", False) is not None
        and layer.dtype_policy.quantization_mode is None
        and getattr(layer, "_remat_mode", None) is None  # set by keras.RematScope
        and layer.activity_regularizer is None
        and layer.variable_dtype == owner.variable_dtype
        and layer.compute_dtype == owner.compute_dtype == keras.backend.standardize_dtype(inputs.dtype)
        # Under a mixed policy the owner's autocast scope is active: the
        # layer must take it as `__call__` would.
        and (owner.compute_dtype == owner.variable_dtype or layer.autocast == owner.autocast)
        and keras.distribution.distribution() is None
    ):
        return layer.call(inputs, **kwargs)
    return layer(inputs, **kwargs)
