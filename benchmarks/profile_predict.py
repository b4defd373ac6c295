"""Where JAX's `predict` spends its time: an XLA profile of MiniLM's
classifier predicting the fine-tuning benchmark's test snippets (packed
rows), its compiled operations grouped by what they compute.

    .venv/bin/python benchmarks/profile_predict.py [--test 2000] [--json out.json]

Runs on JAX (it sets KERAS_BACKEND). One warm-up `predict` compiles the
program; a second runs under `jax.profiler`. Every compiled operation's
time (summed over XLA's threads, so the total can exceed the wall time) is
attributed to a part of the model through the operation's source name in
the optimised HLO (`--xla_dump_to`): the dense products of each block,
attention, layer norms, the activation, the head, and copies and slices
that only move data. Prints the table and the wall time of both calls.
"""

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile
import time

# (part, pattern on the operation's op_name); the first match names the part.
PARTS = [
    ("attention: q/k/v kernel slices", r"attention/split"),
    ("attention: scores, softmax, context",
     r"attention/vmap|attention/dot_general/batched|attention/.*(softmax|exp|reduce|select|div)"),
    ("attention: q/k/v products", r"attention/dot_general"),
    ("attention: heads (reshapes, transposes)", r"attention/(reshape|transpose)|vmap\(\)/transpose"),
    ("attention: output product", r"attention/output_dense"),
    ("FFN: first product and bias", r"intermediate_dense/(dot_general|add)"),
    ("FFN: GELU", r"intermediate_dense"),
    ("FFN: second product", r"block_\d+/output_dense"),
    ("layer norms and residuals", r"layer_norm|/add$"),
    ("embeddings", r"embedding"),
    ("pooling and head", r"pool|head|classifier|logits|dense"),
]


def op_names(dump):
    """HLO op name -> its source op_name, from the optimised predict module;
    a product (or fusion of one) with a result of more than two dimensions
    gets "/batched" appended: attention's scores and context, whose source
    name is the q/k/v projections' (2-D products) on the explicit path."""
    names = {}
    for path in glob.glob(os.path.join(dump, "*predict_step*after_optimizations.txt")):
        with open(path) as f:
            for line in f:
                found = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = .*?op_name=\"([^\"]+)\"", line)
                if found:
                    shape = re.search(r"= \w+\[([\d,]*)\]", line)
                    batched = found.group(2).endswith("dot_general") and shape and shape.group(1).count(",") >= 2
                    names[found.group(1)] = found.group(2) + ("/batched" if batched else "")
    return names


def part_of(op, names):
    source = names.get(op, "")
    for part, pattern in PARTS:
        if re.search(pattern, source):
            return part
    return "other: " + (re.sub(r"\.\d+$", "", op) if not source else source.split("/")[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="profile_predict_") as work:  # the HLO dump and trace, removed after
        profile(args, os.path.join(work, "hlo"), os.path.join(work, "trace"))


def profile(args, dump, trace):
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text"
    import jax
    import keras
    from finetuning import MAX_TOKENS, split

    import kerasbert

    _, (texts, _) = split(args.seed, 4000, args.test)
    keras.utils.set_random_seed(args.seed)
    model = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    start = time.perf_counter()
    model.predict(texts, verbose=0)
    first = time.perf_counter() - start
    jax.profiler.start_trace(trace)
    start = time.perf_counter()
    model.predict(texts, verbose=0)
    second = time.perf_counter() - start
    jax.profiler.stop_trace()

    names = op_names(dump)
    totals, calls = collections.Counter(), collections.Counter()
    (path,) = glob.glob(os.path.join(trace, "**", "*.trace.json.gz"), recursive=True)
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    for event in events:
        op = event.get("args", {}).get("hlo_op")
        if event.get("ph") == "X" and op and event["args"].get("hlo_module") == "jit_predict_step":
            part = part_of(op, names)
            totals[part] += event["dur"] / 1e6
            calls[part] += 1
    total = sum(totals.values())
    print(f"{len(texts)} snippets: first predict {first:.2f} s (compiles), second {second:.2f} s (profiled)")
    print(f"{'part':42s} {'s':>7s} {'share':>7s} {'ops run':>8s}")
    for part, seconds in totals.most_common():
        print(f"{part:42s} {seconds:7.3f} {seconds / total:7.1%} {calls[part]:8d}")
    print(f"{'all compiled operations':42s} {total:7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"snippets": len(texts), "first_predict_s": first, "second_predict_s": second,
                       "parts_s": dict(totals.most_common()), "ops_run": dict(calls)}, f, indent=1)


if __name__ == "__main__":
    main()
