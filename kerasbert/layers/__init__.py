"""Building blocks of the encoder."""

from kerasbert.layers.activations import ACTIVATIONS, get_activation
from kerasbert.layers.attention import SelfAttention
from kerasbert.layers.embeddings import PositionEmbedding
from kerasbert.layers.heads import MaskedLMHead
from kerasbert.layers.transformer_block import TransformerBlock

__all__ = [
    "ACTIVATIONS",
    "MaskedLMHead",
    "PositionEmbedding",
    "SelfAttention",
    "TransformerBlock",
    "get_activation",
]
