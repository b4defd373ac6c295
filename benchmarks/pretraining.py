"""Masked-LM pretraining throughput (train steps, sequences/s) of kerasbert
next to KerasHub's `BertMaskedLM` and Hugging Face's `BertForMaskedLM`, on
this machine's CPU.

    .venv/bin/python benchmarks/pretraining.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,keras_hub,transformers] [--warmup 3] [--steps 10]
        [--jit auto|on|off] [--precision float32|mixed_bfloat16]
        [--layers 4 --hidden 512 --heads 8 --intermediate 2048]
        [--seq 128 --batch 16 --masked 20] [--repeats 1] [--rounds 1] [--json out.json]

The default size is the project's performance anchor: a BERT-small-like
encoder (4 layers, hidden 512, 8 heads, FFN 2048, vocabulary 30,522), rows
of 128 tokens (all real, no padding), batches of 16, 20 masked positions per
row, float32. Weights are randomly initialised; data are random token ids
from fixed seeds (nothing is downloaded). `--masked` is capped at the
`seq - 3` positions that are not [CLS] / [SEP] (so 13 in rows of 16).

Systems (`--systems`, comma-separated):

* `kerasbert`: `kerasbert.BertPretrainer(encoder, sentence_task=None)`,
  logits at the masked positions only, with its default loss and metrics
  (masked cross-entropy averaged over real targets, plus `mlm_loss` and
  `mlm_accuracy` metrics).
* `keras_hub`: `keras_hub.models.BertMaskedLM` on a `BertBackbone` of the
  same size (preprocessor=None), sparse cross-entropy from logits and a
  weighted accuracy metric; the peer in Keras 3. (Its FFN uses the tanh GELU,
  kerasbert's BERT default the erf one.)
* `transformers`: `transformers.BertForMaskedLM` (torch, SDPA attention) in a
  plain torch loop with `torch.optim.AdamW`; labels are -100 except at the
  masked positions, so it computes full-vocabulary logits at every position
  (the peer's own behaviour, stock). Runs once, when `torch` is among
  `--backends`.
* `transformers_gathered`: the same model and loop doing kerasbert's work:
  the encoder's output gathered at the masked positions, then the model's
  own prediction head (`model.cls`) on those rows only, and the
  cross-entropy against the masked tokens; what a transformers user
  writes to skip the head at unmasked positions (equal work).
* optional: `kerasbert_nsp` (`BertPretrainer(sentence_task="nsp")`, masked
  LM plus next-sentence prediction) and `kerasbert_electra`
  (`ElectraPretrainer` with the paper's generator, 1/4 of the width): other
  workloads, shown for reference; their ratio is still against KerasHub's
  masked LM.

Every Keras model is compiled with `keras.optimizers.AdamW(1e-4)`; the torch
loop uses `torch.optim.AdamW(lr=1e-4, weight_decay=0.004)` (Keras's default
decay). Dropout 0.1 everywhere (all are in training mode).

Each (system, backend) pair runs in its own subprocess with `KERAS_BACKEND`
set (a Keras process has one backend), so thread pools, XLA caches and
memory do not carry over from one to the next.

Timing. Keras models train with one `model.fit` call on in-memory NumPy
arrays (`batch_size=--batch`, `shuffle=False`, `verbose=0`) of `--warmup +
--steps * --repeats + 1` distinct batches, not with `train_on_batch`:
`train_on_batch` converts its logs to NumPy after every call, a host sync
per step, and every `fit` call pays a set-up (data adapter, iterator) and an
end (state sync, metric results) of up to seconds on TensorFlow and JAX.
Within the one `fit`, the loss and metrics stay on the device and steps are
dispatched back to back (JAX asynchronously); the only callback implements
`on_train_batch_begin` alone (Keras calls it without logs and keeps its
asynchronous batch-end dispatch) and reads the clock when steps `warmup`,
`warmup + steps`, ..., `warmup + repeats * steps` begin, after waiting for
the step before (on JAX a second callback method reads each step's loss,
which waits for it; TensorFlow functions and torch on CPU return when done). So the first `--warmup`
steps (tracing and XLA compilation included) and the one step after the
last mark are not timed, nor is `fit`'s set-up or end; each repeat is
`--steps` whole steps from one mark to the next, and the median over
repeats is reported. The torch loop is timed the same way over the same
batches, with no `.item()` inside. The table gives sequences/s, ms/step,
tokens/s (non-padding tokens: all of them here), the ratio to KerasHub on
the same backend (the `transformers` row to KerasHub on torch) and the
worker process's peak resident memory (`ru_maxrss`: model, optimizer,
data, and the framework's own arenas and compiler). `--json`
also keeps every repeat's wall and process CPU seconds (a CPU/wall ratio
well under the core count means other work took the cores).

`--rounds N` runs the whole list of jobs N times, every other round in
reverse order, so that a slow spell of a shared machine falls on every system
and no system always runs first.
Each row then gives the median over rounds, and its ratio to KerasHub is the
median of the per-round ratios (each run against KerasHub's run on the same
backend in the same round); `--json` keeps every run under `runs`.

`--jit auto` runs both Keras systems as kerasbert's `jit_compile="auto"`
does (`auto_jit`): the train step under XLA on TensorFlow and JAX
(`jit_compile=True`), eagerly on torch (`jit_compile=False`: Keras's torch
jit is `torch.compile`, which on this CPU took about 95 s to compile even a
1-layer, 32-wide model and then ran its steps slower than eager), and in
mixed bfloat16 on a TensorFlow CPU with bfloat16 matrix units (AMX,
AVX512-BF16) on TensorFlow's own kernels, which use them (XLA's CPU
compiler multiplies bfloat16 matrices in float32). `--jit on`/`off` forces
one choice on every backend (`off` runs JAX op by op, very slowly). The
table's `jit` column says what each row used.
`--precision mixed_bfloat16` sets that Keras dtype policy and runs the
torch loop under `torch.autocast("cpu", torch.bfloat16)`.
"""

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

