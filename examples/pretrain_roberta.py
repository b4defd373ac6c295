"""Pretrains a small RoBERTa from scratch: dynamic-mask MLM, no next-sentence
task, full-sentence rows with several documents packed per row (attention
stays inside each document), byte-level BPE.

On the King James Bible (data/kjv_documents.txt, fetched by `make test` or
tools/fetch_data.sh), with a new 4,000-token byte-level BPE vocabulary:

    python examples/pretrain_roberta.py

The same run from the command line:

    kerasbert pretrain --preset roberta_base_en --objective mlm --from-scratch \\
        --train-files data/kjv_documents.txt --vocabulary-size 4000 \\
        --num-layers 2 --hidden-dim 128 --num-heads 2 --intermediate-dim 512 \\
        --sequence-length 64 --batch-size 32 --steps 800 --learning-rate 1e-3 \\
        --output runs/roberta

Every batch draws a new mask (a pure function of the seed and the step, so
a resumed run sees exactly the batches it would have seen).
"""

import argparse

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86

PROBES = [
    "In the beginning God created the<mask> and the earth.",
    "And God said, Let there be<mask>: and there was light.",
    "The LORD is my<mask>; I shall not want.",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-files", default="data/kjv_documents.txt")
    parser.add_argument("--output", default="runs/roberta")
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args()

    result = kerasbert.pretrain(
        "roberta_base_en", "mlm", args.train_files, args.output,
        from_scratch=True, vocabulary_size=4000, num_layers=2, hidden_dim=128, num_heads=2,
        intermediate_dim=512, sequence_length=64, batch_size=32, steps=args.steps,
        learning_rate=1e-3, resume=True,
    )
    for name in ("mlm_loss", "mlm_accuracy"):
        print(f"{name:>14}: {result.history[name][0]:.3f} -> {result.history[name][-1]:.3f}")
    print(f"Saved encoder + tokenizer: {result.preset_dir}\n")
    # "<mask>" swallows the space before it, as in RoBERTa: candidates start with "Ġ" (a space).
    for text, masks in zip(PROBES, kerasbert.tasks.fill_mask(result.model, result.tokenizer, PROBES)):
        print(f"{text}\n    " + ", ".join(f"{token.replace('Ġ', ' ')!r} {p:.2f}" for token, p in masks[0]))


if __name__ == "__main__":
    main()
