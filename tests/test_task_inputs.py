"""How tasks batch raw examples: boundaries fitted to the lengths (the fewest
padded positions for a number of shapes, checked against brute force), and
`make_dataset` keeping every example while padding each batch to them."""

import itertools

import numpy as np
import pytest
from helpers import rotten_tomatoes, tensorflow_pass_only

import kerasbert
from kerasbert.preprocessing import TextPreprocessor
from kerasbert.preprocessing.batching import SHAPE_COST, fitted_boundaries
from kerasbert.preprocessing.datasets import make_dataset

# tf.data and NumPy: the same on every Keras backend, checked once.
pytestmark = tensorflow_pass_only


def padded(lengths, boundaries):
    table = np.asarray(boundaries)
    return int(sum(table[np.searchsorted(table, n)] for n in lengths))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shapes, shape_cost", [(1, 0), (2, 0), (3, 0), (3, 300), (3, 3000)])
def test_fitted_boundaries_pad_least(seed, shapes, shape_cost):
    lengths = np.random.default_rng(seed).integers(2, 70, size=200)
    boundaries = fitted_boundaries(lengths, 128, shapes, shape_cost=shape_cost)
    assert boundaries[-1] == 128 and len(boundaries) <= shapes + 1
    assert all(b % 8 == 0 for b in boundaries) and boundaries[-2] >= lengths.max()
    # Every choice of up to `shapes` multiples of 8 holding the longest row,
    # each length past the first charged `shape_cost`.
    candidates = sorted({int(-(-n // 8) * 8) for n in lengths})
    best = min(padded(lengths, (*chosen, candidates[-1])) + shape_cost * k
               for k in range(shapes) for chosen in itertools.combinations(candidates[:-1], k))
    assert padded(lengths, boundaries) + shape_cost * (len(boundaries) - 2) == best


def test_fitted_boundaries_without_a_limit_take_every_length_needed():
    assert fitted_boundaries([1, 8, 9, 40, 500], 128) == (1, 8, 9, 40, 128)
    assert fitted_boundaries([1, 8, 9, 40, 500], 128, multiple=8) == (8, 16, 40, 128)
    assert fitted_boundaries([], 64, 2) == (64,)


@pytest.fixture(scope="module")
def sentences():
    from kerasbert import Tokenizer

    rows = rotten_tomatoes()[:300]
    preprocessor = TextPreprocessor(Tokenizer.from_preset("all_minilm_l6_v2"), sequence_length=64,
                                    pad_to_sequence_length=False)
    return preprocessor, [text for text, _ in rows], np.asarray([label for _, label in rows], "int32")


@pytest.mark.parametrize("shapes", [None, 2])
def test_batches_keep_every_example_and_pad_to_fitted_lengths(sentences, shapes):
    preprocessor, texts, labels = sentences
    lengths = preprocessor.tokenizer(texts).row_lengths().numpy() + 2
    boundaries = fitted_boundaries(lengths, 64, shapes, shape_cost=0 if shapes is None else SHAPE_COST)
    dataset = make_dataset(preprocessor, texts, labels, batch_size=16, shuffle=True, seed=1, shapes=shapes)
    widths, seen = [], []
    for features, y in dataset.as_numpy_iterator():
        width = features["token_ids"].shape[1]
        longest = int(features["padding_mask"].sum(axis=1).max())
        assert width == min(b for b in boundaries if b >= longest)  # the smallest that holds it
        widths.append(width)
        seen += [(tuple(row[mask]), label) for row, mask, label in
                 zip(features["token_ids"], features["padding_mask"].astype(bool), y)]
    assert len(seen) == len(texts) and sorted(label for _, label in seen) == sorted(labels)
    if shapes is not None:
        assert len(set(widths)) <= shapes


def test_input_pipelines_trace_kerasbert_code_as_written(sentences, monkeypatch):
    # AutoGraph's source-to-source conversion of the packing code took 1.5 s
    # of a 1.75 s trace; none of it needs AutoGraph (no Python control flow
    # on tensors), so none of it is converted.
    from tensorflow.python.autograph.impl import api

    from kerasbert.utils.examples import checked_dataset

    converted = []
    convert = api._convert_actual

    def spy(entity, program_ctx):
        converted.append(f"{getattr(entity, '__module__', '?')}.{getattr(entity, '__qualname__', entity)}")
        return convert(entity, program_ctx)

    monkeypatch.setattr(api, "_convert_actual", spy)
    preprocessor, texts, labels = sentences
    encoder = kerasbert.Encoder(vocabulary_size=preprocessor.tokenizer.vocabulary_size(), num_layers=1, hidden_dim=8,
                                num_heads=1, intermediate_dim=8, max_sequence_length=64)
    for shapes, group in [(None, 1), (2, 4)]:
        dataset = make_dataset(preprocessor, texts[:64], labels[:64], batch_size=16, shuffle=True, seed=0,
                               shapes=shapes, group_by_length=group)
        next(iter(checked_dataset(dataset, encoder, ("token_ids", "segment_ids", "padding_mask"))))
    assert not [name for name in converted if name.startswith("kerasbert")], converted


@pytest.mark.parametrize("chunk", [4096, 40])  # one chunk; several, packed again in sorted order
@pytest.mark.parametrize("shapes, padded_to_sequence_length", [(None, False), (2, False), (2, True)])
def test_sorted_batches_hold_every_example_packed_in_the_order_returned(sentences, monkeypatch, chunk, shapes,
                                                                        padded_to_sequence_length):
    from kerasbert.preprocessing import batching, datasets

    monkeypatch.setattr(datasets, "PACKING_CHUNK", chunk)
    monkeypatch.setattr(batching, "PREDICT_POSITIONS", 2000)  # short rows: more than batch_size a batch
    _, texts, _ = sentences
    preprocessor = TextPreprocessor(sentences[0].tokenizer, sequence_length=64,
                                    pad_to_sequence_length=padded_to_sequence_length)
    checked = []
    batches, order = datasets.sorted_batches(preprocessor, texts, batch_size=16, shapes=shapes,
                                           input_names=("token_ids", "padding_mask"), check=checked.append)
    assert sum(len(f["token_ids"]) for f in checked) == len(texts)  # every example checked once, up front
    assert sorted(order[order >= 0]) == list(range(len(texts)))
    packed = preprocessor(texts)  # each example packed alone, in the input's order
    expected = [row[mask] for row, mask in zip(np.asarray(packed["token_ids"]),
                                                np.asarray(packed["padding_mask"]).astype(bool))]
    lengths = [len(row) for row in expected]
    boundaries = fitted_boundaries(lengths, 64, shapes, shape_cost=0 if shapes is None else SHAPE_COST)
    rows, widths, counts, shapes_of_width, fillers = [], [], [], {}, 0
    for features in batches:
        assert sorted(features) == ["padding_mask", "token_ids"]
        count, width = features["token_ids"].shape
        assert count <= max(16, 2000 // width) and (shapes is None or count == max(16, 2000 // width))
        counts.append(count)
        kept = order[len(rows) + fillers:len(rows) + fillers + count] >= 0
        real = {k: v[kept] for k, v in features.items()}
        for k, v in features.items():  # filler rows are copies of the batch's first row
            assert (v[~kept] == v[:1]).all()
        fillers += int((~kept).sum())
        longest = int(real["padding_mask"].sum(axis=1).max())
        widths.append(width)
        assert width == min(b for b in boundaries if b >= longest)  # as make_dataset pads
        assert not real["token_ids"][real["padding_mask"] == 0].any()
        if shapes is not None:  # one shape per width: one compiled program
            assert shapes_of_width.setdefault(width, count) == count
        rows += [row[mask] for row, mask in zip(real["token_ids"], real["padding_mask"].astype(bool))]
    assert len(rows) + fillers == len(order) and max(counts) > 16  # short rows: more than batch_size
    assert (fillers > 0) == (shapes is not None)  # the data here leaves a partial batch
    assert [len(r) for r in rows] == sorted(lengths)  # shortest first
    for row, index in zip(rows, order[order >= 0]):
        np.testing.assert_array_equal(row, expected[index])
    if shapes is not None:
        assert len(set(widths)) <= shapes


def test_batch_plan_takes_the_most_rows_that_fit():
    from kerasbert.preprocessing.batching import PREDICT_POSITIONS, batch_plan

    rng = np.random.default_rng(0)
    widths = np.sort(rng.integers(1, 300, size=500))
    for fill in (False, True):
        plan = batch_plan(widths, batch_size=8, fill=fill)
        assert [b for b, *_ in plan] == [0] + [e for _, e, *_ in plan[:-1]] and plan[-1][1] == len(widths)
        for begin, end, width, rows in plan:
            limit = max(8, PREDICT_POSITIONS // width)
            assert width == widths[end - 1] and end - begin <= limit
            assert rows == (limit if fill else end - begin)
            if end < len(widths):  # one more example would not fit
                assert end + 1 - begin > max(8, PREDICT_POSITIONS // widths[end])


@pytest.mark.parametrize("shapes", [None, 2])
def test_pack_batch_traced_after_the_first_batch_packs_as_the_eager_one(sentences, shapes):
    from kerasbert.preprocessing import batching, datasets

    tokenizer, texts = sentences[0].tokenizer, sentences[1]
    preprocessor = TextPreprocessor(tokenizer, sequence_length=64, pad_to_sequence_length=False)
    # Batches of other sizes and lengths: the first packed eagerly, the
    # others by the traced function (one retrace relaxes it to any shape).
    batches = [texts[:1], texts[5:8], texts[20:52], texts[:1]]
    packed = [datasets.pack_batch(preprocessor, batch, shapes=shapes) for batch in batches]
    assert all(f is not None for f in datasets._PACKING[preprocessor].values())  # traced ones ran
    np.testing.assert_array_equal(packed[0]["token_ids"].numpy(), packed[-1]["token_ids"].numpy())
    for batch, features in zip(batches, packed):
        reference = preprocessor(batch)  # padded to its longest row
        longest = reference["token_ids"].shape[1]
        width = longest if shapes is None else min(b for b in batching.length_boundaries(64) if b >= longest)
        assert features["token_ids"].shape[1] == width
        for key in features:
            np.testing.assert_array_equal(features[key].numpy()[:, :longest], reference[key].numpy())
            assert not features[key].numpy()[:, longest:].any()


def test_pack_batch_keeps_no_preprocessor_alive(sentences):
    import gc
    import weakref

    from kerasbert.preprocessing import datasets

    def pack(texts):
        # In a frame of its own: tracing snapshots its caller's locals.
        preprocessor = TextPreprocessor(sentences[0].tokenizer, sequence_length=64, pad_to_sequence_length=False)
        for batch in (texts[:1], texts[5:8], texts[20:52]):  # eager, traced, retraced
            datasets.pack_batch(preprocessor, batch)
        assert datasets._PACKING[preprocessor]
        return weakref.ref(preprocessor)

    alive = pack(sentences[1])
    for _ in range(3):  # cycles freed by one collection can free others
        gc.collect()
    assert alive() is None, [type(r).__name__ for r in gc.get_referrers(alive())]
