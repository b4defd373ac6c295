"""ONNX and LiteRT exports, each run in a fresh process where kerasbert,
Keras and TensorFlow cannot be imported (onnxruntime and transformers'
tokenizer; LiteRT's interpreter with tensorflow-text's kernels loaded from
their library), against `predict` to 1e-4 on real Rotten Tomatoes
snippets. Every task kind is exported to ONNX in the tensorflow pass; from
JAX and torch an export rebuilds the task in a TensorFlow subprocess from
its preset, the same route for both, so one classifier takes it, in the
torch pass."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import rotten_tomatoes, tensorflow_pass_only, torch_pass_only

import kerasbert
from kerasbert import cli
from kerasbert.preprocessing import QuestionAnsweringPreprocessor, TextPreprocessor, TokenClassificationPreprocessor

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")

# Runs each request's model.onnx in onnxruntime, on the arrays given or, for
# texts, on the ids of transformers' tokenizer loaded from the export.
SERVE_ONNX = """
import json, sys
for name in ("kerasbert", "keras", "tensorflow", "tensorflow_text"):
    sys.modules[name] = None
import numpy as np, onnxruntime
requests, out = json.loads(sys.argv[1]), sys.argv[2]
outputs, described = {}, {}
with np.load(out + "_inputs.npz") as arrays:
    for name, path in requests.items():
        session = onnxruntime.InferenceSession(path + "/model.onnx", providers=["CPUExecutionProvider"])
        if name + "/texts" in arrays.files:
            from transformers import AutoTokenizer
            texts = [[str(t) for t in arrays[key]] for key in (name + "/texts", name + "/second")
                     if key in arrays.files]
            encoded = AutoTokenizer.from_pretrained(path)(*texts, padding=True, truncation=True, return_tensors="np")
            feed = {"token_ids": encoded["input_ids"], "padding_mask": encoded["attention_mask"],
                    "segment_ids": encoded["token_type_ids"]}
            for key, value in feed.items():
                outputs[name + "/tokenized_" + key] = value
        else:
            feed = {key.split("/")[1]: arrays[key] for key in arrays.files if key.startswith(name + "/")}
        wanted = [i.name for i in session.get_inputs()]
        results = session.run(None, {key: feed[key].astype(np.int32) for key in wanted})
        for output, value in zip(session.get_outputs(), results):
            outputs[name + "/" + output.name] = value
        described[name] = {"inputs": {i.name: [i.type, i.shape] for i in session.get_inputs()},
                           "outputs": {o.name: o.shape for o in session.get_outputs()}}
np.savez(out + ".npz", **outputs)
json.dump(described, open(out + ".json", "w"))
"""

# Runs model.tflite in LiteRT's interpreter with tensorflow-text's kernels,
# loaded as benchmarks/serving_formats.py loads them (`litert_text_ops`).
SERVE_LITERT = """
import json, sys
for name in ("kerasbert", "keras", "tensorflow", "tensorflow_text"):
    sys.modules[name] = None
import numpy as np
from ai_edge_litert.interpreter import InterpreterWithCustomOps
sys.path.insert(0, %r)
from serving_formats import litert_text_ops
text_ops = litert_text_ops()
requests, out = json.loads(sys.argv[1]), sys.argv[2]
outputs = {}
for name, (path, texts) in requests.items():
    interpreter = InterpreterWithCustomOps(model_path=path + "/model.tflite", custom_op_registerers=text_ops)
    served = interpreter.get_signature_runner("serving_default")(text=np.array(texts, dtype=object))
    for key, value in served.items():
        outputs[name + "/" + key] = value.astype("S") if value.dtype == object else value
np.savez(out + ".npz", **outputs)
""" % BENCHMARKS


def serve(script, requests, directory, arrays=None):
    """{name: request} served by `script` in a fresh process -> ({name:
    {output: array}}, what the script described)."""
    out = os.path.join(directory, "served")
    if arrays is not None:
        np.savez(out + "_inputs.npz", **arrays)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(requests), out], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outputs = {name: {} for name in requests}
    with np.load(out + ".npz") as served:
        for key in served.files:
            name, output = key.split("/")
            outputs[name][output] = served[key]
    described = json.load(open(out + ".json")) if os.path.exists(out + ".json") else None
    return outputs, described


def tiny_encoder(num_segments=2):
    return kerasbert.Encoder(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             num_segments=num_segments, max_sequence_length=64, initializer_range=0.3)


def snippets(count):
    return [text for text, _ in rotten_tomatoes()[:count]]


def features(preprocessor, x):
    """The preprocessor's model inputs for `x`, as NumPy."""
    return {k: np.asarray(v) for k, v in preprocessor(x).items()} if not isinstance(x, dict) else x


