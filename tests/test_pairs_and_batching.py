"""Sentence pairs for NSP/SOP (BERT's data generator) and length bucketing."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from helpers import kjv_lines, rotten_tomatoes
from kerasbert.preprocessing import (
    Packer,
    bucket_by_length,
    make_sentence_pairs,
    padding_fraction,
    read_documents,
)


def numbered_documents(num_documents=60, seed=0):
    """Documents whose tokens say where they come from: token = doc * 10000 +
    sentence * 100 + position, so every pair can be traced back."""
    rng = np.random.default_rng(seed)
    documents = []
    for d in range(num_documents):
        sentences = []
        for s in range(int(rng.integers(1, 30))):
            sentences.append([d * 10000 + s * 100 + p for p in range(int(rng.integers(3, 25)))])
        documents.append(sentences)
    return documents


def _origin(token):
    return token // 10000, (token % 10000) // 100, token % 100


@pytest.mark.parametrize("task", ["nsp", "sop"])
def test_pairs_follow_the_rules(task):
    examples = make_sentence_pairs(numbered_documents(), 64, task=task, seed=1)
    labels = collections.Counter(label for _, _, label in examples)
    assert abs(labels[1] / len(examples) - 0.5) < 0.06
    lengths = []
    for first, second, label in examples:
        assert first and second and len(first) + len(second) <= 61
        lengths.append(len(first) + len(second))
        docs_a = {_origin(t)[0] for t in first}
        docs_b = {_origin(t)[0] for t in second}
        assert len(docs_a) == 1 and len(docs_b) == 1
        a_doc, b_doc = docs_a.pop(), docs_b.pop()
        # Segments are contiguous runs of a document (truncation trims ends).
        for segment in (first, second):
            keys = [(_origin(t)[1], _origin(t)[2]) for t in segment]
            assert keys == sorted(keys)
        if task == "nsp":
            if label == 0:
                assert a_doc == b_doc and _origin(first[-1])[1] < _origin(second[0])[1]
            else:
                assert a_doc != b_doc or len({d for d in range(60)}) == 1
        else:
            assert a_doc == b_doc
            in_order = _origin(first[-1])[1] < _origin(second[0])[1]
            assert in_order == (label == 0)
    # Most pairs fill the length; about 10% target a shorter one.
    short = np.mean(np.array(lengths) < 40)
    assert 0.03 < short < 0.35


def test_sentences_are_not_lost_or_duplicated_in_actual_next_pairs():
    documents = numbered_documents(seed=3)
    examples = make_sentence_pairs(documents, 512, task="sop", seed=0, short_sequence_probability=0.0)
    used = collections.Counter(t for first, second, _ in examples for t in first + second)
    assert max(used.values()) == 1  # nothing is used twice
    total = sum(len(s) for d in documents for s in d)
    single_sentence_docs = sum(len(s) for d in documents if len(d) == 1 for s in d)
    assert sum(used.values()) >= total - single_sentence_docs - 5 * len(documents)


def test_seeded_and_validated():
    documents = numbered_documents()
    assert make_sentence_pairs(documents, 32, seed=5) == make_sentence_pairs(documents, 32, seed=5)
    with pytest.raises(ValueError, match="task"):
        make_sentence_pairs(documents, 32, task="mlm")
    with pytest.raises(ValueError, match="sequence_length=4"):
        make_sentence_pairs(documents, 4)
    with pytest.raises(ValueError, match="two non-empty documents"):
        make_sentence_pairs(documents[:1], 32, task="nsp")


def test_read_documents_and_pack_real_text(tmp_path, minilm_tokenizer):
    # The King James Bible in BERT's format: a verse per line, a blank line
    # between chapters.
    text, chapter = [], []
    for line in kjv_lines()[:3000]:
        line = line.strip()
        if not line:
            continue
        if line[0].isdigit():
            chapter.append(line.split(" ", 1)[1] if " " in line else line)
        else:
            if chapter:
                text += chapter + [""]
            chapter = []
    (tmp_path / "kjv.txt").write_text("\n".join(text), encoding="utf-8")
    documents = read_documents(str(tmp_path / "kjv.txt"))
    assert len(documents) > 20 and all(documents)
    tokenizer = minilm_tokenizer
    ids = iter(tokenizer([s for doc in documents for s in doc]).to_list())
    tokenized = [[next(ids) for _ in doc] for doc in documents]
    examples = make_sentence_pairs(tokenized, 128, task="nsp", seed=0)
    packer = Packer.from_tokenizer(tokenizer, 128)
    packed = packer(
        tf.ragged.constant([a for a, _, _ in examples]), tf.ragged.constant([b for _, b, _ in examples])
    )
    # No truncation by the packer: the generator already made them fit.
    assert (packed["padding_mask"].numpy().sum(1) == [len(a) + len(b) + 3 for a, b, _ in examples]).all()


def _bucketed(tokenizer, texts, labels, boundaries):
    packer = Packer.from_tokenizer(tokenizer, boundaries[-1], pad_to_sequence_length=False)

    def trim(features, label):  # one example without its batch's padding
        length = tf.reduce_sum(features["padding_mask"])
        return {k: v[:length] for k, v in features.items()}, label

    dataset = (
        tf.data.Dataset.from_tensor_slices((texts, labels))
        .batch(512)
        .map(lambda text, label: (packer(tokenizer(text)), label))
        .unbatch()
        .map(trim)
    )
    return bucket_by_length(dataset, 32, boundaries)


def test_bucketing_uses_few_shapes_keeps_everything_and_saves_padding(minilm_tokenizer):
    data = rotten_tomatoes()[:3000]
    texts, labels = [t for t, _ in data], [y for _, y in data]
    tokenizer = minilm_tokenizer
    batches = list(_bucketed(tokenizer, texts, labels, (16, 32, 64, 128)))
    assert {f["token_ids"].shape[1] for f, _ in batches} <= {16, 32, 64, 128}
    assert sum(len(y) for _, y in batches) == len(texts)
    assert sorted(int(v) for _, y in batches for v in y) == sorted(labels)
    for features, _ in batches:
        lengths = features["padding_mask"].numpy().sum(1)
        width = features["token_ids"].shape[1]
        assert lengths.max() <= width and (width == 16 or lengths.max() > width // 2)
    fixed = tf.data.Dataset.from_tensor_slices(texts).batch(32).map(
        lambda x: Packer.from_tokenizer(tokenizer, 128)(tokenizer(x))
    )
    assert padding_fraction(batches) < 0.5 * padding_fraction(fixed)


def test_bucketing_arguments_are_checked():
    dataset = tf.data.Dataset.from_tensor_slices({"token_ids": [[1, 2]]})
    with pytest.raises(ValueError, match="boundaries"):
        bucket_by_length(dataset, 4, (64, 32))
    with pytest.raises(ValueError, match="batch_size"):
        bucket_by_length(dataset, 0)
