"""Masked-LM pretraining throughput and model FLOPs utilisation (MFU) of
kerasbert's BERT-base and BERT-large on one GPU, on every Keras backend.

    .venv/bin/python benchmarks/gpu_mfu.py [--backends tensorflow,jax,torch]
        [--models base,large] [--seqs 128,512] [--batch N] [--warmup 3]
        [--steps 20] [--precision mixed_bfloat16|float32] [--torch-compile]
        [--peak-tflops 989] [--time-budget 280] [--allow-cpu] [--json out.json]
    .venv/bin/python benchmarks/gpu_mfu.py --tiny   # seconds per backend, on a CPU

Workload: `kerasbert.BertPretrainer(Encoder(...), sentence_task=None)` (the
masked LM alone, vocabulary logits at the masked positions only), compiled
with `keras.optimizers.AdamW(1e-4)`, random weights, random token ids from a
fixed seed (nothing is downloaded), every row `seq` real tokens ([CLS] A
[SEP] B [SEP], no padding) with ceil(15% of seq) masked positions, as BERT
(20 at 128, 77 at 512). Sizes are the built-in presets' `bert_base_en_uncased`
(L12 H768 A12 I3072) and `bert_large_en_uncased` (L24 H1024 A16 I4096),
vocabulary 30,522, dropout 0.1. The default batch holds 32,768 tokens for
base (256 x 128, 64 x 512) and 16,384 for large (128 x 128, 32 x 512);
`--batch` sets one size for every job. `--precision` defaults to the
`mixed_bfloat16` dtype policy (bf16 matmuls; softmax, LayerNorm and losses
in float32).

Peers, for ratios in the same run (`--backends` takes them beside the
backends): `torch-compile` (kerasbert on torch under torch.compile);
`transformers` and `transformers-compile` (transformers' `BertForMaskedLM`
of the same sizes, sdpa attention, bf16 autocast, fused AdamW, the stock
model: vocabulary logits at every token, the loss at the masked ones);
`transformers-gathered` and `transformers-gathered-compile` (the same
model, its prediction head applied to the masked positions only: the
work kerasbert does). Same rows, masks, batch, warm-up and timed steps.

Compilation: XLA (`jit_compile=True`) on TensorFlow and JAX; eager on torch
unless `--torch-compile` (Keras's torch jit is `torch.compile`, whose
compile time of a BERT train step would eat much of the time budget). The
table's `jit` column says which.

Jobs: one per (backend, model, seq), each in its own subprocess with
`KERAS_BACKEND` set (a Keras process has one backend; XLA caches and GPU
memory do not carry over), in the order base/128, base/512, large/128,
large/512, every backend at each size before the next size. `--time-budget`
seconds (default 280, so that the whole run stays within 5 minutes) bound
the run: a job gets what is left of it as its timeout, and once less than
15 s are left the remaining jobs are skipped and listed. A backend that sees
no GPU stops at once and its remaining jobs are skipped, unless
`--allow-cpu` (implied by `--tiny`). A failed job prints the end of its
output and the run goes on.

Timing: one `model.fit` on in-memory arrays of `warmup + steps + 1` batches.
A callback with `on_train_batch_begin` only (no `on_train_batch_end`, which
would make Keras copy every step's logs to the host) waits for the device to
finish (`jax.block_until_ready` on the live arrays, TensorFlow's
`sync_devices`, `torch.cuda.synchronize`) and reads the clock when steps
`warmup` and `warmup + steps` begin: so `steps` whole steps are timed, with
no host sync between them, while compilation (in the warm-up), `fit`'s
set-up and its end are not.

FLOPs: model FLOPs of a training step (`train_flops_per_sequence`: forward
plus backward = 3 x forward, matmuls only) times sequences per second give
the achieved TFLOP/s; MFU is that over `--peak-tflops` (default 989, the
dense bf16 peak of an H100/H200 SXM). Tokens/s and MFU count real tokens
only (all of them here). On a CPU the MFU column is meaningless but is
printed all the same, against the peak shown in the header.

`--tiny` runs a 2-layer, 64-wide model (2 heads, FFN 128, vocabulary 1,000)
on rows of 32 tokens, batches of 4, 2 warm-up and 3 timed steps: a smoke
run for CPUs and for the tests. `--json` writes the configuration, the
device and every job's figures.
"""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time

