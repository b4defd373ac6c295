"""Extractive question answering: all-MiniLM-L6-v2 fine-tuned on a SQuAD
file with `kerasbert.runs.finetuning.finetune` (the `kerasbert finetune --task
squad` command), scored with the official exact match and F1 every epoch,
then asked questions.

    python examples/finetune_squad.py [--train-file PATH] [--validation-file PATH]
        [--epochs 5] [--batch-size 4] [--learning-rate 1e-4] [--sequence-length 384] [--output DIR]

By default it trains and validates on `tests/data/squad_v2_sample.json`
(13 questions on 3 paragraphs in the SQuAD v2.0 format, 5 of them
unanswerable) in about two minutes on a laptop CPU. That shows every step
but proves little: in 35 updates the model learns first when to abstain
(most windows have no answer), so expect EM/F1 around 30-40, mostly from
the unanswerable questions.

For real results point it at SQuAD itself (`train-v1.1.json` /
`dev-v1.1.json`, or `train-v2.0.json` / `dev-v2.0.json`) with the usual
settings:

    python examples/finetune_squad.py --train-file squad/train-v2.0.json \\
        --validation-file squad/dev-v2.0.json --epochs 2 --learning-rate 5e-5 \\
        --sequence-length 384 --batch-size 32

With SQuAD v2.0 files (questions marked `is_impossible`), an empty answer is
given when the no-answer score beats the best span by more than
`--null-score-threshold` (default 0).
"""

import argparse
import os
import tempfile
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402

from kerasbert.runs.finetuning import finetune  # noqa: E402
from kerasbert.readers import read_squad  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SAMPLE = os.path.join(ROOT, "tests", "data", "squad_v2_sample.json")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train-file", default=SAMPLE, help="a SQuAD v1.1 or v2.0 JSON file")
    parser.add_argument("--validation-file", help="scored every epoch (default: the training file)")
    parser.add_argument("--preset", default="all_minilm_l6_v2")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--sequence-length", type=int, default=384, help="tokens per window")
    parser.add_argument("--null-score-threshold", type=float, help="SQuAD v2.0 (default 0)")
    parser.add_argument("--output", help="the run's directory (default: a new temporary one)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    output = args.output or tempfile.mkdtemp(prefix="kerasbert-squad-")
    validation_file = args.validation_file or args.train_file
    print(f"Fine-tuning {args.preset} for question answering on {args.train_file} "
          f"({keras.backend.backend()} backend), run in {output}")
    start = time.time()
    result = finetune(
        "squad", args.preset, args.train_file, output, validation_file=validation_file, epochs=args.epochs,
        batch_size=args.batch_size, learning_rate=args.learning_rate, sequence_length=args.sequence_length,
        null_score_threshold=args.null_score_threshold, seed=args.seed, verbose=2,
    )
    history = result.history
    print(f"\nDone in {time.time() - start:.0f}s. Per epoch: "
          + ", ".join(f"EM {em:.1f} / F1 {f1:.1f}" for em, f1 in zip(history["val_exact_match"], history["val_f1"])))
    print(f"Best: F1 {result.best_metric:.2f} at epoch {result.best_epoch}, preset in {result.best_preset_dir}")

    # The best epoch, restored from its task preset, with the run's decoding
    # settings (null_score_threshold 0.0 for v2.0 files, None for v1.1).
    model = kerasbert.QuestionAnswerer.from_preset(result.best_preset_dir)
    settings = result.settings  # as in run.json
    examples = read_squad(validation_file)
    scores = model.evaluate_squad(examples, batch_size=args.batch_size)
    print(f"\nSQuAD v{settings['squad_version']} validation: exact match {scores['exact_match']:.2f}, "
          f"F1 {scores['f1']:.2f} over {scores['total']} questions")
    if "HasAns_f1" in scores:
        print(f"  answerable: F1 {scores['HasAns_f1']:.2f} ({scores['HasAns_total']}), "
              f"unanswerable: F1 {scores['NoAns_f1']:.2f} ({scores['NoAns_total']})")

    print("\nA few answers:")
    shown = examples[:6]
    for example, answer in zip(shown, model.predict_answers(shown)):
        gold = "(no answer)" if example.is_impossible else example.answers[0].text
        print(f"  Q: {example.question}\n     predicted: {answer.text or '(no answer)'!s}   gold: {gold}")


if __name__ == "__main__":
    main()
