"""Regenerates kerasbert/tokenizers/data/{bert,unigram}_unicode.npz from the reference.

The WordPiece tokenizer runs in TensorFlow ops, whose Unicode tables (RE2,
ICU) are of other Unicode versions than the Rust `tokenizers` library that
transformers' fast BERT tokenizers use. To give identical ids on every
character, kerasbert's per-character rules are read off the reference itself,
one code point at a time:

    .venv/bin/python tools/make_unicode_tables.py

tests/test_unicode_tables.py checks the shipped file against the installed
`tokenizers` on all 1,112,064 code points.
"""

import os

import numpy as np

DATA = os.path.join(os.path.dirname(__file__), "..", "kerasbert", "tokenizers", "data")
PATH = os.path.join(DATA, "bert_unicode.npz")
UNIGRAM_PATH = os.path.join(DATA, "unigram_unicode.npz")


def code_points():
    return (c for c in range(0x110000) if not 0xD800 <= c < 0xE000)


def _ranges(points):
    """Sorted code points -> (n, 2) inclusive [first, last] ranges."""
    out = []
    for c in sorted(points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return np.array(out, np.int32).reshape(-1, 2)


def _mapping(normalizer):
    keys, lengths, values = [], [], []
    for c in code_points():
        out = normalizer.normalize_str(chr(c))
        if out != chr(c):
            keys.append(c)
            lengths.append(len(out))
            values.extend(ord(x) for x in out)
    return np.array(keys, np.int32), np.array(lengths, np.int32), np.array(values, np.int32)


def build_tables():
    from tokenizers import normalizers, pre_tokenizers

    def bert(**flags):
        defaults = dict(clean_text=False, handle_chinese_chars=False, strip_accents=False, lowercase=False)
        return normalizers.BertNormalizer(**{**defaults, **flags})

    clean, chinese = bert(clean_text=True), bert(handle_chinese_chars=True)
    removed, spaces, cjk = [], [], []
    for c in code_points():
        out = clean.normalize_str(chr(c))
        if out == "":
            removed.append(c)
        elif out == " " and c != 0x20:
            spaces.append(c)
        if chinese.normalize_str(chr(c)) == f" {chr(c)} ":
            cjk.append(c)
    splitter = pre_tokenizers.BertPreTokenizer()
    punctuation, whitespace = [], []
    for c in code_points():
        words = [w for w, _ in splitter.pre_tokenize_str("a" + chr(c) + "a")]
        if words == ["a", chr(c), "a"]:
            punctuation.append(c)
        elif words == ["a", "a"]:
            whitespace.append(c)
    strip = _mapping(bert(strip_accents=True))
    lower = _mapping(bert(lowercase=True))
    return {
        "removed": _ranges(removed),
        "spaces": _ranges(spaces),
        "chinese": _ranges(cjk),
        "punctuation": _ranges(punctuation),
        "whitespace": _ranges(whitespace),
        "strip_keys": strip[0], "strip_lengths": strip[1], "strip_values": strip[2],
        "lower_keys": lower[0], "lower_lengths": lower[1], "lower_values": lower[2],
    }


def _nmt_nfkc_charsmap():
    """SentencePiece's default normalisation table, from a model trained on
    a few lines (the table does not depend on the text)."""
    import tempfile

    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    with tempfile.TemporaryDirectory() as work:
        text = os.path.join(work, "text.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n".join(f"line {i} of some text" for i in range(200)))
        sentencepiece.SentencePieceTrainer.train(
            input=text, model_prefix=os.path.join(work, "m"), vocab_size=30, minloglevel=2,
            hard_vocab_limit=False, normalization_rule_name="nmt_nfkc",
        )
        model = sentencepiece_model_pb2.ModelProto()
        with open(os.path.join(work, "m.model"), "rb") as f:
            model.ParseFromString(f.read())
    return model.normalizer_spec.precompiled_charsmap


def _grapheme_extenders():
    """Characters that join the character before them into one grapheme
    cluster, as transformers' Precompiled normaliser segments text: read off
    it for the Basic Multilingual Plane (after a no-break space, which the
    default charsmap rewrites: a joined character disappears with it), and
    from the Unicode categories (marks, emoji modifiers, tags, ZWJ) above."""
    import unicodedata

    from tokenizers import normalizers

    precompiled = normalizers.Precompiled(_nmt_nfkc_charsmap())
    base = precompiled.normalize_str("\u00a0")
    points = []
    for c in code_points():
        if c < 0x80:
            continue
        if c < 0x10000:
            alone = precompiled.normalize_str(chr(c))
            if alone and precompiled.normalize_str("\u00a0" + chr(c)) == base:
                points.append(c)
        elif unicodedata.category(chr(c)) in ("Mn", "Me", "Mc") or 0x1F3FB <= c <= 0x1F3FF or 0xE0020 <= c <= 0xE007F:
            points.append(c)
    return points


def _grapheme_breakers():
    """Characters after which a grapheme cluster ends whatever follows them
    (Unicode's Control, CR and LF), as transformers' Precompiled normaliser
    segments text: read off it for the Basic Multilingual Plane characters
    the default charsmap rewrites (a combining mark after one keeps its own
    output instead of disappearing with it), and from the Unicode categories
    (Cc, Zl, Zp, and Cf but ZWNJ, ZWJ, the prepended concatenation marks and
    the extenders: tags) for the others."""
    import unicodedata

    from tokenizers import normalizers

    precompiled = normalizers.Precompiled(_nmt_nfkc_charsmap())
    mark = precompiled.normalize_str("\u0301")
    prepended = {0x600, 0x601, 0x602, 0x603, 0x604, 0x605, 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x110BD, 0x110CD}
    extenders = set(_grapheme_extenders())
    points = []
    for c in code_points():
        alone = precompiled.normalize_str(chr(c))
        if c in extenders:
            continue
        if c < 0x10000 and alone != chr(c):
            if precompiled.normalize_str(chr(c) + "\u0301") == alone + mark:
                points.append(c)
        elif unicodedata.category(chr(c)) in ("Cc", "Zl", "Zp") or (
            unicodedata.category(chr(c)) == "Cf" and c not in (0x200C, 0x200D) and c not in prepended
        ):
            points.append(c)
    return points


def build_unigram_tables():
    """The per-character steps of transformers' SentencePiece pipeline that
    do not depend on the model: NFKD, StripAccents, Lowercase, the grapheme
    clusters the Precompiled normaliser sees, and the whitespace that
    WhitespaceSplit splits on."""
    from tokenizers import normalizers, pre_tokenizers

    nfkd = _mapping(normalizers.NFKD())
    lower = _mapping(normalizers.Lowercase())
    strip = normalizers.StripAccents()
    splitter = pre_tokenizers.WhitespaceSplit()
    combining, whitespace = [], []
    for c in code_points():
        if strip.normalize_str(chr(c)) == "":
            combining.append(c)
        if [w for w, _ in splitter.pre_tokenize_str("a" + chr(c) + "a")] == ["a", "a"]:
            whitespace.append(c)
    return {
        "extend": _ranges(_grapheme_extenders()),
        "breakers": _ranges(_grapheme_breakers()),
        "nfkd_keys": nfkd[0], "nfkd_lengths": nfkd[1], "nfkd_values": nfkd[2],
        "lower_keys": lower[0], "lower_lengths": lower[1], "lower_values": lower[2],
        "combining": _ranges(combining),
        "whitespace": _ranges(whitespace),
    }


if __name__ == "__main__":
    import tokenizers

    version = np.array(tokenizers.__version__)
    for path, build in [(PATH, build_tables), (UNIGRAM_PATH, build_unigram_tables)]:
        np.savez_compressed(path, tokenizers_version=version, **build())
        print(f"wrote {os.path.normpath(path)} ({os.path.getsize(path):,} bytes) from tokenizers {tokenizers.__version__}")
