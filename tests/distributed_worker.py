"""Trains one task for a few steps on one device, then again from the same
weights under a distribution on virtual CPU devices (8 on JAX, 2 on
TensorFlow), and prints (JSON) the
largest weight difference, how far training moved the weights and how each
variable is placed (the time per step is benchmarks/distributed.py's).

It runs in a process of its own (the virtual devices must exist before the
backend starts), which `tests/test_distributed.py` starts:

    KERAS_BACKEND=jax python tests/distributed_worker.py data:masked_lm model:pretrainer:2x4 ...
    KERAS_BACKEND=tensorflow python tests/distributed_worker.py mirrored:masked_lm

Each argument is STRATEGY:TASK[:MESH], and gives one JSON line.
STRATEGY: data or model (keras.distribution, JAX), mirrored (TensorFlow).
TASK: masked_lm, pretrainer, classifier (raw sentences), ner (words, CRF) or electra;
qa, which trains a QuestionAnswerer under the distribution only; partial; or uneven,
which builds an encoder the mesh cannot split evenly and reports the error.
MESH: the (batch, model) mesh of model parallelism, e.g. 2x4 (the default).
"""

import json
import os
import sys
import time

# JAX's meshes are 2x4 and 4x2. TensorFlow's MirroredStrategy traces the step
# once per replica: 2 replicas check what 8 do (a split batch, summed
# gradients, a copy of each variable per device) in a third of the time
# (26 s against 72 s for its two specs).
DEVICES = 8 if os.environ.get("KERAS_BACKEND") == "jax" else 2
_STRATEGIES = {}
BATCH = 16
STEPS = 3
SPEC_SECONDS = float(os.environ.get("DISTRIBUTED_SPEC_SECONDS", 300))


def _start_backend(backend):
    if backend == "jax":
        flags = os.environ.get("XLA_FLAGS", "")
        # 8 virtual devices share 2 cores in CI: a loaded machine can keep one device's thread from
        # joining an all-reduce within XLA's default 40 s, which aborts the process; wait longer.
        # Each device runs its programs on a thread of its own; Eigen's intra-op pool on top of them
        # only oversubscribes the 2 cores. Without it the specs took 177 and 154 s against 202 and
        # 206 s (alternating runs, one process each). (It did not prevent the deadlock that
        # kerasbert.distribution.StepByStep prevents.)
        os.environ["XLA_FLAGS"] = (f"{flags} --xla_force_host_platform_device_count={DEVICES}"
                                   " --xla_cpu_multi_thread_eigen=false"
                                   " --xla_cpu_collective_call_terminate_timeout_seconds=900"
                                   " --xla_cpu_collective_call_warn_stuck_timeout_seconds=300")
    import tensorflow as tf

    if backend == "tensorflow":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * DEVICES)


