"""benchmarks/gpu_mfu.py: its FLOP count against the model's own weight
shapes, its sizes against the presets, and a tiny end-to-end run on the
current backend."""

import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import kerasbert

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)
import gpu_mfu


def counted_train_flops(model, encoder, seq, masked):
    """Training FLOPs of one sequence counted from the built model: 2 x the
    size of every kernel per token (a kernel of shape (a, b) turns a token's
    a values into b with 2ab FLOPs), the tied decoder at the masked positions
    through the token embedding's shape, attention per head; x 3 for
    forward plus backward."""
    def size(weight):
        return math.prod(weight.shape)

    def is_kernel(weight):
        return weight.path.endswith("kernel")

    blocks = [w for w in encoder.weights if is_kernel(w) and w.path.startswith("transformer_block_")]
    assert blocks, [w.path for w in encoder.weights]
    per_token = sum(2 * size(w) for w in blocks)
    head = [w for w in model.weights if is_kernel(w) and w.path.startswith("mlm_head")]
    assert all(encoder.vocabulary_size not in w.shape for w in head), "the decoder should be tied"
    (embedding,) = [w for w in encoder.weights if w.path == "token_embedding/embeddings"]
    per_masked = sum(2 * size(w) for w in head) + 2 * size(embedding)
    head_dim = encoder.hidden_dim // encoder.num_heads
    per_head = 2 * seq * head_dim * seq + 2 * seq * seq * head_dim  # Q K^T, then probabilities x V
    attention = encoder.num_layers * encoder.num_heads * per_head
    return 3 * (seq * per_token + attention + masked * per_masked)


@pytest.mark.parametrize("seq, masked", [(16, 3), (24, 7)])
def test_flops_match_the_model_weights(seq, masked):
    sizes = {"vocabulary_size": 97, "num_layers": 3, "hidden_dim": 24, "intermediate_dim": 40}
    encoder = kerasbert.Encoder(**sizes, num_heads=4, max_sequence_length=32)
    model = kerasbert.BertPretrainer(encoder, sentence_task=None)
    expected = counted_train_flops(model, encoder, seq, masked)
    assert gpu_mfu.train_flops_per_sequence(**sizes, seq=seq, masked=masked) == expected


def test_flops_of_bert_base():
    # 6 x 85M non-embedding weights x 128 + attention + head at 20 positions.
    assert gpu_mfu.train_flops_per_sequence(12, 768, 3072, 30522, seq=128, masked=20) == 69_925_441_536
    assert [gpu_mfu.masked_per_row(s) for s in (32, 128, 512)] == [5, 20, 77]


@pytest.mark.parametrize("model", sorted(gpu_mfu.PRESETS))
def test_sizes_are_the_presets(model):
    preset = kerasbert.get_preset(gpu_mfu.PRESETS[model])["encoder"]
    assert {k: preset[k] for k in gpu_mfu.MODELS[model]} == gpu_mfu.MODELS[model]


def test_make_data_masks_distinct_ordinary_positions():
    x, mask_ids, weights = gpu_mfu.make_data(rows=6, seq=16, masked=3, vocabulary_size=200)
    positions = x["mask_positions"]
    assert positions.shape == mask_ids.shape == weights.shape == (6, 3)
    assert (np.diff(positions, axis=1) > 0).all()  # sorted and distinct
    assert not np.isin(positions, [0, 8, 15]).any()  # never [CLS] or [SEP]
    assert (np.take_along_axis(x["token_ids"], positions, axis=1) == gpu_mfu.MASK).all()
    assert (mask_ids > gpu_mfu.MASK).all()
    assert (x["segment_ids"][:, 9:] == 1).all() and (x["segment_ids"][:, :9] == 0).all()


def test_time_budget_skips_jobs(tmp_path):
    out = tmp_path / "mfu.json"
    command = [sys.executable, os.path.join(BENCHMARKS, "gpu_mfu.py"), "--tiny", "--backends", "jax,torch",
               "--seqs", "16,32", "--time-budget", "0", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [(r["seq"], r["backend"]) for r in results] == [(16, "jax"), (16, "torch"), (32, "jax"), (32, "torch")]
    assert all(r["skipped"] == "skipped (time budget)" for r in results)
    assert done.stdout.count("skipped (time budget)") == 4


def test_tiny_run_reports_consistent_figures(tmp_path):
    backend = keras.backend.backend()
    out = tmp_path / "mfu.json"
    peak = 100.0
    command = [sys.executable, os.path.join(BENCHMARKS, "gpu_mfu.py"), "--tiny", "--backends", backend,
               "--peak-tflops", str(peak), "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    (result,) = report["results"]
    assert "error" not in result, done.stderr[-3000:]
    assert report["devices"] == [result["device"]] and result["device"]
    assert (result["backend"], result["model"], result["seq"]) == (backend, "tiny", 32)
    assert result["jit"] == ("eager" if backend == "torch" else "xla")
    assert math.isfinite(result["loss"])

    steps, seq = report["config"]["steps"], result["seq"]
    assert result["seq_per_s"] > 0
    assert result["seq_per_s"] == pytest.approx(result["batch"] * steps / result["seconds"])
    assert result["tokens_per_s"] == pytest.approx(result["seq_per_s"] * seq)
    sizes = {k: v for k, v in gpu_mfu.MODELS["tiny"].items() if k != "num_heads"}
    flops = gpu_mfu.train_flops_per_sequence(**sizes, seq=seq, masked=result["masked"])
    assert result["flops_per_seq"] == flops
    assert result["tflops"] == pytest.approx(flops * result["seq_per_s"] / 1e12)
    assert result["mfu"] == pytest.approx(result["tflops"] / peak)
    assert f"MFU (peak {peak:g})" in done.stdout and f"| {backend} | tiny | 32 |" in done.stdout


def test_transformers_peers_run_the_same_job(tmp_path):
    if keras.backend.backend() != "torch":
        pytest.skip("the peers are plain torch: run once, in the torch suite")
    out = tmp_path / "mfu.json"
    command = [sys.executable, os.path.join(BENCHMARKS, "gpu_mfu.py"), "--tiny", "--backends",
               "transformers,transformers-gathered", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    stock, gathered = json.loads(out.read_text())["results"]
    for result in (stock, gathered):
        assert "error" not in result, done.stderr[-3000:]
        assert result["jit"] == "eager" and result["device"] == "cpu" and math.isfinite(result["loss"])
    # The same model and rows: the same parameters; both losses near log(vocabulary) at the start.
    assert stock["params"] == gathered["params"]
    assert stock["loss"] == pytest.approx(math.log(gpu_mfu.MODELS["tiny"]["vocabulary_size"]), rel=0.1)
