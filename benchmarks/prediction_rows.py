"""A/B of `predict`'s two batchings in one process: sorted batches padded to
a few fitted lengths against packed rows (several examples a row, one
shape; `kerasbert.preprocessing.packed_rows`), alternating, on the fine-tuning
benchmark's test snippets with MiniLM's classifier (a fresh, seeded head).

    KERAS_BACKEND=jax .venv/bin/python benchmarks/prediction_rows.py [--rounds 4]
        [--test 2000] [--jit-compile auto|true|false] [--json out.json]

Each round times one `predict` over the test set per batching, every other
round in reverse order; the first call of each compiles its programs (XLA)
or traces its function (TensorFlow). Prints the seconds of every call and
the largest difference between the two batchings' outputs. Under
`jit_compile=False` (eager torch, TensorFlow's own kernels) `predict` packs
no rows by itself; this script makes it, to measure them there too.
"""

import argparse
import json
import time

import numpy as np
from finetuning import MAX_TOKENS, split


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jit-compile", choices=("auto", "true", "false"), default="auto")
    parser.add_argument("--json")
    args = parser.parse_args()

    import kerasbert

    kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
    import keras

    from kerasbert.tasks.fine_tuning import FineTuningTask

    _, (texts, _) = split(args.seed, 4000, args.test)
    keras.utils.set_random_seed(args.seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    if args.jit_compile != "auto":
        model.compile(jit_compile=args.jit_compile == "true")
    model.predict(texts[:4], verbose=0)  # the tokenizer and the single-batch packing, traced
    packs, shapes = FineTuningTask._packs_predictions, FineTuningTask._padded_shapes
    batchings = {
        "sorted batches": (lambda self: False, shapes),
        "packed rows": (packs, lambda self: shapes(self) or 4),
    }
    seconds, outputs = {name: [] for name in batchings}, {}
    for round_ in range(args.rounds):
        for name in batchings if round_ % 2 == 0 else list(batchings)[::-1]:
            FineTuningTask._packs_predictions, FineTuningTask._padded_shapes = batchings[name]
            start = time.perf_counter()
            outputs[name] = model.predict(texts, verbose=0)
            seconds[name].append(round(time.perf_counter() - start, 2))
            print(f"round {round_ + 1}/{args.rounds}  {keras.backend.backend():10s} {name:14s} "
                  f"{seconds[name][-1]:6.2f} s", flush=True)
    FineTuningTask._packs_predictions, FineTuningTask._padded_shapes = packs, shapes
    difference = float(np.abs(outputs["sorted batches"] - outputs["packed rows"]).max())
    print(f"largest difference between the outputs: {difference:.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": keras.backend.backend(), "jit_compile": bool(model.jit_compile),
                       "test": args.test, "seconds": seconds, "max_difference": difference}, f, indent=1)


if __name__ == "__main__":
    main()
