"""Bad inputs at every preprocessing entry point: each gives its documented
result (truncation, an empty batch, U+FFFD for invalid UTF-8...) or a
TypeError / ValueError naming the argument and the value, never a
framework error, a crash, garbage or a hang.

Cases are rows of (input, expected): `Raises(error, *words)` (the words
must all appear in the message), or a function checking the result.
"""

import os
import time

import numpy as np
import pytest
import tensorflow as tf
from helpers import tensorflow_pass_only

from kerasbert.preprocessing import (
    MaskedLMMasker,
    MaskedLMPreprocessor,
    Packer,
    QuestionAnsweringPreprocessor,
    TextPreprocessor,
    TokenClassificationPreprocessor,
    bucket_by_length,
    decode_answers,
    make_sentence_pairs,
    pack_documents,
    padding_fraction,
    pretraining_examples,
    read_documents,
)
from kerasbert.tokenizers import (
    BytePairTokenizer,
    SentencePieceTokenizer,
    WordPieceTokenizer,
    sentence_piece,
    train_bpe,
    train_sentencepiece,
    train_wordpiece,
)
from kerasbert.tokenizers.byte_pair import bytes_to_unicode
from kerasbert.tokenizers.files.sentence_piece import read_sentencepiece_model

# TensorFlow ops and Python, the same whatever the Keras backend: checked once.
pytestmark = tensorflow_pass_only


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """conftest's, without re-seeding before every test: a new global seed
    makes every tokenizer retrace its graph (0.7 s a call), and nothing
    here depends on the seed."""
    monkeypatch.setenv("KERASBERT_HOME", str(tmp_path_factory.getbasetemp() / "kerasbert_home"))


class Raises:
    def __init__(self, error, *words):
        self.error, self.words = error, words

    def __repr__(self):
        return f"Raises({self.error.__name__}, {', '.join(map(repr, self.words))})"


def check(call, expected):
    """Runs `call`; `expected` is a Raises or a function of the result."""
    if isinstance(expected, Raises):
        with pytest.raises(expected.error) as info:
            call()
        assert not isinstance(info.value, tf.errors.OpError), info.value
        message = str(info.value)
        for word in expected.words:
            assert word in message, f"{word!r} not in {message!r}"
    else:
        expected(call())


# --- Tiny tokenizers of each kind --------------------------------------------

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def wordpiece():
    return WordPieceTokenizer(SPECIALS + list(LETTERS) + ["##" + c for c in LETTERS] + ["word"])


def sentencepiece_tokenizer(extra=()):
    pieces = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0), ("\u2581", -3.0)]
    pieces += [("\u2581" + c, -2.0) for c in LETTERS] + [(c, -2.5) for c in LETTERS] + [("\u2581word", -1.0)]
    return SentencePieceTokenizer(pieces + list(extra))


def byte_pair():
    symbols = list(bytes_to_unicode().values())
    vocabulary = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>"] + symbols + ["wo", "\u0120wo"])}
    return BytePairTokenizer(vocabulary, ["w o", "\u0120 wo"])


BUILDERS = {"wordpiece": wordpiece, "sentencepiece": sentencepiece_tokenizer, "byte_pair": byte_pair}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def tokenizer(request):
    return BUILDERS[request.param]()


@pytest.fixture(scope="module")
def wp():
    return wordpiece()


def in_vocabulary(tokenizer, ids):
    values = ids.flat_values if isinstance(ids, tf.RaggedTensor) else ids
    values = values.numpy()
    assert values.size == 0 or 0 <= values.min() <= values.max() < tokenizer.vocabulary_size()


# --- Tokenizer calls -------------------------------------------------------------

def same_as(reference):
    """The result equals the tokenizer's result on `reference` (set per test)."""
    return ("same_as", reference)


