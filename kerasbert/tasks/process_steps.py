"""The train and test steps of a task trained by several processes, where
Keras 3.15's own steps do not serve.

- **torch** (`kerasbert.distribution.TorchDataParallel`): Keras's torch
  trainer calls the model itself, so no gradient would cross processes.
  `torch_train_step` runs the forward pass through
  `torch.nn.parallel.DistributedDataParallel`, which averages the
  gradients over the processes while the backward pass runs, then applies
  them with the task's Keras optimizer. Both steps keep the metrics'
  states those of the global batches: each step's additions are summed
  over the processes.
- **TensorFlow** (`tf.distribute.MultiWorkerMirroredStrategy`): Keras
  averages each step's logs over the workers with an `axis=0` reduction
  that fails on scalars, and reduces the first batch's nested structure
  with a call that takes one tensor (keras-team/keras#20585).
  `per_worker_logs` gives each log that axis; `first_local_batch` hands
  Keras this worker's first replica batch to build the model from.
"""

import keras

from kerasbert.utils.optional import tf


def _rows(x):
    return next(value for value in keras.tree.flatten(x) if value is not None).shape[0]


def _data_parallel_module(model):
    """The model wrapped in DistributedDataParallel, made again when the
    variables that train changed."""
    import torch

    key = tuple(id(v.value) for v in model.trainable_variables)
    cached = model.__dict__.get("_kerasbert_ddp")
    if cached is None or cached[0] != key:
        device = torch.cuda.current_device() if torch.cuda.is_available() else None
        module = torch.nn.parallel.DistributedDataParallel(
            model,
            device_ids=None if device is None else [device],
            # Heads a task does not use (a pooler under MLM) get no gradient.
            find_unused_parameters=True,
            broadcast_buffers=False,
        )
        cached = (key, module)
        object.__setattr__(model, "_kerasbert_ddp", cached)  # untracked by Keras and torch
    return cached[1]


def _metric_states(model):
    """The metrics' variables and their values, flattened into one float64
    tensor."""
    import torch

    variables = [v for metric in model.metrics for v in metric.variables]
    return variables, torch.cat([v.value.detach().reshape(-1).to(torch.float64) for v in variables])


def _combine_metric_states(model, before):
    """Makes the metrics' states (equal on every process when the step
    began: `before`) those of the whole batch: each process added its
    share's, so the sum over processes holds the step's start
    `processes - 1` times too many."""
    import torch.distributed as dist

    variables, states = _metric_states(model)
    dist.all_reduce(states)
    states -= (dist.get_world_size() - 1) * before
    start = 0
    for variable in variables:
        size = variable.value.numel()
        variable.assign(states[start:start + size].reshape(variable.shape).to(variable.value.dtype))
        start += size
    return model.get_metrics_result()


def torch_train_step(model, data):
    """One step of `model` (a Keras model on torch) on this process's share
    of a global batch, with the gradients averaged over the processes."""
    import torch

    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    before = _metric_states(model)[1]
    y_pred = _data_parallel_module(model)(x, training=True)
    model.zero_grad()
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    model._loss_tracker.update_state(loss, sample_weight=_rows(x))
    loss = model.optimizer.scale_loss(loss)
    loss.backward()
    variables = model.trainable_weights[:]
    with torch.no_grad():
        model.optimizer.apply([v.value.grad for v in variables], variables)
    model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
    return _combine_metric_states(model, before)


def torch_test_step(model, data):
    """Keras's test step on this process's share, with the logs of the
    whole batch."""
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    before = _metric_states(model)[1]
    y_pred = model(x, training=False)
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
    model._loss_tracker.update_state(loss, sample_weight=_rows(x))
    model.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
    return _combine_metric_states(model, before)


def multi_worker_strategy(model):
    """The model's `tf.distribute.MultiWorkerMirroredStrategy`, or None."""
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is None or keras.backend.backend() != "tensorflow":
        return None
    return strategy if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) else None


def per_worker_logs(model, logs):
    """`logs` with a leading axis of 1, for Keras's mean over the workers."""
    if multi_worker_strategy(model) is None:
        return logs
    return {name: tf.reshape(value, [1]) for name, value in logs.items()}


def first_local_batch(strategy, iterator):
    """The first batch of Keras's epoch iterator, as this worker's first
    replica holds it."""
    for _, _, distributed_iterator in iterator:
        batch = next(distributed_iterator)
        return tf.nest.map_structure(lambda value: strategy.experimental_local_results(value)[0], batch)
    return None
