"""CRF tagging benchmark: the time of a training epoch of a TokenClassifier
with a CRF, per backend, beside the same tagger without one.

    .venv/bin/python benchmarks/crf.py [--backends tensorflow,jax,torch] [--rounds 3]
        [--repeat 20] [--epochs 3] [--json out.json]

Data: the 13 CoNLL-2003 sentences of `tests/data/conll2003_sample.txt`
(9 NER tags), repeated `--repeat` times (260 sentences by default), raw
words in, tag ids out. Model: `TokenClassifier.from_preset(
"all_minilm_l6_v2", labels=..., crf=True|False, sequence_length=64)` with
its default recipe (`jit_compile="auto"`), batches of 16, float32.

Each (backend, crf) job runs in its own process; an epoch's time is that of
a Keras epoch (`on_epoch_begin` to `on_epoch_end`, tokenisation in tf.data
included); the first epoch (tracing, compiling) is reported apart from the
median of the others. Rounds alternate the order of the jobs; rows give the
median over rounds, and `crf_over_softmax` the ratio of the CRF tagger's
epoch to the softmax tagger's in the same round.
"""

import argparse
import json
import os
import statistics
import time

from common import alternating, peak_rss_mb, run_stamp, run_worker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "tests", "data", "conll2003_sample.txt")
BATCH, SEQUENCE_LENGTH = 16, 64


def worker(args):
    import keras

    import kerasbert
    from kerasbert.readers import read_conll

    data = read_conll(SAMPLE)
    words, tags = data.words * args.repeat, data.tag_ids() * args.repeat
    keras.utils.set_random_seed(0)
    model = kerasbert.TokenClassifier.from_preset("all_minilm_l6_v2", labels=data.label_names, crf=args.crf == "crf",
                                                  sequence_length=SEQUENCE_LENGTH)

    class Clock(keras.callbacks.Callback):
        times = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self.start)

    history = model.fit(words, tags, batch_size=BATCH, epochs=args.epochs, callbacks=[Clock()], verbose=0)
    result = {"first_epoch_s": Clock.times[0], "epoch_s": statistics.median(Clock.times[1:]),
              "epochs_s": Clock.times, "accuracy": history.history["accuracy"][-1],
              "sentences": len(words), "peak_rss_mb": peak_rss_mb()}
    print("RESULT " + json.dumps(result), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--crf", choices=("crf", "softmax"), default="crf", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.epochs < 2:
        parser.error("--epochs must be >= 2: the first one traces and compiles")

    jobs = [(backend, crf) for backend in args.backends.split(",") for crf in ("crf", "softmax")]
    runs = []
    for round_, (backend, crf) in alternating(jobs, args.rounds):
        result = run_worker(__file__, ["--worker", "--crf", crf, "--repeat", str(args.repeat), "--epochs",
                                       str(args.epochs)], crf, backend, cwd=ROOT)
        if result is None:
            continue
        runs.append({"backend": backend, "head": crf, "round": round_, **result})
        print(f"round {round_ + 1}/{args.rounds}  {backend:10s} {crf:7s} epoch {result['epoch_s']:6.2f} s  "
              f"(first {result['first_epoch_s']:6.2f} s)", flush=True)
    rows = []
    for backend, crf in jobs:
        mine = [r for r in runs if r["backend"] == backend and r["head"] == crf]
        if not mine:
            continue
        row = {"backend": backend, "head": crf, "epoch_s": statistics.median(r["epoch_s"] for r in mine),
               "first_epoch_s": statistics.median(r["first_epoch_s"] for r in mine),
               "epoch_s_rounds": [round(r["epoch_s"], 3) for r in mine]}
        if crf == "crf":
            ratios = [r["epoch_s"] / p["epoch_s"] for r in mine for p in runs
                      if p["backend"] == backend and p["head"] == "softmax" and p["round"] == r["round"]]
            row["crf_over_softmax"] = statistics.median(ratios) if ratios else None
        rows.append(row)
    by = {(r["backend"], r["head"]): r for r in rows}
    for r in rows:
        if r["head"] == "crf" and ("tensorflow", "crf") in by:
            r["vs_tensorflow"] = r["epoch_s"] / by[("tensorflow", "crf")]["epoch_s"]
        print(f"{r['backend']:10s} {r['head']:7s} epoch {r['epoch_s']:6.2f} s (first {r['first_epoch_s']:6.2f} s)"
              + (f"  CRF/softmax {r['crf_over_softmax']:.2f}x" if r.get("crf_over_softmax") else "")
              + (f"  vs TensorFlow's CRF {r['vs_tensorflow']:.2f}x" if "vs_tensorflow" in r else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "repeat": args.repeat, "epochs": args.epochs, "batch_size": BATCH,
                       "sequence_length": SEQUENCE_LENGTH, "results": rows, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
