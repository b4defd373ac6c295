"""BERT's text normalisation as a model for tensorflow-text's
`FastBertNormalize` kernel, so that LiteRT tokenizes as `predict` does.

tensorflow-text builds its own normaliser model with ICU's NFKC case
folding, which maps "…" to "...", full-width letters to ASCII and "ß" to
"ss", and turns control characters into spaces. BERT lowercases, decomposes
and drops combining marks, and deletes control characters. The kernel
itself is a table: it looks each code point's UTF-8 bytes up in a
darts-clone double-array trie whose value locates the code point's
replacement in a pool of UTF-8 strings (tensorflow-text's
`fast_bert_normalizer_model.fbs`). `normalizer_model` fills that table
from kerasbert's own per-character rules (`tokenizers.unicode`).

`FastWordpieceTokenizer`, which reads the normaliser's output, isolates
CJK ideographs and its own idea of punctuation (ASCII symbols and ICU's
`u_ispunct`). The model therefore leaves CJK ideographs to it (its ranges
are BERT's) and surrounds every character BERT calls punctuation with
spaces, so that BERT's punctuation stands alone whatever ICU's Unicode
version says.
"""

import numpy as np

from kerasbert.tokenizers import unicode

# The value bits of tensorflow-text's FastBertNormalizer: bit 30 marks "replaced",
# bits 6..29 the replacement's offset in the pool, bits 0..5 its UTF-8 length.
_REPLACED = 1 << 30
_LENGTH_BITS = 6
_MAX_OFFSET = (1 << (30 - _LENGTH_BITS)) - 1

# darts-clone's unit: bits 0..7 the label, bit 8 "has a value", bits 10..30 the
# offset to the children (XOR); a value unit has bit 31 set.
_HAS_VALUE = 1 << 8
_VALUE_UNIT = 1 << 31
_MAX_TRIE_OFFSET = 1 << 21


def replacements(tokenizer):
    """{code point: its replacement} for every code point the normaliser
    changes, under `tokenizer`'s flags: what `WordPieceTokenizer`'s
    normalisation makes of it, with BERT's punctuation between spaces and
    without the spaces BERT puts around CJK ideographs."""
    rules = unicode.BertCharacterRules(tokenizer.lowercase, tokenizer.strip_accents, tokenizer.clean_text,
                                       tokenizer.tokenize_chinese_chars)
    out = {}
    for c, s, n in zip(rules.map_keys.tolist(), rules.map_starts.tolist(), rules.map_lengths.tolist()):
        out[c] = "".join(map(chr, rules.map_values[s:s + n].tolist()))
    for first, after, cls in _ranges(rules.class_edges, rules.classes):
        if cls in (unicode.REMOVE, unicode.SPACE):  # what clean_text drops or makes a space
            out.update(dict.fromkeys(range(first, after), "" if cls == unicode.REMOVE else " "))
    for first, after, cls in _ranges(rules.split_edges, rules.split_classes):
        if cls == unicode.PUNCTUATION:
            out.update({c: out.get(c, chr(c)) for c in range(first, after)})

    def spaced(text):  # BERT's punctuation stands alone
        return "".join(f" {c} " if rules.split_class(ord(c)) == unicode.PUNCTUATION else c for c in text)

    out = {c: spaced(text) for c, text in out.items() if c >= 0}  # -1: the rules' sentinel
    return {c: text for c, text in out.items() if text != chr(c) and not 0xD800 <= c <= 0xDFFF}


def _ranges(edges, classes):
    """(first, after, class) of each run in the rules' range tables."""
    return zip(edges.tolist(), edges[1:].tolist() + [0x110000], classes.tolist())


def _broken_sequences():
    """The byte runs that ICU's `U8_FWD_1`, which the kernel steps through
    its input with, reads as one ill-formed character: any byte from 0x80 on
    alone, and every proper prefix (2 or 3 bytes) of a well-formed
    sequence."""
    runs = {bytes([b]) for b in range(0x80, 0x100)}
    for first, last in ((0x800, 0xD7FF), (0xE000, 0x10FFFF)):
        for c in range(first, last + 1, 64):  # the last byte varies fastest: a prefix per 64 code points
            encoded = chr(c).encode("utf-8")
            runs.update(encoded[:n] for n in range(2, len(encoded)))
    return sorted(runs)


