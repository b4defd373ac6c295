"""The SavedModel, ONNX and LiteRT exports of one classifier against
`predict`, each served in a process of its own runtime.

    .venv/bin/python benchmarks/serving_formats.py [--snippets 1000] [--rounds 3] [--calls 200]
        [--json benchmarks/results/serving_formats.json]

1. A TensorFlow process builds all-MiniLM-L6-v2 (its real weights) as a
   2-class `TextClassifier` (sequence_length 128, its head seeded), predicts
   the first `--snippets` Rotten Tomatoes snippets (batches of 32) and writes
   the three exports: `format="saved_model"`, `"onnx"` and `"litert"`.
2. Each export is served by a fresh process that cannot import kerasbert
   (nor, but for the SavedModel, whose tensorflow-text imports it, Keras):
   the SavedModel by TensorFlow and tensorflow-text; ONNX by
   onnxruntime with transformers' tokenizer loaded from the export (no
   TensorFlow); LiteRT by `ai_edge_litert`'s interpreter with
   tensorflow-text's kernels loaded from their library (no TensorFlow
   Python). It scores every snippet once (batches of 32): the largest
   difference of its logits from `predict`'s, then times single
   snippets (`--calls` of them; the latency of batch 1) and batches of 32
   (`--calls` / 8 of them), ONNX with and without its tokenizer.
3. `--rounds` rounds of the three serving processes, in alternating order;
   the medians over rounds are reported.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

from common import alternating, run_stamp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("saved_model", "onnx", "litert")
BATCH = 32


def texts_of(count):
    """The first `count` Rotten Tomatoes snippets (tests/helpers.py's, read here without Keras)."""
    import bz2
    import csv
    import io

    with io.TextIOWrapper(bz2.open(os.path.join(ROOT, "data", "rotten_tomatoes.csv.bz2")), encoding="utf-8") as f:
        return [row["text"] for row in csv.DictReader(f) if row["category"] in ("fresh", "rotten")][:count]


def export(directory, count):
    """Step 1 (TensorFlow backend)."""
    import keras
    import numpy as np

    import kerasbert

    keras.utils.set_random_seed(0)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=128)
    np.save(os.path.join(directory, "predicted.npy"), model.predict(texts_of(count), batch_size=BATCH, verbose=0))
    for format in FORMATS:
        model.export(os.path.join(directory, format), format=format)


def litert_text_ops():
    """The registerers of tensorflow-text's LiteRT kernels that a LiteRT
    export needs, loaded from tensorflow-text's registrar library (which
    needs TensorFlow's framework library, not its Python package, nor Keras)."""
    import ctypes
    import importlib.util

    site = next(d for d in sys.path if os.path.exists(os.path.join(d, "tensorflow_text")))
    ctypes.CDLL(os.path.join(site, "tensorflow", "libtensorflow_framework.so.2"), mode=ctypes.RTLD_GLOBAL)
    spec = importlib.util.spec_from_file_location(
        "tflite_registrar", os.path.join(site, "tensorflow_text", "core", "pybinds", "tflite_registrar.so"))
    registrar = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(registrar)
    return [registrar.AddFastBertNormalize, registrar.AddFastWordpieceTokenize, registrar.AddRaggedTensorToTensor]


