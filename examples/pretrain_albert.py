"""Pretrains a small ALBERT from scratch: masked LM + sentence-order
prediction, factorised embeddings (128 wide) and one set of layer weights
shared by all layers.

On the King James Bible (data/kjv_documents.txt, fetched by `make test` or
tools/fetch_data.sh), with a new 4,000-piece SentencePiece vocabulary:

    python examples/pretrain_albert.py

The same run from the command line (ALBERT-base's architecture shrunk):

    kerasbert pretrain --preset albert_base_en_v2 --objective mlm+sop --from-scratch \\
        --train-files data/kjv_documents.txt --vocabulary-size 4000 \\
        --num-layers 4 --hidden-dim 256 --num-heads 4 --intermediate-dim 1024 \\
        --sequence-length 64 --batch-size 32 --steps 800 --learning-rate 1e-3 \\
        --output runs/albert
"""

import argparse

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86

PROBES = [
    "in the beginning god created the [MASK] and the earth.",
    "the lord is my [MASK]; i shall not want.",
    "and the [MASK] of god moved upon the face of the waters.",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-files", default="data/kjv_documents.txt")
    parser.add_argument("--output", default="runs/albert")
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args()

    result = kerasbert.pretrain(
        "albert_base_en_v2", "mlm+sop", args.train_files, args.output,
        from_scratch=True, vocabulary_size=4000, num_layers=4, hidden_dim=256, num_heads=4,
        intermediate_dim=1024, sequence_length=64, batch_size=32, steps=args.steps,
        learning_rate=1e-3, resume=True,
    )
    encoder = result.model.encoder
    print(f"{encoder.num_layers} layers sharing {encoder.num_layer_groups} set of weights, "
          f"embeddings {encoder.embedding_dim} wide: {encoder.count_params():,} parameters")
    for name in ("mlm_loss", "mlm_accuracy", "sop_accuracy"):
        print(f"{name:>14}: {result.history[name][0]:.3f} -> {result.history[name][-1]:.3f}")
    print(f"Saved encoder + tokenizer: {result.preset_dir}\n")
    for text, masks in zip(PROBES, kerasbert.tasks.fill_mask(result.model, result.tokenizer, PROBES)):
        print(f"{text}\n    " + ", ".join(f"{token} {p:.2f}" for token, p in masks[0]))


if __name__ == "__main__":
    main()
