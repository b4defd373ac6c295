"""Properties of the preprocessing that hold for every input, checked on
inputs drawn by hypothesis (derandomized: the same examples every run).

- Tokenizers: ids in [0, vocabulary_size); offsets inside the text, in
  order; detokenize(tokenize(x)) == x where the tokenizer can round-trip
  (normalised text for WordPiece and SentencePiece, any text for
  byte-level BPE).
- Packer: rows of exactly sequence_length; the padding mask is 1 exactly
  where the row holds a token; segment ids 0/1; the kept ids are prefixes
  of the inputs.
- Masker: never masks special tokens or padding; mask_positions, mask_ids
  and mask_weights agree with the corrupted ids; at most max_predictions
  masks, at least one where something can be masked; whole words stay
  whole.
"""

import numpy as np
import pytest
import tensorflow as tf
from helpers import tensorflow_pass_only
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbert.preprocessing import MaskedLMMasker, Packer
from kerasbert.tokenizers import BytePairTokenizer, SentencePieceTokenizer, WordPieceTokenizer
from kerasbert.tokenizers.byte_pair import bytes_to_unicode

# TensorFlow ops, the same whatever the Keras backend: checked once.
pytestmark = tensorflow_pass_only


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """conftest's, without re-seeding before every test: a new global seed
    makes every tokenizer retrace its graph (0.7 s a call); the masks here
    use explicit seeds."""
    monkeypatch.setenv("KERASBERT_HOME", str(tmp_path_factory.getbasetemp() / "kerasbert_home"))


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)
MANY = settings(SETTINGS, max_examples=100)  # for the cheap ones
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def wordpiece():
    return WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(LETTERS)
                              + ["##" + c for c in LETTERS] + ["the", "##ing", "."])


def sentencepiece():
    pieces = [("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[MASK]", 0.0), ("\u2581", -4.0)]
    pieces += [("\u2581" + c, -2.0) for c in LETTERS] + [(c, -2.5) for c in LETTERS]
    pieces += [("\u2581the", -1.0), ("ing", -1.5)]
    return SentencePieceTokenizer(pieces)


def byte_pair():
    symbols = list(bytes_to_unicode().values())
    tokens = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] + symbols + ["th", "the", "\u0120the"]
    return BytePairTokenizer({t: i for i, t in enumerate(tokens)}, ["t h", "th e", "\u0120 the"])


TOKENIZERS = {"wordpiece": wordpiece, "sentencepiece": sentencepiece, "byte_pair": byte_pair}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def tokenizer(request):
    return TOKENIZERS[request.param]()


# Any text: letters of every script, marks, controls, NUL, whitespace of all
# kinds, special tokens written in the text.
texts = st.lists(
    st.one_of(st.text(max_size=40), st.sampled_from(["[MASK]", "<mask>", " [CLS] x", "\x00", "\u3000", "é\u0301"])),
    min_size=1, max_size=6,
).map(lambda parts: "".join(parts))


@SETTINGS
@given(batch=st.lists(texts, max_size=6))
def test_ids_are_in_the_vocabulary_and_offsets_in_the_text(tokenizer, batch):
    ids, starts, ends = tokenizer.tokenize_with_offsets(batch)
    assert ids.shape[0] == len(batch)
    flat = ids.flat_values.numpy()
    assert ((flat >= 0) & (flat < tokenizer.vocabulary_size())).all()
    for text, row_starts, row_ends in zip(batch, starts.to_list(), ends.to_list()):
        assert all(0 <= s <= e <= len(text) for s, e in zip(row_starts, row_ends))
        assert row_starts == sorted(row_starts)


# Normalised text: lowercase words of the vocabulary's letters, single spaces.
words = st.lists(st.text(alphabet=LETTERS, min_size=1, max_size=12), min_size=1, max_size=8).map(" ".join)


@SETTINGS
@given(text=words)
def test_normalised_text_round_trips(tokenizer, text):
    assert tokenizer.detokenize(tokenizer(text)) == text


BYTE_PAIR = byte_pair()


