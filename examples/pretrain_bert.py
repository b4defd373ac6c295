"""Pretrains a small BERT from scratch: masked LM + next-sentence prediction.

On the King James Bible (public domain; `make test` or tools/fetch_data.sh
puts it in data/kjv_documents.txt, one verse per line, a blank line
between chapters), with a new 4,000-token WordPiece vocabulary trained on
the text itself:

    python examples/pretrain_bert.py              # a few minutes on a laptop CPU
    KERAS_BACKEND=jax python examples/pretrain_bert.py --steps 2000

The same run from the command line:

    kerasbert pretrain --preset bert_tiny_en_uncased --objective mlm+nsp \\
        --from-scratch --train-files data/kjv_documents.txt --vocabulary-size 4000 \\
        --sequence-length 64 --batch-size 32 --steps 800 --learning-rate 1e-3 \\
        --output runs/bert

Then it fills in masked words and prints what it learnt. Run it again to
continue a run that was stopped (it resumes from the last checkpoint).
"""

import argparse

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86

PROBES = [
    "in the beginning god created the [MASK] and the earth.",
    "and god said, let there be [MASK]: and there was light.",
    "the lord is my [MASK]; i shall not want.",
    "for god so loved the [MASK], that he gave his only begotten son.",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-files", default="data/kjv_documents.txt")
    parser.add_argument("--output", default="runs/bert")
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args()

    result = kerasbert.pretrain(
        "bert_tiny_en_uncased", "mlm+nsp", args.train_files, args.output,
        from_scratch=True, vocabulary_size=4000, sequence_length=64, batch_size=32,
        steps=args.steps, learning_rate=1e-3, resume=True,
    )
    history = result.history
    for name in ("mlm_loss", "mlm_accuracy", "nsp_loss", "nsp_accuracy"):
        print(f"{name:>14}: {history[name][0]:.3f} (first {history['step'][0]} steps) -> "
              f"{history[name][-1]:.3f} (last {history['step'][0]} steps)")
    print(f"Saved encoder + tokenizer: {result.preset_dir}\n")
    for text, masks in zip(PROBES, kerasbert.tasks.fill_mask(result.model, result.tokenizer, PROBES)):
        print(f"{text}\n    " + ", ".join(f"{token} {p:.2f}" for token, p in masks[0]))


if __name__ == "__main__":
    main()