TEXT_CASES = {
    "empty batch": ([], lambda ids: ids.shape[0] == 0 or pytest.fail(ids)),
    "empty string": ("", lambda ids: ids.shape == (0,) or pytest.fail(ids)),
    "batch of empty": ([""], lambda ids: ids.to_list() == [[]] or pytest.fail(ids)),
    "bare string is one example": ("a b", same_as(["a b"])),
    "bare bytes": (b"a b", same_as(["a b"])),
    "numpy string scalar": (np.array("a b"), same_as(["a b"])),
    "numpy unicode array": (np.array(["a b", "c"]), same_as(["a b", "c"])),
    "numpy object array": (np.array(["a b", "c"], dtype=object), same_as(["a b", "c"])),
    "tuple": (("a b", "c"), same_as(["a b", "c"])),
    "tf.string tensor": (tf.constant(["a b", "c"]), same_as(["a b", "c"])),
    "tf.string scalar": (tf.constant("a b"), same_as(["a b"])),
    "invalid UTF-8 is U+FFFD": ([b"ab \xff\xfe c"], same_as(["ab \ufffd\ufffd c"])),
    "lone surrogate is invalid UTF-8": (["ab \ud800 c"], same_as([b"ab \xed\xa0\x80 c"])),
    "None": (None, Raises(TypeError, "inputs", "None")),
    "int": (5, Raises(TypeError, "inputs", "5")),
    "float": (2.5, Raises(TypeError, "inputs", "2.5")),
    "bool": (True, Raises(TypeError, "inputs", "True")),
    "list of ints": ([1, 2], Raises(TypeError, "inputs", "int 1", "numbers are not text")),
    "list with None": (["a", None], Raises(TypeError, "inputs", "None")),
    "nested lists": ([["a"], ["b"]], Raises(TypeError, "inputs", "list ['a']")),
    "numpy 2-D strings": (np.array([["a", "b"]]), Raises(ValueError, "inputs", "1-D batch", "(1, 2)")),
    "tf 2-D strings": (tf.constant([["a"], ["b"]]), Raises(ValueError, "inputs", "1-D batch", "(2, 1)")),
    "ragged strings": (tf.ragged.constant([["a"], ["b", "c"]]), Raises(ValueError, "inputs", "1-D batch")),
    "numpy ints": (np.array([1, 2]), Raises(TypeError, "inputs", "int64 numpy array")),
    "tf ints": (tf.constant([1, 2]), Raises(TypeError, "inputs", "int32 tensor")),
    "dict": ({"a": 1}, Raises(TypeError, "inputs", "{'a': 1}")),
    "set": ({"a"}, Raises(TypeError, "inputs", "{'a'}")),
    "generator": ((t for t in ["a"]), Raises(TypeError, "inputs", "generator")),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
def test_tokenizer_inputs(tokenizer, case):
    value, expected = TEXT_CASES[case]
    if isinstance(expected, tuple):  # same_as
        reference = tokenizer(expected[1])
        reference = reference[0] if isinstance(value, (str, bytes, np.ndarray)) and np.ndim(value) == 0 else reference
        if isinstance(value, tf.Tensor) and value.shape.rank == 0:
            reference = reference[0]

        def expected(ids):
            in_vocabulary(tokenizer, ids)
            as_list = ids.to_list() if isinstance(ids, tf.RaggedTensor) else ids.numpy().tolist()
            wanted = reference.to_list() if isinstance(reference, tf.RaggedTensor) else reference.numpy().tolist()
            assert as_list == wanted
    check(lambda: tokenizer(value), expected)


def test_nul_and_whitespace_only_text(tokenizer):
    ids, starts, ends = tokenizer.tokenize_with_offsets(["a\x00b \x00", " \t\n", "\x00"])
    in_vocabulary(tokenizer, ids)
    text = "a\x00b \x00"
    # Offsets stay inside the text and in order, NULs or not.
    for start, end in zip(starts.to_list()[0], ends.to_list()[0]):
        assert 0 <= start <= end <= len(text)
    if not isinstance(tokenizer, BytePairTokenizer):  # byte-level BPE keeps whitespace as tokens
        assert ids.to_list()[1] == []


def test_a_megabyte_of_text_is_quick(tokenizer):
    texts = ["word " * 200_000, ("lorem ipsum, dolor sit amet. " * 40_000)[:1_000_000]]
    if not isinstance(tokenizer, SentencePieceTokenizer):  # see test_sentencepiece_cuts_very_long_words
        texts.append("x" * 1_000_000)
    start = time.perf_counter()
    ids = tokenizer(texts)
    assert time.perf_counter() - start < 60
    in_vocabulary(tokenizer, ids)
    assert ids.row_lengths().numpy()[:2].min() > 100_000


def test_sentencepiece_cuts_very_long_words(monkeypatch):
    """Words over _MAX_SEGMENT characters are segmented in runs of that many
    (Viterbi takes a step per character: a 1 MB word takes seconds, not
    minutes); no token crosses a cut."""
    text = ["abcdefghij ab"]  # "▁abcdefghij": runs "▁abc" "defg" "hij" when cut at 4
    whole = sentencepiece_tokenizer(extra=[("cdef", -0.5)])
    assert whole.token_to_id("cdef") in whole(text).to_list()[0]
    monkeypatch.setattr(sentence_piece, "_MAX_SEGMENT", 4)
    cut = sentencepiece_tokenizer(extra=[("cdef", -0.5)])
    ids, starts, ends = cut.tokenize_with_offsets(text)
    assert cut.token_to_id("cdef") not in ids.to_list()[0]
    spans = list(zip(starts.to_list()[0], ends.to_list()[0]))
    assert all(not (s < 3 < e or s < 7 < e) for s, e in spans), spans
    assert spans == [(0, 1), (1, 2), (2, 3)] + [(i, i + 1) for i in range(3, 10)] + [(11, 12), (12, 13)]


def test_text_full_of_special_tokens_is_linear(wp):
    text = "[MASK] a " * 110_000  # 1 MB, 220,000 segments
    start = time.perf_counter()
    ids = wp([text])
    assert time.perf_counter() - start < 30
    assert ids.to_list()[0][:4] == [wp.token_to_id("[MASK]"), wp.token_to_id("a")] * 2


def test_tokenizers_in_graphs(tokenizer):
    dataset = tf.data.Dataset.from_tensor_slices(["a b", "", "\x00", "[MASK]"]).batch(4).map(tokenizer)
    batch = next(iter(dataset))
    assert batch.shape[0] == 4
    with pytest.raises(TypeError, match="int32 tensor"):
        tf.data.Dataset.from_tensor_slices([1, 2]).batch(2).map(tokenizer)


# --- detokenize, token_to_id, id_to_token -------------------------------------

ID_CASES = {
    "empty sequence": ([], lambda text: text == "" or pytest.fail(text)),
    "empty rows": ([[], []], lambda texts: texts.numpy().tolist() == [b"", b""] or pytest.fail(texts)),
    "one sequence": ([5, 6], lambda text: isinstance(text, str) or pytest.fail(text)),
    "numpy ints": (np.array([[5, 6]], np.uint8), lambda texts: texts.shape == (1,) or pytest.fail(texts)),
    "tf int64": (tf.constant([[5, 6]], tf.int64), lambda texts: texts.shape == (1,) or pytest.fail(texts)),
    "ragged": (tf.ragged.constant([[5], [6, 7]]), lambda texts: texts.shape == (2,) or pytest.fail(texts)),
    "None": (None, Raises(TypeError, "ids", "None")),
    "int": (5, Raises(TypeError, "ids", "5")),
    "string": ("abc", Raises(TypeError, "ids", "'abc'")),
    "strings": ([["a"]], Raises(TypeError, "ids[0][0]", "'a'")),
    "floats": ([[5.0]], Raises(TypeError, "ids[0][0]", "5.0")),
    "bools": ([[True]], Raises(TypeError, "ids[0][0]", "True")),
    "None inside": ([5, None], Raises(TypeError, "ids[1]", "None")),
    "negative": ([[5, -1]], Raises(ValueError, "ids[0][1]=-1", "vocabulary")),
    "too large": ([[10**6]], Raises(ValueError, "ids[0][0]=1000000", "vocabulary")),
    "beyond int64": ([[2**70]], Raises(ValueError, "ids[0][0]", "vocabulary")),
    "rank 3": ([[[5]]], Raises(ValueError, "ids", "[5]")),
    "mix of ids and lists": ([5, [6]], Raises(TypeError, "ids", "mix")),
    "tensor out of range": (tf.constant([[5, 10**6]]), Raises(ValueError, "ids", "1000000", "(0, 1)")),
    "ragged rank 3": (tf.ragged.constant([[[5]]]), Raises(ValueError, "ids", "rank")),
    "float tensor": (tf.constant([[5.0]]), Raises(TypeError, "ids", "float32")),
    "string tensor": (tf.constant([["a"]]), Raises(TypeError, "ids", "string")),
    "numpy floats": (np.array([[5.5]]), Raises(TypeError, "ids", "float64")),
    "dict": ({"a": 1}, Raises(TypeError, "ids", "{'a': 1}")),
}


@pytest.mark.parametrize("case", sorted(ID_CASES))
def test_detokenize_inputs(tokenizer, case):
    value, expected = ID_CASES[case]
    check(lambda: tokenizer.detokenize(value), expected)


@pytest.mark.parametrize("call, expected", [
    (lambda t: t.token_to_id(None), Raises(TypeError, "token", "None")),
    (lambda t: t.token_to_id(b"[MASK]"), Raises(TypeError, "token", "bytes")),
    (lambda t: t.token_to_id("no such token"), Raises(ValueError, "token='no such token'", "vocabulary")),
    (lambda t: t.id_to_token(-1), Raises(ValueError, "token_id", "-1")),
    (lambda t: t.id_to_token(10**6), Raises(ValueError, "token_id", "1000000")),
    (lambda t: t.id_to_token(1.5), Raises(ValueError, "token_id", "1.5")),
    (lambda t: t.id_to_token("3"), Raises(ValueError, "token_id", "'3'")),
    (lambda t: t.id_to_token(True), Raises(ValueError, "token_id", "True")),
    (lambda t: t.id_to_token(np.int64(2)), lambda token: token in ("[CLS]", "</s>") or pytest.fail(token)),
])
def test_vocabulary_lookups(tokenizer, call, expected):
    check(lambda: call(tokenizer), expected)


# --- Tokenizer constructors and files ------------------------------------------

WP_VOCAB = SPECIALS + ["a", "##b"]
SP_PIECES = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0), ("\u2581a", -1.0)]
BPE_VOCAB = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 6, "ab": 7}


