"""Calling a built sublayer from its parent's `call` without Keras's per-call work."""

import keras


def call_sublayer(layer, inputs, **kwargs):
    """`layer(inputs, **kwargs)`, from the `call` of the layer that owns it.

    On torch every step runs `keras.layers.Layer.__call__` in Python: input
    conversion, the call context, name and autocast scopes, mask lookups and
    tree walks, about 0.1 ms a call. Inside an already-built parent none of
    it changes the result of a plain float layer whose inputs already have
    its dtype, so there `layer.call` runs directly: all-MiniLM-L6-v2's
    forward of one 8-token string took 12-13 instead of 16 ms, of 32 rows
    of 32 tokens 88-89 instead of 97-105 ms (docs/performance.md). Anything that needs the machinery goes through
    `__call__` as usual: the other backends (their steps are traced once, so
    the Python runs only when tracing), an unbuilt layer, mixed or
    mismatched dtypes (autocasting), a quantized or rematerialized layer, an
    active `keras.distribution`, or a `training` left to the call context.
    The results are the same either way (tests/test_encoder.py).
    """
    if (
        keras.backend.backend() == "torch"
        and layer.built
        and kwargs.get("training", False) is not None
        and layer.dtype_policy.quantization_mode is None
        and getattr(layer, "_remat_mode", None) is None
        and layer.compute_dtype == layer.variable_dtype == keras.backend.standardize_dtype(inputs.dtype)
        and keras.distribution.distribution() is None
    ):
        return layer.call(inputs, **kwargs)
    return layer(inputs, **kwargs)
