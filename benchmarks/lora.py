"""LoRA against full fine-tuning: all-MiniLM-L6-v2 on the Rotten Tomatoes
snippets of `benchmarks/finetuning.py`, with its protocol and recipe.

    .venv/bin/python benchmarks/lora.py [--backends tensorflow,jax,torch]
        [--rank 8] [--targets qkv,attention_output] [--rates 3e-4,1e-3,3e-3]
        [--sweep-backend tensorflow] [--seeds 3] [--json benchmarks/results/lora.json]

1. The adapters' learning rate (`--rates`) is chosen on validation data,
   as `benchmarks/finetuning_recipe.py` chose the recipe: with seed s the
   first 3,200 of the 4,000 training rows train and the 800 after them
   score; the rate with the best mean accuracy over the seeds wins (one
   backend, `--sweep-backend`: the rate is the same on every backend).
2. On every backend, each seed trains full fine-tuning (the benchmark's
   recipe: 5e-5, the head at 100x, 10% warmup) and LoRA (rank `--rank` on
   `--targets` at the chosen rate, the head at the recipe's 5e-3, 10%
   warmup) on the 4,000
   training rows and scores the 2,000 test rows after them, alternating
   which runs first. Each run is a process of its own: its peak resident
   memory (`ru_maxrss`), the wall time of the training epoch (`fit`,
   tokenisation and tracing included) and of its steps after the first
   (from a callback: the time per step once compiled) are reported.
3. The task presets: the full one (`save_to_preset`) and the adapter
   preset (`adapters_only=True`), in bytes.

Rows give accuracy's mean and standard deviation over seeds, the medians
of time and memory, and LoRA's ratios to full fine-tuning (medians of the
per-seed ratios).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from common import alternating, directory_bytes, peak_rss_mb, run_stamp, run_worker
from finetuning import BATCH, LEARNING_RATE, MAX_TOKENS, RECIPES, WEIGHT_DECAY, split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN, TEST, VALIDATION = 4000, 2000, 800


def run(mode, seed, rate, rank, targets, validation):
    """One fine-tuning run in this process: `mode` "full" or "lora"."""
    import keras

    import kerasbert

    (x, y), (x_test, y_test) = split(seed, TRAIN, VALIDATION if validation else TEST, validation=validation)
    keras.utils.set_random_seed(seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    total = model.count_params()
    if mode == "lora":
        model.enable_lora(rank, targets=targets)
    trainable = int(sum(np.prod(v.shape) for v in model.trainable_weights))
    recipe = RECIPES["kerasbert"]
    # The head learns at the recipe's rate for it (5e-3) whatever the encoder's (or the adapters') rate.
    head_rate = LEARNING_RATE * recipe["head_learning_rate_multiplier"]
    model.compile(learning_rate=rate, weight_decay=WEIGHT_DECAY, head_learning_rate_multiplier=head_rate / rate,
                  warmup_fraction=recipe["warmup_fraction"])

    class StepTimes(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter())

    times = []
    start = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[StepTimes()])
    train_s = time.perf_counter() - start
    logits = np.asarray(model.predict(x_test, batch_size=BATCH, verbose=0))
    result = {"accuracy": float((logits.argmax(-1) == y_test).mean()), "train_s": train_s,
              "step_ms": 1000 * float(np.median(np.diff(times))), "trainable_parameters": trainable,
              "parameters": int(total), "trainable_share": trainable / total}
    if not validation:
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "preset")
            model.save_to_preset(path, adapters_only=mode == "lora")
            result["preset_bytes"] = directory_bytes(path)
    return result


def worker(args):
    result = run(args.worker, args.seed, args.rate, args.rank, args.targets.split(","), args.validation)
    print("RESULT " + json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def launch(args, mode, backend, seed, rate, validation=False):
    result = run_worker(__file__, ["--worker", mode, "--seed", str(seed), f"--rate={rate}", "--rank",
                                   str(args.rank), "--targets", args.targets, *["--validation"] * validation],
                        mode, backend, cwd=ROOT)
    if result is not None:
        print(f"{'validation' if validation else 'test'} {mode:4s} {backend:10s} seed {seed} rate {rate:g}: "
              f"accuracy {result['accuracy']:.4f}, train {result['train_s']:.1f} s, step {result['step_ms']:.0f} "
              f"ms, peak RSS {result['peak_rss_mb']:.0f} MiB", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--targets", default="qkv,attention_output")
    parser.add_argument("--rates", default="3e-4,1e-3,3e-3")
    parser.add_argument("--rate", type=float, help="skip the sweep: the adapters' learning rate")
    parser.add_argument("--sweep-backend", default="tensorflow")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=("full", "lora"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--validation", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    sweep = []
    rate = args.rate
    if rate is None:
        for candidate in (float(r) for r in args.rates.split(",")):
            scores = [launch(args, "lora", args.sweep_backend, seed, candidate, validation=True)["accuracy"]
                      for seed in range(args.seeds)]
            sweep.append({"rate": candidate, "accuracies": scores, "accuracy_mean": statistics.mean(scores)})
        rate = max(sweep, key=lambda s: s["accuracy_mean"])["rate"]
        print(f"chosen on validation data: rate {rate:g}", flush=True)

    runs = []
    jobs = [(mode, backend) for backend in args.backends.split(",") for mode in ("full", "lora")]
    for seed, (mode, backend) in alternating(jobs, args.seeds):
        result = launch(args, mode, backend, seed, rate if mode == "lora" else LEARNING_RATE)
        if result is not None:
            runs.append({"mode": mode, "backend": backend, "seed": seed, **result})
    results = summarize(runs, args.backends.split(","))
    for row in results:
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "rank": args.rank, "targets": args.targets.split(","), "rate": rate,
                       "full_rate": LEARNING_RATE, "recipe": RECIPES["kerasbert"], "batch": BATCH, "train": TRAIN,
                       "test": TEST, "validation": VALIDATION, "sweep": sweep, "results": results, "runs": runs},
                      f, indent=2)


def summarize(runs, backends):
    rows = []
    for backend in backends:
        for mode in ("full", "lora"):
            mine = [r for r in runs if r["backend"] == backend and r["mode"] == mode]
            if not mine:
                continue
            accuracies = [r["accuracy"] for r in mine]
            row = {"backend": backend, "mode": mode, "seeds": len(mine), "accuracies": accuracies,
                   "accuracy_mean": statistics.mean(accuracies),
                   "accuracy_std": statistics.stdev(accuracies) if len(mine) > 1 else 0.0}
            for key in ("train_s", "step_ms", "peak_rss_mb", "preset_bytes", "trainable_parameters",
                        "trainable_share"):
                row[key] = statistics.median(r[key] for r in mine)
            if mode == "lora":
                full = {r["seed"]: r for r in runs if r["backend"] == backend and r["mode"] == "full"}
                for key in ("train_s", "step_ms", "peak_rss_mb", "preset_bytes"):
                    ratios = [r[key] / full[r["seed"]][key] for r in mine if r["seed"] in full]
                    row[f"{key}_vs_full"] = statistics.median(ratios) if ratios else None
                row["accuracy_vs_full"] = row["accuracy_mean"] - statistics.mean(
                    r["accuracy"] for r in full.values()) if full else None
            rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
