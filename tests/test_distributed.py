"""Distributed training on virtual CPU devices ends where single-device
training ends: keras.distribution data and model parallelism on JAX (8
devices), MirroredStrategy on TensorFlow (2). Each variable is placed as
the layout says.

The devices must exist before the backend starts, so the training runs in
one subprocess per backend (`tests/distributed_worker.py`)."""

import json
import os
import re
import subprocess
import sys
import warnings

import keras
import pytest

import kerasbert
from kerasbert.distribution import parse_mesh, spans_host_devices, training_scope

BACKEND = keras.backend.backend()
WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")
SPECS = {
    "jax": ["data:masked_lm", "model:pretrainer:2x4", "data:classifier", "model:electra:4x2",
            "model:uneven:2x4", "cli:pretrain:2x4",
            "data:partial", "data:ner", "data:qa"],
    "tensorflow": ["mirrored:masked_lm", "mirrored:classifier"],
}
MODEL_SHARDED = [  # (variable path, its axes under Encoder.get_layout_map); others are replicated
    (r"(.*/)?token_embedding/embeddings", ["model", None]),
    (r".*block_\d+/attention/qkv/kernel", [None, "model"]),
    (r".*block_\d+/attention/qkv/bias", ["model"]),
    (r".*block_\d+/attention/output_dense/kernel", ["model", None]),
    (r".*block_\d+/intermediate_dense/kernel", [None, "model"]),
    (r".*block_\d+/intermediate_dense/bias", ["model"]),
    (r".*block_\d+/output_dense/kernel", ["model", None]),
    (r"(mlm|generator)_head/bias", ["model"]),
]


def _expected_axes(path):
    return next((axes for pattern, axes in MODEL_SHARDED if re.fullmatch(pattern, path)), None)