@SETTINGS
@given(text=st.text(st.characters(blacklist_characters="<", blacklist_categories=("Cs",)), max_size=60))
def test_byte_level_text_round_trips_whatever_it_holds(text):
    assert BYTE_PAIR.detokenize(BYTE_PAIR(text)) == text


# --- Packer ---------------------------------------------------------------------

VOCABULARY_SIZE = 40
CLS, SEP, PAD, MASK = 2, 3, 0, 4
id_rows = st.lists(st.lists(st.integers(5, VOCABULARY_SIZE - 1), max_size=30), min_size=1, max_size=5)


def check_layout(out, length):
    token_ids, segment_ids, mask = (out[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask"))
    assert token_ids.shape == segment_ids.shape == mask.shape == (token_ids.shape[0], length)
    assert set(np.unique(mask)) <= {0, 1} and set(np.unique(segment_ids)) <= {0, 1}
    assert ((token_ids == PAD) == (mask == 0)).all()  # real ids are never the pad id here
    assert (segment_ids[mask == 0] == 0).all()
    # The mask is a prefix of ones: padding only at the end.
    assert (np.diff(mask, axis=1) <= 0).all()
    assert (token_ids[:, 0] == CLS).all()
    return token_ids, segment_ids, mask


@MANY
@given(first=id_rows, length=st.integers(3, 24))
def test_packed_singles(first, length):
    out = Packer(length, CLS, SEP, PAD, vocabulary_size=VOCABULARY_SIZE)(first)
    token_ids, segment_ids, mask = check_layout(out, length)
    for row, ids, kept in zip(token_ids, first, mask.sum(1)):
        assert kept == min(len(ids), length - 2) + 2
        assert row[1:kept - 1].tolist() == ids[:kept - 2] and row[kept - 1] == SEP
    assert (segment_ids == 0).all()


@MANY
@given(pairs=st.lists(st.tuples(id_rows.map(lambda r: r[0]), id_rows.map(lambda r: r[0])), min_size=1, max_size=4),
       length=st.integers(3, 24), truncate=st.sampled_from(["longest_first", "round_robin"]))
def test_packed_pairs(pairs, length, truncate):
    first, second = [a for a, _ in pairs], [b for _, b in pairs]
    out = Packer(length, CLS, SEP, PAD, truncate=truncate)(first, second)
    token_ids, segment_ids, _ = check_layout(out, length)
    for row, segments, a, b in zip(token_ids, segment_ids, first, second):
        real = row[row != PAD].tolist()
        seps = [i for i, t in enumerate(real) if t == SEP]
        assert len(seps) == 2 and seps[1] == len(real) - 1
        kept_a, kept_b = real[1:seps[0]], real[seps[0] + 1:-1]
        assert kept_a == a[:len(kept_a)] and kept_b == b[:len(kept_b)]  # truncation keeps prefixes
        assert len(real) == min(len(a) + len(b) + 3, length)
        assert segments[:seps[0] + 1].tolist() == [0] * (seps[0] + 1)
        assert segments[seps[0] + 1:len(real)].tolist() == [1] * (len(real) - seps[0] - 1)


# --- Masker -----------------------------------------------------------------------

SPECIAL_IDS = [PAD, 1, CLS, SEP, MASK]
CONTINUATIONS = list(range(30, VOCABULARY_SIZE))  # "##" pieces


@MANY
@given(rows=id_rows, length=st.integers(3, 24), max_predictions=st.integers(1, 6),
       mask_rate=st.floats(0.0, 1.0), whole_word=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_masks(rows, length, max_predictions, mask_rate, whole_word, seed):
    inputs = Packer(length, CLS, SEP, PAD)(rows)
    masker = MaskedLMMasker(
        VOCABULARY_SIZE, MASK, unselectable_ids=[PAD, CLS, SEP, MASK], special_ids=SPECIAL_IDS,
        mask_rate=mask_rate, max_predictions=max_predictions, whole_word=whole_word,
        continuation_ids=CONTINUATIONS,
    )
    out = masker(inputs, seed=[seed, 7])
    original = inputs["token_ids"].numpy()
    corrupted, positions, ids, weights = (out[k].numpy() for k in ("token_ids", "mask_positions", "mask_ids",
                                                                      "mask_weights"))
    mask = inputs["padding_mask"].numpy()
    assert positions.shape == ids.shape == weights.shape == (len(rows), max_predictions)
    for b in range(len(rows)):
        count = int(weights[b].sum())
        assert set(np.unique(weights[b])) <= {0.0, 1.0}
        assert (weights[b, :count] == 1).all() and (weights[b, count:] == 0).all()  # real slots first
        chosen = positions[b, :count]
        assert (np.diff(chosen) > 0).all()  # distinct, in order
        assert (positions[b, count:] == 0).all() and (ids[b, count:] == 0).all()
        assert (mask[b, chosen] == 1).all()  # never padding
        assert not np.isin(original[b, chosen], [PAD, CLS, SEP, MASK]).any()  # never special tokens
        assert (ids[b, :count] == original[b, chosen]).all()  # the labels are the original ids
        # Only masked positions change, and into the mask or a non-special id.
        changed = np.flatnonzero(corrupted[b] != original[b])
        assert set(changed) <= set(chosen.tolist())
        assert not np.isin(corrupted[b, changed], [PAD, 1, CLS, SEP]).any()
        # How many: at most max_predictions, at least one when something can be masked.
        selectable = int(((mask[b] == 1) & ~np.isin(original[b], [PAD, CLS, SEP, MASK])).sum())
        # The masker's budget, in its float32 arithmetic (round half to even).
        budget = min(max(int(np.round(np.float32(selectable) * np.float32(mask_rate))), 1), max_predictions, selectable)
        if not whole_word:
            assert count == budget
        else:  # whole words while they fit: at least one when some word fits
            assert count <= budget
            assert count >= 1 or min(_word_lengths(original[b], mask[b]), default=budget + 1) > budget
            for p in chosen:  # a masked piece that continues a word: the piece before it is masked too
                if original[b, p] in CONTINUATIONS and original[b, p - 1] not in (CLS, SEP):
                    assert p - 1 in chosen


def _word_lengths(row, mask):
    """The number of pieces of each word of a packed row."""
    lengths = []
    for token, real in zip(row, mask):
        if not real or token in (CLS, SEP):
            continue
        if token in CONTINUATIONS and lengths:
            lengths[-1] += 1
        else:
            lengths.append(1)
    return lengths


@SETTINGS
@given(rows=id_rows, seed=st.integers(0, 2**31 - 1))
def test_masks_are_a_function_of_the_seed(rows, seed):
    inputs = Packer(16, CLS, SEP, PAD)(rows)
    masker = MaskedLMMasker(VOCABULARY_SIZE, MASK, unselectable_ids=[PAD, CLS, SEP], max_predictions=4)
    a, b = masker(inputs, seed=[seed, 1]), masker(inputs, seed=[seed, 1])
    for key in ("token_ids", "mask_positions", "mask_ids", "mask_weights"):
        np.testing.assert_array_equal(a[key], b[key])


GRAPH_PACKER = Packer(12, CLS, SEP, PAD)
GRAPH_MASKER = MaskedLMMasker(VOCABULARY_SIZE, MASK, unselectable_ids=[PAD, CLS, SEP], max_predictions=3)


@tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64)])
def pack_and_mask(ids):
    return GRAPH_MASKER(GRAPH_PACKER(ids), seed=tf.constant([3, 4]))


@SETTINGS
@given(rows=id_rows)
def test_packer_and_masker_in_a_graph(rows):
    ragged = tf.RaggedTensor.from_row_lengths(
        tf.constant([i for row in rows for i in row], tf.int32, shape=[sum(map(len, rows))]),
        tf.constant([len(row) for row in rows], tf.int64),
    )
    out = pack_and_mask(ragged)
    eager = GRAPH_MASKER(GRAPH_PACKER(rows), seed=[3, 4])
    for key in ("token_ids", "mask_positions", "mask_ids", "mask_weights"):
        np.testing.assert_array_equal(out[key], eager[key])
