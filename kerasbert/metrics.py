"""Evaluation metrics: entity-level scores for tagging (seqeval's default
chunking), SQuAD exact match and F1 (the official v1.1/v2.0 scripts), and
the accuracy of predicted tags as a Keras metric."""

import collections
import re
import string
import warnings

import keras
from keras import ops


def split_tag(tag):
    """An IOB/IOBES tag -> (prefix, type): "B-PER" -> ("B", "PER"), "O" -> ("O", None)."""
    if tag == "O":
        return "O", None
    if isinstance(tag, str) and len(tag) > 2 and tag[0] in "BIES" and tag[1] == "-":
        return tag[0], tag[2:]
    raise ValueError(f"Tag {tag!r} is not an IOB/IOBES tag; expected 'O' or B-, I-, E-, S- and a type, like 'B-PER'.")


def entity_spans(tags):
    """The entities in one sentence's tags, as `(type, start, end)` word
    indices with `end` exclusive.

    Chunking follows seqeval's default (non-strict) mode, so IOB1, IOB2 and
    IOBES tags all work and malformed sequences are read leniently: an entity
    continues only through I- or E- tags of its own type right after a B- or
    I- tag; any other tag but O starts a new entity (an I- after O, a type
    change, B-, S-, or anything after E- or S-).

    Examples:
    >>> entity_spans(["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"])
    [('PER', 0, 2), ('LOC', 3, 4), ('LOC', 4, 5), ('ORG', 5, 6)]
    """
    spans, start, previous, previous_type = [], None, "O", None
    for i, tag in enumerate([*tags, "O"]):
        prefix, type_ = split_tag(tag)
        continues = prefix in ("I", "E") and previous in ("B", "I") and type_ == previous_type
        if start is not None and not continues:
            spans.append((previous_type, start, i))
            start = None
        if prefix != "O" and not continues:
            start = i
        previous, previous_type = prefix, type_
    return spans


