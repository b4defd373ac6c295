"""`kerasbert finetune` and `kerasbert.runs.finetuning.finetune` end to end on
the sample files in tests/data: each task trains, is scored on its
validation file every epoch with its own metric, keeps the best epoch (not
the last) as a task preset, stops early, and writes its run's files. A
one-layer, 16-wide encoder over the MiniLM vocabulary keeps each run to
seconds."""

import json
import os

import keras
import numpy as np
import pytest
from helpers import torch_pass_only

import kerasbert
from kerasbert.cli import main
from kerasbert.runs.finetuning import finetune
from kerasbert.runs.scores import classification_scores
from kerasbert.utils.io import read_safetensors

SAMPLES = os.path.join(os.path.dirname(__file__), "data")
SST2 = os.path.join(SAMPLES, "glue_sst2.tsv")
MRPC = os.path.join(SAMPLES, "glue_mrpc.tsv")
STSB = os.path.join(SAMPLES, "glue_stsb.tsv")
CONLL = os.path.join(SAMPLES, "conll2003_sample.txt")
SQUAD_V2 = os.path.join(SAMPLES, "squad_v2_sample.json")
# Each program is compiled once per input shape (slow on JAX): one padded
# length (16 tokens) and batch sizes that divide the files' examples give
# one shape per run.
FAST = {"sequence_length": 16, "batch_size": 4, "verbose": 0}


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory, minilm_tokenizer):
    """A one-layer encoder with the MiniLM vocabulary, as a preset directory."""
    directory = str(tmp_path_factory.mktemp("tiny_preset"))
    encoder = kerasbert.Encoder(vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=16,
                                intermediate_dim=32, max_sequence_length=128, initializer_range=0.3)
    encoder.save_to_preset(directory)
    minilm_tokenizer.save_to_preset(directory)
    return directory


def read(path):
    with open(path) as f:
        return json.load(f)


