"""How long `import kerasbert` takes, with and without TensorFlow installed,
and how long `kerasbert --help` takes, on each Keras backend.

    .venv/bin/python benchmarks/import_time.py [--rounds 3] [--baseline DIR] [--json out.json]

Each figure is the wall time of the statement inside a fresh Python process
(`time.perf_counter` around it, the interpreter's own start excluded), the
median over `--rounds` rounds; the cases alternate within a round so that
load from other work falls on all of them. "Without TensorFlow" runs Python
with `-S` and a site directory of links to this interpreter's packages less
TensorFlow, TensorFlow Text and TensorBoard, as
`tests/test_without_tensorflow.py` does. `--baseline DIR` also times a
checkout of another commit (e.g. `git worktree add /tmp/base <commit>`) in
the same rounds.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from helpers import site_without_tensorflow  # noqa: E402

STATEMENTS = {
    "import kerasbert": "import kerasbert",
    "import kerasbert; kerasbert.Encoder": "import kerasbert; kerasbert.Encoder",
    "import keras; import kerasbert": "import keras; import kerasbert",
    "kerasbert --help": "from kerasbert.cli import build_parser; build_parser().format_help()",
}


def seconds(root, backend, statement, site=None):
    setup = f"import sys, time; sys.path.insert(0, {root!r})"
    if site:
        setup = f"import site; site.addsitedir({site!r}); " + setup
    code = f"{setup}; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, *(["-S"] if site else []), "-c", code], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        return None  # e.g. a checkout that cannot run without TensorFlow
    return float(done.stdout.split()[-1])


def cpu():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", help="another checkout of kerasbert to time beside this one")
    parser.add_argument("--json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = site_without_tensorflow(os.path.join(tmp, "site"))
        cases = []
        for checkout in [("this", ROOT)] + ([("baseline", os.path.abspath(args.baseline))] if args.baseline else []):
            for backend in ("tensorflow", "jax", "torch"):
                for name, statement in STATEMENTS.items():
                    cases.append((checkout, backend, name, statement, None))
                    if backend != "tensorflow" and name != "import keras; import kerasbert":
                        cases.append((checkout, backend, name + " (without TensorFlow)", statement, site))
        times = {case[:3]: [] for case in cases}
        for _ in range(args.rounds):
            for (label, root), backend, name, statement, hidden in cases:
                times[((label, root), backend, name)].append(seconds(root, backend, statement, hidden))
    rows = []
    for ((label, root), backend, name), values in times.items():
        known = [v for v in values if v is not None]
        median = round(statistics.median(known), 3) if known else None
        rows.append({"checkout": label, "backend": backend, "statement": name, "median_s": median,
                     "runs_s": [None if v is None else round(v, 3) for v in values]})
        print(f"{label:9s} {backend:10s} {name:55s} {'failed' if median is None else f'{median:.2f} s'}")
    result = {
        "machine": f"{os.cpu_count()} x {cpu()}",
        "date": time.strftime("%Y-%m-%d"),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "baseline_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.baseline,
                                          capture_output=True, text=True).stdout.strip() if args.baseline else None,
        "rounds": args.rounds,
        "results": rows,
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
