"""Pieces the benchmark scripts share (they run as scripts: `benchmarks/` is
on `sys.path`)."""

import datetime
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def peak_rss_mb():
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def directory_bytes(path, names=None):
    """The bytes of the files under `path` (only those named `names`, when given)."""
    total = 0
    for base, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(base, f)) for f in files if names is None or f in names)
    return total


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
    """What a results file records of where, when and on what it was
    measured: the machine (the plot labels each panel with it), the date,
    kerasbert's commit ("+" when the working tree had changes) and the
    versions of the libraries compared."""
    return {"machine": machine(), "date": datetime.date.today().isoformat(), "commit": commit(),
            "versions": versions()}


def commit():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = lambda *args: subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "kerasbert", "benchmarks")
    except OSError:
        return None
    return (head + "+" * bool(changed)) or None


def versions():
    from importlib import metadata

    found = {}
    for name in ("kerasbert", "keras", "keras-hub", "tensorflow", "tensorflow-text", "jax", "torch",
                 "transformers", "tokenizers"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


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
        jobs += [(system, "torch")] if system.startswith("transformers") else [(system, b) for b in backends]
    return jobs


def worker_environment(backend):
    """The environment of a benchmark's worker process under `backend`:
    TensorFlow quiet, and with its oneDNN kernels on x86 as under the
    `kerasbert` command (`kerasbert.prefer_onednn`)."""
    from kerasbert.utils.hardware import prefer_onednn

    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    prefer_onednn(env, modules={})  # the worker's environment, before it imports TensorFlow
    return env


def run_worker(script, arguments, system, backend, cwd=None):
    """`script --worker ...` (`arguments`) in its own process under
    `backend`: the JSON of its last "RESULT " line, or None (its stderr
    printed) when it failed."""
    done = subprocess.run([sys.executable, script, *arguments], check=False, env=worker_environment(backend),
                          capture_output=True, text=True, cwd=cwd)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        print(f"{system}/{backend} failed:\n{done.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1][len("RESULT "):])


def alternating(jobs, rounds):
    """(round, job) for every job of every round, every other round in
    reverse order, so that a slow spell of a shared machine falls on every
    job."""
    for round_ in range(rounds):
        for job in jobs if round_ % 2 == 0 else jobs[::-1]:
            yield round_, job


def torch_update(model, loss, optimizer, scheduler, clipnorm=1.0):
    """One optimizer step of a torch model from its loss, as
    `transformers.Trainer` takes it: gradients clipped to a global norm,
    the schedule stepped, gradients cleared."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clipnorm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
