#!/usr/bin/env bash
# The GPU measurements in one command, for a GPU machine with no network:
#
#   benchmarks/gpu_run.sh OUT_DIR
#
# Run in the repository root after tools/gpu_bundle.sh filled .whl/ (where
# keras is installed already, .whl/ may be absent). It installs the wheels
# into a temporary directory (nothing in the machine's Python changes) and
# writes into OUT_DIR, in under 9 minutes on one H100:
#   machine.json          the GPU (nvidia-smi), driver, and library versions
#   smoke_jax.json,       every task built, trained 3 steps and asked to
#   smoke_torch.json        predict on the GPU (benchmarks/gpu_smoke.py)
#   gpu_mfu_128.json      BERT-base and BERT-large at 128 tokens, bf16: kerasbert
#                         on JAX (XLA), torch and torch.compile beside
#                         transformers' BertForMaskedLM (stock and equal-work,
#                         torch.compile) on the same rows (benchmarks/gpu_mfu.py)
#   gpu_mfu_512.json      BERT-base at 512 tokens, as far as the time budget goes
#   *.log                 each step's output
set -uo pipefail
out=${1:?usage: benchmarks/gpu_run.sh OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
PYTHON=${PYTHON:-python3}
start=$(date +%s)

site=$(mktemp -d)
if compgen -G ".whl/*.whl" > /dev/null; then
  "$PYTHON" -m pip install --quiet --no-index --no-deps --target "$site" .whl/*.whl
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export TF_CPP_MIN_LOG_LEVEL=3

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$out/nvidia-smi.csv" 2>&1
"$PYTHON" - "$out/machine.json" "$out/nvidia-smi.csv" <<'PY'
import importlib.metadata as metadata, json, platform, subprocess, sys
gpu = open(sys.argv[2]).read().strip()
versions = {}
for name in ("keras", "jax", "jaxlib", "torch", "transformers", "numpy", "safetensors"):
    try:
        versions[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        versions[name] = None
try:
    import torch
    versions["cuda (torch)"] = torch.version.cuda
except ImportError:
    pass
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip() or None
json.dump({"gpu": gpu, "python": platform.python_version(), "versions": versions, "commit": commit},
          open(sys.argv[1], "w"), indent=1)
PY
cat "$out/machine.json"

status=0
for backend in jax torch; do
  echo "=== smoke test on $backend"
  KERAS_BACKEND=$backend timeout 150 "$PYTHON" benchmarks/gpu_smoke.py --json "$out/smoke_$backend.json" \
    > "$out/smoke_$backend.log" 2>&1 || status=1
  grep '^{' "$out/smoke_$backend.log" || tail -n 20 "$out/smoke_$backend.log"
done

left=$(( 500 - ($(date +%s) - start) ))
echo "=== MFU at 128 tokens ($left s)"
"$PYTHON" benchmarks/gpu_mfu.py --models base,large --seqs 128 \
  --backends jax,torch,transformers-gathered-compile,transformers-compile,torch-compile,transformers \
  --time-budget $(( left - 60 )) --json "$out/gpu_mfu_128.json" > "$out/gpu_mfu_128.log" 2>&1 || status=1
tail -n 16 "$out/gpu_mfu_128.log"

left=$(( 520 - ($(date +%s) - start) ))
if [ "$left" -gt 60 ]; then
  echo "=== MFU at 512 tokens ($left s)"
  "$PYTHON" benchmarks/gpu_mfu.py --models base --seqs 512 --backends jax,torch,transformers-gathered-compile \
    --time-budget "$left" --json "$out/gpu_mfu_512.json" > "$out/gpu_mfu_512.log" 2>&1 || status=1
  tail -n 8 "$out/gpu_mfu_512.log"
fi
echo "total $(( $(date +%s) - start )) s"
exit $status
