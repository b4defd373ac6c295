"""Pretraining data on real text (King James Bible chapters): the rows of
each objective, the endless stream, its masks and its exact resumption.

The pipeline is one TensorFlow graph whatever the Keras backend: the corpus
checks run in the tensorflow pass; every pass streams one batch and checks
the argument errors."""

import os

import numpy as np
import pytest
import tensorflow as tf
from helpers import DATA, tensorflow_pass_only

from kerasbert.preprocessing import MaskedLMMasker, read_documents
from kerasbert.preprocessing.pretraining_data import (
    pretraining_dataset,
    pretraining_examples,
)


@pytest.fixture(scope="module")
def documents():
    """The first 20 chapters of Genesis, a verse a sentence."""
    return read_documents(os.path.join(DATA, "kjv_documents.txt"))[:20]


@pytest.fixture(scope="module")
def tokenizer(minilm_tokenizer):
    return minilm_tokenizer


@pytest.fixture(scope="module")
def sentence_ids(documents, tokenizer):
    """Each document as a list of its sentences' ids, tokenized one by one."""
    return [tokenizer(document).to_list() for document in documents]


def flatten(lists):
    return [item for part in lists for item in part]


def as_numpy(element):
    return tf.nest.map_structure(np.asarray, element)


def assert_same_batches(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        tf.nest.assert_same_structure(a, e)
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(e)):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def test_mlm_batches_on_every_backend(documents, tokenizer):
    dataset = pretraining_dataset(documents[:3], tokenizer, "mlm", sequence_length=100, batch_size=4)
    x, y, sample_weight = as_numpy(next(iter(dataset)))
    assert sorted(x) == ["mask_positions", "padding_mask", "segment_ids", "token_ids"]
    # ceil(100 * 0.15) = 15 target slots (not 16: 100 * 0.15 is 15.000000000000002).
    assert x["token_ids"].shape == (4, 100) and y.shape == (4, 15) == sample_weight.shape
    assert x["token_ids"].dtype == y.dtype == np.int32 and sample_weight.dtype == np.float32


@pytest.mark.parametrize("bad, match", [
    ({"objective": "nsp"}, "objective='nsp'; expected one of"),
    ({"sequence_length": 2}, "sequence_length must be an integer >= 3"),
    ({"objective": "mlm+sop", "sequence_length": 4}, "sequence_length must be an integer >= 5"),
    ({"sequence_length": 64.0}, "sequence_length must be an integer"),
    ({"batch_size": 0}, "batch_size must be a positive integer; got 0"),
    ({"start_step": -1}, "start_step must be an integer >= 0; got -1"),
    ({"seed": -3}, "seed must be an integer >= 0; got -3"),
    ({"max_predictions": 0}, "max_predictions must be a positive integer"),
    ({"mask_rate": 1.5}, "mask_rate must be a number in"),
    ({"short_sequence_probability": 2}, "short_sequence_probability must be a number in"),
])
def test_bad_arguments_are_named(tokenizer, bad, match):
    kwargs = {"objective": "mlm", "sequence_length": 64, "batch_size": 8, **bad}
    with pytest.raises(ValueError, match=match):
        pretraining_dataset([["In the beginning."]], tokenizer, **kwargs)


@tensorflow_pass_only
def test_documents_must_be_lists_of_sentences(tokenizer):
    with pytest.raises(TypeError, match=r"documents\[0\] must be a list of sentence strings"):
        pretraining_examples(["In the beginning.", "And the earth."], tokenizer, "mlm", 64)
    with pytest.raises(ValueError, match="no 'mlm' examples"):
        pretraining_examples([["", " "]], tokenizer, "mlm", 64)
    with pytest.raises(ValueError, match="at least two documents"):
        pretraining_examples([["One.", "Two."]], tokenizer, "mlm+nsp", 64)