@pytest.fixture(scope="module")
def results():
    if BACKEND not in SPECS:
        pytest.skip(f"Keras has no multi-device fit on the {BACKEND} backend (docs/distributed.md)")
    env = {**os.environ, "KERAS_BACKEND": BACKEND}
    pending, lines = SPECS[BACKEND], []
    for attempt in range(2):
        done = subprocess.run([sys.executable, WORKER, *pending], env=env, capture_output=True, text=True,
                              timeout=1200)
        finished = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        lines += finished
        pending = pending[len(finished):]
        if done.returncode == 0 or attempt or "Timeout (" not in done.stderr:
            break
        # A spec still running after SPEC_SECONDS (a few times its time on a loaded machine) is
        # stuck: the worker's watchdog stops it and prints every thread's stack, and the stuck spec
        # and the rest run once more in a fresh process. Until fit went a step at a time on several
        # CPU devices (kerasbert.distribution.StepByStep), a fit deadlocked in XLA's CPU client in
        # some full runs of the suite (and in 2 of 10 runs of the worker on a loaded machine).
        warnings.warn(f"{pending[0]} was stuck; rerunning {pending}: {done.stderr[-2000:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return {(r["strategy"], r["task"]): r for r in lines}


def _trained(results):
    return [r for r in results.values() if "placement" in r]


def test_every_run_ends_with_the_single_device_weights(results):
    runs = _trained(results)
    assert len(runs) == len(SPECS[BACKEND]) - 4 * (BACKEND == "jax")
    for run in runs:
        # Training moved the weights far more than the two runs differ.
        assert run["max_abs_update"] > 1e-3, run["task"]
        assert run["max_abs_difference"] <= 1e-4, (run["strategy"], run["task"], run["max_abs_difference"])


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution layouts are JAX's")
def test_model_parallel_variables_are_split_as_the_layout_says(results):
    for key, mesh in [(("model", "pretrainer"), (2, 4)), (("model", "electra"), (4, 2))]:
        model_devices = mesh[1]
        placement = results[key]["placement"]
        sharded = 0
        for path, place in placement.items():
            expected = _expected_axes(path)
            assert place["devices"] == 8, path
            if expected is None:
                assert not any(place["spec"]), path  # replicated
                assert place["shard_shape"] == place["shape"], path
                continue
            sharded += 1
            assert place["spec"] == expected, path
            split = [size // model_devices if axis else size for size, axis in zip(place["shape"], expected)]
            assert place["shard_shape"] == split, path
        assert sharded >= 10


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution layouts are JAX's")
def test_data_parallel_replicates_every_variable(results):
    for task in ("masked_lm", "classifier"):
        for path, place in results[("data", task)]["placement"].items():
            assert place["devices"] == 8 and not any(place["spec"]), path


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution layouts are JAX's")
def test_an_uneven_split_names_the_argument(results):
    error = results[("model", "uneven")].get("error")
    assert error and "vocabulary_size = 30522" in error and "'model'" in error and "30524" in error
    batch_error = results[("model", "uneven")].get("batch_error")
    assert batch_error and "batch_size=12" in batch_error and "8 data-parallel replicas" in batch_error


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution is JAX's")
def test_a_training_batch_that_does_not_split_over_the_replicas_is_cut(results):
    # 12 sentences, batches of 8, 8 replicas: one step of 8 per epoch.
    run = results[("data", "partial")]
    assert run["finite"] and run["moved"] > 1e-4 and run["steps"] == 2
    # Evaluation drops nothing: it refuses that last batch, takes 8 of 8, and predict returns all 12.
    assert "last batch of 4 examples (of 12, batch_size=8)" in run["evaluate_refused"]
    assert 0 <= run["accuracy"] <= 1 and run["predicted"] == [12, 2]


@pytest.mark.skipif(BACKEND != "jax", reason="keras.distribution is JAX's")
def test_question_answerer_trains_on_whole_replica_batches_with_its_schedule(results):
    run = results[("data", "qa")]
    steps_per_epoch = run["windows"] // 16 + (run["windows"] % 16 >= 8)
    assert run["steps"] == 2 * steps_per_epoch  # every batch ran, none was empty
    assert run["final_learning_rate"] == pytest.approx(0.0, abs=1e-9)  # the decay reached its end on time
    assert run["loss"][-1] < run["loss"][0]


@pytest.mark.skipif(BACKEND != "jax", reason="--distribution model is keras.distribution's (JAX)")
def test_cli_pretrains_the_same_under_model_and_data_parallelism(results):
    # Dropout on: both runs draw it with jax.random, which no sharding changes.
    run = results[("cli", "pretrain")]
    assert run["same_names"] and run["max_abs_difference"] <= 1e-4
    assert run["loss"][-1] < run["loss"][0]
    assert run["loss"] == pytest.approx(run["data_loss"], abs=1e-4)


@pytest.mark.skipif(BACKEND != "tensorflow", reason="tf.distribute is TensorFlow's")
def test_mirrored_variables_have_a_copy_per_device(results):
    for run in _trained(results):
        assert {place["copies"] for place in run["placement"].values()} == {2}


# --- the layout map itself, on any backend ----------------------------------------

def _mesh(axis_names=("batch", "model")):
    return keras.distribution.DeviceMesh((1, 1), axis_names, ["cpu:0"])


def test_layout_map_rules_match_each_variable_once():
    encoder = kerasbert.Encoder(vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=8,
                                intermediate_dim=16, max_sequence_length=16)
    model = kerasbert.BertPretrainer(encoder)
    layout_map = kerasbert.Encoder.get_layout_map(_mesh())
    for variable in model.variables:
        layout = layout_map[variable.path]  # raises if two rules match
        expected = _expected_axes(variable.path)
        assert (None if layout is None else list(layout.axes)) == expected, variable.path


def test_layout_map_on_another_axis_name_and_its_errors():
    layout_map = kerasbert.Encoder.get_layout_map(_mesh(("data", "tensor")), model_parallel_dim_name="tensor")
    assert layout_map["transformer_block_5/attention/qkv/kernel"].axes == (None, "tensor")
    with pytest.raises(ValueError, match="model_parallel_dim_name='model'.*'data', 'tensor'"):
        kerasbert.Encoder.get_layout_map(_mesh(("data", "tensor")))
    with pytest.raises(TypeError, match="device_mesh must be a keras.distribution.DeviceMesh"):
        kerasbert.Encoder.get_layout_map((2, 4))


# --- training_scope: choices and errors, in this (one-device) process -------------

def test_fit_and_evaluate_go_a_step_at_a_time_on_several_cpu_devices(monkeypatch):
    """On several CPU devices (JAX) each step's logs are read on the main
    thread before the next program is dispatched (`StepByStep`: two
    programs in flight once deadlocked XLA's CPU client). Elsewhere Keras
    reads them on a thread of its own where it can (JAX and torch)."""
    import threading

    import numpy as np

    from kerasbert.tasks import task as task_module

    if BACKEND == "jax":
        with keras.distribution.DataParallel(devices=["cpu:0", "cpu:1"]).scope():
            assert spans_host_devices()
    assert not spans_host_devices()
    threads = []

    class Threads(keras.callbacks.Callback):
        async_safe = True  # Keras may run it off the main thread

        def on_train_batch_end(self, batch, logs=None):
            threads.append(threading.current_thread())

        on_test_batch_end = on_train_batch_end

    encoder = kerasbert.Encoder(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                                max_sequence_length=16)
    model = kerasbert.TextClassifier(encoder, num_classes=2)
    x = {"token_ids": np.ones((16, 8), "int32"), "segment_ids": np.zeros((16, 8), "int32"),
         "padding_mask": np.ones((16, 8), "int32")}
    y = np.arange(16) % 2
    for spans in (True, False):
        monkeypatch.setattr(task_module, "spans_host_devices", lambda: spans)
        threads.clear()
        model.fit(x, y, batch_size=4, validation_data=(x, y), callbacks=[Threads()], verbose=0)
        model.evaluate(x, y, batch_size=4, callbacks=[Threads()], verbose=0)
        assert len(threads) == 4 + 4 + 4
        on_main = [t is threading.main_thread() for t in threads]
        assert all(on_main) if spans else not any(on_main) == (BACKEND != "tensorflow"), (spans, on_main)

def test_training_scope_without_distribution_is_one_device():
    with training_scope() as scope:
        assert scope.engine is None and scope.replicas == 1


@pytest.mark.parametrize("mesh", ["2x4", "8", (2, 4), [1, 8]])
def test_parse_mesh(mesh):
    assert parse_mesh(mesh) in ((2, 4), (8,), (1, 8))


@pytest.mark.parametrize("mesh", ["2x", "axb", "0x8", (2, 2, 2), 8, "-1x8"])
def test_parse_mesh_rejects(mesh):
    with pytest.raises(ValueError, match="mesh must be BATCHxMODEL"):
        parse_mesh(mesh)


def test_training_scope_errors_name_the_argument():
    with pytest.raises(ValueError, match="mesh='2x4' needs distribution"):
        training_scope(mesh="2x4")
    with pytest.raises(ValueError, match="distribution must be None, 'data' or 'model'; got 'tensor'"):
        training_scope("tensor")
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="mesh 2x4 needs 8 devices; there are 1"):
            training_scope("model", "2x4")
    elif BACKEND == "tensorflow":
        with pytest.raises(ValueError, match="runs on the jax backend"):
            training_scope("model", "2x4")
    else:
        with pytest.raises(ValueError, match="runs on the jax backend"):
            training_scope("model", "2x4")
        if "WORLD_SIZE" not in os.environ:
            with pytest.raises(ValueError, match="launch the script with torchrun"):
                training_scope("data")
