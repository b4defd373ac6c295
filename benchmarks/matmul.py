"""Matrix-product throughput on this CPU, per engine and dtype: the kernels
under every other benchmark's ratios.

    .venv/bin/python benchmarks/matmul.py [--engines tensorflow,tensorflow-xla,jax,torch]
        [--dtypes float32,bfloat16] [--shapes 2048x384x1536,...] [--calls 20]
        [--rounds 5] [--json out.json]

Engines: `tensorflow` (TensorFlow's own kernels, oneDNN's on x86, in a
`tf.function`), `tensorflow-xla` (the same function under
`jit_compile=True`), `jax` (XLA) and `torch` (eager). Each engine runs in a
process of its own. A shape `MxKxN` multiplies an `(M, K)` by a `(K, N)`
matrix of that dtype; the default shapes are MiniLM's and BERT-small's
products at 2,048 rows (a prediction batch). Each (shape, dtype) is checked
once against NumPy, warmed up, then timed `rounds` times over `calls`
products, each round ended by reading the result back; the row gives the
median round's GFLOP/s (2·M·K·N per product).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from common import run_stamp, run_worker

ENGINES = ("tensorflow", "tensorflow-xla", "jax", "torch")
DTYPES = ("float32", "bfloat16")
SHAPES = ("2048x384x384", "2048x384x1536", "2048x1536x384", "2048x512x2048", "2048x2048x512")


def parse_shape(text):
    """"MxKxN" -> (M, K, N), each a positive integer."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"a shape is MxKxN with positive integers, e.g. 2048x384x1536; got {text!r}")
    return tuple(int(p) for p in parts)


def product(engine, dtype):
    """(to_engine, multiply, to_numpy) for `engine`: NumPy float32 arrays in
    the engine's `dtype`, the engine's product of two of them, and back to
    NumPy float32."""
    if engine.startswith("tensorflow"):
        import tensorflow as tf

        multiply = tf.function(tf.matmul, jit_compile=engine == "tensorflow-xla")
        return (lambda a: tf.cast(tf.constant(a), dtype)), multiply, (lambda t: tf.cast(t, "float32").numpy())
    if engine == "jax":
        import jax
        import jax.numpy as jnp

        return (lambda a: jnp.asarray(a, dtype)), jax.jit(jnp.matmul), (lambda t: np.asarray(t, "float32"))
    if engine == "torch":
        import torch

        torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
        return (lambda a: torch.from_numpy(a).to(torch_dtype)), torch.matmul, (lambda t: t.float().numpy())
    raise ValueError(f"engine must be one of {ENGINES}; got {engine!r}.")


def measure(engine, shapes, dtypes, calls, rounds):
    """One row per (shape, dtype) on `engine`: GFLOP/s of the median round
    and of every round, after checking the product against NumPy's."""
    rng = np.random.default_rng(0)
    rows = []
    for dtype in dtypes:
        to_engine, multiply, to_numpy = product(engine, dtype)
        for m, k, n in shapes:
            a = rng.standard_normal((m, k)).astype("float32")
            b = rng.standard_normal((k, n)).astype("float32")
            x, y = to_engine(a), to_engine(b)
            # The operands as the engine holds them, so only the product's rounding is compared.
            expected = to_numpy(x).astype("float64") @ to_numpy(y).astype("float64")
            got = to_numpy(multiply(x, y))
            tolerance = (1e-3 if dtype == "float32" else 2e-2) * np.sqrt(k)
            if not np.allclose(got, expected, atol=tolerance, rtol=0):
                raise AssertionError(f"{engine} {dtype} {m}x{k}x{n}: the product differs from NumPy's by "
                                     f"{np.abs(got - expected).max():.3g}")
            for _ in range(3):
                to_numpy(multiply(x, y))
            seconds = []
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(calls):
                    out = multiply(x, y)
                to_numpy(out)
                seconds.append((time.perf_counter() - start) / calls)
            flops = 2.0 * m * k * n
            rows.append({"engine": engine, "dtype": dtype, "shape": f"{m}x{k}x{n}",
                         "gflops": flops / statistics.median(seconds) / 1e9,
                         "rounds_gflops": [flops / s / 1e9 for s in seconds]})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    engines, dtypes = args.engines.split(","), args.dtypes.split(",")
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    for name, given, allowed in (("engines", engines, ENGINES), ("dtypes", dtypes, DTYPES)):
        if not set(given) <= set(allowed):
            parser.error(f"--{name} takes a comma-separated subset of {','.join(allowed)}; got {','.join(given)}")
    if args.calls < 1 or args.rounds < 1:
        parser.error(f"--calls and --rounds must be at least 1; got {args.calls} and {args.rounds}")
    if args.worker:
        print("RESULT " + json.dumps(measure(args.worker, shapes, dtypes, args.calls, args.rounds)), flush=True)
        return

    here = os.path.abspath(__file__)
    common = ["--dtypes", args.dtypes, "--shapes", args.shapes, "--calls", str(args.calls), "--rounds", str(args.rounds)]
    rows = []
    for engine in engines:
        backend = "tensorflow" if engine.startswith("tensorflow") else engine
        rows += run_worker(here, [*common, "--worker", engine], engine, backend) or []
    print(f"{'shape':>15s} {'dtype':>9s} " + " ".join(f"{e:>15s}" for e in engines) + "   GFLOP/s")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for dtype in dtypes:
            found = {r["engine"]: r["gflops"] for r in rows if r["shape"] == shape and r["dtype"] == dtype}
            print(f"{shape:>15s} {dtype:>9s} " + " ".join(f"{found[e]:15.0f}" if e in found else f"{'-':>15s}"
                                                          for e in engines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "calls": args.calls, "rounds": args.rounds, "results": rows}, f, indent=1)
    if len({r["engine"] for r in rows}) < len(engines):
        sys.exit(1)  # an engine failed (its stderr printed above)


if __name__ == "__main__":
    main()
