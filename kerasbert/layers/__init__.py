"""Building blocks of the encoder."""

from kerasbert.layers.activations import ACTIVATIONS, get_activation
from kerasbert.layers.attention import SelfAttention
from kerasbert.layers.crf import CRF, bio_transition_mask
from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.embeddings import PositionEmbedding
from kerasbert.layers.heads import MaskedLMHead
from kerasbert.layers.pooling import Pooling
from kerasbert.layers.transformer_block import TransformerBlock

__all__ = [
    "ACTIVATIONS",
    "CRF",
    "Dense",
    "Dropout",
    "MaskedLMHead",
    "Pooling",
    "PositionEmbedding",
    "SelfAttention",
    "TransformerBlock",
    "bio_transition_mask",
    "get_activation",
]