def test_stateless_masks_are_a_function_of_inputs_and_seed():
    masker = MaskedLMMasker(1000, mask_id=4, unselectable_ids=[0, 2, 3], mask_rate=0.3, max_predictions=8)
    rng = np.random.default_rng(0)
    inputs = {"token_ids": rng.integers(10, 1000, (6, 24)).astype("int32"),
              "padding_mask": np.ones((6, 24), "int32")}
    eager = as_numpy(masker(inputs, seed=[5, 9]))
    # Inside tf.data, with the step as a tensor: the same masks.
    in_graph = tf.data.Dataset.range(9, 10).map(
        lambda step: masker(inputs, seed=tf.stack([tf.constant(5, tf.int64), step]))
    )
    for key, value in as_numpy(next(iter(in_graph))).items():
        np.testing.assert_array_equal(value, eager[key], err_msg=key)
    other = as_numpy(masker(inputs, seed=[5, 10]))
    assert not np.array_equal(other["mask_positions"], eager["mask_positions"])
    assert not np.array_equal(other["token_ids"], eager["token_ids"])
    with pytest.raises(ValueError, match="seed must be two integers"):
        masker(inputs, seed=[1, 2, 3])


# --- Rows ------------------------------------------------------------------


def chunks_of(rows, start_id, end_id):
    """The chunks of full-sentence rows, in order, as lists of ids without
    their start and end tokens; checks the layout on the way."""
    chunks = []
    for tokens, mask in zip(rows["token_ids"], rows["padding_mask"]):
        real = mask[mask > 0]
        # Documents numbered 1, 2, 3, ... left to right, then padding only.
        assert real[0] == 1 and set(np.diff(real)) <= {0, 1} and not mask[len(real):].any()
        for document in range(1, real.max() + 1):
            ids = tokens[mask == document].tolist()
            assert ids[0] == start_id and ids[-1] == end_id
            assert start_id not in ids[1:-1] and end_id not in ids[1:-1]
            chunks.append(ids[1:-1])
    return chunks


@tensorflow_pass_only
def test_mlm_rows_are_whole_sentences_packed_in_order(documents, tokenizer, sentence_ids):
    length = 64
    rows = pretraining_examples(documents, tokenizer, "mlm", length)
    ids = tokenizer.special_token_ids
    chunks = chunks_of(rows, ids["cls"], ids["sep"])
    assert not rows["segment_ids"].any()
    # Nothing lost, nothing reordered: the chunks are the corpus.
    sentences = [s for document in sentence_ids for s in document if s]
    assert flatten(chunks) == flatten(sentences)
    # Chunks end at sentence ends (or cut a sentence too long for a row),
    # never span two documents, and fit a row with their two special tokens.
    body = length - 2
    ends, document_ends, offset = set(), set(), 0
    for document in sentence_ids:
        for sentence in document:
            ends.update(range(offset + body, offset + len(sentence), body))  # pieces of a long one
            offset += len(sentence)
            ends.add(offset)
        document_ends.add(offset)
    chunk_ends = set(np.cumsum([len(c) for c in chunks]).tolist())
    assert chunk_ends <= ends and document_ends <= chunk_ends
    assert max(len(c) for c in chunks) <= body
    assert any(len(s) > body for s in sentences)  # the cut is exercised
    # The first row reads as the text.
    first = tokenizer.detokenize(rows["token_ids"][:1]).numpy()[0].decode()
    assert first.startswith("[CLS] in the beginning god created the heaven and the earth. and the earth was")
    # Packed greedily, as pack_documents: a row closes only when the next
    # chunk does not fit in it.
    used = (rows["padding_mask"] > 0).sum(1)
    first_of_next = (rows["padding_mask"][1:] == 1).sum(1)
    assert (used[:-1] + first_of_next > length).all()


def occurrences(ids, texts):
    """(document, start, end) of every place where `ids` occur in the
    documents `texts` (ids written ",1,2,3,")."""
    needle = "," + ",".join(map(str, ids)) + ","
    found = []
    for document, text in enumerate(texts):
        start = text.find(needle)
        while start >= 0:
            found.append((document, start, start + len(needle) - 1))
            start = text.find(needle, start + 1)
    return found


def in_order(before, after, texts, adjacent=False):
    """Whether segment `before` occurs in a document ahead of `after`
    (right ahead of it with `adjacent`)."""
    return any(
        a[0] == b[0] and (a[2] == b[1] if adjacent else a[2] <= b[1])
        for a in occurrences(before, texts) for b in occurrences(after, texts)
    )


