"""Serving exports: SavedModels that take raw text, written from every
backend, loaded and run in a fresh process where kerasbert and keras_hub
cannot be imported (TensorFlow and tensorflow-text only; tensorflow-text
imports Keras itself), giving `predict`'s outputs. On JAX and torch each
export rebuilds the task in a TensorFlow subprocess (about 8 s each), so the
exports are made once for the module and served by one process. What the
backend changes is the weights the subprocess receives, the same for every
task: there one classifier is exported (through `kerasbert export`, with
its weights quantized to int8, which the preset the subprocess reads
records); the
other tasks, whose exports differ from it only in the graph TensorFlow
builds, in the tensorflow pass. Each newer member
(DistilBERT, XLM-RoBERTa, DeBERTa-v3, ModernBERT) exports a task with its own
tokenizer, whose lookup tables the SavedModel must carry: WordPiece,
SentencePiece in two layouts and byte-level BPE with NFC."""

import json
import math
import os
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
from helpers import rotten_tomatoes

import kerasbert
from kerasbert import cli
from kerasbert.preprocessing import QuestionAnsweringPreprocessor, TextPreprocessor, TokenClassificationPreprocessor
from kerasbert.tasks import fill_mask

TEXTS = ["A gem of a film.", "Dull, and far too long for what little it has to say about anything.", "Yes!"]
PAIRS = ["A good one.", "It was bad and it knew it.", "Yes."]
SENTENCES = ["Ada Lovelace  was born in London .", "Thorbjørn visited Ouagadougou, Zürich and São Paulo in May 1990",
             "", "x"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
QUESTIONS = ["Who wrote it?", "Where?", "What year was that, precisely, in the calendar of the old republic?", "x"]
CONTEXTS = ["It was written by Amélie Poulain in Paris, in the summer of 1990, and then rewritten by Zoë.",
            "Paris", "In 1990 it happened, and in 1991 it was forgotten by most, but not by all.", ""]
MASKED = ["The [MASK] sat on the [MASK].", "Paris is the [MASK] of France.", "no mask here"]

# Loads each SavedModel with kerasbert and keras_hub made unimportable, calls
# serving_default with its inputs, and writes the outputs (.npz) and the
# signatures (.json).
SERVE = """
import json, sys
for name in ("kerasbert", "keras_hub"):
    sys.modules[name] = None
import numpy as np, tensorflow as tf, tensorflow_text  # noqa: F401
requests, out = json.loads(sys.argv[1]), sys.argv[2]
outputs, described, variables = {}, {}, {}
for name, (path, inputs) in requests.items():
    loaded = tf.saved_model.load(path)
    signature = loaded.signatures["serving_default"]
    for key, value in signature(**{k: tf.constant(v) for k, v in inputs.items()}).items():
        value = value.numpy()
        outputs[name + "/" + key] = value.astype("S") if value.dtype == object else value  # bytes, not pickles
    _, specs = signature.structured_input_signature
    variables[name] = [len(loaded.trainable_variables), len(loaded.non_trainable_variables)]  # as listed
    described[name] = {
        "inputs": {k: [s.dtype.name, s.shape.as_list()] for k, s in specs.items()},
        "outputs": {k: [s.dtype.name, s.shape.as_list()] for k, s in signature.structured_outputs.items()}}
np.savez(out + ".npz", **outputs)
json.dump({"signatures": described, "variables": variables}, open(out + ".json", "w"))
"""


def serve(requests, directory):
    """{name: (SavedModel path, inputs)} -> ({name: outputs}, {name: signature},
    {name: [trainable, non-trainable] variables the SavedModel lists})."""
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
        described = json.load(f)
        return outputs, described["signatures"], described["variables"]


# The tasks exported on this backend (see the module doc).
EXPORTED = ("command",) + (
    ("pairs", "tagger", "reader", "filler", "regressor", "embedder") if keras.backend.backend() == "tensorflow" else ())
tensorflow_exports = pytest.mark.skipif("embedder" not in EXPORTED, reason="exported in the tensorflow pass (see "
                                        "the module doc)")


def tiny_encoder(num_segments=2):
    return kerasbert.Encoder(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             num_segments=num_segments, max_sequence_length=64, initializer_range=0.3)


@pytest.fixture(scope="module")
def exported(minilm_tokenizer, tmp_path_factory):
    """Every task exported, then all served by one process: a pair
    classifier (`export(pairs=True)`), a classifier with class names through
    `kerasbert export --quantize int8`, a regressor, an embedder exported over a directory
    that held a user's file (refused, then `overwrite=True`), a tagger with a
    CRF, a question answerer and a masked LM."""
    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("export")
    short = TextPreprocessor(minilm_tokenizer, sequence_length=12, pad_to_sequence_length=False)  # truncates
    longer = TextPreprocessor(minilm_tokenizer, sequence_length=32, pad_to_sequence_length=False)
    models = {
        "pairs": kerasbert.TextClassifier(tiny_encoder(), num_classes=3, preprocessor=short),
        "command": kerasbert.TextClassifier(tiny_encoder(), labels=["negative", "positive"], preprocessor=short),
        "regressor": kerasbert.TextClassifier(tiny_encoder(num_segments=0), num_classes=1, preprocessor=longer),
        "embedder": kerasbert.TextEmbedder(tiny_encoder(), normalize=True, preprocessor=longer),
        "tagger": kerasbert.TokenClassifier(
            tiny_encoder(), labels=TAGS, crf=True,
            preprocessor=TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=12,
                                                         pad_to_sequence_length=False)),  # cuts words off
        "reader": kerasbert.QuestionAnswerer(
            tiny_encoder(), preprocessor=QuestionAnsweringPreprocessor(
                minilm_tokenizer, sequence_length=24, doc_stride=4, max_question_length=6)),  # several windows
        "filler": kerasbert.MaskedLM(tiny_encoder(), preprocessor=short),
    }
    # Entities of several words: the tagger leans to PER and LOC tags.
    models["tagger"].output_dense.bias.assign(np.array([0.0, 1.0, 1.5, 1.0, 1.5], "float32"))
    paths = {name: root / name for name in models}
    if "pairs" in EXPORTED:
        models["pairs"].export(paths["pairs"], pairs=True)
    if "tagger" in EXPORTED:
        models["tagger"].export(paths["tagger"])
    # The reader's decoding settings are its own: a threshold between its
    # examples' null-score margins (some go unanswered), short answers.
    first = models["reader"].predict_answers((QUESTIONS, CONTEXTS), null_score_threshold=math.inf)
    threshold = float(np.median([p.null_score - p.score for p in first]))
    reader = kerasbert.QuestionAnswerer(models["reader"].encoder, preprocessor=models["reader"].preprocessor,
                                        max_answer_length=4, null_score_threshold=threshold)
    reader.output_dense.set_weights(models["reader"].output_dense.get_weights())
    models["reader"] = reader
    if "reader" in EXPORTED:
        models["reader"].save_to_preset(root / "reader_task")  # restored, then exported by the command
        assert cli.main(["export", str(root / "reader_task"), str(paths["reader"])]) == 0
    if "filler" in EXPORTED:
        models["filler"].export(paths["filler"], top_k=3)
    models["command"].save_to_preset(root / "task")
    assert cli.main(["export", str(root / "task"), str(paths["command"]), "--quantize", "int8"]) == 0
    models["command"] = kerasbert.TextClassifier.from_preset(root / "task")
    models["command"].quantize("int8")  # what the command served
    paths["embedder"].mkdir()
    (paths["embedder"] / "mine.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        models["embedder"].export(paths["embedder"])
    kept = (paths["embedder"] / "mine.txt").read_text()
    if "embedder" in EXPORTED:
        models["regressor"].export(paths["regressor"])
        models["embedder"].export(paths["embedder"], overwrite=True)
    inputs = {name: {"text": TEXTS} for name in models}
    inputs["pairs"]["text_pair"] = PAIRS
    inputs.update(tagger={"text": SENTENCES}, reader={"question": QUESTIONS, "context": CONTEXTS},
                  filler={"text": MASKED})
    outputs, signatures, variables = serve({name: (paths[name], inputs[name]) for name in EXPORTED}, str(root))
    return {"models": models, "paths": paths, "root": root, "outputs": outputs, "signatures": signatures,
            "variables": variables, "kept": kept}


def test_classifiers_serve_raw_text_like_predict(exported):
    for name, x in [("pairs", (TEXTS, PAIRS)), ("command", TEXTS)]:
        if name not in EXPORTED:
            continue
        expected = exported["models"][name].predict(x, verbose=0)
        outputs = exported["outputs"][name]
        np.testing.assert_allclose(outputs["logits"], expected, atol=1e-4)
        np.testing.assert_allclose(outputs["probabilities"],
                                   keras.ops.convert_to_numpy(keras.ops.softmax(expected)), atol=1e-4)
        np.testing.assert_array_equal(outputs["label"], expected.argmax(-1))
        classes = expected.shape[-1]
        names = {}
        if name == "command":  # its class names
            assert [n.decode() for n in outputs["label_name"]] == [["negative", "positive"][i]
                                                                   for i in expected.argmax(-1)]
            names = {"label_name": ["string", [None]]}
        assert exported["signatures"][name] == {
            "inputs": {"text": ["string", [None]], **({"text_pair": ["string", [None]]} if name == "pairs" else {})},
            "outputs": {"logits": ["float32", [None, classes]], "probabilities": ["float32", [None, classes]],
                        "label": ["int32", [None]], **names},
        }


@tensorflow_exports
def test_tagger_serves_word_tags_and_entities_like_predict(exported):
    model, outputs = exported["models"]["tagger"], exported["outputs"]["tagger"]
    tags, entities = model.predict_tags(SENTENCES), model.predict_entities(SENTENCES)
    alignment = model.preprocessor.word_alignment(SENTENCES)
    assert any(t.tolist().count(-1) for t in tags)  # words cut off by sequence_length
    assert any(e["words"][1] - e["words"][0] > 1 for row in entities for e in row)  # entities of several words
    for i, example in enumerate(alignment):
        words = len(example["words"])
        np.testing.assert_array_equal(outputs["tag_ids"][i], np.pad(tags[i], (0, outputs["tag_ids"].shape[1] - words),
                                                                     constant_values=-1))
        assert [w.decode() for w in outputs["words"][i][:words]] == example["words"]
        assert [t.decode() for t in outputs["tags"][i][:words]] == model._names(tags[i])
        spans = list(zip(outputs["word_starts"][i].tolist(), outputs["word_ends"][i].tolist()))
        assert spans[:words] == example["word_spans"] and set(spans[words:]) <= {(-1, -1)}
        served = [(t.decode(), s, e, x.decode()) for t, s, e, x in zip(
            outputs["entity_types"][i], outputs["entity_starts"][i], outputs["entity_ends"][i],
            outputs["entity_texts"][i]) if s >= 0]
        assert served == [(e["type"], e["start"], e["end"], e["text"]) for e in entities[i]]
    # "Ouagadougou," is a word; its entity is "Ouagadougou", in the graph as in Python
    # ("." alone, a word of its own, stays whole).
    texts = [e["text"] for row in entities for e in row]
    assert any("Ouagadougou" in t for t in texts), texts
    assert not any(t != t.strip(" ,.") and t.strip(" ,.") for t in texts), texts
    described = exported["signatures"]["tagger"]["outputs"]
    assert described == {**{k: ["string", [None, None]] for k in ("words", "tags", "entity_types", "entity_texts")},
                         **{k: ["int32", [None, None]] for k in ("word_starts", "word_ends", "tag_ids",
                                                                 "entity_starts", "entity_ends")}}


@tensorflow_exports
def test_question_answerer_serves_answers_like_predict_answers(exported):
    model, outputs = exported["models"]["reader"], exported["outputs"]["reader"]
    predictions = model.predict_answers((QUESTIONS, CONTEXTS))  # its own settings, as the export's
    assert len(model.windows((QUESTIONS, CONTEXTS))) > len(QUESTIONS)  # long contexts span windows
    assert "" in [p.text for p in predictions] and {p.text for p in predictions} != {""}  # unanswered and answered
    assert [a.decode() for a in outputs["answer"]] == [p.text for p in predictions]
    assert outputs["start"].tolist() == [p.start for p in predictions]
    assert outputs["end"].tolist() == [p.end for p in predictions]
    np.testing.assert_allclose(outputs["score"], [p.score for p in predictions], atol=1e-4)
    assert exported["signatures"]["reader"] == {
        "inputs": {"question": ["string", [None]], "context": ["string", [None]]},
        "outputs": {"answer": ["string", [None]], "start": ["int32", [None]], "end": ["int32", [None]],
                    "score": ["float32", [None]]}}


@tensorflow_exports
def test_masked_lm_serves_the_top_fills(exported, minilm_tokenizer):
    model, outputs = exported["models"]["filler"], exported["outputs"]["filler"]
    expected = fill_mask(model, minilm_tokenizer, MASKED[:2], top_k=3, sequence_length=12)
    for i, masks in enumerate(expected):
        for j, candidates in enumerate(masks):
            assert [t.decode() for t in outputs["tokens"][i, j]] == [token for token, _ in candidates]
            np.testing.assert_allclose(outputs["probabilities"][i, j], [p for _, p in candidates], atol=1e-4)
            assert outputs["token_ids"][i, j].tolist() == [minilm_tokenizer.token_to_id(t) for t, _ in candidates]
    assert outputs["tokens"].shape == (3, 2, 3)
    assert outputs["tokens"][1, 1].tolist() == [b""] * 3 and outputs["token_ids"][2].tolist() == [[-1] * 3] * 2
    assert exported["signatures"]["filler"]["outputs"] == {
        "token_ids": ["int32", [None, None, 3]], "tokens": ["string", [None, None, 3]],
        "probabilities": ["float32", [None, None, 3]]}


@tensorflow_exports
def test_regressor_and_embedder_serve_like_predict(exported):
    for name, output, width in [("regressor", "logits", 1), ("embedder", "embedding", 16)]:
        np.testing.assert_allclose(exported["outputs"][name][output],
                                   exported["models"][name].predict(TEXTS, verbose=0), atol=1e-4)
        assert exported["signatures"][name]["outputs"] == {output: ["float32", [None, width]]}


def test_saved_models_list_the_task_variables(exported):
    # As a restored SavedModel's `variables` (and keras.layers.TFSMLayer's weights) show them.
    for name in EXPORTED:
        model = exported["models"][name]
        assert exported["variables"][name] == [len(model.trainable_variables), len(model.non_trainable_variables)], name


def test_export_never_leaves_half_a_directory(exported):
    assert exported["kept"] == "keep me"  # refused without overwrite=True
    if "embedder" in EXPORTED:  # then written over it
        assert sorted(os.listdir(exported["paths"]["embedder"])) == ["assets", "fingerprint.pb", "saved_model.pb",
                                                                     "variables"]
    assert not [n for n in os.listdir(exported["root"]) if n.startswith(".kerasbert-")]


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
                          (["export", str(root / "tsak"), str(tmp_path / "b")], "tsak does not exist"),
                          (["predict", str(root / "tsak"), "text"], "tsak does not exist"),
                          (["export", str(root / "task"), str(root / "command")],
                           "already exists; pass --overwrite to replace it")]:
        with pytest.raises(SystemExit) as exit:
            cli.main(argv)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and message in err and (argv[0] == "export" or "export a" not in err), err


