"""How far equal work allows any system to be ahead: the arithmetic of the
fine-tuning benchmark (`benchmarks/finetuning.py`) set against this CPU's
measured matrix-product peak (`benchmarks/matmul.py`).

    .venv/bin/python benchmarks/roofline.py [--finetuning results/finetuning.json]
        [--matmul results/matmul.json] [--json out.json]

Nothing is timed here. For each round's split (seed + round) the snippets
are tokenized as the benchmark's model sees them (all-MiniLM-L6-v2's
WordPiece, `[CLS] ... [SEP]`, at most 128 tokens), and the model's useful
floating-point work is counted on the real tokens only: per layer and
token `2·(4·h² + 2·h·i)` for the four attention projections and the
feed-forward, and `4·n·h` for the attention scores and their weighted sum
over the example's `n` tokens (`h` = 384, `i` = 1,536, 6 layers; the
embeddings and the 2-class head are left out, under 0.1%). Training counts
3× the forward (the backward computes two products for each one of the
forward). Padding, the optimizer, tokenization and framework overheads are
extra work, not counted. (tests/test_benchmark_report.py checks the count
against torch's FLOP counter on transformers' BertModel.)

Each system's achieved useful rate is that work divided by its wall time
in the fine-tuning results (the same rounds). The peak is the fastest
float32 matrix product measured on the same machine (the best of every
engine and shape in the matmul results), and `ceiling_vs` says how many
times faster than each transformers variant a system would be that did
nothing but the useful products at that peak: no system doing the same
float32 work with the product kernels measured on this CPU can be further
ahead.
"""

import argparse
import json
import os
import statistics

import numpy as np
from common import run_stamp
from finetuning import MAX_TOKENS, checkpoint_directory, split

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS, HIDDEN, INTERMEDIATE = 6, 384, 1536


def forward_flops(lengths):
    """Useful floating-point operations of one MiniLM forward over examples
    of these token counts (see the module doc)."""
    lengths = np.asarray(lengths, np.float64)
    per_token = 2 * (4 * HIDDEN**2 + 2 * HIDDEN * INTERMEDIATE)
    return float(LAYERS * np.sum(lengths * per_token + 4 * lengths**2 * HIDDEN))


def token_counts(tokenizer, texts):
    return [len(ids) for ids in tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]]


def peak_gflops(matmul, machine):
    if matmul["machine"] != machine:
        raise SystemExit(f"the matmul results were measured on {matmul['machine']}, the fine-tuning results on "
                         f"{machine}: measure both on one machine")
    rows = [r for r in matmul["results"] if r["dtype"] == "float32"]
    best = max(rows, key=lambda r: r["gflops"])
    return best["gflops"], f"{best['engine']} {best['shape']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--finetuning", default=os.path.join(HERE, "results", "finetuning.json"))
    parser.add_argument("--matmul", default=os.path.join(HERE, "results", "matmul.json"))
    parser.add_argument("--json")
    args = parser.parse_args()
    with open(args.finetuning) as f:
        finetuning = json.load(f)
    with open(args.matmul) as f:
        matmul = json.load(f)
    if finetuning.get("precision", "float32") != "float32":
        raise SystemExit("the ceiling is float32's: give fine-tuning results measured in float32")
    peak, kernel = peak_gflops(matmul, finetuning["machine"])
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_directory())
    work = {}  # round -> (training, prediction) useful GFLOP
    for round_ in sorted({run["round"] for run in finetuning["runs"]}):
        (train, _), (test, _) = split(finetuning["seed"] + round_, finetuning["train"], finetuning["test"],
                                      finetuning.get("validation", False))
        work[round_] = (3 * forward_flops(token_counts(tokenizer, train)) / 1e9,
                        forward_flops(token_counts(tokenizer, test)) / 1e9)
    rates = {}  # (system, backend) -> {"train": [...], "predict": [...]} useful GFLOP/s per round
    for run in finetuning["runs"]:
        train_work, predict_work = work[run["round"]]
        rate = rates.setdefault((run["system"], run["backend"]), {"train": [], "predict": []})
        rate["train"].append(train_work / run["train_s"])
        rate["predict"].append(predict_work / run["predict_s"])
    results = []
    for (system, backend), rate in rates.items():
        row = {"system": system, "backend": backend}
        for phase in ("train", "predict"):
            achieved = statistics.median(rate[phase])
            row[f"{phase}_useful_gflops"] = round(achieved, 1)
            row[f"{phase}_of_peak"] = round(achieved / peak, 3)
        results.append(row)
    ceiling = {row["system"]: {phase: round(peak / row[f"{phase}_useful_gflops"], 2) for phase in ("train", "predict")}
               for row in results if row["system"].startswith("transformers")}
    report = {**run_stamp(), "machine": finetuning["machine"], "finetuning": os.path.relpath(args.finetuning, HERE),
              "finetuning_commit": finetuning.get("commit"), "matmul": os.path.relpath(args.matmul, HERE),
              "peak_gflops": round(peak, 1), "peak_kernel": kernel,
              "useful_gflop": {str(r): {"train": round(t, 1), "predict": round(p, 1)} for r, (t, p) in work.items()},
              "ceiling_vs": ceiling, "results": results}
    print(json.dumps(report, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