@tensorflow_pass_only
def test_onnx_serves_every_task_like_predict(minilm_tokenizer, tmp_path):
    """Every task kind as ONNX, served by onnxruntime on the preprocessor's
    features (a classifier on transformers' ids from the export's tokenizer
    files): the model's outputs by name, to 1e-4."""
    keras.utils.set_random_seed(0)
    texts = snippets(1000)
    short = TextPreprocessor(minilm_tokenizer, sequence_length=24)  # truncates most snippets
    tagger_preprocessor = TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=16)
    reader_preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, sequence_length=24, doc_stride=4,
                                                        max_question_length=6)
    models = {
        "classifier": kerasbert.TextClassifier(tiny_encoder(), labels=["rotten", "fresh"], preprocessor=short),
        "tagger": kerasbert.TokenClassifier(tiny_encoder(), labels=TAGS, crf=True, preprocessor=tagger_preprocessor),
        "reader": kerasbert.QuestionAnswerer(tiny_encoder(), preprocessor=reader_preprocessor),
        "embedder": kerasbert.TextEmbedder(tiny_encoder(num_segments=0), normalize=True, preprocessor=short),
        "filler": kerasbert.MaskedLM(tiny_encoder(), preprocessor=short),
        "pretrainer": kerasbert.BertPretrainer(tiny_encoder()),
    }
    inputs = {
        "tagger": features(tagger_preprocessor, texts[:8]),
        "reader": {k: np.asarray(v) for k, v in reader_preprocessor((texts[:4], texts[4:8])).items()
                   if k in models["reader"].input},  # several windows an example
        "embedder": features(short, texts[:8]),
    }
    masked = dict(features(short, texts[:8]), mask_positions=np.array([[1, 3, 5]] * 8, "int32"))
    inputs["filler"] = {k: masked[k] for k in models["filler"].input}
    inputs["pretrainer"] = inputs["filler"]
    # The classifier again on pairs, tokenized by transformers' tokenizer from the export.
    arrays = {"classifier/texts": np.array(texts), "pairs/texts": np.array(texts[:200]),
              "pairs/second": np.array(texts[200:400])}
    arrays.update({f"{name}/{key}": value for name, x in inputs.items() for key, value in x.items()
                   if key in models[name].input})
    for name, model in models.items():
        model.export(tmp_path / name, format="onnx")
    requests = {name: str(tmp_path / name) for name in models}
    outputs, described = serve(SERVE_ONNX, dict(requests, pairs=requests["classifier"]), str(tmp_path), arrays)

    for name, x in [("classifier", texts), ("pairs", (texts[:200], texts[200:400]))]:
        expected = features(short, x)
        for key in ("token_ids", "padding_mask", "segment_ids"):  # transformers' tokenizer, truncating as kerasbert
            np.testing.assert_array_equal(outputs[name]["tokenized_" + key], expected[key], err_msg=f"{name}/{key}")
        np.testing.assert_allclose(outputs[name]["logits"], models["classifier"].predict(expected, verbose=0),
                                   atol=1e-4, err_msg=name)
    inputs["classifier"] = features(short, texts)
    assert sorted(os.listdir(tmp_path / "classifier")) == ["model.onnx", "tokenizer_config.json", "vocab.txt"]
    assert "vocab.txt" not in os.listdir(tmp_path / "pretrainer")  # no preprocessor: the model alone
    for name, model in models.items():
        inputs[name] = {k: inputs[name][k] for k in model.input}
        predicted = model.predict(inputs[name], verbose=0)
        predicted = predicted if isinstance(predicted, dict) else {model.output_names[0]: predicted}
        axes = {k: ["batch", "masks" if k == "mask_positions" else "sequence"] for k in model.input}
        assert described[name]["inputs"] == {k: ["tensor(int32)", axes[k]] for k in model.input}, name
        second = "masks" if "mask_positions" in model.input else "sequence"
        symbolic = model.output if isinstance(model.output, dict) else {model.output_names[0]: model.output}
        assert described[name]["outputs"] == {
            k: ["batch", *[second if a is None else a for a in symbolic[k].shape[1:]]] for k in predicted}, name
        for key, value in predicted.items():
            np.testing.assert_allclose(outputs[name][key], value, atol=1e-4, err_msg=f"{name}/{key}")
    assert outputs["classifier"]["logits"].shape == (1000, 2)


