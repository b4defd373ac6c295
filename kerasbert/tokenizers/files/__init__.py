"""Building a tokenizer from the files of a checkpoint or preset directory.

Accepted, in this order of preference (the first is what transformers' fast
tokenizers themselves run from):

- `tokenizer.json` (the `tokenizers` library's format);
- `vocab.json` + `merges.txt` (byte-level BPE: GPT-2, RoBERTa), with flags
  from `tokenizer_config.json`;
- `vocab.txt` (WordPiece) or a SentencePiece model (`spiece.model`: ALBERT;
  `sentencepiece.bpe.model`: XLM-RoBERTa; `spm.model`: DeBERTa-v2/v3), with
  flags from `tokenizer_config.json` or, in a kerasbert preset directory,
  from the `tokenizer` object of `preset.json`.

`special_tokens_map.json` names the special tokens where
`tokenizer_config.json` has no `added_tokens_decoder`, as in transformers.
"""

import os

from kerasbert.tokenizers.files.byte_pair import byte_pair_arguments, byte_pair_json_arguments
from kerasbert.tokenizers.files.sentence_piece import (
    SENTENCEPIECE_LAYOUTS,
    sentencepiece_arguments,
    sentencepiece_json_arguments,
)
from kerasbert.tokenizers.files.wordpiece import wordpiece_arguments, wordpiece_json_arguments
from kerasbert.utils.io import read_json


def tokenizer_arguments(directory):
    """The tokenizer the files in `directory` describe, as `(class name,
    (args, kwargs))` for its constructor (`Tokenizer.from_preset` builds
    it)."""
    from kerasbert.utils.preset_files import TOKENIZER_FILES, check_preset_files

    check_preset_files(directory, TOKENIZER_FILES)  # against a kerasbert preset's records

    def path(name):
        return os.path.join(directory, name)

    config = _tokenizer_config(directory)
    if os.path.isfile(path("tokenizer.json")):
        return _from_tokenizer_json(read_json(path("tokenizer.json"), "tokenizer.json"), config)
    if os.path.isfile(path("vocab.json")) and os.path.isfile(path("merges.txt")):
        return byte_pair_arguments(path("vocab.json"), path("merges.txt"), config)
    spec = {}
    if os.path.isfile(path("preset.json")):
        spec = read_json(path("preset.json"), "kerasbert preset file").get("tokenizer", {})
    if os.path.isfile(path("vocab.txt")):
        return wordpiece_arguments(path("vocab.txt"), config, spec)
    for layout, entry in SENTENCEPIECE_LAYOUTS.items():
        if os.path.isfile(path(entry["file"])):
            return sentencepiece_arguments(path(entry["file"]), layout, config, spec)
    found = sorted(os.listdir(directory))[:12]
    models = ", ".join(entry["file"] for entry in SENTENCEPIECE_LAYOUTS.values())
    raise FileNotFoundError(
        f"No tokenizer files in {directory} (found {found}); expected "
        f"tokenizer.json, vocab.txt (WordPiece), a SentencePiece model ({models}) or "
        "vocab.json + merges.txt (byte-level BPE)."
    )


def _tokenizer_config(directory):
    """tokenizer_config.json's entries; where it has no
    `added_tokens_decoder`, special_tokens_map.json's entries over them, as
    transformers reads them."""
    config = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and not (name == "special_tokens_map.json" and "added_tokens_decoder" in config):
            config.update(read_json(path, name))
    return config


def _from_tokenizer_json(data, config):
    model = data.get("model") or {}
    kind = model.get("type")
    if kind == "WordPiece":
        return wordpiece_json_arguments(data, model, config)
    if kind == "Unigram":
        return sentencepiece_json_arguments(data, model, config)
    if kind == "BPE":
        return byte_pair_json_arguments(data, model, config)
    raise ValueError(
        f"tokenizer.json uses a {kind!r} model; kerasbert reads WordPiece (BERT), "
        "Unigram (SentencePiece, ALBERT) and byte-level BPE (RoBERTa, ModernBERT) tokenizer.json files."
    )
