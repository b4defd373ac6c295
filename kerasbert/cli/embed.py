"""`kerasbert embed`: sentence embeddings as a .npy file."""

import argparse

from kerasbert.cli.common import check_output, command_parser, positive_int, read_texts, step


def run(args):
    import numpy as np

    import kerasbert
    from kerasbert.utils.io import atomic_file

    check_output(args.output)
    texts = read_texts(args)
    options = {name: getattr(args, name) for name in ("pooling", "normalize") if getattr(args, name) is not None}
    step(f"loading {args.preset} ...")
    embedder = kerasbert.TextEmbedder.from_preset(args.preset, **options)
    if embedder.preprocessor is None:
        raise ValueError(f"{args.preset} has no tokenizer files, so it cannot read text.")
    step(f"embedding {len(texts)} text(s) ...")
    vectors = np.asarray(embedder.predict(texts, batch_size=args.batch_size), np.float32)  # (n, hidden)
    with atomic_file(args.output) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, vectors)
    print(f"Wrote embeddings of shape {vectors.shape} (float32) to {args.output}")
    return 0


def add_parser(commands):
    parser = command_parser(
        commands,
        "embed",
        help="write sentence embeddings of texts as a .npy array",
        description="Embeds texts (arguments or --file) with a TextEmbedder task preset, or with any "
        "encoder (a built-in preset name, a preset directory, a Hugging Face checkpoint) pooled as "
        "TextEmbedder.from_preset pools it (all_minilm_l6_v2: mean, normalised, as sentence-transformers; "
        "other encoders: the mean over tokens), and writes a float32 array of shape (texts, hidden_dim) "
        "with numpy.save, row i for text i.",
        examples=(
            'kerasbert embed all_minilm_l6_v2 "A man is eating food." --output vectors.npy',
            "kerasbert embed runs/embedder/final --file sentences.txt --output vectors.npy --batch-size 64",
        ),
    )
    add = parser.add_argument
    add("preset", metavar="PRESET",
        help="a TextEmbedder task preset directory, or an encoder: a built-in name, a preset directory, a "
        "Hugging Face checkpoint directory or hf://org/name")
    add("texts", nargs="*", metavar="TEXT", help="texts to embed")
    add("--file", metavar="PATH", help="texts instead of TEXT: one per line (blank lines skipped)")
    add("--output", required=True, metavar="PATH.npy", help="the array file to write (replaced atomically)")
    add("--pooling", choices=("mean", "cls"),
        help="pool the mean over real tokens or the first token (default: the preset's, else mean)")
    add("--normalize", action=argparse.BooleanOptionalAction,
        help="scale each vector to unit length, so dot products are cosine similarities (default: the preset's)")
    add("--batch-size", type=positive_int, default=32, metavar="N", help="texts per prediction batch (default 32)")
    parser.set_defaults(run=run)
