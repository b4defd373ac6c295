"""Activation names accepted by the encoder, one vocabulary for code, JSON and CLI."""

import keras


def _gelu(x):
    # The exact (erf) form, Hugging Face's "gelu".
    return keras.activations.gelu(x, approximate=False)


def _gelu_approximate(x):
    # The tanh approximation, Hugging Face's "gelu_new" / "gelu_pytorch_tanh".
    return keras.activations.gelu(x, approximate=True)


ACTIVATIONS = {
    "gelu": _gelu,
    "gelu_approximate": _gelu_approximate,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
}


def get_activation(name):
    """Returns the function for an activation name, or raises a ValueError."""
    if name not in ACTIVATIONS:
        raise ValueError(
            f"activation={name!r} is not supported; expected one of "
            f"{sorted(ACTIVATIONS)}."
        )
    return ACTIVATIONS[name]
