"""Where the fine-tuning epoch of `benchmarks/finetuning.py` goes, one
backend: the train step at each padded length.

    KERAS_BACKEND=jax .venv/bin/python benchmarks/finetuning_steps.py [--seed 0] [--train 4000]

Builds the epoch's batches as `TextClassifier.fit` does (its `_batches_of`:
length-grouped, padded to the lengths fitted to the examples, `COMPILED_SHAPES`
of them under XLA), then runs each batch through `train_on_batch` with the
fine-tuning recipe's optimizer, timing every call (each returns its logs to
the host, so each is one whole step). Prints, per padded length: batches,
the first call (tracing and compilation included under XLA), the median of
the later ones, and that median per position (rows x tokens); and the
epoch's positions against its tokens.
"""

import argparse
import collections
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402
from finetuning import BATCH, LEARNING_RATE, MAX_TOKENS, WEIGHT_DECAY, split  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", type=int, default=4000)
    args = parser.parse_args()
    (x, y), _ = split(args.seed, args.train, 0)
    keras.utils.set_random_seed(args.seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    model.compile(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    start = time.perf_counter()
    batches = list(model._batches_of(x, y, batch_size=BATCH, shuffle=True, needs_y=True).as_numpy_iterator())
    print(f"{keras.backend.backend()}, jit_compile={model.jit_compile}: {len(batches)} batches built in "
          f"{time.perf_counter() - start:.2f} s")
    model._start_schedule(len(batches))  # the schedule `fit` sets for one epoch of these steps
    times = collections.defaultdict(list)  # (rows, width) -> seconds of each call
    start = time.perf_counter()
    for features, labels in batches:
        begin = time.perf_counter()
        model.train_on_batch(features, labels)
        times[features["token_ids"].shape].append(time.perf_counter() - begin)
    total = time.perf_counter() - start
    tokens = sum(int((f["padding_mask"] > 0).sum()) for f, _ in batches)
    positions = sum(f["token_ids"].size for f, _ in batches)
    print("| rows × width | batches | first call (s) | later calls, median (ms) | ms per position |")
    print("|---|---:|---:|---:|---:|")
    for (rows, width), calls in sorted(times.items(), key=lambda item: item[0][1]):
        later = 1000 * float(np.median(calls[1:])) if len(calls) > 1 else float("nan")
        print(f"| {rows} × {width} | {len(calls)} | {calls[0]:.2f} | {later:.0f} | {later / (rows * width):.3f} |")
    print(f"epoch: {total:.1f} s in steps ({sum(c[0] for c in times.values()):.1f} s of first calls); "
          f"{positions:,} positions for {tokens:,} tokens ({tokens / positions:.0%} real)")


if __name__ == "__main__":
    main()