from common import peak_rss_mb, run_stamp, worker_environment

BACKENDS = ("tensorflow", "jax", "torch")
SYSTEMS = ("kerasbert", "keras_hub", "transformers", "transformers_gathered", "kerasbert_nsp", "kerasbert_electra")
TRANSFORMERS = ("transformers", "transformers_gathered")
CLS, SEP, MASK = 101, 102, 103  # BERT's uncased vocabulary
MARK = "RESULT "


# === Data ===


def make_data(args, rows):
    """`rows` random rows: [CLS] A [SEP] B [SEP], all real; `masked` distinct
    positions per row (never a special token) replaced by [MASK]."""
    import numpy as np

    rng = np.random.default_rng(0)
    seq, masked = args.seq, args.masked
    token_ids = rng.integers(1000, args.vocabulary, (rows, seq)).astype("int32")
    middle = seq // 2
    token_ids[:, 0], token_ids[:, middle], token_ids[:, -1] = CLS, SEP, SEP
    segment_ids = np.zeros((rows, seq), "int32")
    segment_ids[:, middle + 1:] = 1
    padding_mask = np.ones((rows, seq), "int32")
    candidates = np.array([i for i in range(1, seq - 1) if i != middle])
    mask_positions = np.sort(
        np.stack([rng.choice(candidates, masked, replace=False) for _ in range(rows)]), axis=1
    ).astype("int32")
    mask_ids = np.take_along_axis(token_ids, mask_positions, axis=1).astype("int32")
    np.put_along_axis(token_ids, mask_positions, MASK, axis=1)
    return {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "mask_positions": mask_positions,
        "mask_ids": mask_ids,
        "mask_weights": np.ones((rows, masked), "float32"),
        "nsp_labels": rng.integers(0, 2, (rows,)).astype("int32"),
    }


# === Workers (one system on one backend, in a subprocess) ===


def marks(args):
    """The steps at whose start the clock is read: the end of the warm-up,
    then every `steps` steps. One more step follows the last mark, so that
    no timed interval includes the end of `fit` (its end-of-epoch state
    sync and metric results take up to seconds on TensorFlow and JAX)."""
    return [args.warmup + i * args.steps for i in range(args.repeats + 1)]


def total_steps(args):
    return marks(args)[-1] + 1


def interval_times(stamps):
    return [b - a for a, b in itertools.pairwise(stamps)]


