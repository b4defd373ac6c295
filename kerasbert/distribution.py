"""Training on several devices with the engines of each backend:
`keras.distribution` on JAX (data parallelism, and model parallelism with
the layout below), `tf.distribute` on TensorFlow (data parallelism),
`torch.distributed` with DistributedDataParallel on torch (data
parallelism, one process per device). Each runs in one process or in
several launched as clusters launch them (see `training_scope`).

The model-parallel layout is Megatron-LM's tensor parallelism written as GSPMD shardings:
the QKV projection and the first FFN matrix are split by columns, the
attention output and second FFN matrix by rows, so each block needs one
all-reduce per sublayer; the token table (and with it the tied MLM decoder
and its bias) is split by vocabulary rows. Everything else (LayerNorms,
position and segment tables, the pooler, classifier heads) is small and
replicated. Variables are matched by path, so the encoder may sit inside
any task, or twice (ELECTRA's generator and discriminator).
"""

import contextlib
import os

import keras

from kerasbert.utils.optional import is_dataset

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
    `keras.distribution.Distribution`, `tf.distribute.Strategy` or
    `TorchDataParallel` in use (None on one device). `process_index` and
    `process_count` place this process among those training together
    (0 and 1 in a single process); `is_chief` is process 0's, the one that
    writes files."""

    def __init__(self, engine, mesh_shape, replicas, process_index=0, process_count=1):
        self.engine, self.mesh_shape, self.replicas = engine, mesh_shape, replicas
        self.process_index, self.process_count = process_index, process_count
        self._context = None

    @property
    def is_chief(self):
        return self.process_index == 0

    def barrier(self, name):
        """Waits until every process has reached the barrier called `name`."""
        if self.process_count == 1:
            return
        backend = keras.backend.backend()
        if backend == "jax":
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(name)
        elif backend == "torch":
            import torch.distributed

            torch.distributed.barrier()
        else:  # an all-reduce of one number across the workers
            import tensorflow as tf

            self.engine.reduce("SUM", self.engine.run(lambda: tf.constant(1.0)), axis=None)

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
            set, `TorchDataParallel` on torch) or "model" (JAX:
            `keras.distribution.ModelParallel` with `Encoder.get_layout_map`
            on a `(batch, model)` mesh).
        mesh: for "model", the `(batch, model)` device counts, e.g. "2x4";
            default `(1, all devices)`. For "data", all devices (`"8"`).
        batch_size: the global batch; checked to split evenly over the
            data-parallel replicas.

    Several processes (one per host, or on torch one per device) join as
    their launcher tells them: on JAX through `keras.distribution.
    initialize` (called here when `KERAS_DISTRIBUTION_NUM_PROCESSES` is set
    and JAX has not joined yet), on TensorFlow through `TF_CONFIG`, on torch
    through the variables `torchrun` sets (`WORLD_SIZE`, `RANK`, ...).

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
        scope = _torch_processes(distribution, shape)
    if batch_size is not None:
        check_global_batch(batch_size, scope.replicas)
    return scope


def _keras_distribution(distribution, shape):
    import jax

    if "KERAS_DISTRIBUTION_NUM_PROCESSES" in os.environ and not jax.distributed.is_initialized():
        keras.distribution.initialize()
    processes = jax.process_index(), jax.process_count()
    devices = keras.distribution.list_devices()
    count = len(devices)
    if distribution == "data":
        if shape is not None and shape not in ((count,), (count, 1)):
            raise ValueError(
                f"distribution='data' replicates the model on all {count} devices; mesh={shape} "
                f"does not match (leave mesh out, or give '{count}'). A (batch, model) mesh is for "
                "distribution='model'."
            )
        return TrainingScope(keras.distribution.DataParallel(devices=devices), (count,), count, *processes)
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
    return TrainingScope(engine, shape, shape[0], *processes)


def _tf_strategy(distribution, shape):
    if distribution == "model":
        raise ValueError(
            "distribution='model' (tensor parallelism) runs on the jax backend (keras.distribution); "
            "on tensorflow use distribution='data' (MirroredStrategy)."
        )
    import tensorflow as tf

    processes = 0, 1
    if "TF_CONFIG" in os.environ:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        resolver = strategy.cluster_resolver
        processes = resolver.task_id, len(resolver.cluster_spec().as_dict().get("worker", ())) or 1
    else:
        strategy = tf.distribute.MirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    if shape is not None and shape not in ((replicas,), (replicas, 1)):
        raise ValueError(
            f"distribution='data' on tensorflow uses all {replicas} replicas of {type(strategy).__name__}; "
            f"mesh={shape} does not match (leave mesh out)."
        )
    return TrainingScope(strategy, (replicas,), replicas, *processes)


def _torch_processes(distribution, shape):
    if distribution == "model":
        raise ValueError(
            "distribution='model' (tensor parallelism) runs on the jax backend (keras.distribution); "
            "on torch use distribution='data' (DistributedDataParallel, one process per device)."
        )
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if "WORLD_SIZE" not in os.environ:
            raise ValueError(
                "distribution='data' on the torch backend trains one process per device: launch the "
                "script with torchrun (e.g. `torchrun --nproc-per-node 8 train.py`), which sets "
                "WORLD_SIZE, RANK and MASTER_ADDR, or call torch.distributed.init_process_group "
                "first; see docs/distributed.md."
            )
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    engine = TorchDataParallel()
    if shape is not None and shape not in ((engine.world_size,), (engine.world_size, 1)):
        raise ValueError(
            f"distribution='data' on torch uses all {engine.world_size} processes; mesh={shape} "
            "does not match (leave mesh out)."
        )
    return TrainingScope(engine, (engine.world_size,), engine.world_size, engine.rank, engine.world_size)


_ACTIVE_TORCH_ENGINE = []


def torch_data_parallel():
    """The `TorchDataParallel` whose scope is active, or None."""
    return _ACTIVE_TORCH_ENGINE[-1] if _ACTIVE_TORCH_ENGINE else None


def batch_share_replicas():
    """How many programs each compute the loss of a share of the global
    batch, their gradients combined after: `tf.distribute`'s replicas,
    `TorchDataParallel`'s processes. 1 on JAX, where one program sees the
    whole (sharded) batch, and on one device."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.distribute.get_strategy().num_replicas_in_sync
    engine = torch_data_parallel()
    return 1 if engine is None else engine.world_size


