"""Checks of what users give `fit`, `evaluate` and `predict`: raw examples,
targets and sample weights, in memory or in a `tf.data` dataset (where the
checks run in the pipeline)."""

import contextlib
import dataclasses
import numbers
import re

import numpy as np

from kerasbert.utils.checks import abbreviated
from kerasbert.utils.features import SEQUENCE, as_array, feature_ranges, indexed, plain
from kerasbert.utils.optional import do_not_convert, is_ragged, is_tensor, tf

# The start of the messages of the pipeline's assertions (`input_errors`).
INPUT_CHECK = "kerasbert input check: "


def check_examples(x, name="x", word_lists=False, pairs=True, datasets=True):
    """Raw in-memory examples: a batch (list, tuple, 1-D array or tensor) of
    strings, a pair `(first, second)` of such batches (with `pairs`), or with
    `word_lists` also a batch of word lists. Checks the container (the
    preprocessor checks the items): a ValueError or TypeError naming `name`
    for None, a single string, numbers, a batch of the wrong rank or an empty
    one. `datasets`: a `tf.data.Dataset` is also taken (said when x is None)."""
    accepted = "a list of strings" + (" or of word lists" if word_lists else "") + (
        ", or a pair (first, second) of them" if pairs else "")
    if pairs and isinstance(x, tuple) and len(x) == 2 and not all(isinstance(v, (str, bytes)) for v in x):
        for i, side in enumerate(x):
            check_examples(side, f"{name}[{i}]", word_lists, pairs=False, datasets=datasets)
        return
    if x is None:
        raise ValueError(f"{name} is None; give {accepted}" + (" (or a tf.data.Dataset)." if datasets else "."))
    rank = x.ndim if isinstance(x, np.ndarray) else x.shape.rank if is_tensor(x) else None
    if isinstance(x, (str, bytes)) or rank == 0:
        raise TypeError(f"{name} must be a batch of examples, not a single string; wrap it: [{name}]. "
                        f"Got {abbreviated(x)}.")
    if not (isinstance(x, (list, tuple, np.ndarray)) or is_tensor(x)):
        hint = " (a set has no order: make it a list)" if isinstance(x, (set, frozenset)) else ""
        raise TypeError(f"{name} must be {accepted}; got {type(x).__name__} {abbreviated(x)}{hint}.")
    dtype = getattr(x, "dtype", None)
    if isinstance(x, np.ndarray) and dtype.kind not in "USO" or is_tensor(x) and dtype != tf.string:
        raise TypeError(f"{name} must hold text ({accepted}); got an array of {dtype.name}. Packed features "
                        "go in a dict (token_ids, padding_mask, ...).")
    if rank is not None and not (rank == 1 or word_lists and rank == 2):
        raise ValueError(f"{name} must be a 1-D batch of strings" + (" or a 2-D batch of words" if word_lists else "")
                         + f"; got an array of shape {tuple(x.shape)}.")
    if len(x) == 0:
        raise ValueError(f"{name} holds no examples; give at least one.")


def check_text_dataset(dataset, name="x"):
    """A `tf.data.Dataset` of raw examples for a preprocessor: its elements
    `x`, `(x, y)` or `(x, y, sample_weight)` with `x` strings, a pair of
    them or packed features (a dict); else a TypeError describing them."""
    spec = dataset.element_spec
    x = spec[0] if isinstance(spec, tuple) and not _is_string_pair(spec) else spec
    if isinstance(x, dict) or _is_string_pair(x):
        return
    if not (isinstance(x, (tf.TensorSpec, tf.RaggedTensorSpec)) and x.dtype == tf.string):
        raise TypeError(f"{name}: the dataset's elements must be text (x, (x, y) or (x, y, sample_weight), x "
                        f"a string, a pair of them or a dict of packed features); they are {abbreviated(spec, 200)}.")


def _is_string_pair(spec):
    return isinstance(spec, tuple) and len(spec) == 2 and all(
        isinstance(s, (tf.TensorSpec, tf.RaggedTensorSpec)) and s.dtype == tf.string for s in spec)


