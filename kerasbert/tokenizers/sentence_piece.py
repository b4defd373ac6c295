"""SentencePiece unigram (ALBERT, XLM-RoBERTa, DeBERTa-v2/v3) in TensorFlow
ops, identical to transformers' fast tokenizers."""

import base64
import functools
import math

import keras

from kerasbert.tokenizers import unicode
from kerasbert.tokenizers.base import Tokenizer, utf8_length
from kerasbert.tokenizers.files.sentence_piece import SENTENCEPIECE_LAYOUTS, read_vocabulary, write_sentencepiece_files
from kerasbert.utils.checks import (
    abbreviated,
    check_bool,
    check_choice,
    check_string,
)
from kerasbert.utils.optional import tf
from kerasbert.utils.ragged import cut_runs, row_ids, run_starts, substitute

_METASPACE = 0x2581  # "▁", SentencePiece's word-boundary mark
_UNK_PENALTY = 10.0  # the unknown piece scores this much below the worst piece
# Longer words are segmented in runs of this many characters, each on its
# own: Viterbi takes one step per character of the longest word (~15 µs).
_MAX_SEGMENT = 2**17


@functools.lru_cache(maxsize=8)
def _rules(lowercase, strip_accents, charsmap):
    return unicode.UnigramCharacterRules(lowercase, strip_accents, charsmap)


def _in_class(rules, name, value):
    """(n,) code points -> (n,) whether each is in the character class
    `name` ("whitespace", "extend", "breaker") of `rules`."""
    return tf.gather(rules[f"{name}_classes"], tf.searchsorted(rules[f"{name}_edges"], value, side="right") - 1) > 0