def step_clock():
    import keras

    class StepClock(keras.callbacks.Callback):
        """Notes the time when the steps in `marks` begin, once every step
        before has finished. Only `on_train_batch_begin`, which Keras calls
        without logs: a callback with `on_train_batch_end` would make fit
        convert every step's logs to Python numbers, a sync per step."""

        def __init__(self, marks):
            super().__init__()
            self.marks = set(marks)
            self.times = []
            self.cpu = []  # process CPU time (all threads) at the same marks
            self.start = None

        def on_train_begin(self, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_begin(self, batch, logs=None):
            if batch in self.marks:
                self.cpu.append(time.process_time())
                self.times.append(time.perf_counter())

    class JaxStepClock(StepClock):
        """On JAX, steps are dispatched asynchronously and the trainer's
        state is not reachable from a callback: reading each step's loss
        (`on_train_batch_end`) waits for the step to finish. That sync costs
        microseconds against steps of a second or more."""

        def on_train_batch_end(self, batch, logs=None):
            float((logs or {}).get("loss", 0.0))

    return JaxStepClock if keras.backend.backend() == "jax" else StepClock


def auto_jit(backend, precision):
    """`--jit auto` for both Keras systems: what kerasbert's pretraining
    tasks compile with under `jit_compile="auto"`
    (`kerasbert.tasks.task.resolve_jit_compile`), Keras's "auto" where that
    leaves it: XLA on TensorFlow and JAX, eager on torch, and on a
    TensorFlow CPU with bfloat16 matrix units TensorFlow's own kernels for
    mixed_bfloat16 (XLA multiplies bfloat16 in float32 there)."""
    import keras

    from kerasbert.tasks.task import resolve_jit_compile

    resolved = resolve_jit_compile("auto", keras.DTypePolicy(precision).compute_dtype)
    return resolved if isinstance(resolved, bool) else backend != "torch"


def keras_worker(args, system):
    import keras
    import numpy as np

    backend = keras.backend.backend()
    jit = {"on": True, "off": False, "auto": auto_jit(backend, args.precision)}[args.jit]
    keras.config.set_dtype_policy(args.precision)
    keras.utils.set_random_seed(0)
    size = {
        "vocabulary_size": args.vocabulary, "num_layers": args.layers, "num_heads": args.heads,
        "hidden_dim": args.hidden, "intermediate_dim": args.intermediate, "dtype": args.precision,
    }
    rows = args.batch * total_steps(args)
    data = make_data(args, rows)
    x = {k: data[k] for k in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    optimizer = keras.optimizers.AdamW(1e-4)

    if system == "keras_hub":
        import keras_hub

        backbone = keras_hub.models.BertBackbone(max_sequence_length=512, **size)
        model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
            jit_compile=jit,
        )
        y, sample_weight = data["mask_ids"], data["mask_weights"]
    else:
        import kerasbert

        encoder = kerasbert.Encoder(**size)
        if system == "kerasbert_electra":
            model = kerasbert.ElectraPretrainer(None, encoder, seed=0)
            x["mask_weights"] = data["mask_weights"]
            y, sample_weight = data["mask_ids"], data["mask_weights"]
        else:
            sentence_task = "nsp" if system == "kerasbert_nsp" else None
            model = kerasbert.BertPretrainer(encoder, sentence_task=sentence_task)
            y, sample_weight = {"mlm": data["mask_ids"]}, {"mlm": data["mask_weights"]}
            if sentence_task:
                y["nsp"] = data["nsp_labels"]
                sample_weight["nsp"] = np.ones((rows,), "float32")
        model.compile(optimizer=optimizer, jit_compile="auto" if args.jit == "auto" else jit)
        if model.jit_compile != jit:
            raise RuntimeError(f"kerasbert's jit_compile='auto' chose {model.jit_compile}, the benchmark {jit}")

    clock = step_clock()(marks(args))
    model.fit(x, y, sample_weight=sample_weight, batch_size=args.batch, epochs=1,
              shuffle=False, verbose=0, callbacks=[clock])
    times, cpu = interval_times(clock.times), interval_times(clock.cpu)
    loss = model.get_metrics_result()["loss"]
    engine = {"tensorflow": "tf kernels", "jax": "eager", "torch": "eager"}[backend]  # without jit
    return {"jit": "xla" if jit and backend != "torch" else ("torch.compile" if jit else engine),
            "seconds": statistics.median(times), "all_seconds": times, "cpu_seconds": cpu,
            "warmup_s": clock.times[0] - clock.start, "loss": float(loss), "params": model.count_params()}


def transformers_worker(args):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=args.vocabulary, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.intermediate,
        max_position_embeddings=512, type_vocab_size=2, hidden_act="gelu",
    )
    model = transformers.BertForMaskedLM._from_config(config, attn_implementation="sdpa")
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.004)
    rows = args.batch * total_steps(args)
    data = make_data(args, rows)
    labels = torch.full((rows, args.seq), -100, dtype=torch.long)
    labels.scatter_(1, torch.from_numpy(data["mask_positions"]).long(),
                    torch.from_numpy(data["mask_ids"]).long())
    batches = []
    for i in range(0, rows, args.batch):
        batches.append({
            "input_ids": torch.from_numpy(data["token_ids"][i:i + args.batch]).long(),
            "token_type_ids": torch.from_numpy(data["segment_ids"][i:i + args.batch]).long(),
            "attention_mask": torch.from_numpy(data["padding_mask"][i:i + args.batch]).long(),
            "labels": labels[i:i + args.batch],
        })
    autocast = args.precision == "mixed_bfloat16"
    gathered = args.system == "transformers_gathered"
    if gathered:
        for i, batch in enumerate(batches):
            rows_ = slice(i * args.batch, (i + 1) * args.batch)
            batch["mask_positions"] = torch.from_numpy(data["mask_positions"][rows_]).long()
            batch["mask_ids"] = torch.from_numpy(data["mask_ids"][rows_]).long()

    def loss_of(batch):
        if not gathered:
            return model(**batch).loss
        inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
        hidden = model.bert(**inputs).last_hidden_state  # (batch, seq, hidden)
        index = batch["mask_positions"][:, :, None].expand(-1, -1, hidden.shape[-1])
        logits = model.cls(torch.gather(hidden, 1, index))  # (batch, masked, vocabulary)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch["mask_ids"].flatten())

    stamps, cpu = [], []
    start = time.perf_counter()
    timed = set(marks(args))
    for step, batch in enumerate(batches):
        if step in timed:
            stamps.append(time.perf_counter())  # torch on CPU: every op has run
            cpu.append(time.process_time())
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    loss = float(loss)
    times, cpu = interval_times(stamps), interval_times(cpu)
    return {"jit": "eager (sdpa)" + (", head at the masked positions" if gathered else ""), "seconds": statistics.median(times), "all_seconds": times,
            "cpu_seconds": cpu,
            "warmup_s": stamps[0] - start,
            "loss": loss, "params": sum(p.numel() for p in model.parameters())}


