"""Regenerates kerasbert/tokenizers/data/nfc_unicode.npz from the reference.

Byte-level BPE files of the GPT-NeoX family (OLMo, ModernBERT) normalise
text to NFC before splitting it. The TensorFlow tokenizer composes NFC from
three tables, read off the reference Rust `tokenizers` library so that they
are of its Unicode version, not this machine's:

- the canonical decomposition of every code point NFD changes;
- the canonical combining class of every non-starter, found by seeing which
  marks of known classes NFD moves it across;
- the primary composites: pairs (first, second) that NFC joins into one
  code point.

    .venv/bin/python tools/make_nfc_tables.py

tests/test_byte_pair.py checks NFC against the installed `tokenizers`.
"""

import os
import sys
import unicodedata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_unicode_tables import DATA, _mapping, code_points

PATH = os.path.join(DATA, "nfc_unicode.npz")
_SEP = "\n"  # a starter that never composes: probes do not interact


def _probe(normalizer, texts):
    out = normalizer.normalize_str(_SEP.join(texts)).split(_SEP)
    assert len(out) == len(texts)
    return out


def combining_classes(nfd, decomposed):
    """{code point: class} of the reference's non-starters (class > 0)."""
    singles = [c for c in code_points() if c not in decomposed and chr(c) != _SEP]
    # ccc(x) > 1 moves x after U+0334 (class 1); 0 < ccc(x) < 230 moves it
    # before U+0301 (class 230).
    after = _probe(nfd, ["a" + chr(c) + "\u0334" for c in singles])
    before = _probe(nfd, ["a\u0301" + chr(c) for c in singles])
    marks = [c for c, x, y in zip(singles, after, before)
             if x != "a" + chr(c) + "\u0334" or y != "a\u0301" + chr(c)]
    # One representative of each class this Python knows; a mark's class is
    # the one it is moved across neither way.
    representatives = {}
    for c in marks:
        representatives.setdefault(unicodedata.combining(chr(c)), c)
    representatives.pop(0, None)
    classes = sorted(representatives)
    probes = [(c, k) for c in marks for k in classes]
    forward = _probe(nfd, ["a" + chr(c) + chr(representatives[k]) for c, k in probes])
    backward = _probe(nfd, ["a" + chr(representatives[k]) + chr(c) for c, k in probes])
    found = {}
    for (c, k), x, y in zip(probes, forward, backward):
        if x == "a" + chr(c) + chr(representatives[k]) and y == "a" + chr(representatives[k]) + chr(c):
            found.setdefault(c, []).append(k)
    missing = [hex(c) for c in marks if len(found.get(c, ())) != 1]
    if missing:
        raise ValueError(f"no single combining class for {missing[:10]}")
    return {c: found[c][0] for c in marks}


def compositions(nfc, decomposed):
    """{(first, second): composite} of the reference's NFC."""
    stable = [c for c in decomposed if len(decomposed[c]) > 1]
    stable = [c for c, out in zip(stable, _probe(nfc, [chr(c) for c in stable])) if out == chr(c)]
    # A primary composite is its full decomposition's first part, composed,
    # followed by the last character.
    firsts = _probe(nfc, ["".join(map(chr, decomposed[c][:-1])) for c in stable])
    pairs = {}
    for c, first in zip(stable, firsts):
        if len(first) == 1:
            pairs[(ord(first), decomposed[c][-1])] = c
    checked = _probe(nfc, [chr(a) + chr(b) for a, b in pairs])
    wrong = [(a, b) for (a, b), out in zip(pairs, checked) if out != chr(pairs[(a, b)])]
    if wrong:
        raise ValueError(f"pairs the reference does not compose: {wrong[:10]}")
    return pairs


def build_tables():
    from tokenizers import normalizers

    keys, lengths, values = _mapping(normalizers.NFD())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    decomposed = {int(k): tuple(int(v) for v in values[s:s + n]) for k, s, n in zip(keys, starts, lengths)}
    classes = combining_classes(normalizers.NFD(), decomposed)
    pairs = compositions(normalizers.NFC(), decomposed)
    seconds = {b for _, b in pairs}
    firsts = {a for a, _ in pairs}
    starter_seconds = sorted(b for b in seconds if b not in classes)
    # The TensorFlow composition takes a starter that composes with the one
    # before it never to compose with what follows.
    if set(starter_seconds) & firsts:
        raise ValueError(f"starters both first and second of compositions: {sorted(set(starter_seconds) & firsts)}")
    ordered = sorted(pairs)
    return {
        "decomposition_keys": keys, "decomposition_lengths": lengths, "decomposition_values": values,
        "class_keys": np.array(sorted(classes), np.int32),
        "class_values": np.array([classes[c] for c in sorted(classes)], np.int32),
        "composition_first": np.array([a for a, _ in ordered], np.int32),
        "composition_second": np.array([b for _, b in ordered], np.int32),
        "composition_result": np.array([pairs[p] for p in ordered], np.int32),
    }


if __name__ == "__main__":
    import tokenizers

    np.savez_compressed(PATH, tokenizers_version=np.array(tokenizers.__version__), **build_tables())
    print(f"wrote {os.path.normpath(PATH)} ({os.path.getsize(PATH):,} bytes) from tokenizers {tokenizers.__version__}")
