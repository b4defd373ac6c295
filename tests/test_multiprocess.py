"""`kerasbert.pretrain(distribution="data")` in two processes on the CPU,
started the way clusters start them, on the suite's backend: JAX
(`jax.distributed` through `keras.distribution.initialize`, gloo
collectives), TensorFlow (`MultiWorkerMirroredStrategy`, `TF_CONFIG`) and
torch (DistributedDataParallel under `torchrun`, gloo).

The run is killed after its second checkpoint and resumed; it must end
with the weights and history of one process training on the same global
batches, and only process 0 may write into the run's directory."""

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import kjv_chapters

import kerasbert
from kerasbert.tokenizers import training
from kerasbert.utils.io import read_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "multiprocess_worker.py")
STEPS, EXIT_AFTER = 12, 8


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def launch(args):
    """Starts the worker as two processes of one job; returns them."""
    backend = keras.backend.backend()
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.path.dirname(HERE)}
    if backend == "torch":
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                   "--master-addr", "127.0.0.1", "--master-port", str(free_ports(1)[0]), WORKER, *args]
        return [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    ports = free_ports(2)
    processes = []
    for index in range(2):
        if backend == "jax":
            extra = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(f"127.0.0.1:{p}" for p in ports),
                     "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": str(index)}
        else:
            extra = {"TF_CONFIG": json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                              "task": {"type": "worker", "index": index}})}
        processes.append(subprocess.Popen([sys.executable, WORKER, *args], env={**env, **extra},
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    return processes


def wait(processes, timeout=300):
    """The processes' exit codes and their output, all killed on a timeout."""
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=timeout)[0])
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        pytest.fail("the processes did not finish:\n" + "\n".join(o[-3000:] for o in outputs))
    return [p.returncode for p in processes], "\n".join(o[-3000:] for o in outputs)


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    return kjv_chapters(tmp_path_factory.mktemp("text") / "kjv_30.txt", 30)


@pytest.fixture(scope="module")
def preset(text, tmp_path_factory):
    """A tiny BERT without dropout, so that processes splitting a batch
    compute what one process computes on all of it."""
    directory = tmp_path_factory.mktemp("preset")
    tokenizer = training.train_wordpiece([text], 300, str(directory))
    keras.utils.set_random_seed(0)
    encoder = kerasbert.Encoder(
        vocabulary_size=tokenizer.vocabulary_size(), num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=32, dropout=0.0,
    )
    encoder.save_to_preset(str(directory))
    return str(directory)


def test_two_processes_train_as_one_and_resume(text, preset, tmp_path):
    one = kerasbert.pretrain(
        preset, "mlm", text, str(tmp_path / "one"), sequence_length=32, batch_size=8, steps=STEPS,
        learning_rate=1e-2, warmup_steps=2, log_every=4, seed=0, verbose=0,
    )
    output, reports = tmp_path / "two", tmp_path / "reports"
    args = [preset, text, str(output), str(reports), str(STEPS)]

    codes, log = wait(launch([*args, str(EXIT_AFTER)]))
    assert all(code != 0 for code in codes), log
    checkpoints = sorted(p.name for p in (output / "checkpoints").iterdir() if not p.name.startswith("."))
    assert checkpoints == ["step-00000004", "step-00000008"], log
    assert not (output / "preset").exists()
    killed = [json.loads((reports / f"process-{i}.json").read_text()) for i in range(2)]

    codes, log = wait(launch(args))
    assert codes == [0] * len(codes), log
    resumed = [json.loads((reports / f"process-{i}.json").read_text()) for i in range(2)]

    expected = read_safetensors(tmp_path / "one" / "preset" / "encoder.safetensors")
    actual = read_safetensors(output / "preset" / "encoder.safetensors")
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], atol=1e-5, rtol=0, err_msg=name)
    assert np.abs(actual["token_embedding/embeddings"] - read_safetensors(
        os.path.join(preset, "encoder.safetensors"))["token_embedding/embeddings"]).max() > 1e-3

    # The history is the global batches' (every process returns it; process 0 writes it).
    history = json.loads((output / "history.json").read_text())
    assert history["step"] == one.history["step"] == [4, 8, 12]
    for report in resumed:
        assert report["history"] == history
    for name, values in one.history.items():
        np.testing.assert_allclose(history[name], values, rtol=1e-4, err_msg=name)

    # Only process 0 writes into the run's directory.
    assert not killed[1]["writes"] and not resumed[1]["writes"], (killed[1], resumed[1])
    assert {"run.json", "history.json"} <= set(killed[0]["writes"]) & set(resumed[0]["writes"])
    assert any(path.startswith("preset") for path in resumed[0]["writes"])
