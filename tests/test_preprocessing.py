"""Packer (against transformers' pair encoding) and the masked-LM masker
(statistics of its choices)."""

import numpy as np
import pytest
import tensorflow as tf
import transformers

import kerasbert
from helpers import assert_graph_unchecked, minilm_directory, rotten_tomatoes, tensorflow_pass_only
from kerasbert.preprocessing import MaskedLMMasker, Packer

# TensorFlow ops, the same whatever the Keras backend: checked once.
pytestmark = tensorflow_pass_only


@pytest.fixture
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer


@pytest.fixture(scope="module")
def snippets():
    return [text for text, _ in rotten_tomatoes()]


@pytest.mark.parametrize("length", [5, 8, 9, 16, 33, 64, 128])
def test_pairs_and_singles_match_transformers(tokenizer, snippets, length):
    hf = transformers.BertTokenizerFast.from_pretrained(minilm_directory())
    first, second = snippets[:300], snippets[300:600]
    packer = Packer.from_tokenizer(tokenizer, length)
    out = packer(tokenizer(first), tokenizer(second))
    ref = hf(first, second, truncation="longest_first", max_length=length, padding="max_length")
    assert out["token_ids"].numpy().tolist() == ref["input_ids"]
    assert out["segment_ids"].numpy().tolist() == ref["token_type_ids"]
    assert out["padding_mask"].numpy().tolist() == ref["attention_mask"]
    single = packer(tokenizer(first))
    ref = hf(first, truncation=True, max_length=length, padding="max_length")
    assert single["token_ids"].numpy().tolist() == ref["input_ids"]
    assert single["padding_mask"].numpy().tolist() == ref["attention_mask"]


def _round_robin_reference(a, b, budget):
    keep = [0, 0]
    lengths = [len(a), len(b)]
    turn = 0
    while sum(keep) < budget and (keep[0] < lengths[0] or keep[1] < lengths[1]):
        if keep[turn] < lengths[turn]:
            keep[turn] += 1
        turn = 1 - turn
    return keep


@pytest.mark.parametrize("style", ["bert", "roberta"])
def test_packer_graph_holds_no_checks(tokenizer, style):
    # Pairs keep one check of their own (as many rows in both), made before packing.
    packer = Packer.from_tokenizer(tokenizer, sequence_length=16, style=style)
    spec = tf.RaggedTensorSpec([None, None], tf.int32, row_splits_dtype=tf.int64)
    assert_graph_unchecked(tf.function(packer.call).get_concrete_function(spec))
    assert_graph_unchecked(tf.function(packer._pack_pair).get_concrete_function(spec, spec))


def test_round_robin_truncation():
    rng = np.random.default_rng(0)
    firsts = [list(range(10, 10 + n)) for n in rng.integers(0, 20, 200)]
    seconds = [list(range(50, 50 + n)) for n in rng.integers(0, 20, 200)]
    packer = Packer(16, cls_id=1, sep_id=2, pad_id=0, truncate="round_robin")
    out = packer(tf.ragged.constant(firsts), tf.ragged.constant(seconds))["token_ids"].numpy()
    for row, a, b in zip(out, firsts, seconds):
        keep_a, keep_b = _round_robin_reference(a, b, 13)
        expected = [1, *a[:keep_a], 2, *b[:keep_b], 2]
        assert row.tolist() == expected + [0] * (16 - len(expected))


def test_roberta_layout():
    packer = Packer(10, cls_id=0, sep_id=2, pad_id=1, style="roberta")
    out = packer([[5, 6, 7]], [[8, 9]])
    assert out["token_ids"].numpy().tolist() == [[0, 5, 6, 7, 2, 2, 8, 9, 2, 1]]
    assert out["segment_ids"].numpy().tolist() == [[0] * 10]
    assert out["padding_mask"].numpy().tolist() == [[1] * 9 + [0]]


def test_dynamic_padding_and_tf_data(tokenizer, snippets):
    packer = Packer.from_tokenizer(tokenizer, 128, pad_to_sequence_length=False)
    dataset = tf.data.Dataset.from_tensor_slices(snippets[:64]).batch(16).map(
        lambda x: packer(tokenizer(x))
    )
    for batch in dataset:
        mask = batch["padding_mask"].numpy()
        assert mask.shape[1] == mask.sum(1).max() <= 128  # padded to the longest row only


