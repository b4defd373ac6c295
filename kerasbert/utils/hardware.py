"""What the machine's CPU can do, where it decides how a task compiles."""

import functools

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
