"""Training new vocabularies from plain-text files.

Training uses the reference trainers (Hugging Face `tokenizers`); the files
written load in kerasbert and in transformers alike.
"""

import glob
import os

from kerasbert.utils.checks import abbreviated, check_bool, check_file, check_int, check_number, check_output_directory


def _expand(files):
    """A path, a glob pattern, or a list of them -> the files they match,
    checked: regular files, not all empty."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    if not isinstance(files, (list, tuple)):
        raise TypeError(f"files must be a path, a glob pattern or a list of them; got {abbreviated(files)}.")
    if not files:
        raise ValueError("files=[] names no file; give a path, a glob pattern or a list of them.")
    paths = []
    for i, pattern in enumerate(files):
        if not isinstance(pattern, (str, os.PathLike)):
            raise TypeError(f"files[{i}] must be a path or a glob pattern; got {abbreviated(pattern)}.")
        matches = sorted(glob.glob(os.fspath(pattern)))
        if not matches:
            raise FileNotFoundError(f"files={os.fspath(pattern)!r} matches no file.")
        paths += [check_file("files", path, "a text file") for path in matches]
    if not any(os.path.getsize(path) for path in paths):
        raise ValueError(f"files={abbreviated(paths)} are empty: there is no text to train on.")
    return paths


def _check_options(output_dir, vocabulary_size, minimum, **options):
    """The arguments every trainer shares, and its integer `options`
    (name: (value, minimum)), checked before training starts."""
    check_output_directory("output_dir", output_dir)
    check_int("vocabulary_size", vocabulary_size, minimum)
    for name, (value, least) in options.items():
        check_int(name, value, least)


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
        lowercase: BERT's normalisation flag (uncased: lowercase and strip
            accents).
        strip_accents: BERT's normalisation flag.
        tokenize_chinese_chars: BERT's normalisation flag.
        min_frequency: pieces seen fewer times are not merged.
        limit_alphabet: the most distinct initial characters kept.

    Returns:
        A `kerasbert.tokenizers.WordPieceTokenizer` reading the new files.
    """
    from tokenizers import BertWordPieceTokenizer

    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    paths = _expand(files)
    _check_options(output_dir, vocabulary_size, 6, min_frequency=(min_frequency, 0), limit_alphabet=(limit_alphabet, 1))
    check_bool("lowercase", lowercase)
    check_bool("strip_accents", strip_accents, allow_none=True)
    check_bool("tokenize_chinese_chars", tokenize_chinese_chars)
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
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    # The trainer numbers pieces learnt with equal counts in an arbitrary
    # order (it differs from run to run); ids are made reproducible by
    # sorting the pieces (WordPiece's longest-match ignores ids).
    vocabulary = specials + sorted(set(trainer.get_vocab()) - set(specials))
    tokenizer = WordPieceTokenizer(
        vocabulary, lowercase=lowercase, strip_accents=strip_accents,
        tokenize_chinese_chars=tokenize_chinese_chars,
    )
    tokenizer.save_to_preset(output_dir)
    return tokenizer


