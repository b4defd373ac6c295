"""Per-character rules of BERT's text normalisation and pre-tokenisation.

The rules come from `data/bert_unicode.npz`, read off the reference Rust
`tokenizers` library one code point at a time (`tools/make_unicode_tables.py`),
so that they agree with transformers' fast tokenizers on every character, not
only on the characters of this machine's Unicode version.

BERT's normaliser works character by character, in this order: drop control
characters and map other whitespace to a space (`clean_text`), surround CJK
ideographs with spaces (`handle_chinese_chars`), decompose and drop
combining marks (`strip_accents`), lowercase (`lowercase`). Its
pre-tokeniser then splits on whitespace and isolates punctuation.
"""

import functools
import os

import numpy as np

KEEP, REMOVE, SPACE, CHINESE = 0, 1, 2, 3  # normaliser classes
WORD, PUNCTUATION, WHITESPACE = 0, 1, 2  # pre-tokeniser classes

_PATH = os.path.join(os.path.dirname(__file__), "data", "bert_unicode.npz")


@functools.lru_cache(maxsize=1)
def _tables():
    with np.load(_PATH) as data:
        return {k: data[k] for k in data.files}


def _range_classes(ranged_classes):
    """[(ranges (n, 2), class), ...] -> (edges, classes) such that the class
    of code point c is classes[searchsorted(edges, c, "right") - 1]."""
    marks = []
    for ranges, cls in ranged_classes:
        marks += [(int(first), int(last), cls) for first, last in ranges]
    marks.sort()
    edges, classes = [0], [0]
    for first, last, cls in marks:
        if first < edges[-1]:
            raise ValueError("overlapping Unicode ranges")  # a broken table
        if first > edges[-1]:
            edges.append(first)
            classes.append(0)
        edges[-1], classes[-1] = first, cls
        edges.append(last + 1)
        classes.append(0)
    return np.array(edges, np.int32), np.array(classes, np.int32)


def _mapping(prefix):
    t = _tables()
    keys, lengths, values = t[prefix + "_keys"], t[prefix + "_lengths"], t[prefix + "_values"]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return {int(k): tuple(int(v) for v in values[s:s + n]) for k, s, n in zip(keys, starts, lengths)}


class BertCharacterRules:
    """The normaliser and pre-tokeniser rules for one set of BERT flags, as
    arrays that the TensorFlow tokenizer looks code points up in.

    Attributes:
        class_edges, classes: normaliser class per code-point range.
        map_keys, map_lengths, map_starts, map_values: code points that
            strip_accents / lowercase change, and what they become.
        split_edges, split_classes: pre-tokeniser class per code-point range.
    """

    def __init__(self, lowercase=True, strip_accents=None, clean_text=True, handle_chinese_chars=True):
        if strip_accents is None:
            strip_accents = lowercase  # BERT's own default
        self.lowercase, self.strip_accents = lowercase, strip_accents
        t = _tables()
        normaliser = []
        if clean_text:
            normaliser += [(t["removed"], REMOVE), (t["spaces"], SPACE)]
        if handle_chinese_chars:
            normaliser.append((t["chinese"], CHINESE))
        self.class_edges, self.classes = _range_classes(normaliser)
        self.split_edges, self.split_classes = _range_classes(
            [(t["punctuation"], PUNCTUATION), (t["whitespace"], WHITESPACE)]
        )
        mapping = self._composed_mapping()
        mapping[-1] = (0,)  # a sentinel no code point matches: never empty
        keys = sorted(mapping)
        self.map_keys = np.array(keys, np.int32)
        self.map_lengths = np.array([len(mapping[k]) for k in keys], np.int32)
        self.map_starts = np.concatenate([[0], np.cumsum(self.map_lengths)[:-1]]).astype(np.int32)
        flat = [v for k in keys for v in mapping[k]]
        self.map_values = np.array(flat, np.int32)

    def _composed_mapping(self):
        strip = _mapping("strip") if self.strip_accents else {}
        lower = _mapping("lower") if self.lowercase else {}
        composed = {}
        for c in set(strip) | set(lower):
            out = strip.get(c, (c,))
            out = tuple(x for ch in out for x in lower.get(ch, (ch,)))
            if out != (c,):
                composed[c] = out
        return composed

    def normalize_char(self, c):
        """The normalised string of one character (pure Python; the tests
        compare it with the reference on every code point)."""
        cls = self.classes[np.searchsorted(self.class_edges, c, "right") - 1]
        if cls == REMOVE:
            return ""
        if cls == SPACE:
            return " "
        mapped = chr(c)
        i = np.searchsorted(self.map_keys, c)
        if i < len(self.map_keys) and self.map_keys[i] == c:
            s = self.map_starts[i]
            mapped = "".join(chr(v) for v in self.map_values[s:s + self.map_lengths[i]])
        return f" {mapped} " if cls == CHINESE else mapped

    def split_class(self, c):
        return int(self.split_classes[np.searchsorted(self.split_edges, c, "right") - 1])
