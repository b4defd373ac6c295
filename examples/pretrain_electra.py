"""Pretrains a small ELECTRA from scratch: a generator (a quarter of the
discriminator's width, sharing its embeddings) fills masked words, the
discriminator learns to spot which words were replaced.

On the King James Bible (data/kjv_documents.txt, fetched by `make test` or
tools/fetch_data.sh), with a new 4,000-token WordPiece vocabulary:

    python examples/pretrain_electra.py

The same run from the command line (ELECTRA-small's architecture shrunk):

    kerasbert pretrain --preset electra_small_discriminator_en --objective electra \\
        --from-scratch --train-files data/kjv_documents.txt --vocabulary-size 4000 \\
        --num-layers 4 --sequence-length 64 --batch-size 32 --steps 800 \\
        --learning-rate 1e-3 --output runs/electra

The discriminator is what is saved (runs/electra/preset) for fine-tuning.
Afterwards it reads a verse with one word swapped and shows, per token, how
sure it is that the token was replaced.
"""

import argparse

import numpy as np
import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
from keras import ops  # noqa: E402

ORIGINAL = "and god said, let there be light: and there was light."
SWAPPED = "and god said, let there be bread: and there was light."


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-files", default="data/kjv_documents.txt")
    parser.add_argument("--output", default="runs/electra")
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args()

    result = kerasbert.pretrain(
        "electra_small_discriminator_en", "electra", args.train_files, args.output,
        from_scratch=True, vocabulary_size=4000, num_layers=4, sequence_length=64,
        batch_size=32, steps=args.steps, learning_rate=1e-3, resume=True,
    )
    pretrainer, tokenizer = result.model, result.tokenizer
    print(f"generator hidden {pretrainer.generator.hidden_dim}, discriminator hidden "
          f"{pretrainer.discriminator.hidden_dim}, shared embeddings {pretrainer.discriminator.embedding_width} wide")
    for name in ("mlm_loss", "mlm_accuracy", "rtd_loss", "rtd_accuracy"):
        print(f"{name:>14}: {result.history[name][0]:.3f} -> {result.history[name][-1]:.3f}")
    print(f"Saved discriminator + tokenizer: {result.preset_dir}\n")

    # The discriminator's replaced-token probabilities, token by token.
    packer = kerasbert.Packer.from_tokenizer(tokenizer, 64)
    inputs = {k: np.asarray(v) for k, v in packer(tokenizer([ORIGINAL, SWAPPED])).items()}
    sequence = pretrainer.discriminator(inputs, training=False)["sequence_output"]
    head = pretrainer.get_layer("discriminator_output")(pretrainer.get_layer("discriminator_dense")(sequence))
    replaced = 1 / (1 + np.exp(-ops.convert_to_numpy(head)[..., 0]))
    for row, text in enumerate((ORIGINAL, SWAPPED)):
        real = inputs["padding_mask"][row] != 0
        tokens = [tokenizer.id_to_token(int(i)) for i in inputs["token_ids"][row][real]]
        print(text)
        print("    " + " ".join(f"{t}:{p:.2f}" for t, p in zip(tokens[1:-1], replaced[row][real][1:-1])))


if __name__ == "__main__":
    main()