@pytest.mark.parametrize("build, expected", [
    (lambda: WordPieceTokenizer(None), Raises(TypeError, "vocabulary", "None")),
    (lambda: WordPieceTokenizer(5), Raises(TypeError, "vocabulary", "5")),
    (lambda: WordPieceTokenizer("/no/such/vocab.txt"), Raises(FileNotFoundError, "vocabulary", "/no/such/vocab.txt")),
    (lambda: WordPieceTokenizer(os.path.dirname(__file__)), Raises(ValueError, "vocabulary", "directory")),
    (lambda: WordPieceTokenizer(WP_VOCAB + [5]), Raises(TypeError, "vocabulary[7]", "5")),
    (lambda: WordPieceTokenizer(WP_VOCAB + ["a"]), Raises(ValueError, "vocabulary[7]='a'", "vocabulary[5]")),
    (lambda: WordPieceTokenizer(WP_VOCAB, max_word_length=0), Raises(ValueError, "max_word_length", "0")),
    (lambda: WordPieceTokenizer(WP_VOCAB, max_word_length="9"), Raises(ValueError, "max_word_length", "'9'")),
    (lambda: WordPieceTokenizer(WP_VOCAB, suffix_indicator=""), Raises(TypeError, "suffix_indicator", "''")),
    (lambda: WordPieceTokenizer(WP_VOCAB, lowercase="no"), Raises(TypeError, "lowercase", "'no'")),
    (lambda: WordPieceTokenizer(WP_VOCAB, strip_accents=1), Raises(TypeError, "strip_accents", "1")),
    (lambda: WordPieceTokenizer(WP_VOCAB, unknown_token=None), Raises(TypeError, "unknown_token", "None")),
    (lambda: SentencePieceTokenizer(None), Raises(TypeError, "vocabulary", "None")),
    (lambda: SentencePieceTokenizer([]), Raises(ValueError, "vocabulary", "empty")),
    (lambda: SentencePieceTokenizer("/no/such.model"), Raises(FileNotFoundError, "vocabulary", "/no/such.model")),
    (lambda: SentencePieceTokenizer(SP_PIECES + [("b", "x")]), Raises(ValueError, "vocabulary[6]", "'x'")),
    (lambda: SentencePieceTokenizer(SP_PIECES + [("b", float("nan"))]), Raises(ValueError, "vocabulary[6]", "nan")),
    (lambda: SentencePieceTokenizer(SP_PIECES + [("\u2581a", -2.0)]), Raises(ValueError, "vocabulary[6]", "repeats")),
    (lambda: SentencePieceTokenizer(SP_PIECES, precompiled_charsmap="!!"), Raises(ValueError, "precompiled_charsmap")),
    (lambda: SentencePieceTokenizer(SP_PIECES, lstrip_tokens="[MASK]"), Raises(TypeError, "lstrip_tokens", "'[MASK]'")),
    (lambda: SentencePieceTokenizer(SP_PIECES, lowercase=None), Raises(TypeError, "lowercase", "None")),
    (lambda: SentencePieceTokenizer(SP_PIECES, layout="xlmr"), Raises(ValueError, "layout='xlmr'", "xlm_roberta")),
    (lambda: SentencePieceTokenizer(SP_PIECES, layout="xlm_roberta"), Raises(ValueError, "xlm_roberta", "fairseq")),
    (lambda: SentencePieceTokenizer(SP_PIECES, added_tokens="[X]"), Raises(TypeError, "added_tokens", "'[X]'")),
    (lambda: SentencePieceTokenizer(SP_PIECES, added_tokens=["[X]", None]), Raises(TypeError, "added_tokens[1]")),
    (lambda: SentencePieceTokenizer(SP_PIECES, added_tokens=["[CLS]"]), Raises(ValueError, "added_tokens[0]='[CLS]'")),
    (lambda: SentencePieceTokenizer(SP_PIECES, strip_trailing_whitespace=1),
     Raises(TypeError, "strip_trailing_whitespace", "1")),
    (lambda: SentencePieceTokenizer(SP_PIECES[1:], added_tokens=["<pad>"])(["a<pad>"]),
     lambda ids: ids.to_list() == [[4, 5]] or pytest.fail(ids)),
    (lambda: BytePairTokenizer(None, []), Raises(TypeError, "vocabulary", "None")),
    (lambda: BytePairTokenizer("/no/vocab.json", []), Raises(FileNotFoundError, "vocabulary", "/no/vocab.json")),
    (lambda: BytePairTokenizer({**BPE_VOCAB, "c": 8.0}, []), Raises(TypeError, "vocabulary", "'c': 8.0")),
    (lambda: BytePairTokenizer({**BPE_VOCAB, "c": 9}, []), Raises(ValueError, "vocabulary ids", "0..n-1")),
    (lambda: BytePairTokenizer(BPE_VOCAB, None), Raises(TypeError, "merges", "None")),
    (lambda: BytePairTokenizer(BPE_VOCAB, "a b"), Raises(FileNotFoundError, "merges='a b'")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [5]), Raises(ValueError, "merges[0]=5")),
    (lambda: BytePairTokenizer(BPE_VOCAB, ["a c"]), Raises(ValueError, "merges[0]='a c'", "'c'")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], trim_offsets="yes"), Raises(TypeError, "trim_offsets", "'yes'")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [])(["ab"]), lambda ids: ids.to_list() == [[5, 6]] or pytest.fail(ids)),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], normalization="NFKC"), Raises(ValueError, "normalization='NFKC'", "NFC")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], packing_style="xlnet"), Raises(ValueError, "packing_style", "bert")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], added_tokens="ab"), Raises(TypeError, "added_tokens", "'ab'")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], normalized_tokens=["  "]),
     Raises(ValueError, "normalized_tokens[0]='  '", "not in the vocabulary")),
    (lambda: BytePairTokenizer(BPE_VOCAB, [], normalized_tokens=["ab"])(["abab"]),
     lambda ids: ids.to_list() == [[7, 7]] or pytest.fail(ids)),
])
def test_tokenizer_constructors(build, expected):
    check(build, expected)


