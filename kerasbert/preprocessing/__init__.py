"""Preprocessing layers and helpers: packing, masked-LM masking, sentence
pairs for NSP/SOP, length bucketing, packing several documents per row,
raw text -> model inputs, word labels <-> sub-words (NER), question-answering
windows (SQuAD)."""

from kerasbert.preprocessing.alignment import TokenClassificationPreprocessor
from kerasbert.preprocessing.batching import bucket_by_length, padding_fraction
from kerasbert.preprocessing.masking import MaskedLMMasker
from kerasbert.preprocessing.packed_rows import pack_documents
from kerasbert.preprocessing.packer import Packer
from kerasbert.preprocessing.preprocessors import MaskedLMPreprocessor, TextPreprocessor
from kerasbert.preprocessing.pretraining_data import (
    pretraining_dataset,
    pretraining_examples,
)
from kerasbert.preprocessing.sentence_pairs import make_sentence_pairs, read_documents
from kerasbert.preprocessing.squad import (
    QuestionAnsweringPrediction,
    QuestionAnsweringPreprocessor,
    QuestionAnsweringWindows,
    decode_answers,
)

__all__ = [
    "MaskedLMMasker",
    "MaskedLMPreprocessor",
    "Packer",
    "QuestionAnsweringPrediction",
    "QuestionAnsweringPreprocessor",
    "QuestionAnsweringWindows",
    "TextPreprocessor",
    "TokenClassificationPreprocessor",
    "bucket_by_length",
    "decode_answers",
    "make_sentence_pairs",
    "pack_documents",
    "padding_fraction",
    "pretraining_dataset",
    "pretraining_examples",
    "read_documents",
]