def normalizer_model(tokenizer):
    """The `FastBertNormalizerModel` flatbuffer (bytes) for a
    `WordPieceTokenizer`'s normalisation: pass it to tensorflow-text's
    `FastBertTokenizer(fast_bert_normalizer_model_buffer=...)`.

    Ill-formed UTF-8 becomes what U+FFFD becomes, as kerasbert decodes it
    (with `clean_text`, nothing)."""
    replaced = replacements(tokenizer)
    entries = {chr(c).encode("utf-8"): text for c, text in replaced.items()}
    entries.update(dict.fromkeys(_broken_sequences(), replaced.get(0xFFFD, "\ufffd")))
    pool, offsets, keys, values = bytearray(), {}, [], []
    zero = 0
    for key, text in sorted(entries.items()):
        encoded = text.encode("utf-8")
        if encoded not in offsets:
            offsets[encoded] = len(pool)
            pool += encoded
        if offsets[encoded] > _MAX_OFFSET or len(encoded) >= 1 << _LENGTH_BITS:
            raise ValueError(f"the replacement of {key!r} does not fit FastBertNormalizer's table")
        value = _REPLACED | offsets[encoded] << _LENGTH_BITS | len(encoded)
        if key == b"\x00":
            zero = value  # the trie cannot hold an empty key: the kernel reads NUL's value apart
        else:
            keys.append(key)
            values.append(value)
    return _flatbuffer(tokenizer.lowercase, double_array(keys, values), zero, bytes(pool))


def double_array(keys, values):
    """A darts-clone double-array trie (uint32 units) mapping each byte
    string in `keys` to the int in `values` (< 2**31); no key holds a NUL
    byte.

    The child of node `p` on byte `b` sits at `p ^ offset(p) ^ b` and
    carries `b` as its label; a node with a value has it at
    `p ^ offset(p)`, in a unit whose top bit is set. Nodes whose subtrees
    are equal share one `p ^ offset(p)` (darts-clone's suffix sharing: the
    private-use areas, 137k keys with one value, take a few hundred units),
    and no other node uses it, so a unit whose label matches can
    only be the child looked for."""
    root = {}
    for key, value in zip(keys, values):
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    shapes = {}  # a subtree's shape -> its number; equal shapes, one number

    def shape(node):
        signature = (node.get(None), tuple((b, shape(node[b])) for b in sorted(b for b in node if b is not None)))
        return shapes.setdefault(signature, len(shapes))

    units, taken, based = np.zeros(0, np.uint32), np.zeros(0, bool), np.zeros(0, bool)
    bases = {}  # shape number -> where its children sit
    queue, low = [(root, 0)], 0
    while queue:
        node, position = queue.pop()
        number = shape(node)
        if number not in bases:
            labels = sorted(b for b in node if b is not None)
            slots = np.array(([0] if None in node else []) + labels)
            while True:  # the first base, from the first free block on, whose slots are all free
                if low + 1024 > len(units):
                    grown = 2 * len(units) + 4096
                    units, taken, based = (np.pad(a, (0, grown - len(a))) for a in (units, taken, based))
                    taken[0] = True  # the root
                candidates = np.arange(low, low + 512)
                fits = ~based[candidates]
                for b in slots:
                    fits &= ~taken[candidates ^ b]
                if fits.any():
                    break
                low += 256
            base = int(candidates[np.argmax(fits)])
            bases[number] = base
            based[base] = True
            taken[base ^ slots] = True
            if None in node:
                units[base] = _VALUE_UNIT | node[None]
            for b in labels:
                units[base ^ b] = b
                queue.append((node[b], base ^ b))
            while taken[low:low + 256].all():
                low += 256
        offset = position ^ bases[number]
        if offset >= _MAX_TRIE_OFFSET:
            raise ValueError(f"{len(keys)} keys do not fit a darts-clone trie")
        units[position] |= offset << 10 | (_HAS_VALUE if None in node else 0)
    return units[:np.flatnonzero(taken)[-1] + 1]


def _flatbuffer(lowercase, trie, zero, pool):
    """tensorflow-text's `FastBertNormalizerModel` table: fields
    lower_case_nfd_strip_accents, trie_array, data_for_codepoint_zero,
    normalized_string_pool, in that order."""
    import flatbuffers

    builder = flatbuffers.Builder(4 * len(trie) + len(pool) + 64)
    pool_vector = builder.CreateNumpyVector(np.frombuffer(pool, np.uint8))
    trie_vector = builder.CreateNumpyVector(trie.astype("<u4"))
    builder.StartObject(4)
    builder.PrependBoolSlot(0, lowercase, False)
    builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
    builder.PrependInt32Slot(2, zero, 0)
    builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
