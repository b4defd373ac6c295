"""Regenerates kerasbert/tokenizers/data/bert_unicode.npz from the reference.

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

PATH = os.path.join(os.path.dirname(__file__), "..", "kerasbert", "tokenizers", "data", "bert_unicode.npz")


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


if __name__ == "__main__":
    import tokenizers

    tables = build_tables()
    np.savez_compressed(PATH, tokenizers_version=np.array(tokenizers.__version__), **tables)
    print(f"wrote {os.path.normpath(PATH)} ({os.path.getsize(PATH):,} bytes) from tokenizers {tokenizers.__version__}")
