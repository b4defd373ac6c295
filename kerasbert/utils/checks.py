"""Argument checks shared by the tokenizers, the preprocessing layers, the
tasks and the file helpers.

Each check names the argument, shows the value it got (abbreviated when
long) and says what is accepted, and returns the value in its plain Python
form. Checks of tensor values run only on eager tensors: inside `tf.data`
and `tf.function` graphs, values are not known when the graph is built.
"""

import itertools
import math
import numbers
import os

import numpy as np

from kerasbert.utils.optional import is_ragged, is_tensor, tf

INT32_MAX = 2**31 - 1  # token ids and lengths are int32 tensors


class ArgumentTypeError(TypeError, ValueError):
    """An argument of the wrong type: a TypeError, and a ValueError too, so
    that code catching bad values (`except ValueError`) catches it (as
    NumPy's `AxisError` is both a ValueError and an IndexError)."""


def abbreviated(value, limit=80):
    """`repr(value)`, abbreviated to about `limit` characters; tensors and
    arrays as their type, dtype and shape."""
    if isinstance(value, np.ndarray) or is_tensor(value):
        kind = "NumPy array" if isinstance(value, np.ndarray) else "ragged tensor" if is_ragged(value) else "tensor"
        dtype = getattr(value.dtype, "name", value.dtype)
        return f"a {kind} of {dtype}, shape {tuple(value.shape)}"
    text = repr(value)
    if len(text) > limit:
        size = f", {len(value):,} long" if isinstance(value, (str, bytes, list, tuple)) else ""
        text = f"{text[:limit]}... ({type(value).__name__}{size})"
    return text


def _number(n):
    """2147483647 -> "2**31 - 1": large bounds the way people know them."""
    for k in range(20, 64):
        if n in (2**k, 2**k - 1):
            return f"2**{k}" + (" - 1" if n == 2**k - 1 else "")
    return str(n)


