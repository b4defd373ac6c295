"""Request latency: all-MiniLM-L6-v2 with a 2-class head answering
requests of 1 and of 8 raw strings, kerasbert's `predict` and its exported
SavedModel next to transformers' plain forward and its `pipeline`, on this
machine's CPU.

    .venv/bin/python benchmarks/latency.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,savedmodel,transformers,transformers_pipeline]
        [--calls 60] [--rounds 3] [--json out.json]

Requests are the test snippets of `benchmarks/finetuning.py` (seed 0) in
order: one snippet each, or 8 consecutive ones. Every system answers the
same requests: `--calls` timed ones after 10 untimed warm-up requests (XLA
compiles a program per padded length on JAX; the warm-up requests cover
the usual lengths, and a later first sight of a length shows in the p90).
A request's latency is the wall time from the raw strings to the logits as
a NumPy array, tokenisation included. Each (system, backend) runs in its
own process; model loading and export are not timed.

* `kerasbert`: `TextClassifier.from_preset("all_minilm_l6_v2",
  num_classes=2)`, `model.predict(texts, verbose=0)`.
* `savedmodel`: that model's `export()`, served by a process that imports
  TensorFlow and tensorflow-text alone:
  `serving_default(text=tf.constant(texts))["logits"]`. TensorFlow builds
  the SavedModel whichever backend exports it, so one is measured.
* `transformers`: the fast tokenizer and
  `AutoModelForSequenceClassification` (SDPA) under `inference_mode`:
  `model(**tokenizer(texts, padding=True, truncation=True,
  return_tensors="pt")).logits`.
* `transformers_pipeline`: `pipeline("text-classification", model=...,
  tokenizer=..., top_k=None)` on the strings (it returns the scores of every
  class, its softmax included).

`--rounds N` runs the jobs N times, every other round in reverse order; a
row gives the medians over rounds of the median and 90th-percentile
latency, and `vs_transformers` the median over rounds of the ratio of its
median latency to transformers' in the same round (below 1: faster).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

import numpy as np
from common import alternating, latency, peak_rss_mb, run_stamp, run_worker
from finetuning import ROOT, checkpoint_directory, split

SIZES = (1, 8)
WARMUP = 10


def requests(size, count):
    """`count` requests of `size` test snippets each, in order."""
    _, (texts, _) = split(0, 4000, 2000)
    return [texts[i * size:(i + 1) * size] for i in range(count)]


def timings(call, calls):
    """{size: (median ms, p90 ms)} of `call(texts)` over the requests."""
    found = {}
    for size in SIZES:
        median, p90 = latency(call, requests(size, WARMUP + calls), calls, warmup=WARMUP)
        found[size] = {"median_ms": median, "p90_ms": p90}
    return found


def kerasbert_model():
    import keras

    import kerasbert

    keras.utils.set_random_seed(0)
    return kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2)


def run_kerasbert(args):
    model = kerasbert_model()
    return timings(lambda texts: np.asarray(model.predict(texts, verbose=0)), args.calls)


def export_savedmodel(path):
    """Writes the model's SavedModel at `path` (an untimed job)."""
    kerasbert_model().export(path)
    return {}


def serve_savedmodel(args):
    sys.modules["kerasbert"] = None  # the SavedModel must not need it
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    function = tf.saved_model.load(args.savedmodel).signatures["serving_default"]
    return timings(lambda texts: function(text=tf.constant(texts))["logits"].numpy(), args.calls)


def run_transformers(args):
    import torch
    import transformers

    directory = checkpoint_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(0)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory, num_labels=2).eval()

    def forward(texts):
        with torch.inference_mode():
            encoded = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
            return model(**encoded).logits.numpy()

    return timings(forward, args.calls)


def run_transformers_pipeline(args):
    import torch
    import transformers

    directory = checkpoint_directory()
    torch.manual_seed(0)
    classify = transformers.pipeline(
        "text-classification", model=transformers.AutoModelForSequenceClassification.from_pretrained(
            directory, num_labels=2), tokenizer=transformers.AutoTokenizer.from_pretrained(directory), top_k=None,
        device="cpu")
    return timings(lambda texts: classify(texts), args.calls)


RUNNERS = {"kerasbert": run_kerasbert, "savedmodel": serve_savedmodel, "transformers": run_transformers,
           "transformers_pipeline": run_transformers_pipeline}


def worker(args):
    result = export_savedmodel(args.savedmodel) if args.export else RUNNERS[args.worker](args)
    print("RESULT " + json.dumps({"sizes": result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def jobs(systems, backends):
    found = []
    for system in systems:
        if system.startswith("transformers"):
            found.append((system, "torch"))
        elif system == "savedmodel":
            found.append((system, "tensorflow"))
        else:
            found += [(system, backend) for backend in backends]
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,savedmodel,transformers,transformers_pipeline")
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--savedmodel", help=argparse.SUPPRESS)
    parser.add_argument("--export", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be >= 1")

    todo = jobs(args.systems.split(","), args.backends.split(","))
    with tempfile.TemporaryDirectory() as directory:
        exported = {}
        for system, backend in todo:
            if system == "savedmodel" and backend not in exported:
                path = os.path.join(directory, backend)
                if run_worker(__file__, ["--worker", "savedmodel", "--export", "--savedmodel", path], "export",
                              backend, cwd=ROOT) is not None:
                    exported[backend] = path
        runs = []
        for round_, (system, backend) in alternating(todo, args.rounds):
            arguments = ["--worker", system, "--calls", str(args.calls)]
            if system == "savedmodel":
                if backend not in exported:
                    continue
                arguments += ["--savedmodel", exported[backend]]  # served by a TensorFlow-only process
            result = run_worker(__file__, arguments, system, backend, cwd=ROOT)
            if result is None:
                continue
            runs.append({"system": system, "backend": backend, "round": round_, **result})
            print(f"round {round_ + 1}/{args.rounds}  {system:22s} {backend:10s} " + "  ".join(
                f"{size}: {result['sizes'][str(size)]['median_ms']:.1f} ms" for size in SIZES), flush=True)
    results = summarize(runs, todo)
    for r in results:
        print(f"{r['system']:22s} {r['backend']:10s} " + "  ".join(
            f"{size}: {r[f'{size}_median_ms']:.1f} ms (p90 {r[f'{size}_p90_ms']:.1f})"
            + (f", {r[f'{size}_vs_transformers']:.2f}x transformers'" if f"{size}_vs_transformers" in r else "")
            for size in SIZES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "rounds": args.rounds, "calls": args.calls, "sizes": list(SIZES),
                       "results": results, "runs": runs}, f, indent=2)


def summarize(runs, todo):
    rows = []
    for system, backend in todo:
        mine = [r for r in runs if r["system"] == system and r["backend"] == backend]
        if not mine:
            continue
        row = {"system": system, "backend": backend, "rounds": len(mine),
               "peak_rss_mb": max(r["peak_rss_mb"] for r in mine)}
        for size in SIZES:
            for key in ("median_ms", "p90_ms"):
                row[f"{size}_{key}"] = statistics.median(r["sizes"][str(size)][key] for r in mine)
            if system != "transformers":
                paired = []
                for r in mine:
                    peer = [p for p in runs if p["system"] == "transformers" and p["round"] == r["round"]]
                    if peer:
                        paired.append(round(r["sizes"][str(size)]["median_ms"]
                                            / peer[0]["sizes"][str(size)]["median_ms"], 3))
                if paired:
                    row[f"{size}_vs_transformers"] = statistics.median(paired)
                    row[f"{size}_vs_transformers_rounds"] = paired
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