def test_training_arguments_are_checked_before_training(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("one line of text\nanother line\n", encoding="utf-8")
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n", encoding="utf-8")
    out = str(tmp_path / "out")
    for train, size in [(train_wordpiece, 30), (train_bpe, 300), (train_sentencepiece, 30)]:
        for kwargs, expected in [
            (dict(files=[]), Raises(ValueError, "files=[]")),
            (dict(files=None), Raises(TypeError, "files", "None")),
            (dict(files=[str(text), 5]), Raises(TypeError, "files[1]", "5")),
            (dict(files=str(tmp_path / "*.md")), Raises(FileNotFoundError, "files=", "*.md")),
            (dict(files=str(tmp_path)), Raises(ValueError, "files", "directory")),
            (dict(files=str(empty)), Raises(ValueError, "files", "empty")),
            (dict(vocabulary_size=0), Raises(ValueError, "vocabulary_size", "0")),
            (dict(vocabulary_size="300"), Raises(ValueError, "vocabulary_size", "'300'")),
            (dict(output_dir=str(text)), Raises(ValueError, "output_dir", "is a file")),
            (dict(output_dir=None), Raises(TypeError, "output_dir", "None")),
        ]:
            arguments = dict(files=str(text), vocabulary_size=size, output_dir=out) | kwargs
            check(lambda train=train, arguments=arguments: train(**arguments), expected)
    check(lambda: train_wordpiece(str(text), 30, out, min_frequency=-1), Raises(ValueError, "min_frequency", "-1"))
    check(lambda: train_bpe(str(text), 300, out, add_prefix_space="no"), Raises(TypeError, "add_prefix_space"))
    check(lambda: train_sentencepiece(str(text), 30, out, character_coverage=2.0),
          Raises(ValueError, "character_coverage", "2.0"))
    check(lambda: train_sentencepiece(str(blank), 30, out), Raises(ValueError, "files", "whitespace"))
    assert not os.path.exists(out)  # nothing was trained or written


def test_byte_pair_without_merges_works():
    symbols = list(bytes_to_unicode().values())
    tokenizer = BytePairTokenizer({t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>"] + symbols)}, [])
    assert tokenizer(["ab"]).to_list() == [[5 + symbols.index("a"), 5 + symbols.index("b")]]


@pytest.mark.parametrize("path, expected", [
    (None, Raises(TypeError, "path", "None")),
    ("/no/such/spiece.model", Raises(FileNotFoundError, "path", "/no/such/spiece.model")),
    (os.path.dirname(__file__), Raises(ValueError, "path", "directory")),
    (__file__, Raises(ValueError, "not a SentencePiece model file")),
])
def test_read_sentencepiece_model(path, expected):
    check(lambda: read_sentencepiece_model(path), expected)


# --- Packer ---------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, expected", [
    (dict(sequence_length=0), Raises(ValueError, "sequence_length", "got 0")),
    (dict(sequence_length=-1), Raises(ValueError, "sequence_length", "got -1")),
    (dict(sequence_length="8"), Raises(ValueError, "sequence_length", "'8'")),
    (dict(sequence_length=8.0), Raises(ValueError, "sequence_length", "8.0")),
    (dict(sequence_length=True), Raises(ValueError, "sequence_length", "True")),
    (dict(sequence_length=10**12), Raises(ValueError, "sequence_length", "2**31 - 1")),
    (dict(cls_id=-1), Raises(ValueError, "cls_id", "-1")),
    (dict(cls_id="[CLS]"), Raises(ValueError, "cls_id", "'[CLS]'")),
    (dict(sep_id=2**40), Raises(ValueError, "sep_id", str(2**40))),
    (dict(pad_id=None), Raises(ValueError, "pad_id", "None")),
    (dict(pad_id=40, vocabulary_size=30), Raises(ValueError, "pad_id", "40", "vocabulary of 30")),
    (dict(vocabulary_size=0), Raises(ValueError, "vocabulary_size", "0")),
    (dict(style=None), Raises(ValueError, "style=None", "roberta")),
    (dict(truncate="middle"), Raises(ValueError, "truncate='middle'", "round_robin")),
    (dict(pad_to_sequence_length="no"), Raises(TypeError, "pad_to_sequence_length", "'no'")),
    (dict(sequence_length=np.int64(8)), lambda packer: packer.sequence_length == 8 or pytest.fail(packer)),
])
def test_packer_arguments(kwargs, expected):
    check(lambda: Packer(**(dict(sequence_length=8, cls_id=2, sep_id=3, pad_id=0) | kwargs)), expected)


def rows(expected):
    def checker(out):
        assert {k: v.shape for k, v in out.items()} == {k: (len(expected), 8) for k in out}
        assert out["token_ids"].numpy().tolist() == expected
        assert ((out["token_ids"].numpy() != 0) == (out["padding_mask"].numpy() == 1)).all()
    return checker


PACKER_CASES = {
    "empty batch": ([], rows([])),
    "empty rows": ([[], []], rows([[2, 3, 0, 0, 0, 0, 0, 0]] * 2)),
    "long row is truncated": ([list(range(5, 30)) * 200], rows([[2, 5, 6, 7, 8, 9, 10, 3]])),
    "numpy ints": (np.array([[5, 6]], np.uint8), rows([[2, 5, 6, 3, 0, 0, 0, 0]])),
    "numpy object rows": (np.array([[5, 6], [7]], dtype=object), rows([[2, 5, 6, 3, 0, 0, 0, 0], [2, 7, 3] + [0] * 5])),
    "tuples": (((5, 6), (7,)), rows([[2, 5, 6, 3, 0, 0, 0, 0], [2, 7, 3] + [0] * 5])),
    "tf int64": (tf.constant([[5, 6]], tf.int64), rows([[2, 5, 6, 3, 0, 0, 0, 0]])),
    "ragged int64": (tf.ragged.constant([[5], [6, 7]], tf.int64), rows([[2, 5, 3] + [0] * 5, [2, 6, 7, 3] + [0] * 4])),
    "None": (None, Raises(TypeError, "first", "None")),
    "int": (5, Raises(TypeError, "first", "5")),
    "text": ("abc", Raises(TypeError, "first", "'abc'")),
    "strings": ([["a"]], Raises(TypeError, "first[0][0]", "'a'")),
    "one sequence": ([5, 6], Raises(ValueError, "first", "one sequence", "[first]")),
    "rank 3": ([[[5]]], Raises(ValueError, "first", "[5]")),
    "floats": ([[5.0]], Raises(TypeError, "first[0][0]", "5.0")),
    "bools": ([[True]], Raises(TypeError, "first[0][0]", "True")),
    "None inside": ([[5, None]], Raises(TypeError, "first[0][1]", "None")),
    "negative": ([[5, -1]], Raises(ValueError, "first[0][1]=-1")),
    "beyond int32": ([[2**40]], Raises(ValueError, f"first[0][0]={2**40}")),
    "beyond the vocabulary": ([[40]], Raises(ValueError, "first[0][0]=40", "vocabulary [0, 30)")),
    "tensor beyond the vocabulary": (tf.constant([[5, 40]]), Raises(ValueError, "first", "40", "(0, 1)")),
    "numpy floats": (np.array([[5.5]]), Raises(TypeError, "first", "float64")),
    "tf floats": (tf.constant([[5.0]]), Raises(TypeError, "first", "float32")),
    "tf strings": (tf.constant([["a"]]), Raises(TypeError, "first", "string")),
    "tf 1-D": (tf.constant([5, 6]), Raises(ValueError, "first", "one sequence")),
    "ragged rank 3": (tf.ragged.constant([[[5]]]), Raises(ValueError, "first", "rank")),
    "dict": ({"a": 1}, Raises(TypeError, "first", "{'a': 1}")),
}


@pytest.mark.parametrize("case", sorted(PACKER_CASES))
def test_packer_inputs(case):
    value, expected = PACKER_CASES[case]
    packer = Packer(8, cls_id=2, sep_id=3, pad_id=0, vocabulary_size=30)
    check(lambda: packer(value), expected)


@pytest.mark.parametrize("second, expected", [
    ([[7, 8]], rows([[2, 5, 6, 3, 7, 8, 3, 0]])),
    ([[]], rows([[2, 5, 6, 3, 3, 0, 0, 0]])),
    ([[7] * 1000], rows([[2, 5, 6, 3, 7, 7, 7, 3]])),
    ([], Raises(ValueError, "first and second", "1 and 0 rows")),
    ([[7], [8]], Raises(ValueError, "first and second", "1 and 2 rows")),
    (tf.ragged.constant([[7], [8]]), Raises(ValueError, "first and second", "1 and 2 rows")),
    ([7, 8], Raises(ValueError, "second", "one sequence")),
    ([["b"]], Raises(TypeError, "second[0][0]", "'b'")),
    ([[-3]], Raises(ValueError, "second[0][0]=-3")),
])
def test_packer_pairs(second, expected):
    packer = Packer(8, cls_id=2, sep_id=3, pad_id=0)
    check(lambda: packer([[5, 6]], second), expected)


def test_packer_truncates_a_megabyte_and_refuses_unbatched_graphs(wp):
    packer = Packer.from_tokenizer(wp, 16)
    out = packer(wp(["word " * 200_000]), wp(["a b " * 250_000]))
    assert out["token_ids"].shape == (1, 16) and int(out["padding_mask"].numpy().sum()) == 16
    with pytest.raises(ValueError, match="batch the dataset"):
        tf.data.Dataset.from_tensor_slices(["a b"]).map(lambda text: packer(wp(text)))
    with pytest.raises(ValueError, match="vocabulary"):
        packer([[wp.vocabulary_size()]])


# --- Masker -----------------------------------------------------------------------

MASKER = dict(vocabulary_size=30, mask_id=4, unselectable_ids=[0, 2, 3], max_predictions=3)
GOOD = {"token_ids": [[2, 5, 6, 7, 8, 3, 0]], "padding_mask": [[1, 1, 1, 1, 1, 1, 0]]}


@pytest.mark.parametrize("kwargs, expected", [
    (dict(vocabulary_size=0), Raises(ValueError, "vocabulary_size", "0")),
    (dict(vocabulary_size=None), Raises(ValueError, "vocabulary_size", "None")),
    (dict(vocabulary_size=30.0), Raises(ValueError, "vocabulary_size", "30.0")),
    (dict(mask_id=-1), Raises(ValueError, "mask_id", "-1")),
    (dict(mask_id=30), Raises(ValueError, "mask_id", "30", "vocabulary of 30")),
    (dict(mask_id="[MASK]"), Raises(ValueError, "mask_id", "'[MASK]'")),
    (dict(mask_rate="0.15"), Raises(ValueError, "mask_rate", "'0.15'")),
    (dict(mask_rate=float("nan")), Raises(ValueError, "mask_rate", "nan")),
    (dict(mask_rate=-0.1), Raises(ValueError, "mask_rate", "-0.1")),
    (dict(mask_rate=True), Raises(ValueError, "mask_rate", "True")),
    (dict(random_token_rate=None), Raises(ValueError, "random_token_rate", "None")),
    (dict(mask_token_rate=0.9, random_token_rate=0.2), Raises(ValueError, "mask_token_rate + random_token_rate")),
    (dict(max_predictions=0), Raises(ValueError, "max_predictions", "0")),
    (dict(max_predictions=3.0), Raises(ValueError, "max_predictions", "3.0")),
    (dict(unselectable_ids=None), Raises(TypeError, "unselectable_ids", "None")),
    (dict(unselectable_ids="abc"), Raises(TypeError, "unselectable_ids", "'abc'")),
    (dict(unselectable_ids=[-1]), Raises(ValueError, "unselectable_ids[0]", "-1")),
    (dict(whole_word=True), Raises(ValueError, "continuation_ids")),
    (dict(whole_word=True, continuation_ids=[10**9]), Raises(ValueError, "continuation_ids[0]", str(10**9))),
    (dict(whole_word="yes", continuation_ids=[9]), Raises(TypeError, "whole_word", "'yes'")),
    (dict(special_ids=list(range(30))), Raises(ValueError, "special_ids", "random_token_rate")),
    (dict(seed="x"), Raises(ValueError, "seed", "'x'")),
    (dict(seed=1.5), Raises(ValueError, "seed", "1.5")),
    (dict(seed=2**70), Raises(ValueError, "seed", str(2**70))),
])
def test_masker_arguments(kwargs, expected):
    check(lambda: MaskedLMMasker(**(MASKER | kwargs)), expected)


def masked(batch, width, slots=3):
    def checker(out):
        assert out["token_ids"].shape == (batch, width)
        for key in ("mask_positions", "mask_ids", "mask_weights"):
            assert out[key].shape == (batch, slots)
    return checker


MASKER_CASES = {
    "zero-length rows": ({"token_ids": np.zeros((2, 0), np.int32), "padding_mask": np.zeros((2, 0), np.int32)},
                         masked(2, 0)),
    "empty batch": ({"token_ids": np.zeros((0, 7), np.int32), "padding_mask": np.zeros((0, 7), np.int32)}, masked(0, 7)),
    "int64 tensors": ({k: tf.constant(v, tf.int64) for k, v in GOOD.items()}, masked(1, 7)),
    "boolean mask": ({"token_ids": GOOD["token_ids"], "padding_mask": np.array(GOOD["padding_mask"], bool)},
                     masked(1, 7)),
    "object arrays": ({k: np.array(v, dtype=object) for k, v in GOOD.items()}, masked(1, 7)),
    "all padding": ({"token_ids": [[0, 0]], "padding_mask": [[0, 0]]}, masked(1, 2)),
    "None": (None, Raises(TypeError, "inputs", "None")),
    "a list": ([[2, 5]], Raises(TypeError, "inputs", "[[2, 5]]")),
    "missing padding_mask": ({"token_ids": [[2, 5]]}, Raises(ValueError, "padding_mask", "'token_ids'")),
    "1-D": ({"token_ids": [2, 5, 3], "padding_mask": [1, 1, 1]}, Raises(ValueError, "token_ids", "(3,)")),
    "3-D": ({"token_ids": [[[2, 5]]], "padding_mask": [[[1, 1]]]}, Raises(ValueError, "token_ids", "(1, 1, 2)")),
    "shapes differ": ({"token_ids": [[2, 5, 3]], "padding_mask": [[1, 1]]},
                      Raises(ValueError, "token_ids and padding_mask", "(1, 3)", "(1, 2)")),
    "rows of different lengths": ({"token_ids": [[2, 5, 3], [2, 3]], "padding_mask": [[1, 1, 1], [1, 1]]},
                                  Raises(TypeError, "token_ids", "rows of one length")),
    "ragged tensor": ({"token_ids": tf.ragged.constant([[2, 5]]), "padding_mask": tf.ragged.constant([[1, 1]])},
                      Raises(TypeError, "token_ids", "dense")),
    "strings": ({"token_ids": [["a"]], "padding_mask": [[1]]}, Raises(TypeError, "token_ids", "str")),
    "float ids": ({"token_ids": [[2.0, 5.5]], "padding_mask": [[1, 1]]}, Raises(TypeError, "token_ids", "float64")),
    "float mask": ({"token_ids": [[2, 5]], "padding_mask": [[1.0, 0.5]]}, Raises(TypeError, "padding_mask", "float64")),
    "negative id": ({"token_ids": [[2, -5, 3]], "padding_mask": [[1, 1, 1]]},
                    Raises(ValueError, "token_ids", "-5", "vocabulary [0, 30)")),
    "id beyond the vocabulary": ({"token_ids": [[2, 30, 3]], "padding_mask": [[1, 1, 1]]},
                                 Raises(ValueError, "token_ids", "30", "(0, 1)")),
    "id beyond int32": ({"token_ids": [[2, 2**40]], "padding_mask": [[1, 1]]}, Raises(ValueError, "token_ids", str(2**40))),
    "negative mask": ({"token_ids": [[2, 5]], "padding_mask": [[1, -1]]}, Raises(ValueError, "padding_mask", "-1")),
}


@pytest.mark.parametrize("whole_word", [False, True])
@pytest.mark.parametrize("case", sorted(MASKER_CASES))
def test_masker_inputs(case, whole_word):
    value, expected = MASKER_CASES[case]
    masker = MaskedLMMasker(**MASKER, whole_word=whole_word, continuation_ids=list(range(20, 30)))
    check(lambda: masker(value), expected)


@pytest.mark.parametrize("seed, expected", [
    ([1, 2], masked(1, 7)),
    (np.array([1, 2]), masked(1, 7)),
    ("x", Raises(ValueError, "seed", "string")),
    ([1, 2, 3], Raises(ValueError, "seed", "(3,)")),
    ([1.5, 2.0], Raises(ValueError, "seed", "float32")),
    ([2**70, 1], Raises(ValueError, "seed", str(2**70))),
])
def test_masker_seeds(seed, expected):
    masker = MaskedLMMasker(**MASKER)
    check(lambda: masker(GOOD, seed=seed), expected)


def test_masker_from_tokenizer_needs_a_tokenizer():
    check(lambda: MaskedLMMasker.from_tokenizer("bert"), Raises(TypeError, "tokenizer", "'bert'"))


# --- Sentence pairs, documents, batching, document packing ----------------------

DOCUMENTS = [[[5, 6], [7, 8, 9], [10]], [[11, 12], [13]], [[5], [6], [7]]]


@pytest.mark.parametrize("kwargs, expected", [
    (dict(documents=None), Raises(TypeError, "documents", "None")),
    (dict(documents="abc"), Raises(TypeError, "documents", "'abc'")),
    (dict(documents=[5, 6]), Raises(TypeError, "documents[0]", "5")),
    (dict(documents=[["a b"], ["c"]]), Raises(TypeError, "documents[0][0]", "tokenize", "'a b'")),
    (dict(documents=[[[5], None]]), Raises(TypeError, "documents[0][1]", "None")),
    (dict(documents=[]), Raises(ValueError, "two non-empty documents")),
    (dict(sequence_length=4), Raises(ValueError, "sequence_length=4")),
    (dict(sequence_length="16"), Raises(ValueError, "sequence_length", "'16'")),
    (dict(sequence_length=16.0), Raises(ValueError, "sequence_length", "16.0")),
    (dict(task="NSP"), Raises(ValueError, "task='NSP'", "sop")),
    (dict(short_sequence_probability=float("nan")), Raises(ValueError, "short_sequence_probability", "nan")),
    (dict(short_sequence_probability="0.1"), Raises(ValueError, "short_sequence_probability", "'0.1'")),
    (dict(num_special_tokens=-1), Raises(ValueError, "num_special_tokens", "-1")),
    (dict(seed="x"), Raises(ValueError, "seed", "'x'")),
    (dict(documents=[[list(range(5000))], [[5, 6]]]),
     lambda pairs: all(len(a) + len(b) <= 13 for a, b, _ in pairs) or pytest.fail(pairs)),
    (dict(documents=[[[5]]], task="sop"), lambda pairs: pairs == [] or pytest.fail(pairs)),
])
def test_sentence_pairs(kwargs, expected):
    check(lambda: make_sentence_pairs(**(dict(documents=DOCUMENTS, sequence_length=16, seed=0) | kwargs)), expected)


def test_read_documents(tmp_path):
    check(lambda: read_documents(None), Raises(TypeError, "paths", "None"))
    check(lambda: read_documents(str(tmp_path / "missing.txt")), Raises(FileNotFoundError, "paths[0]", "missing.txt"))
    check(lambda: read_documents(str(tmp_path)), Raises(ValueError, "paths[0]", "directory"))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"ok\n\xff\xfe\x00\n\none\n")
    assert read_documents(str(binary)) == [["ok", "\ufffd\ufffd\x00"], ["one"]]