def test_serving_entities_chunk_like_entity_spans():
    """The serving graph's entity chunking against `entity_spans` (seqeval's
    default mode) on random IOB1/IOB2/IOBES sequences, ragged, with -1 ids
    (words without a token, read as O)."""
    import tensorflow as tf

    from kerasbert.metrics import entity_spans
    from kerasbert.tasks.token_classifier import _chunk_tables, _entity_tensors

    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    rng = np.random.default_rng(0)
    rows = [rng.integers(-1, len(labels), size=n).tolist() for n in [0, 1, 7, 30, 2, 12, 30, 0]]
    words = tf.ragged.constant([["w"] * len(r) for r in rows], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)
    flat = tf.constant([t for r in rows for t in r], tf.int32)
    offsets = tf.range(tf.size(flat)) - tf.cast(tf.gather(words.row_splits, words.value_rowids()), tf.int32)
    texts = tf.constant(["w " * len(r) for r in rows])
    got = _entity_tensors(flat, words, 2 * offsets, 2 * offsets + 1, texts, _chunk_tables(labels))
    for i, row in enumerate(rows):
        expected = entity_spans(["O" if t < 0 else labels[t] for t in row])
        served = [(k.decode(), s // 2, (e + 1) // 2) for k, s, e in zip(
            got["entity_types"][i].numpy(), got["entity_starts"][i].numpy(), got["entity_ends"][i].numpy()) if s >= 0]
        assert served == expected, (row, served, expected)