@tensorflow_pass_only
def test_litert_serves_raw_text_like_predict(minilm_tokenizer, tmp_path):
    """A WordPiece classifier with its tokenizer in the LiteRT graph, on 1,000
    real snippets: `predict`'s logits, probabilities and labels to 1e-4. The
    graph's tokenizer gives kerasbert's ids on all 12,808 snippets."""
    import tensorflow as tf

    from kerasbert.export.litert import fast_bert_tokenizer, litert_serving_function

    keras.utils.set_random_seed(0)
    everything = [text for text, _ in rotten_tomatoes()]
    texts = everything[:1000]
    model = kerasbert.TextClassifier(tiny_encoder(), labels=["rotten", "fresh"],
                                     preprocessor=TextPreprocessor(minilm_tokenizer, sequence_length=32))
    model.export(tmp_path / "classifier", format="litert")
    assert os.listdir(tmp_path / "classifier") == ["model.tflite"]
    outputs, _ = serve(SERVE_LITERT, {"classifier": (str(tmp_path / "classifier"), texts)}, str(tmp_path))
    served = outputs["classifier"]

    serve_graph = litert_serving_function(model).get_concrete_function().graph
    kernels = {op.type for op in serve_graph.get_operations()}
    assert {"FastBertNormalize", "FastWordpieceTokenizeWithOffsets"} <= kernels  # tensorflow-text's, which LiteRT runs
    assert fast_bert_tokenizer(minilm_tokenizer).tokenize(tf.constant(everything)).to_list() == \
        minilm_tokenizer(everything).to_list()

    expected = model.predict(texts, verbose=0)
    np.testing.assert_allclose(served["logits"], expected, atol=1e-4)
    np.testing.assert_allclose(served["probabilities"], keras.ops.convert_to_numpy(keras.ops.softmax(expected)),
                               atol=1e-4)
    np.testing.assert_array_equal(served["label"], expected.argmax(-1))
    assert [n.decode() for n in served["label_name"]] == [["rotten", "fresh"][i] for i in served["label"]]


@tensorflow_pass_only
@pytest.mark.parametrize("flags", [{}, {"lowercase": False, "strip_accents": True, "clean_text": False}],
                         ids=["uncased", "cased-stripped-unclean"])
def test_litert_tokenizer_on_every_code_point(minilm_tokenizer, flags):
    """The LiteRT graph's tokenizer (FastBertTokenizer with kerasbert's
    normaliser model) against kerasbert's, on every code point inside
    words and on ill-formed UTF-8: the ids differ exactly where
    tensorflow-text's own pre-tokenizer isolates a character that BERT's
    rules leave inside a word (punctuation and CJK ideographs of newer
    Unicode than transformers' tables), and nowhere else."""
    import random

    import tensorflow as tf
    import tensorflow_text as tf_text

    from kerasbert.export.litert import fast_bert_tokenizer
    from kerasbert.tokenizers import unicode

    tokenizer = kerasbert.tokenizers.WordPieceTokenizer(minilm_tokenizer.vocabulary, **flags)
    rules = unicode.BertCharacterRules(tokenizer.lowercase, tokenizer.strip_accents, tokenizer.clean_text)
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"the{chr(c)}end x{chr(c)} \u00c9t\u00e9" for c in points]
    fast = fast_bert_tokenizer(tokenizer).tokenize(tf.constant(texts)).to_list()
    ours = [ids for start in range(0, len(texts), 100_000) for ids in tokenizer(texts[start:start + 100_000]).to_list()]
    differ = {c for c, a, b in zip(points, fast, ours) if a != b}

    # tensorflow-text's pre-tokenizer alone: does it split "a?a" (one [UNK] if not) around the character?
    plain = tf_text.FastWordpieceTokenizer(["[UNK]", "a"], no_pretokenization=False, token_out_type=tf.int32)
    split = plain.tokenize(tf.constant([f"a{chr(c)}a" for c in points])).row_lengths().numpy() > 1
    kept_in_words = {c for c, s in zip(points, split)
                     if s and rules.normalize_char(c) == chr(c) and rules.split_class(c) == unicode.WORD}
    assert differ == kept_in_words
    assert len(differ) < 500

    rng = random.Random(0)
    pieces = [b"a", b" ", b".", b"\xff", b"\x80", b"\xc3", b"\xc3\xa9", b"\xe2\x80", b"\xe2\x80\xa6", b"\xf0\x9f\x98",
              b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"\x00"]
    broken = [b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 10))) for _ in range(5000)]
    assert fast_bert_tokenizer(tokenizer).tokenize(tf.constant(broken)).to_list() == \
        tokenizer(tf.constant(broken)).to_list()