def _features(vocabulary_size, seq=16, masked=4, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = {
        "token_ids": rng.integers(5, vocabulary_size, (BATCH * STEPS, seq)).astype("int32"),
        "segment_ids": (np.arange(seq)[None] >= seq // 2).repeat(BATCH * STEPS, 0).astype("int32"),
        "padding_mask": np.ones((BATCH * STEPS, seq), "int32"),
        "mask_positions": np.sort(rng.permuted(np.tile(np.arange(1, seq), (BATCH * STEPS, 1)), axis=1)[:, :masked], 1)
        .astype("int32"),
    }
    mask_ids = rng.integers(5, vocabulary_size, (BATCH * STEPS, masked)).astype("int32")
    return x, mask_ids, np.ones((BATCH * STEPS, masked), "float32")


def _build(task, tokenizer, jit_compile=True):
    import keras

    import kerasbert
    from kerasbert.preprocessing import (
        QuestionAnsweringPreprocessor,
        TextPreprocessor,
        TokenClassificationPreprocessor,
    )

    size = dict(num_layers=2, num_heads=4, hidden_dim=16, intermediate_dim=32, max_sequence_length=128,
                dropout=0.0, initializer_range=0.2)
    if task == "classifier":
        # TensorFlow's replicas (no XLA) retrace per padded length: one length there.
        preprocessor = TextPreprocessor(tokenizer, sequence_length=32, pad_to_sequence_length=not jit_compile)
        model = kerasbert.TextClassifier(kerasbert.Encoder(vocabulary_size=30522, **size), num_classes=2,
                                         preprocessor=preprocessor, dropout=0.0)
        model.compile(learning_rate=1e-3, head_learning_rate_multiplier=10.0, warmup_fraction=0.0,
                      jit_compile=jit_compile)
        return model
    if task == "ner":
        preprocessor = TokenClassificationPreprocessor(tokenizer, sequence_length=32, pad_to_sequence_length=False)
        model = kerasbert.TokenClassifier(kerasbert.Encoder(vocabulary_size=30522, **size), labels=_conll().label_names,
                                          crf=True, preprocessor=preprocessor, dropout=0.0)
        model.compile(learning_rate=1e-3, head_learning_rate_multiplier=10.0, warmup_fraction=0.0,
                      jit_compile=jit_compile)
        return model
    if task == "qa":
        preprocessor = QuestionAnsweringPreprocessor(tokenizer, sequence_length=128, doc_stride=16,
                                                     max_question_length=32)
        model = kerasbert.QuestionAnswerer(kerasbert.Encoder(vocabulary_size=30522, **size), preprocessor=preprocessor)
        model.compile(learning_rate=1e-3, head_learning_rate_multiplier=10.0, warmup_fraction=0.0,
                      jit_compile=jit_compile)
        return model
    if task == "electra":
        discriminator = kerasbert.Encoder(vocabulary_size=64, embedding_dim=8, **size)
        model = kerasbert.ElectraPretrainer(None, discriminator, seed=1)
    elif task == "pretrainer":
        model = kerasbert.BertPretrainer(kerasbert.Encoder(vocabulary_size=64, **size), sentence_task="nsp")
    else:
        model = kerasbert.MaskedLM(kerasbert.Encoder(vocabulary_size=64, **size))
    model.compile(optimizer=keras.optimizers.AdamW(1e-3), jit_compile=jit_compile)
    return model


def _sample(name):
    return os.path.join(os.path.dirname(__file__), "data", name)


def _conll():
    from kerasbert.readers import read_conll

    return read_conll(_sample("conll2003_sample.txt"))


def _fit_arguments(task):
    import numpy as np

    if task == "ner":  # 13 sentences, 16 rows per batch: one batch of 8 (the rest sits out) per epoch
        data = _conll()
        return dict(x=(data.words * 4)[: BATCH * STEPS], y=(data.tag_ids() * 4)[: BATCH * STEPS], shuffle=False)
    if task == "qa":
        from kerasbert.readers import read_squad

        return dict(x=read_squad(_sample("squad_v2_sample.json")), shuffle=False)

    if task == "classifier":
        from kerasbert.readers import read_glue_tsv

        data = read_glue_tsv(_sample("glue_sst2.tsv"), "sentence", "label")
        x = (list(data.x) * 4)[: BATCH * STEPS]
        y = (list(data.y) * 4)[: BATCH * STEPS]
        return dict(x=x, y=y, shuffle=False)
    x, mask_ids, mask_weights = _features(64)
    if task == "masked_lm":
        return dict(x=x, y=mask_ids, sample_weight=mask_weights, shuffle=False)
    if task == "electra":
        return dict(x={**x, "mask_weights": mask_weights}, y=mask_ids, shuffle=False)
    nsp = (np.arange(BATCH * STEPS) % 2).astype("int32")
    weights = {"mlm": mask_weights, "nsp": np.ones(BATCH * STEPS, "float32")}
    return dict(x=x, y={"mlm": mask_ids, "nsp": nsp}, sample_weight=weights, shuffle=False)


def _train(model, arguments):
    """STEPS steps of `fit`: the trained weights."""
    import keras

    model.fit(**arguments, batch_size=BATCH, epochs=1, verbose=0)
    return [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]


def _placement(model, backend):
    """path -> how the variable is placed: JAX, its partition spec and the
    shape of one shard; TensorFlow, the devices holding a copy."""
    placement = {}
    for variable in model.trainable_variables:
        if backend == "jax":
            array = variable.value
            placement[variable.path] = {
                "spec": [axis for axis in array.sharding.spec] if hasattr(array.sharding, "spec") else None,
                "shard_shape": list(array.addressable_shards[0].data.shape),
                "shape": list(array.shape),
                "devices": len(array.sharding.device_set),
            }
        else:
            values = getattr(variable.value, "values", None)
            placement[variable.path] = {"copies": len(values) if values is not None else 1,
                                        "shape": list(variable.shape)}
    return placement


def _distribution(strategy, backend, mesh_shape):
    """The library's `training_scope` on JAX; on TensorFlow a MirroredStrategy
    over the 8 logical CPUs (the default one, with no GPU, takes only CPU:0)."""
    if strategy == "mirrored":
        import tensorflow as tf

        # One strategy per process: a second one's collectives were
        # cancelled on these logical devices.
        if "mirrored" not in _STRATEGIES:
            _STRATEGIES["mirrored"] = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(DEVICES)])
        return _STRATEGIES["mirrored"].scope()
    from kerasbert.distribution import training_scope

    return training_scope(strategy, mesh_shape if strategy == "model" else None)


