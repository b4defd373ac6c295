"""Byte-level BPE (GPT-2, RoBERTa) in TensorFlow ops, identical to
transformers' fast RoBERTa tokenizer."""

import functools
import json
import os
import warnings

import keras
import numpy as np

from kerasbert.tokenizers.base import Tokenizer, regex_split_with_offsets, utf8_length
from kerasbert.tokenizers.files.byte_pair import write_byte_pair_files
from kerasbert.tokenizers.nfc import NFC
from kerasbert.tokenizers.unicode import _range_classes
from kerasbert.utils.checks import abbreviated, check_bool, check_choice, check_file, check_string, is_int
from kerasbert.utils.optional import tf
from kerasbert.utils.ragged import concat_rows, row_ids, row_positions

_TABLES = os.path.join(os.path.dirname(__file__), "data", "byte_level_unicode.npz")
OTHER, LETTER, NUMBER, WHITESPACE = 0, 1, 2, 3
# Rust's char::is_whitespace, which the reference's offset trimming uses.
_RUST_WHITESPACE = frozenset(map(chr, [
    *range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
]))

# GPT-2's split, `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
# on a copy of the text with one ASCII character per character of the same
# class (see `_class_text`). RE2 has no look-ahead: `\s+(?!\S)` lets a
# whitespace run that precedes a word leave its last character to that word;
# the copy writes that last character as " " (a space) or "\n" (other
# whitespace) and the rest of the run as "\t", so that the split below gives
# the same pieces.
_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[!']+|\t+|\n"


def bytes_to_unicode():
    """GPT-2's printable stand-in character for each byte value (a dict)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@functools.lru_cache(maxsize=1)
def _character_classes():
    with np.load(_TABLES) as data:
        return _range_classes(
            [(data["letter"], LETTER), (data["number"], NUMBER), (data["whitespace"], WHITESPACE)]
        )


def _read_vocabulary(vocabulary):
    if isinstance(vocabulary, (str, os.PathLike)):
        path = check_file("vocabulary", vocabulary, "a vocab.json")
        try:
            with open(path, encoding="utf-8") as f:
                vocabulary = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"vocabulary={path!r} is not a valid vocab.json: {error}") from None
    if not isinstance(vocabulary, dict):
        raise TypeError(f"vocabulary must be a dict {{token: id}} or a vocab.json path; got {abbreviated(vocabulary)}.")
    for token, i in vocabulary.items():
        if not isinstance(token, str) or not is_int(i):
            raise TypeError(
                f"vocabulary must map token strings to integer ids; got the entry {abbreviated(token, 40)}: {abbreviated(i, 40)}."
            )
    ordered = sorted(vocabulary.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise ValueError("vocabulary ids must be 0..n-1 without gaps or repeats.")
    return [token for token, _ in ordered]


def _read_merges(merges):
    if isinstance(merges, (str, os.PathLike)):
        with open(check_file("merges", merges, "a merges.txt (or a list of 'a b' merges)"), encoding="utf-8") as f:
            merges = f.read().split("\n")
        if merges and merges[0].startswith("#version"):
            merges = merges[1:]
        merges = [line for line in merges if line.strip()]
    if not isinstance(merges, (list, tuple)):
        raise TypeError(f"merges must be a list of 'a b' strings or a merges.txt path; got {abbreviated(merges)}.")
    pairs = []
    for rank, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not (isinstance(parts, (list, tuple)) and len(parts) == 2 and all(isinstance(p, str) and p for p in parts)):
            raise ValueError(f"merges[{rank}]={abbreviated(merge, 60)} is not a pair 'a b'.")
        pairs.append(tuple(parts))
    return pairs


@keras.saving.register_keras_serializable(package="kerasbert")
class BytePairTokenizer(Tokenizer):
    """RoBERTa's (GPT-2's) byte-level BPE tokenizer, all as TensorFlow ops.

    Text is split with GPT-2's pre-tokenisation regex (its Unicode classes
    read off the Rust `tokenizers` library, see
    `tools/make_byte_level_tables.py`), each piece's UTF-8 bytes are written
    with GPT-2's printable byte alphabet, and BPE merges are applied as the
    reference does (lowest rank first, leftmost first). Ids and character
    offsets match transformers' fast RoBERTa tokenizer, including its
    trimming of spaces out of offsets (`trim_offsets`): a token made only
    of spaces gets an empty span.

    Args:
        vocabulary: a dict {token: id} (ids 0..n-1) or a `vocab.json` path.
        merges: a list of "a b" merges, best first, or a `merges.txt` path.
        unknown_token: a special token, which must be in the vocabulary.
        cls_token: a special token, which must be in the vocabulary.
        sep_token: a special token, which must be in the vocabulary.
        pad_token: a special token, which must be in the vocabulary.
        mask_token: a special token, which must be in the vocabulary.
        add_prefix_space: add a space before text that does not start with
            one, so that the first word is tokenized like the others.
        trim_offsets: leave spaces out of the offsets of tokens.
        special_tokens_in_text: special tokens written in the text (e.g.
            "<mask>") become their ids, as in transformers; `False`
            tokenizes them as ordinary text.
        mask_token_lstrip: the mask token written in text swallows the
            whitespace on its left (RoBERTa's and ModernBERT's setting).
        added_tokens: other tokens of the vocabulary matched whole in the
            text before anything else is done to it, as transformers' special
            added tokens are (ModernBERT's `<|padding|>`, `[unused0]`, ...).
        normalized_tokens: tokens of the vocabulary matched whole in the
            text where no special or added token is, as transformers'
            normalised added tokens (ModernBERT's runs of 2 to 24 spaces and
            `|||EMAIL_ADDRESS|||`). transformers matches them after
            normalising the text: the same where normalisation leaves them
            and their neighbours alone, as NFC does with spaces and ASCII
            punctuation.
        normalization: None, or "NFC" to compose the text to Unicode NFC
            first (the GPT-NeoX, OLMo and ModernBERT files), offsets still
            pointing into the text as given.
        packing_style: the template of the special tokens, "roberta" (`<s> A
            </s></s> B </s>`) or "bert" (`[CLS] A [SEP] B [SEP]`, ModernBERT).

    `Tokenizer.from_preset` reads these from a `tokenizer.json` (ModernBERT:
    its NFC normaliser, added tokens, `[MASK]` lstrip, and its
    `TemplateProcessing` post-processor as `packing_style="bert"` with
    `trim_offsets=False`, since only a ByteLevel or RoBERTa post-processor
    trims offsets) or from `vocab.json` + `merges.txt` (RoBERTa, GPT-2).

    Examples:
    >>> vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4,
    ...          "a": 5, "b": 6, "Ġ": 7, "ab": 8, "Ġab": 9}
    >>> tokenizer = BytePairTokenizer(vocab, ["a b", "Ġ ab"])
    >>> tokenizer(["ab ab", "ba <mask>"]).to_list()
    [[8, 9], [6, 5, 4]]
    >>> tokenizer.detokenize([8, 9])
    'ab ab'
    """

    def __init__(
        self,
        vocabulary,
        merges,
        unknown_token="<unk>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        mask_token="<mask>",
        add_prefix_space=False,
        trim_offsets=True,
        special_tokens_in_text=True,
        mask_token_lstrip=True,
        added_tokens=(),
        normalized_tokens=(),
        normalization=None,
        packing_style="roberta",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self._set_vocabulary(_read_vocabulary(vocabulary))
        self.merges = [f"{a} {b}" for a, b in _read_merges(merges)]
        self.unknown_token = unknown_token
        self.add_prefix_space = check_bool("add_prefix_space", add_prefix_space)
        self.trim_offsets = check_bool("trim_offsets", trim_offsets)
        self.special_tokens_in_text = check_bool("special_tokens_in_text", special_tokens_in_text)
        self.mask_token_lstrip = check_bool("mask_token_lstrip", mask_token_lstrip)
        self.added_tokens = self._tokens_of_vocabulary("added_tokens", added_tokens)
        self.normalized_tokens = self._tokens_of_vocabulary("normalized_tokens", normalized_tokens)
        self.normalization = check_choice("normalization", normalization, (None, "NFC"))
        self.packing_style = check_choice("packing_style", packing_style, ("roberta", "bert"))
        self._set_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token)
        self._set_special_tokens_in_text(
            [*self.special_tokens.values(), *self.added_tokens] if special_tokens_in_text else (),
            lstrip={mask_token} if self.mask_token_lstrip else (),
            later=self.normalized_tokens if special_tokens_in_text else (),
        )
        self._nfc = NFC() if normalization == "NFC" else None
        # The normaliser's table as the layer's own attribute: tracked, so a SavedModel carries it.
        self._nfc_table = None if self._nfc is None else self._nfc.compose_table
        self._build_tables()

    def _tokens_of_vocabulary(self, name, tokens):
        if isinstance(tokens, str) or not isinstance(tokens, (list, tuple)):
            raise TypeError(f"{name} must be a list of tokens of the vocabulary; got {abbreviated(tokens)}.")
        for i, token in enumerate(tokens):
            if check_string(f"{name}[{i}]", token) not in self._token_to_id:
                raise ValueError(f"{name}[{i}]={abbreviated(token, 40)} is not in the vocabulary.")
        return list(tokens)

    def _build_tables(self):
        vocab_size = len(self.vocabulary)
        ids = self._token_to_id
        keys, results = [], []
        made_by = {}  # token -> ranks of the merges that make it
        for rank, merge in enumerate(self.merges):
            left, right = merge.split(" ")
            for part in (left, right, left + right):
                if part not in ids:
                    raise ValueError(
                        f"merges[{rank}]={merge!r} uses or makes {part!r}, which is "
                        "not in the vocabulary."
                    )
            keys.append(ids[left] * vocab_size + ids[right])
            results.append(ids[left + right])
            made_by.setdefault(left + right, []).append(rank)
        # Merging rank by rank, every occurrence at once, is what the
        # reference's one-merge-at-a-time queue does when each token is made
        # by one merge and used by later merges only (true of trained files).
        out_of_order = next(
            (m for rank, m in enumerate(self.merges)
             if any(max(made_by.get(p, [-1])) >= rank for p in m.split(" "))),
            None,
        )
        made_twice = next((t for t, ranks in made_by.items() if len(ranks) > 1), None)
        if out_of_order is not None or made_twice is not None:
            warnings.warn(
                f"merges are not in training order (merge {out_of_order!r} uses a token made "
                f"later, or token {made_twice!r} is made by several merges); a few words may "
                "be tokenized differently from transformers.",
                stacklevel=3,
            )
        # Merge tables may repeat a pair; the reference keeps the last rank.
        unique = {}
        for rank, key in enumerate(keys):
            unique[key] = rank
        unique = unique or {-1: len(self.merges)}  # no merges: a key no pair makes (a table can't be empty)
        self._num_merges = len(self.merges)
        # A merge can only be pre-empted by merges inside a longer token that
        # contains one of its symbols; such a token has at most `reach` bytes,
        # and `reach` of a token is the longest merged token holding all its
        # bytes. Pairs with no lower rank within that many positions on
        # either side merge in the same round (long words need far fewer rounds).
        alphabet = bytes_to_unicode()
        byte_of = {c: b for b, c in alphabet.items()}
        longest = np.ones(256, np.int64)
        for token in made_by:
            if all(c in byte_of for c in token):
                for c in set(token):
                    longest[byte_of[c]] = max(longest[byte_of[c]], len(token))
        reach = [
            min(longest[byte_of[c]] for c in token) if token and all(c in byte_of for c in token) else 1
            for token in self.vocabulary
        ]
        self._levels = max(1, int(np.ceil(np.log2(max(reach + [2])))))
        self._reach_level = tf.constant(np.ceil(np.log2(np.maximum(reach, 1))).astype(np.int64))
        self._merge_rank = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(unique), tf.int64), tf.constant(list(unique.values()), tf.int64)
            ),
            default_value=self._num_merges,
        )
        self._merge_result = tf.constant(results + [0], tf.int64)  # (merges + 1,)
        self._byte_ids = tf.constant([ids.get(alphabet[b], -1) for b in range(256)], tf.int64)

        def spaces(token):
            is_space = [c == "\u0120" or c in _RUST_WHITESPACE for c in token]
            lead = next((i for i, s in enumerate(is_space) if not s), len(token))
            trail = next((i for i, s in enumerate(reversed(is_space)) if not s), len(token))
            return lead, trail

        lead_trail = np.array([spaces(t) for t in self.vocabulary], np.int64).reshape(-1, 2)
        self._leading_spaces = tf.constant(lead_trail[:, 0])
        self._trailing_spaces = tf.constant(lead_trail[:, 1])
        self._token_chars = tf.constant([len(t) for t in self.vocabulary], tf.int64)
        edges, classes = _character_classes()
        self._class_edges, self._classes = tf.constant(edges), tf.constant(classes)
        self._token_bytes = tf.constant(
            [
                bytes(byte_of[c] for c in token) if all(c in byte_of for c in token) else token.encode("utf-8")
                for token in self.vocabulary
            ],
            tf.string,
        )

    # -- Tokenization ---------------------------------------------------------

    def _tokenize(self, texts):
        ids, starts, ends = super()._tokenize(texts)  # (batch, None)
        if not self.trim_offsets:
            return ids, starts, ends
        # transformers' trim_offsets: spaces ("Ġ") and whitespace at either
        # end of a token's string leave its span; a special token's string
        # holds the whitespace it swallowed.
        flat_ids = ids.flat_values
        lead = tf.gather(self._leading_spaces, flat_ids)
        trail = tf.gather(self._trailing_spaces, flat_ids)
        start, end = tf.cast(starts.flat_values, tf.int64), tf.cast(ends.flat_values, tf.int64)
        special = tf.reduce_any(flat_ids[:, None] == tf.constant(sorted(self.special_token_ids.values()))[None, :], 1)
        lead += tf.where(special, end - start - tf.gather(self._token_chars, flat_ids), 0)
        index = row_positions(ids)
        first = (index == 0) | (start == 0)
        # A space that add_prefix_space added stays in the first token's span.
        lead = tf.where(first & self.add_prefix_space & (lead == 1), tf.zeros_like(lead), lead)
        start = tf.where(lead > 0, tf.minimum(start + lead, end), start)
        end = tf.where((trail > 0) & (end >= trail), tf.maximum(end - trail, start), end)
        return ids, starts.with_flat_values(tf.cast(start, tf.int32)), ends.with_flat_values(tf.cast(end, tf.int32))

    def _tokenize_text(self, texts):
        chars = tf.strings.unicode_decode(texts, "UTF-8")  # (batch, chars), valid UTF-8 here
        # The span of input characters each character is aligned with.
        if self._nfc is None:
            origin_start = row_positions(chars)
            origin_end = origin_start + 1
        else:
            chars, origin_start, origin_end = self._nfc(chars)
        if self.add_prefix_space:
            first = chars[:, :1].to_tensor(default_value=0x20, shape=[None, 1])[:, 0]
            needs_space = tf.cast(first != 0x20, tf.int64)  # "" stays ""

            def prefixed(rows, head):
                added = tf.boolean_mask(head, needs_space > 0)
                return concat_rows(tf.RaggedTensor.from_row_lengths(added, needs_space, validate=False), rows)

            def first_of(values):
                return chars.with_flat_values(values)[:, :1].to_tensor(shape=[None, 1])[:, 0]

            # An added space is aligned with the first character, as in the reference.
            origin_start = prefixed(chars.with_flat_values(origin_start), first_of(origin_start)).flat_values
            origin_end = prefixed(chars.with_flat_values(origin_end), first_of(origin_end)).flat_values
            chars = prefixed(chars, tf.ones_like(first) * 0x20)
        cps = chars.flat_values
        char_row = row_ids(chars)
        position = tf.range(tf.size(cps, tf.int64)) - tf.gather(chars.row_starts(), char_row)

        # 1. Pre-tokenisation on the one-ASCII-character-per-class copy.
        cls = tf.gather(self._classes, tf.searchsorted(self._class_edges, cps, side="right") - 1)
        is_ws = cls == WHITESPACE
        last = tf.equal(position + 1, tf.gather(chars.row_lengths(), char_row))
        next_ws = _next(is_ws, True) | last
        ascii_letter = ((cps >= 65) & (cps <= 90)) | ((cps >= 97) & (cps <= 122))
        mapped = tf.where(
            cls == LETTER, tf.where(ascii_letter, cps, ord("a")),
            tf.where(
                cls == NUMBER, tf.where((cps >= 48) & (cps <= 57), cps, ord("0")),
                tf.where(
                    is_ws,
                    tf.where(next_ws, ord("\t"), tf.where(cps == 0x20, 0x20, ord("\n"))),
                    tf.where(cps == ord("'"), cps, ord("!")),
                ),
            ),
        )
        class_text = tf.strings.unicode_encode(chars.with_flat_values(mapped), "UTF-8")  # (batch,)
        _, piece_begin, piece_end = regex_split_with_offsets(class_text, _SPLIT, _SPLIT)
        # piece_begin, piece_end: (batch, pieces), character positions

        # 2. The UTF-8 bytes of each piece; unique pieces ("words") go to BPE.
        char_bytes = utf8_length(cps, tf.int64)
        byte_start = tf.cumsum(char_bytes, exclusive=True)  # (chars,) into all the batch's bytes
        byte_start = tf.concat([byte_start, [tf.reduce_sum(char_bytes)]], 0)
        piece_row = row_ids(piece_begin)
        row_char_start = tf.gather(chars.row_starts(), piece_row)
        piece_byte_start = tf.gather(byte_start, row_char_start + piece_begin.flat_values)
        # The pieces tile the characters, in order.
        piece_chars = tf.RaggedTensor.from_row_lengths(
            cps, piece_end.flat_values - piece_begin.flat_values, validate=False
        )
        pieces = tf.strings.unicode_encode(piece_chars, "UTF-8")  # (pieces,)
        words, piece_word = tf.unique(pieces, out_idx=tf.int64)
        word_bytes = tf.reshape(tf.io.decode_raw(tf.strings.bytes_split(words).flat_values, tf.uint8), [-1])
        word_lengths = tf.cast(tf.strings.length(words), tf.int64)
        tokens, token_start, token_end = self._byte_pair(tf.cast(word_bytes, tf.int64), word_lengths)
        # tokens, token_start, token_end: (words, None); byte positions in the word

        # 3. Pieces get their word's tokens; offsets from bytes to characters.
        ids = tf.gather(tokens, piece_word)  # (pieces, None)
        token_piece = row_ids(ids)
        first_byte = tf.gather(token_start, piece_word).flat_values + tf.gather(piece_byte_start, token_piece)
        last_byte = tf.gather(token_end, piece_word).flat_values - 1 + tf.gather(piece_byte_start, token_piece)
        first_char = tf.searchsorted(byte_start, first_byte, side="right") - 1
        last_char = tf.searchsorted(byte_start, last_byte, side="right") - 1
        starts, ends = tf.gather(origin_start, first_char), tf.gather(origin_end, last_char)
        ids = ids.flat_values

        token_row = tf.gather(piece_row, token_piece)
        row_tokens = tf.math.bincount(tf.cast(token_row, tf.int32), minlength=tf.shape(texts)[0], dtype=tf.int64)
        row_tokens = row_tokens[: tf.shape(texts)[0]]

        def by_row(flat):
            return tf.RaggedTensor.from_row_lengths(flat, row_tokens, validate=False)

        return by_row(tf.cast(ids, tf.int32)), by_row(tf.cast(starts, tf.int32)), by_row(tf.cast(ends, tf.int32))

    def _byte_pair(self, word_bytes, word_lengths):
        """BPE on every word at once: each round merges, in every word that
        still can, all occurrences of its lowest-ranked pair (left to right,
        so "a a a" -> "aa a"). Words leave the loop once nothing merges.

        Args:
            word_bytes: (bytes,) the words' bytes, word after word.
            word_lengths: (words,)

        Returns:
            (ids, starts, ends): ragged (words, None); starts and ends are byte
            positions in the word.
        """
        num_words = tf.size(word_lengths, tf.int64)
        by_word = tf.RaggedTensor.from_row_lengths(word_bytes, word_lengths, validate=False)
        word = row_ids(by_word)
        start = tf.range(tf.size(word_bytes, tf.int64)) - tf.gather(by_word.row_starts(), word)
        symbol = tf.gather(self._byte_ids, word_bytes)
        # Bytes missing from the vocabulary are dropped, as the reference
        # does without an unknown token in its model.
        known = symbol >= 0
        symbol, word, start = (tf.boolean_mask(t, known) for t in (symbol, word, start))
        end = start + 1
        none = self._num_merges
        vocab_size = len(self.vocabulary)

        def keep_going(symbol, *_):
            return tf.size(symbol) > 0

        def merge_round(symbol, word, start, end, done_symbol, done_word, done_start, done_end):
            same_word = tf.equal(word, _next(word, -1))
            pair_rank = self._merge_rank.lookup(symbol * vocab_size + _next(symbol, 0))
            pair_rank = tf.where(same_word, pair_rank, none)  # (symbols,): pair i, i+1
            best = tf.math.unsorted_segment_min(pair_rank, word, num_words)  # (words,)
            finished = tf.gather(best, word) >= none
            done = [tf.concat([d, tf.boolean_mask(t, finished)], 0) for d, t in (
                (done_symbol, symbol), (done_word, word), (done_start, start), (done_end, end))]
            active = ~finished
            symbol, word, start, end, pair_rank = (
                tf.boolean_mask(t, active) for t in (symbol, word, start, end, pair_rank)
            )
            candidate = tf.equal(pair_rank, tf.gather(best, word))
            longest = tf.reduce_max(tf.math.unsorted_segment_sum(tf.ones_like(word), word, num_words))
            candidate |= tf.cond(
                longest > 2 ** (self._levels + 1),
                lambda: (pair_rank < none) & self._nothing_lower_nearby(symbol, pair_rank),
                lambda: tf.zeros_like(candidate),
            )
            # Runs of one pair ("a a a") merge every other one from the left,
            # when the whole run can merge.
            index = tf.range(tf.size(candidate, tf.int64))
            run_start = ~tf.equal(pair_rank, _previous(pair_rank, -1))
            run = tf.cumsum(tf.cast(run_start, tf.int64)) - 1
            run_ok = tf.math.unsorted_segment_min(tf.cast(candidate, tf.int32), run, tf.size(candidate, tf.int64))
            run_first = tf.gather(tf.boolean_mask(index, run_start), run)
            take = tf.equal(tf.gather(run_ok, run), 1) & tf.equal((index - run_first) % 2, 0)
            symbol = tf.where(take, tf.gather(self._merge_result, pair_rank), symbol)
            end = tf.where(take, _next(end, 0), end)
            keep = ~_previous(take, False)
            symbol, word, start, end = (tf.boolean_mask(t, keep) for t in (symbol, word, start, end))
            return (symbol, word, start, end, *done)

        empty = tf.zeros([0], tf.int64)
        loop_vars = (symbol, word, start, end, empty, empty, empty, empty)
        out = tf.while_loop(
            keep_going, merge_round, loop_vars,
            shape_invariants=tuple(tf.TensorShape([None]) for _ in loop_vars),
            parallel_iterations=1,
        )
        order = tf.argsort(out[5], stable=True)  # words finish whole, in order within
        symbol, word, start, end = (tf.gather(t, order) for t in out[4:])

        def by_word(flat):
            return tf.RaggedTensor.from_value_rowids(flat, word, nrows=num_words, validate=False)

        return by_word(symbol), by_word(start), by_word(end)

    def _nothing_lower_nearby(self, symbol, pair_rank):
        """Whether no pair within the symbols' reach (see `_build_tables`)
        has a lower rank: (symbols,) bool."""
        size = tf.size(pair_rank)
        blocks = [pair_rank]  # blocks[k][i]: the lowest rank of pairs i .. i + 2**k - 1
        for k in range(self._levels + 1):
            padding = tf.fill([tf.minimum(2**k, size)], tf.constant(self._num_merges, tf.int64))
            blocks.append(tf.minimum(blocks[-1], tf.concat([blocks[-1][2**k:], padding], 0)))
        index = tf.range(size)
        windows = []  # windows[k][i]: the lowest rank of pairs i - 2**k .. i + 2**k
        for k in range(self._levels + 1):
            left = tf.maximum(index - 2**k, 0)
            right = tf.minimum(left + 1, size - 1)
            windows.append(tf.minimum(tf.gather(blocks[k + 1], left), tf.gather(blocks[k + 1], right)))
        level = tf.maximum(
            tf.gather(self._reach_level, symbol), tf.gather(self._reach_level, _next(symbol, 0))
        )
        windows = tf.stack(windows, axis=1)  # (symbols, levels + 1)
        return tf.gather(windows, level, batch_dims=1) >= pair_rank

    # -- Decoding -------------------------------------------------------------

    def detokenize(self, ids):
        """Token ids -> text, as transformers' `decode` (with its defaults for
        RoBERTa: special tokens kept, no clean-up of spaces): the tokens'
        bytes joined, invalid UTF-8 replaced by U+FFFD. A batch (list of
        lists or ragged tensor) gives a 1-D tf.string tensor; one sequence,
        a str."""
        batch, single = self._ids_as_batch(ids)
        pieces = batch.with_flat_values(tf.gather(self._token_bytes, batch.flat_values))
        text = tf.strings.reduce_join(pieces, axis=-1)  # (batch,)
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
        if single:
            return text[0].numpy().decode("utf-8")
        return text

    def continuation_ids(self):
        """Ids of the tokens that do not start a word (no leading "Ġ", the
        space), for whole-word masking as in fairseq's RoBERTa."""
        special = {*self.special_tokens.values(), *self.added_tokens, *self.normalized_tokens}
        return [i for i, t in enumerate(self.vocabulary) if not t.startswith("\u0120") and t not in special]

    def save_to_preset(self, preset_dir):
        return write_byte_pair_files(self, preset_dir)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=dict(self._token_to_id),
            merges=list(self.merges),
            **self._special_token_config(),
            add_prefix_space=self.add_prefix_space,
            trim_offsets=self.trim_offsets,
            special_tokens_in_text=self.special_tokens_in_text,
            mask_token_lstrip=self.mask_token_lstrip,
            added_tokens=list(self.added_tokens),
            normalized_tokens=list(self.normalized_tokens),
            normalization=self.normalization,
            packing_style=self.packing_style,
        )
        return config




def _next(x, fill):
    """x[i + 1] at i, `fill` at the end; same length as x (also when empty)."""
    return tf.concat([x, [fill]], 0)[1:]


def _previous(x, fill):
    return tf.concat([[fill], x], 0)[:-1]