@pytest.mark.parametrize("bad, error", [
    (dict(sequence_length=2), ValueError),
    (dict(style="gpt"), ValueError),
    (dict(truncate="middle"), ValueError),
])
def test_packer_arguments_are_checked(bad, error):
    kwargs = dict(sequence_length=8, cls_id=1, sep_id=2, pad_id=0) | bad
    with pytest.raises(error, match=next(iter(bad))):
        Packer(**kwargs)


def test_packer_rejects_text(tokenizer):
    with pytest.raises(TypeError, match="first"):
        Packer.from_tokenizer(tokenizer, 8)(["not ids"])


# --- Masking ---------------------------------------------------------------


@pytest.fixture(scope="module")
def packed(minilm_tokenizer, snippets):
    return Packer.from_tokenizer(minilm_tokenizer, 64)(minilm_tokenizer(snippets[:4000]))


def _selected(out, shape):
    selected = np.zeros(shape, bool)
    for row, (positions, weights) in enumerate(zip(out["mask_positions"].numpy(), out["mask_weights"].numpy())):
        selected[row, positions[weights > 0]] = True
    return selected


@pytest.mark.parametrize("whole_word", [False, True])
def test_masking_statistics(tokenizer, packed, whole_word):
    masker = MaskedLMMasker.from_tokenizer(tokenizer, max_predictions=12, whole_word=whole_word)
    out = masker(packed)
    original = packed["token_ids"].numpy()
    corrupted = out["token_ids"].numpy()
    for key in ("mask_positions", "mask_ids", "mask_weights"):
        assert tuple(out[key].shape) == (len(original), 12)
    selected = _selected(out, original.shape)
    specials = list(tokenizer.special_token_ids.values())
    real = (packed["padding_mask"].numpy() == 1) & ~np.isin(original, specials)
    assert not (selected & ~real).any()  # never padding or special tokens
    expected = np.minimum(np.maximum(np.round(real.sum(1) * 0.15), 1), 12)
    counts = selected.sum(1)
    if whole_word:
        assert (counts <= expected).all() and counts.sum() > 0.95 * expected.sum()
    else:
        assert (counts == expected).all()
    weights = out["mask_weights"].numpy()
    np.testing.assert_array_equal(out["mask_ids"].numpy()[weights > 0], original[selected])
    np.testing.assert_array_equal(corrupted[~selected], original[~selected])
    n = selected.sum()
    masked = (corrupted[selected] == tokenizer.special_token_ids["mask"]).mean()
    kept = (corrupted[selected] == original[selected]).mean()
    replaced = 1 - masked - kept
    tolerance = 4 * np.sqrt(0.25 / n)  # four standard deviations
    assert abs(masked - 0.8) < tolerance and abs(kept - 0.1) < tolerance and abs(replaced - 0.1) < tolerance
    mask_id = tokenizer.special_token_ids["mask"]
    replacements = corrupted[selected & (corrupted != original) & (corrupted != mask_id)]
    assert len(replacements) and not np.isin(replacements, specials).any()
    # Selection is uniform over positions: the early and late halves of each
    # row's real tokens are chosen alike (halves per row: most rows are short,
    # so fixed column halves would compare ~100k tokens with a few hundred).
    relative = (np.cumsum(real, axis=1) - 1) / np.maximum(real.sum(1, keepdims=True), 1)
    early, late = real & (relative < 0.5), real & (relative >= 0.5)
    assert abs(selected[early].mean() - selected[late].mean()) < 0.02


def test_whole_words_are_masked_together(tokenizer, packed):
    masker = MaskedLMMasker.from_tokenizer(tokenizer, max_predictions=20, whole_word=True)
    out = masker(packed)
    selected = _selected(out, packed["token_ids"].shape)
    continuation = np.isin(packed["token_ids"].numpy(), tokenizer.continuation_ids())
    previous = np.concatenate([np.zeros_like(selected[:, :1]), selected[:, :-1]], 1)
    following = np.concatenate([selected[:, 1:], np.zeros_like(selected[:, :1])], 1)
    # A "##" piece is selected exactly when the token before it is.
    np.testing.assert_array_equal(selected[continuation], previous[continuation])
    # A selected word start takes its continuation with it.
    next_continues = np.concatenate([continuation[:, 1:], np.zeros_like(continuation[:, :1])], 1)
    assert (following[selected & next_continues]).all()


def test_masks_change_every_call_and_seeds_repeat(tokenizer, packed):
    small = {k: v[:50] for k, v in packed.items()}
    masker = MaskedLMMasker.from_tokenizer(tokenizer)
    a, b = masker(small), masker(small)
    assert not np.array_equal(a["mask_positions"].numpy(), b["mask_positions"].numpy())
    seeded = [MaskedLMMasker.from_tokenizer(tokenizer, seed=7)(small) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0]["token_ids"].numpy(), seeded[1]["token_ids"].numpy())