def examples():
    packer = Packer(8, cls_id=2, sep_id=3, pad_id=0)
    return tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[5, 6], [7], [8, 9, 10]])).map(
        lambda ids: {k: v[0] for k, v in packer(ids[None]).items()}
    )


@pytest.mark.parametrize("kwargs, expected", [
    (dict(dataset=None), Raises(TypeError, "dataset", "None")),
    (dict(dataset=[1, 2]), Raises(TypeError, "dataset", "[1, 2]")),
    (dict(dataset=tf.data.Dataset.from_tensor_slices([[1, 2]])), Raises(TypeError, "dataset", "element_spec")),
    (dict(batch_size=0), Raises(ValueError, "batch_size", "0")),
    (dict(batch_size=2.0), Raises(ValueError, "batch_size", "2.0")),
    (dict(boundaries=None), Raises(TypeError, "boundaries", "None")),
    (dict(boundaries=[]), Raises(ValueError, "boundaries", "[]")),
    (dict(boundaries=[4.5, 8]), Raises(ValueError, "boundaries[0]", "4.5")),
    (dict(boundaries=[8, 4]), Raises(ValueError, "boundaries", "[8, 4]")),
    (dict(boundaries=[2, 4]), Raises(ValueError, "boundaries=[2, 4]", "8")),
    (dict(length_key="nope"), Raises(ValueError, "length_key='nope'", "token_ids")),
    (dict(pad_id="x"), Raises(ValueError, "pad_id", "'x'")),
    (dict(boundaries=np.array([4, 8])), lambda batches: len(list(batches)) == 1 or pytest.fail(batches)),
])
def test_bucket_by_length(kwargs, expected):
    check(lambda: bucket_by_length(**(dict(dataset=examples(), batch_size=4, boundaries=[4, 8]) | kwargs)), expected)


