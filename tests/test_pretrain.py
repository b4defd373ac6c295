"""`kerasbert pretrain` and `kerasbert.pretrain` end to end on real text (the
King James Bible): every objective learns, the run's files are written,
and a killed run resumes to the weights of an uninterrupted one. The
resumed run runs on every backend; the objectives' runs and the command in
the torch pass (`torch_pass_only`), their steps in
tests/test_pretraining_tasks.py on every backend (the masking is a tf.data
pipeline whatever the backend)."""

import json
import os

import keras
import numpy as np
import pytest
from helpers import kjv_chapters, torch_pass_only

import kerasbert
from kerasbert import checkpointing
from kerasbert.cli import main
from kerasbert.runs.pretraining import pretrain
from kerasbert.utils.io import read_safetensors

TINY = dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32)


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """The first 60 chapters of the King James Bible, one verse per line."""
    return kjv_chapters(tmp_path_factory.mktemp("text") / "kjv_60.txt", 60)


def run(text, output, objective, preset="bert_tiny_en_uncased", **kwargs):
    settings = dict(
        from_scratch=True, vocabulary_size=300, sequence_length=32, batch_size=16, steps=24,
        learning_rate=2e-2, warmup_steps=2, jit_compile="auto", verbose=0, **TINY,
    )
    settings.update(kwargs)
    return pretrain(preset, objective, text, str(output), **settings)


def check_learnt(result, output, objective_metric, falling="mlm_loss", vocabulary_size=300):
    """The loss fell (a tiny model in 24 steps gets to about the tokens'
    unigram entropy: the bigger runs are in docs/pretraining.md); the history
    is on disk; the final encoder and its tokenizer load as a preset."""
    history = result.history
    assert history["loss"][-1] < history["loss"][0], history["loss"]
    assert history[falling][-1] < history[falling][0] - 0.1, history[falling]
    assert f"{objective_metric}_accuracy" in history
    with open(os.path.join(output, "history.json")) as f:
        assert json.load(f) == history
    encoder = kerasbert.from_preset(result.preset_dir)
    tokenizer = kerasbert.Tokenizer.from_preset(result.preset_dir)
    assert encoder.vocabulary_size == tokenizer.vocabulary_size() == vocabulary_size
    assert encoder.hidden_dim == TINY["hidden_dim"]
    return encoder, tokenizer


@torch_pass_only
def test_dynamic_mask_mlm_learns_roberta_style(text, tmp_path):
    result = run(text, tmp_path / "run", "mlm", preset="roberta_base_en", log_every=4)
    assert result.history["step"] == [4, 8, 12, 16, 20, 24]
    encoder, tokenizer = check_learnt(result, tmp_path / "run", "mlm")
    assert type(tokenizer).__name__ == "BytePairTokenizer" and encoder.position_offset == 2


@torch_pass_only  # ElectraPretrainer's steps, compiled and eager: test_pretraining_tasks, on every backend
def test_electra_learns_and_saves_the_discriminator(text, tmp_path):
    result = run(text, tmp_path / "run", "electra", preset="electra_small_discriminator_en", log_every=4)
    # (The generator, 4 wide here, learns little in 24 steps; the discriminator does.)
    encoder, _ = check_learnt(result, tmp_path / "run", "rtd", falling="rtd_loss")
    assert encoder.embedding_dim == 128 and not encoder.pooler  # the discriminator, not the generator


@torch_pass_only  # runs of BertPretrainer and ElectraPretrainer, whose steps test_pretraining_tasks checks
@pytest.mark.parametrize("objective, preset", [("modernbert", "modern_bert_base_en"),
                                               ("deberta-v3", "deberta_v3_xsmall_en")])
def test_modernbert_and_deberta_v3_objectives_learn(text, tmp_path, objective, preset):
    """ModernBERT's masked LM (30% masked, packed rows) on its byte-level
    BPE; DeBERTa-v3's replaced tokens with gradient-disentangled sharing on
    its SentencePiece layout (the sharing itself: test_pretraining_tasks)."""
    result = run(text, tmp_path / "run", objective, preset=preset, log_every=4, num_layers=2)
    falling, metric = ("rtd_loss", "rtd") if objective == "deberta-v3" else ("mlm_loss", "mlm")
    encoder, _ = check_learnt(result, tmp_path / "run", metric, falling=falling)
    assert encoder.num_layers == 2
    assert encoder.position_encoding == ("relative" if objective == "deberta-v3" else "rotary")


class _Kill(keras.callbacks.Callback):
    """Stands for a killed process: stops the run in the middle of a stretch."""

    def __init__(self, at_step):
        super().__init__()
        self.at_step, self.steps = at_step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.steps == self.at_step:
            raise KeyboardInterrupt


