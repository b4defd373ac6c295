"""Entity scores against seqeval; SQuAD scores on hand-worked cases that pin
the behaviour of the official evaluate-v1.1.py / evaluate-v2.0.py scripts."""

import pathlib

import numpy as np
import pytest
from helpers import tensorflow_pass_only
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities

from kerasbert.metrics import entity_scores, entity_spans, exact_match, f1, normalize_answer, squad_scores
from kerasbert.readers import Answer, SquadExample, read_squad

# Plain Python and TensorFlow preprocessing: the same on every Keras backend, so
# checked once, in the tensorflow pass of the suite.
pytestmark = tensorflow_pass_only

DATA = pathlib.Path(__file__).parent / "data"
TYPES = ("PER", "LOC", "ORG", "MISC")


def random_tags(rng, length):
    """IOB2, IOB1 or IOBES-looking tags, often malformed (I- after O, type
    changes inside an entity, E- without B-)."""
    style = rng.integers(4)
    prefixes = {0: "BI", 1: "I", 2: "BIES", 3: "BIES"}[int(style)]
    tags = []
    for _ in range(length):
        if rng.random() < 0.35:
            tags.append("O")
        elif style == 0 and tags and tags[-1] != "O" and rng.random() < 0.7:
            tags.append("I-" + tags[-1][2:])  # mostly well-formed IOB2
        else:
            tags.append(f"{rng.choice(list(prefixes))}-{rng.choice(TYPES)}")
    return tags


def perturb(rng, tags):
    """A prediction: the truth with some tags replaced, so that some entities match."""
    return [random_tags(rng, 1)[0] if rng.random() < 0.2 else tag for tag in tags]


def test_entity_spans_match_seqeval_get_entities():
    rng = np.random.default_rng(0)
    for _ in range(800):
        tags = random_tags(rng, int(rng.integers(0, 16)))
        # seqeval's end is inclusive, ours exclusive.
        expected = [(type_, start, end + 1) for type_, start, end in get_entities(tags)]
        assert entity_spans(tags) == expected, tags


def test_entity_scores_match_seqeval():
    rng = np.random.default_rng(1)
    for _ in range(60):
        true = [random_tags(rng, int(rng.integers(1, 12))) for _ in range(int(rng.integers(1, 6)))]
        predicted = [perturb(rng, sentence) for sentence in true]
        scores = entity_scores(true, predicted)
        for name, reference in [("precision", precision_score), ("recall", recall_score), ("f1", f1_score)]:
            assert scores[name] == pytest.approx(reference(true, predicted, zero_division=0)), name
        report = classification_report(true, predicted, output_dict=True, zero_division=0)
        report = {k: v for k, v in report.items() if not k.endswith(" avg")}
        assert set(scores["per_type"]) == set(report)
        for type_, expected in report.items():
            got = scores["per_type"][type_]
            assert got["support"] == expected["support"]
            for ours, theirs in [("precision", "precision"), ("recall", "recall"), ("f1", "f1-score")]:
                assert got[ours] == pytest.approx(expected[theirs]), (type_, ours)