@keras.saving.register_keras_serializable(package="kerasbert")
class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece unigram tokenizer (ALBERT, XLM-RoBERTa, DeBERTa-v2/v3)
    as TensorFlow ops, giving the ids and offsets of transformers' fast
    tokenizer built from the same SentencePiece model or `tokenizer.json`.

    The pipeline is transformers': "``" and "''" become '"'; NFKD and
    accent stripping (`strip_accents`); lowercasing (`lowercase`); the
    model's own precompiled normalisation (`precompiled_charsmap`, usually
    NFKC-based); trailing whitespace dropped (`strip_trailing_whitespace`);
    then words split on whitespace, each prefixed with "▁", and cut into the
    pieces of highest total score (Viterbi, ties going to the longer last
    piece as in `tokenizers`). Characters no piece covers become the unknown
    token, consecutive ones fused into one.

    `layout` names the transformers tokenizer whose files these are: how a
    model file's pieces are numbered, the file names `save_to_preset`
    writes, and the template (`packing_style`). The families' settings, as
    `Tokenizer.from_preset` reads them from their files:

    - ALBERT (`spiece.model`): the defaults.
    - XLM-RoBERTa (`sentencepiece.bpe.model`): `layout="xlm_roberta",
      lowercase=False, strip_accents=False, replace_quotes=False` and
      RoBERTa's special tokens (`<s> </s> <pad> <mask> <unk>`).
    - DeBERTa-v2/v3 (`spm.model`): `layout="deberta_v2", lowercase=False,
      strip_accents=False, replace_quotes=False, whitespace_split=False,
      strip_trailing_whitespace=True` and BERT's special tokens (`[CLS]
      [SEP] [PAD] [MASK] [UNK]`); `[MASK]`, not a piece of the model, is an
      added token.

    The per-character rules are composed from tables read off the reference
    `tokenizers` library (see `kerasbert.tokenizers.unicode`) and the model's
    charsmap, and agree with it on every code point.

    Args:
        vocabulary: a SentencePiece model path, its pieces numbered as
            `layout` says, or a list of `(piece, score)` pairs (id =
            position).
        lowercase: lowercase the text (ALBERT's `do_lower_case`).
        strip_accents: NFKD-decompose and drop combining marks (ALBERT's
            `keep_accents=False`).
        precompiled_charsmap: the model's normalisation table (bytes or
            base64); read from the model when `vocabulary` is a path.
        replace_quotes: turn "``" and "''" into '"', as ALBERT does.
        add_prefix_space: prefix every word with "▁".
        whitespace_split: split words on whitespace before adding "▁"
            (transformers v5). `False` reproduces the older `tokenizer.json`
            layout: spaces collapsed, then every space made a "▁" that starts
            a piece, so leading and trailing spaces leave "▁" tokens.
        split_on_metaspace: a "▁" inside a word starts a new piece.
        unknown_token: a special token, which must be in the vocabulary.
        cls_token: a special token, which must be in the vocabulary.
        sep_token: a special token, which must be in the vocabulary.
        pad_token: a special token, which must be in the vocabulary.
        mask_token: a special token, which must be in the vocabulary.
        lstrip_tokens: special tokens that swallow the whitespace on their
            left when written in the text.
        special_tokens_in_text: special and added tokens written in the
            text become their ids (matched before normalisation, as in
            transformers).
        strip_trailing_whitespace: drop the whitespace that ends each text
            (after the charsmap), as DeBERTa's normaliser does.
        added_tokens: special tokens numbered after the pieces, which the
            segmentation never produces (DeBERTa's `[MASK]`). `None`: for a
            model path, the special tokens the model lacks (as transformers
            adds them); for pairs, none.
        layout: "albert", "xlm_roberta" (fairseq's numbering: `<s> <pad> </s>
            <unk>`, the model's pieces from its fourth on shifted by one,
            `<mask>` last) or "deberta_v2" (the model's own ids).

    Examples:
    >>> pieces = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0),
    ...           ("[MASK]", 0.0), ("▁the", -1.0), ("▁cat", -2.0), ("s", -3.0), ("▁", -4.0)]
    >>> tokenizer = SentencePieceTokenizer(pieces)
    >>> tokenizer(["The cats!"]).to_list()
    [[5, 6, 7, 1]]
    >>> tokenizer.detokenize([5, 6, 7])
    'the cats'
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=True,
        precompiled_charsmap=None,
        replace_quotes=True,
        add_prefix_space=True,
        whitespace_split=True,
        split_on_metaspace=True,
        unknown_token="<unk>",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="<pad>",
        mask_token="[MASK]",
        lstrip_tokens=(),
        special_tokens_in_text=True,
        strip_trailing_whitespace=False,
        added_tokens=None,
        layout="albert",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.layout = check_choice("layout", layout, tuple(SENTENCEPIECE_LAYOUTS))
        # "bert" ([CLS] A [SEP] B [SEP]) or "roberta" (<s> A </s></s> B </s>, XLM-RoBERTa).
        self.packing_style = SENTENCEPIECE_LAYOUTS[self.layout]["style"]
        special = self._checked_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token)
        pieces, scores, self.added_tokens, self.precompiled_charsmap = read_vocabulary(
            vocabulary, self.layout, special, added_tokens, precompiled_charsmap
        )
        self._set_vocabulary(pieces + self.added_tokens)
        self.scores = scores
        self.lowercase = check_bool("lowercase", lowercase)
        self.strip_accents = check_bool("strip_accents", strip_accents)
        self.replace_quotes = check_bool("replace_quotes", replace_quotes)
        self.add_prefix_space = check_bool("add_prefix_space", add_prefix_space)
        self.whitespace_split = check_bool("whitespace_split", whitespace_split)
        self.split_on_metaspace = check_bool("split_on_metaspace", split_on_metaspace)
        self.strip_trailing_whitespace = check_bool("strip_trailing_whitespace", strip_trailing_whitespace)
        self.unknown_token = unknown_token
        if isinstance(lstrip_tokens, str) or not isinstance(lstrip_tokens, (list, tuple, set, frozenset)):
            raise TypeError(f"lstrip_tokens must be a list of special tokens; got {abbreviated(lstrip_tokens)}.")
        self.lstrip_tokens = [check_string(f"lstrip_tokens[{i}]", t) for i, t in enumerate(lstrip_tokens)]
        self.special_tokens_in_text = check_bool("special_tokens_in_text", special_tokens_in_text)
        self._set_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token)
        self._set_special_tokens_in_text(
            [*self.special_tokens.values(), *self.added_tokens] if special_tokens_in_text else (),
            lstrip=self.lstrip_tokens,
        )
        rules = _rules(self.lowercase, self.strip_accents, self.precompiled_charsmap)
        self._rules = {
            name: tf.constant(getattr(rules, name))
            for name in ("map_keys", "map_lengths", "map_starts", "map_values",
                         "charsmap_keys", "charsmap_lengths", "charsmap_starts", "charsmap_values",
                         "sequence_lengths", "sequence_starts", "sequence_values",
                         "extend_edges", "extend_classes", "breaker_edges", "breaker_classes",
                         "whitespace_edges", "whitespace_classes")
        }
        self._has_charsmap = bool(rules.charsmap)
        self._sequence_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                rules.sequence_keys, tf.range(len(rules.sequence_keys), dtype=tf.int32)
            ),
            default_value=-1,
        )
        # Every piece is a candidate, control pieces included, as in
        # `tokenizers` (added tokens are not); prefixes of pieces map to -1,
        # anything else to -2.
        codes = {}
        for piece in pieces:
            for end in range(1, len(piece)):
                codes.setdefault(piece[:end], -1)
        codes.update({piece: i for i, piece in enumerate(pieces)})
        self._prefix_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(list(codes), list(codes.values()), tf.string, tf.int32),
            default_value=-2,
        )
        self._scores = tf.constant(scores, tf.float64)
        self._unk_id = self._token_to_id[unknown_token]
        self._unk_score = min(scores) - _UNK_PENALTY
        self._max_piece_length = max(len(p) for p in pieces)

    # -- Normalisation ----------------------------------------------------------

    def _normalize(self, texts):
        """texts (batch,) -> normalised code points (n,), their text row and
        the index of the input character each came from."""
        r = self._rules
        chars = tf.strings.unicode_decode(texts, "UTF-8")  # (batch, chars)
        cps = tf.cast(chars.flat_values, tf.int32)
        row = row_ids(chars)
        index = tf.range(tf.size(cps, tf.int64)) - tf.gather(chars.row_starts(), row)
        dropped = tf.zeros_like(cps, tf.bool)
        if self.replace_quotes:
            # "``" and "''" -> '"', pairs taken left to right; the quote keeps
            # the offset of the pair's second character, as in transformers.
            for quote in (ord("`"), ord("'")):
                is_quote = tf.equal(cps, quote)
                same = tf.concat([[False], is_quote[:-1] & is_quote[1:] & tf.equal(row[:-1], row[1:])], 0)
                run_start = run_starts(is_quote & ~same)
                following = tf.concat([same[1:], [False]], 0)
                in_run = tf.range(tf.size(cps, tf.int64)) - run_start
                first = is_quote & (in_run % 2 == 0) & following
                second = is_quote & (in_run % 2 == 1)
                dropped |= first
                cps = tf.where(second, ord('"'), cps)
        # NFKD, accent stripping, lowercasing: per character.
        value, owner, _ = substitute(cps, r["map_keys"], r["map_lengths"], r["map_starts"], r["map_values"], dropped)
        row, index = tf.gather(row, owner), tf.gather(index, owner)
        if self._has_charsmap:
            value, row, index = self._apply_charsmap(value, row, index)
        if self.strip_trailing_whitespace:
            # Characters after the last non-whitespace one of their text go
            # (Unicode White_Space, as `tokenizers`' Strip takes it).
            position = tf.range(tf.size(value, tf.int64))
            last = tf.math.unsorted_segment_max(
                tf.where(_in_class(self._rules, "whitespace", value), tf.constant(-1, tf.int64), position),
                row, tf.shape(texts, tf.int64)[0],
            )  # (batch,), the lowest int64 for a text of whitespace only
            keep = position <= tf.gather(last, row)
            value, row, index = (tf.boolean_mask(t, keep) for t in (value, row, index))
        return value, row, index

    def _apply_charsmap(self, value, row, index):
        """The model's precompiled normalisation, as transformers applies it:
        a grapheme cluster of 2+ characters and < 6 UTF-8 bytes whose first
        character (or first 2 or 3 characters) has an entry is replaced as a
        whole; other characters one by one."""
        r = self._rules
        n = tf.size(value, tf.int64)
        same_row = tf.concat([[False], tf.equal(row[1:], row[:-1])], 0)
        previous = tf.concat([[0], value[:-1]], 0)
        extends = _in_class(r, "extend", value) & ~_in_class(r, "breaker", previous)
        joins = same_row & (extends | (tf.equal(value, 10) & tf.equal(previous, 13)))  # CR LF
        cluster_start = run_starts(~joins)  # (n,) index of each character's cluster start
        cluster = tf.cumsum(tf.cast(~joins, tf.int64)) - 1
        num_clusters = tf.reduce_sum(tf.cast(~joins, tf.int64))
        size = tf.math.unsorted_segment_sum(tf.ones_like(cluster), cluster, num_clusters)
        utf8 = tf.math.unsorted_segment_sum(tf.cast(utf8_length(value), tf.int64), cluster, num_clusters)
        whole = tf.gather((size >= 2) & (utf8 < 6), cluster) & ~joins  # (n,) at cluster starts
        # Entry of the first character, else of the first 2, else 3 characters.
        single_slot = tf.minimum(tf.searchsorted(r["charsmap_keys"], value), tf.size(r["charsmap_keys"]) - 1)
        single = tf.equal(tf.gather(r["charsmap_keys"], single_slot), value)
        cluster_size = tf.gather(size, cluster)
        # Sequence entries, looked up only at the (few) short multi-character clusters.
        at = tf.where(whole)[:, 0]  # (candidates,)

        def text_at(shift):
            return tf.strings.unicode_encode(tf.gather(value, tf.minimum(at + shift, n - 1))[:, None], "UTF-8")

        two = tf.strings.join([text_at(0), text_at(1)])
        three = tf.strings.join([two, text_at(2)])
        size_at = tf.gather(cluster_size, at)
        found = tf.where(size_at >= 2, self._sequence_table.lookup(two), -1)
        found = tf.where((found < 0) & (size_at >= 3), self._sequence_table.lookup(three), found)
        sequence = tf.tensor_scatter_nd_update(tf.fill([n], -1), at[:, None], found)  # (n,)
        replaced = whole & (single | (sequence >= 0))  # the cluster becomes one entry's string
        inside_replaced = tf.gather(replaced, cluster_start) & joins
        use_sequence = replaced & ~single
        # Lengths and sources of every character's output.
        length = tf.where(single, tf.gather(r["charsmap_lengths"], single_slot), 1)
        length = tf.where(use_sequence, tf.gather(r["sequence_lengths"], tf.maximum(sequence, 0)), length)
        length = tf.where(inside_replaced, 0, length)
        piece = tf.ragged.range(length)
        owner = row_ids(piece)
        j = tf.cast(piece.flat_values, tf.int32)
        from_sequence = tf.gather(use_sequence, owner)
        source = tf.where(
            from_sequence,
            tf.gather(r["sequence_starts"], tf.maximum(tf.gather(sequence, owner), 0)) + j,
            tf.gather(tf.gather(r["charsmap_starts"], single_slot), owner) + j,
        )
        out = tf.where(
            from_sequence,
            tf.gather(r["sequence_values"], tf.clip_by_value(source, 0, tf.size(r["sequence_values"]) - 1)),
            tf.where(
                tf.gather(single, owner),
                tf.gather(r["charsmap_values"], tf.clip_by_value(source, 0, tf.size(r["charsmap_values"]) - 1)),
                tf.gather(value, owner),
            ),
        )
        # A replaced cluster's k-th character keeps the place of the
        # cluster's k-th (or last) character, as transformers aligns it.
        aligned = tf.where(
            tf.gather(replaced, owner),
            owner + tf.minimum(tf.cast(j, tf.int64), tf.gather(cluster_size, owner) - 1),
            owner,
        )
        # Characters the charsmap deletes before a text's first output have
        # no earlier output to be charged to in transformers, which then
        # aligns every output character of the text with the character that
        # many places before its own.
        lead = owner - tf.gather(run_starts(~same_row), owner)  # (m,) place of the source in its text
        out_row = tf.gather(row, owner)
        first_out = tf.not_equal(out_row, tf.concat([[-1], out_row], 0)[:-1])
        aligned -= tf.gather(lead, run_starts(first_out))
        return out, tf.gather(row, aligned), tf.gather(index, aligned)

    def _pieces(self, value, row, origin):
        """Normalised characters -> the characters of each pre-token, with
        "▁" added: (chars, their pre-token id, origin), pre-tokens in order."""
        new_row = tf.concat([[True], tf.not_equal(row[1:], row[:-1])], 0)
        if self.whitespace_split:
            is_space = _in_class(self._rules, "whitespace", value)
            after_space = tf.concat([[True], is_space[:-1]], 0) | new_row
            word_start = ~is_space & after_space
            keep = ~is_space
        else:
            # Older layout: runs of spaces collapse to their last space, then
            # spaces become "▁" and the text is one pre-token.
            is_space = tf.equal(value, 32)
            next_space = tf.concat([is_space[1:] & ~new_row[1:], [False]], 0)
            keep = ~(is_space & next_space)
            value = tf.where(is_space, _METASPACE, value)
            word_start = new_row
        value, row, origin, word_start = (tf.boolean_mask(t, keep) for t in (value, row, origin, word_start))
        is_mark = tf.equal(value, _METASPACE)
        starts = word_start | (is_mark if self.split_on_metaspace else tf.zeros_like(is_mark))
        prefixed = word_start & ~is_mark if self.add_prefix_space else tf.zeros_like(word_start)
        expand = tf.ragged.range(1 + tf.cast(prefixed, tf.int32))  # a "▁" before prefixed chars
        owner = row_ids(expand)
        is_added = tf.gather(prefixed, owner) & tf.equal(expand.flat_values, 0)
        value = tf.where(is_added, _METASPACE, tf.gather(value, owner))
        starts = tf.gather(starts, owner) & (is_added | ~tf.gather(prefixed, owner))
        return value, tf.cumsum(tf.cast(starts, tf.int64)) - 1, tf.gather(row, owner), tf.gather(origin, owner)

    # -- Viterbi ----------------------------------------------------------------

    def _viterbi(self, value, piece_id):
        """Best segmentation of every pre-token at once.

        Args:
            value: (n,) code points; piece_id: (n,) their pre-token, sorted.

        Returns:
            (tokens,) first char index, last char index (into `value`) and
            id of each token, in text order.
        """
        n = tf.size(value, tf.int64)
        num_pieces = tf.reduce_max(tf.concat([piece_id, [-1]], 0)) + 1
        piece_length = tf.math.unsorted_segment_sum(tf.ones_like(piece_id), piece_id, num_pieces)
        piece_start = tf.cumsum(piece_length, exclusive=True)
        position = tf.range(n) - tf.gather(piece_start, piece_id)  # in the pre-token

        # The forward pass runs one character position at a time over all
        # pre-tokens, longest first so that the running ones are a prefix;
        # entry (t, rank) of the flat step-major layout is character t of the
        # pre-token of that rank.
        order = tf.argsort(piece_length, direction="DESCENDING", stable=True)
        rank = tf.scatter_nd(order[:, None], tf.range(num_pieces), [num_pieces])
        sorted_start, sorted_length = tf.gather(piece_start, order), tf.gather(piece_length, order)
        steps = tf.reduce_max(tf.concat([sorted_length, [0]], 0))
        ascending = tf.reverse(sorted_length, [0])
        active = num_pieces - tf.searchsorted(ascending, tf.range(steps), side="right", out_type=tf.int64)
        step_start = tf.cumsum(active, exclusive=True)  # (steps,)
        entry = tf.gather(step_start, position) + tf.gather(rank, piece_id)  # (n,) of each character

        # Candidates: grow substrings from every start while they are a
        # prefix of some piece; record the ones that are pieces.
        max_length = self._max_piece_length
        char_text = tf.strings.unicode_encode(tf.expand_dims(value, 1), "UTF-8")  # (n,)
        left = tf.gather(piece_length, piece_id) - position  # chars to the pre-token's end
        start, text = tf.range(n), char_text
        alive = tf.ones_like(start, tf.bool)
        found_at, found_id = [], []
        for length in range(1, max_length + 1):
            if length > 1:
                start, text = (tf.boolean_mask(t, alive) for t in (start, text))
                text = tf.strings.join([text, tf.gather(char_text, start + length - 1)])
            code = self._prefix_table.lookup(text)  # piece id, -1: a prefix only, -2: neither
            is_piece = code >= 0
            end = tf.gather(entry, tf.boolean_mask(start, is_piece) + length - 1)
            found_at.append(tf.stack([end, tf.fill(tf.shape(end), tf.constant(length - 1, tf.int64))], 1))
            found_id.append(tf.boolean_mask(code, is_piece))
            alive = (code >= -1) & (tf.gather(left, start) > length)
        found_at, found_id = tf.concat(found_at, 0), tf.concat(found_id, 0)
        # ids, scores: (n, K) by entry, the candidate of each length ending
        # there; a character no piece covers is the unknown token.
        ids = tf.tensor_scatter_nd_update(
            tf.concat([tf.fill([n, 1], self._unk_id), tf.fill([n, max_length - 1], -1)], 1), found_at, found_id
        )
        scores = tf.tensor_scatter_nd_update(
            tf.concat([tf.fill([n, 1], tf.constant(self._unk_score, tf.float64)),
                       tf.fill([n, max_length - 1], tf.constant(-math.inf, tf.float64))], 1),
            found_at, tf.gather(self._scores, found_id),
        )
        lengths_ = tf.range(1, max_length + 1, dtype=tf.int64)

        # Step t reads the scores of its `active[t]` entries and writes the
        # chosen lengths; element `steps` stays empty (concat() of no
        # elements, when there are no characters, fails).
        num_steps = tf.cast(steps, tf.int32)
        step_scores = tf.TensorArray(tf.float64, size=num_steps, infer_shape=False, element_shape=[None, max_length])
        step_scores = step_scores.split(scores, active)
        chosen_lengths = tf.TensorArray(tf.int64, size=num_steps + 1, infer_shape=False, element_shape=[None])
        chosen_lengths = chosen_lengths.write(num_steps, tf.zeros([0], tf.int64))

        def step(t, window, chosen_lengths):
            candidate = step_scores.read(t)  # (count, K)
            window = window[:tf.shape(candidate)[0]]
            candidate += window
            best = tf.reduce_max(candidate, axis=1)
            # Ties go to the longest last piece (the earliest start), as in `tokenizers`.
            chosen = tf.reduce_max(tf.where(tf.equal(candidate, best[:, None]), lengths_, 0), axis=1)
            window = tf.ensure_shape(tf.concat([best[:, None], window[:, :-1]], 1), [None, max_length])
            return t + 1, window, chosen_lengths.write(t, chosen)

        window = tf.concat(
            [tf.zeros([num_pieces, 1], tf.float64), tf.fill([num_pieces, max_length - 1], tf.constant(-math.inf, tf.float64))], 1
        )  # (pieces, K): best score at the last K boundaries, most recent first
        _, _, best_length = tf.while_loop(
            lambda t, *_: t < num_steps,
            step,
            [tf.constant(0, tf.int32), window, chosen_lengths],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, max_length]), None],
        )
        best_length = best_length.concat()  # (n,), by entry
        best_id = tf.gather(ids, tf.maximum(best_length - 1, 0), batch_dims=1)

        # Back-tracking by pointer doubling: entry (t, rank) points to the
        # entry ending before its piece; mark everything reachable from ends.
        entry_t = tf.searchsorted(step_start, tf.range(n), side="right", out_type=tf.int64) - 1
        entry_rank = tf.range(n) - tf.gather(step_start, entry_t)
        previous_t = entry_t - best_length
        pointer = tf.where(
            previous_t >= 0, tf.gather(step_start, tf.maximum(previous_t, 0)) + entry_rank, n
        )  # n: a sink
        pointer = tf.concat([pointer, [n]], 0)
        ends = tf.gather(step_start, tf.maximum(sorted_length - 1, 0)) + tf.range(num_pieces)
        marked = tf.scatter_nd(ends[:, None], tf.ones_like(ends, tf.int32), [n + 1])

        def double(marked, pointer, reach):
            marked = tf.tensor_scatter_nd_max(marked, pointer[:, None], marked)
            return marked, tf.gather(pointer, pointer), reach * 2

        marked, _, _ = tf.while_loop(
            lambda m, p, reach: reach < steps + 1, double,
            [marked, pointer, tf.constant(1, tf.int64)],
        )
        chosen = tf.where(marked[:n] > 0)[:, 0]  # (tokens,)
        last = tf.gather(sorted_start, tf.gather(entry_rank, chosen)) + tf.gather(entry_t, chosen)
        order = tf.argsort(last)
        chosen, last = tf.gather(chosen, order), tf.gather(last, order)
        first = last - tf.gather(best_length, chosen) + 1
        return first, last, tf.gather(best_id, chosen)

    def _segment_words(self, value, piece_id):
        """`_viterbi` on each distinct pre-token of the batch once (words
        repeat: far fewer characters to search), results copied back to
        every occurrence; same outputs as `_viterbi(value, piece_id)`."""
        num_pieces = tf.reduce_max(tf.concat([piece_id, [-1]], 0)) + 1
        chars = tf.RaggedTensor.from_value_rowids(value, piece_id, nrows=num_pieces, validate=False)
        distinct, which = tf.unique(tf.strings.unicode_encode(chars, "UTF-8"), out_idx=tf.int64)
        count = tf.size(distinct, tf.int64)
        exemplar = tf.math.unsorted_segment_min(tf.range(num_pieces), which, count)  # first occurrence
        unique_chars = tf.gather(chars, exemplar)  # (distinct, None)
        unique_piece = row_ids(unique_chars)
        first, last, ids = self._viterbi(unique_chars.flat_values, unique_piece)
        owner = tf.gather(unique_piece, first)  # (tokens,) the distinct pre-token of each token
        offset = tf.gather(unique_chars.row_starts(), owner)

        def per_piece(flat):  # (distinct tokens,) -> (all tokens,), in text order
            return tf.gather(
                tf.RaggedTensor.from_value_rowids(flat, owner, nrows=count, validate=False), which
            )

        first, last, ids = per_piece(first - offset), per_piece(last - offset), per_piece(ids)
        start = tf.gather(chars.row_starts(), row_ids(first))  # the pre-token's first character
        return first.flat_values + start, last.flat_values + start, ids.flat_values

    # -- The whole pipeline -----------------------------------------------------

    def _tokenize_text(self, texts):
        value, row, origin = self._normalize(texts)
        value, piece_id, row, origin = self._pieces(value, row, origin)
        first, last, ids = self._segment_words(value, cut_runs(piece_id, _MAX_SEGMENT))
        # Consecutive unknown characters of a pre-token fuse into one token.
        is_unk = tf.equal(ids, self._unk_id)
        token_piece = tf.gather(piece_id, first)
        # (x[i - 1] at i: concat then drop the last, right also without tokens.)
        joins = is_unk & tf.concat([[False], is_unk], 0)[:-1] & tf.equal(token_piece, tf.concat([[-1], token_piece], 0)[:-1])
        group = tf.cumsum(tf.cast(~joins, tf.int64)) - 1
        num = tf.reduce_sum(tf.cast(~joins, tf.int64))
        keep = ~joins
        ids = tf.boolean_mask(ids, keep)
        first = tf.boolean_mask(first, keep)
        last = tf.math.unsorted_segment_max(last, group, num)
        starts = tf.gather(origin, first)
        ends = tf.gather(origin, last) + 1
        token_row = tf.gather(row, first)
        nrows = tf.shape(texts, tf.int64)[0]

        def by_row(flat):
            return tf.RaggedTensor.from_value_rowids(flat, token_row, nrows=nrows, validate=False)

        return by_row(ids), by_row(tf.cast(starts, tf.int32)), by_row(tf.cast(ends, tf.int32))

    def detokenize(self, ids):
        """Token ids -> text, as transformers' `decode`: pieces joined, "▁"
        made a space, the first token's leading space dropped. Special tokens
        are kept. A batch gives a 1-D tf.string tensor; one sequence, a str."""
        batch, single = self._ids_as_batch(ids)
        text = tf.strings.reduce_join(batch.with_flat_values(self.id_to_token_tensor(batch.flat_values)), axis=-1)
        text = tf.strings.regex_replace(text, "\u2581", " ")
        if self.add_prefix_space:
            text = tf.strings.regex_replace(text, "^ ", "")
        if single:
            return text[0].numpy().decode("utf-8")
        return text

    def continuation_ids(self):
        """Ids of the pieces that continue a word (no leading "▁"), for
        whole-word masking."""
        specials = {*self.special_tokens.values(), *self.added_tokens}
        return [i for i, t in enumerate(self.vocabulary) if not t.startswith("\u2581") and t not in specials]

    def save_to_preset(self, preset_dir):
        return write_sentencepiece_files(self, preset_dir)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=[[p, s] for p, s in zip(self.vocabulary, self.scores)],
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            precompiled_charsmap=(
                base64.b64encode(self.precompiled_charsmap).decode("ascii") if self.precompiled_charsmap else None
            ),
            replace_quotes=self.replace_quotes,
            add_prefix_space=self.add_prefix_space,
            whitespace_split=self.whitespace_split,
            split_on_metaspace=self.split_on_metaspace,
            **self._special_token_config(),
            lstrip_tokens=self.lstrip_tokens,
            special_tokens_in_text=self.special_tokens_in_text,
            strip_trailing_whitespace=self.strip_trailing_whitespace,
            added_tokens=self.added_tokens,
            layout=self.layout,
        )
        return config