# (One test loops over the objectives: the suite's per-test
# keras.utils.set_random_seed makes each test's first tokenizer call slow.)


@tensorflow_pass_only
def test_sentence_pair_rows(documents, tokenizer, sentence_ids):
    for task in ("nsp", "sop"):
        check_sentence_pair_rows(documents, tokenizer, sentence_ids, task)


def check_sentence_pair_rows(documents, tokenizer, sentence_ids, task):
    length = 64
    rows = pretraining_examples(documents, tokenizer, f"mlm+{task}", length, seed=3)
    ids = tokenizer.special_token_ids
    labels = rows["labels"]
    assert labels.dtype == np.int32 and set(labels.tolist()) == {0, 1}
    assert 0.3 < labels.mean() < 0.7
    texts = ["," + ",".join(map(str, flatten(document))) + "," for document in sentence_ids]
    checked = {0: 0, 1: 0}
    for tokens, segments, mask, label in zip(rows["token_ids"], rows["segment_ids"], rows["padding_mask"], labels):
        n = mask.sum()
        assert set(mask.tolist()) <= {0, 1} and not mask[n:].any()
        tokens, segments = tokens[:n].tolist(), segments[:n]
        # [CLS] A [SEP] B [SEP], segment ids 0 up to the first [SEP], then 1.
        split = tokens.index(ids["sep"])
        assert tokens[0] == ids["cls"] and tokens[-1] == ids["sep"] and tokens.count(ids["sep"]) == 2
        assert not segments[:split + 1].any() and segments[split + 1:].all()
        first, second = tokens[1:split], tokens[split + 1:-1]
        # Each segment is consecutive text of a document (a truncated pair
        # loses tokens at the ends of its segments, never inside).
        assert occurrences(first, texts) and occurrences(second, texts)
        if task == "nsp" and label == 1:
            continue  # B comes from another document
        natural = (first, second) if label == 0 else (second, first)  # SOP: 1 = swapped
        # Untruncated pairs (shorter than a row) are two adjacent spans.
        assert in_order(*natural, texts, adjacent=len(tokens) < length)
        checked[label] += 1
    assert checked[0] > 10 and (task == "nsp" or checked[1] > 10)


@tensorflow_pass_only
def test_roberta_layout_and_padding_id(documents, tokenizer, monkeypatch):
    # The same vocabulary packed as RoBERTa's (4 special tokens a pair) with
    # a nonzero padding id, as RoBERTa's <pad> = 1 (no new tokenizer to trace).
    monkeypatch.setattr(tokenizer, "packing_style", "roberta")
    monkeypatch.setattr(tokenizer, "special_tokens", {**tokenizer.special_tokens, "pad": "[unused0]"})
    ids = tokenizer.special_token_ids
    assert ids["pad"] == 1
    rows = pretraining_examples(documents[:4], tokenizer, "mlm", 48)
    assert chunks_of(rows, ids["cls"], ids["sep"])
    assert (rows["token_ids"][rows["padding_mask"] == 0] == ids["pad"]).all()
    pairs = pretraining_examples(documents[:4], tokenizer, "mlm+sop", 48)
    for tokens, segments, mask in zip(pairs["token_ids"], pairs["segment_ids"], pairs["padding_mask"]):
        assert (tokens[mask == 0] == ids["pad"]).all()
        tokens = tokens[mask > 0].tolist()
        # <s> A </s></s> B </s>, all segment ids 0.
        split = tokens.index(ids["sep"])
        assert tokens[0] == ids["cls"] and tokens[split + 1] == ids["sep"] and tokens[-1] == ids["sep"]
        assert tokens.count(ids["sep"]) == 3 and not segments.any()
    with pytest.raises(ValueError, match="sequence_length must be an integer >= 6"):
        pretraining_examples(documents[:4], tokenizer, "mlm+sop", 5)


# --- The stream ------------------------------------------------------------


