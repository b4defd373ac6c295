"""Packed features checked against an encoder's tables, in NumPy, before
they reach a backend: ids past the vocabulary or the segment table, or
sequences past the position table, make TensorFlow raise a framework error
and JAX clamp or give NaN, so they are named here first."""

import numpy as np

from kerasbert.utils.checks import abbreviated

# `Targets.classes` and `feature_ranges` bounds for positions within the
# packed sequence.
SEQUENCE = "sequence"


def as_array(value):
    """`value` as a NumPy array, or None when it cannot be read as one
    (a generator, a symbolic tensor...)."""
    if hasattr(value, "ragged_rank"):  # a tf.RaggedTensor
        return None
    try:
        return np.asarray(value)
    except Exception:  # e.g. a torch tensor that needs grad; ragged lists  # noqa: BLE001
        return None


def plain(value):
    """A NumPy scalar as the Python number it holds (for messages)."""
    return value.item() if isinstance(value, np.generic) else value


def indexed(name, flat_index, where, shape):
    """`name[i][j]...` of the value at `flat_index` (`where`: the (row, column)
    of each flat value of a ragged input; else `shape`'s indices)."""
    spot = where[int(flat_index)] if where is not None else np.unravel_index(int(flat_index), shape)
    return name + "".join(f"[{int(i)}]" for i in spot)


def feature_ranges(encoder, names):
    """Per packed feature of `names`: `(low, high, what)`, the values it
    may take (`high` exclusive; `SEQUENCE`: the packed length)."""
    ranges = {"token_ids": (0, encoder.vocabulary_size, "token ids"),
              "segment_ids": (0, max(encoder.num_segments, 1), "segment ids"),
              # 1 marks a token; packed documents number theirs 1, 2, ... (Encoder)
              "padding_mask": (0, 2**31, "0 (padding) or a token's document number (1 for one document)"),
              "mask_positions": (0, SEQUENCE, "positions in the sequence"),
              "mask_weights": (0, np.inf, "weights >= 0")}
    return {name: ranges[name] for name in names if name in ranges}


def check_host_features(inputs, encoder, names, name):
    """`check_features` for a dict of NumPy arrays (features in host memory);
    tensors (traced, or on a device) and other inputs pass as they are."""
    if isinstance(inputs, dict) and inputs and all(isinstance(v, np.ndarray) for v in inputs.values()):
        check_features(inputs, encoder, names, name)


def check_features(features, encoder, names, name="x"):
    """Packed features for a model with inputs `names` on `encoder`: a dict
    holding each of them, `(batch, seq)` integers (`mask_positions` and
    `mask_weights`: `(batch, masked)`) within the encoder's tables, `seq` at
    most its `max_sequence_length`. Lists become arrays; anything else
    wrong is a TypeError or ValueError naming the feature and its first bad
    value. Tensors that NumPy cannot read (symbolic ones) pass unchecked."""
    if not isinstance(features, dict):
        raise TypeError(f"{name} must be packed features, a dict with {list(names)}; got "
                        f"{type(features).__name__} {abbreviated(features)}.")
    missing = [n for n in names if n not in features]
    if missing:
        raise ValueError(f"{name} lacks the features {missing}; the model takes {list(names)} (got "
                         f"{sorted(features)}).")
    features = {k: np.asarray(v) if isinstance(v, (list, tuple)) else v for k, v in features.items()}
    arrays = {k: as_array(features[k]) for k in names}
    if any(a is None for a in arrays.values()):
        return features
    tokens = arrays["token_ids"]
    if tokens.ndim != 2:
        raise ValueError(f"{name}['token_ids'] must be (batch, seq); got shape {tokens.shape}.")
    batch, seq = tokens.shape
    if not 1 <= seq <= encoder.max_sequence_length:
        raise ValueError(f"{name}['token_ids'] holds sequences of {seq} positions; the encoder takes 1 to "
                         f"max_sequence_length={encoder.max_sequence_length} (its position table).")
    masked = arrays.get("mask_positions")
    for key, (low, high, what) in feature_ranges(encoder, names).items():
        array = arrays[key]
        if key in ("mask_positions", "mask_weights"):  # (batch, masked)
            reference, wanted = "mask_positions", (batch, masked.shape[-1] if masked.ndim else 0)
        else:
            reference, wanted = "token_ids", (batch, seq)
        if array.shape != wanted:
            raise ValueError(f"{name}[{key!r}] has shape {array.shape}; it must be {wanted}, as {name}['{reference}'] "
                             "gives.")
        numbers_taken = "biuf" if key in ("padding_mask", "mask_weights") else "biu"
        if array.dtype.kind not in numbers_taken:
            kind = "numbers" if "f" in numbers_taken else "integers"
            raise TypeError(f"{name}[{key!r}] must hold {kind} ({what}); got an array of {array.dtype}.")
        values = array.astype(np.float64)
        top = seq if high == SEQUENCE else high
        bad = np.flatnonzero(~((values >= low) & (values < top) & (np.isfinite(values) | (top == np.inf)))
                             | (key == "padding_mask") & (values != np.round(values)))
        if bad.size:
            value = plain(array.ravel()[bad[0]])
            bound = f"in [{low}, {top})" if top != np.inf else f">= {low}"
            table = {"token_ids": f" (vocabulary_size={top})", "segment_ids": f" (num_segments={encoder.num_segments})"}
            raise ValueError(f"{indexed(f'{name}[{key!r}]', bad[0], None, array.shape)}={value!r} is out of range: "
                             f"{key} must be {what}, {bound}{table.get(key, '')}.")
    return features