@dataclasses.dataclass(frozen=True)
class Targets:
    """What a task's `y` holds, for `check_targets` and `checked_dataset`.

    Attributes:
        classes: ids are integers in `[0, classes)` (`SEQUENCE`: positions in
            the packed sequence); None: finite numbers.
        what: their name in messages ("class ids", "token ids", ...).
        rank: dimensions of `y`: 1 per example, 2 per position (a trailing
            dimension of 1 is also taken for 1).
        width: numbers: the size of each example's vector (rank 2).
        per_word: `y` holds a list of ids per example, one per word;
            negative ids mark words left out of the loss.
    """

    classes: object = None
    what: str = "class ids"
    rank: int = 1
    width: int | None = None
    per_word: bool = False

    def accepted(self, sequence=None):
        if self.classes is None:
            return f"{self.what}: finite numbers" + (f", {self.width} per example" if self.width else "")
        high = sequence if self.classes == SEQUENCE else self.classes
        bound = f"in [0, {high})" if high is not None else "within the sequence"
        return f"{self.what}: integers {bound}" + (" (negative: left out)" if self.per_word else "")


def _rows(value, name, accepted):
    """Per-example rows of a ragged `value` (a list of lists, an object
    array, a ragged tensor) -> (flat values, the (row, column) of each)."""
    if is_ragged(value):
        value = value.to_list()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must hold one list of {accepted} per example; got {type(value).__name__} "
                        f"{abbreviated(value)}.")
    flat, where = [], []
    for i, row in enumerate(value):
        if isinstance(row, (str, bytes)) or not (isinstance(row, (list, tuple, np.ndarray)) or is_tensor(row)):
            raise TypeError(f"{name}[{i}] must be a list of {accepted}, one per word; got {abbreviated(row)}.")
        row = list(np.asarray(row).tolist() if isinstance(row, np.ndarray) or is_tensor(row) else row)
        flat += row
        where += [(i, j) for j in range(len(row))]
    if any(isinstance(v, (list, tuple)) for v in flat):
        j = next(k for k, v in enumerate(flat) if isinstance(v, (list, tuple)))
        raise TypeError(f"{name}[{where[j][0]}][{where[j][1]}] must be a number; got {abbreviated(flat[j])}.")
    return np.asarray(flat, dtype=object if any(not isinstance(v, numbers.Number) for v in flat) else None), where


def _check_numbers(values, name, what, where=None, shape=None, ids=False):
    """Numbers only, and finite; the first bad value named by its index
    (`ids`: they stand for names, which a message tells to map to ids)."""
    kind = values.dtype.kind
    if kind in "biu":
        return
    if kind != "f":
        flat = values.ravel()
        bad = next((i for i, v in enumerate(flat) if isinstance(v, bool) or not isinstance(v, numbers.Real)), None)
        if bad is None:
            values = flat.astype(np.float64).reshape(values.shape)
        else:
            value = plain(flat[bad])
            hint = " (map names to ids first, e.g. [labels.index(name) for name in names])" \
                if ids and isinstance(value, (str, bytes)) else ""
            raise TypeError(f"{indexed(name, bad, where, shape or values.shape)} must be a number ({what}); got "
                            f"{type(value).__name__} {abbreviated(value)}{hint}.")
    bad = np.flatnonzero(~np.isfinite(values.astype(np.float64).ravel()))
    if bad.size:
        raise ValueError(f"{indexed(name, bad[0], where, shape or values.shape)} is "
                         f"{plain(values.ravel()[bad[0]])!r}; {what} must be finite numbers.")


