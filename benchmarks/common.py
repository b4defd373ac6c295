"""Pieces the benchmark scripts share (they run as scripts: `benchmarks/` is
on `sys.path`)."""

import resource


def peak_rss_mb():
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def system_jobs(systems, backends):
    """(system, backend) pairs: Keras systems on every backend, transformers
    (a torch library) once, on torch."""
    jobs = []
    for system in systems:
        jobs += [(system, "torch")] if system == "transformers" else [(system, b) for b in backends]
    return jobs
