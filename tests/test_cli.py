"""The `kerasbert` command. Each pass runs it as a console script and
predicts with it; its parsing, files and messages, the same on every
backend, are checked once, in the torch pass."""

import argparse
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import torch_pass_only

import kerasbert
from kerasbert.cli import build_parser, main
from kerasbert.runs.scores import classification_scores
from kerasbert.utils.io import read_safetensors


@torch_pass_only
def test_presets_table_lists_every_preset(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["preset", "family", "params"]
    for name in kerasbert.list_presets():
        assert any(line.startswith(name + " ") for line in lines), name
    assert "109.5M" in out  # bert_base_en_uncased


@torch_pass_only
def test_presets_family_filter(capsys):
    main(["presets", "--family", "roberta"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["roberta_base_en", "roberta_large_en"]
    main(["presets", "--family", "deberta-v2"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split()[0] for r in rows] == ["deberta_v3_base_en", "deberta_v3_base_multi", "deberta_v3_large_en",
                                            "deberta_v3_small_en", "deberta_v3_xsmall_en"]
    with pytest.raises(SystemExit) as info:
        main(["presets", "--family", "gpt2"])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert "--family 'gpt2'" in error and "'modernbert'" in error


@torch_pass_only
def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


def test_console_script_runs_without_framework_log_lines():
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.cli", "presets", "--family", "albert"],
        capture_output=True, text=True, timeout=300, env=environ,
    )
    assert result.returncode == 0, result.stderr
    assert "albert_base_en_v2" in result.stdout
    assert result.stderr == ""  # TensorFlow's C++ start-up lines included


@torch_pass_only
def test_help_imports_no_framework():
    probe = ("import sys\nfrom kerasbert.cli import main\ntry:\n    main(['finetune', '--help'])\n"
             "except SystemExit:\n    pass\nprint(sorted({'keras', 'tensorflow', 'jax', 'torch'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "--task" in result.stdout and result.stdout.splitlines()[-1] == "[]"


@torch_pass_only
def test_docs_presets_table_is_current(capsys):
    main(["presets", "--markdown"])
    table = capsys.readouterr().out
    docs = (pathlib.Path(__file__).parents[1] / "docs" / "presets.md").read_text()
    assert table in docs, "regenerate the table in docs/presets.md: kerasbert presets --markdown"


# -- convert, evaluate, predict, embed -------------------------------------------
# Tiny tasks over the MiniLM vocabulary, saved as task presets; each command
# runs in-process on them and is checked against the task itself. A command
# that predicts loads its preset and traces a new tokenizer (seconds), so
# few of them run the model.

DATA = os.path.join(os.path.dirname(__file__), "data")
SST2 = os.path.join(DATA, "glue_sst2.tsv")
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# The classifier's evaluation file as an unusual run would have it: no
# header, the label first, class names as words; run.json says so.
REVIEWS = [("pos", "a quietly devastating portrait of a family"), ("neg", "the plot lurches from one thing to another"),
           ("pos", "warm , funny and wise"), ("neg", "a tedious , overlong exercise"), ("pos", "Yes!"), ("neg", "dull")]
SQUAD_CONTEXT = ("Ada Lovelace wrote what is often called the first computer program. She was born in London in "
                 "1815, the daughter of the poet Lord Byron, and worked with Charles Babbage on his engine.")
PAIRS = [("A good one.", "It was good."), ("It was bad and it knew it.", "Nobody liked it."), ("Yes.", "No.")]


def tiny_encoder():
    return kerasbert.Encoder(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=64, initializer_range=0.3)


def call(task, x):
    """The task's outputs on raw `x`: one batch through its preprocessor and
    `predict_on_batch` (not `predict`'s input pipeline, which the commands use)."""
    features = task.preprocessor(x)
    features = features[0] if isinstance(features, tuple) else features
    return task.predict_on_batch({name: np.asarray(features[name]) for name in task.input})


def softmax(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def presets(tmp_path_factory, minilm_tokenizer):
    """Task presets in a temporary directory: a classifier as the best epoch
    of a `kerasbert finetune` run (with its run's run.json), a question
    answerer as the final one, an embedder and a tagger."""
    from kerasbert.preprocessing import (
        QuestionAnsweringPreprocessor,
        TextPreprocessor,
        TokenClassificationPreprocessor,
    )

    keras.utils.set_random_seed(1)
    root = tmp_path_factory.mktemp("cli_presets")
    text = TextPreprocessor(minilm_tokenizer, sequence_length=24, pad_to_sequence_length=False)
    tasks = {
        "classifier": kerasbert.TextClassifier(tiny_encoder(), num_classes=2, preprocessor=text),
        "embedder": kerasbert.TextEmbedder(tiny_encoder(), preprocessor=text),
        "tagger": kerasbert.TokenClassifier(tiny_encoder(), labels=TAGS, preprocessor=TokenClassificationPreprocessor(
            minilm_tokenizer, sequence_length=24, pad_to_sequence_length=False)),
        "answerer": kerasbert.QuestionAnswerer(tiny_encoder(), preprocessor=QuestionAnsweringPreprocessor(
            minilm_tokenizer, sequence_length=48, doc_stride=16, max_question_length=12),
            null_score_threshold=-1000.0),  # so low that every question goes unanswered
    }
    paths = {name: root / name for name in tasks}
    paths["classifier"] = root / "run" / "best"
    paths["answerer"] = root / "squad_run" / "final"
    for name, task in tasks.items():
        task.save_to_preset(paths[name])
    (root / "run" / "run.json").write_text(json.dumps({
        "task": "classification", "header": False, "text_columns": [1], "label_column": 0,
        "labels": ["neg", "pos"], "regression": False}))
    reviews = root / "reviews.tsv"
    reviews.write_text("".join(f"{label}\t{text}\n" for label, text in REVIEWS))
    # A small SQuAD v2.0 file: two questions with answers, one impossible.
    squad = root / "squad.json"
    squad.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": SQUAD_CONTEXT, "qas": [
            {"id": "q1", "question": "Where was Ada born?", "is_impossible": False,
             "answers": [{"text": "London", "answer_start": SQUAD_CONTEXT.index("London")}]},
            {"id": "q2", "question": "Who wrote the first program?", "is_impossible": False,
             "answers": [{"text": "Ada Lovelace", "answer_start": 0}]},
            {"id": "q3", "question": "What is the capital of Mars?", "is_impossible": True, "answers": []}]}]}]}))
    # The classifier's logits on the reviews (`predict` and `evaluate` read them).
    logits = call(tasks["classifier"], [text for _, text in REVIEWS])
    return {"tasks": tasks, "paths": {k: str(v) for k, v in paths.items()}, "root": root, "reviews": str(reviews),
            "squad": str(squad), "logits": logits}


