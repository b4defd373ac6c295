"""Per-step cost of each distribution strategy on 8 virtual CPU devices,
next to one device, and how far its weights end from one device's.

Virtual devices share this machine's cores, so the figures are the overhead
of the partitioned program (collectives, resharding, per-replica dispatch),
not a speed-up. Each (backend, strategy) job runs in its own process:

    .venv/bin/python benchmarks/distributed.py --json benchmarks/results/distributed.json

MaskedLM, L2/H256/A4/I1024, vocabulary 30,528 (30,522 padded to a multiple
of 8), seq 128, batch 16, 20 masked positions, dropout 0, AdamW; XLA on JAX;
TensorFlow's MirroredStrategy without XLA (XLA cannot compile a step whose
variables sit on other logical devices of one CPU), so its single-device
reference runs without XLA too.
"""

import argparse
import json
import os
import subprocess
import sys
import time

DEVICES = 8
JOBS = [("jax", "none"), ("jax", "data"), ("jax", "model:2x4"), ("jax", "model:1x8"),
        ("tensorflow", "none"), ("tensorflow", "mirrored")]


def worker(strategy, steps, warmup):
    backend = os.environ["KERAS_BACKEND"]
    if backend == "jax":
        os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={DEVICES}"
    import tensorflow as tf

    if backend == "tensorflow":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * DEVICES)
    import contextlib

    import keras
    import numpy as np

    import kerasbert

    batch, seq, masked, vocabulary = 16, 128, 20, 30528
    rng = np.random.default_rng(0)
    n = batch * (steps + warmup)
    x = {
        "token_ids": rng.integers(5, vocabulary, (n, seq)).astype("int32"),
        "segment_ids": np.zeros((n, seq), "int32"),
        "padding_mask": np.ones((n, seq), "int32"),
        "mask_positions": np.sort(rng.permuted(np.tile(np.arange(1, seq), (n, 1)), axis=1)[:, :masked], 1).astype("int32"),
    }
    y = rng.integers(5, vocabulary, (n, masked)).astype("int32")
    if strategy == "none":
        scope = contextlib.nullcontext()
    elif strategy == "mirrored":
        scope = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(DEVICES)]).scope()
    elif strategy == "data":
        scope = keras.distribution.DataParallel(devices=keras.distribution.list_devices()).scope()
    else:
        shape = tuple(int(v) for v in strategy.split(":")[1].split("x"))
        mesh = keras.distribution.DeviceMesh(shape, ("batch", "model"), keras.distribution.list_devices())
        scope = keras.distribution.ModelParallel(layout_map=kerasbert.Encoder.get_layout_map(mesh)).scope()
    keras.utils.set_random_seed(0)
    with scope:
        model = kerasbert.MaskedLM(kerasbert.Encoder(
            vocabulary_size=vocabulary, num_layers=2, num_heads=4, hidden_dim=256, intermediate_dim=1024,
            dropout=0.0))
        model.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=backend == "jax")
        times = []

        class Clock(keras.callbacks.Callback):
            def on_train_batch_begin(self, b, logs=None):
                self.start = time.perf_counter()

            def on_train_batch_end(self, b, logs=None):
                float(logs["loss"])  # wait for the step
                times.append(time.perf_counter() - self.start)

        model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[Clock()])
        weights = [keras.ops.convert_to_numpy(v) for v in model.trainable_variables]
    timed = sorted(times[warmup:])
    return {"seconds_per_step": timed[len(timed) // 2]}, weights


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import numpy as np

        result, weights = worker(args.worker, args.steps, args.warmup)
        np.savez(args.weights, *weights)
        print("RESULT " + json.dumps(result), flush=True)
        return
    import tempfile

    import numpy as np

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        reference = {}
        for backend, strategy in JOBS:
            path = os.path.join(tmp, f"{backend}_{strategy.replace(':', '_')}.npz")
            env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
            done = subprocess.run([sys.executable, __file__, "--worker", strategy, "--weights", path,
                                   "--steps", str(args.steps), "--warmup", str(args.warmup)],
                                  env=env, capture_output=True, text=True)
            line = [row for row in done.stdout.splitlines() if row.startswith("RESULT ")]
            if done.returncode or not line:
                print(f"{backend} {strategy}: failed\n{done.stderr[-2000:]}")
                continue
            result = json.loads(line[-1][len("RESULT "):])
            weights = np.load(path)
            weights = [weights[k] for k in sorted(weights.files, key=lambda k: int(k.split("_")[1]))]
            if strategy == "none":
                reference[backend] = (result["seconds_per_step"], weights)
            base_seconds, base_weights = reference[backend]
            row = {
                "backend": backend, "strategy": strategy, "devices": 1 if strategy == "none" else DEVICES,
                "seconds_per_step": result["seconds_per_step"],
                "vs_one_device": result["seconds_per_step"] / base_seconds,
                "max_abs_difference": max(float(np.max(np.abs(a - b))) for a, b in zip(weights, base_weights)),
            }
            rows.append(row)
            print(f"{backend:10} {strategy:10} {row['seconds_per_step'] * 1e3:8.1f} ms/step  "
                  f"x{row['vs_one_device']:.2f}  max |w - w_1| {row['max_abs_difference']:.2e}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": vars(args) | {"devices": DEVICES}, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