def check_targets(y, targets, name="y", count=None, sequence=None):
    """In-memory targets `y` as `targets` (a `Targets`, or a dict of them per
    output) describes them: a TypeError or ValueError naming `name` and the
    first bad value, else `y` unchanged. `count`: the examples `y` must have
    (packed features; raw examples are counted by `make_dataset`);
    `sequence`: the packed length, for `SEQUENCE` targets."""
    targets = _single(targets, y)
    if isinstance(targets, dict):
        if not isinstance(y, dict):
            raise TypeError(f"{name} must be a dict with the targets of {sorted(targets)}; got "
                            f"{type(y).__name__} {abbreviated(y)}.")
        missing = sorted(set(targets) - set(y))
        if missing:
            raise ValueError(f"{name} lacks {missing}: it needs {sorted(targets)}.")
        return {k: check_targets(v, targets[k], f"{name}[{k!r}]", count, sequence) if k in targets else v
                for k, v in y.items()}
    accepted = targets.accepted(sequence)
    if y is None:
        raise ValueError(f"{name} is None; training and evaluation need the targets: {accepted}.")
    if isinstance(y, (str, bytes)):
        raise TypeError(f"{name} must hold {accepted}; got a string {abbreviated(y)}.")
    where = None
    if targets.per_word and not (isinstance(y, np.ndarray) and y.dtype != object):
        values, where = _rows(y, name, targets.what)
    else:
        values = as_array(y)
        if values is None:
            return y
        if values.dtype == object and values.ndim != targets.rank:
            raise ValueError(f"{name} must be a rectangular array of {accepted}; got rows of different lengths.")
    shape = values.shape
    if count is not None and where is None and values.ndim and len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries but x has {count} examples.")
    if where is None:
        rank = values.ndim - (values.ndim == targets.rank + 1 and shape[-1] == 1 and targets.width is None)
        if rank != targets.rank or targets.width is not None and shape[-1] != targets.width:
            wanted = ("(examples,)" if targets.rank == 1 else "(examples, positions)") if targets.width is None \
                else f"(examples, {targets.width})"
            hint = f" (one-hot? give the ids: {name}.argmax(-1))" if targets.classes is not None and \
                targets.rank == 1 and values.ndim == 2 else ""
            raise ValueError(f"{name} must have shape {wanted}, {accepted}; got shape {shape}{hint}.")
    _check_numbers(values, name, targets.what, where, shape, ids=targets.classes is not None)
    if where is None and values.ndim == targets.rank + 1 and targets.width is None:
        y = values.reshape(shape[:-1])  # (examples, 1) -> (examples,), as the loss takes it
    if targets.classes is None or values.size == 0:
        return y
    flat = values.astype(np.float64).ravel()
    fractional = np.flatnonzero(flat != np.round(flat))
    if fractional.size:
        raise TypeError(f"{indexed(name, fractional[0], where, shape)}={plain(flat[fractional[0]])!r} is not an "
                        f"integer; {name} must hold {accepted}.")
    if targets.per_word and values.dtype.kind == "f":  # ragged rows of ids are read as integers
        raise TypeError(f"{indexed(name, 0, where, shape)}={plain(flat[0])!r} is a float; {name} must hold "
                        f"{accepted}.")
    high = sequence if targets.classes == SEQUENCE else targets.classes
    low = -np.inf if targets.per_word else 0
    bad = np.flatnonzero((flat < low) | (flat >= (high if high is not None else np.inf)))
    if bad.size:
        raise ValueError(f"{indexed(name, bad[0], where, shape)}={int(flat[bad[0]])} is out of range: {name} must "
                         f"hold {accepted}.")
    return y


def _single(targets, y):
    """The targets of a model with one output, which Keras also takes out of a dict."""
    if isinstance(targets, dict) and len(targets) == 1 and not isinstance(y, dict):
        return next(iter(targets.values()))
    return targets


