"""Regenerates kerasbert/tokenizers/data/byte_level_unicode.npz from the reference.

The byte-level BPE tokenizer (GPT-2, RoBERTa) splits text with GPT-2's regex
`'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`,
which the Rust `tokenizers` library runs with Oniguruma's Unicode tables. The
TensorFlow tokenizer maps every character to one ASCII character of its class
(letter, number, whitespace, other) before splitting, so the classes are read
off the reference pre-tokeniser itself, one code point at a time:

    .venv/bin/python tools/make_byte_level_tables.py

tests/test_byte_pair.py::test_every_code_point checks the tokenizer built on
this file against the installed `tokenizers` on all 1,112,064 code points.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_unicode_tables import _ranges, code_points

PATH = os.path.join(
    os.path.dirname(__file__), "..", "kerasbert", "tokenizers", "data", "byte_level_unicode.npz"
)


def classify(c, splitter):
    """'letter', 'number', 'other' or 'whitespace': the class a character
    joins, seen from how many pieces it makes after a letter, a digit, a "!"."""
    def joins(first):
        return len(splitter.pre_tokenize_str(first + chr(c))) == 1

    found = [name for name, first in (("letter", "a"), ("number", "0"), ("other", "!")) if joins(first)]
    if len(found) > 1:
        raise ValueError(f"U+{c:04X} joins {found}")
    return found[0] if found else "whitespace"


def build_tables():
    from tokenizers import pre_tokenizers

    splitter = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    classes = {"letter": [], "number": [], "whitespace": [], "other": []}
    for c in code_points():
        classes[classify(c, splitter)].append(c)
    return {name: _ranges(points) for name, points in classes.items() if name != "other"}


if __name__ == "__main__":
    import tokenizers

    tables = build_tables()
    np.savez_compressed(PATH, tokenizers_version=np.array(tokenizers.__version__), **tables)
    print(f"wrote {os.path.normpath(PATH)} ({os.path.getsize(PATH):,} bytes) from tokenizers {tokenizers.__version__}")
