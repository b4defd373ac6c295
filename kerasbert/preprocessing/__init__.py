"""Preprocessing layers: packing and masked-LM masking."""

from kerasbert.preprocessing.masking import MaskedLMMasker
from kerasbert.preprocessing.packer import Packer

__all__ = ["MaskedLMMasker", "Packer"]