def test_entity_scores_counts_an_entity_once_per_sentence():
    # Same span in two sentences: two entities, not one.
    scores = entity_scores([["B-PER"], ["B-PER"]], [["B-PER"], ["O"]])
    assert (scores["precision"], scores["recall"]) == (1.0, 0.5)
    assert entity_scores([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "per_type": {}}


def test_entity_errors_name_the_problem():
    with pytest.raises(ValueError, match="2 sentences but predicted_tags has 1"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="Sentence 1 has 2 tags in true_tags but 1"):
        entity_scores([["O"], ["O", "B-PER"]], [["O"], ["O"]])
    with pytest.raises(TypeError, match="sentence 0 is a string"):
        entity_scores(["B-PER"], ["B-PER"])
    with pytest.raises(ValueError, match="'PER' is not an IOB/IOBES tag"):
        entity_spans(["O", "PER"])


# --- SQuAD -----------------------------------------------------------------
# Each case pins one step of the official scripts' normalize_answer / f1_score.

@pytest.mark.parametrize(
    "text, normalized",
    [
        ("Louis AGASSIZ", "louis agassiz"),  # lower()
        ("lead, tin and antimony.", "lead tin and antimony"),  # remove_punc (string.punctuation)
        ("U.S.", "us"),  # punctuation is deleted, not replaced by a space
        ("the-end", "theend"),  # remove_punc runs before remove_articles, so no article is left to drop
        ("The waggle dance", "waggle dance"),  # remove_articles
        ("an apple a day", "apple day"),
        ("theory of anathema", "theory of anathema"),  # articles only as whole words (\b)
        ("  two\n\tthirds  ", "two thirds"),  # white_space_fix
        ("«Isbræ» — 1973", "«isbræ» — 1973"),  # only ASCII punctuation is removed
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match_and_f1_hand_worked():
    assert exact_match("The Matterhorn!", ["Matterhorn"]) == 1.0
    assert exact_match("Matterhorn peak", ["Matterhorn", "the Alps"]) == 0.0
    assert exact_match("mainz", "Mainz") == 1.0  # a single ground-truth string
    # Token F1 after normalisation: [roughly, two, thirds, of, water] vs [two, thirds]: P = 2/5, R = 1.
    assert f1("roughly two thirds of the water", ["two thirds"]) == pytest.approx(2 * 0.4 / 1.4)
    # Common tokens are a multiset intersection (Counter &): "dance dance" vs "dance" shares 1 token.
    assert f1("dance dance", ["dance"]) == pytest.approx(2 / 3)
    assert f1("Aldus", ["Manutius"]) == 0.0
    # The best ground truth counts (max over ground truths).
    assert f1("U", ["a U shape", "U"]) == 1.0
    assert f1("a U shape valley", ["U shape", "valley"]) == pytest.approx(0.8)


def test_v2_empty_answer_rule():
    # evaluate-v2.0.py compute_f1: if either side has no tokens, F1 = (both empty).
    # (evaluate-v1.1.py would give 0 for "" vs "".)
    assert f1("", [""]) == 1.0
    assert f1("The", [""]) == 1.0  # normalises to empty
    assert f1("", ["Mainz"]) == 0.0
    assert f1("Mainz", [""]) == 0.0
    assert exact_match("", [""]) == 1.0
    with pytest.raises(ValueError, match="ground_truths is empty"):
        f1("Mainz", [])


def test_squad_scores_v1():
    examples = read_squad(DATA / "squad_v1_sample.json")
    perfect = {e.id: e.answers[-1].text for e in examples}
    assert squad_scores(perfect, examples) == {"exact_match": 100.0, "f1": 100.0, "total": 11}
    # Two answers changed: one half right, one wrong -> EM 9/11, F1 (9 + 0.5) / 11.
    by_question = {e.question: e.id for e in examples}
    partial = dict(perfect)
    partial[by_question["Which printer popularised italic type?"]] = "Aldus"  # vs "Aldus Manutius": F1 2/3
    partial[by_question["In what year did Karl von Frisch share the Nobel Prize?"]] = "1974"
    scores = squad_scores(partial, examples)
    assert scores["exact_match"] == pytest.approx(100 * 9 / 11)
    assert scores["f1"] == pytest.approx(100 * (9 + 2 / 3) / 11)


def test_squad_scores_v2_groups():
    examples = read_squad(DATA / "squad_v2_sample.json")
    perfect = {e.id: "" if e.is_impossible else e.answers[0].text for e in examples}
    scores = squad_scores(perfect, examples)
    assert scores == {
        "exact_match": 100.0, "f1": 100.0, "total": 13,
        "HasAns_exact_match": 100.0, "HasAns_f1": 100.0, "HasAns_total": 8,
        "NoAns_exact_match": 100.0, "NoAns_f1": 100.0, "NoAns_total": 5,
    }
    # Answering an impossible question scores 0 on it (its only ground truth is "").
    answered = {**perfect, **{e.id: "Aldus Manutius" for e in examples if e.is_impossible}}
    scores = squad_scores(answered, examples)
    assert (scores["NoAns_exact_match"], scores["NoAns_f1"], scores["HasAns_f1"]) == (0.0, 0.0, 100.0)
    assert scores["f1"] == pytest.approx(100 * 8 / 13)


def test_squad_scores_missing_predictions_count_as_zero():
    examples = read_squad(DATA / "squad_v1_sample.json")
    predictions = {e.id: e.answers[0].text for e in examples[:8]}
    predictions["not-a-question"] = "ignored"
    with pytest.warns(UserWarning, match="3 of 11 questions have no prediction"):
        scores = squad_scores(predictions, examples)
    assert scores == {"exact_match": pytest.approx(100 * 8 / 11), "f1": pytest.approx(100 * 8 / 11), "total": 11}


def test_squad_scores_drops_ground_truths_that_normalise_to_nothing():
    # evaluate-v2.0.py: gold_answers = [a for a in answers if normalize_answer(a)] or [''].
    example = SquadExample("q", "t", "Which word?", "say the word", (Answer("the", 4),))
    assert squad_scores({"q": ""}, [example])["exact_match"] == 100.0
    with pytest.raises(TypeError, match=r"predictions\['q'\] must be the answer text"):
        squad_scores({"q": None}, [example])
    with pytest.raises(ValueError, match="examples is empty"):
        squad_scores({}, [])
