"""Training new vocabularies from plain-text files.

Training uses the reference trainers (Hugging Face `tokenizers`); the files
written load in kerasbert and in transformers alike.
"""

import glob
import os


def _expand(files):
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = []
    for pattern in files:
        matches = sorted(glob.glob(os.fspath(pattern)))
        if not matches:
            raise FileNotFoundError(f"files={pattern!r} matches no file.")
        paths += matches
    return paths


def _check_size(vocabulary_size, minimum):
    if isinstance(vocabulary_size, bool) or not isinstance(vocabulary_size, int) or vocabulary_size < minimum:
        raise ValueError(f"vocabulary_size must be an integer >= {minimum}; got {vocabulary_size!r}.")


def train_wordpiece(
    files,
    vocabulary_size,
    output_dir,
    lowercase=True,
    strip_accents=None,
    tokenize_chinese_chars=True,
    min_frequency=2,
    limit_alphabet=1000,
):
    """Trains a BERT WordPiece vocabulary and returns its tokenizer.

    Args:
        files: a path, a glob pattern, or a list of them: plain-text files.
        vocabulary_size: the number of tokens, special tokens included.
        output_dir: where `vocab.txt` and `tokenizer_config.json` go.
        lowercase, strip_accents, tokenize_chinese_chars: BERT's
            normalisation flags (uncased: lowercase and strip accents).
        min_frequency: pieces seen fewer times are not merged.
        limit_alphabet: the most distinct initial characters kept.

    Returns:
        A `kerasbert.tokenizers.WordPieceTokenizer` reading the new files.
    """
    from tokenizers import BertWordPieceTokenizer

    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    paths = _expand(files)
    _check_size(vocabulary_size, 6)
    trainer = BertWordPieceTokenizer(
        clean_text=True, handle_chinese_chars=tokenize_chinese_chars,
        strip_accents=strip_accents, lowercase=lowercase,
    )
    trainer.train(
        paths, vocab_size=vocabulary_size, min_frequency=min_frequency,
        limit_alphabet=limit_alphabet, show_progress=False,
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
        wordpieces_prefix="##",
    )
    vocabulary = [t for t, _ in sorted(trainer.get_vocab().items(), key=lambda item: item[1])]
    tokenizer = WordPieceTokenizer(
        vocabulary, lowercase=lowercase, strip_accents=strip_accents,
        tokenize_chinese_chars=tokenize_chinese_chars,
    )
    tokenizer.save_to_preset(output_dir)
    return tokenizer