@torch_pass_only
def test_exports_from_another_backend_serve_like_predict(minilm_tokenizer, tmp_path):
    """A classifier of this backend (mean pooling; the tensorflow pass's
    LiteRT test pools [CLS]), exported to ONNX and LiteRT through the
    TensorFlow subprocess: its weights, served, give `predict`'s logits. The
    same weights under mixed_bfloat16 are exported in float32: their ONNX
    gives the float32 logits."""
    keras.utils.set_random_seed(1)
    texts = snippets(200)
    preprocessor = TextPreprocessor(minilm_tokenizer, sequence_length=32)
    model = kerasbert.TextClassifier(tiny_encoder(), num_classes=3, pooling="mean", preprocessor=preprocessor)
    model.save_to_preset(tmp_path / "task")
    assert cli.main(["export", str(tmp_path / "task"), str(tmp_path / "onnx"), "--format", "onnx"]) == 0
    model.export(tmp_path / "litert", format="litert")
    mixed = kerasbert.TextClassifier.from_preset(tmp_path / "task", dtype="mixed_bfloat16")
    assert mixed.dtype_policy.name == "mixed_bfloat16"
    mixed.export(tmp_path / "mixed", format="onnx")
    expected = model.predict(texts, verbose=0)
    onnx, _ = serve(SERVE_ONNX, {"onnx": str(tmp_path / "onnx"), "mixed": str(tmp_path / "mixed")}, str(tmp_path),
                    {"onnx/texts": np.array(texts), "mixed/texts": np.array(texts)})
    np.testing.assert_allclose(onnx["onnx"]["logits"], expected, atol=1e-4)
    np.testing.assert_allclose(onnx["mixed"]["logits"], expected, atol=1e-4)
    litert, _ = serve(SERVE_LITERT, {"litert": (str(tmp_path / "litert"), texts)}, str(tmp_path))
    np.testing.assert_allclose(litert["litert"]["logits"], expected, atol=1e-4)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".kerasbert-")]


def test_export_command_refuses_flags_of_the_saved_model(tmp_path, capsys):
    for flag in (["--quantize", "int8"], ["--pairs"]):
        with pytest.raises(SystemExit) as exit:
            cli.main(["export", str(tmp_path / "task"), str(tmp_path / "out"), "--format", "litert", *flag])
        err = capsys.readouterr().err
        assert exit.value.code == 2 and f"{flag[0]} is for --format saved_model" in err, err


def test_onnx_and_litert_export_errors(minilm_tokenizer, tmp_path):
    preprocessor = TextPreprocessor(minilm_tokenizer, sequence_length=16)
    classifier = kerasbert.TextClassifier(tiny_encoder(), num_classes=2, preprocessor=preprocessor)
    with pytest.raises(ValueError, match=r"format='tflite' is not an export format; expected one of \('saved_model'"):
        classifier.export(tmp_path / "a", format="tflite")
    with pytest.raises(TypeError, match="format='onnx' takes no serving options"):
        classifier.export(tmp_path / "a", format="onnx", pairs=True)
    with pytest.raises(TypeError, match="format='litert' takes no serving options"):
        classifier.export(tmp_path / "a", format="litert", pairs=True)
    with pytest.raises(TypeError, match="format='litert' exports a TextClassifier .* got a TextEmbedder"):
        kerasbert.TextEmbedder(tiny_encoder(), preprocessor=preprocessor).export(tmp_path / "a", format="litert")
    with pytest.raises(ValueError, match="no preprocessor"):
        kerasbert.TextClassifier(tiny_encoder(), num_classes=2).export(tmp_path / "a", format="litert")
    unsplit = kerasbert.tokenizers.WordPieceTokenizer(minilm_tokenizer.vocabulary, tokenize_chinese_chars=False)
    with pytest.raises(ValueError, match="tokenize_chinese_chars=True .* has tokenize_chinese_chars=False"):
        kerasbert.TextClassifier(tiny_encoder(), num_classes=2, preprocessor=TextPreprocessor(
            unsplit, sequence_length=16)).export(tmp_path / "a", format="litert")
    pieces = kerasbert.tokenizers.BytePairTokenizer({"<s>": 0, "</s>": 1, "<pad>": 2, "<unk>": 3, "<mask>": 4, "a": 5},
                                                    [])
    with pytest.raises(ValueError, match="needs a WordPiece tokenizer .* has a BytePairTokenizer"):
        kerasbert.TextClassifier(tiny_encoder(), num_classes=2, preprocessor=TextPreprocessor(
            pieces, sequence_length=16)).export(tmp_path / "a", format="litert")
    classifier.quantize("int8")
    for format in ("onnx", "litert"):
        with pytest.raises(ValueError, match="quantized.*export before quantize"):
            classifier.export(tmp_path / "a", format=format)
    assert os.listdir(tmp_path) == []
    pretrainer = kerasbert.ElectraPretrainer(tiny_encoder(), tiny_encoder())
    for format in ("saved_model", "onnx", "litert"):
        with pytest.raises(TypeError, match="ElectraPretrainer cannot be exported: its outputs are sampled"):
            pretrainer.export(tmp_path / "a", format=format)
    with pytest.raises(TypeError, match=r"pretrainer.discriminator.save_to_preset\(dir\)"):
        pretrainer.save_to_preset(tmp_path / "a")
    assert os.listdir(tmp_path) == []
