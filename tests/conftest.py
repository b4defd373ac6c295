"""Test set-up: offline, an isolated preset cache, quiet TensorFlow.

The suite runs once per backend: `KERAS_BACKEND=jax pytest` (see Makefile).
"""

import atexit
import os
import shutil
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"  # no test ever downloads anything
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The suite compiles hundreds of small XLA programs (JAX, TensorFlow with
# jit_compile) and runs each a few times: LLVM's optimisations took most of
# their compile time (a tiny encoder's train step: 6.9 s, 2.6 s without).
# Results are the same; only their speed, which no test checks, differs.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
# Many tests compile the same JAX programs (a task of the same tiny config,
# another instance): JAX's persistent compilation cache, keyed by the
# program without its debug names, compiles each once per run. One folder
# for the run, made by the first process (pytest-xdist's workers and the
# tests' subprocesses inherit it) and removed by it at exit.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="kerasbert-tests-jax-cache-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import kerasbert  # noqa: E402

# As the examples do: TensorFlow's oneDNN kernels on x86, before Keras
# imports TensorFlow (kerasbert.utils.hardware).
kerasbert.prefer_onednn()
import keras  # noqa: E402
import pytest  # noqa: E402


# The slowest test files, slowest first by their time in the pass where each
# is slowest (25 to 95 s of one process in a full run at 97f87c3, 2 cores).
# pytest-xdist hands out whole files in collection order (the Makefile's
# `--dist loadfile --no-loadscope-reorder`): these go first, so that none
# starts last while the other worker has nothing left to do.
SLOWEST_FIRST = (
    "test_encoder.py", "test_sentence_piece.py", "test_export.py", "test_distributed.py",
    "test_pretraining_tasks.py", "test_byte_pair.py", "test_finetuning_tasks.py", "test_fault_injection.py",
    "test_multiprocess.py", "test_onnx_litert.py", "test_question_answering_learns.py", "test_wordpiece.py",
    "test_quantization.py", "test_packed_training.py", "test_alignment.py", "test_pretrain.py",
    "test_bad_inputs_preprocessing.py", "test_keras_hub.py", "test_wheel.py", "test_cli.py",
)


# The docstrings' examples (`--doctest-modules`) show the API; the tests
# check what it computes on each backend. They run once, in the torch pass:
# on JAX every eager op of an example compiles on its own (101 s of the JAX
# pass against 20 s of the torch pass at c3e8621).
EXAMPLES_ONCE = pytest.mark.skipif(keras.backend.backend() != "torch", reason="docstring examples: run once, in "
                                   "the torch pass")


def pytest_collection_modifyitems(items):
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files keep their order
    for item in items:
        if isinstance(item, pytest.DoctestItem):
            item.add_marker(EXAMPLES_ONCE)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # One cache per session, so a converted preset is reused across tests
    # but never taken from (or left in) the user's home.
    root = tmp_path_factory.getbasetemp() / "kerasbert_home"
    monkeypatch.setenv("KERASBERT_HOME", str(root))
    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture(scope="session")
def minilm_tokenizer():
    """The all-MiniLM-L6-v2 WordPiece tokenizer, built once per run (building
    and tracing a tokenizer takes seconds)."""

    return kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