def json_lines(text):
    return [json.loads(line) for line in text.splitlines()]


def test_predict_prints_a_json_line_per_text(presets, tmp_path, capsys):
    """--file (blank lines skipped) and --output: a JSON line per text, the
    class names from the run's run.json, probabilities as the task's."""
    texts = [text for _, text in REVIEWS]
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(texts[:2]) + "\n\n" + "\n".join(texts[2:]) + "\n")
    output = tmp_path / "predictions.jsonl"
    assert main(["predict", presets["paths"]["classifier"], "--file", str(source), "--output", str(output)]) == 0
    assert capsys.readouterr().out == ""  # the lines went to --output
    records = json_lines(output.read_text())
    expected = softmax(presets["logits"])
    assert [r["text"] for r in records] == texts
    np.testing.assert_allclose([r["probabilities"] for r in records], expected, atol=1e-5, rtol=0)
    assert [r["label"] for r in records] == expected.argmax(-1).tolist()
    assert [r["label_name"] for r in records] == [["neg", "pos"][i] for i in expected.argmax(-1)]
    assert sorted(os.listdir(tmp_path)) == ["predictions.jsonl", "texts.txt"]  # no temporary file left


@torch_pass_only
def test_pairs_are_read_two_by_two_or_tab_separated(tmp_path):
    """--pairs without running a model (a pair's prediction is the task's
    own business): TEXT arguments two by two, or a tab in each line."""
    from kerasbert.cli.common import read_texts

    source = tmp_path / "pairs.tsv"
    source.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS[:2]) + "\n" + "\t".join(PAIRS[2]))
    expected = ([a for a, _ in PAIRS], [b for _, b in PAIRS])
    from_file = read_texts(argparse.Namespace(texts=[], file=str(source)), pairs=True)
    from_arguments = read_texts(argparse.Namespace(texts=[t for pair in PAIRS for t in pair], file=None), pairs=True)
    assert from_file == from_arguments == expected


