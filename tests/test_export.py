"""Serving exports: SavedModels that take raw text, written from every
backend, loaded and run in a fresh process where kerasbert and keras_hub
cannot be imported (TensorFlow and tensorflow-text only; tensorflow-text
imports Keras itself), giving `predict`'s outputs. On JAX and torch each
export rebuilds the task in a TensorFlow subprocess, so the exports are made
once for the module and served by one process."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasbert
from kerasbert import cli
from kerasbert.preprocessing import TextPreprocessor

TEXTS = ["A gem of a film.", "Dull, and far too long for what little it has to say about anything.", "Yes!"]
PAIRS = ["A good one.", "It was bad and it knew it.", "Yes."]

# Loads each SavedModel with kerasbert and keras_hub made unimportable, calls
# serving_default with its inputs, and writes the outputs (.npz) and the
# signatures (.json).
SERVE = """
import json, sys
for name in ("kerasbert", "keras_hub"):
    sys.modules[name] = None
import numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401
requests, out = json.loads(sys.argv[1]), sys.argv[2]
outputs, described = {}, {}
for name, (path, inputs) in requests.items():
    signature = tf.saved_model.load(path).signatures["serving_default"]
    for key, value in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items():
        outputs[name + "/" + key] = value.numpy()
    _, specs = signature.structured_input_signature
    described[name] = {
        "inputs": {k: [s.dtype.name, s.shape.as_list()] for k, s in specs.items()},
        "outputs": {k: [s.dtype.name, s.shape.as_list()] for k, s in signature.structured_outputs.items()}}
np.savez(out + ".npz", **outputs)
json.dump(described, open(out + ".json", "w"))
"""


def serve(requests, directory):
    """{name: (SavedModel path, inputs)} -> ({name: outputs}, {name: signature})."""
    out = os.path.join(directory, "served")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", SERVE, json.dumps({k: (os.fspath(p), i) for k, (p, i) in
                                                                      requests.items()}), out],
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out + ".npz") as arrays, open(out + ".json") as f:
        outputs = {name: {} for name in requests}
        for key in arrays.files:
            name, output = key.split("/")
            outputs[name][output] = arrays[key]
        return outputs, json.load(f)


def tiny_encoder(num_segments=2):
    return kerasbert.Encoder(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             num_segments=num_segments, max_sequence_length=64, initializer_range=0.3)


@pytest.fixture(scope="module")
def exported(minilm_tokenizer, tmp_path_factory):
    """Four tasks exported four ways, then served: a pair classifier
    (`export(pairs=True)`), a classifier through `kerasbert export`, a
    regressor, and an embedder exported over a directory that held a user's
    file (refused, then `overwrite=True`)."""
    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("export")
    short = TextPreprocessor(minilm_tokenizer, sequence_length=12, pad_to_sequence_length=False)  # truncates
    longer = TextPreprocessor(minilm_tokenizer, sequence_length=32, pad_to_sequence_length=False)
    models = {
        "pairs": kerasbert.TextClassifier(tiny_encoder(), num_classes=3, preprocessor=short),
        "command": kerasbert.TextClassifier(tiny_encoder(), num_classes=2, preprocessor=short),
        "regressor": kerasbert.TextClassifier(tiny_encoder(num_segments=0), num_classes=1, preprocessor=longer),
        "embedder": kerasbert.TextEmbedder(tiny_encoder(), normalize=True, preprocessor=longer),
    }
    paths = {name: root / name for name in models}
    models["pairs"].export(paths["pairs"], pairs=True)
    models["command"].save_to_preset(root / "task")
    assert cli.main(["export", str(root / "task"), str(paths["command"])]) == 0
    models["regressor"].export(paths["regressor"])
    paths["embedder"].mkdir()
    (paths["embedder"] / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        models["embedder"].export(paths["embedder"])
    kept = (paths["embedder"] / "mine.txt").read_text()
    models["embedder"].export(paths["embedder"], overwrite=True)
    inputs = {name: {"text": TEXTS} for name in models}
    inputs["pairs"]["text_pair"] = PAIRS
    outputs, signatures = serve({name: (paths[name], inputs[name]) for name in models}, str(root))
    return {"models": models, "paths": paths, "root": root, "outputs": outputs, "signatures": signatures,
            "kept": kept}


def test_classifiers_serve_raw_text_like_predict(exported):
    for name, x in [("pairs", (TEXTS, PAIRS)), ("command", TEXTS)]:
        expected = exported["models"][name].predict(x, verbose=0)
        outputs = exported["outputs"][name]
        np.testing.assert_allclose(outputs["logits"], expected, atol=1e-4)
        np.testing.assert_allclose(outputs["probabilities"],
                                   keras.ops.convert_to_numpy(keras.ops.softmax(expected)), atol=1e-4)
        np.testing.assert_array_equal(outputs["label"], expected.argmax(-1))
        classes = expected.shape[-1]
        assert exported["signatures"][name] == {
            "inputs": {"text": ["string", [None]], **({"text_pair": ["string", [None]]} if name == "pairs" else {})},
            "outputs": {"logits": ["float32", [None, classes]], "probabilities": ["float32", [None, classes]],
                        "label": ["int32", [None]]},
        }


def test_regressor_and_embedder_serve_like_predict(exported):
    for name, output, width in [("regressor", "logits", 1), ("embedder", "embedding", 16)]:
        np.testing.assert_allclose(exported["outputs"][name][output],
                                   exported["models"][name].predict(TEXTS, verbose=0), atol=1e-4)
        assert exported["signatures"][name]["outputs"] == {output: ["float32", [None, width]]}


def test_export_never_leaves_half_a_directory(exported):
    assert exported["kept"] == "keep me"  # refused without overwrite=True
    assert sorted(os.listdir(exported["paths"]["embedder"])) == ["assets", "fingerprint.pb", "saved_model.pb",
                                                                 "variables"]
    assert not [n for n in os.listdir(exported["root"]) if n.startswith(".kerasbert-export")]


def test_export_errors(exported, tmp_path, capsys):
    classifier, embedder = exported["models"]["command"], exported["models"]["embedder"]
    with pytest.raises(TypeError, match="pairs"):  # bad options fail before anything is written
        classifier.export(tmp_path / "a", pairs="yes")
    with pytest.raises(TypeError, match="unexpected keyword"):
        embedder.export(tmp_path / "a", pairs=True)
    with pytest.raises(ValueError, match="no preprocessor"):
        kerasbert.TextEmbedder(tiny_encoder()).export(tmp_path / "a")
    assert os.listdir(tmp_path) == []
    root = exported["root"]
    for argv, message in [(["export", str(root / "command"), str(tmp_path / "b")], "not a task preset"),
                          (["export", str(root / "task"), str(root / "command")], "already exists")]:
        with pytest.raises(SystemExit) as exit:
            cli.main(argv)
        assert exit.value.code == 2 and message in capsys.readouterr().err