# The members beyond BERT, ALBERT, RoBERTa and ELECTRA: a tiny transformers
# config of each (its encoder's values), and its tokenizer: DistilBERT
# MiniLM's WordPiece, XLM-RoBERTa and DeBERTa-v3 SentencePiece models in
# their layouts trained here, ModernBERT a byte-level BPE tokenizer.json.
SMALL = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
             max_position_embeddings=64)
MEMBERS = {
    "distilbert": dict(dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=64),
    "xlm-roberta": dict(SMALL, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, max_position_embeddings=66),
    "deberta-v2": dict(SMALL, type_vocab_size=0, relative_attention=True, position_buckets=8,
                       max_relative_positions=16, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                       share_att_key=True, norm_rel_ebd="layer_norm"),
    "modernbert": dict(SMALL, local_attention=4, global_attn_every_n_layers=2, pad_token_id=0),
}


def member_directory(family, directory, corpus):
    """A transformers checkpoint of `family` with its tokenizer's files."""
    import shutil

    from helpers import make_hf_checkpoint, minilm_directory, train_sentencepiece_model, write_modernbert_tokenizer

    directory.mkdir()
    if family == "distilbert":
        for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
            shutil.copy(os.path.join(minilm_directory(), name), directory)
    elif family == "modernbert":
        write_modernbert_tokenizer(directory, vocabulary_size=1000, lines=(1000, 1000))
    else:
        pieces = (dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1) if family == "xlm-roberta" else
                  dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
                       eos_piece="[SEP]", unk_piece="[UNK]"))
        name = "sentencepiece.bpe" if family == "xlm-roberta" else "spm"
        train_sentencepiece_model(corpus, directory, sentences=3000, name=name, pieces=pieces, vocabulary_size=800)
    vocabulary = kerasbert.Tokenizer.from_preset(str(directory)).vocabulary_size()
    make_hf_checkpoint(str(directory), family, seed=1, vocab_size=vocabulary, **MEMBERS[family])
    return str(directory)


