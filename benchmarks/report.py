"""Tables and a plot from the benchmarks' JSON files.

    .venv/bin/python benchmarks/report.py [--results benchmarks/results]
        [--plot docs/performance.png]

Reads whichever of these files `--results` holds (each written by the
script named, with `--json`):

* `pretraining_float32.json`, `pretraining_bfloat16.json`:
  `benchmarks/pretraining.py [--precision mixed_bfloat16]`;
* `finetuning.json`, `finetuning_bfloat16.json`: `benchmarks/finetuning.py
  [--precision mixed_bfloat16]`;
* `finetuning_keras_hub.json`: `benchmarks/finetuning.py --systems
  kerasbert,keras_hub,transformers` (KerasHub's `BertTextClassifier`, about
  35 minutes);
* `inference.json`: `benchmarks/inference.py`;
* `question_answering.json`: `benchmarks/question_answering.py` (F1, no
  panel);
* `crf.json`: `benchmarks/crf.py` (epoch times, no panel);

prints one markdown table per file (the figures docs/performance.md shows)
and draws the speed ones side by side, one panel per workload and bars per backend
and system, into the PNG `--plot` (needs matplotlib: `pip install -e
".[bench]"`). A file that is missing leaves its panel saying so.
"""

import argparse
import json
import os

from common import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SYSTEMS = ("kerasbert", "keras_hub", "transformers", "transformers_gathered")
LABELS = {"kerasbert": "kerasbert", "keras_hub": "KerasHub", "transformers": "transformers (torch)",
          "transformers_gathered": "transformers, equal work (torch)"}
COLORS = {"kerasbert": "#1f77b4", "keras_hub": "#ff7f0e", "transformers": "#2ca02c",
          "transformers_gathered": "#98df8a"}
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


def pretraining_table(data):
    lines = ["| system | backend | train step | seq/s | tokens/s | vs KerasHub (same backend) | peak RSS (MiB) |",
             "|---|---|---|---:|---:|---:|---:|"]
    transformers = next((r for r in rows(data) if r["system"] == "transformers"), None)
    for r in rows(data):
        vs = f"{r['vs_keras_hub']:.2f}×" if r.get("vs_keras_hub") else "—"
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {r['jit']} | "
                     f"{r['seq_per_s']:.2f} | {r['tokens_per_s']:.0f} | {vs} | {r['peak_rss_mb']:.0f} |")
    kerasbert = [r for r in rows(data) if r["system"] == "kerasbert"]
    if any(r.get("vs_transformers_gathered") for r in kerasbert):
        lines.append("")
        lines.append("Against transformers (seq/s, median of paired per-round ratios), equal work (its head "
                     "at the masked positions only) / stock (its head at every token): " + ", ".join(
                         f"kerasbert on {r['backend']} {r['vs_transformers_gathered']:.2f}× / "
                         f"{r['vs_transformers']:.2f}×" for r in kerasbert))
    elif transformers:
        lines.append("")
        lines.append("Against transformers (seq/s ratio): " + ", ".join(
            f"kerasbert on {r['backend']} {ratio(r['seq_per_s'], transformers['seq_per_s'])}"
            for r in kerasbert))
    return "\n".join(lines)


def finetuning_table(data):
    lines = [("| system | backend | accuracy | train ex/s | predict ex/s | vs KerasHub (train, predict) | "
             "vs transformers (train, predict) | peak RSS (MiB) |"),
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    results = rows(data)
    reference = next((r for r in results if r["system"] == "transformers"), None)
    for r in results:
        hub = next((h for h in results if h["system"] == "keras_hub" and h["backend"] == r["backend"]), None)
        vs_hub = "—" if not hub or r["system"] == "keras_hub" else (
            f"{ratio(r['train_examples_per_s'], hub['train_examples_per_s'])}, "
            f"{ratio(r['predict_examples_per_s'], hub['predict_examples_per_s'])}")
        paired = r.get("vs_transformers")  # medians of per-round ratios (--rounds)
        vs_hf = "—" if not reference or r is reference else (
            f"{paired['train']:.2f}×, {paired['predict']:.2f}×" if paired else
            f"{ratio(r['train_examples_per_s'], reference['train_examples_per_s'])}, "
            f"{ratio(r['predict_examples_per_s'], reference['predict_examples_per_s'])}")
        peak = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "—"
        lines.append(f"| {LABELS.get(r['system'], r['system'])} | {r['backend']} | {r['accuracy']:.4f} | "
                     f"{r['train_examples_per_s']:.1f} | {r['predict_examples_per_s']:.1f} | {vs_hub} | {vs_hf} | "
                     f"{peak} |")
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


TABLES = {
    "pretraining_float32.json": pretraining_table,
    "pretraining_bfloat16.json": pretraining_table,
    "finetuning.json": finetuning_table,
    "finetuning_bfloat16.json": finetuning_table,
    "inference.json": inference_table,
    "finetuning_keras_hub.json": finetuning_table,
    "question_answering.json": question_answering_table,
    "crf.json": crf_table,
}


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
    args = parser.parse_args()
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
