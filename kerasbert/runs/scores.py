"""The validation scores of a fine-tuning run, computed from predictions in
NumPy: GLUE's classification and regression metrics."""

import numpy as np


def log_softmax(logits):
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _pearson(a, b):
    a, b = a - a.mean(), b - b.mean()
    denominator = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator > 0 else 0.0


def _ranks(values):
    """Ranks from 0, ties sharing their average rank (as scipy's rankdata)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    _, group = np.unique(values, return_inverse=True)
    return (np.bincount(group, ranks) / np.bincount(group))[group]


def regression_scores(predictions, targets):
    """Pearson and Spearman correlations (GLUE's STS-B metrics) and the
    mean squared error of predicted scores; a correlation with a constant
    side is 0.

    Examples:
    >>> scores = regression_scores(np.array([0.1, 0.4, 0.2]), np.array([1.0, 3.0, 2.0]))
    >>> round(scores["pearson"], 4), scores["spearman"], round(scores["mean_squared_error"], 4)
    (0.982, 1.0, 3.6033)
    """
    predictions = np.asarray(predictions, np.float64).reshape(-1)
    targets = np.asarray(targets, np.float64).reshape(-1)
    return {
        "pearson": _pearson(predictions, targets),
        "spearman": _pearson(_ranks(predictions), _ranks(targets)),
        "mean_squared_error": float(np.mean((predictions - targets) ** 2)),
    }


def classification_scores(logits, targets):
    """Accuracy, Matthews correlation (CoLA's metric, multi-class by
    Gorodkin's formula), cross-entropy `loss` and, for two classes, the F1
    of class 1 (MRPC's and QQP's metric).

    Examples:
    >>> logits = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 3.0]])
    >>> scores = classification_scores(logits, np.array([0, 1, 1, 1]))
    >>> scores["accuracy"], round(scores["f1"], 4), round(scores["matthews_correlation"], 4)
    (0.75, 0.8, 0.5774)
    """
    logits = np.asarray(logits)
    targets = np.asarray(targets).astype(np.int64).reshape(-1)
    classes = logits.shape[-1]
    predicted = logits.argmax(-1)
    confusion = np.zeros((classes, classes), np.float64)
    np.add.at(confusion, (targets, predicted), 1.0)
    total, correct = confusion.sum(), np.trace(confusion)
    true, guessed = confusion.sum(1), confusion.sum(0)
    denominator = np.sqrt((total ** 2 - (guessed ** 2).sum()) * (total ** 2 - (true ** 2).sum()))
    scores = {
        "accuracy": float(correct / total),
        "matthews_correlation": float((correct * total - (guessed * true).sum()) / denominator)
        if denominator > 0 else 0.0,
        "loss": float(-log_softmax(logits)[np.arange(len(targets)), targets].mean()),
    }
    if classes == 2:
        hits = confusion[1, 1]
        scores["f1"] = float(2 * hits / (true[1] + guessed[1])) if hits else 0.0
    return scores
