"""Quantized weights, through Keras's own quantization of its `Dense` and
`Embedding` layers.

- "int8": each kernel column (each embedding row) scaled to int8 by its
  absolute maximum; the inputs of a dense layer are scaled per row at run
  time and the product is taken in int8. For inference: the weights are
  frozen.
- "int4": the same in 4 bits, two values packed per byte (per column, or
  per block of rows with a `keras.quantizers.Int4QuantizationConfig`).
- "float8": dense layers compute in float8 (E4M3 forward, E5M2 gradients)
  with scales tracked from a history of maxima; the weights stay float and
  train (`fit` works; the speed-up needs a GPU with float8 units, and
  elsewhere the conversions make it slower). Embeddings stay float.

The encoder reads two weights itself rather than calling the layer that
holds them: the fused query-key-value kernel (`SelfAttention` calls the
layer instead when it is quantized) and, in masked-LM heads, the
token-embedding table (`embedding_table`).

A quantized model records which layer is quantized in which mode
(`quantized_modes`, `{layer path: mode}`); `requantize` quantizes the same
layers of a model built afresh, before its stored weights are assigned
(presets, `.keras` files).
"""

import contextlib
import gc
import warnings

import keras
import numpy as np
from keras import ops

MODES = ("int8", "int4", "float8")


def check_mode(mode, name="mode"):
    """`mode`, or a ValueError naming the argument (`name`) and the modes."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{name} must be one of {list(MODES)}; got {mode!r:.80}.")
    return mode


def quantizable(layer, mode):
    """Whether `quantize(model, mode)` quantizes `layer`: Keras's dense
    layers in every mode, its embedding tables in "int8" and "int4"; none
    quantized already."""
    kinds = (keras.layers.Dense,) if mode == "float8" else (keras.layers.Dense, keras.layers.Embedding)
    return isinstance(layer, kinds) and layer.quantization_mode is None


def quantize(model, mode, config=None):
    """Quantizes `model`'s dense layers and embedding tables in `mode`
    (`keras.Model.quantize` on the layers `quantizable` picks; `config`: a
    `keras.quantizers.QuantizationConfig` for that mode)."""
    check_mode(mode)
    if config is not None and not isinstance(config, keras.quantizers.QuantizationConfig):
        raise TypeError(f"config must be a keras.quantizers.QuantizationConfig or None; got {type(config).__name__}.")
    adapted = [layer.path for layer in model._flatten_layers() if getattr(layer, "lora_enabled", False)]
    if adapted:
        raise ValueError(f"{adapted[0]} has a LoRA adapter on; call merge_lora() before quantize().")
    done = quantized_modes(model)
    if done:
        raise ValueError(f"The model is quantized already ({sorted(set(done.values()))}); "
                         "quantize a model with float weights.")
    with warnings.catch_warnings(), one_collection():
        # NumPy's note on Keras's quantizers reading tensors (`__array__` without `copy`), once per layer.
        warnings.filterwarnings("ignore", message="__array__ implementation", category=DeprecationWarning)
        keras.Model.quantize(model, mode, config=config, filters=lambda layer: quantizable(layer, mode))


@contextlib.contextmanager
def one_collection():
    """Keras runs a full garbage collection each time a layer drops its float
    kernel for the quantized one (to free the device buffer), which takes
    0.4 s per layer in a process holding TensorFlow, JAX and torch. Inside,
    those collections skip the objects that existed before (`gc.freeze`);
    one full collection follows. Without effect where objects are frozen
    already (a server that froze them before forking)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()


def unwrap_quantize(model):
    """Lets `model.quantize` be the model class's own method. Keras wraps
    every layer's `quantize` in one that locks the layer's tracker after
    it; a functional model's tracker is never locked otherwise, and once
    locked, `compile` cannot track its optimizer. The wrapper's checks run
    on each quantized layer, whose `quantize` keeps it."""
    model.__dict__.pop("quantize", None)


def mode_name(policy):
    """The quantization mode of a quantized dtype `policy` as its name says
    it: "int8", "float8", "int4/-1" (per column) or "int4/<block size>"."""
    return policy.name.split("_from_")[0]


