"""What the machine's CPU can do, where it decides how a task compiles
and which kernels TensorFlow runs."""

import functools
import os
import platform
import sys

# /proc/cpuinfo flags of x86 units that multiply bfloat16 matrices at more
# than the float32 rate: AMX tiles (Sapphire Rapids and later) and
# AVX512-BF16 dot products (Cooper Lake, Zen 4 and later).
BFLOAT16_MATMUL_FLAGS = ("amx_bf16", "avx512_bf16")


@functools.lru_cache(maxsize=None)
def cpu_multiplies_bfloat16(cpuinfo="/proc/cpuinfo"):
    """True when the CPU has bfloat16 matrix units (`BFLOAT16_MATMUL_FLAGS`),
    which oneDNN's kernels use; False without them or where `cpuinfo` cannot
    be read (not Linux).

    >>> cpu_multiplies_bfloat16("/nonexistent")
    False
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return any(flag in line.split() for flag in BFLOAT16_MATMUL_FLAGS)
    except OSError:
        pass
    return False


def prefer_onednn(environ=None, modules=None, machine=None):
    """Turns on TensorFlow's oneDNN kernels and graph fusions on an x86-64
    CPU, unless the user chose (`TF_ENABLE_ONEDNN_OPTS` set either way) or
    TensorFlow is already imported. True when it set the variable.

    TensorFlow reads `TF_ENABLE_ONEDNN_OPTS` once, as it is imported; unset,
    it uses oneDNN only on CPUs with neural-network instructions (AVX-512
    VNNI or BF16, AMX and the like: TensorFlow 2.9's release notes). On an
    AVX2 CPU, where it said oneDNN was off, its own kernels ran the
    products, the bias additions and the GELU as separate passes over
    memory: the exact GELU of a (2048, 1536) activation took 17 ms there
    against 4 ms on torch, and all-MiniLM-L6-v2's forward took 15% longer
    than with oneDNN, whose remapper can fuse the product, the bias and the
    GELU into one kernel (docs/performance_history.md).
    Call it (`kerasbert.prefer_onednn()`) before importing keras or
    tensorflow, as the `kerasbert` command does, or set the variable
    yourself (`TF_ENABLE_ONEDNN_OPTS=0` keeps oneDNN off).

    >>> env = {}
    >>> prefer_onednn(env, modules={}, machine="x86_64"), env
    (True, {'TF_ENABLE_ONEDNN_OPTS': '1'})
    >>> prefer_onednn({"TF_ENABLE_ONEDNN_OPTS": "0"}, modules={}, machine="x86_64")
    False
    >>> prefer_onednn({}, modules={"tensorflow": None}, machine="x86_64")
    False
    >>> prefer_onednn({}, modules={}, machine="aarch64")
    False
    """
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    machine = platform.machine() if machine is None else machine
    if "TF_ENABLE_ONEDNN_OPTS" in environ or "tensorflow" in modules or machine.lower() not in ("x86_64", "amd64"):
        return False
    environ["TF_ENABLE_ONEDNN_OPTS"] = "1"
    return True


@functools.lru_cache(maxsize=None)
def xla_on_cpu():
    """True when Keras runs on JAX and JAX computes on the CPU: XLA's CPU
    code generator, whose batched products are faster with their batch
    dimensions in front (`kerasbert.layers.SelfAttention`) and which has no
    float16 product accumulating in float32 (`kerasbert.pretrain`)."""
    import keras

    if keras.backend.backend() != "jax":
        return False
    import jax

    return jax.default_backend() == "cpu"