BACKENDS = ("tensorflow", "jax", "torch")
# Systems beside kerasbert's backends, in the same run and on the same rows:
# kerasbert on torch under torch.compile, and transformers' BertForMaskedLM
# (sdpa attention, bf16 autocast, fused AdamW; eager or torch.compile;
# "gathered": the equal-work variant that computes the prediction head at
# the masked positions only, as kerasbert does, instead of at every token).
PEERS = ("torch-compile", "transformers", "transformers-compile", "transformers-gathered",
         "transformers-gathered-compile")
SYSTEMS = BACKENDS + PEERS
# Sizes of the built-in presets (tests/test_gpu_mfu.py checks they agree).
MODELS = {
    "base": {"vocabulary_size": 30522, "num_layers": 12, "num_heads": 12, "hidden_dim": 768,
             "intermediate_dim": 3072},
    "large": {"vocabulary_size": 30522, "num_layers": 24, "num_heads": 16, "hidden_dim": 1024,
              "intermediate_dim": 4096},
    "tiny": {"vocabulary_size": 1000, "num_layers": 2, "num_heads": 2, "hidden_dim": 64, "intermediate_dim": 128},
}
PRESETS = {"base": "bert_base_en_uncased", "large": "bert_large_en_uncased"}
BATCH_TOKENS = {"base": 32768, "large": 16384, "tiny": 128}  # default batch = these // seq
TINY_DEFAULTS = {"models": "tiny", "seqs": "32", "warmup": 2, "steps": 3}
DEFAULTS = {"models": "base,large", "seqs": "128,512", "warmup": 3, "steps": 20}
MASK_RATE = 0.15
CLS, SEP, MASK = 101, 102, 103  # BERT's uncased vocabulary
MIN_JOB_S = 15  # a job is not started with less of the time budget left
RESULT, NO_GPU = "RESULT ", "NO_GPU "


# === Model FLOPs ===


def train_flops_per_sequence(num_layers, hidden_dim, intermediate_dim, vocabulary_size, seq, masked):
    """Model FLOPs of one masked-LM training step, per sequence of `seq`
    tokens with `masked` predicted positions.

    A matmul of (a, b) by (b, c) is 2abc FLOPs; training costs 3 x forward
    (the backward pass computes two matmuls per forward one: the gradients
    of the input and of the weights). With L layers, hidden d, FFN width i,
    vocabulary V, s tokens and m masked positions:

    * dense layers: per token and layer, the fused Q/K/V projection (d x 3d),
      the attention output (d x d) and the FFN (d x i, i x d), i.e.
      N = L (4d^2 + 2di) non-embedding weights, 2N forward FLOPs per token:
      6 N s for training;
    * attention: per layer, the scores Q K^T and the context softmax(.) V,
      each 2 s^2 d forward (summed over heads: heads x 2 s^2 (d / heads)):
      12 L s^2 d for training (12 L s d per token);
    * MLM head, at the masked positions only: the transform (d x d) and the
      decoder tied to the token embedding (d x V): 6 m (d^2 + d V).

    Not counted: biases, LayerNorm, GELU, softmax, dropout, the embedding
    lookups (gathers, no matmul), the pooler (it does not reach the loss)
    and the optimizer update: together well under 1% at BERT's sizes.

    >>> train_flops_per_sequence(12, 768, 3072, 30522, seq=128, masked=20) / 1e9
    69.925441536
    """
    L, d, i, V, s, m = num_layers, hidden_dim, intermediate_dim, vocabulary_size, seq, masked
    weights = L * (4 * d * d + 2 * d * i)  # N, non-embedding matmul weights
    dense = 6 * weights * s
    attention = 3 * L * 2 * (2 * s * s * d)  # 3 x (scores + context) per layer
    mlm_head = 6 * m * (d * d + d * V)
    return dense + attention + mlm_head


