"""Tokenizers as Keras preprocessing layers (TensorFlow ops), identical to
transformers' fast tokenizers, and training of new vocabularies."""

from kerasbert.tokenizers.base import Tokenizer
from kerasbert.tokenizers.byte_pair import BytePairTokenizer
from kerasbert.tokenizers.sentence_piece import SentencePieceTokenizer
from kerasbert.tokenizers.training import (
    train_bpe,
    train_sentencepiece,
    train_wordpiece,
)
from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

__all__ = [
    "BytePairTokenizer",
    "SentencePieceTokenizer",
    "Tokenizer",
    "WordPieceTokenizer",
    "train_bpe",
    "train_sentencepiece",
    "train_wordpiece",
]