@torch_pass_only
def test_evaluate_reads_the_file_as_the_run_did(presets, tmp_path, capsys):
    """No flags: the run's run.json says the file has no header, the text
    in column 1, the label in column 0, and the class names."""
    output = tmp_path / "scores.json"
    assert main(["evaluate", presets["paths"]["classifier"], "--file", presets["reviews"],
                 "--output", str(output)]) == 0
    printed = json.loads(capsys.readouterr().out)
    expected = classification_scores(presets["logits"], np.array([label == "pos" for label, _ in REVIEWS]))
    assert set(printed) == set(expected)
    for name, value in expected.items():
        assert printed[name] == pytest.approx(value, abs=1e-5), name
    assert json.loads(output.read_text()) == printed


@torch_pass_only
def test_embed_writes_the_embedders_vectors(presets, tmp_path, capsys):
    """--normalize overrides the preset's normalize=False."""
    texts = ["A man is eating food.", "Bread.", "A man is eating a piece of bread with his hands."]
    output = tmp_path / "vectors.npy"
    assert main(["embed", presets["paths"]["embedder"], *texts, "--output", str(output), "--normalize"]) == 0
    out = capsys.readouterr().out
    assert "(3, 16)" in out and str(output) in out
    vectors = np.load(output)
    expected = call(presets["tasks"]["embedder"], texts)
    expected /= np.linalg.norm(expected, axis=-1, keepdims=True)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 16)
    np.testing.assert_allclose(vectors, expected, atol=1e-5, rtol=0)


@torch_pass_only
def test_predict_tags_entities(presets, capsys):
    texts = ["Ada Lovelace was born in London .", "Nothing here", "Paris and Berlin and Rome"]
    assert main(["predict", presets["paths"]["tagger"], *texts]) == 0
    records = json_lines(capsys.readouterr().out)
    expected = presets["tasks"]["tagger"].predict_entities(texts)
    assert [r["text"] for r in records] == texts
    assert [r["entities"] for r in records] == json.loads(json.dumps(expected))
    assert any(records[i]["entities"] for i in range(3))  # something to compare


@torch_pass_only
def test_evaluate_question_answering_with_the_tasks_null_threshold(presets, capsys):
    """SQuAD v2.0, scored with the official metrics (and HasAns/NoAns, and
    the counts) and the task's null-score threshold, under which no question
    is answered."""
    assert main(["evaluate", presets["paths"]["answerer"], "--file", presets["squad"], "--batch-size", "8"]) == 0
    printed = json.loads(capsys.readouterr().out)
    examples = kerasbert.readers.read_squad(presets["squad"])
    expected = kerasbert.metrics.squad_scores({e.id: "" for e in examples}, examples)
    assert set(printed) == set(expected) and printed["total"] == 3
    assert printed["NoAns_exact_match"] == 100.0 and printed["exact_match"] == pytest.approx(100 / 3)
    for name, value in printed.items():
        assert value == pytest.approx(expected[name], abs=1e-6), name


@torch_pass_only
def test_convert_round_trips_an_encoder_through_hugging_face(tmp_path, minilm_tokenizer, capsys):
    encoder = tiny_encoder()
    checkpoint = tmp_path / "hf"
    kerasbert.convert.to_huggingface(encoder, checkpoint)
    minilm_tokenizer.save_to_preset(checkpoint)
    # Hugging Face -> kerasbert (the default from a checkpoint).
    assert main(["convert", str(checkpoint), str(tmp_path / "kb")]) == 0
    assert "kerasbert preset" in capsys.readouterr().out
    restored = kerasbert.from_preset(str(tmp_path / "kb"))
    assert [v.path for v in restored.weights] == [v.path for v in encoder.weights]
    for a, b in zip(restored.weights, encoder.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), err_msg=a.path)
    assert (tmp_path / "kb" / "vocab.txt").read_text() == (checkpoint / "vocab.txt").read_text()
    assert json.loads((tmp_path / "kb" / "preset.json").read_text())["family"] == "bert"
    # kerasbert -> Hugging Face (the default from a preset): the same tensors.
    assert main(["convert", str(tmp_path / "kb"), str(tmp_path / "hf2")]) == 0
    first = read_safetensors(checkpoint / "model.safetensors")
    second = read_safetensors(tmp_path / "hf2" / "model.safetensors")
    assert set(first) == set(second)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    assert (tmp_path / "hf2" / "vocab.txt").is_file()


