"""Tables and a plot from the benchmarks' JSON files, and the tables of
README.md and docs/performance.md.

    .venv/bin/python benchmarks/report.py [--results benchmarks/results]
        [--plot docs/performance.png] [--docs]

Reads whichever of these files `--results` holds (each written by the
script named, with `--json`): `pretraining_float32.json`,
`pretraining_bfloat16.json` (`pretraining.py`); `finetuning.json`,
`finetuning_plain_recipe.json`, `finetuning_bfloat16.json`,
`finetuning_keras_hub.json` (`finetuning.py`); `finetuning_recipe.json`
(`finetuning_recipe.py`); `inference.json` (`inference.py`);
`latency.json` (`latency.py`); `loading.json` (`loading.py`);
`question_answering.json` (`question_answering.py`); `crf.json`
(`crf.py`). It prints one markdown table per file and draws the speed ones
side by side, one panel per workload and bars per backend and system, into
the PNG `--plot` (needs matplotlib: `pip install -e ".[bench]"`). A file
that is missing leaves its panel saying so.

`--docs` rewrites every block of README.md and docs/performance.md that
starts with `<!-- report.py: NAME -->` and ends with `<!-- end report.py
-->`: NAME is a results file (a path under `--results`) or `summary`, the
targets table built from several. tests/test_benchmark_report.py checks
that the blocks are what the files give, and that no measured ratio is
written outside them.
"""

import argparse
import json
import os
import re

from common import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMS = ("kerasbert", "keras_hub", "transformers_best", "transformers", "transformers_gathered")
LABELS = {"kerasbert": "kerasbert", "keras_hub": "KerasHub", "transformers": "transformers (torch)",
          "transformers_best": "transformers at its best (torch)",
          "transformers_gathered": "transformers, equal work (torch)"}
COLORS = {"kerasbert": "#1f77b4", "keras_hub": "#ff7f0e", "transformers": "#2ca02c",
          "transformers_best": "#17becf", "transformers_gathered": "#98df8a"}
BACKENDS = ("tensorflow", "jax", "torch")

# (file, panel title, [(field, bar label suffix)], unit)
PANELS = (
    ("pretraining_float32.json", "MLM training, float32", [("seq_per_s", "")], "sequences/s"),
    ("pretraining_bfloat16.json", "MLM training, mixed bfloat16", [("seq_per_s", "")], "sequences/s"),
    ("finetuning.json", "Fine-tuning (Rotten Tomatoes), one epoch, float32",
     [("train_examples_per_s", "")], "examples/s"),
    ("finetuning_bfloat16.json", "Fine-tuning, mixed bfloat16",
     [("train_examples_per_s", "")], "examples/s"),
    ("inference.json", "Inference, batch 32",
     [("predict_examples_per_s", "predict"), ("savedmodel_examples_per_s", "SavedModel")], "examples/s"),
    ("finetuning_keras_hub.json", "Fine-tuning against KerasHub's BertTextClassifier, float32",
     [("train_examples_per_s", "train"), ("predict_examples_per_s", "predict")], "examples/s"),
)


def load(directory, name):
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def rows(data):
    return [r for r in data["results"] if "error" not in r]


def ratio(value, reference):
    return f"{value / reference:.2f}×" if value and reference else "—"


def _versus(r, peer, results, field):
    """r against `peer` on `field`: the median of paired per-round ratios
    where the file has them (with each round's in brackets), else the ratio
    of medians."""
    if r["system"] == peer:
        return "1.00"
    if peer == "keras_hub" and r["system"].startswith("transformers"):
        return "—"  # KerasHub runs on three backends
    paired = r.get(f"vs_{peer}")
    if isinstance(paired, (int, float)):
        rounds = r.get(f"vs_{peer}_rounds") or []
        return f"{paired:.2f}×" + (f" ({', '.join(f'{x:.2f}' for x in rounds)})" if len(rounds) > 1 else "")
    reference = next((p for p in results if p["system"] == peer
                      and (p["backend"] == r["backend"] or peer.startswith("transformers"))), None)
    return ratio(r.get(field), reference and reference.get(field))


