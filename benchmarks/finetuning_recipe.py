"""How kerasbert's default fine-tuning recipe was chosen: the head
learning-rate multiplier and the warmup, on a validation split carved from
the training rows of `benchmarks/finetuning.py`, never on its test rows.

    .venv/bin/python benchmarks/finetuning_recipe.py [--backend torch]
        [--multipliers 1,3,10,30,100] [--warmups 0,0.1] [--seeds 3] [--jobs 2]
        [--json benchmarks/results/finetuning_recipe.json] [--add-to FILE]

Each setting fine-tunes all-MiniLM-L6-v2 as `benchmarks/finetuning.py
--systems kerasbert --validation` does: with seed s (s = 0, 1, ...), the
first 3,200 of the 4,000 training rows train and the 800 after them
measure accuracy; every setting sees the same seeds. The file keeps each
setting's accuracies, their mean and standard deviation, and the setting
with the best mean (a tie goes to the smaller standard deviation).
`--add-to FILE` measures only the settings FILE does not hold yet, under
its seeds and sizes, and rewrites FILE with all of them. The recipe is the same on every backend; one backend
(`--backend`) measures it. `--jobs N` runs N settings at once, each
computing on one thread (accuracy, not speed, is measured here).
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

from common import run_stamp

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(args, multiplier, warmup):
    """One setting's validation accuracies over the seeds."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "run.json")
        subprocess.run(
            [sys.executable, os.path.join(HERE, "finetuning.py"), "--systems", "kerasbert",
             "--backends", args.backend, "--validation", "--train", str(args.train),
             "--test", str(args.validation), "--rounds", str(args.seeds),
             f"--head-learning-rate-multiplier={multiplier}", f"--warmup-fraction={warmup}",
             "--json", path], check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            row = json.load(f)["results"][0]
    print(f"head x{multiplier:g}, warmup {warmup:g}: validation accuracy {row['accuracy_mean']:.4f} "
          f"± {row['accuracy_std']:.4f} {row['accuracies']}", flush=True)
    return {"head_learning_rate_multiplier": multiplier, "warmup_fraction": warmup,
            "accuracies": row["accuracies"], "accuracy_mean": row["accuracy_mean"],
            "accuracy_std": row["accuracy_std"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="torch", choices=("tensorflow", "jax", "torch"))
    parser.add_argument("--multipliers", default="1,3,10,30,100")
    parser.add_argument("--warmups", default="0,0.1")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--validation", type=int, default=800)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--add-to", help="a results file of this script to extend")
    args = parser.parse_args()
    earlier = []
    if args.add_to:
        with open(args.add_to) as f:
            kept = json.load(f)
        earlier = kept["settings"]
        args.backend, args.seeds, args.json = kept["backend"], len(kept["seeds"]), args.json or args.add_to
        args.train, args.validation = kept["train"] + kept["validation"], kept["validation"]

    measured = {(s["head_learning_rate_multiplier"], s["warmup_fraction"]) for s in earlier}
    grid = [(float(m), float(w)) for m in args.multipliers.split(",") for w in args.warmups.split(",")
            if (float(m), float(w)) not in measured]
    if args.jobs > 1:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
            os.environ[name] = "1"  # the workers inherit it
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        settings = earlier + list(pool.map(lambda setting: measure(args, *setting), grid))
    best = max(settings, key=lambda s: (s["accuracy_mean"], -s["accuracy_std"]))
    print(f"best: head x{best['head_learning_rate_multiplier']:g}, warmup {best['warmup_fraction']:g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "backend": args.backend, "seeds": list(range(args.seeds)),
                       "train": args.train - args.validation, "validation": args.validation,
                       "settings": settings, "best": {k: best[k] for k in ("head_learning_rate_multiplier",
                                                                         "warmup_fraction")}},
                      f, indent=2)


if __name__ == "__main__":
    main()