class _SpoilEpoch(keras.callbacks.Callback):
    """Makes the classifier of one epoch confidently predict class 0, so
    that its validation loss is far worse than the others'."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.epoch:
            kernel, bias = self.model.output_dense.kernel, self.model.output_dense.bias
            kernel.assign(np.zeros(kernel.shape, "float32"))
            bias.assign(np.array([20.0, -20.0], "float32"))


def test_classification_keeps_the_best_epoch_and_stops_early(tiny_preset, tmp_path):
    """The second epoch is spoilt: it is not kept as the best, and with
    patience=1 it is the last of the four epochs asked for."""
    output = tmp_path / "sst2"
    result = finetune("classification", tiny_preset, SST2, output, validation_file=SST2, epochs=4, patience=1,
                      metric="loss", learning_rate=5e-3, head_learning_rate_multiplier=10.0, callbacks=[_SpoilEpoch(2)], **FAST)
    history = result.history
    assert history["epoch"] == [1, 2] and len(history["loss"]) == 2  # stopped early
    assert {"val_accuracy", "val_f1", "val_matthews_correlation", "val_loss"} <= set(history)
    assert history["val_loss"][1] > 10 > history["val_loss"][0]  # the spoilt last epoch
    assert result.best_epoch == 1 and result.best_metric == min(history["val_loss"])
    assert read(output / "history.json") == history
    assert read(output / "best" / "finetuning.json")["epoch"] == 1
    assert read(output / "final" / "finetuning.json")["epoch"] == 2

    # The best preset scores what its epoch scored; the final one is the spoilt epoch.
    data = kerasbert.readers.read_glue_tsv(SST2, "sentence", "label")
    restored = kerasbert.TextClassifier.from_preset(str(output / "best"))
    scores = classification_scores(restored.predict(data.x, batch_size=4), data.y)
    np.testing.assert_allclose(scores["loss"], history["val_loss"][0], rtol=1e-4)
    head = {directory: read_safetensors(output / directory / "task.safetensors")
            for directory in ("best", "final")}
    biases = {directory: next(v for k, v in weights.items() if k.endswith("classifier/bias"))
              for directory, weights in head.items()}
    np.testing.assert_array_equal(biases["final"], [20.0, -20.0])
    assert np.abs(biases["best"]).max() < 1

    settings = read(output / "run.json")
    assert settings["text_columns"] == ["sentence"] and settings["label_column"] == "label"
    assert settings["labels"] == ["0", "1"] and settings["metric"] == "loss"
    assert settings["sequence_length"] == 16 and result.labels == ["0", "1"]
    # A finished run is never overwritten.
    with pytest.raises(FileExistsError, match="another output"):
        finetune("classification", tiny_preset, SST2, output, **FAST)


@torch_pass_only
def test_command_line_fine_tunes_sentence_pairs(tiny_preset, tmp_path, capsys):
    """MRPC's two string columns and its label column, found by name; without
    a validation file there is no best epoch, only the final preset."""
    output = tmp_path / "mrpc"
    code = main([
        "finetune", "--task", "classification", "--preset", tiny_preset, "--train-file", MRPC,
        "--output", str(output), "--epochs", "1", "--sequence-length", "16", "--batch-size", "5",
        "--learning-rate", "1e-3", "--head-learning-rate-multiplier", "10", "--verbose", "0",
    ])
    assert code == 0
    out = capsys.readouterr().out
    assert "no --validation-file" in out and str(output / "final") in out
    history = read(output / "history.json")
    assert set(history) == {"epoch", "loss", "accuracy"} and history["epoch"] == [1]
    settings = read(output / "run.json")
    assert settings["text_columns"] == ["#1 String", "#2 String"] and settings["label_column"] == "Quality"
    assert settings["learning_rate"] == 1e-3 and settings["metric"] is None
    assert not (output / "best").exists()
    for name in ("preset.json", "encoder.safetensors", "task.json", "task.safetensors", "vocab.txt"):
        assert (output / "final" / name).is_file(), name
    # The CLI refuses to overwrite the run, in one line, exit code 2.
    with pytest.raises(SystemExit) as info:
        main(["finetune", "--task", "classification", "--preset", tiny_preset, "--train-file", MRPC,
              "--output", str(output)])
    assert info.value.code == 2 and "already exists" in capsys.readouterr().err


@torch_pass_only
def test_a_lora_run_keeps_adapter_presets_that_name_the_preset(tiny_preset, tmp_path, capsys):
    output = tmp_path / "lora"
    assert main(["finetune", "--task", "classification", "--preset", tiny_preset, "--train-file", SST2,
                 "--validation-file", SST2, "--output", str(output), "--epochs", "1", "--sequence-length", "16",
                 "--batch-size", "4", "--learning-rate", "1e-2", "--lora-rank", "2", "--lora-targets",
                 "qkv,attention_output", "--verbose", "0"]) == 0
    settings = read(output / "run.json")
    assert (settings["lora_rank"], settings["lora_alpha"], settings["lora_targets"]) == (
        2, 2.0, ["qkv", "attention_output"])
    best = output / "best"
    assert sorted(os.listdir(best)) == ["adapters.safetensors", "finetuning.json", "task.json", "task.safetensors"]
    saved = read(best / "task.json")
    assert saved["base"]["preset"] == os.path.abspath(tiny_preset) and saved["lora"]["targets"] == [
        "qkv", "attention_output"]
    capsys.readouterr()
    assert main(["predict", str(best), "A gem of a film."]) == 0
    task = kerasbert.TextClassifier.from_preset(best)
    expected = task.predict(["A gem of a film."], verbose=0)[0]
    served = json.loads(capsys.readouterr().out)
    np.testing.assert_allclose(served["probabilities"], keras.ops.convert_to_numpy(keras.ops.softmax(expected)),
                               atol=1e-5)


@torch_pass_only
def test_ner_with_a_crf_is_scored_by_entities(tiny_preset, tmp_path):
    output = tmp_path / "ner"
    result = finetune("ner", tiny_preset, CONLL, output, validation_file=CONLL, crf=True, epochs=1,
                      learning_rate=1e-2, head_learning_rate_multiplier=2.0,
                      **{**FAST, "sequence_length": 32, "batch_size": 13})  # 13 sentences
    history = result.history
    assert history["epoch"] == [1] and np.isfinite(history["loss"][0])
    assert {"val_f1", "val_precision", "val_recall"} <= set(history) and result.metric == "f1"
    assert result.best_metric == max(history["val_f1"])
    assert result.labels[0] == "O" and "B-PER" in result.labels
    saved = read(output / "best" / "task.json")
    assert saved["class_name"] == "TokenClassifier" and saved["config"]["crf"] is True
    assert saved["config"]["labels"] == result.labels == read(output / "run.json")["labels"]


@torch_pass_only
def test_squad_v2_is_scored_with_a_null_threshold(tiny_preset, tmp_path):
    output = tmp_path / "squad"
    # Windows of the encoder's 128 tokens (75 of them), with doc_stride and
    # max_question_length scaled down from transformers' 128 and 64 at 384.
    result = finetune("squad", tiny_preset, SQUAD_V2, output, validation_file=SQUAD_V2, epochs=1,
                      batch_size=25, learning_rate=5e-3, head_learning_rate_multiplier=10.0, verbose=0)
    settings = read(output / "run.json")
    assert settings["squad_version"] == "2.0" and settings["null_score_threshold"] == 0.0
    assert (settings["sequence_length"], settings["doc_stride"], settings["max_question_length"]) == (128, 42, 32)
    scores = read(output / "best" / "finetuning.json")["validation"]
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1"} <= set(scores)
    assert 0 <= scores["f1"] <= 100 and result.best_metric == scores["f1"] == result.history["val_f1"][0]
    saved = read(output / "final" / "task.json")
    assert saved["class_name"] == "QuestionAnswerer"
    assert saved["preprocessor"] == {"sequence_length": 128, "doc_stride": 42, "max_question_length": 32}
    # The run's decoding settings are the task's: its presets answer as the run was scored.
    assert (saved["config"]["null_score_threshold"], saved["config"]["max_answer_length"]) == (0.0, 30)


@torch_pass_only
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--task", "classification", "--epochs", "0"], "epochs (--epochs) must be a positive integer; got 0"),
        (["--task", "ner", "--metric", "accuracy", "--validation-file", CONLL], "metric (--metric)='accuracy'"),
        (["--task", "squad", "--crf"], "crf (--crf)=True is for task='ner'"),
        (["--task", "classification", "--patience", "2"], "patience (--patience)=2 needs validation_file"),
        (["--task", "classification", "--warmup-fraction", "1.5"], "warmup_fraction (--warmup-fraction) must be"),
        (["--task", "classification", "--no-header", "--text-columns", "a", "--label-column", "1"],
         "--text-columns 'a': with --no-header"),
        (["--task", "classification", "--lora-alpha", "2"], "lora_alpha (--lora-alpha)=2.0 needs lora_rank"),
        (["--task", "classification", "--lora-rank", "2", "--lora-targets", "qkv,query"], "['query']"),
    ],
)
def test_bad_flags_name_the_flag(tiny_preset, tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as info:
        main(["finetune", "--preset", tiny_preset, "--train-file", SST2, "--output", str(tmp_path / "run"),
              *flags])
    assert info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("kerasbert finetune: error:") and message in error, error
    assert not (tmp_path / "run").exists()  # refused before anything was written


@torch_pass_only
def test_bad_files_are_refused_before_training(tiny_preset, tmp_path):
    with pytest.raises(ValueError, match="regression=True"):  # STS-B scores read as classes
        finetune("classification", tiny_preset, STSB, tmp_path / "a", **FAST)
    with pytest.raises(ValueError, match="text_columns"):
        finetune("classification", tiny_preset, CONLL, tmp_path / "b", **FAST)
    with pytest.raises(FileNotFoundError, match="train_file \\(--train-file\\)"):
        finetune("ner", tiny_preset, tmp_path / "missing.txt", tmp_path / "c", **FAST)
    assert not any((tmp_path / name).exists() for name in "abc")