def test_bucket_by_length_refuses_batched_datasets():
    check(lambda: bucket_by_length(examples().batch(2), 4, [8]), Raises(ValueError, "unbatch", "token_ids"))


@pytest.mark.parametrize("batches, expected", [
    (None, Raises(TypeError, "batches", "None")),
    ("abc", Raises(TypeError, "batches", "'abc'")),
    ([{"x": [[1]]}], Raises(ValueError, "batch 0", "mask_key='padding_mask'")),
    ([[1, 2]], Raises(ValueError, "batch 0", "[1, 2]")),
    ([], lambda fraction: fraction == 0.0 or pytest.fail(fraction)),
    ([({"padding_mask": [[1, 0], [2, 2]]}, [1, 0])], lambda fraction: fraction == 0.25 or pytest.fail(fraction)),
])
def test_padding_fraction(batches, expected):
    check(lambda: padding_fraction(batches), expected)


DOCS = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[7, 8, 9], [5]]))


@pytest.mark.parametrize("kwargs, expected", [
    (dict(dataset=None), Raises(TypeError, "dataset", "None")),
    (dict(dataset=tf.data.Dataset.from_tensor_slices(["a"])), Raises(ValueError, "dataset", "string")),
    (dict(sequence_length=2), Raises(ValueError, "sequence_length", ">= 3", "2")),
    (dict(end_id=2**40), Raises(ValueError, "end_id", str(2**40))),
    (dict(start_id=-1), Raises(ValueError, "start_id", "-1")),
    (dict(long_documents=None), Raises(ValueError, "long_documents=None")),
    (dict(dataset=tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[], []], tf.int32))),
     lambda rows: list(rows) == [] or pytest.fail(rows)),
    (dict(dataset=tf.data.Dataset.from_tensors(tf.range(10_000))),
     lambda rows: len(list(rows)) == 1_667 or pytest.fail(rows)),
])
def test_pack_documents(kwargs, expected):
    check(lambda: pack_documents(**(dict(dataset=DOCS, sequence_length=8, start_id=2, end_id=3) | kwargs)), expected)


