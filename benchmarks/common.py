"""Pieces the benchmark scripts share (they run as scripts: `benchmarks/` is
on `sys.path`)."""

import datetime
import os
import resource
import time

import numpy as np


def peak_rss_mb():
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine():
    """This machine as the results name it: "<cores> × <CPU model name>"."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} × {model}"


def run_stamp():
    """What a results file records of where and when it was measured (the
    plot labels each panel with it)."""
    return {"machine": machine(), "date": datetime.date.today().isoformat()}


def latency(call, texts, calls, warmup=0):
    """Median and p90 ms of `call(text)` over `calls` single strings (taken
    in turn from `texts`), after `warmup` untimed calls."""
    pick = lambda i: texts[i % len(texts)]
    for i in range(warmup):
        call(pick(i))
    times = []
    for i in range(warmup, warmup + calls):
        text = pick(i)
        start = time.perf_counter()
        call(text)
        times.append(1000 * (time.perf_counter() - start))
    return float(np.median(times)), float(np.percentile(times, 90))


def system_jobs(systems, backends):
    """(system, backend) pairs: Keras systems on every backend, transformers
    (a torch library) once, on torch."""
    jobs = []
    for system in systems:
        jobs += [(system, "torch")] if system == "transformers" else [(system, b) for b in backends]
    return jobs