def worker(args):
    if args.system in TRANSFORMERS:
        result = transformers_worker(args)
    else:
        result = keras_worker(args, args.system)
    print(MARK + json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


# === Driver ===


def summarize(args, runs, jobs):
    """One row per (system, backend): the median over rounds of seq/s (and
    the step time and tokens/s of that median), the largest peak memory,
    and `vs_keras_hub`, the median over rounds of the ratio to KerasHub's
    run on the same backend *in the same round* (the `transformers` rows to
    KerasHub on torch): paired ratios cancel the drift of a shared machine
    from one round to the next. `vs_transformers` and
    `vs_transformers_gathered` are the same against transformers' stock and
    equal-work runs (on torch)."""
    rows = []
    for system, backend in jobs:
        mine = [r for r in runs if r["system"] == system and r["backend"] == backend]
        done = sorted((r for r in mine if "seq_per_s" in r), key=lambda r: r["seq_per_s"])
        if not done:
            rows.append({"system": system, "backend": backend, "error": mine[-1]["error"]})
            continue
        row = {**done[(len(done) - 1) // 2], "rounds": [r["seq_per_s"] for r in done]}
        row["seq_per_s"] = statistics.median(row["rounds"])
        row["ms_per_step"] = args.batch / row["seq_per_s"] * 1e3
        row["tokens_per_s"] = row["seq_per_s"] * args.seq  # every token is real
        row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in done)
        for peer, peer_backend in (("keras_hub", backend), ("transformers", "torch"),
                                   ("transformers_gathered", "torch")):
            ratios = []
            for r in done:
                match = [p for p in runs if p["system"] == peer and p["round"] == r["round"]
                         and p["backend"] == peer_backend and "seq_per_s" in p]
                if match:
                    ratios.append(r["seq_per_s"] / match[0]["seq_per_s"])
            row[f"vs_{peer}_rounds"] = ratios
            row[f"vs_{peer}"] = statistics.median(ratios) if ratios else None
        rows.append(row)
    return rows


CONFIG_FLAGS = ("layers", "hidden", "heads", "intermediate", "vocabulary", "seq", "batch", "masked",
                "warmup", "steps", "repeats", "precision", "jit")


def launch(args, system, backend):
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--system", system]
    for flag in CONFIG_FLAGS:
        command += [f"--{flag}", str(getattr(args, flag))]
    start = time.perf_counter()
    done = subprocess.run(command, check=False, env=worker_environment(backend), capture_output=True, text=True)
    wall = time.perf_counter() - start
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return {**json.loads(line[len(MARK):]), "wall_s": wall}
    noise = ("I0000 ", "W0000 ", "WARNING: All log messages")
    tail = [line for line in (done.stdout + done.stderr).strip().splitlines()
            if not line.startswith(noise)][-15:]
    print(f"  {system} on {backend} failed (exit {done.returncode}):", file=sys.stderr)
    print("\n".join("    " + line for line in tail), file=sys.stderr)
    return {"error": f"exit {done.returncode}", "wall_s": wall}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,keras_hub,transformers",
                        help=f"comma-separated, of {', '.join(SYSTEMS)}")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--intermediate", type=int, default=2048)
    parser.add_argument("--vocabulary", type=int, default=30522)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--masked", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps (compile included)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=1,
                        help="timed runs of --steps steps (in the same fit); the median is reported")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every (system, backend) job this many times, alternating; medians are reported")
    parser.add_argument("--precision", default="float32", choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--jit", default="auto", choices=("auto", "on", "off"),
                        help="Keras jit_compile: auto = XLA on tensorflow/jax, eager on torch")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if min(args.warmup, args.steps, args.repeats, args.rounds) < 1:
        parser.error("--warmup, --steps, --repeats and --rounds must be >= 1")

    if args.seq < 4:
        parser.error("--seq must be >= 4 ([CLS] A [SEP] B [SEP])")
    if args.masked > args.seq - 3:  # positions left besides the 3 special tokens
        print(f"--masked {args.masked} > {args.seq - 3} maskable positions in rows of {args.seq}; "
              f"using {args.seq - 3}", file=sys.stderr)
        args.masked = args.seq - 3
    backends = [b for b in args.backends.split(",") if b]
    systems = [s for s in args.systems.split(",") if s]
    for name, given, allowed in [("backend", backends, BACKENDS), ("system", systems, SYSTEMS)]:
        unknown = set(given) - set(allowed)
        if unknown:
            parser.error(f"unknown {name}(s) {sorted(unknown)}; expected some of {list(allowed)}")
    jobs = [(s, b) for b in backends for s in systems if s not in TRANSFORMERS]
    for system in (s for s in systems if s in TRANSFORMERS):
        if "torch" in backends:
            jobs.append((system, "torch"))
        else:
            print(f"{system} runs only when torch is among --backends", file=sys.stderr)

    print(f"L{args.layers}/H{args.hidden}/A{args.heads}/I{args.intermediate}, vocabulary "
          f"{args.vocabulary}, seq {args.seq}, batch {args.batch}, {args.masked} masked, "
          f"{args.precision}; {args.warmup} warm-up + {args.steps} timed steps x {args.repeats}",
          file=sys.stderr, flush=True)
    runs = []  # one entry per (round, system, backend)
    for round_ in range(args.rounds):
        for system, backend in jobs if round_ % 2 == 0 else jobs[::-1]:
            print(f"  round {round_ + 1}/{args.rounds}: {system} on {backend} ...", file=sys.stderr, flush=True)
            result = {"system": system, "backend": backend, "round": round_, **launch(args, system, backend)}
            if "seconds" in result:
                step = result["seconds"] / args.steps
                result.update(seq_per_s=args.batch / step, ms_per_step=step * 1e3,
                              tokens_per_s=args.batch * args.seq / step)  # every token is real
                busy = sum(result["cpu_seconds"]) / sum(result["all_seconds"])
                print(f"    {result['seq_per_s']:.2f} seq/s ({result['jit']}; timed steps used "
                      f"{busy:.2f} cores; warm-up {result['warmup_s']:.1f} s, process {result['wall_s']:.1f} s)",
                      file=sys.stderr, flush=True)
            runs.append(result)
    results = summarize(args, runs, jobs)

    print()
    print("| system | backend | jit | seq/s | ms/step | tokens/s | vs KerasHub | vs transformers (equal work) "
          "| vs transformers (stock) | peak RSS (MiB) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if "seq_per_s" not in r:
            print(f"| {r['system']} | {r['backend']} | | failed ({r['error']}) | | | | | | |")
            continue
        ratios = " | ".join(f"{r[k]:.2f}" if r.get(k) else "n/a"
                            for k in ("vs_keras_hub", "vs_transformers_gathered", "vs_transformers"))
        print(f"| {r['system']} | {r['backend']} | {r['jit']} | {r['seq_per_s']:.2f} | "
              f"{r['ms_per_step']:.0f} | {r['tokens_per_s']:.0f} | {ratios} | {r['peak_rss_mb']:.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            config = {k: getattr(args, k) for k in CONFIG_FLAGS}
            json.dump({**run_stamp(), "config": config, "results": results, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
