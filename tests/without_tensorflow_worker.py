"""Run by tests/test_without_tensorflow.py in a Python that cannot import
TensorFlow or TensorFlow Text: the modeling floors on token ids.

argv: a work directory holding `hf/` (a transformers BERT checkpoint) and
`reference.npz` (its inputs and outputs). Writes `roundtrip/` (the trained
encoder as a Hugging Face checkpoint) and `roundtrip.npy` (its sequence
output) for the parent to check with transformers.
"""

import importlib.util
import os
import sys

import numpy as np


def main(work):
    for name in ("tensorflow", "tensorflow_text"):
        assert importlib.util.find_spec(name) is None, f"{name} is importable"

    import keras

    import kerasbert

    assert "tensorflow" not in sys.modules
    reference = np.load(os.path.join(work, "reference.npz"))
    features = {k: reference[k] for k in ("token_ids", "segment_ids", "padding_mask")}

    # A Hugging Face directory, exact.
    encoder = kerasbert.from_preset(os.path.join(work, "hf"))
    output = keras.ops.convert_to_numpy(encoder(features)["sequence_output"])
    np.testing.assert_allclose(output, reference["sequence_output"], atol=1e-5)

    # Every task builds and predicts on token ids; three train a step.
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, len(features["token_ids"]))
    classifier = kerasbert.TextClassifier(encoder, num_classes=2)
    classifier.compile(optimizer=kerasbert.optimizers.AdamW(1e-3), loss="sparse_categorical_crossentropy")
    history = classifier.fit(features, labels, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    probabilities = classifier.predict(features, verbose=0)
    assert probabilities.shape == (len(labels), 2)
    assert np.all(np.isfinite(classifier.evaluate(features, labels, verbose=0)))
    tagger = kerasbert.TokenClassifier(encoder, num_classes=3)
    tagger.compile(optimizer="adam")
    tagger.fit(features, rng.integers(0, 3, features["token_ids"].shape), batch_size=2, verbose=0)
    assert tagger.predict(features, verbose=0).shape[:2] == features["token_ids"].shape
    masked = {**features, "mask_positions": np.tile(np.array([[1, 2]], "int32"), (len(labels), 1))}
    masked_lm = kerasbert.MaskedLM(encoder)
    masked_lm.compile(optimizer=kerasbert.optimizers.Lamb(1e-3))
    masked_lm.fit(masked, rng.integers(1, 97, (len(labels), 2)), batch_size=2, verbose=0)
    for task in (kerasbert.TextEmbedder(encoder), kerasbert.QuestionAnswerer(encoder), kerasbert.MaskedLM(encoder),
                 kerasbert.BertPretrainer(encoder)):
        task.predict(masked if isinstance(task, (kerasbert.MaskedLM, kerasbert.BertPretrainer)) else features,
                     verbose=0)
    generator = kerasbert.tasks.electra_generator(encoder)
    kerasbert.ElectraPretrainer(generator, encoder)

    # Presets of the encoder and of a task, saved and loaded back.
    # (The tasks above share the encoder: outputs are taken again after training.)
    probabilities = classifier.predict(features, verbose=0)
    output = keras.ops.convert_to_numpy(encoder(features)["sequence_output"])
    classifier.save_to_preset(os.path.join(work, "classifier"))
    restored = kerasbert.TextClassifier.from_preset(os.path.join(work, "classifier"))
    np.testing.assert_allclose(restored.predict(features, verbose=0), probabilities, atol=1e-6)
    encoder.save_to_preset(os.path.join(work, "encoder"))
    again = kerasbert.from_preset(os.path.join(work, "encoder"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(features)["sequence_output"]), output, atol=1e-6)
    kerasbert.convert.to_huggingface(again, os.path.join(work, "roundtrip"))
    np.save(os.path.join(work, "roundtrip.npy"), output)

    # Text needs TensorFlow, and says so.
    try:
        kerasbert.tokenizers.WordPieceTokenizer(vocabulary=["[PAD]", "[UNK]", "a"])
    except ImportError as error:
        assert "kerasbert[tensorflow]" in str(error), error
    else:
        raise AssertionError("a tokenizer was built without TensorFlow")
    assert "tensorflow" not in sys.modules
    print("OK")


if __name__ == "__main__":
    main(sys.argv[1])
