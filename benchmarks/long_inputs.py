"""ModernBERT at long inputs: peak memory and time per sequence of
kerasbert's Encoder and transformers' ModernBertModel on the same weights,
and the memory curve of a local-attention layer.

    .venv/bin/python benchmarks/long_inputs.py --json benchmarks/results/long_inputs.json [--rounds 3]

Encoder: ModernBERT-base's shape (22 layers, hidden 768, 12 heads,
feed-forward 1152, local windows of 128 with global attention every third
layer), random weights made by transformers and converted, float32, one
sequence of 512, 2,048 and 8,192 real tokens, forward only. Each
(system, length) runs in a fresh process: the peak resident memory of the
first forward above the loaded model's (VmHWM, reset just before, minus
VmRSS) and the median wall time of the timed calls after it. kerasbert runs
on the torch backend through `predict_on_batch` (eager, without gradients),
transformers under `torch.no_grad` with its default attention (SDPA; on a
CPU without FlashAttention it does not unpad). Jobs alternate in order round by round.

The curve: one `SelfAttention` layer of that width, sliding window 128,
at 1,024 to 16,384 tokens, against the same layer attending globally:
peak memory added by one call, each in a fresh process.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

from common import alternating, run_stamp, run_worker

LENGTHS = (512, 2048, 8192)
CURVE = (1024, 2048, 4096, 8192, 16384)
CONFIG = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
              max_position_embeddings=8192, local_attention=128, global_attn_every_n_layers=3)


def _status_mb(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024


def peak_added_mb(call):
    """Runs `call()`; the most resident memory it held above what the
    process held before, in MiB (Linux: the peak is reset through
    /proc/self/clear_refs first)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM, the peak resident set, to the current one
    before = _status_mb("VmRSS")
    result = call()
    return _status_mb("VmHWM") - before, result


def reference_directory():
    """A random-weight ModernBertModel of CONFIG saved once (in the temp dir)."""
    directory = os.path.join(tempfile.gettempdir(), "kerasbert_long_inputs_modernbert")
    if not os.path.isfile(os.path.join(directory, "config.json")):
        import torch
        import transformers

        torch.manual_seed(0)
        transformers.ModernBertModel(transformers.ModernBertConfig(**CONFIG)).save_pretrained(directory)
    return directory


def forward_worker(system, length, calls):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, CONFIG["vocab_size"], (1, length)).astype("int32")
    if system == "kerasbert":
        import kerasbert

        encoder = kerasbert.from_preset(reference_directory())
        inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
        call = lambda: encoder.predict_on_batch(inputs)  # Keras's inference step: no gradient tape
    else:
        import torch
        import transformers

        torch.set_grad_enabled(False)
        model = transformers.ModernBertModel.from_pretrained(reference_directory()).eval()
        inputs = {"input_ids": torch.tensor(ids, dtype=torch.long),
                  "attention_mask": torch.ones((1, length), dtype=torch.long)}
        call = lambda: model(**inputs)
    added, _ = peak_added_mb(call)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"peak_added_mb": added, "seconds": statistics.median(times)}


def curve_worker(kind, length):
    import keras
    import numpy as np

    from kerasbert.encoder import document_attention_mask
    from kerasbert.layers import SelfAttention

    layer = SelfAttention(num_heads=12, hidden_dim=768)
    x = np.random.default_rng(0).normal(size=(1, length, 768)).astype("float32")
    mask = np.ones((1, length), "int32")
    layer(x[:, :8], attention_mask=document_attention_mask(mask[:, :8]))  # built
    if kind == "local":
        call = lambda: keras.ops.convert_to_numpy(layer(x, local_window=128, padding_mask=mask))
    else:
        call = lambda: keras.ops.convert_to_numpy(layer(x, attention_mask=document_attention_mask(mask)))
    import torch  # the worker's backend: no gradient tape, as in predict

    with torch.no_grad():
        return {"peak_added_mb": peak_added_mb(call)[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    parser.add_argument("--curve", type=int, nargs="+", default=CURVE)
    parser.add_argument("--worker", nargs="+")
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        result = forward_worker(rest[0], int(rest[1]), args.calls) if kind == "forward" else \
            curve_worker(rest[0], int(rest[1]))
        print("RESULT " + json.dumps(result))
        return
    reference_directory()
    script = os.path.abspath(__file__)
    forward = {}
    jobs = [(system, length) for length in args.lengths for system in ("kerasbert", "transformers")]
    for round_, (system, length) in alternating(jobs, args.rounds):
        result = run_worker(script, ["--json", args.json, "--calls", str(args.calls), "--worker", "forward",
                                     system, str(length)], system, "torch")
        print(round_, system, length, result, file=sys.stderr)
        forward.setdefault(f"{system}/{length}", []).append(result)
    curve = {}
    for kind in ("local", "global"):
        for length in args.curve:
            if kind == "global" and length > 8192:
                continue  # (12 heads x 16k x 16k float32 scores: 12 GiB)
            result = run_worker(script, ["--json", args.json, "--worker", "curve", kind, str(length)], kind, "torch")
            print(kind, length, result, file=sys.stderr)
            curve[f"{kind}/{length}"] = result
    summary = {
        key: {"peak_added_mb": statistics.median(r["peak_added_mb"] for r in runs if r),
              "seconds": statistics.median(r["seconds"] for r in runs if r), "rounds": len([r for r in runs if r])}
        for key, runs in forward.items()
    }
    with open(args.json, "w") as f:
        json.dump({**run_stamp(), "recipe": __doc__.split("\n\n", 2)[2], "config": CONFIG, "forward": summary,
                   "forward_runs": forward, "local_attention_curve": curve}, f, indent=2)


if __name__ == "__main__":
    main()
