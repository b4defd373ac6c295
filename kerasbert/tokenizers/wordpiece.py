"""WordPiece (BERT, ELECTRA, MiniLM) in TensorFlow ops, identical to
transformers' fast BERT tokenizer."""

import os
import re

import keras

from kerasbert.tokenizers import unicode
from kerasbert.tokenizers.base import Tokenizer, utf8_length
from kerasbert.tokenizers.files.wordpiece import write_wordpiece_files
from kerasbert.utils.checks import abbreviated, check_bool, check_file, check_int, check_string
from kerasbert.utils.optional import tf, tf_text
from kerasbert.utils.ragged import join_rows, row_ids, row_positions, splits_of_rows

_WORD_KEY = 2**32  # word index * _WORD_KEY + byte offset: one sortable key


def _lookup_class(edges, classes, code_points):
    return tf.gather(classes, tf.searchsorted(edges, code_points, side="right") - 1)




@keras.saving.register_keras_serializable(package="kerasbert")
class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece tokenizer: normalisation, pre-tokenisation and
    greedy longest-match-first sub-words, all as TensorFlow ops.

    Normalisation and splitting follow transformers' fast BERT tokenizer
    character for character (their per-character rules are read off the
    Rust `tokenizers` library; see `kerasbert.tokenizers.unicode`).
    Sub-words come from `tensorflow_text.FastWordpieceTokenizer`. Words
    longer than `max_word_length` characters become the unknown token, as
    in BERT. Invalid UTF-8 bytes are replaced by U+FFFD, which BERT's text
    cleaning drops.

    Args:
        vocabulary: a list of tokens (id = position) or a `vocab.txt` path.
        lowercase: lowercase the text (uncased models).
        strip_accents: drop combining marks after decomposition; `None`
            follows `lowercase`, as BERT does.
        clean_text: drop control characters, map whitespace to spaces.
        tokenize_chinese_chars: split CJK ideographs into single tokens.
        unknown_token: a special token, which must be in the vocabulary.
        cls_token: a special token, which must be in the vocabulary.
        sep_token: a special token, which must be in the vocabulary.
        pad_token: a special token, which must be in the vocabulary.
        mask_token: a special token, which must be in the vocabulary.
        suffix_indicator: the prefix of word-continuing pieces ("##").
        max_word_length: longer words become `unknown_token`.
        special_tokens_in_text: special tokens written in the text (e.g.
            "[MASK]") become their ids, matched before normalisation, as in
            transformers; `False` tokenizes them as ordinary text.

    Examples:
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "qu", "##ick", "fox", "."]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> tokenizer(["The quick fox.", "Fox!"]).to_list()
    [[5, 6, 7, 8, 9], [8, 1]]
    >>> tokenizer.detokenize([5, 6, 7, 8, 9])
    'the quick fox.'
    """

    packing_style = "bert"  # [CLS] A [SEP] B [SEP]

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        clean_text=True,
        tokenize_chinese_chars=True,
        unknown_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        suffix_indicator="##",
        max_word_length=100,
        special_tokens_in_text=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(vocabulary, (str, os.PathLike)):
            with open(check_file("vocabulary", vocabulary, "a vocab.txt"), encoding="utf-8") as f:
                vocabulary = [line.rstrip("\n").rstrip("\r") for line in f]
            while vocabulary and vocabulary[-1] == "":
                vocabulary.pop()
        self._set_vocabulary(vocabulary)
        self.lowercase = check_bool("lowercase", lowercase)
        self.strip_accents = check_bool("strip_accents", strip_accents, allow_none=True)
        self.clean_text = check_bool("clean_text", clean_text)
        self.tokenize_chinese_chars = check_bool("tokenize_chinese_chars", tokenize_chinese_chars)
        self.unknown_token = unknown_token
        self.suffix_indicator = check_string("suffix_indicator", suffix_indicator, allow_empty=False)
        self.max_word_length = check_int("max_word_length", max_word_length, 1, 2**28)
        self.special_tokens_in_text = check_bool("special_tokens_in_text", special_tokens_in_text)
        self._set_special_tokens(cls_token, sep_token, pad_token, mask_token, unknown_token)
        self._set_special_tokens_in_text(self.special_tokens.values() if special_tokens_in_text else ())
        rules = unicode.BertCharacterRules(lowercase, strip_accents, clean_text, tokenize_chinese_chars)
        self._rules = {
            name: tf.constant(getattr(rules, name))
            for name in ("class_edges", "classes", "map_keys", "map_lengths",
                         "map_starts", "map_values", "split_edges", "split_classes")
        }
        self._check_pieces()
        try:
            self._wordpiece = tf_text.FastWordpieceTokenizer(
                vocab=self.vocabulary,
                suffix_indicator=suffix_indicator,
                max_bytes_per_word=4 * max_word_length + 4,
                token_out_type=tf.int32,
                unknown_token=unknown_token,
                no_pretokenization=True,
                support_detokenization=True,
            )
        except (RuntimeError, tf.errors.OpError) as error:  # tensorflow-text's own checks
            raise ValueError(f"vocabulary cannot make a WordPiece tokenizer: {str(error)[:300]}") from None

    def _check_pieces(self):
        """tensorflow-text's limits on a token: no NUL, at most 256 UTF-8
        bytes without the suffix indicator. A damaged vocab.txt breaks them."""
        for i, token in enumerate(self.vocabulary):
            piece = token[len(self.suffix_indicator):] if token.startswith(self.suffix_indicator) else token
            if "\x00" in token or len(piece.encode("utf-8")) > 256:
                raise ValueError(
                    f"vocabulary[{i}]={abbreviated(token)} cannot be a WordPiece token: tokens hold no NUL character "
                    "and at most 256 UTF-8 bytes (without the suffix indicator). Is the vocabulary file damaged?"
                )

    def _tokenize_text(self, texts):
        r = self._rules
        chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")  # (batch, chars)
        cps = chars.flat_values
        char_row = row_ids(chars)
        char_index = tf.range(tf.size(cps, tf.int64)) - tf.gather(chars.row_starts(), char_row)

        # 1. Normalise each character into 0..n characters.
        cls = _lookup_class(r["class_edges"], r["classes"], cps)
        slot = tf.searchsorted(r["map_keys"], cps, side="left")
        slot = tf.minimum(slot, tf.size(r["map_keys"]) - 1)
        mapped = tf.equal(tf.gather(r["map_keys"], slot), cps)
        mapped_length = tf.where(mapped, tf.gather(r["map_lengths"], slot), 1)
        length = tf.where(
            cls == unicode.REMOVE, 0,
            tf.where(cls == unicode.SPACE, 1,
                     tf.where(cls == unicode.CHINESE, mapped_length + 2, mapped_length)),
        )
        piece = tf.ragged.range(length)  # (chars, out)
        owner = row_ids(piece)
        j = piece.flat_values
        o_cls, o_cp = tf.gather(cls, owner), tf.gather(cps, owner)
        o_mapped, o_start = tf.gather(mapped, owner), tf.gather(tf.gather(r["map_starts"], slot), owner)
        k = tf.where(o_cls == unicode.CHINESE, j - 1, j)  # CJK: " c " around the mapped char
        # The spaces around CJK point outside the mapped run: clamp, then overwrite.
        index = tf.clip_by_value(tf.where(o_mapped, o_start + k, 0), 0, tf.size(r["map_values"]) - 1)
        mapped_value = tf.gather(r["map_values"], index)
        value = tf.where(o_mapped, mapped_value, o_cp)
        is_pad_space = (o_cls == unicode.SPACE) | (
            (o_cls == unicode.CHINESE) & ((j == 0) | (j == tf.gather(length, owner) - 1))
        )
        value = tf.where(is_pad_space, 32, value)  # normalised code points
        row = tf.gather(char_row, owner)
        origin = tf.gather(char_index, owner)  # index of the input character

        # 2. Split: whitespace separates, punctuation stands alone.
        kind = _lookup_class(r["split_edges"], r["split_classes"], value)
        is_word = kind == unicode.WORD
        previous_same_word = tf.concat(
            [[False], is_word[:-1] & is_word[1:] & tf.equal(row[:-1], row[1:])], 0
        )
        starts_word = (kind == unicode.PUNCTUATION) | (is_word & ~previous_same_word)
        word_id = tf.cumsum(tf.cast(starts_word, tf.int64)) - 1
        keep = kind != unicode.WHITESPACE
        value, row, origin, word_id = (
            tf.boolean_mask(t, keep) for t in (value, row, origin, word_id)
        )
        num_words = tf.reduce_sum(tf.cast(starts_word, tf.int64))
        word_chars = tf.RaggedTensor.from_value_rowids(value, word_id, nrows=num_words, validate=False)
        words = tf.strings.unicode_encode(word_chars, "UTF-8")  # (words,)
        word_length = word_chars.row_lengths()
        word_row = tf.gather(row, word_chars.row_starts())
        word_first = tf.gather(origin, word_chars.row_starts())
        word_end = tf.gather(origin, word_chars.row_limits() - 1) + 1
        too_long = word_length > self.max_word_length
        words = tf.where(too_long, self.unknown_token, words)

        # 3. Sub-words, with byte offsets inside each word -> input characters.
        ids, byte_starts, byte_ends = self._wordpiece.tokenize_with_offsets(words)
        char_bytes = tf.cast(utf8_length(value), tf.int64)
        byte_in_word = tf.cumsum(char_bytes, exclusive=True) - tf.gather(
            tf.cumsum(char_bytes, exclusive=True), tf.gather(word_chars.row_starts(), word_id)
        )
        char_keys = word_id * _WORD_KEY + byte_in_word  # sorted
        piece_word = row_ids(ids)
        first = tf.searchsorted(char_keys, piece_word * _WORD_KEY + tf.cast(byte_starts.flat_values, tf.int64), out_type=tf.int64)
        after = tf.searchsorted(char_keys, piece_word * _WORD_KEY + tf.cast(byte_ends.flat_values, tf.int64), out_type=tf.int64)
        first = tf.minimum(first, tf.size(origin, tf.int64) - 1)
        starts = tf.gather(origin, first)
        ends = tf.gather(origin, tf.maximum(after - 1, 0)) + 1
        long_piece = tf.gather(too_long, piece_word)
        ends = tf.where(long_piece, tf.gather(word_end, piece_word), ends)
        starts = tf.where(long_piece, tf.gather(word_first, piece_word), starts)

        row_splits = splits_of_rows(word_row, tf.shape(texts, tf.int64)[0])  # words of each text

        def by_row(flat):
            return join_rows(ids.with_flat_values(flat), row_splits)

        return by_row(ids.flat_values), by_row(tf.cast(starts, tf.int32)), by_row(tf.cast(ends, tf.int32))

    def detokenize(self, ids):
        """Token ids -> text, as transformers' `decode`: pieces starting with
        "##" join the previous token, and ".", ",", "?", "!" attach to the
        word before them. Special tokens are kept. A batch (list of lists or
        ragged tensor) gives a 1-D tf.string tensor; one sequence, a str."""
        batch, single = self._ids_as_batch(ids)
        tokens = self.id_to_token_tensor(batch.flat_values)
        position = row_positions(batch)
        prefix = re.escape(self.suffix_indicator)
        continues = tf.strings.regex_full_match(tokens, prefix + ".*") & (position > 0)
        attaches = tf.strings.regex_full_match(tokens, r"[.?!,]")
        tokens = tf.where(continues, tf.strings.regex_replace(tokens, "^" + prefix, ""), tokens)
        spaced = tf.where((position == 0) | continues | attaches, tokens, " " + tokens)
        text = tf.strings.reduce_join(batch.with_flat_values(spaced), axis=-1)
        if single:
            return text[0].numpy().decode("utf-8")
        return text

    def continuation_ids(self):
        """Ids of the pieces that continue a word ("##..."), for whole-word
        masking."""
        return [i for i, t in enumerate(self.vocabulary) if t.startswith(self.suffix_indicator)]

    def save_to_preset(self, preset_dir):
        return write_wordpiece_files(self, preset_dir)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocabulary=self.vocabulary,
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            clean_text=self.clean_text,
            tokenize_chinese_chars=self.tokenize_chinese_chars,
            **self._special_token_config(),
            suffix_indicator=self.suffix_indicator,
            max_word_length=self.max_word_length,
            special_tokens_in_text=self.special_tokens_in_text,
        )
        return config
