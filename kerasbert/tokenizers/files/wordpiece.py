"""WordPiece's files (BERT): vocab.txt, or tokenizer.json's WordPiece model."""

import os

from kerasbert.tokenizers.files.common import (
    BERT_SPECIALS,
    component,
    constructor_arguments,
    recorded,
    special_entries,
    special_names,
)


def wordpiece_arguments(vocab_path, config, spec):
    lowercase = config.get("do_lower_case", spec.get("lowercase", True))
    strip_accents = config.get("strip_accents", spec.get("strip_accents"))
    chinese = config.get("tokenize_chinese_chars", spec.get("tokenize_chinese_chars", True))
    names = special_names(config, BERT_SPECIALS)
    return "WordPieceTokenizer", constructor_arguments(
        vocab_path, lowercase=lowercase, strip_accents=strip_accents,
        tokenize_chinese_chars=chinese, **names,
    )


def wordpiece_json_arguments(data, model, config):
    normalizer = component(data, "normalizer") or {}
    pre_tokenizer = component(data, "pre_tokenizer") or {}
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
    names = special_names(config, BERT_SPECIALS)
    names["unknown_token"] = model.get("unk_token", names["unknown_token"])
    return "WordPieceTokenizer", constructor_arguments(
        [token for token, _ in ordered],
        lowercase=normalizer.get("lowercase", True),
        strip_accents=normalizer.get("strip_accents"),
        clean_text=normalizer.get("clean_text", True),
        tokenize_chinese_chars=normalizer.get("handle_chinese_chars", True),
        suffix_indicator=model.get("continuing_subword_prefix", "##"),
        max_word_length=model.get("max_input_chars_per_word", 100),
        **names,
    )


@recorded
def write_wordpiece_files(tokenizer, directory):
    """vocab.txt + tokenizer_config.json, loadable by kerasbert and by
    transformers' `AutoTokenizer.from_pretrained`."""
    from kerasbert.utils.io import atomic_file, write_json

    with atomic_file(os.path.join(directory, "vocab.txt")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokenizer.vocabulary))
    special = tokenizer.special_tokens
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": tokenizer.lowercase,
            "strip_accents": tokenizer.strip_accents,
            "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
            **special_entries(special),
        },
    )
    return directory
