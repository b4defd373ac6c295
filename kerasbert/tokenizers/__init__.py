"""Tokenizers as Keras preprocessing layers (TensorFlow ops), identical to
transformers' fast tokenizers, and training of new vocabularies."""

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.tokenizers.training import train_wordpiece
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

__all__ = ["Tokenizer", "WordPieceTokenizer", "train_wordpiece"]
