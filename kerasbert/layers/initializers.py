"""Initializer helpers shared by the layers."""

import contextlib
import contextvars

import keras
import numpy as np

_PLACEHOLDERS = contextvars.ContextVar("kerasbert_placeholder_weights", default=False)


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that layers never share one instance
    (an unseeded Keras initializer called twice returns the same values)."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


@contextlib.contextmanager
def placeholder_weights(enabled=True):
    """Within it (when `enabled`), the weights `TruncatedNormal` initialises
    start as zeros instead of random draws: for building a model whose
    every such weight is assigned right after (a checkpoint being loaded). The draws would
    be thrown away, and on JAX each weight shape compiles its own sampling
    program (0.3-0.5 s each; 3.9 of the 5.4 s that loading MiniLM took).
    Layers' configs still name the truncated normal."""
    token = _PLACEHOLDERS.set(bool(enabled))
    try:
        yield
    finally:
        _PLACEHOLDERS.reset(token)


@keras.saving.register_keras_serializable(package="kerasbert")
class TruncatedNormal(keras.initializers.TruncatedNormal):
    """Keras's truncated normal (within two standard deviations), except
    under `placeholder_weights()`, where it gives zeros without running a
    backend op."""

    def __call__(self, shape, dtype=None):
        if _PLACEHOLDERS.get():
            return np.zeros(shape, "float32")  # the variable casts it to its dtype
        return super().__call__(shape, dtype=dtype)
