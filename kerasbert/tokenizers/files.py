"""Building a tokenizer from the files of a checkpoint or preset directory.

Accepted, in this order of preference (the first is what transformers' fast
tokenizers themselves run from):

- `tokenizer.json` (the `tokenizers` library's format);
- `vocab.txt` (WordPiece), with flags from `tokenizer_config.json` or, in a
  kerasbert preset directory, from the `tokenizer` object of `preset.json`.
"""

import os

from kerasbert.utils.io import read_json


def tokenizer_from_directory(directory):
    def path(name):
        return os.path.join(directory, name)

    config = read_json(path("tokenizer_config.json"), "tokenizer_config.json") if os.path.isfile(
        path("tokenizer_config.json")) else {}
    for name, kind in [("spiece.model", "SentencePiece"), ("vocab.json", "byte-level BPE")]:
        if os.path.isfile(path(name)) and not os.path.isfile(path("vocab.txt")):
            raise ValueError(
                f"{directory} holds a {kind} tokenizer ({name}); kerasbert does not "
                "read SentencePiece or byte-level BPE tokenizers yet (WordPiece only)."
            )
    if os.path.isfile(path("tokenizer.json")):
        return _from_tokenizer_json(read_json(path("tokenizer.json"), "tokenizer.json"), config)
    if os.path.isfile(path("vocab.txt")):
        spec = {}
        if os.path.isfile(path("preset.json")):
            spec = read_json(path("preset.json"), "kerasbert preset file").get("tokenizer", {})
        return _wordpiece(path("vocab.txt"), config, spec)
    found = sorted(os.listdir(directory))[:12]
    raise FileNotFoundError(
        f"No tokenizer files in {directory} (found {found}); expected "
        "tokenizer.json, or vocab.txt (WordPiece)."
    )


def _special_names(config, default):
    names = {}
    for kind, fallback in default.items():
        value = config.get(f"{kind}_token", fallback)
        if isinstance(value, dict):  # serialised AddedToken
            value = value.get("content", fallback)
        names[f"{kind}_token"] = value
    return names


_BERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]", "unk": "[UNK]"}


def _wordpiece(vocab_path, config, spec):
    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    lowercase = config.get("do_lower_case", spec.get("lowercase", True))
    strip_accents = config.get("strip_accents", spec.get("strip_accents"))
    chinese = config.get("tokenize_chinese_chars", spec.get("tokenize_chinese_chars", True))
    names = _special_names(config, _BERT_SPECIALS)
    names["unknown_token"] = names.pop("unk_token")
    return WordPieceTokenizer(
        vocab_path, lowercase=lowercase, strip_accents=strip_accents,
        tokenize_chinese_chars=chinese, **names,
    )


def _component(data, key):
    """A normaliser / pre-tokeniser, unwrapping a one-element Sequence."""
    part = data.get(key)
    if part and part.get("type") == "Sequence":
        inner = part.get("normalizers") or part.get("pretokenizers") or []
        if len(inner) == 1:
            return inner[0]
    return part


def _from_tokenizer_json(data, config):
    model = data.get("model") or {}
    kind = model.get("type")
    if kind == "WordPiece":
        return _wordpiece_from_json(data, model, config)
    raise ValueError(
        f"tokenizer.json uses a {kind!r} model; kerasbert reads WordPiece "
        "tokenizer.json files (and spiece.model / vocab.json + merges.txt)."
    )


def _wordpiece_from_json(data, model, config):
    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    normalizer = _component(data, "normalizer") or {}
    pre_tokenizer = _component(data, "pre_tokenizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise ValueError(
            f"tokenizer.json has a {normalizer.get('type')!r} normalizer; the "
            "WordPiece tokenizer reproduces BertNormalizer."
        )
    if pre_tokenizer.get("type") != "BertPreTokenizer":
        raise ValueError(
            f"tokenizer.json has a {pre_tokenizer.get('type')!r} pre-tokenizer; "
            "the WordPiece tokenizer reproduces BertPreTokenizer."
        )
    vocab = model["vocab"]
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise ValueError("tokenizer.json's WordPiece vocabulary ids are not 0..n-1.")
    names = _special_names(config, _BERT_SPECIALS)
    names["unknown_token"] = model.get("unk_token", names.pop("unk_token"))
    return WordPieceTokenizer(
        [token for token, _ in ordered],
        lowercase=normalizer.get("lowercase", True),
        strip_accents=normalizer.get("strip_accents"),
        clean_text=normalizer.get("clean_text", True),
        tokenize_chinese_chars=normalizer.get("handle_chinese_chars", True),
        suffix_indicator=model.get("continuing_subword_prefix", "##"),
        max_word_length=model.get("max_input_chars_per_word", 100),
        **names,
    )


def write_wordpiece_files(tokenizer, directory):
    """vocab.txt + tokenizer_config.json, loadable by kerasbert and by
    transformers' `AutoTokenizer.from_pretrained`."""
    from kerasbert.utils.io import atomic_file, write_json

    os.makedirs(directory, exist_ok=True)
    with atomic_file(os.path.join(directory, "vocab.txt")) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("".join(token + "\n" for token in tokenizer.vocabulary))
    special = tokenizer.special_tokens
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": tokenizer.lowercase,
            "strip_accents": tokenizer.strip_accents,
            "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
            "unk_token": special["unk"], "cls_token": special["cls"], "sep_token": special["sep"],
            "pad_token": special["pad"], "mask_token": special["mask"],
        },
    )
    return directory
