"""The modeling floors need no TensorFlow: on JAX and PyTorch, a Python that
cannot import TensorFlow or TensorFlow Text builds every task, trains and
predicts on token ids, saves and loads presets, and reads and writes Hugging
Face checkpoints exactly (tests/without_tensorflow_worker.py).

The worker's Python sees this one's packages except TensorFlow, TensorFlow
Text and TensorBoard: links to the others in a directory of its own, which
`site.addsitedir` reads (their `.pth` files included), the interpreter's own
site directories off (`-S`).
"""

import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
from helpers import encoder_inputs, hf_outputs, make_hf_checkpoint, site_without_tensorflow

WORKER = os.path.join(os.path.dirname(__file__), "without_tensorflow_worker.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.skipif(keras.backend.backend() == "tensorflow", reason="runs on JAX and PyTorch")


def test_modeling_without_tensorflow(tmp_path):
    import transformers

    make_hf_checkpoint(tmp_path / "hf", "bert", vocab_size=97, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=37, max_position_embeddings=40,
                       type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.AutoModel.from_pretrained(tmp_path / "hf")
    shape = types.SimpleNamespace(vocabulary_size=97, num_segments=2)
    inputs = encoder_inputs(shape, lengths=(9, 6, 3, 1))
    np.savez(tmp_path / "reference.npz", **inputs, **hf_outputs(model, inputs))

    site = site_without_tensorflow(tmp_path / "site")
    code = (f"import runpy, site, sys; site.addsitedir({str(site)!r}); sys.path.insert(0, {ROOT!r}); "
            f"sys.argv = [{WORKER!r}, {str(tmp_path)!r}]; runpy.run_path({WORKER!r}, run_name='__main__')")
    env = {**os.environ, "KERAS_BACKEND": keras.backend.backend(), "PYTHONPATH": ""}
    result = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0 and "OK" in result.stdout, result.stdout[-3000:] + result.stderr[-5000:]

    roundtrip = transformers.AutoModel.from_pretrained(tmp_path / "roundtrip")
    np.testing.assert_allclose(hf_outputs(roundtrip, inputs)["sequence_output"], np.load(tmp_path / "roundtrip.npy"),
                               atol=1e-5)
