"""kerasbert: one Keras 3 encoder for the BERT family (BERT, ALBERT, RoBERTa,
XLM-RoBERTa, ELECTRA, DistilBERT, DeBERTa-v3, ModernBERT).

`import kerasbert` changes no setting. Where Keras is imported already
(`import keras` first, as isort orders them), it imports the library at
once, registering its classes for `keras.models.load_model`. Otherwise it
imports no framework, and the first read of a public name
(`kerasbert.Encoder`, `kerasbert.tasks`, ...) imports the library: so the
`kerasbert` command answers `--help` at once, and
`kerasbert.prefer_onednn()` can run before Keras imports TensorFlow.

Examples:
>>> import kerasbert
>>> encoder = kerasbert.from_preset("bert_tiny_en_uncased", load_weights=False)
>>> encoder.count_params()
4385920
"""

import sys

from kerasbert.utils.hardware import prefer_onednn

__version__ = "0.1.0"
__all__ = [
    "BertPretrainer",
    "Distiller",
    "ElectraPretrainer",
    "Encoder",
    "MaskedLM",
    "Packer",
    "PresetNotAvailableError",
    "QuestionAnswerer",
    "TextClassifier",
    "TextEmbedder",
    "TokenClassifier",
    "Tokenizer",
    "convert",
    "distill",
    "finetune",
    "from_preset",
    "get_preset",
    "layers",
    "list_presets",
    "losses",
    "metrics",
    "optimizers",
    "prefer_onednn",
    "preprocessing",
    "pretrain",
    "readers",
    "save_to_preset",
    "tasks",
    "tokenizers",
]


_SUBPACKAGES = ("convert", "layers", "losses", "metrics", "optimizers", "preprocessing", "readers", "tasks",
                "tokenizers")


def _import_library():
    """Imports the public API into this module's namespace."""
    import importlib

    for name in _SUBPACKAGES:
        importlib.import_module(f"kerasbert.{name}")  # the import system binds it here
    # (Bound below through locals(), which ruff cannot see.)
    from kerasbert.encoder import Encoder  # noqa: F401
    from kerasbert.preprocessing import Packer  # noqa: F401
    from kerasbert.presets import (  # noqa: F401
        PresetNotAvailableError,
        from_preset,
        get_preset,
        list_presets,
        save_to_preset,
    )
    from kerasbert.runs.distillation import distill  # noqa: F401
    from kerasbert.runs.finetuning import finetune  # noqa: F401
    from kerasbert.runs.pretraining import pretrain  # noqa: F401
    from kerasbert.tasks import (  # noqa: F401
        BertPretrainer,
        Distiller,
        ElectraPretrainer,
        MaskedLM,
        QuestionAnswerer,
        TextClassifier,
        TextEmbedder,
        TokenClassifier,
    )
    from kerasbert.tokenizers import Tokenizer  # noqa: F401

    globals().update({name: value for name, value in locals().items() if name in __all__})


def __getattr__(name):
    if name not in __all__:
        raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")
    _import_library()
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))


if "keras" in sys.modules:
    _import_library()