def masked_per_row(seq):
    """BERT's 15% of the row, rounded up, never a special token."""
    return min(math.ceil(MASK_RATE * seq), seq - 3)


# === Worker (one backend, model and seq, in a subprocess) ===


def make_data(rows, seq, masked, vocabulary_size, seed=0):
    """Rows of [CLS] A [SEP] B [SEP], all real, with `masked` distinct
    positions per row (never a special token) replaced by [MASK]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    middle = seq // 2
    token_ids = rng.integers(MASK + 1, vocabulary_size, (rows, seq)).astype("int32")  # (rows, seq)
    token_ids[:, 0], token_ids[:, middle], token_ids[:, -1] = CLS, SEP, SEP
    segment_ids = (np.arange(seq) > middle).astype("int32")[None, :].repeat(rows, axis=0)
    # The `masked` smallest of random keys, specials keyed out of reach.
    keys = rng.random((rows, seq))
    keys[:, [0, middle, seq - 1]] = 2.0
    mask_positions = np.sort(np.argsort(keys, axis=1)[:, :masked], axis=1).astype("int32")  # (rows, masked)
    mask_ids = np.take_along_axis(token_ids, mask_positions, axis=1)
    np.put_along_axis(token_ids, mask_positions, MASK, axis=1)
    x = {"token_ids": token_ids, "segment_ids": segment_ids,
         "padding_mask": np.ones((rows, seq), "int32"), "mask_positions": mask_positions}
    return x, mask_ids, np.ones((rows, masked), "float32")


def device_sync(backend):
    """A function that returns once the device has run everything queued."""
    if backend == "jax":
        import jax

        return lambda: jax.block_until_ready(jax.live_arrays())
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.test.experimental.sync_devices
    import torch

    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)


def device_name(backend):
    """The accelerator Keras computes on, or "cpu"."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return "cpu" if device.platform == "cpu" else device.device_kind
    if backend == "tensorflow":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return "cpu"
        return tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def step_clock(sync, marks):
    import keras

    class StepClock(keras.callbacks.Callback):
        """Reads the clock when the steps in `marks` begin, after the device
        has finished the steps before. Only `on_train_batch_begin` (called
        without logs): the steps in between run with no host sync."""

        def __init__(self):
            super().__init__()
            self.marks = set(marks)
            self.times = []
            self.start = None

        def on_train_begin(self, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            if batch in self.marks:
                sync()
                self.times.append(time.perf_counter())

    return StepClock()


def transformers_worker(args):
    """The same job on transformers' BertForMaskedLM, in plain torch."""
    process_start = time.perf_counter()
    import numpy as np
    import torch
    from transformers import BertConfig, BertForMaskedLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.allow_cpu:
        print(NO_GPU + json.dumps({"backend": "torch"}), flush=True)
        return
    sizes = MODELS[args.model]
    config = BertConfig(
        vocab_size=sizes["vocabulary_size"], hidden_size=sizes["hidden_dim"],
        num_hidden_layers=sizes["num_layers"], num_attention_heads=sizes["num_heads"],
        intermediate_size=sizes["intermediate_dim"], max_position_embeddings=max(512, args.seq),
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = BertForMaskedLM(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
    marks = (args.warmup, args.warmup + args.steps)
    x, mask_ids, _ = make_data(args.batch * (marks[-1] + 1), args.seq, args.masked, sizes["vocabulary_size"])
    labels = np.full(x["token_ids"].shape, -100, "int64")
    np.put_along_axis(labels, x["mask_positions"], mask_ids, axis=1)
    tensors = {k: torch.from_numpy(np.asarray(v, "int64")).to(device) for k, v in
               {**x, "labels": labels, "mask_ids": mask_ids}.items()}
    bf16 = args.precision == "mixed_bfloat16"

    def loss_of(batch):
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            inputs = dict(input_ids=batch["token_ids"], token_type_ids=batch["segment_ids"],
                          attention_mask=batch["padding_mask"])
            if not args.gathered:
                return model(**inputs, labels=batch["labels"]).loss
            hidden = model.bert(**inputs).last_hidden_state  # (batch, seq, hidden)
            index = batch["mask_positions"][:, :, None].expand(-1, -1, hidden.shape[-1])
            logits = model.cls(torch.gather(hidden, 1, index))  # (batch, masked, vocabulary)
            return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), batch["mask_ids"].flatten())

    if args.torch_compile:
        loss_of = torch.compile(loss_of)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times, fit_start = [], time.perf_counter()
    for step in range(marks[-1] + 1):
        if step in marks:
            sync()
            times.append(time.perf_counter())
        rows = slice(step * args.batch, (step + 1) * args.batch)
        loss = loss_of({k: v[rows] for k, v in tensors.items()})
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    sync()
    print(RESULT + json.dumps({
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "jit": "torch.compile" if args.torch_compile else "eager",
        "seconds": times[1] - times[0],
        "setup_s": fit_start - process_start,
        "warmup_s": times[0] - fit_start,
        "fit_s": time.perf_counter() - fit_start,
        "loss": float(loss),
        "params": sum(p.numel() for p in model.parameters()),
    }), flush=True)


def worker(args):
    if args.transformers:
        return transformers_worker(args)
    process_start = time.perf_counter()
    import keras

    backend = keras.backend.backend()
    device = device_name(backend)
    if device == "cpu" and not args.allow_cpu:
        print(NO_GPU + json.dumps({"backend": backend}), flush=True)
        return

    import kerasbert

    jit = backend != "torch" or args.torch_compile
    keras.config.set_dtype_policy(args.precision)
    keras.utils.set_random_seed(0)
    encoder = kerasbert.Encoder(**MODELS[args.model], max_sequence_length=max(512, args.seq),
                                dtype=args.precision)
    model = kerasbert.BertPretrainer(encoder, sentence_task=None)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=jit)

    marks = (args.warmup, args.warmup + args.steps)  # one more step follows the last mark
    x, mask_ids, mask_weights = make_data(args.batch * (marks[-1] + 1), args.seq, args.masked,
                                          MODELS[args.model]["vocabulary_size"])
    clock = step_clock(device_sync(backend), marks)
    fit_start = time.perf_counter()
    model.fit(x, {"mlm": mask_ids}, sample_weight={"mlm": mask_weights}, batch_size=args.batch,
              epochs=1, shuffle=False, verbose=0, callbacks=[clock])
    fit_end = time.perf_counter()
    print(RESULT + json.dumps({
        "device": device,
        "jit": ("torch.compile" if backend == "torch" else "xla") if jit else "eager",
        "seconds": clock.times[1] - clock.times[0],  # `steps` whole steps
        "setup_s": fit_start - process_start,  # imports, model, data
        "warmup_s": clock.times[0] - clock.start,  # compilation included
        "fit_s": fit_end - fit_start,
        "loss": float(model.get_metrics_result()["loss"]),
        "params": model.count_params(),
    }), flush=True)


