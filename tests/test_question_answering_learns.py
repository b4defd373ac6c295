"""Extractive QA training learns: all-MiniLM-L6-v2 fine-tuned on a few
hundred SQuAD v2.0 questions about the King James Bible
(`tools/kjv_squad.py`), scored on questions about chapters it never saw.
The full comparison with transformers on the same data and recipe is
`benchmarks/question_answering.py`; this is its small, fast version, in the
tensorflow pass. It was the slowest test of the JAX and torch passes (96
and 50 s, against 45 s on TensorFlow, in full runs at 3b4b6b8 and
178bd67, one thread per process), and their question-answering training
is the same `keras.ops` program, whose steps `tests/test_finetuning_tasks.py`
trains and scores on every backend."""

import json
import os
import sys

import keras
import pytest
from helpers import DATA

import kerasbert
from kerasbert.readers import read_squad

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import kjv_squad  # noqa: E402


def squad_split(chapters, split, count, path):
    """The first `count` questions of a split, on contexts of at most two
    verses (one window each), the unanswerable ones about names the context
    never mentions (the benchmark has harder ones too)."""
    data = kjv_squad.build(chapters, split, max_verses=2, unstated_relations=False)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return read_squad(path)[:count]


@pytest.fixture(scope="module")
def kjv_questions(tmp_path_factory):
    root = tmp_path_factory.mktemp("kjv_squad")
    chapters = kjv_squad.read_chapters(os.path.join(DATA, "kjv_documents.txt"))
    return (squad_split(chapters, "train", 256, root / "train.json"),
            squad_split(chapters, "validation", 96, root / "validation.json"))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the tensorflow pass (see the module doc)")
def test_question_answerer_learns_to_find_answers_and_to_abstain(kjv_questions):
    train, validation = kjv_questions
    keras.utils.set_random_seed(0)
    model = kerasbert.QuestionAnswerer.from_preset("all_minilm_l6_v2", sequence_length=128, null_score_threshold=0.0)
    # Without dropout two epochs learn what three epochs with it do (and take a
    # third less of the suite's time).
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    model.compile(learning_rate=3e-4, head_learning_rate_multiplier=1.0)
    before = model.evaluate_squad(validation)
    history = model.fit(train, batch_size=16, epochs=2, verbose=0)
    after = model.evaluate_squad(validation)
    silent = 100.0 * after["NoAns_total"] / after["total"]  # the F1 of never answering
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    # It finds answers (an untrained head does not), it abstains on some
    # questions without one, and it beats never answering by far.
    assert after["HasAns_f1"] > before["HasAns_f1"] + 30, (before, after)
    assert after["NoAns_f1"] > 10 and after["f1"] > silent + 15, (before, after, silent)