def pretraining_table(data):
    results = rows(data)
    peers = [p for p in ("keras_hub", "transformers_gathered", "transformers") if any(r["system"] == p
                                                                                      for r in results)]
    names = {"keras_hub": "vs KerasHub (same backend)", "transformers_gathered": "vs transformers, equal work",
             "transformers": "vs transformers, stock"}
    lines = ["| system | backend | train step | seq/s (rounds) | tokens/s | " + " | ".join(names[p] for p in peers)
             + " | peak RSS (MiB) |", "|---|---|---|---:|---:|" + "---:|" * len(peers) + "---:|"]
    for r in results:
        rounds = r.get("rounds") or []
        speed = f"{r['seq_per_s']:.2f}" + (f" ({', '.join(f'{x:.2f}' for x in rounds)})" if len(rounds) > 1 else "")
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {r['jit']} | {speed} | "
                     f"{r['tokens_per_s']:.0f} | " + " | ".join(_versus(r, p, results, "seq_per_s") for p in peers)
                     + f" | {r['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def finetuning_table(data):
    """One row per (system, backend). Files of --rounds runs with a seed per
    round give accuracy's mean ± standard deviation over the seeds and the
    ratios to each transformers variant as medians of per-round ratios."""
    results = rows(data)
    peers = [p for p in ("transformers_best", "transformers") if any(r["system"] == p for r in results)]
    lines = [("| system | backend | accuracy | train ex/s | predict ex/s | vs KerasHub (train, predict) | "
              + "".join(f"vs {LABELS[p]} (train, predict) | " for p in peers) + "peak RSS (MiB) |"),
             "|---|---|---:|---:|---:|---:|" + "---:|" * len(peers) + "---:|"]
    for r in results:
        hub = next((h for h in results if h["system"] == "keras_hub" and h["backend"] == r["backend"]), None)
        vs_hub = "—" if not hub or r["system"] == "keras_hub" else (
            f"{ratio(r['train_examples_per_s'], hub['train_examples_per_s'])}, "
            f"{ratio(r['predict_examples_per_s'], hub['predict_examples_per_s'])}")
        versus = []
        for peer in peers:
            reference = next(p for p in results if p["system"] == peer)
            paired = r.get(f"vs_{peer}")  # medians of per-round ratios (--rounds)
            versus.append("—" if r is reference or r["system"].startswith("transformers") and not paired else (
                f"{paired['train']:.2f}×, {paired['predict']:.2f}×" if paired else
                f"{ratio(r['train_examples_per_s'], reference['train_examples_per_s'])}, "
                f"{ratio(r['predict_examples_per_s'], reference['predict_examples_per_s'])}"))
        accuracy = (f"{r['accuracy_mean']:.4f} ± {r['accuracy_std']:.4f}" if "accuracy_mean" in r
                    else f"{r['accuracy']:.4f}")
        peak = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "—"
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {accuracy} | "
                     f"{r['train_examples_per_s']:.1f} | {r['predict_examples_per_s']:.1f} | {vs_hub} | "
                     + "".join(f"{v} | " for v in versus) + f"{peak} |")
    if "recipe_settings" in data:
        recipe = data["recipe_settings"]
        lines.append("")
        lines.append(f"Recipe on every side: `{data['recipe']}` (new head at "
                     f"{recipe['head_learning_rate_multiplier']:g}× the learning rate, "
                     f"{recipe['warmup_fraction']:.0%} warmup); {data['rounds']} rounds, seeds "
                     f"{data['seed']}–{data['seed'] + data['rounds'] - 1}; commit {data.get('commit', '?')}.")
    return "\n".join(lines)