def final_weights(output):
    return read_safetensors(os.path.join(output, "preset", "encoder.safetensors"))


def test_a_killed_run_resumes_to_the_uninterrupted_weights(text, tmp_path):
    settings = dict(log_every=4, checkpoint_every=8, objective="mlm+nsp")
    whole = run(text, tmp_path / "whole", **settings)
    check_learnt(whole, tmp_path / "whole", "nsp")
    # A finished run is never overwritten, nor resumed with other settings.
    with pytest.raises(FileExistsError, match="resume"):
        run(text, tmp_path / "whole", **settings)
    with pytest.raises(ValueError, match="sequence_length"):
        run(text, tmp_path / "whole", resume=True, sequence_length=64, **settings)

    with pytest.raises(KeyboardInterrupt):
        run(text, tmp_path / "killed", callbacks=[_Kill(at_step=19)], **settings)
    checkpoints = tmp_path / "killed" / "checkpoints"
    assert [s for s, _ in checkpointing.list_checkpoints(checkpoints)] == [8, 16]
    # A half-written checkpoint (no checkpoint.json yet) is never loaded.
    (checkpoints / "step-00000020").mkdir()
    (checkpoints / "step-00000020" / "state.safetensors").write_bytes(b"partial")
    resumed = run(text, tmp_path / "killed", resume=True, **settings)

    assert resumed.history == whole.history
    expected, actual = final_weights(tmp_path / "whole"), final_weights(tmp_path / "killed")
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_bad_settings_name_the_argument(text, tmp_path):
    with pytest.raises(ValueError, match="objective='mlm\\+xyz'"):
        run(text, tmp_path / "a", "mlm+xyz")
    with pytest.raises(ValueError, match="from_scratch"):
        run(text, tmp_path / "b", "mlm", from_scratch=False)
    with pytest.raises(ValueError, match="num_segments=1"):
        run(text, tmp_path / "c", "mlm+nsp", preset="roberta_base_en")
    with pytest.raises(FileNotFoundError, match="matches no file"):
        run(str(tmp_path / "nothing*.txt"), tmp_path / "d", "mlm")


@torch_pass_only  # the command's parsing and output; the run's steps: test_pretraining_tasks, on every backend
def test_command_line_pretrains_albert_style(text, tmp_path, capsys):
    output = tmp_path / "cli"
    code = main([
        "pretrain", "--preset", "albert_base_en_v2", "--objective", "mlm+sop", "--from-scratch",
        "--train-files", text, "--vocabulary-size", "300", "--sequence-length", "32",
        "--batch-size", "16", "--steps", "24", "--log-every", "4", "--num-layers", "1",
        "--hidden-dim", "16", "--num-heads", "2", "--intermediate-dim", "32",
        "--learning-rate", "2e-2", "--warmup-steps", "2", "--jit-compile", "auto",
        "--verbose", "0", "--output", str(output),
    ])
    assert code == 0
    assert "Pretrained encoder and tokenizer" in capsys.readouterr().out
    with open(output / "history.json") as f:
        history = json.load(f)
    assert history["mlm_loss"][-1] < history["mlm_loss"][0] - 0.1 and "sop_accuracy" in history
    for name in ("run.json", "preset/preset.json", "preset/spiece.model", "tokenizer/spiece.model"):
        assert (output / name).is_file(), name
    assert kerasbert.from_preset(output / "preset").num_layer_groups == 1  # ALBERT sharing kept
    assert any((output / "logs").rglob("events.out.tfevents*"))
    assert checkpointing.latest_checkpoint(output / "checkpoints").endswith("step-00000024")
    with pytest.raises(SystemExit):
        main(["pretrain", "--preset", "bert_tiny_en_uncased", "--objective", "mlm",
              "--train-files", text, "--output", str(output)])
    assert "already holds a pretraining run" in capsys.readouterr().err


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="a limit of JAX's CPU compiler")
def test_float16_with_xla_on_jax_cpu_is_refused_up_front(text, tmp_path):
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        run(text, tmp_path / "run", "mlm", precision="mixed_float16")
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize("kwargs, message", [
    (dict(preset="all_minilm_l6_v2", from_scratch=False, sequence_length=1000),
     r"sequence_length=1000 is longer than the preset's position table \(max_sequence_length=512\)"),
    (dict(sequence_length=100_000, batch_size=2), r"more than one tensor holds .*sequence_length <= 23170"),
])
def test_impossible_sequence_lengths_are_refused_before_anything_is_written(text, tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        run(text, tmp_path / "run", "mlm", **kwargs)
    assert not (tmp_path / "run").exists()