def run_cli(mesh):
    """`kerasbert pretrain` under --distribution model --mesh MESH and under
    --distribution data: the same seeded run, so the same final weights
    (dropout included: Keras draws it with jax.random, the same under any
    sharding)."""
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        return _compare_cli_runs(work, mesh)


def _compare_cli_runs(work, mesh):
    import numpy as np
    from helpers import kjv_chapters

    from kerasbert.cli import main
    from kerasbert.utils.io import read_safetensors

    text = kjv_chapters(os.path.join(work, "kjv.txt"), 30)
    weights, histories = {}, {}
    for flags in (["--distribution", "model", "--mesh", mesh], ["--distribution", "data"]):
        output = os.path.join(work, flags[1])
        code = main([
            "pretrain", "--preset", "bert_tiny_en_uncased", "--objective", "mlm+nsp", "--train-files", text,
            "--output", output, "--from-scratch", "--vocabulary-size", "300", "--sequence-length", "32",
            "--batch-size", "16", "--steps", "8", "--learning-rate", "2e-2", "--warmup-steps", "2",
            "--num-layers", "1", "--hidden-dim", "16", "--num-heads", "2", "--intermediate-dim", "32",
            "--verbose", "0", *flags,
        ])
        assert code == 0
        weights[flags[1]] = read_safetensors(os.path.join(output, "preset", "encoder.safetensors"))
        with open(os.path.join(output, "history.json")) as f:
            histories[flags[1]] = json.load(f)
    model, data = weights["model"], weights["data"]
    return {
        "strategy": "cli", "task": "pretrain", "mesh": mesh,
        "max_abs_difference": max(float(np.max(np.abs(model[k] - data[k]))) for k in data),
        "same_names": sorted(model) == sorted(data),
        "loss": histories["model"]["loss"], "data_loss": histories["data"]["loss"],
    }


