"""Named-entity recognition: all-MiniLM-L6-v2 fine-tuned on a CoNLL-2003
file with `kerasbert.runs.finetuning.finetune` (the `kerasbert finetune --task
ner` command), scored with entity-level F1 every epoch, then used to find
entities in raw text.

    python examples/finetune_ner.py [--train-file PATH] [--validation-file PATH]
        [--crf] [--epochs 15] [--patience 3] [--learning-rate 2e-4] [--output DIR]

By default it trains and validates on `tests/data/conll2003_sample.txt`
(13 sentences in the CoNLL-2003 format): in a minute or two the model learns
them by heart, which shows every step but is no measure of NER. For real
results point it at the CoNLL-2003 files (`eng.train` / `eng.testa`, or `train.txt` / `valid.txt`: one word per
line with its POS, chunk and NER tags, a blank line between sentences) with
the usual settings:

    python examples/finetune_ner.py --train-file conll2003/train.txt \\
        --validation-file conll2003/valid.txt --epochs 3 --learning-rate 5e-5 \\
        --head-learning-rate-multiplier 1 --batch-size 32 --crf

Scores are seqeval's (an entity counts when its type and both ends match).
"""

import argparse
import os
import tempfile
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402

from kerasbert.runs.finetuning import finetune  # noqa: E402
from kerasbert.readers import read_conll  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SAMPLE = os.path.join(ROOT, "tests", "data", "conll2003_sample.txt")
SENTENCES = [
    "Maria Lindqvist met the chief executive of Heineken in Amsterdam on Tuesday.",
    "Shares of Philips fell in Frankfurt after the European Commission opened an inquiry.",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-file", default=SAMPLE, help="a CoNLL-2003 file")
    parser.add_argument("--validation-file", help="scored every epoch (default: the training file)")
    parser.add_argument("--preset", default="all_minilm_l6_v2")
    parser.add_argument("--crf", action="store_true", help="a CRF output layer")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--patience", type=int, default=3, help="stop after N epochs without a better F1")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=2e-4)
    parser.add_argument("--head-learning-rate-multiplier", type=float, default=10.0)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--output", help="the run's directory (default: a new temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    output = args.output or tempfile.mkdtemp(prefix="kerasbert-ner-")
    validation_file = args.validation_file or args.train_file
    print(f"Fine-tuning {args.preset} for NER on {args.train_file} ({keras.backend.backend()} backend, "
          f"{'CRF' if args.crf else 'softmax'} head), run in {output}")
    start = time.time()
    result = finetune(
        "ner", args.preset, args.train_file, output, validation_file=validation_file, crf=args.crf,
        epochs=args.epochs, patience=args.patience, batch_size=args.batch_size, learning_rate=args.learning_rate,
        head_learning_rate_multiplier=args.head_learning_rate_multiplier,
        sequence_length=args.sequence_length, seed=args.seed, verbose=2,
    )
    print(f"\nDone in {time.time() - start:.0f}s. Entity F1 per epoch: "
          + ", ".join(f"{f:.3f}" for f in result.history["val_f1"]))
    print(f"Best: F1 {result.best_metric:.4f} at epoch {result.best_epoch}, preset in {result.best_preset_dir}")

    # The best epoch, restored from its task preset.
    model = kerasbert.TokenClassifier.from_preset(result.best_preset_dir)
    validation = read_conll(validation_file, label_names=model.labels)
    scores = model.evaluate_entities(validation.words, validation.tags, batch_size=args.batch_size)
    print(f"\nValidation entities: precision {scores['precision']:.4f}, recall {scores['recall']:.4f}, "
          f"F1 {scores['f1']:.4f}")
    for kind, score in scores["per_type"].items():
        print(f"  {kind:5} F1 {score['f1']:.4f}  ({score['support']} entities)")

    print("\nEntities in raw text (character offsets into it):")
    for sentence, entities in zip(SENTENCES, model.predict_entities(SENTENCES)):
        print(f"  {sentence}")
        for entity in entities or [{"type": "-", "start": 0, "end": 0, "text": "(none found)"}]:
            print(f"    {entity['type']:5} [{entity['start']:3}, {entity['end']:3})  {entity['text']}")


if __name__ == "__main__":
    main()