def inference_table(data):
    def number(r, key, digits=1):
        value = r.get(key)
        return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "—"

    lines = [("| system | backend | predict ex/s | batch-1 `predict` ms | batch-1 `predict_on_batch` ms | "
             "SavedModel ex/s | SavedModel batch-1 ms | peak RSS (MiB) |"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows(data):
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | "
                     f"{number(r, 'predict_examples_per_s')} | {number(r, 'latency_ms_median')} | "
                     f"{number(r, 'on_batch_latency_ms_median')} | "
                     f"{number(r, 'savedmodel_examples_per_s')} | {number(r, 'savedmodel_latency_ms_median')} | "
                     f"{number(r, 'peak_rss_mb', 0)} |")
    return "\n".join(lines)


def question_answering_table(data):
    def score(r, key):
        return f"{r[key]['mean']:.1f} ± {r[key]['std']:.1f}"

    def versus(r, split):  # the difference to transformers' mean, Welch's 95% interval
        w = r.get(f"{split}_f1_minus_transformers")
        if w is None or w["p"] is None:
            return "—"
        return f"{w['difference']:+.1f} ({w['ci95'][0]:+.1f} to {w['ci95'][1]:+.1f})"

    lines = ["| system | backend | test F1 | test EM | test HasAns F1 | test NoAns F1 | validation F1 | "
             "test F1 − transformers' (95% CI) | validation F1 − transformers' (95% CI) | seeds | train s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows(data):
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {score(r, 'test_f1')} | "
                     f"{score(r, 'test_exact_match')} | {score(r, 'test_HasAns_f1')} | {score(r, 'test_NoAns_f1')} | "
                     f"{score(r, 'validation_f1')} | {versus(r, 'test')} | {versus(r, 'validation')} | "
                     f"{len(r['seeds'])} | {r['train_s']:.0f} |")
    return "\n".join(lines)


def crf_table(data):
    lines = ["| tagger | backend | epoch s | first epoch s | CRF / softmax | vs TensorFlow's CRF |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows(data):
        over = f"{r['crf_over_softmax']:.2f}×" if r.get("crf_over_softmax") else "—"
        vs = f"{r['vs_tensorflow']:.2f}×" if r.get("vs_tensorflow") else "—"
        lines.append(f"| {r['head']} | {r['backend']} | {r['epoch_s']:.2f} | {r['first_epoch_s']:.2f} | {over} | "
                     f"{vs} |")
    return "\n".join(lines)


def loading_table(data):
    """Seconds to a usable MiniLM encoder (benchmarks/loading.py)."""
    lines = ["| system | backend | first load s | second load s | peak RSS (MiB) |", "|---|---|---:|---:|---:|"]
    for r in rows(data):
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {r['first_load_s']:.2f} | "
                     f"{r['second_load_s']:.2f} | {r['peak_rss_mb']:.0f} |")
    lines.append("")
    lines.append(f"{data.get('rounds', 1)} round(s), {data['date']}, commit {data.get('commit') or 'not recorded'}.")
    return "\n".join(lines)


def latency_table(data):
    """Request latency, milliseconds (benchmarks/latency.py)."""
    sizes = data["sizes"]
    lines = ["| system | backend | " + " | ".join(f"{n} string{'s' * (n > 1)}: median / p90 ms | vs transformers' "
                                                  "forward" for n in sizes) + " | peak RSS (MiB) |",
             "|---|---|" + "---:|---:|" * len(sizes) + "---:|"]
    names = {"savedmodel": "kerasbert's SavedModel (TensorFlow alone)", "transformers": "transformers, forward",
             "transformers_pipeline": "transformers, `pipeline`"}
    for r in rows(data):
        cells = []
        for n in sizes:
            vs = r.get(f"{n}_vs_transformers")
            cells.append(f"{r[f'{n}_median_ms']:.1f} / {r[f'{n}_p90_ms']:.1f} | "
                         + ("1.00" if r["system"] == "transformers" else f"{vs:.2f}×" if vs else "—"))
        lines.append(f"| {names.get(r['system'], r['system'])} | {r['backend']} | " + " | ".join(cells)
                     + f" | {r['peak_rss_mb']:.0f} |")
    lines.append("")
    lines.append(f"{data['rounds']} rounds of {data['calls']} requests of each size, {data['date']}, "
                 f"commit {data.get('commit') or 'not recorded'}; a ratio below 1 is faster than transformers.")
    return "\n".join(lines)


def recipe_table(data):
    """Validation accuracy of each recipe setting (benchmarks/finetuning_recipe.py)."""
    best = data["best"]
    lines = ["| new head's learning rate | warmup | validation accuracy (mean ± std) | per seed | chosen |",
             "|---:|---:|---:|---|---|"]
    for r in data["settings"]:
        chosen = all(r[k] == v for k, v in best.items())
        lines.append(f"| {r['head_learning_rate_multiplier']:g}× | {r['warmup_fraction']:.0%} | "
                     f"{r['accuracy_mean']:.4f} ± {r['accuracy_std']:.4f} | "
                     f"{', '.join(f'{a:.4f}' for a in r['accuracies'])} | {'yes' if chosen else ''} |")
    lines.append("")
    lines.append(f"{data['train']:,} training and {data['validation']:,} validation rows carved from the "
                 f"benchmark's training rows, seeds {', '.join(map(str, data['seeds']))}, on {data['backend']}; "
                 f"{data['date']}, commit {data.get('commit', '?')}.")
    return "\n".join(lines)


def roofline_table(data):
    """Useful work per second against the machine's matmul peak (benchmarks/roofline.py)."""
    lines = ["| system | backend | training: useful GFLOP/s | of the peak | prediction: useful GFLOP/s | of the peak |",
             "|---|---|---:|---:|---:|---:|"]
    for r in data["results"]:
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {r['train_useful_gflops']:.1f} | "
                     f"{r['train_of_peak']:.0%} | {r['predict_useful_gflops']:.1f} | {r['predict_of_peak']:.0%} |")
    lines.append("")
    ceilings = "; ".join(f"{LABELS.get(peer, peer)}: training {c['train']:.2f}×, prediction {c['predict']:.2f}×"
                         for peer, c in data["ceiling_vs"].items())
    lines.append(f"Peak: {data['peak_gflops']:.1f} GFLOP/s ({data['peak_kernel']}, float32, from "
                 f"{data['matmul']}); fine-tuning runs from {data['finetuning']} (commit "
                 f"{data.get('finetuning_commit') or 'not recorded'}), {data['machine']}. How far ahead a system "
                 f"doing this work in float32, all of it at that peak, would be (the peak over the peer's useful "
                 f"rate): {ceilings}.")
    return "\n".join(lines)