@pytest.mark.parametrize("ids", [[[7, -8, 9]], tf.constant([[7, 2**40]], tf.int64)])
def test_pack_documents_refuses_ids_that_would_wrap(ids):
    """Values are known only as the pipeline runs: an assertion names the
    problem (a ValueError is not possible there), never a silent wrap."""
    rows = pack_documents(tf.data.Dataset.from_tensor_slices(ids), 8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="token id < 0 or >= 2"):
        list(rows)


# --- Text preprocessors --------------------------------------------------------------

@pytest.mark.parametrize("x, expected", [
    ([], lambda out: out["token_ids"].shape == (0, 8) or pytest.fail(out)),
    ([""], lambda out: out["token_ids"].numpy().tolist() == [[2, 3] + [0] * 6] or pytest.fail(out)),
    ([" \t\n"], lambda out: out["token_ids"].numpy().tolist() == [[2, 3] + [0] * 6] or pytest.fail(out)),
    (["a\x00b"], lambda out: out["padding_mask"].numpy().sum() == 4 or pytest.fail(out)),
    ([b"a \xff"], lambda out: out["token_ids"].shape == (1, 8) or pytest.fail(out)),
    (["word " * 200_000], lambda out: out["padding_mask"].numpy().tolist() == [[1] * 8] or pytest.fail(out)),
    ("a b", Raises(ValueError, "x", "single string", "[x]")),
    (None, Raises(TypeError, "x", "None")),
    ([1, 2], Raises(TypeError, "x", "int 1")),
    ([["a", "b"]], Raises(TypeError, "x", "list")),
    (np.array([["a", "b"]]), Raises(ValueError, "x", "1-D batch")),
    ((["a"], ["b"], ["c"]), Raises(ValueError, "x", "3-tuple")),
    ((["a", "b"], ["c"]), Raises(ValueError, "x=(first, second)", "2 and 1")),
    ((["a"], "b"), Raises(ValueError, "second", "single string")),
    ((["a"], [None]), Raises(TypeError, "second", "None")),
])
def test_text_preprocessor(wp, x, expected):
    preprocessor = TextPreprocessor(wp, sequence_length=8)
    check(lambda: preprocessor(x), expected)


