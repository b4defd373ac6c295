"""Initializer helpers shared by the layers."""

import keras


def clone_initializer(initializer):
    """A fresh copy of `initializer`, so that layers never share one instance
    (an unseeded Keras initializer called twice returns the same values)."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