def _leaves(model):
    return [layer for layer in model._flatten_layers(include_self=False) if not layer._layers]


def quantized_modes(model, skip=None):
    """`{layer path: mode_name}` of the quantized layers of `model`, but
    those of the model `skip`."""
    skipped = {id(layer) for layer in _leaves(skip)} if skip is not None else set()
    return {layer.path: mode_name(layer.dtype_policy) for layer in _leaves(model)
            if layer.quantization_mode is not None and id(layer) not in skipped}


def check_float(model, written, remedy):
    """Refuses a quantized `model` where float weights are `written` (a
    ValueError naming its modes, what holds float weights and `remedy`)."""
    modes = quantized_modes(model)
    if modes:
        raise ValueError(f"this {type(model).__name__} is quantized ({sorted(set(modes.values()))}); {written} holds "
                         f"float weights: {remedy}.")


def requantize(model, modes, source="modes"):
    """Quantizes the layers of the built `model` that `modes` (`{layer path:
    mode_name}`, from `quantized_modes`) names, each in its mode, as
    `quantize` quantized them; their weights are then the stored ones to
    assign. `source` names where `modes` came from, for errors."""
    if not isinstance(modes, dict) or not all(isinstance(m, str) and m.split("/")[0] in MODES
                                              for m in modes.values()):
        raise ValueError(f"{source} must map layer paths to quantization modes among {list(MODES)}; "
                         f"got {modes!r:.200}.")
    layers = {layer.path: layer for layer in _leaves(model)}
    unknown = sorted(set(modes) - set(layers))
    if unknown:
        raise ValueError(f"{source} names layers {unknown[:3]} that this model does not have.")
    with one_collection():
        for path, mode in modes.items():
            layer = layers[path]
            if layer.quantization_mode is None:
                # Keras's policy setter quantizes a built layer in the policy's mode.
                layer.dtype_policy = f"{mode}_from_{layer.dtype_policy.name}"
    if modes:
        model._post_quantize(None)  # torch: the module's parameters are the new variables


def recorded_policy(policy, modes):
    """The dtype a config records for a model in `policy` whose layers
    `modes` (`quantized_modes`) are quantized: `policy` itself, or a
    `keras.dtype_policies.DTypePolicyMap` of those layers' policies over
    it (as Keras records a quantized model). `split_policy` reads it."""
    policy = _plain(keras.dtype_policies.get(policy))
    if not modes:
        return policy
    policies = {path: keras.dtype_policies.get(f"{mode}_from_{policy.name}") for path, mode in modes.items()}
    return keras.dtype_policies.DTypePolicyMap(default_policy=policy, policy_map=policies)


def split_policy(dtype):
    """`(policy, modes)` of a dtype a config holds: the models' dtype policy
    (None for None) and `{layer path: mode_name}` of a
    `keras.dtype_policies.DTypePolicyMap`'s quantized layers (else empty)."""
    if dtype is None:
        return None, {}
    policy = keras.dtype_policies.get(dtype)
    if not isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        return policy, {}
    layers = {path: keras.dtype_policies.get(policy[path]) for path in policy}
    return _plain(policy), {path: mode_name(p) for path, p in layers.items() if p.quantization_mode is not None}


def _plain(policy):
    return policy.default_policy if isinstance(policy, keras.dtype_policies.DTypePolicyMap) else policy


def stored_array(variable):
    """A weight's value as a preset stores it: a float32 array, or an array
    of its own integer dtype (quantized weights)."""
    value = np.asarray(ops.convert_to_numpy(variable))
    return value if value.dtype.kind in "iu" else value.astype(np.float32)


def embedding_table(layer, dtype):
    """The float table of the `keras.layers.Embedding` `layer`, `(input_dim,
    output_dim)` in `dtype`: its weight, or its rows looked up when the
    layer is quantized (the lookup scales them back)."""
    if layer.quantization_mode is None:
        return ops.cast(layer.embeddings, dtype)
    return ops.cast(layer(ops.arange(layer.input_dim, dtype="int32")), dtype)