def train_sentencepiece(
    files,
    vocabulary_size,
    output_dir,
    lowercase=True,
    strip_accents=True,
    character_coverage=0.9995,
    max_sentences=1_000_000,
    seed=0,
):
    """Trains an ALBERT-style SentencePiece unigram model and returns its
    tokenizer.

    The text is normalised as the tokenizer will normalise it (NFKD and
    accent stripping, lowercasing) before the reference trainer
    (`sentencepiece`) sees it, so that no piece is unreachable. Pieces 0..4
    are ALBERT's `<pad> <unk> [CLS] [SEP] [MASK]`.

    Args:
        files: a path, a glob pattern, or a list of them: plain-text files,
            one sentence or paragraph per line.
        vocabulary_size: the number of pieces, special tokens included.
        output_dir: where `spiece.model`, `tokenizer.json` and
            `tokenizer_config.json` go.
        lowercase: ALBERT's `do_lower_case`.
        strip_accents: ALBERT's `not keep_accents`.
        character_coverage: the share of characters the pieces must cover;
            rarer characters become `<unk>`.
        max_sentences: lines sampled for training (sentencepiece's
            `input_sentence_size`).
        seed: the sampling seed.

    Returns:
        A `kerasbert.tokenizers.SentencePieceTokenizer` reading the new files.
    """
    import tempfile

    import sentencepiece
    from tokenizers import normalizers

    from kerasbert.tokenizers.sentence_piece import SentencePieceTokenizer

    paths = _expand(files)
    _check_options(output_dir, vocabulary_size, 6, max_sentences=(max_sentences, 1))
    check_int("seed", seed, 0, 2**32 - 1)
    check_bool("lowercase", lowercase)
    check_bool("strip_accents", strip_accents)
    # sentencepiece's own bounds (its trainer aborts outside them).
    check_number("character_coverage", character_coverage, 0.98, 1.0)
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if strip_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    normalizer = normalizers.Sequence(steps)
    with tempfile.TemporaryDirectory() as work:
        text = os.path.join(work, "text.txt")
        lines = 0
        with open(text, "w", encoding="utf-8") as out:
            for path in paths:
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        line = normalizer.normalize_str(line.strip())
                        if line:
                            out.write(line + "\n")
                            lines += 1
        if not lines:
            raise ValueError(f"files={abbreviated(paths)} hold only whitespace: there is no text to train on.")
        sentencepiece.set_random_generator_seed(seed)
        sentencepiece.SentencePieceTrainer.train(
            input=text, model_prefix=os.path.join(work, "spiece"), vocab_size=vocabulary_size,
            model_type="unigram", pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
            control_symbols=["[CLS]", "[SEP]", "[MASK]"], character_coverage=character_coverage,
            input_sentence_size=max_sentences, shuffle_input_sentence=True,
            minloglevel=2, num_threads=os.cpu_count() or 1,
        )
        tokenizer = SentencePieceTokenizer(
            os.path.join(work, "spiece.model"), lowercase=lowercase, strip_accents=strip_accents
        )
    tokenizer.save_to_preset(output_dir)
    return tokenizer


def train_bpe(
    files,
    vocabulary_size,
    output_dir,
    min_frequency=2,
    add_prefix_space=False,
    trim_offsets=True,
):
    """Trains a byte-level BPE vocabulary (RoBERTa, GPT-2) and returns its
    tokenizer.

    The vocabulary starts with RoBERTa's special tokens (<s>, <pad>, </s>,
    <unk>, <mask> at ids 0..4) and the 256 byte symbols, so every text can
    be tokenized.

    Args:
        files: a path, a glob pattern, or a list of them: plain-text files.
        vocabulary_size: the number of tokens, special tokens included
            (at least 261).
        output_dir: where `vocab.json`, `merges.txt` and
            `tokenizer_config.json` go.
        min_frequency: pairs seen fewer times are not merged.
        add_prefix_space: the tokenizer's flag (see `BytePairTokenizer`).
        trim_offsets: the tokenizer's flag (see `BytePairTokenizer`).

    Returns:
        A `kerasbert.tokenizers.BytePairTokenizer` reading the new files.
    """
    import tempfile

    from tokenizers import ByteLevelBPETokenizer

    from kerasbert.tokenizers.byte_pair import BytePairTokenizer

    paths = _expand(files)
    _check_options(output_dir, vocabulary_size, 261, min_frequency=(min_frequency, 0))
    check_bool("add_prefix_space", add_prefix_space)
    check_bool("trim_offsets", trim_offsets)
    trainer = ByteLevelBPETokenizer(add_prefix_space=add_prefix_space, trim_offsets=trim_offsets)
    trainer.train(
        paths, vocab_size=vocabulary_size, min_frequency=min_frequency, show_progress=False,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    with tempfile.TemporaryDirectory() as work:
        vocab, merges = trainer.save_model(work)
        tokenizer = BytePairTokenizer(
            vocab, merges, add_prefix_space=add_prefix_space, trim_offsets=trim_offsets
        )
    tokenizer.save_to_preset(output_dir)
    return tokenizer