def run(backend, strategy, task, mesh="2x4"):
    if strategy == "cli":
        return run_cli(mesh)
    import keras
    import numpy as np

    import kerasbert

    mesh_shape = tuple(int(n) for n in mesh.split("x"))
    if task == "uneven":  # BERT's vocabulary of 30,522 over a model axis of 4; 12 rows over 8 replicas
        from kerasbert.distribution import training_scope

        errors = {}
        with _distribution(strategy, backend, mesh_shape):
            try:
                kerasbert.Encoder(vocabulary_size=30522, num_layers=1, num_heads=4, hidden_dim=16,
                                  intermediate_dim=32)
            except ValueError as error:
                errors["error"] = str(error)
        try:
            training_scope("data", batch_size=12)
        except ValueError as error:
            errors["batch_error"] = str(error)
        return {"strategy": strategy, "task": task, "mesh": mesh, **errors}
    tokenizer = (kerasbert.Tokenizer.from_preset("all_minilm_l6_v2") if task in ("classifier", "partial", "ner", "qa")
                 else None)
    arguments = None if task in ("uneven", "partial") else _fit_arguments(task)

    if task == "partial":  # 12 sentences in batches of 8 over 8 replicas: the last 4 sit out
        import math

        with _distribution(strategy, backend, mesh_shape):
            model = _build("classifier", tokenizer)
            sentences = _fit_arguments("classifier")
            arguments = {**sentences, "x": sentences["x"][:12], "y": sentences["y"][:12]}
            before = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
            history = model.fit(**arguments, batch_size=8, epochs=2, verbose=0).history
            after = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
            try:  # evaluation drops no example: a last batch of 4 over 8 replicas is refused
                model.evaluate(arguments["x"], arguments["y"], batch_size=8, verbose=0)
                refused = None
            except ValueError as error:
                refused = str(error)
            accuracy = model.evaluate(arguments["x"][:8], arguments["y"][:8], batch_size=8, verbose=0,
                                      return_dict=True)["accuracy"]
            predicted = model.predict(arguments["x"], batch_size=8, verbose=0).shape
        return {"strategy": strategy, "task": task, "mesh": mesh, "loss": history["loss"],
                "evaluate_refused": refused, "accuracy": accuracy, "predicted": list(predicted),
                "finite": all(math.isfinite(v) for v in history["loss"]),
                "moved": max(float(np.max(np.abs(a - b))) for a, b in zip(after, before)),
                "steps": int(model.optimizer.iterations.numpy())}

    if task == "qa":  # 59 windows in batches of 16: 3 whole batches and 11 rows cut to 8, so 4 steps an epoch
        with _distribution(strategy, backend, mesh_shape):
            model = _build("qa", tokenizer)
            history = model.fit(**arguments, batch_size=BATCH, epochs=2, verbose=0).history
        return {"strategy": strategy, "task": task, "mesh": mesh, "loss": history["loss"],
                "windows": len(model.windows(arguments["x"])), "steps": int(model.optimizer.iterations.numpy()),
                "final_learning_rate": float(model.optimizer.learning_rate)}

    keras.utils.set_random_seed(0)
    # XLA cannot compile a step whose replicas' variables live on other
    # logical devices of the same CPU, so TensorFlow's runs here are eager graphs.
    jit_compile = strategy != "mirrored"
    single = _build(task, tokenizer, jit_compile)
    initial = [keras.ops.convert_to_numpy(v) for v in single.trainable_variables]
    single_weights = _train(single, arguments)

    keras.utils.set_random_seed(0)
    with _distribution(strategy, backend, mesh_shape):
        distributed = _build(task, tokenizer, jit_compile)
        for variable, value in zip(distributed.trainable_variables, initial):
            variable.assign(value)
        distributed_weights = _train(distributed, arguments)
        placement = _placement(distributed, backend)

    return {
        "strategy": strategy, "task": task, "mesh": mesh,
        "max_abs_difference": max(float(np.max(np.abs(a - b))) for a, b in zip(single_weights, distributed_weights)),
        "max_abs_update": max(float(np.max(np.abs(a - b))) for a, b in zip(single_weights, initial)),
        "placement": placement,
    }


if __name__ == "__main__":
    import faulthandler

    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    _start_backend(backend)
    for spec in sys.argv[1:]:
        # A spec takes 10-60 s alone and a few times that on a loaded machine; one that runs past
        # SPEC_SECONDS is stuck (see test_distributed.py): every thread's stack goes to stderr and
        # the process exits, naming the spec.
        print(f"spec {spec}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        faulthandler.dump_traceback_later(SPEC_SECONDS, exit=True)
        print(json.dumps(run(backend, *spec.split(":"))), flush=True)
        faulthandler.cancel_dump_traceback_later()
        print(f"spec {spec}: {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