def runtime(format, path):
    """{name: callable on a list of texts -> logits} of `format`'s export,
    in this process."""
    import numpy as np

    if format == "saved_model":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 (the tokenizer's ops)

        signature = tf.saved_model.load(path).signatures["serving_default"]
        return {"saved_model": lambda texts: signature(text=tf.constant(texts))["logits"].numpy()}
    if format == "onnx":
        import onnxruntime
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        session = onnxruntime.InferenceSession(os.path.join(path, "model.onnx"), providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}

        def tokenize(texts):
            encoded = tokenizer(texts, padding=True, truncation=True, return_tensors="np")
            feed = {"token_ids": encoded["input_ids"], "padding_mask": encoded["attention_mask"],
                    "segment_ids": encoded["token_type_ids"]}
            return {k: v.astype(np.int32) for k, v in feed.items() if k in names}

        return {"onnx": lambda texts: session.run(["logits"], tokenize(texts))[0], "onnx_tokenizer": tokenize}
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    interpreter = InterpreterWithCustomOps(model_path=os.path.join(path, "model.tflite"), num_threads=os.cpu_count(),
                                           custom_op_registerers=litert_text_ops())
    runner = interpreter.get_signature_runner("serving_default")
    return {"litert": lambda texts: runner(text=np.array(texts, dtype=object))["logits"]}


def serve(format, directory, count, calls):
    """Step 2, in this process."""
    import numpy as np
    from common import latency

    texts = texts_of(count)
    functions = runtime(format, os.path.join(directory, format))
    main = functions[format]
    logits = np.concatenate([main(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)])
    difference = np.abs(logits - np.load(os.path.join(directory, "predicted.npy"))).max(-1)
    result = {"max_difference": float(difference.max())}
    batches = [texts[i:i + BATCH] for i in range(0, len(texts) - BATCH + 1, BATCH)]
    for name, function in functions.items():
        result[name + "_batch1_ms"] = latency(lambda text: function([text]), texts, calls, warmup=10)[0]
        result[name + "_batch32_ms"] = latency(function, batches, max(calls // 8, 1), warmup=2)[0]
    return result


RUNTIMES = {"saved_model": ("SavedModel", "tensorflow"), "onnx": ("ONNX", "onnxruntime"),
            "litert": ("LiteRT", "litert")}


def result_rows(medians):
    """A row per format from its medians over rounds: its runtime as the
    `backend`, its largest differences from `predict`, its latencies and
    their ratios to the SavedModel's."""
    rows = []
    for format, values in medians.items():
        name, runtime = RUNTIMES[format]
        row = {"format": name, "backend": runtime, "max_difference": values["max_difference"]}
        for batch in (1, 32):
            row[f"batch{batch}_ms"] = values[f"{format}_batch{batch}_ms"]
            row[f"batch{batch}_vs_saved_model"] = row[f"batch{batch}_ms"] / medians["saved_model"][
                f"saved_model_batch{batch}_ms"]
            if f"{format}_tokenizer_batch{batch}_ms" in values:
                row[f"tokenizer_batch{batch}_ms"] = values[f"{format}_tokenizer_batch{batch}_ms"]
        rows.append(row)
    return rows


def worker(args):
    # Imports of these fail: each runtime alone (tensorflow-text, which the SavedModel needs, imports Keras).
    blocked = ("kerasbert",) + (("keras", "tensorflow", "tensorflow_text") if args.format != "saved_model" else ())
    for name in blocked:
        sys.modules[name] = None
    print("RESULT " + json.dumps(serve(args.format, args.directory, args.snippets, args.calls)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snippets", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200, help="timed single-snippet calls a round (and / 8 batches)")
    parser.add_argument("--json")
    parser.add_argument("--worker", dest="format", choices=FORMATS, help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.format:
        return worker(args)
    import subprocess

    stamp = run_stamp()
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    with tempfile.TemporaryDirectory() as directory:
        code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import serving_formats as s; " \
               f"s.export({directory!r}, {args.snippets})"
        subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT)
        runs = {format: [] for format in FORMATS}
        for round_, format in alternating(list(FORMATS), args.rounds):
            done = subprocess.run([sys.executable, __file__, "--worker", format, "--directory", directory,
                                   "--snippets", str(args.snippets), "--calls", str(args.calls)],
                                  env=env, capture_output=True, text=True, check=False, cwd=ROOT)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode or not lines:
                sys.exit(f"{format} failed:\n{done.stderr[-3000:]}")
            runs[format].append(json.loads(lines[-1][len("RESULT "):]))
            print(f"round {round_} {format}: {lines[-1][len('RESULT '):]}", flush=True)
    medians = {format: {key: statistics.median(run[key] for run in rows) for key in rows[0]}
               for format, rows in runs.items()}
    results = result_rows(medians)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**stamp, "snippets": args.snippets, "rounds": args.rounds, "calls": args.calls,
                       "preset": "all_minilm_l6_v2", "sequence_length": 128, "results": results, "runs": runs},
                      f, indent=2)


if __name__ == "__main__":
    main()