@torch_pass_only
def test_convert_round_trips_a_task_preset(presets, tmp_path):
    """Task preset -> BertForSequenceClassification -> task preset: the
    same class, the same weights, the tokenizer along."""
    original = presets["tasks"]["classifier"]
    assert main(["convert", presets["paths"]["classifier"], str(tmp_path / "hf")]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"] and len(config["id2label"]) == 2
    assert main(["convert", str(tmp_path / "hf"), str(tmp_path / "back"), "--to", "kerasbert"]) == 0
    assert json.loads((tmp_path / "back" / "task.json").read_text())["class_name"] == "TextClassifier"
    restored = kerasbert.TextClassifier.from_preset(str(tmp_path / "back"))
    assert len(restored.weights) == len(original.weights)
    for a, b in zip(restored.weights, original.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), err_msg=a.path)
    assert restored.preprocessor is not None  # the tokenizer came along


@torch_pass_only
def test_convert_refuses_an_existing_output(presets, tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()
    (output / "mine.txt").write_text("keep me")
    with pytest.raises(SystemExit) as info:
        main(["convert", presets["paths"]["embedder"], str(output)])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("kerasbert convert: error:") and str(output) in error and "--overwrite" in error
    assert sorted(os.listdir(output)) == ["mine.txt"] and (output / "mine.txt").read_text() == "keep me"
    assert main(["convert", presets["paths"]["embedder"], str(output), "--overwrite"]) == 0
    assert not (output / "mine.txt").exists() and (output / "config.json").is_file()
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging directory left behind


@torch_pass_only
@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["evaluate", "classifier", "--file", "{missing}"], "--file '{missing}' is not a file"),
        (["evaluate", "classifier", "--file", SST2, "--header", "--text-columns", "sentence", "--label-column",
          "label", "--labels", "a,b"], "glue_sst2.tsv, line 2: label '1' is not one of label_names ['a', 'b']"),
        (["evaluate", "classifier", "--file", SST2, "--header", "--text-columns", "sentence", "--label-column",
          "label", "--labels", "0,1,2"], "the classifier has 2 classes, but --labels are 3"),
        (["evaluate", "tagger", "--file", SST2], "glue_sst2.tsv, line 1: tag 'label' is not one of label_names ['O'"),
        (["evaluate", "tagger", "--file", "{typo}"], "typo.txt, line 2: tag 'B-LCO' is not one of label_names ['O'"),
        (["evaluate", "tagger", "--file", SST2, "--labels", "O"], "--labels is for TextClassifier presets"),
        (["predict", "classifier", "--pairs", "--file", "{one_column}"], "{one_column}', line 2: --pairs needs two"),
        (["predict", "answerer", "--file", "{one_column}"], "{one_column}', line 1: not JSON"),
        (["predict", "embedder", "some text"], "holds a TextEmbedder: `kerasbert embed"),
        (["embed", "classifier", "--output", "{missing}.npy", "text"], "holds a TextClassifier, not a TextEmbedder"),
        (["predict", "tagger"], "no texts in the command line"),
        (["predict", "classifier", "--pairs", "a", "b", "c"], "--pairs takes texts two by two"),
    ],
)
def test_bad_input_exits_2_with_a_message_that_names_it(presets, tmp_path, capsys, command, message):
    one_column = tmp_path / "one_column.txt"
    one_column.write_text("first\tsecond\nno tab here\n")
    typo = tmp_path / "typo.txt"
    typo.write_text("Ada B-PER\nParis B-LCO\n")
    names = {"missing": str(tmp_path / "missing.tsv"), "one_column": str(one_column), "typo": str(typo)}
    command = [presets["paths"].get(part, part.format(**names)) for part in command]
    with pytest.raises(SystemExit) as info:
        main(command)
    assert info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith(f"kerasbert {command[0]}: error:") and message.format(**names) in error, error
    assert sorted(os.listdir(tmp_path)) == ["one_column.txt", "typo.txt"]  # nothing written


@torch_pass_only
def test_every_flag_is_explained_and_documented():
    """--help explains every flag of every command; docs/cli.md names every
    command and flag, and the exit codes are in the top-level help."""
    parser = build_parser()
    assert "exit status" in parser.format_help() and "  2  bad usage or input" in parser.format_help()
    docs = (pathlib.Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"presets", "pretrain", "finetune", "export", "convert", "evaluate", "predict", "embed"} <= set(commands)
    for name, command in commands.items():
        assert f"kerasbert {name}" in docs, name
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"kerasbert {name} {action.dest} has no help text"
            for flag in action.option_strings:
                assert f"`{flag}" in docs, f"docs/cli.md does not mention kerasbert {name} {flag}"