@pytest.mark.parametrize("kwargs, expected", [
    (dict(tokenizer=None), Raises(TypeError, "tokenizer", "NoneType")),
    (dict(sequence_length=0), Raises(ValueError, "sequence_length", "0")),
    (dict(sequence_length="8"), Raises(ValueError, "sequence_length", "'8'")),
    (dict(truncate="x"), Raises(ValueError, "truncate='x'")),
    (dict(mask_rate="x"), Raises(ValueError, "mask_rate", "'x'")),
    (dict(max_predictions=0), Raises(ValueError, "max_predictions", "0")),
])
def test_masked_lm_preprocessor_arguments(wp, kwargs, expected):
    check(lambda: MaskedLMPreprocessor(**(dict(tokenizer=wp, sequence_length=8) | kwargs)), expected)


def test_masked_lm_preprocessor_on_empty_and_long_text(wp):
    preprocessor = MaskedLMPreprocessor(wp, sequence_length=8, max_predictions=2)
    features, ids, weights = preprocessor([])
    assert features["token_ids"].shape == (0, 8) and ids.shape == (0, 2) and weights.shape == (0, 2)
    features, ids, weights = preprocessor(["a b " * 250_000, ""])
    assert features["token_ids"].shape == (2, 8)
    assert weights.numpy().tolist()[1] == [0.0, 0.0]  # nothing to mask in an empty text


def test_token_classification_on_a_megabyte_of_words(wp):
    """Words of a long text are cut without copying the text once per word
    (200,000 words of a 1 MB text: 200 GB before)."""
    preprocessor = TokenClassificationPreprocessor(wp, sequence_length=8)
    start = time.perf_counter()
    features = preprocessor(["word " * 200_000, "a\x00b c"])
    assert time.perf_counter() - start < 30
    assert features["token_ids"].shape == (2, 8)
    alignment = preprocessor.word_alignment(["a\x00b  c\x01d", "é c"])
    assert alignment[0]["words"] == ["a\x00b", "c\x01d"] and alignment[0]["word_spans"] == [(0, 3), (5, 8)]
    assert alignment[1]["word_spans"] == [(0, 1), (2, 3)]
    check(lambda: preprocessor([["a", "b"]], [[2**40, 1]]), Raises(ValueError, "y[0][0]", "int32"))


def test_question_answering_decoding(wp):
    preprocessor = QuestionAnsweringPreprocessor(wp, sequence_length=16, doc_stride=2, max_question_length=4)
    windows = preprocessor.windows(["a"], ["a b c"])
    zeros = np.zeros((1, 16))
    check(lambda: decode_answers(windows, np.full((1, 16), np.nan), zeros), Raises(ValueError, "start_logits", "NaN"))
    check(lambda: decode_answers(windows, zeros, np.full((1, 16), "x")), Raises(TypeError, "end_logits"))
    check(lambda: decode_answers(windows, zeros, zeros, null_score_threshold=float("nan")),
          Raises(TypeError, "null_score_threshold", "nan"))
    assert len(preprocessor.windows(["a"], ["a b " * 250_000])) > 1000


@pytest.mark.parametrize("kwargs, expected", [
    (dict(documents=None), Raises(TypeError, "documents", "None")),
    (dict(documents=["a b", "c"]), Raises(TypeError, "documents[0]", "sentence strings")),
    (dict(documents=[["a", 5]]), Raises(TypeError, "documents[0][1]", "5")),
    (dict(documents=[[" \t"]]), Raises(ValueError, "no 'mlm' examples")),
    (dict(seed=None), Raises(ValueError, "seed", "None")),
    (dict(objective="x"), Raises(ValueError, "objective='x'")),
    (dict(documents=[["a b " * 250_000]]),
     lambda rows: rows["token_ids"].shape[1] == 8 or pytest.fail(rows)),
])
def test_pretraining_examples(wp, kwargs, expected):
    arguments = dict(documents=[["a b", "c"], ["d"]], tokenizer=wp, objective="mlm", sequence_length=8) | kwargs
    check(lambda: pretraining_examples(**arguments), expected)
