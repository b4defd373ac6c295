"""Low-rank adapters (LoRA) on an encoder's dense layers, through Keras's own
`Dense.enable_lora`.

A target layer computes with `kernel + alpha / rank * A @ B`, where the
kernel is frozen, `A (in, rank)` starts from He-uniform values and
`B (rank, out)` from zeros, so training starts from the model as it was.
Keras's dense layers (kerasbert's `Dense`, and the fused query-key-value
layer whose `kernel` the attention reads) apply the sum wherever they read
`kernel`, so one adapter covers the fused QKV's three projections. Every
other weight of the encoder is frozen while adapters are on.
"""

import keras
import numpy as np

from kerasbert.layers.quantization import one_collection, stored_array
from kerasbert.utils.checks import check_int, check_number

# Target name -> the path of attributes from a transformer block to its dense layer.
TARGETS = {
    "qkv": ("attention", "qkv"),
    "attention_output": ("attention", "output_dense"),
    "intermediate": ("intermediate_dense",),
    "output": ("output_dense",),
}
DEFAULT_TARGETS = tuple(TARGETS)
ADAPTER_NAMES = ("lora_kernel_a", "lora_kernel_b")


def check_targets(targets, name="targets"):
    """`targets` as a tuple of `TARGETS` names, or a ValueError/TypeError
    naming the argument (`name`)."""
    if isinstance(targets, str) or not isinstance(targets, (list, tuple)) or not targets:
        raise TypeError(f"{name} must be a non-empty list of names among {list(TARGETS)}; got {targets!r:.80}.")
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise ValueError(f"{name}={list(targets)!r} names {unknown}, which are not among {list(TARGETS)}.")
    return tuple(dict.fromkeys(targets))


def target_layers(encoder, targets):
    """The dense layers `targets` name in each of the encoder's transformer
    blocks (each once: ALBERT's blocks are shared by several layers)."""
    layers = {}
    for block in encoder.transformer_blocks:
        for target in targets:
            layer = block
            for name in TARGETS[target]:
                layer = getattr(layer, name)
            layers[id(layer)] = layer
    return list(layers.values())


def lora_layers(encoder):
    """The dense layers of `encoder`'s blocks with an adapter on."""
    return [layer for layer in target_layers(encoder, DEFAULT_TARGETS) if layer.lora_enabled]


def enable_lora(encoder, rank, alpha=None, targets=DEFAULT_TARGETS):
    """Freezes every weight of the built `encoder` and puts a rank-`rank`
    adapter (scaled by `alpha / rank`; `alpha` defaults to `rank`) on each
    of its `targets` layers. Returns the adapted layers."""
    rank = check_int("rank", rank, 1)
    alpha = float(rank) if alpha is None else check_number("alpha", alpha, 0.0, low_open=True)
    targets = check_targets(targets)
    if lora_layers(encoder):
        raise ValueError("LoRA is already enabled on this encoder; call merge_lora() before enabling it again.")
    layers = target_layers(encoder, targets)
    for layer in layers:
        if layer.quantization_mode is not None:
            raise ValueError(f"{layer.path} is quantized ({layer.quantization_mode}); enable LoRA before quantize(), "
                             "train, then merge_lora() and quantize.")
    frozen = [variable for variable in encoder.weights if variable.trainable]
    for variable in frozen:
        variable.trainable = False
    encoder._lora_frozen = tuple(variable.path for variable in frozen)  # made trainable again by merge_lora
    for layer in layers:
        layer.enable_lora(rank, lora_alpha=alpha)
    return layers


def merged_kernel(layer):
    """The float32 kernel of a layer with an adapter on: `kernel + alpha /
    rank * A @ B`."""
    kernel = keras.ops.convert_to_numpy(keras.ops.cast(layer._kernel, "float32"))
    a, b = (keras.ops.convert_to_numpy(getattr(layer, name)) for name in ADAPTER_NAMES)
    return kernel + np.float32(layer.lora_alpha / layer.lora_rank) * (a @ b)


def merge_lora(encoder):
    """Folds each adapter of `encoder` into its kernel, removes the adapters'
    weights and makes the weights `enable_lora` froze trainable again."""
    with one_collection():  # Keras collects garbage at each deleted variable
        for layer in lora_layers(encoder):
            merged = merged_kernel(layer)
            layer._tracker.unlock()
            for name in ADAPTER_NAMES:
                delattr(layer, name)
            layer._tracker.lock()
            layer.lora_enabled = False
            layer.lora_rank = layer.lora_alpha = None
            layer._kernel.assign(merged)
    frozen = set(getattr(encoder, "_lora_frozen", ()))
    for variable in encoder.weights:
        if variable.path in frozen:
            variable.trainable = True


def adapter_settings(encoder):
    """{"rank", "alpha", "targets"} of the adapters on `encoder`, or None."""
    layers = lora_layers(encoder)
    if not layers:
        return None
    targets = [t for t in TARGETS if all(layer.lora_enabled for layer in target_layers(encoder, (t,)))]
    return {"rank": int(layers[0].lora_rank), "alpha": float(layers[0].lora_alpha), "targets": targets}


def base_tensors(encoder):
    """{variable path: array} of `encoder`'s weights without its adapters'
    own: the frozen base they adapt (float32; quantized weights in their
    integer dtype)."""
    adapters = adapter_tensors(encoder)
    return {v.path: stored_array(v) for v in encoder.weights if v.path not in adapters}


def weight_tensors(encoder):
    """`base_tensors` with each adapter folded into its kernel: the weights
    of the encoder without adapters that computes the same."""
    return {**base_tensors(encoder), **{layer._kernel.path: merged_kernel(layer) for layer in lora_layers(encoder)}}


def adapter_tensors(encoder):
    """{variable path: float32 array} of the adapters' weights."""
    return {getattr(layer, name).path: stored_array(getattr(layer, name))
            for layer in lora_layers(encoder) for name in ADAPTER_NAMES}
