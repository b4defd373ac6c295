#!/usr/bin/env bash
# Collects, on a machine with network access, the wheels a GPU machine
# without network needs to run kerasbert's modeling core on JAX and torch
# beyond what a stock CUDA image with jax, torch, transformers, safetensors,
# tokenizers and sentencepiece holds: keras and the two small packages it
# needs that such images lack (namex, optree). They go into .whl/ (ignored
# by git), for CPython 3.12 on manylinux x86-64 unless PYTHON_VERSION /
# PLATFORMS say otherwise; benchmarks/gpu_run.sh installs them there.
#
#   tools/gpu_bundle.sh              # keras of the version installed in .venv
#   KERAS_VERSION=3.15.1 tools/gpu_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PYTHON_VERSION=${PYTHON_VERSION:-3.12}
PLATFORMS=${PLATFORMS:-"manylinux_2_28_x86_64 manylinux2014_x86_64"}
if [ -z "${KERAS_VERSION:-}" ]; then
  KERAS_VERSION=$("$PY" -c "import keras; print(keras.__version__)")
fi
platform_flags=()
for platform in $PLATFORMS; do platform_flags+=(--platform "$platform"); done
rm -rf .whl
mkdir -p .whl
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
  --implementation cp "${platform_flags[@]}" -d .whl "keras==$KERAS_VERSION" namex optree
ls -l .whl
du -sh .whl
