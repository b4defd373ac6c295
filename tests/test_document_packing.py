"""Several documents packed into one row: pack_documents in tf.data, the
Encoder keeping attention and positions inside each document, the masker
and padding_fraction reading document ids."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import run, tiny_encoder

from kerasbert.encoder import document_attention_mask
from kerasbert.layers import PositionEmbedding
from kerasbert.preprocessing import MaskedLMMasker, pack_documents, padding_fraction

CLS, SEP, PAD = 1, 2, 0


def packed_rows(documents, sequence_length, **kwargs):
    """pack_documents on a list of id lists -> [(token_ids, padding_mask)]."""
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, dtype=tf.int32))
    return [
        (row["token_ids"].numpy(), row["padding_mask"].numpy(), row["segment_ids"].numpy())
        for row in pack_documents(dataset, sequence_length, **kwargs)
    ]


def random_documents(rng, count, low, high, vocabulary=53):
    return [rng.integers(3, vocabulary, int(rng.integers(low, high + 1))).tolist() for _ in range(count)]


# --- The Encoder: a packed document gives what it gives alone --------------

ENCODERS = {
    "bert_segments": {"num_segments": 2},
    "bert_no_segments": {"num_segments": 0},
    "roberta_segments": {"num_segments": 2, "position_offset": 2, "pooler": False},
    "roberta_no_segments": {"num_segments": 0, "position_offset": 2, "pooler": False},
}


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def encoder(request):
    # Large initial weights: a wrong position row or a key seen across
    # documents moves the outputs far beyond the tolerance.
    keras.utils.set_random_seed(1)
    return tiny_encoder(initializer_range=0.5, **ENCODERS[request.param])


@pytest.fixture(scope="module")
def packed_batch():
    """Rows of 20 packed by pack_documents from [CLS] doc [SEP] documents,
    with random segment ids; the documents of each row."""
    rng = np.random.default_rng(0)
    documents = random_documents(rng, 14, 1, 9)
    rows = packed_rows(documents, 20, start_id=CLS, end_id=SEP)
    token_ids = np.stack([t for t, _, _ in rows])  # (rows, 20)
    padding_mask = np.stack([m for _, m, _ in rows])
    assert padding_mask.max() >= 3 and (padding_mask == 0).any()  # several documents, some padding
    segment_ids = rng.integers(0, 2, token_ids.shape) * (padding_mask > 0)
    return {"token_ids": token_ids, "padding_mask": padding_mask, "segment_ids": segment_ids.astype("int32")}


def _inputs(encoder, batch):
    return {k: v for k, v in batch.items() if k != "segment_ids" or encoder.num_segments}


def test_each_packed_document_matches_the_document_alone(encoder, packed_batch):
    outputs = run(encoder, _inputs(encoder, packed_batch))
    # Every document alone in a row of its own, right-padded to the same
    # width (one call, one shape).
    places, alone = [], {k: [] for k in packed_batch}
    for row, mask in enumerate(packed_batch["padding_mask"]):
        for document in range(1, mask.max() + 1):
            where = np.flatnonzero(mask == document)
            places.append((row, document, where))
            for key, value in packed_batch.items():
                part = np.ones(len(where), "int32") if key == "padding_mask" else value[row, where]
                alone[key].append(np.pad(part, (0, mask.size - len(where))))
    expected = run(encoder, _inputs(encoder, {k: np.stack(v) for k, v in alone.items()}))
    for i, (row, document, where) in enumerate(places):
        np.testing.assert_allclose(
            outputs["sequence_output"][row, where], expected["sequence_output"][i, : len(where)],
            atol=1e-5, rtol=0, err_msg=f"row {row}, document {document}",
        )
        if document == 1:  # the pooled first token belongs to document 1
            np.testing.assert_allclose(
                outputs["pooled_output"][row], expected["pooled_output"][i], atol=1e-5, rtol=0
            )
    checked = len(places)
    assert checked >= 6
    # The same rows read as one sequence each come out different: the test
    # above would notice attention or positions leaking across documents.
    as_one = dict(packed_batch, padding_mask=(packed_batch["padding_mask"] > 0).astype("int32"))
    second = packed_batch["padding_mask"] == 2
    assert not np.allclose(
        run(encoder, _inputs(encoder, as_one))["sequence_output"][second],
        outputs["sequence_output"][second], atol=1e-2,
    )


# --- Ordinary 0/1 masks: unchanged ------------------------------------------

def zero_one_masks():
    rng = np.random.default_rng(2)
    right = (np.arange(16)[None, :] < rng.integers(0, 17, (6, 1))).astype("int32")
    left = right[:, ::-1]
    scattered = rng.integers(0, 2, (6, 16)).astype("int32")  # padding anywhere
    return np.concatenate([right, left, scattered])


def positions(padding_mask, position_offset):
    """The table rows PositionEmbedding looks up (a table whose row i is i)."""
    layer = PositionEmbedding(32, 1, position_offset=position_offset)
    layer.build(padding_mask.shape)
    layer.embeddings.assign(np.arange(32 + position_offset, dtype="float32")[:, None])
    return keras.ops.convert_to_numpy(layer(padding_mask))[..., 0].astype(int)


@pytest.mark.parametrize("offset", [0, 2])
def test_zero_one_masks_keep_their_positions(offset):
    mask = zero_one_masks()
    if offset == 0:
        expected = np.broadcast_to(np.arange(16), mask.shape)  # row i at position i
    else:
        expected = np.cumsum(mask, axis=1) * mask + offset - 1  # fairseq / transformers
    np.testing.assert_array_equal(positions(mask, offset), expected)


def test_zero_one_masks_keep_their_attention():
    mask = zero_one_masks()
    expected = np.broadcast_to(mask[:, None, None, :] != 0, (len(mask), 1, 16, 16))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(document_attention_mask(mask)), expected)


def reference_positions(mask, offset):
    """Brute force: restart at each document (document 1 and padding keep the
    index in the row when offset is 0; padding gets offset - 1 otherwise)."""
    out = np.zeros_like(mask)
    for b, row in enumerate(mask):
        for i, d in enumerate(row):
            earlier = int(np.sum(row[:i] == d))
            if offset == 0:
                out[b, i] = earlier if d > 1 else i
            else:
                out[b, i] = offset + earlier if d > 0 else offset - 1
    return out


@pytest.mark.parametrize("offset", [0, 2])
def test_positions_restart_in_each_document(offset, packed_batch):
    mask = np.concatenate([
        packed_batch["padding_mask"][:, :16],
        [[1] * 5 + [2] * 4 + [3] * 7, [0, 0] + [1] * 3 + [2] * 11, [1, 2, 3, 4] + [0] * 12],
    ]).astype("int32")
    np.testing.assert_array_equal(positions(mask, offset), reference_positions(mask, offset))


def test_attention_stays_inside_documents():
    mask = np.array([[1, 1, 2, 2, 2, 3, 0, 0]], "int32")
    allowed = keras.ops.convert_to_numpy(document_attention_mask(mask))[0, 0]
    query, key = mask[0][:, None], mask[0][None, :]
    expected = (key != 0) & ((query == key) | (query == 0))
    np.testing.assert_array_equal(allowed, expected)


# --- pack_documents ----------------------------------------------------------

def test_rows_hold_the_documents_in_order_greedily():
    rng = np.random.default_rng(3)
    documents = random_documents(rng, 40, 0, 14)
    rows = packed_rows(documents, 24, start_id=CLS, end_id=SEP)
    unpacked = []
    for tokens, mask, segments in rows:
        assert tokens.shape == mask.shape == segments.shape == (24,)
        assert tokens.dtype == mask.dtype == np.int32
        assert not segments.any()
        used = int(np.count_nonzero(mask))
        # Documents 1..k, contiguous and in order, then padding.
        np.testing.assert_array_equal(mask[used:], 0)
        ids = mask[:used]
        assert ids[0] == 1 and np.all(np.diff(ids) >= 0) and np.all(np.diff(ids) <= 1)
        np.testing.assert_array_equal(tokens[used:], PAD)
        unpacked.append([tokens[mask == d].tolist() for d in range(1, ids.max() + 1)])
    flat = [doc for row in unpacked for doc in row]
    expected = [[CLS, *doc, SEP] for doc in documents if doc]  # empty documents skipped
    assert flat == expected
    # Greedy: a row closes only when the next document does not fit.
    for row, following in itertools.pairwise(unpacked):
        assert sum(map(len, row)) + len(following[0]) > 24
    # The last partial row is flushed.
    assert flat[-1] == unpacked[-1][-1]


def test_documents_as_given_without_start_and_end():
    rows = packed_rows([[5, 6], [7], [8, 9, 10]], 4, pad_id=99)
    assert [t.tolist() for t, _, _ in rows] == [[5, 6, 7, 99], [8, 9, 10, 99]]
    assert [m.tolist() for _, m, _ in rows] == [[1, 1, 2, 0], [1, 1, 1, 0]]


def test_long_documents_are_split_or_truncated():
    long = list(range(10, 23))  # 13 tokens; 4 fit between [CLS] and [SEP] in a row of 6
    rows = packed_rows([[5], long, [6]], 6, start_id=CLS, end_id=SEP)
    assert [t.tolist() for t, _, _ in rows] == [
        [CLS, 5, SEP, 0, 0, 0],
        [CLS, 10, 11, 12, 13, SEP],
        [CLS, 14, 15, 16, 17, SEP],
        [CLS, 18, 19, 20, 21, SEP],
        [CLS, 22, SEP, CLS, 6, SEP],
    ]
    assert rows[-1][1].tolist() == [1, 1, 1, 2, 2, 2]
    rows = packed_rows([[5], long, [6]], 6, start_id=CLS, end_id=SEP, long_documents="truncate")
    assert [t.tolist() for t, _, _ in rows] == [
        [CLS, 5, SEP, 0, 0, 0], [CLS, 10, 11, 12, 13, SEP], [CLS, 6, SEP, 0, 0, 0]
    ]
    # A document of exactly a row fills it alone.
    rows = packed_rows([list(range(3, 9)), [9]], 6)
    assert [m.tolist() for _, m, _ in rows] == [[1] * 6, [1, 0, 0, 0, 0, 0]]


def test_empty_streams_give_no_rows():
    empty = tf.data.Dataset.from_tensor_slices(tf.zeros([0, 3], tf.int64))
    assert list(pack_documents(empty, 8, start_id=CLS, end_id=SEP)) == []
    assert packed_rows([[], []], 8, start_id=CLS, end_id=SEP) == []


def test_text_mapped_to_ids_in_tf_data():
    # A dataset of dense 1-D int64 tensors (what a tokenizer mapped over
    # strings gives), empty documents among them.
    texts = tf.data.Dataset.from_tensor_slices(["a first snippet .", "", "and another one !"])
    words = texts.map(lambda text: tf.strings.to_hash_bucket_fast(tf.strings.split(text), 1000) + 3)
    assert words.element_spec == tf.TensorSpec([None], tf.int64)
    rows = list(pack_documents(words, 16, start_id=CLS, end_id=SEP))
    assert len(rows) == 1
    tokens, mask = rows[0]["token_ids"].numpy(), rows[0]["padding_mask"].numpy()
    assert mask.tolist() == [1] * 6 + [2] * 6 + [0] * 4
    expected = [[CLS, *w.numpy().tolist(), SEP] for w in words if len(w)]
    assert [tokens[mask == d].tolist() for d in (1, 2)] == expected


DOCUMENTS = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[5, 6]]))


@pytest.mark.parametrize(
    "dataset, kwargs, error, words",
    [
        ([[5, 6]], {}, TypeError, ["dataset", "list"]),
        (tf.data.Dataset.from_tensor_slices([[[5]]]), {}, ValueError, ["element_spec", "1-D"]),
        (tf.data.Dataset.from_tensor_slices([[0.5]]), {}, ValueError, ["element_spec", "float"]),
        (DOCUMENTS, {"sequence_length": 2, "start_id": 1, "end_id": 2}, ValueError, ["sequence_length", ">= 3", "2"]),
        (DOCUMENTS, {"sequence_length": 0}, ValueError, ["sequence_length", "0"]),
        (DOCUMENTS, {"sequence_length": 8.0}, TypeError, ["sequence_length", "8.0"]),
        (DOCUMENTS, {"start_id": -1}, ValueError, ["start_id", "-1"]),
        (DOCUMENTS, {"end_id": "[SEP]"}, TypeError, ["end_id", "'[SEP]'"]),
        (DOCUMENTS, {"pad_id": None}, TypeError, ["pad_id", "None"]),
        (DOCUMENTS, {"long_documents": "drop"}, ValueError, ["long_documents='drop'", "truncate"]),
    ],
)
def test_bad_arguments_are_named(dataset, kwargs, error, words):
    kwargs = {"sequence_length": 8, **kwargs}
    with pytest.raises(error) as info:
        pack_documents(dataset, **kwargs)
    for word in words:
        assert word in str(info.value)


# --- Pretraining: masker and padding accounting on packed rows --------------

def test_masker_on_packed_rows_masks_every_document_never_padding():
    rng = np.random.default_rng(4)
    documents = random_documents(rng, 60, 1, 8, vocabulary=1000)
    dataset = tf.data.Dataset.from_tensor_slices(tf.ragged.constant(documents, dtype=tf.int32))
    masker = MaskedLMMasker(1000, mask_id=4, unselectable_ids=[PAD, CLS, SEP], mask_rate=0.5,
                            max_predictions=16, seed=0)
    batches = pack_documents(dataset, 24, start_id=CLS, end_id=SEP).batch(8).map(masker)
    masked_documents = set()
    for batch in batches:
        mask = batch["padding_mask"].numpy()
        positions, weights = batch["mask_positions"].numpy(), batch["mask_weights"].numpy()
        chosen = np.take_along_axis(mask, positions, axis=1)[weights > 0]
        assert (chosen > 0).all()  # never padding
        masked_documents.update(chosen.tolist())
        np.testing.assert_array_equal(batch["token_ids"].numpy()[mask == 0], PAD)
        # Every row gets its budget: half of its real, non-special tokens.
        real = np.count_nonzero(mask, axis=1) - 2 * mask.max(axis=1)
        np.testing.assert_array_equal(weights.sum(1), np.clip(np.round(real * 0.5), 1, 16))
    assert {1, 2, 3} <= masked_documents  # documents after the first are real tokens too


def test_whole_words_stop_at_document_boundaries():
    # 11 continues a word; the 11 that opens document 2 starts a word of its
    # own, the only one that fits a budget of one token.
    masker = MaskedLMMasker(100, mask_id=4, mask_rate=0.1, whole_word=True, continuation_ids=[11],
                            max_predictions=2, seed=0)
    for _ in range(5):
        out = masker({"token_ids": [[10, 11, 11, 0]], "padding_mask": [[1, 1, 2, 0]]})
        assert out["mask_positions"].numpy().tolist() == [[2, 0]]
        assert out["mask_weights"].numpy().tolist() == [[1.0, 0.0]]


def test_padding_fraction_counts_document_ids_as_real():
    batch = {"padding_mask": tf.constant([[1, 1, 2, 3, 0, 0], [1, 2, 2, 2, 3, 0]])}
    assert padding_fraction([batch]) == pytest.approx(3 / 12)