def _scores(true, predicted):
    hits = len(true & predicted)
    precision = hits / len(predicted) if predicted else 0.0
    recall = hits / len(true) if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def entity_scores(true_tags, predicted_tags):
    """Entity-level precision, recall and F1, as seqeval computes them.

    An entity counts as found only when type, start and end all match.
    Scores with nothing to divide by are 0.

    Args:
        true_tags: a list of sentences, each a list of tags.
        predicted_tags: the same shape.

    Returns:
        A dict with `precision`, `recall` and `f1` (micro-averaged over all
        entities) and `per_type`: {type: {precision, recall, f1, support}},
        where support is the number of true entities of that type.

    Examples:
    >>> scores = entity_scores([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "O"]])
    >>> scores["precision"], scores["recall"], round(scores["f1"], 4), scores["per_type"]["LOC"]["support"]
    (1.0, 0.5, 0.6667, 1)
    """
    if len(true_tags) != len(predicted_tags):
        raise ValueError(
            f"true_tags has {len(true_tags)} sentences but predicted_tags has {len(predicted_tags)}; "
            "they must be the same length."
        )
    true, predicted = set(), set()
    for i, (sentence, prediction) in enumerate(zip(true_tags, predicted_tags)):
        if isinstance(sentence, str) or isinstance(prediction, str):
            raise TypeError(f"true_tags and predicted_tags must be lists of tag lists; sentence {i} is a string.")
        if len(sentence) != len(prediction):
            raise ValueError(
                f"Sentence {i} has {len(sentence)} tags in true_tags but {len(prediction)} in predicted_tags."
            )
        true.update((type_, i, start, end) for type_, start, end in entity_spans(sentence))
        predicted.update((type_, i, start, end) for type_, start, end in entity_spans(prediction))
    per_type = {}
    for type_ in sorted({entity[0] for entity in true | predicted}):
        true_of_type = {entity for entity in true if entity[0] == type_}
        predicted_of_type = {entity for entity in predicted if entity[0] == type_}
        per_type[type_] = {**_scores(true_of_type, predicted_of_type), "support": len(true_of_type)}
    return {**_scores(true, predicted), "per_type": per_type}


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text):
    """SQuAD's answer normalisation: lowercase, drop ASCII punctuation, drop
    the articles a/an/the as whole words, collapse whitespace.

    Examples:
    >>> normalize_answer("The  Matterhorn's peak, (Alps)!")
    'matterhorns peak alps'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _ground_truths(ground_truths):
    if isinstance(ground_truths, str):
        return [ground_truths]
    ground_truths = list(ground_truths)
    if not ground_truths:
        raise ValueError("ground_truths is empty; pass at least one answer ('' for an unanswerable question).")
    return ground_truths


def exact_match(prediction, ground_truths):
    """1.0 if the normalised prediction equals any normalised ground truth
    (a string or a list of strings), else 0.0.

    Examples:
    >>> exact_match("the Matterhorn", ["Matterhorn", "Mont Blanc"])
    1.0
    """
    prediction = normalize_answer(prediction)
    return float(any(prediction == normalize_answer(truth) for truth in _ground_truths(ground_truths)))


def _token_f1(prediction, truth):
    predicted, true = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not predicted or not true:  # the v2.0 rule: empty matches only empty
        return float(predicted == true)
    common = sum((collections.Counter(predicted) & collections.Counter(true)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(true)
    return 2 * precision * recall / (precision + recall)


def f1(prediction, ground_truths):
    """The best token-level F1 between the prediction and any ground truth
    (a string or a list of strings), over normalised whitespace tokens. If
    either side has no tokens, F1 is 1.0 when both are empty, else 0.0.

    Examples:
    >>> f1("a U shape valley", ["U shape"])  # precision 2/3, recall 1
    0.8
    """
    return max(_token_f1(prediction, truth) for truth in _ground_truths(ground_truths))


def squad_scores(predictions, examples):
    """Exact match and F1 over a SQuAD set, in percent, as the official
    evaluation scripts report them.

    An answerable question's ground truths are its answers' texts (those that
    normalise to nothing are dropped, as in the v2.0 script); an impossible
    question's only ground truth is "", so only an empty prediction scores.
    Questions without a prediction score 0 (with a warning); predictions for
    unknown ids are ignored.

    Args:
        predictions: a dict {question id: predicted answer text}.
        examples: the `SquadExample`s (see `kerasbert.readers.read_squad`).

    Returns:
        A dict with `exact_match`, `f1` and `total`; when any example is
        impossible, also `HasAns_exact_match`, `HasAns_f1`, `HasAns_total`,
        `NoAns_exact_match`, `NoAns_f1` and `NoAns_total` (scores of an empty
        group are 0.0).
    """
    examples = list(examples)
    if not examples:
        raise ValueError("examples is empty; squad_scores needs at least one SquadExample.")
    missing = [example.id for example in examples if example.id not in predictions]
    if missing:
        warnings.warn(
            f"{len(missing)} of {len(examples)} questions have no prediction (first: {missing[0]!r}); they score 0.",
            stacklevel=2,
        )
    groups = {"": [], "HasAns_": [], "NoAns_": []}
    for example in examples:
        if example.id not in predictions:
            scores = (0.0, 0.0)
        else:
            prediction = predictions[example.id]
            if not isinstance(prediction, str):
                raise TypeError(f"predictions[{example.id!r}] must be the answer text; got {prediction!r}.")
            truths = [] if example.is_impossible else [a.text for a in example.answers if normalize_answer(a.text)]
            truths = truths or [""]
            scores = (exact_match(prediction, truths), f1(prediction, truths))
        groups[""].append(scores)
        groups["NoAns_" if example.is_impossible else "HasAns_"].append(scores)
    if not groups["NoAns_"]:
        del groups["HasAns_"], groups["NoAns_"]
    result = {}
    for prefix, scores in groups.items():
        total = len(scores)
        result[prefix + "exact_match"] = 100.0 * sum(s[0] for s in scores) / total if total else 0.0
        result[prefix + "f1"] = 100.0 * sum(s[1] for s in scores) / total if total else 0.0
        result[prefix + "total"] = total
    return result


@keras.saving.register_keras_serializable(package="kerasbert")
class TagAccuracy(keras.metrics.Metric):
    """The share of labelled positions whose predicted tag is right, where
    the tags are what the tagger predicts: the argmax of its logits, or what
    `decode` makes of them (a CRF's Viterbi path).

    `update_state(y_true, y_pred, sample_weight)` takes the gold tags
    `(batch, seq)`, the logits `(batch, seq, num_tags)` and the weights
    `(batch, seq)`; positions of weight 0 (sub-words after a word's first,
    padding) are left out, of the count and of `decode`'s mask. (Keras's
    `SparseCategoricalAccuracy` averages each row before weighting rows, a
    different number.)

    Args:
        decode: None (argmax), or a callable `(logits, mask) -> (batch,
            seq)` int tags, e.g. a `kerasbert.layers.CRF`.
        name: the metric's name in logs.

    Examples:
    >>> import numpy as np
    >>> metric = TagAccuracy()
    >>> logits = np.array([[[0.0, 1.0], [2.0, 0.0], [0.0, 3.0]]], "float32")  # tags 1, 0, 1
    >>> metric.update_state(np.array([[1, 1, 0]]), logits, np.array([[1.0, 1.0, 0.0]]))
    >>> float(metric.result())  # 1 of the 2 labelled positions
    0.5
    """

    def __init__(self, decode=None, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self._decode = decode
        self.correct = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="correct")
        self.count = self.add_variable(shape=(), initializer="zeros", dtype="float32", name="count")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(ops.convert_to_tensor(y_true), "int32")
        if len(y_true.shape) == 3:
            y_true = y_true[..., 0]  # (batch, seq)
        if sample_weight is None:
            weight = ops.ones_like(y_true, dtype="float32")
        else:
            weight = ops.reshape(ops.cast(sample_weight, "float32"), ops.shape(y_true))
        if self._decode is None:
            tags = ops.cast(ops.argmax(y_pred, axis=-1), "int32")
        else:
            tags = ops.cast(self._decode(y_pred, ops.greater(weight, 0)), "int32")  # (batch, seq)
        self.correct.assign_add(ops.sum(ops.cast(ops.equal(tags, y_true), "float32") * weight))
        self.count.assign_add(ops.sum(weight))

    def result(self):
        return ops.divide_no_nan(self.correct, self.count)

    def reset_state(self):
        self.correct.assign(0.0)
        self.count.assign(0.0)