def sum_over_replicas(value):
    """A scalar `value` of this replica's share summed over those programs
    (no gradient flows through it)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        return value if context is None else context.all_reduce("SUM", tf.stop_gradient(value))
    if backend == "torch" and torch_data_parallel() is not None:
        import torch.distributed

        value = value.detach().clone()
        torch.distributed.all_reduce(value)
    return value


class TorchDataParallel:
    """Data parallelism on torch: one process per device (as `torchrun`
    starts them, `torch.distributed` joined), each holding the whole model
    and its share of every global batch; `torch.nn.parallel.
    DistributedDataParallel` averages the gradients during the backward
    pass. Tasks built, compiled and fit in its `scope()` train through it
    (`kerasbert.tasks.process_steps`); `fit` and `evaluate` give each
    process its share of a `tf.data.Dataset` (`distribute_dataset`), as
    Keras's distributions do on JAX, unless `auto_shard_dataset` is False
    (the data is split per process already)."""

    def __init__(self, auto_shard_dataset=True):
        import torch.distributed as dist

        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.auto_shard_dataset = auto_shard_dataset

    @contextlib.contextmanager
    def scope(self):
        _ACTIVE_TORCH_ENGINE.append(self)
        try:
            yield self
        finally:
            _ACTIVE_TORCH_ENGINE.remove(self)

    def distribute_dataset(self, dataset):
        """This process's share of `dataset`, whose batches are global ones:
        the `rank`-th slice of each."""
        if not self.auto_shard_dataset or self.world_size == 1:
            return dataset
        if not is_dataset(dataset):
            raise ValueError(
                f"Training in {self.world_size} torch processes splits each batch of a "
                f"tf.data.Dataset among them; got {type(dataset).__name__}. Pass a tf.data.Dataset of "
                "global batches, or give each process its own share and set "
                "auto_shard_dataset=False on the TorchDataParallel engine."
            )
        import tensorflow as tf

        batch = tf.nest.flatten(dataset.element_spec)[0].shape[0]
        if batch is None or batch % self.world_size:
            raise ValueError(
                f"Each batch of the dataset (batch size {batch or 'unknown'}) must "
                f"split evenly over the {self.world_size} processes: batch it with a fixed size "
                f"that is a multiple of {self.world_size} (drop_remainder=True)."
            )
        return dataset.rebatch(batch // self.world_size).shard(self.world_size, self.rank)
