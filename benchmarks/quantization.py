"""int8 and int4 weights against float32: all-MiniLM-L6-v2 fine-tuned on the
Rotten Tomatoes snippets of `benchmarks/finetuning.py`, with its protocol
and recipe, then quantized with `task.quantize(mode)`.

    .venv/bin/python benchmarks/quantization.py [--backends tensorflow,jax,torch]
        [--kinds predict,serve] [--seeds 3] [--rounds 3] [--timed 512] [--json benchmarks/results/quantization.json]

1. Each seed fine-tunes the float32 task once (the benchmark's recipe:
   5e-5, the head at 100x, 10% warmup, one epoch of the seed's 4,000
   training rows; on TensorFlow) and writes it as a task preset. Nothing
   is chosen on the test rows: quantization has no setting tuned here.
2. On every backend, a process loads the preset three times: as it is,
   and quantized to int8 and to int4. It predicts the 2,000 test rows
   after the training rows (raw strings in, batches of 32, padded to their
   longest row of at most 128 tokens) with each: all of them once, for
   the accuracy, the share of labels equal to float32's and the largest
   logit difference from float32's; then the first 512 of them `--rounds`
   times in alternating order, whose median time is reported.
3. The SavedModel (`task.export`, raw strings in): the float32 and the
   int8 task exported and loaded in one TensorFlow process, serving the
   same rows in batches of 32 the same way.
4. Sizes: the task preset's weight files (`encoder.safetensors`,
   `task.safetensors`) and the SavedModels' `variables/` directories.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from common import alternating, directory_bytes, run_stamp, run_worker
from finetuning import BATCH, LEARNING_RATE, MAX_TOKENS, RECIPES, WEIGHT_DECAY, split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN, TEST = 4000, 2000
MODES = ("float32", "int8", "int4")
WEIGHT_FILES = ("encoder.safetensors", "task.safetensors")


def train(seed, preset):
    """Fine-tunes the float32 task of `seed` and writes it to `preset`."""
    import keras

    import kerasbert

    (x, y), _ = split(seed, TRAIN, TEST)
    keras.utils.set_random_seed(seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    recipe = RECIPES["kerasbert"]
    model.compile(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY,
                  head_learning_rate_multiplier=recipe["head_learning_rate_multiplier"],
                  warmup_fraction=recipe["warmup_fraction"])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    model.save_to_preset(preset)
    return {"bytes": directory_bytes(preset, WEIGHT_FILES)}


def loaded(preset, mode):
    import kerasbert

    model = kerasbert.TextClassifier.from_preset(preset)
    if mode != "float32":
        start = time.perf_counter()
        model.quantize(mode)
        model.quantize_s = time.perf_counter() - start
    return model


def timed_rounds(calls, texts, rounds, timed):
    """{name: (outputs on `texts`, median seconds on the first `timed` of
    them)} of `calls` ({name: callable on a list of texts}): each scores
    every text once, untimed, then the first `timed` texts `rounds` times
    in alternating order."""
    outputs = {name: call(texts) for name, call in calls.items()}
    times = {name: [] for name in calls}
    for _, name in alternating(list(calls), rounds):
        start = time.perf_counter()
        calls[name](texts[:timed])
        times[name].append(time.perf_counter() - start)
    return {name: (outputs[name], statistics.median(times[name])) for name in calls}


def scores(logits, reference, labels):
    return {"accuracy": float((logits.argmax(-1) == labels).mean()),
            "agreement": float((logits.argmax(-1) == reference.argmax(-1)).mean()),
            "max_logit_difference": float(np.abs(logits - reference).max())}


def predict(seed, preset, rounds, timed_rows):
    """Step 2 in this process (one backend)."""
    _, (x, y) = split(seed, TRAIN, TEST)
    models = {mode: loaded(preset, mode) for mode in MODES}
    calls = {mode: (lambda texts, m=model: np.asarray(m.predict(texts, batch_size=BATCH, verbose=0)))
             for mode, model in models.items()}
    timed = timed_rounds(calls, x, rounds, timed_rows)
    result = {}
    with tempfile.TemporaryDirectory() as directory:
        for mode, (logits, seconds) in timed.items():
            path = os.path.join(directory, mode)
            models[mode].save_to_preset(path)
            result[mode] = {**scores(logits, timed["float32"][0], y), "predict_s": seconds,
                            "preset_bytes": directory_bytes(path, WEIGHT_FILES),
                            "quantize_s": getattr(models[mode], "quantize_s", None)}
    return result


def serve(seed, preset, rounds, timed_rows):
    """Step 3: the float32 and int8 SavedModels, in this TensorFlow process."""
    import tensorflow as tf

    _, (x, y) = split(seed, TRAIN, TEST)
    result, calls = {}, {}
    with tempfile.TemporaryDirectory() as directory:
        for mode in ("float32", "int8"):
            path = os.path.join(directory, mode)
            loaded(preset, mode).export(path)
            signature = tf.saved_model.load(path).signatures["serving_default"]
            calls[mode] = lambda texts, s=signature: np.concatenate(
                [s(text=tf.constant(texts[i:i + BATCH]))["logits"].numpy() for i in range(0, len(texts), BATCH)])
            result[mode] = {"saved_model_bytes": directory_bytes(os.path.join(path, "variables"))}
        timed = timed_rounds(calls, x, rounds, timed_rows)
    for mode, (logits, seconds) in timed.items():
        result[mode].update(scores(logits, timed["float32"][0], y), serve_s=seconds)
    return result


def worker(args):
    if args.worker == "train":
        result = train(args.seed, args.preset)
    elif args.worker == "predict":
        result = predict(args.seed, args.preset, args.rounds, args.timed)
    else:
        result = serve(args.seed, args.preset, args.rounds, args.timed)
    print("RESULT " + json.dumps(result), flush=True)


def launch(kind, backend, seed, preset, args):
    result = run_worker(__file__, ["--worker", kind, "--seed", str(seed), "--preset", preset, "--rounds",
                                   str(args.rounds), "--timed", str(args.timed)], kind, backend, cwd=ROOT)
    if result is None:
        raise SystemExit(f"the {kind} run of seed {seed} on {backend} failed")
    print(f"{kind} {backend} seed {seed}: {json.dumps(result)}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default="predict,serve",
                        help="what to measure: predict (every backend), serve (the SavedModel) or both; with one, "
                        "--json keeps the other's runs from the file")
    parser.add_argument("--timed", type=int, default=512, help="the test rows timed in each round")
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=("train", "predict", "serve"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--preset", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    backends = args.backends.split(",")
    kinds = args.kinds.split(",")
    runs = []
    with tempfile.TemporaryDirectory() as directory:
        presets = {seed: os.path.join(directory, f"seed{seed}") for seed in range(args.seeds)}
        for seed, preset in presets.items():
            launch("train", "tensorflow", seed, preset, args)
        jobs = [("predict", backend) for backend in backends] * ("predict" in kinds) + \
            [("serve", "tensorflow")] * ("serve" in kinds)
        for seed, (kind, backend) in alternating(jobs, args.seeds):
            result = launch(kind, backend, seed, presets[seed], args)
            for mode, values in result.items():
                runs.append({"kind": kind, "backend": backend, "seed": seed, "mode": mode, **values})
    stamp = run_stamp()
    for run in runs:
        run.update(date=stamp["date"], commit=stamp["commit"])
    if args.json and len(kinds) < 2 and os.path.exists(args.json):  # the other kind's runs are kept
        with open(args.json) as f:
            runs = [r for r in json.load(f)["runs"] if r["kind"] not in kinds] + runs
    results = summarize(runs)
    for row in results:
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**stamp, "recipe": RECIPES["kerasbert"], "learning_rate": LEARNING_RATE,
                       "batch": BATCH, "max_tokens": MAX_TOKENS, "train": TRAIN, "test": TEST,
                       "rounds": args.rounds, "timed_rows": args.timed, "results": results, "runs": runs}, f, indent=2)


def summarize(runs):
    """One row per (kind, backend, mode), each with the dates and commits of its runs: accuracy's mean and standard
    deviation over seeds, medians of the rest, and medians of the per-seed
    ratios to float32's time and size."""
    rows = []
    for kind, backend, mode in dict.fromkeys((r["kind"], r["backend"], r["mode"]) for r in runs):
        mine = [r for r in runs if (r["kind"], r["backend"], r["mode"]) == (kind, backend, mode)]
        reference = {r["seed"]: r for r in runs if (r["kind"], r["backend"], r["mode"]) == (kind, backend, "float32")}
        accuracies = [r["accuracy"] for r in mine]
        row = {"kind": kind, "backend": backend, "mode": mode, "seeds": len(mine), "accuracies": accuracies,
               "accuracy_mean": statistics.mean(accuracies),
               "accuracy_std": statistics.stdev(accuracies) if len(mine) > 1 else 0.0,
               "measured": sorted({f"{r.get('date')} {r.get('commit')}" for r in mine}),
               "accuracy_vs_float32": statistics.mean(r["accuracy"] - reference[r["seed"]]["accuracy"]
                                                      for r in mine)}
        for key in ("agreement", "max_logit_difference", "predict_s", "serve_s", "preset_bytes",
                    "saved_model_bytes", "quantize_s"):
            values = [r[key] for r in mine if r.get(key) is not None]
            if values:
                row[key] = statistics.median(values)
                if key.endswith(("_s", "_bytes")) and key != "quantize_s":
                    row[f"{key}_vs_float32"] = statistics.median(r[key] / reference[r["seed"]][key] for r in mine)
        rows.append(row)
    return rows


if __name__ == "__main__":
    sys.exit(main())
