"""Weight-decay exclusions for any Keras optimizer, by short variable name."""

import re

import keras

from kerasbert.utils.checks import abbreviated

DEFAULT_EXCLUDED = ("bias", "gamma", "beta")
"""Short variable names kept out of weight decay (and, for LAMB, out of the
layer-wise trust ratio): Dense and head biases, LayerNorm scale and offset."""


def check_names(name, value):
    """A sequence of variable short names, as a tuple (None -> ())."""
    if value is None:
        return ()
    if isinstance(value, str):
        raise TypeError(
            f"{name} must be a sequence of variable names such as ('bias', 'gamma', 'beta'), not a single "
            f"string; got {value!r}. Write ({value!r},) for one name."
        )
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(
            f"{name} must be a sequence of variable names such as ('bias', 'gamma', 'beta'), or None; "
            f"got {abbreviated(value)}."
        ) from None
    for item in names:
        if not isinstance(item, str) or not item:
            raise TypeError(
                f"{name} must hold non-empty strings (short variable names); got {abbreviated(value)}."
            )
    return names


def short_name(variable):
    # A Keras variable's `.name` is already short ("bias"); the TensorFlow
    # variable behind it is named by path ("encoder/dense/bias:0").
    return re.sub(r":\d+$", "", str(variable.name)).rsplit("/", 1)[-1]


def apply_weight_decay_exclusions(optimizer, names=DEFAULT_EXCLUDED):
    """Keeps variables with these short names out of an optimizer's weight decay.

    Works for any Keras optimizer with decoupled weight decay (`AdamW`,
    `Adam(weight_decay=...)`, ...) through its
    `exclude_from_weight_decay(var_names=...)`. Keras matches `var_names` with
    `re.search` against `variable.name`, which is the short name (`"bias"`)
    on JAX and torch but the full path (`"encoder/dense/bias:0"`) on
    TensorFlow; so the names become one anchored pattern that matches the
    last path component exactly on every backend (`"bias"` excludes
    `.../bias` but not `.../pos_bias`).

    This replaces exclusions set earlier through
    `optimizer.exclude_from_weight_decay`. Keras does not save them with the
    optimizer's config: call this again on an optimizer restored by
    `keras.models.load_model` or `from_config`, before training resumes.

    Args:
        optimizer: a `keras.optimizers.Optimizer`.
        names: short variable names to exclude; empty excludes nothing.

    Returns:
        The optimizer, for chaining.

    Examples:
    >>> optimizer = apply_weight_decay_exclusions(
    ...     keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5))
    >>> dense = keras.layers.Dense(1, bias_initializer="ones")
    >>> dense.build((None, 1))
    >>> _ = dense.kernel.assign([[1.0]])
    >>> zeros = [keras.ops.zeros(v.shape) for v in dense.trainable_variables]
    >>> optimizer.apply(zeros, dense.trainable_variables)
    >>> def values(v):
    ...     return [round(float(x), 6) for x in keras.ops.convert_to_numpy(v).ravel()]
    >>> values(dense.kernel), values(dense.bias)  # kernel: 1 - 0.1 * 0.5
    ([0.95], [1.0])
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(
            f"optimizer must be a keras.optimizers.Optimizer; got {abbreviated(optimizer)}."
        )
    names = check_names("names", names)
    if not names:
        optimizer.exclude_from_weight_decay(var_names=None)
        return optimizer
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = rf"(?:^|/)(?:{alternatives})(?::\d+)?$"
    optimizer.exclude_from_weight_decay(var_names=[pattern])
    return optimizer