# Which task each member exports (about 8 s an export on 2 cores): the
# reader on ModernBERT, with its normalized head (the tagger's and
# classifier's are the same layers), and on DistilBERT, which has no token
# types; XLM-RoBERTa's tagger (words aligned through fairseq's ids) and
# DeBERTa-v3's masked LM (its [MASK] after the model's pieces). Beyond its
# head, a task's export differs between members only in the encoder and the
# tokenizer the graph holds, each served here.
MEMBER_TASKS = {"distilbert": ("reader",), "xlm-roberta": ("tagger",), "deberta-v2": ("filler",),
                "modernbert": ("reader",)}


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="every backend's export builds the same graph in TensorFlow; checked once")
def test_every_member_serves_its_tasks_like_predict(tmp_path):
    """Each member's tasks from its checkpoint (`from_preset`: its encoder,
    its tokenizer and, for ModernBERT, normalized heads), exported and
    served: the classifier's, tagger's, embedder's, reader's and masked LM's
    outputs are `predict`'s."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(text for text, _ in rotten_tomatoes()[:3000]), encoding="utf-8")
    tasks = {
        "classifier": lambda d: kerasbert.TextClassifier.from_preset(d, labels=["negative", "positive"],
                                                                     sequence_length=32),
        "tagger": lambda d: kerasbert.TokenClassifier.from_preset(d, labels=TAGS, crf=True, sequence_length=12),
        "embedder": lambda d: kerasbert.TextEmbedder.from_preset(d, sequence_length=32),
        "reader": lambda d: kerasbert.QuestionAnswerer.from_preset(d, sequence_length=24),
        "filler": lambda d: kerasbert.MaskedLM.from_preset(d, sequence_length=12),
    }
    rng = np.random.default_rng(0)
    models, requests, masked = {}, {}, {}
    for family, kinds in MEMBER_TASKS.items():
        directory = member_directory(family, tmp_path / family, corpus)
        mask = kerasbert.Tokenizer.from_preset(directory).special_tokens["mask"]
        masked[family] = [f"The {mask} sat on the {mask}.", f"Paris is the {mask} of France."]
        inputs = {"classifier": {"text": TEXTS}, "tagger": {"text": SENTENCES}, "embedder": {"text": TEXTS},
                  "reader": {"question": QUESTIONS, "context": CONTEXTS}, "filler": {"text": masked[family]}}
        for kind in kinds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the checkpoint has no heads: fresh ones
                model = tasks[kind](directory)
            if hasattr(model, "output_dense"):  # logits far apart: no near ties to flip
                for variable in model.output_dense.weights:
                    variable.assign(rng.normal(0, 1, variable.shape))
            name = f"{family}_{kind}"
            models[name] = model
            model.export(tmp_path / "exports" / name, **({"top_k": 3} if kind == "filler" else {}))
            requests[name] = (tmp_path / "exports" / name, inputs[kind])
    outputs, _, _ = serve(requests, str(tmp_path))
    for name, model in models.items():
        family, kind = name.split("_")
        served = outputs[name]
        if kind == "classifier":
            np.testing.assert_allclose(served["logits"], model.predict(TEXTS, verbose=0), atol=1e-4, err_msg=name)
        elif kind == "embedder":
            np.testing.assert_allclose(served["embedding"], model.predict(TEXTS, verbose=0), atol=1e-4, err_msg=name)
        elif kind == "tagger":
            tags = model.predict_tags(SENTENCES)
            for i, row in enumerate(tags):
                assert served["tag_ids"][i][:len(row)].tolist() == row.tolist(), name
        elif kind == "reader":
            predictions = model.predict_answers((QUESTIONS, CONTEXTS))
            assert [a.decode() for a in served["answer"]] == [p.text for p in predictions], name
            np.testing.assert_allclose(served["score"], [p.score for p in predictions], atol=1e-4, err_msg=name)
        else:
            tokenizer = model.preprocessor.tokenizer
            expected = fill_mask(model, tokenizer, masked[family], top_k=3, sequence_length=12)
            for i, masks in enumerate(expected):
                for j, candidates in enumerate(masks):
                    assert served["token_ids"][i, j].tolist() == [tokenizer.token_to_id(t) for t, _ in candidates]
