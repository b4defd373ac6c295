"""Sharding the encoder and its heads over a device mesh (Keras's
`keras.distribution` API; JAX backend).

The layout is Megatron-LM's tensor parallelism written as GSPMD shardings:
the QKV projection and the first FFN matrix are split by columns, the
attention output and second FFN matrix by rows, so each block needs one
all-reduce per sublayer; the token table (and with it the tied MLM decoder
and its bias) is split by vocabulary rows. Everything else (LayerNorms,
position and segment tables, the pooler, classifier heads) is small and
replicated. Variables are matched by path, so the encoder may sit inside
any task, or twice (ELECTRA's generator and discriminator).
"""

import keras

# (variable path pattern, axes); "model" stands for the model-parallel axis.
_MEGATRON_LAYOUT = (
    (r"(.*/)?token_embedding/embeddings", ("model", None)),  # (vocab, width)
    (r"(.*/)?transformer_block_\d+/attention/qkv/kernel", (None, "model")),  # (hidden, 3 hidden)
    (r"(.*/)?transformer_block_\d+/attention/qkv/bias", ("model",)),
    (r"(.*/)?transformer_block_\d+/attention/output_dense/kernel", ("model", None)),  # (hidden, hidden)
    (r"(.*/)?transformer_block_\d+/intermediate_dense/kernel", (None, "model")),  # (hidden, intermediate)
    (r"(.*/)?transformer_block_\d+/intermediate_dense/bias", ("model",)),
    (r"(.*/)?transformer_block_\d+/output_dense/kernel", ("model", None)),  # (intermediate, hidden)
    (r"(.*/)?(mlm_head|generator_head)/bias", ("model",)),  # (vocab,)
)


def megatron_layout_map(device_mesh, model_parallel_dim_name="model"):
    """The `keras.distribution.LayoutMap` of `Encoder.get_layout_map`."""
    if not isinstance(device_mesh, keras.distribution.DeviceMesh):
        raise TypeError(
            "device_mesh must be a keras.distribution.DeviceMesh, e.g. "
            "DeviceMesh((2, 4), ('batch', 'model'), keras.distribution.list_devices()); "
            f"got {device_mesh!r}."
        )
    if model_parallel_dim_name not in device_mesh.axis_names:
        raise ValueError(
            f"model_parallel_dim_name={model_parallel_dim_name!r} is not an axis of the "
            f"device mesh, whose axes are {tuple(device_mesh.axis_names)}."
        )
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in _MEGATRON_LAYOUT:
        layout_map[pattern] = tuple(model_parallel_dim_name if axis == "model" else axis for axis in axes)
    return layout_map


def check_shardable(config):
    """Raise a ValueError naming the argument when the active distribution
    would split one of the encoder's dimensions unevenly (XLA requires every
    sharded dimension to be a multiple of its mesh axis)."""
    distribution = keras.distribution.distribution()
    if distribution is None or keras.backend.backend() != "jax":
        return
    hidden = config["hidden_dim"]
    width = config["embedding_dim"] or hidden
    width_name = "embedding_dim" if config["embedding_dim"] else "hidden_dim"
    vocabulary = config["vocabulary_size"]
    intermediate = config["intermediate_dim"]
    # (path of a representative variable, its shape, the argument behind each dimension)
    variables = (
        ("token_embedding/embeddings", (vocabulary, width), ("vocabulary_size", width_name)),
        ("transformer_block_0/attention/output_dense/kernel", (hidden, hidden), ("hidden_dim", "hidden_dim")),
        ("transformer_block_0/attention/qkv/kernel", (hidden, 3 * hidden), ("hidden_dim", "3 * hidden_dim")),
        ("transformer_block_0/intermediate_dense/kernel", (hidden, intermediate), ("hidden_dim", "intermediate_dim")),
        ("transformer_block_0/output_dense/kernel", (intermediate, hidden), ("intermediate_dim", "hidden_dim")),
    )
    mesh = distribution.device_mesh
    for path, shape, names in variables:
        layout = distribution.get_tensor_layout(path)
        if layout is None:
            continue
        for size, name, axis in zip(shape, names, layout.axes):
            if axis is None:
                continue
            devices = mesh.shape[list(mesh.axis_names).index(axis)]
            if size % devices:
                multiple = -(-size // devices) * devices
                raise ValueError(
                    f"{name} = {size} cannot be split evenly over the {devices} devices of mesh axis "
                    f"{axis!r}, which the distribution's layout uses for {path}. Use sizes that are "
                    f"multiples of {devices} (e.g. {name} = {multiple}; vocabularies are commonly "
                    f"padded so) or a mesh with fewer devices on {axis!r}."
                )
