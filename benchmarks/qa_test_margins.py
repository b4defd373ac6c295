"""How far the fast QA learning test (tests/test_question_answering_learns.py)
clears its thresholds: its recipe at several seeds, printing the validation
F1, HasAns F1, NoAns F1, and the AUC (in percent) with which the no-answer
margin (null score - best span score) ranks unanswerable questions above
answerable ones, with the training losses and the seconds each run took.

    KERAS_BACKEND=tensorflow SEEDS=0,3,4 .venv/bin/python benchmarks/qa_test_margins.py

EPOCHS (default 3), LR (default 3e-4), N (training questions, default 256)
and SEEDS (default 0,1,2) change the recipe.
"""

import json
import os
import sys
import tempfile
import time

import keras

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "tools")]

import kjv_squad  # noqa: E402
from helpers import DATA  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.readers import read_squad  # noqa: E402


def split(chapters, name, count, directory):
    """The test's questions: contexts of at most two verses, unanswerable
    questions about names the context never mentions."""
    path = os.path.join(directory, f"{name}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(kjv_squad.build(chapters, name, max_verses=2, unstated_relations=False), f)
    return read_squad(path)[:count]


def ranking_auc(predictions, examples):
    """P(margin of an unanswerable question > margin of an answerable one)."""
    margins = [(p.null_score - p.score, e.is_impossible) for p, e in zip(predictions, examples)]
    unanswerable = [m for m, impossible in margins if impossible]
    answerable = [m for m, impossible in margins if not impossible]
    wins = sum((u > a) + 0.5 * (u == a) for u in unanswerable for a in answerable)
    return 100.0 * wins / (len(unanswerable) * len(answerable))


def main():
    chapters = kjv_squad.read_chapters(os.path.join(DATA, "kjv_documents.txt"))
    with tempfile.TemporaryDirectory() as directory:
        train = split(chapters, "train", int(os.environ.get("N", 256)), directory)
        validation = split(chapters, "validation", 96, directory)
    for seed in (int(s) for s in os.environ.get("SEEDS", "0,1,2").split(",")):
        start = time.perf_counter()
        keras.utils.set_random_seed(seed)
        model = kerasbert.QuestionAnswerer.from_preset("all_minilm_l6_v2", sequence_length=128,
                                                        null_score_threshold=0.0)
        model.compile(learning_rate=float(os.environ.get("LR", 3e-4)), head_learning_rate_multiplier=1.0)
        history = model.fit(train, batch_size=16, epochs=int(os.environ.get("EPOCHS", 3)), verbose=0)
        scores = model.evaluate_squad(validation)
        scores["auc"] = ranking_auc(model.predict_answers(validation), validation)
        print(seed, keras.backend.backend(), {k: round(v, 1) for k, v in scores.items() if "f1" in k or k == "auc"},
              [round(loss, 3) for loss in history.history["loss"]], round(time.perf_counter() - start), flush=True)


if __name__ == "__main__":
    main()