@tensorflow_pass_only
def test_shapes_dtypes_and_masks(documents, tokenizer):
    for objective, whole_word in [("mlm", False), ("electra", True), ("mlm+nsp", False), ("mlm+sop", True)]:
        check_shapes_dtypes_and_masks(documents, tokenizer, objective, whole_word)


def check_shapes_dtypes_and_masks(documents, tokenizer, objective, whole_word):
    length, batch, documents = 64, 8, documents[:6]
    rows = pretraining_examples(documents, tokenizer, objective, length)
    dataset = pretraining_dataset(documents, tokenizer, objective, length, batch, whole_word=whole_word)
    task = objective[4:] if "+" in objective else None
    expected_spec = tf.TensorSpec([batch, length], tf.int32)
    x_spec = dataset.element_spec[0]
    assert x_spec["token_ids"] == x_spec["segment_ids"] == x_spec["padding_mask"] == expected_spec
    assert x_spec["mask_positions"] == tf.TensorSpec([batch, 10], tf.int32)  # ceil(64 * 0.15)

    specials = list(tokenizer.special_token_ids.values())
    seen = []
    for x, y, weight in map(as_numpy, dataset.take(4)):
        if task:
            assert sorted(y) == sorted(weight) == ["mlm", task]
            assert y[task].dtype == np.int32 and y[task].shape == (batch,)
            np.testing.assert_array_equal(weight[task], np.ones(batch, np.float32))
            y, weight, labels = y["mlm"], weight["mlm"], y[task]
        assert y.shape == weight.shape == (batch, 10) and y.dtype == np.int32 and weight.dtype == np.float32
        for row in range(batch):
            selected = np.zeros(length, bool)
            positions = x["mask_positions"][row][weight[row] > 0]
            selected[positions] = True
            assert selected.sum() == len(positions) > 0
            # The example this row came from: it agrees everywhere not selected.
            match = np.flatnonzero(
                (rows["token_ids"][:, ~selected] == x["token_ids"][row, ~selected]).all(1)
                & (rows["padding_mask"] == x["padding_mask"][row]).all(1)
                & (rows["segment_ids"] == x["segment_ids"][row]).all(1)
            )
            assert len(match) >= 1
            original = rows["token_ids"][match[0]]
            # Targets are the original ids at the masked positions, never
            # special tokens or padding.
            np.testing.assert_array_equal(y[row][weight[row] > 0], original[positions])
            assert not np.isin(original[positions], specials).any()
            assert (x["padding_mask"][row][positions] > 0).all()
            if task:
                assert labels[row] in rows["labels"][match]
            seen.append(match[0])
    # Four batches of one epoch: distinct examples (a permutation).
    assert len(rows["token_ids"]) >= 32 and len(set(seen)) == len(seen)


@tensorflow_pass_only
def test_start_step_resumes_bit_identical(documents, tokenizer):
    # 3 chapters at 48: a few dozen rows, so that 7-row batches cross epoch
    # boundaries at several places mid-batch.
    kwargs = {"documents": documents[:3], "tokenizer": tokenizer, "objective": "mlm+sop",
              "sequence_length": 48, "batch_size": 7, "seed": 11}
    count = len(pretraining_examples(documents[:3], tokenizer, "mlm+sop", 48, seed=11)["token_ids"])
    steps = (2 * count) // 7 + 3  # more than two epochs
    full = [as_numpy(b) for b in pretraining_dataset(**kwargs).take(steps)]
    assert count % 7 and count < 7 * steps // 2
    for start in (count // 7, steps - 2):  # the batch across the first epoch boundary; the third epoch
        resumed = [as_numpy(b) for b in pretraining_dataset(start_step=start, **kwargs).take(steps - start)]
        assert_same_batches(resumed, full[start:])
    # Epochs are ordered anew; another seed, another stream.
    tokens = np.concatenate([b[0]["token_ids"] for b in full])
    assert not np.array_equal(tokens[:count], tokens[count:2 * count])
    other = as_numpy(next(iter(pretraining_dataset(**{**kwargs, "seed": 12}))))
    assert not np.array_equal(other[0]["token_ids"], full[0][0]["token_ids"])
    assert not np.array_equal(other[0]["mask_positions"], full[0][0]["mask_positions"])