# === Driver ===


def launch(args, system, model, seq, batch, timeout):
    """Runs one job in a subprocess; its result, or {"error": ...}."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--model", model,
               "--seq", str(seq), "--batch", str(batch), "--masked", str(masked_per_row(seq)),
               "--warmup", str(args.warmup), "--steps", str(args.steps), "--precision", args.precision]
    compiled = system.endswith("-compile") or system == "torch" and args.torch_compile
    command += ["--torch-compile"] * compiled + ["--allow-cpu"] * args.allow_cpu
    command += ["--transformers"] * system.startswith("transformers") + ["--gathered"] * ("gathered" in system)
    backend = system if system in BACKENDS else "torch"
    env = dict(os.environ, KERAS_BACKEND=backend)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        stdout, stderr, status = done.stdout, done.stderr, f"exit {done.returncode}"
    except subprocess.TimeoutExpired as expired:
        decode = (lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or ""))
        stdout, stderr, status = decode(expired.stdout), decode(expired.stderr), f"timed out after {timeout:.0f} s"
    wall = time.perf_counter() - start
    for line in stdout.splitlines():
        if line.startswith(RESULT):
            return {**json.loads(line[len(RESULT):]), "process_s": wall}
        if line.startswith(NO_GPU):
            return {"error": "no GPU", "process_s": wall}
    noise = ("I0000 ", "W0000 ", "WARNING: All log messages")
    tail = [line for line in (stdout + stderr).strip().splitlines() if not line.startswith(noise)][-15:]
    print(f"    failed ({status}):", file=sys.stderr)
    print("\n".join("      " + line for line in tail), file=sys.stderr)
    return {"error": status, "process_s": wall}


def add_figures(result, args, flops):
    """Throughput and MFU from the timed seconds (every token is real)."""
    step = result["seconds"] / args.steps
    seq_per_s = result["batch"] / step
    tflops = flops * seq_per_s / 1e12
    result.update(ms_per_step=step * 1e3, seq_per_s=seq_per_s, tokens_per_s=seq_per_s * result["seq"],
                  tflops=tflops, mfu=tflops / args.peak_tflops)


def print_table(results, peak):
    print(f"\n| backend | model | seq | batch | jit | device | seq/s | tokens/s | TFLOP/s | MFU (peak {peak:g}) |")
    print("|---|---|---:|---:|---|---|---:|---:|---:|---:|")
    for r in results:
        head = f"| {r['backend']} | {r['model']} | {r['seq']} | {r['batch']} |"
        if "seq_per_s" in r:
            print(f"{head} {r['jit']} | {r['device']} | {r['seq_per_s']:.1f} | {r['tokens_per_s']:.0f} | "
                  f"{r['tflops']:.3g} | {100 * r['mfu']:.3g}% |")
        else:
            print(f"{head} | | {r.get('error') or r.get('skipped')} | | | |")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", help="comma-separated systems: kerasbert's backends "
                        f"({','.join(BACKENDS)}) and peers ({','.join(PEERS)}); default: every backend "
                        "that can be imported")
    parser.add_argument("--models", help=f"comma-separated, of {', '.join(MODELS)} (default base,large)")
    parser.add_argument("--seqs", help="comma-separated sequence lengths (default 128,512)")
    parser.add_argument("--batch", type=int, help="sequences per step for every job "
                        "(default: 32768 tokens for base, 16384 for large, divided by seq)")
    parser.add_argument("--warmup", type=int, help="untimed steps, compilation included (default 3)")
    parser.add_argument("--steps", type=int, help="timed steps (default 20)")
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("mixed_bfloat16", "float32"))
    parser.add_argument("--torch-compile", action="store_true",
                        help="jit_compile=True on torch (torch.compile); default eager")
    parser.add_argument("--peak-tflops", type=float, default=989.0,
                        help="the device's peak, for MFU (default: H100/H200 dense bf16)")
    parser.add_argument("--time-budget", type=float, default=280.0,
                        help="seconds for all jobs; the jobs left when it runs out are skipped")
    parser.add_argument("--allow-cpu", action="store_true", help="run even where a backend sees no GPU")
    parser.add_argument("--tiny", action="store_true",
                        help="a tiny model on rows of 32 (a CPU smoke run); implies --allow-cpu")
    parser.add_argument("--json", help="also write the configuration and results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--seq", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--masked", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--transformers", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gathered", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return args
    for key, value in (TINY_DEFAULTS if args.tiny else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.allow_cpu = args.allow_cpu or args.tiny
    if args.backends is None:
        args.backends = ",".join(b for b in BACKENDS if importlib.util.find_spec(b) is not None)
    args.backends = [b for b in args.backends.split(",") if b]
    args.models = [m for m in args.models.split(",") if m]
    try:
        args.seqs = [int(s) for s in args.seqs.split(",") if s]
    except ValueError:
        parser.error(f"--seqs {args.seqs!r}: expected comma-separated integers such as 128,512")
    for name, given, allowed in (("backend", args.backends, SYSTEMS), ("model", args.models, MODELS)):
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            parser.error(f"unknown {name}(s) {unknown}; expected some of {list(allowed)}")
    if min(args.seqs, default=0) < 8:
        parser.error(f"--seqs {args.seqs}: every length must be >= 8")
    if args.warmup < 1 or args.steps < 1 or (args.batch is not None and args.batch < 1):
        parser.error("--warmup, --steps and --batch must be >= 1")
    return args


def main():
    start = time.perf_counter()
    args = parse_args()
    if args.worker:
        return worker(args)
    if not args.backends:
        sys.exit("no backend to run: none of tensorflow, jax, torch can be imported")

    print(f"backends {','.join(args.backends)}; {args.precision}; {args.warmup} warm-up + {args.steps} "
          f"timed steps; peak {args.peak_tflops:g} TFLOP/s; budget {args.time_budget:g} s",
          file=sys.stderr, flush=True)
    results, no_gpu = [], set()
    for model in args.models:
        for seq in args.seqs:
            for backend in args.backends:
                batch = args.batch or max(1, BATCH_TOKENS[model] // seq)
                sizes = MODELS[model]
                masked = masked_per_row(seq)
                flops = train_flops_per_sequence(sizes["num_layers"], sizes["hidden_dim"],
                                                 sizes["intermediate_dim"], sizes["vocabulary_size"], seq, masked)
                result = {"backend": backend, "model": model, "seq": seq, "batch": batch, "masked": masked,
                          "flops_per_seq": flops}
                results.append(result)
                left = args.time_budget - (time.perf_counter() - start)
                name = f"{model}/{seq} batch {batch} on {backend}"
                if backend in no_gpu:
                    result["skipped"] = "skipped (no GPU)"
                    continue
                if left < MIN_JOB_S:
                    result["skipped"] = "skipped (time budget)"
                    print(f"  {name}: skipped, {max(left, 0):.0f} s of the time budget left", file=sys.stderr)
                    continue
                print(f"  {name} ...", file=sys.stderr, flush=True)
                result.update(launch(args, backend, model, seq, batch, timeout=left))
                if result.get("error") == "no GPU":
                    no_gpu.add(backend)
                    print(f"    {backend} sees no GPU: its jobs are skipped (--allow-cpu runs them on the CPU)",
                          file=sys.stderr, flush=True)
                    continue
                if "seconds" in result:
                    add_figures(result, args, flops)
                    print(f"    {result['seq_per_s']:.1f} seq/s, {result['tokens_per_s']:.0f} tokens/s, "
                          f"{result['tflops']:.3g} TFLOP/s, MFU {100 * result['mfu']:.3g}% on {result['device']} "
                          f"({result['jit']}; set-up {result['setup_s']:.0f} s, warm-up {result['warmup_s']:.0f} s, "
                          f"process {result['process_s']:.0f} s)", file=sys.stderr, flush=True)

    print_table(results, args.peak_tflops)
    total = time.perf_counter() - start
    print(f"\ntotal {total:.0f} s", file=sys.stderr)
    if args.json:
        config = {k: getattr(args, k) for k in ("backends", "models", "seqs", "batch", "warmup", "steps",
                                                "precision", "torch_compile", "peak_tflops", "time_budget",
                                                "allow_cpu", "tiny")}
        devices = sorted({r["device"] for r in results if "device" in r})
        with open(args.json, "w") as f:
            json.dump({"config": config, "devices": devices, "total_s": total, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