def lora_table(data):
    """LoRA against full fine-tuning (benchmarks/lora.py)."""
    sweep = ", ".join(f"{s['rate']:g}: {100 * s['accuracy_mean']:.2f}%" for s in data.get("sweep", []))
    lines = ["| fine-tuning | backend | trained parameters | test accuracy % (mean ± sd) | epoch s | step ms | "
             "peak RSS MiB | task preset MB |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in data["results"]:
        name = "full" if r["mode"] == "full" else f"LoRA rank {data['rank']} ({', '.join(data['targets'])})"
        lines.append(f"| {name} | {r['backend']} | {r['trainable_parameters']:,.0f} "
                     f"({100 * r['trainable_share']:.2f}%) | {100 * r['accuracy_mean']:.2f} ± "
                     f"{100 * r['accuracy_std']:.2f} | {r['train_s']:.1f} | {r['step_ms']:.0f} | "
                     f"{r['peak_rss_mb']:.0f} | {r['preset_bytes'] / 1e6:.2f} |")
    lines.append("")
    for r in data["results"]:
        if r["mode"] == "lora":
            lines.append(f"- {r['backend']}: LoRA {100 * r['accuracy_vs_full']:+.2f} points of accuracy; "
                         f"step time {r['step_ms_vs_full']:.2f}×, epoch {r['train_s_vs_full']:.2f}×, peak memory "
                         f"{r['peak_rss_mb_vs_full']:.2f}×, preset size {r['preset_bytes_vs_full']:.3f}× full "
                         "fine-tuning's (medians of per-seed ratios).")
    lines.append("")
    lines.append(f"{len(data['results'][0]['accuracies'])} seeds, {data['date']}, commit "
                 f"{data.get('commit') or 'not recorded'}, {data['machine']}. The adapters' rate, {data['rate']:g}, "
                 f"was chosen on validation rows (validation accuracy by rate: {sweep}); full fine-tuning runs "
                 f"the benchmark's recipe at {data['full_rate']:g}.")
    return "\n".join(lines)


def quantization_table(data):
    """int8 and int4 against float32 (benchmarks/quantization.py)."""
    lines = ["| quantization | backend | test accuracy % (mean ± sd) | vs float32 (points) | labels as float32's | "
             f"{data['timed_rows']} rows s (× float32) | weights MB (× float32) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in data["results"]:
        name = r["mode"] if r["kind"] == "predict" else f"{r['mode']}, SavedModel"
        seconds, ratio = (r["predict_s"], r["predict_s_vs_float32"]) if r["kind"] == "predict" else \
            (r["serve_s"], r["serve_s_vs_float32"])
        size, size_ratio = (r["preset_bytes"], r["preset_bytes_vs_float32"]) if r["kind"] == "predict" else \
            (r["saved_model_bytes"], r["saved_model_bytes_vs_float32"])
        reference = r["mode"] == "float32"
        lines.append(f"| {name} | {r['backend']} | {100 * r['accuracy_mean']:.2f} ± {100 * r['accuracy_std']:.2f} | "
                     + ("— | — | " if reference else f"{100 * r['accuracy_vs_float32']:+.2f} | "
                                                     f"{100 * r['agreement']:.2f}% | ")
                     + f"{seconds:.2f}" + ("" if reference else f" ({ratio:.2f}×)") + f" | {size / 1e6:.1f}"
                     + ("" if reference else f" ({1 / size_ratio:.2f}× smaller)") + " |")
    lines.append("")
    measured = {}
    for r in data["results"]:
        for stamp in r.get("measured", [f"{data['date']} {data.get('commit')}"]):
            measured.setdefault(stamp, set()).add(r["kind"])
    where = "; ".join(f"{' and '.join(sorted(kinds))} rows {stamp.split()[0]}, commit {stamp.split()[1]}"
                      for stamp, kinds in measured.items())
    lines.append(f"{len(data['results'][0]['accuracies'])} seeds ({where}), {data['machine']}. Times are medians of "
                 f"{data['rounds']} alternating rounds over the first {data['timed_rows']} test rows, batches of "
                 f"{data['batch']}; weights are the task preset's weight files (the SavedModel's `variables/`).")
    return "\n".join(lines)


def serving_formats_table(data):
    """The SavedModel, ONNX and LiteRT exports of one classifier
    (benchmarks/serving_formats.py)."""
    lines = [f"| export | runtime | largest difference from predict ({data['snippets']} snippets) | "
             "batch 1 ms (× SavedModel) | batch 32 ms (× SavedModel) |",
             "|---|---|---:|---:|---:|"]
    for r in rows(data):
        latency = []
        for batch in (1, 32):
            cell = f"{r[f'batch{batch}_ms']:.1f}"
            if r["format"] != "SavedModel":
                cell += f" ({r[f'batch{batch}_vs_saved_model']:.2f}×)"
            if f"tokenizer_batch{batch}_ms" in r:
                cell += f", tokenizer {r[f'tokenizer_batch{batch}_ms']:.2f}"
            latency.append(cell)
        lines.append(f"| {r['format']} | {r['backend']} | {r['max_difference']:.1e} | {' | '.join(latency)} |")
    lines += ["", f"{data['preset']} as a 2-class TextClassifier (sequence_length {data['sequence_length']}), the first "
              f"{data['snippets']} Rotten Tomatoes snippets; each export served in a process of its own runtime "
              f"without kerasbert. Medians of {data['rounds']} alternating rounds of {data['calls']} single snippets "
              f"and {max(data['calls'] // 8, 1)} batches of 32; ONNX times include transformers' tokenizer (its own "
              f"time beside). {data['date']}, commit {data['commit']}, {data['machine']}."]
    return "\n".join(lines)


TABLES = {
    "serving_formats.json": serving_formats_table,
    "quantization.json": quantization_table,
    "lora.json": lora_table,
    "pretraining_float32.json": pretraining_table,
    "pretraining_bfloat16.json": pretraining_table,
    "finetuning.json": finetuning_table,
    "finetuning_bfloat16.json": finetuning_table,
    "finetuning_plain_recipe.json": finetuning_table,
    "inference.json": inference_table,
    "finetuning_keras_hub.json": finetuning_table,
    "question_answering.json": question_answering_table,
    "crf.json": crf_table,
    "finetuning_recipe.json": recipe_table,
    "loading.json": loading_table,
    "latency.json": latency_table,
    "roofline.json": roofline_table,
}


def _by_backend(results, system, field):
    """`field` of `system`'s row on each backend, in BACKENDS order."""
    found = {r["backend"]: r.get(field) for r in results if r["system"] == system}
    return [found.get(b) for b in BACKENDS]


def _ratios(values, key=None, digits=2):
    pick = (lambda v: v) if key is None else (lambda v: v and v.get(key))
    return " / ".join(f"{pick(v):.{digits}f}×" if pick(v) else "—" for v in values)


def _met(values, targets, key=None):
    pick = (lambda v: v) if key is None else (lambda v: v and v.get(key))
    measured = [pick(v) for v in values]
    if any(m is None for m in measured):
        return "not measured on every backend"
    missed = [b for b, m, t in zip(BACKENDS, measured, targets) if m < t]
    return "yes" if not missed else "no: " + ", ".join(missed)


def _stamp(data):
    rounds = data.get("rounds") or (data.get("config") or {}).get("rounds")
    return (f"{data['date']}, {data.get('commit') or 'commit not recorded'}"
            + (f", {rounds} rounds" if rounds else ""))


def summary_table(results_directory):
    """The targets and where they stand: one row per measured workload,
    ratios in backend order (tensorflow / jax / torch), each the median of
    per-round ratios to the peer's run in the same round."""
    lines = ["| workload | target | measured (tensorflow / jax / torch) | run | met |", "|---|---|---|---|---|"]
    pretraining = load(results_directory, "pretraining_float32.json")
    if pretraining:
        kerasbert = rows(pretraining)
        run = _stamp(pretraining)
        for field, workload, targets in [
                ("vs_keras_hub", "MLM training, float32, vs KerasHub", (1.25, 1.25, 1.0)),
                ("vs_transformers_gathered", "MLM training, float32, vs transformers doing the same work "
                 "(its head at the masked positions only)", (1.25, 1.25, 1.25)),
                ("vs_transformers", "MLM training, float32, vs transformers' stock `BertForMaskedLM` "
                 "(its head at every position)", None)]:
            values = _by_backend(kerasbert, "kerasbert", field)
            target = "report" if targets is None else " / ".join(f"≥ {t:g}×" for t in targets)
            met = "—" if targets is None else _met(values, targets)
            lines.append(f"| {workload} | {target} | {_ratios(values)} | {run} | {met} |")
    finetuning = load(results_directory, "finetuning.json")
    roofline = load(results_directory, "roofline.json")
    if roofline and roofline.get("finetuning_commit") != (finetuning or {}).get("commit"):
        roofline = None  # computed from other runs
    if finetuning:
        results = rows(finetuning)
        run = _stamp(finetuning)
        for peer, label in [("transformers_best", "transformers at its best (length-grouped training, "
                                                  "length-sorted prediction, `inference_mode`)"),
                            ("transformers", "transformers as it comes (random batches, prediction in order)")]:
            values = _by_backend(results, "kerasbert", f"vs_{peer}")
            if not any(values):
                continue
            best = peer == "transformers_best"
            for kind, target in (("train", 1.25), ("predict", 1.5)):
                work = "training" if kind == "train" else "prediction"
                met = _met(values, (target,) * 3, kind) if best else "—"
                if best and roofline and peer in roofline["ceiling_vs"]:
                    met += f" (equal-work ceiling on this CPU: {roofline['ceiling_vs'][peer][kind]:.2f}×)"
                lines.append(f"| fine-tuning MiniLM, {work}, vs {label} | "
                             f"{f'≥ {target:g}×' if best else 'report'} | {_ratios(values, kind)} | {run} | {met} |")
        reference = next((r for r in results if r["system"] == "transformers_best"), None)
        if reference and "accuracy_mean" in reference:
            error = reference["accuracy_std"] / reference["rounds"] ** 0.5
            mine = [r for r in results if r["system"] == "kerasbert"]
            within = [r["accuracy_mean"] >= reference["accuracy_mean"] - error for r in mine]
            lines.append(
                "| fine-tuning MiniLM, accuracy (mean ± std over the seeds), vs transformers at its best, same "
                "recipe | not below transformers' mean by more than one standard error of it | " + " / ".join(f"{r['accuracy_mean']:.4f} ± {r['accuracy_std']:.4f}"
                                                     for r in mine)
                + f" (transformers {reference['accuracy_mean']:.4f} ± {reference['accuracy_std']:.4f}) | {run} | "
                + ("yes" if all(within) else "no: " + ", ".join(r["backend"] for r, w in zip(mine, within)
                                                                 if not w)) + " |")
    latency = load(results_directory, "latency.json")
    if latency:
        results = rows(latency)
        run = _stamp(latency)
        for n in latency["sizes"]:
            values = _by_backend(results, "kerasbert", f"{n}_vs_transformers")
            measured = " / ".join(f"{v:.2f}×" if v else "—" for v in values)
            met = ("yes" if all(v is not None and v <= 1.0 for v in values) else
                   "no: " + ", ".join(b for b, v in zip(BACKENDS, values) if v is None or v > 1.0))
            lines.append(f"| latency of a request of {n} string{'s' * (n > 1)} through `predict`, vs transformers' "
                         f"tokenizer and forward (below 1: faster) | ≤ 1× | {measured} | {run} | {met} |")
            saved = next((r.get(f"{n}_vs_transformers") for r in results if r["system"] == "savedmodel"), None)
            if saved is not None:
                lines.append(f"| the same through the SavedModel | ≤ 1× | {saved:.2f}× | {run} | "
                             f"{'yes' if saved <= 1.0 else 'no'} |")
    return "\n".join(lines)


GENERATED = {**TABLES, "summary": summary_table}
DOCUMENTS = ("README.md", os.path.join("docs", "performance.md"))
_BLOCK = re.compile(r"(<!-- report\.py: (?P<name>[\w./]+) -->\n)(?P<body>.*?)(<!-- end report\.py -->)", re.S)


def generated(name, results_directory):
    """The text of a generated block: a table of one results file, or the
    summary of several."""
    if name == "summary":
        return summary_table(results_directory)
    data = load(results_directory, name)
    return f"*{name} is missing.*" if data is None else TABLES[os.path.basename(name)](data)


def render(text, results_directory):
    """`text` with every `<!-- report.py: NAME -->` ... `<!-- end report.py
    -->` block filled from the results files."""
    def fill(match):
        if os.path.basename(match["name"]) not in GENERATED:
            raise ValueError(f"unknown report block {match['name']!r}; known: {sorted(GENERATED)}")
        return match[1] + generated(match["name"], results_directory) + "\n" + match[4]

    return _BLOCK.sub(fill, text)


def stale_documents(results_directory, root=ROOT):
    """The documents whose generated blocks differ from what the results
    files give (`--docs` rewrites them)."""
    stale = []
    for name in DOCUMENTS:
        with open(os.path.join(root, name), encoding="utf-8") as f:
            text = f.read()
        if render(text, results_directory) != text:
            stale.append(name)
    return stale


def ungenerated_ratios(text):
    """Measured ratios ("1.23×") outside the generated blocks; targets
    ("≥ 1.25×") are not measurements."""
    outside = _BLOCK.sub("", text)
    return re.findall(r"(?<![≥≤<>] )(?<![≥≤<>])\b\d+\.\d+×", outside)


def bars(axis, data, fields, unit, title):
    """Grouped bars: one group per backend, one bar per (system, field)."""
    if data is not None:  # where and when it ran, as its file records (older files do not)
        title += f"\n{data['machine']}, {data['date']}" if "machine" in data else "\n(machine not recorded)"
    axis.set_title(title, fontsize=10)
    if data is None:
        axis.text(0.5, 0.5, "not measured", ha="center", va="center", transform=axis.transAxes)
        axis.set_xticks([])
        axis.set_yticks([])
        return
    results = rows(data)
    series = [(s, f, suffix) for s in SYSTEMS for f, suffix in fields
              if any(r["system"] == s and r.get(f) for r in results)]
    width = 0.8 / max(len(series), 1)
    for i, (system, field, suffix) in enumerate(series):
        xs, heights = [], []
        for b, backend in enumerate(BACKENDS):
            r = next((r for r in results if r["system"] == system and r["backend"] == backend), None)
            if r and r.get(field):
                xs.append(b - 0.4 + width * (i + 0.5))
                heights.append(r[field])
        label = LABELS[system] + (f", {suffix}" if suffix else "")
        hatch = "//" if (field, suffix) != fields[0] else None  # a system's second bar (SavedModel, predict)
        drawn = axis.bar(xs, heights, width, label=label, color=COLORS[system], hatch=hatch, edgecolor="white")
        axis.bar_label(drawn, fmt="%.1f", fontsize=7)
    axis.set_xticks(range(len(BACKENDS)), [f"{b} backend" for b in BACKENDS], fontsize=8)
    axis.set_ylabel(unit)
    columns = 2 if len(series) > 4 else 1
    entries_per_column = -(-len(series) // columns)
    # headroom: the legend above the tallest bars
    axis.set_ylim(0, axis.get_ylim()[1] * (1.1 + 0.08 * entries_per_column))
    axis.legend(fontsize=7, loc="upper right", ncol=columns)


def plot(loaded, path, plotted_on):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 3
    figure, axes = plt.subplots(-(-len(PANELS) // columns), columns, figsize=(17, 8))
    for axis, (name, title, fields, unit) in zip(axes.flat, PANELS):
        bars(axis, loaded.get(name), fields, unit, title)
    for axis in axes.flat[len(PANELS):]:
        axis.set_visible(False)
    # Each panel is one run of its benchmark, possibly on another machine
    # than this one: its title names the machine its file records.
    figure.suptitle(f"kerasbert, KerasHub and transformers side by side (each panel one run of its benchmark; "
                    f"plotted on {plotted_on})", fontsize=11)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = path + ".partial.png"
    figure.savefig(partial, dpi=110)
    os.replace(partial, path)  # never a half-written plot


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(ROOT, "benchmarks", "results"))
    parser.add_argument("--plot", default=os.path.join(ROOT, "docs", "performance.png"))
    parser.add_argument("--docs", action="store_true",
                        help="rewrite the generated blocks of README.md and docs/performance.md")
    args = parser.parse_args()
    if args.docs:
        for name in DOCUMENTS:
            path = os.path.join(ROOT, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            partial = path + ".partial"
            with open(partial, "w", encoding="utf-8") as f:
                f.write(render(text, args.results))
            os.replace(partial, path)  # never a half-written document
        print(f"rewrote the generated blocks of {', '.join(DOCUMENTS)}")
    loaded = {name: load(args.results, name) for name, *_ in PANELS}
    if not any(loaded.values()):
        parser.error(f"no results in {args.results}: run the benchmarks with --json there first "
                     f"(expected some of {sorted(loaded)})")
    for name, table in TABLES.items():
        data = load(args.results, name)
        if data is not None:
            print(f"### {name}\n\n{table(data)}\n")
    plot(loaded, args.plot, machine())
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