def test_masker_in_tf_data_masks_each_epoch_anew(tokenizer, snippets):
    packer = Packer.from_tokenizer(tokenizer, 32)
    masker = MaskedLMMasker.from_tokenizer(tokenizer, max_predictions=5)
    dataset = tf.data.Dataset.from_tensor_slices(snippets[:32]).batch(32).map(
        lambda x: masker(packer(tokenizer(x)))
    )
    epochs = [next(iter(dataset))["mask_positions"].numpy() for _ in range(2)]
    assert epochs[0].shape == (32, 5)
    assert not np.array_equal(*epochs)


@pytest.mark.parametrize("bad", [
    dict(mask_rate=1.5), dict(max_predictions=0), dict(mask_token_rate=0.9, random_token_rate=0.2),
    dict(whole_word=True),
])
def test_masker_arguments_are_checked(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        MaskedLMMasker(vocabulary_size=100, mask_id=4, **bad)


# --- Preprocessors -----------------------------------------------------------


def test_text_preprocessor_singles_pairs_and_labels(snippets):
    preprocessor = kerasbert.preprocessing.TextPreprocessor.from_preset("all_minilm_l6_v2", sequence_length=40)
    hf = transformers.BertTokenizerFast.from_pretrained(minilm_directory())
    first, second = snippets[:50], snippets[50:100]
    pairs = preprocessor((first, second))
    ref = hf(first, second, truncation="longest_first", max_length=40, padding="max_length")
    assert pairs["token_ids"].numpy().tolist() == ref["input_ids"]
    assert pairs["segment_ids"].numpy().tolist() == ref["token_type_ids"]
    x, y = preprocessor(first, np.arange(50))
    assert x["token_ids"].numpy().tolist() == hf(first, truncation=True, max_length=40, padding="max_length")["input_ids"]
    assert y.tolist() == list(range(50))
    with pytest.raises(ValueError, match="single string"):
        preprocessor("one string")
    with pytest.raises(ValueError, match="differ in length"):
        preprocessor((first, second[:3]))


def test_preprocessors_in_tf_data_and_config(snippets):
    preprocessor = kerasbert.preprocessing.TextPreprocessor.from_preset("all_minilm_l6_v2", sequence_length=32)
    labels = np.arange(64) % 2
    dataset = tf.data.Dataset.from_tensor_slices((snippets[:64], labels)).batch(16).map(preprocessor)
    x, y = next(iter(dataset))
    assert x["token_ids"].shape == (16, 32) and y.numpy().tolist() == labels[:16].tolist()
    clone = kerasbert.preprocessing.TextPreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(clone(snippets[:8])["token_ids"], preprocessor(snippets[:8])["token_ids"])

    masked = kerasbert.preprocessing.MaskedLMPreprocessor.from_preset(
        "all_minilm_l6_v2", sequence_length=32, max_predictions=6
    )
    x, mask_ids, weights = next(iter(tf.data.Dataset.from_tensor_slices(snippets[:16]).batch(16).map(masked)))
    assert x["mask_positions"].shape == (16, 6) and mask_ids.shape == (16, 6)
    assert set(x) == {"token_ids", "segment_ids", "padding_mask", "mask_positions"}
    clone = kerasbert.preprocessing.MaskedLMPreprocessor.from_config(masked.get_config())
    assert clone.masker.max_predictions == 6


def test_row_ids_are_value_rowids_in_linear_memory():
    from kerasbert.utils.ragged import row_ids

    rng = np.random.default_rng(0)
    for _ in range(20):
        lengths = rng.integers(0, 4, rng.integers(0, 8)) * rng.integers(0, 2, 1)  # empty rows and batches too
        ragged = tf.RaggedTensor.from_row_lengths(tf.range(int(lengths.sum())), lengths)
        assert row_ids(ragged).numpy().tolist() == ragged.value_rowids().numpy().tolist()
    # One long row among many short ones: value_rowids() would pad every
    # row to the longest (20,000 x 1,000,000 here).
    long = tf.RaggedTensor.from_row_lengths(tf.zeros([1_020_000], tf.int8), [1] * 20_000 + [1_000_000])
    ids = row_ids(long)
    assert ids.shape == (1_020_000,) and int(ids[-1]) == 20_000 and int(ids[19_999]) == 19_999