def check_sample_weight(sample_weight, name="sample_weight", count=None):
    """Weights: finite numbers >= 0 (a NaN or negative weight gives a NaN
    or unbounded loss, and spoils the weights it trains), per example or per
    position, or a dict of them per output; else a ValueError naming the
    first bad one."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, dict):
        return {k: check_sample_weight(v, f"{name}[{k!r}]", count) for k, v in sample_weight.items()}
    values, where = as_array(sample_weight), None
    if values is not None and values.dtype == object:
        values, where = _rows(sample_weight, name, "weights")
    if values is None:
        return sample_weight
    if count is not None and where is None and values.ndim and len(values) != count:
        raise ValueError(f"{name} has {len(values)} entries but x has {count} examples.")
    _check_numbers(values, name, "weights", where, values.shape)
    bad = np.flatnonzero(values.astype(np.float64).ravel() < 0)
    if bad.size:
        value = plain(values.ravel()[bad[0]])
        raise ValueError(f"{indexed(name, bad[0], where, values.shape)}={value!r} is negative; {name} must hold "
                         "weights >= 0.")
    return sample_weight


def checked_dataset(dataset, encoder, names, targets=None):
    """`dataset` of packed features, `(features, y)` or `(features, y,
    sample_weight)` batches with the checks of `check_features`,
    `check_targets` and `check_sample_weight` as assertions in its
    pipeline (on the input threads, not in the model's step); run the model
    on it inside `input_errors()` to get a ValueError. Elements that are
    not packed features pass untouched."""
    spec = dataset.element_spec
    features_spec = spec[0] if isinstance(spec, tuple) else spec
    if not isinstance(features_spec, dict) or "token_ids" not in features_spec:
        return dataset
    ranges = feature_ranges(encoder, names)
    if isinstance(spec, tuple) and len(spec) > 1 and targets is not None:
        _check_target_spec(spec[1], targets)
    limit = encoder.max_sequence_length

    def check(*element):
        features = element[0]
        tokens = features["token_ids"]
        seq = tf.shape(tokens)[-1]
        _assert(seq <= limit, f"x['token_ids'] holds sequences longer than the encoder's max_sequence_length="
                f"{limit} (its position table); sequence length", seq)
        for key, (low, high, what) in ranges.items():
            if key in features:
                _assert_range(features[key], low, seq if high == SEQUENCE else high, f"x[{key!r}] must be {what}")
        if len(element) > 1 and targets is not None:
            _assert_targets(element[1], targets, "y", seq)
        if len(element) > 2:
            for weight in tf.nest.flatten(element[2]):
                _assert_range(weight, 0, np.inf, "sample_weight must hold finite weights >= 0")
        return element if len(element) > 1 else element[0]

    return dataset.map(do_not_convert(check))


def _check_target_spec(spec, targets):
    """The dtypes of a dataset's targets, checked when it is built."""
    targets = _single(targets, spec)
    if isinstance(targets, dict):
        if not isinstance(spec, dict) or set(targets) - set(spec):
            raise ValueError(f"y: the dataset's targets must be a dict with {sorted(targets)}; they are {abbreviated(spec)}.")
        for key, value in targets.items():
            _check_target_spec(spec[key], value)
        return
    dtype = getattr(spec, "dtype", None)
    if dtype is not None and not (dtype.is_integer or dtype.is_floating or dtype == tf.bool):
        raise TypeError(f"y: the dataset's targets must be {targets.accepted()}; they are {dtype.name} "
                        "(map names to ids first).")


def _assert_targets(y, targets, name, seq):
    targets = _single(targets, y)
    if isinstance(targets, dict):
        for key, value in targets.items():
            _assert_targets(y[key], value, f"{name}[{key!r}]", seq)
        return
    if targets.classes is None:
        if y.dtype.is_floating:
            _assert(tf.reduce_all(tf.math.is_finite(y)),
                    f"{name} must hold finite numbers; a batch of the dataset holds NaN or infinite ones")
        return
    sequence = targets.classes == SEQUENCE
    # Per-word targets reach the model as (batch, seq) ids of the labelled words: all in [0, classes).
    _assert_range(y, 0, seq if sequence else targets.classes,
                  f"{name} must hold {targets.what} in [0, {'seq' if sequence else targets.classes})")


def _assert_range(values, low, high, message):
    values = values.flat_values if isinstance(values, tf.RaggedTensor) else values
    values = tf.cast(values, tf.float64)
    ok = tf.reduce_all((values >= low) & (values < tf.cast(high, tf.float64)) & ~tf.math.is_nan(values))
    _assert(ok, message + "; found values from", tf.reduce_min(values), "to", tf.reduce_max(values))


def _assert(condition, message, *data):
    tf.debugging.Assert(condition, [INPUT_CHECK + message, *data])


@contextlib.contextmanager
def input_errors():
    """Runs a model on a `checked_dataset`: a failed check of its pipeline,
    which reaches the caller as a framework error, becomes the ValueError it
    describes."""
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        text = str(error)
        if INPUT_CHECK not in text:
            raise
        found = text.split(INPUT_CHECK, 1)[1].split("\n")[0].replace("\\'", "'")
        parts = [p for p in re.split(r"\]\s*\[", found.rstrip().rstrip("]")) if p]
        message = " ".join(parts).replace("; found values from ", "; a batch of the dataset holds values from ")
        raise ValueError(message.rstrip(". ") + ".") from None
