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


# -- SentencePiece (transformers' ALBERT pipeline) ----------------------------

_UNIGRAM_PATH = os.path.join(os.path.dirname(__file__), "data", "unigram_unicode.npz")


@functools.lru_cache(maxsize=1)
def _unigram_tables():
    with np.load(_UNIGRAM_PATH) as data:
        return {k: data[k] for k in data.files}


def _table_mapping(tables, prefix):
    keys, lengths, values = tables[prefix + "_keys"], tables[prefix + "_lengths"], tables[prefix + "_values"]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return {int(k): tuple(int(v) for v in values[s:s + n]) for k, s, n in zip(keys, starts, lengths)}


def _all_code_points():
    points = np.arange(0x110000, dtype=np.int64)
    return points[(points < 0xD800) | (points >= 0xE000)]


def _utf8_bytes(points):
    """(n,) code points -> ((n, 4) UTF-8 bytes, (n,) byte counts)."""
    n = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
    out = np.zeros((len(points), 4), np.int64)
    lead = {1: 0x00, 2: 0xC0, 3: 0xE0, 4: 0xF0}
    for count, mark in lead.items():
        sel = n == count
        p = points[sel]
        shifts = [6 * (count - 1 - i) for i in range(count)]
        out[sel, 0] = mark | (p >> shifts[0])
        for i in range(1, count):
            out[sel, i] = 0x80 | ((p >> shifts[i]) & 0x3F)
    return out, n


def _trie(charsmap):
    size = int.from_bytes(charsmap[:4], "little")
    if len(charsmap) < 8 or size % 4 or 4 + size > len(charsmap):
        raise ValueError("precompiled_charsmap is not a SentencePiece normalisation trie.")
    units = np.frombuffer(charsmap[4:4 + size], dtype="<u4").astype(np.int64)
    return units, charsmap[4 + size:]


def _offset(unit):
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def _label(unit):
    return unit & ((1 << 31) | 0xFF)


def _blob_string(blob, start):
    return tuple(ord(x) for x in blob[start:blob.index(b"\0", start)].decode("utf-8"))


def precompiled_mapping(charsmap):
    """SentencePiece's precompiled normalisation (a double-array trie over
    UTF-8 bytes and a blob of replacement strings) as {code point: string}
    for every single character it rewrites."""
    if not charsmap:
        return {}
    units, blob = _trie(charsmap)
    points = _all_code_points()
    utf8, length = _utf8_bytes(points)
    position = np.zeros(len(points), np.int64) ^ _offset(units[0])
    alive = np.ones(len(points), bool)
    value = np.full(len(points), -1, np.int64)
    for i in range(4):  # walk each character's bytes down the trie
        active = alive & (i < length)
        child = position ^ utf8[:, i]
        unit = units[np.where(active & (child < len(units)), child, 0)]
        matched = active & (child < len(units)) & (_label(unit) == utf8[:, i])
        alive &= matched | (i >= length)
        position = np.where(matched, child ^ _offset(unit), position)
        leaf = matched & (i == length - 1) & (((unit >> 8) & 1) == 1)
        found = units[np.where(leaf, position, 0)] & ((1 << 31) - 1)
        value = np.where(leaf, found, value)
    return {int(c): _blob_string(blob, v) for c, v in zip(points[value >= 0], value[value >= 0])}


def precompiled_sequences(charsmap, max_bytes=5):
    """The charsmap's entries for sequences of two or more characters of at
    most `max_bytes` UTF-8 bytes (e.g. "e" + U+0301 -> "é"), as
    {code points: string}. transformers applies them to grapheme clusters
    shorter than 6 bytes."""
    if not charsmap:
        return {}
    units, blob = _trie(charsmap)
    labels = np.arange(256, dtype=np.int64)
    position = np.array([_offset(units[0])], np.int64)
    prefix = np.zeros(1, np.int64)  # the bytes so far, packed big-endian
    found = {}
    for depth in range(1, max_bytes + 1):
        child = position[:, None] ^ labels[None, :]
        inside = child < len(units)
        unit = units[np.where(inside, child, 0)]
        node, label = np.nonzero(inside & (_label(unit) == labels[None, :]))
        unit = unit[node, label]
        position = child[node, label] ^ _offset(unit)
        prefix = (prefix[node] << 8) | label
        for key, pos in zip(prefix[((unit >> 8) & 1) == 1], position[((unit >> 8) & 1) == 1]):
            try:
                text = int(key).to_bytes(depth, "big").decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(text) > 1:
                found[tuple(ord(c) for c in text)] = _blob_string(blob, units[pos] & ((1 << 31) - 1))
    return found


def _table(mapping):
    """{code point: replacement} -> sorted keys, lengths, starts, values."""
    mapping = {**mapping, -1: (0,)}  # a sentinel no code point matches
    keys = sorted(mapping)
    lengths = np.array([len(mapping[k]) for k in keys], np.int32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
    values = np.array([v for k in keys for v in mapping[k]] or [0], np.int32)
    return np.array(keys, np.int32), lengths, starts, values


class UnigramCharacterRules:
    """transformers' normalisation of a SentencePiece model, in two stages.

    1. NFKD then StripAccents (`strip_accents`), Lowercase (`lowercase`):
       per character, composed into one {code point: replacement} table
       (`map_*`).
    2. The model's precompiled charsmap: per character (`charsmap_*`), except
       that a grapheme cluster of two or more characters and fewer than 6
       UTF-8 bytes is replaced as a whole when its first character, or the
       sequence of its first 2 or 3 characters (`sequence_*`), has an entry,
       as transformers does. Clusters are approximated as a character
       followed by the characters in `extend_edges / extend_classes`, unless
       it is one of `breaker_edges / breaker_classes` (controls), or CR LF
       (both read off the reference; see tools/make_unicode_tables.py).

    Attributes also hold the whitespace WhitespaceSplit splits on.
    """

    def __init__(self, lowercase=True, strip_accents=True, precompiled_charsmap=None):
        t = _unigram_tables()
        steps = []
        if strip_accents:
            combining = set()
            for first, last in t["combining"]:
                combining.update(range(int(first), int(last) + 1))
            steps.append(_table_mapping(t, "nfkd"))
            steps.append({c: () for c in combining})
        if lowercase:
            steps.append(_table_mapping(t, "lower"))
        mapping = {}
        for c in set().union(*steps):
            out = (c,)
            for step in steps:
                out = tuple(x for ch in out for x in step.get(ch, (ch,)))
            if out != (c,):
                mapping[c] = out
        self.mapping = mapping
        self.map_keys, self.map_lengths, self.map_starts, self.map_values = _table(mapping)
        self.charsmap = precompiled_mapping(precompiled_charsmap)
        self.sequences = precompiled_sequences(precompiled_charsmap)
        (self.charsmap_keys, self.charsmap_lengths,
         self.charsmap_starts, self.charsmap_values) = _table(self.charsmap)
        keys = sorted(self.sequences)
        self.sequence_keys = ["".join(chr(c) for c in k) for k in keys] or ["\0\0"]
        lengths = [len(self.sequences[k]) for k in keys] or [0]
        self.sequence_lengths = np.array(lengths, np.int32)
        self.sequence_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        self.sequence_values = np.array([v for k in keys for v in self.sequences[k]] or [0], np.int32)
        self.extend_edges, self.extend_classes = _range_classes([(t["extend"], 1)])
        self.breaker_edges, self.breaker_classes = _range_classes([(t["breakers"], 1)])
        self.whitespace_edges, self.whitespace_classes = _range_classes([(t["whitespace"], 1)])
