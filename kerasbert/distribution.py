"""Training on several devices with the engines of each backend:
`keras.distribution` on JAX (data parallelism, and model parallelism with
the layout below), `tf.distribute` on TensorFlow (data parallelism).

The model-parallel layout is Megatron-LM's tensor parallelism written as GSPMD shardings:
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
            devices = _axis_size(mesh, axis)
            if size % devices:
                multiple = -(-size // devices) * devices
                raise ValueError(
                    f"{name} = {size} cannot be split evenly over the {devices} devices of mesh axis "
                    f"{axis!r}, which the distribution's layout uses for {path}. Use sizes that are "
                    f"multiples of {devices} (e.g. {name} = {multiple}; vocabularies are commonly "
                    f"padded so) or a mesh with fewer devices on {axis!r}."
                )


DISTRIBUTIONS = ("data", "model")


def data_parallel_replicas():
    """How many ways the active `keras.distribution` splits each batch
    (its batch axis), or 1. (`tf.distribute` splits uneven batches itself.)"""
    distribution = keras.distribution.distribution()
    if distribution is None or keras.backend.backend() != "jax":
        return 1
    return _axis_size(distribution.device_mesh, distribution.batch_dim_name)


def spans_host_devices():
    """Whether the active `keras.distribution` (JAX) spans several CPU
    devices: virtual devices of one host (`--xla_force_host_platform_device_count`)."""
    distribution = keras.distribution.distribution()
    if distribution is None or keras.backend.backend() != "jax":
        return False
    devices = [str(d).lower() for d in distribution.device_mesh.devices.flat]
    return len(devices) > 1 and all(d.startswith("cpu") for d in devices)


class StepByStep(keras.callbacks.Callback):
    """Makes `fit` and `evaluate` read each step's logs on the main thread
    before dispatching anything more, as Keras does for callbacks that act
    on every batch (this one does nothing with them).

    For JAX on several CPU devices of one host, where `Task.fit` and
    `Task.evaluate` add it. Left to itself Keras reads the logs on a thread
    of its own while the main thread dispatches on. On 8 virtual devices of
    2 loaded cores that deadlocked XLA's CPU client in 2 of 10 runs of
    tests/distributed_worker.py: 7 devices' threads waited in a step's
    all-reduce for the eighth, which never started, because the client's
    pool of 8 threads was full (the 7, and one launching a program
    dispatched after the step, waiting for a free slot on its device). A
    step at a time, no program is dispatched while one is in flight: no
    stall in 48 fits on the same machine.
    """

    def on_train_batch_end(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass


def _axis_size(device_mesh, axis_name):
    return device_mesh.shape[list(device_mesh.axis_names).index(axis_name)]


def check_global_batch(batch_size, replicas):
    """A ValueError unless `batch_size`, the global batch, splits evenly over
    `replicas` data-parallel replicas."""
    if batch_size % replicas:
        raise ValueError(
            f"batch_size={batch_size} (the global batch) must be a multiple of the {replicas} "
            "data-parallel replicas it is split over."
        )


class TrainingScope:
    """A context in which to build, compile and fit a model on several
    devices; `training_scope` makes one. `replicas` is the number of
    data-parallel copies the global batch is split over, `mesh_shape` the
    device mesh (`(batch,)` or `(batch, model)`), `engine` the
    `keras.distribution.Distribution` or `tf.distribute.Strategy` in use
    (None on one device)."""

    def __init__(self, engine, mesh_shape, replicas):
        self.engine, self.mesh_shape, self.replicas = engine, mesh_shape, replicas
        self._context = None

    def __enter__(self):
        if self.engine is None:
            return self
        self._context = self.engine.scope()
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        context, self._context = self._context, None
        return context.__exit__(*exc) if context is not None else False


def parse_mesh(mesh):
    """`"2x4"`, `"8"`, `(2, 4)` -> a tuple of positive ints (a ValueError
    names anything else)."""
    parts = mesh.lower().split("x") if isinstance(mesh, str) else mesh
    try:
        shape = tuple(int(part) for part in parts)
    except (TypeError, ValueError):
        shape = ()
    if not 1 <= len(shape) <= 2 or min(shape) < 1:
        raise ValueError(
            f"mesh must be BATCHxMODEL device counts such as '2x4' (or a tuple (2, 4)); got {mesh!r}."
        )
    return shape


def training_scope(distribution=None, mesh=None, batch_size=None):
    """The scope for training on this machine's (or these hosts') devices
    with the engine of the current backend.

    Args:
        distribution: None (one device), "data" (every device holds the
            whole model and a slice of each batch: `keras.distribution.
            DataParallel` on JAX, `tf.distribute.MirroredStrategy` on
            TensorFlow, `MultiWorkerMirroredStrategy` when `TF_CONFIG` is
            set) or "model" (JAX: `keras.distribution.ModelParallel` with
            `Encoder.get_layout_map` on a `(batch, model)` mesh).
        mesh: for "model", the `(batch, model)` device counts, e.g. "2x4";
            default `(1, all devices)`. For "data", all devices (`"8"`).
        batch_size: the global batch; checked to split evenly over the
            data-parallel replicas.

    Build, compile and fit inside it:

        with training_scope("model", "2x4", batch_size=64):
            model = kerasbert.MaskedLM(kerasbert.Encoder(...))
            model.compile()
            model.fit(dataset)
    """
    if distribution is None:
        if mesh is not None:
            raise ValueError(f"mesh={mesh!r} needs distribution='data' or 'model'.")
        return TrainingScope(None, (1,), 1)
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be None, 'data' or 'model'; got {distribution!r}.")
    shape = None if mesh is None else parse_mesh(mesh)
    backend = keras.backend.backend()
    if backend == "jax":
        scope = _keras_distribution(distribution, shape)
    elif backend == "tensorflow":
        scope = _tf_strategy(distribution, shape)
    else:
        raise ValueError(
            f"distribution={distribution!r} is not available on the {backend} backend: Keras's fit "
            "trains on one device there. Use the jax backend (data and model parallelism) or "
            "tensorflow (data parallelism); see docs/distributed.md."
        )
    if batch_size is not None:
        check_global_batch(batch_size, scope.replicas)
    return scope


def _keras_distribution(distribution, shape):
    devices = keras.distribution.list_devices()
    count = len(devices)
    if distribution == "data":
        if shape is not None and shape not in ((count,), (count, 1)):
            raise ValueError(
                f"distribution='data' replicates the model on all {count} devices; mesh={shape} "
                f"does not match (leave mesh out, or give '{count}'). A (batch, model) mesh is for "
                "distribution='model'."
            )
        return TrainingScope(keras.distribution.DataParallel(devices=devices), (count,), count)
    shape = shape or (1, count)
    if len(shape) == 1:
        shape = (1, shape[0])
    if shape[0] * shape[1] != count:
        raise ValueError(
            f"mesh {shape[0]}x{shape[1]} needs {shape[0] * shape[1]} devices; there are {count} "
            f"({devices[:4]}{'...' if count > 4 else ''})."
        )
    device_mesh = keras.distribution.DeviceMesh(shape, ("batch", "model"), devices)
    engine = keras.distribution.ModelParallel(layout_map=megatron_layout_map(device_mesh), batch_dim_name="batch")
    return TrainingScope(engine, shape, shape[0])


def _tf_strategy(distribution, shape):
    if distribution == "model":
        raise ValueError(
            "distribution='model' (tensor parallelism) runs on the jax backend (keras.distribution); "
            "on tensorflow use distribution='data' (MirroredStrategy)."
        )
    import os

    import tensorflow as tf

    if "TF_CONFIG" in os.environ:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    else:
        strategy = tf.distribute.MirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    if shape is not None and shape not in ((replicas,), (replicas, 1)):
        raise ValueError(
            f"distribution='data' on tensorflow uses all {replicas} replicas of {type(strategy).__name__}; "
            f"mesh={shape} does not match (leave mesh out)."
        )
    return TrainingScope(strategy, (replicas,), replicas)