def is_int(value):
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_int(name, value, minimum=None, maximum=None, why="", allow_none=False):
    """An integer in [minimum, maximum] (either bound optional) -> int, or
    None where allowed; an `ArgumentTypeError` for another type (a bool
    included), a ValueError out of bounds.

    >>> check_int("batch_size", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be a positive integer; got 0.
    """
    if value is None and allow_none:
        return None
    if is_int(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return int(value)
    if minimum == 1 and maximum is None:
        accepted = "a positive integer"
    elif minimum is not None and maximum is not None and maximum < 2**20:  # bounds at a human scale
        accepted = f"an integer in [{minimum}, {maximum}]"
    else:
        bounds = [f">= {minimum}"] * (minimum is not None) + [f"<= {_number(maximum)}"] * (maximum is not None)
        accepted = "an integer" + (" " + " and ".join(bounds) if bounds else "")
    accepted = f"{accepted} or None" if allow_none else accepted
    error = ValueError if is_int(value) else ArgumentTypeError
    raise error(f"{name} must be {accepted}{why}; got {abbreviated(value)}.")


def check_id(name, value, vocabulary_size=None, allow_none=False):
    """A token id: an integer in [0, vocabulary_size) (or the int32 range)."""
    maximum = INT32_MAX if vocabulary_size is None else vocabulary_size - 1
    why = " (a token id)" if vocabulary_size is None else f" (a token id of the vocabulary of {vocabulary_size})"
    return check_int(name, value, 0, maximum, why, allow_none)


def check_ids(name, values, vocabulary_size=None):
    """A list of token ids -> list of int."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple, set, frozenset, range)):
        raise TypeError(f"{name} must be a list of token ids (integers); got {abbreviated(values)}.")
    return [check_id(f"{name}[{i}]", v, vocabulary_size) for i, v in enumerate(values)]


def check_number(name, value, low=-math.inf, high=math.inf, why="", low_open=False, high_open=False,
                 allow_none=False):
    """A finite real number in [low, high] -> float (an end left out where
    `*_open`), or None where allowed; an `ArgumentTypeError` for another
    type (a bool included), a ValueError for NaN, an infinity or a number
    out of bounds.

    >>> check_number("beta_1", 1.0, 0, 1, high_open=True)
    Traceback (most recent call last):
    ...
    ValueError: beta_1 must be a number in [0, 1); got 1.0.
    """
    if value is None and allow_none:
        return None
    real = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if real and math.isfinite(value) and (value > low if low_open else value >= low) \
            and (value < high if high_open else value <= high):
        return float(value)
    if (low, high) == (-math.inf, math.inf):
        accepted = "a finite number"
    elif high == math.inf:
        accepted = f"a number {'>' if low_open else '>='} {low:g}"
    elif low == -math.inf:
        accepted = f"a number {'<' if high_open else '<='} {high:g}"
    else:
        accepted = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    accepted = f"{accepted} or None" if allow_none else accepted
    error = ValueError if real else ArgumentTypeError
    raise error(f"{name} must be {accepted}{why}; got {abbreviated(value)}.")


def check_bool(name, value, allow_none=False):
    """True or False (or None where allowed) -> bool or None."""
    if value is None and allow_none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        accepted = "True, False or None" if allow_none else "True or False"
        raise TypeError(f"{name} must be {accepted}; got {abbreviated(value)}.")
    return bool(value)


def check_choice(name, value, choices):
    """One of `choices` (strings, or True/False among them), else a
    ValueError.

    >>> check_choice("pooling", "max", ("cls", "mean"))
    Traceback (most recent call last):
    ...
    ValueError: pooling='max'; expected one of ('cls', 'mean').
    """
    # (1 == True: a bool is only accepted where a bool is one of the choices, and the other way round.)
    if any(value is c or value == c and isinstance(value, bool) == isinstance(c, bool) for c in choices):
        return value
    raise ValueError(f"{name}={abbreviated(value)}; expected one of {tuple(choices)}.")


def check_string(name, value, allow_empty=True, what="", allow_bytes=False):
    """A str (or bytes where allowed; non-empty unless allowed), else a
    TypeError; `what` says what the string is (e.g. "text or a word")."""
    if not isinstance(value, (str, bytes) if allow_bytes else str) or (not value and not allow_empty):
        accepted = ("a string" if allow_empty else "a non-empty string") + (f" ({what})" if what else "")
        raise TypeError(f"{name} must be {accepted}; got {abbreviated(value)} ({type(value).__name__}).")
    return value


def check_file(name, path, what="a file"):
    """An existing regular file -> its path as str. A missing file raises
    FileNotFoundError, anything else a TypeError or ValueError."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{name} must be the path of {what}; got {abbreviated(path)}.")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}={path!r}: no such file; expected the path of {what}.")
    if not os.path.isfile(path):
        raise ValueError(f"{name}={path!r} is a directory, not a file; expected the path of {what}.")
    return path


