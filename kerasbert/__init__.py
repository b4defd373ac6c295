"""kerasbert: one Keras 3 encoder for BERT, ALBERT, RoBERTa and ELECTRA.

Examples:
>>> import kerasbert
>>> encoder = kerasbert.from_preset("bert_tiny_en_uncased", load_weights=False)
>>> encoder.count_params()
4385920
"""

# Before anything imports TensorFlow, which reads its oneDNN switch once.
from kerasbert.utils.hardware import prefer_onednn

prefer_onednn()

from kerasbert import convert, layers, losses, metrics, optimizers, preprocessing, readers, tasks, tokenizers
from kerasbert.encoder import Encoder
from kerasbert.finetuning import finetune
from kerasbert.preprocessing import Packer
from kerasbert.presets import (
    PresetNotAvailableError,
    from_preset,
    get_preset,
    list_presets,
    save_to_preset,
)
from kerasbert.pretraining import pretrain
from kerasbert.tasks import (
    BertPretrainer,
    ElectraPretrainer,
    MaskedLM,
    QuestionAnswerer,
    TextClassifier,
    TextEmbedder,
    TokenClassifier,
)
from kerasbert.tokenizers import Tokenizer

__version__ = "0.1.0"
__all__ = [
    "BertPretrainer",
    "ElectraPretrainer",
    "Encoder",
    "MaskedLM",
    "Packer",
    "PresetNotAvailableError",
    "QuestionAnswerer",
    "convert",
    "finetune",
    "from_preset",
    "get_preset",
    "layers",
    "optimizers",
    "preprocessing",
    "pretrain",
    "readers",
    "list_presets",
    "losses",
    "metrics",
    "save_to_preset",
    "tasks",
    "TextClassifier",
    "TextEmbedder",
    "TokenClassifier",
    "Tokenizer",
    "tokenizers",
]
