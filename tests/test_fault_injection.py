"""Kills during writes and corrupted files (tests/fault_injection_worker.py).

The writes and loads under test are the same on every backend, so the
worker runs once, in the PyTorch pass of `make test` (the lightest), under
Keras's numpy backend. docs/security.md reports the counts.
"""

import json
import os
import subprocess
import sys

import keras
import pytest

WORKER = os.path.join(os.path.dirname(__file__), "fault_injection_worker.py")
KILLS = 5  # per kind of write
CORRUPTIONS = 24  # per kind of saved directory

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "torch",
    reason="backend-independent file writes; runs once, in the torch pass (KERAS_BACKEND=torch)",
)


def run_worker(mode, directory, n):
    env = {**os.environ, "KERAS_BACKEND": "numpy", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, WORKER, mode, str(directory), str(n), "0"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kills_during_writes_leave_a_whole_version(tmp_path):
    report = run_worker("kills", tmp_path, KILLS)
    assert set(report) == {"Preset", "TokenizerIntoPreset", "Checkpoint", "BestPreset", "JsonOutput", "BuiltinCache"}
    for writer, counts in report.items():
        assert counts["corrupt_loads"] == 0, (writer, counts)
        assert counts["good_loads"] == KILLS
    # The kills did land inside writes (they left temporary files), not only between them.
    assert sum(c["kills_with_temporaries_left"] for c in report.values()) >= KILLS * len(report) // 2, report


def test_corrupted_kerasbert_files_never_load(tmp_path):
    report = run_worker("corruptions", tmp_path, CORRUPTIONS)
    for artifact in ("preset", "checkpoints", "best"):
        counts = report[artifact]
        assert counts["corruptions"] == CORRUPTIONS
        assert counts["clear_errors"] == CORRUPTIONS, (artifact, counts)
    # A Hugging Face directory records no digests: byte flips inside tensor data
    # can load (docs/security.md); what fails must fail with a clear error.
    assert report["huggingface"]["other_errors"] == 0, report["huggingface"]
