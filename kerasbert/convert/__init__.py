"""Checkpoint conversion between kerasbert and other libraries."""

from kerasbert.convert.huggingface import (
    encoder_config_from_huggingface,
    huggingface_config,
    load_huggingface_encoder,
    to_huggingface,
)

__all__ = [
    "encoder_config_from_huggingface",
    "huggingface_config",
    "load_huggingface_encoder",
    "to_huggingface",
]