def check_output_directory(name, path):
    """A directory to write into (created if missing) -> its path as str."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"{name} must be a directory path; got {abbreviated(path)}.")
    path = os.fspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{name}={path!r} is a file; expected a directory to write into.")
    return path


def is_eager(tensor):
    """Whether the values of `tensor` (dense or ragged) are known now."""
    values = tensor.flat_values if isinstance(tensor, tf.RaggedTensor) else tensor
    return tf.executing_eagerly() and hasattr(values, "numpy")


def check_id_values(name, ids, vocabulary_size=None):
    """Eager integer tensors (dense or ragged): every value in
    [0, vocabulary_size) (or the int32 range), else a ValueError naming the
    first one outside. Graph tensors pass unchecked."""
    if not is_eager(ids):
        return
    values = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
    values = np.asarray(values.numpy()).reshape(-1)
    limit = INT32_MAX + 1 if vocabulary_size is None else vocabulary_size
    outside = np.flatnonzero((values < 0) | (values >= limit))
    if outside.size:
        where = np.unravel_index(outside[0], ids.shape) if isinstance(ids, tf.Tensor) else None
        at = f" at {tuple(int(i) for i in where)}" if where is not None else ""
        bounds = f"the vocabulary [0, {vocabulary_size})" if vocabulary_size is not None else "[0, 2**31)"
        raise ValueError(
            f"{name} holds the token id {int(values[outside[0]])}{at} ({outside.size} outside in all), "
            f"outside {bounds}."
        )


def token_id_rows(name, ids, vocabulary_size=None):
    """Token ids given as Python or NumPy values: one sequence (a list of
    integers) or a batch of them (a list of lists) -> (ragged int32
    `(batch, None)` tensor, whether one sequence was given). Ids must be
    integers (not bools) in [0, vocabulary_size) (or the int32 range)."""
    accepted = "a list of token ids (integers) or a batch of them (a list of lists)"
    if isinstance(ids, np.ndarray):
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"{name} must be {accepted}; got {abbreviated(ids)}.")
    rows = [row.tolist() if isinstance(row, np.ndarray) else row for row in ids]
    single = not any(isinstance(row, (list, tuple)) for row in rows)
    rows = [rows] if single else rows
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple)):
            raise TypeError(f"{name} mixes token ids and lists of them ({name}[{i}]={abbreviated(row)}); give {accepted}.")
    lengths = [len(row) for row in rows]
    flat = list(itertools.chain.from_iterable(rows))
    values = np.asarray(flat) if flat else np.zeros([0], np.int64)
    limit = INT32_MAX + 1 if vocabulary_size is None else vocabulary_size
    typed = values.dtype.kind in "iu" and values.ndim == 1 and not any(type(v) is bool for v in flat)
    if typed:
        outside = np.flatnonzero((values < 0) | (values >= limit))
    else:
        outside = [k for k, v in enumerate(flat) if not (is_int(v) and 0 <= v < limit)]
    if len(outside):
        k = int(outside[0])
        i = int(np.searchsorted(np.cumsum(lengths), k, side="right"))
        where = f"{name}[{k}]" if single else f"{name}[{i}][{k - sum(lengths[:i])}]"
        value = flat[k]
        if isinstance(value, (list, tuple, np.ndarray)):
            raise ValueError(f"{name} must be {accepted}, not deeper; {where} is {abbreviated(value)}.")
        if not is_int(value):
            raise TypeError(f"{where} must be a token id (an integer); got {abbreviated(value)}.")
        bounds = f"the vocabulary [0, {vocabulary_size})" if vocabulary_size is not None else "[0, 2**31)"
        raise ValueError(f"{where}={value} is outside {bounds}.")
    batch = tf.RaggedTensor.from_row_lengths(
        tf.constant(values.astype(np.int32), shape=[len(flat)]), tf.constant(lengths, tf.int64, shape=[len(rows)])
    )
    return batch, single


def token_ids(name, ids, vocabulary_size=None):
    """Token ids of one sequence (rank 1) or a batch (rank 2): lists, NumPy
    arrays, or integer tensors, dense or ragged -> (ragged int32
    `(batch, None)` tensor, whether one sequence was given). Eager ids must
    be in [0, vocabulary_size) (or the int32 range); ids in a graph pass
    as they are."""
    if isinstance(ids, np.ndarray) and ids.dtype != object:
        if ids.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer token ids; got {abbreviated(ids)}.")
        ids = tf.constant(ids)
    if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
        return token_id_rows(name, ids, vocabulary_size)
    if not ids.dtype.is_integer:
        raise TypeError(f"{name} must hold integer token ids; got {abbreviated(ids)}.")
    if ids.shape.rank not in (1, 2):
        raise ValueError(f"{name} must be one sequence of token ids (rank 1) or a batch of them (rank 2); got {abbreviated(ids)}.")
    check_id_values(name, ids, vocabulary_size)
    single = ids.shape.rank == 1
    batch = ids[None] if single else ids
    batch = batch if isinstance(batch, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(batch)
    return tf.cast(batch, tf.int32).with_row_splits_dtype(tf.int64), single
