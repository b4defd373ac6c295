"""Prediction on packed rows (kerasbert.preprocessing.packed_rows): the row
packing, the batches it builds, per-document pooling, and the tasks' packed
outputs against what the same model predicts on one example per row; the
same packing in the serving graph (`pack_in_graph`)."""

import keras
import numpy as np
import pytest
from helpers import rotten_tomatoes, tiny_task, torch_pass_only

from kerasbert.layers import Pooling
from kerasbert.preprocessing import TextPreprocessor
from kerasbert.preprocessing.packed_rows import pack_in_graph, pack_rows, packed_batches, packed_width
from kerasbert.preprocessing import datasets, packed_rows
from kerasbert.tasks import fine_tuning


def first_fit_decreasing(lengths, width):
    """The textbook algorithm, item by item: each into the first row it fits."""
    rows, space = [], []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r in range(len(rows)):
            if space[r] >= lengths[index]:
                rows[r].append(index)
                space[r] -= lengths[index]
                break
        else:
            rows.append([index])
            space.append(width - lengths[index])
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_pack_rows_packs_as_first_fit_decreasing(seed):
    rng = np.random.default_rng(seed)
    width = int(rng.choice([16, 64, 128]))
    lengths = rng.integers(1, width + 1, size=int(rng.integers(1, 300))) // int(rng.choice([1, 4]))
    lengths = np.maximum(lengths, 1)
    rows = pack_rows(lengths, width, documents=width)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))  # each example once
    assert all(sum(lengths[row]) <= width for row in rows)
    reference = first_fit_decreasing(list(lengths), width)
    assert len(rows) == len(reference)
    assert sorted(sorted(lengths[row]) for row in rows) == sorted(sorted(lengths[row]) for row in reference)


def test_pack_rows_holds_at_most_documents_a_row():
    rows = pack_rows([1] * 50, width=128, documents=16)
    assert [len(row) for row in rows] == [16, 16, 16, 2]
    assert sorted(i for row in rows for i in row) == list(range(50))
    assert pack_rows([], width=8, documents=2) == []
    with pytest.raises(ValueError, match=r"every length must be in \[1, 8\]; got 1 to 9"):
        pack_rows([1, 9], width=8, documents=2)


def test_packed_width_is_a_default_boundary_or_the_sequence_length():
    assert packed_width(30, 128) == 32 and packed_width(97, 128) == 128 and packed_width(129, 512) == 192
    assert packed_width(100, 100) == 100


@pytest.fixture(scope="module")
def texts():
    return [text for text, _ in rotten_tomatoes()[:300]]


@pytest.fixture(scope="module")
def preprocessor(minilm_tokenizer):
    return TextPreprocessor(minilm_tokenizer, sequence_length=64, pad_to_sequence_length=False)


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("chunk", [4096, 40])  # one chunk; several, packed again as the batches go
@pytest.mark.parametrize("cap", [128, 24])  # one width; two (the examples past 24 tokens in wider rows)
def test_packed_batches_place_every_example_whole_in_its_slot(preprocessor, texts, monkeypatch, pairs, chunk, cap):

    monkeypatch.setattr(datasets, "PACKING_CHUNK", chunk)
    monkeypatch.setattr(packed_rows, "PACKED_WIDTH", cap)
    x = (texts[:150], texts[150:]) if pairs else texts
    checked = []
    batches, where, documents = packed_batches(preprocessor, x, batch_size=16, check=checked.append)
    batches = list(batches)
    assert sum(len(f["token_ids"]) for f in checked) == len(texts) // (2 if pairs else 1)  # checked up front
    alone = {k: np.asarray(v) for k, v in preprocessor(x).items()}  # each example packed alone
    lengths = alone["padding_mask"].sum(axis=1)
    short = lengths <= cap
    widths = [packed_width(lengths[short].max(), 64)] + ([packed_width(lengths[~short].max(), 64)] if cap < 64 else [])
    assert (~short).any() == (cap < 64)
    assert documents == min(widths[0], cap) // packed_rows.DOCUMENT_TOKENS
    # One shape per width: one program each; a batch holds at least batch_size rows.
    assert {f["token_ids"].shape for f in batches} == {(max(16, 2048 // w), w) for w in widths}
    rows = [({k: f[k][r] for k in f}, b) for b, f in enumerate(batches) for r in range(len(f["token_ids"]))]
    assert sorted(rows[0][0]) == sorted(alone)
    assert len(set(map(tuple, where))) == len(lengths)  # one slot each
    assert where[:, 1].max() < documents
    for i, (row, slot) in enumerate(where):
        features = rows[row][0]
        assert len(features["token_ids"]) == widths[0 if short[i] else 1]
        columns = np.flatnonzero(features["padding_mask"] == slot + 1)
        assert len(columns) == lengths[i] and (np.diff(columns) == 1).all()  # whole and contiguous
        for key in ("token_ids", "segment_ids"):
            np.testing.assert_array_equal(features[key][columns], alone[key][i, :lengths[i]])
    used = set(where[:, 0].tolist())
    assert sum((rows[r][0]["padding_mask"] > 0).sum() for r in used) == lengths.sum()  # nothing else in them
    filled = {rows[r][1] for r in range(len(rows)) if r not in used}
    last_of_width = {max(b for b, f in enumerate(batches) if f["token_ids"].shape[1] == w) for w in widths}
    assert filled <= last_of_width  # filler rows only in each width's last batch ...
    for r in set(range(len(rows))) - used:  # ... copies of its first row
        batch = batches[rows[r][1]]
        for key, value in rows[r][0].items():
            np.testing.assert_array_equal(value, batch[key][0])


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_pooling_per_document_pools_each_example_as_alone(pooling):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 2, 2, 3, 0], [1, 1, 1, 1, 1, 1, 1]])
    pooled = np.asarray(Pooling(pooling, normalize=True, documents=4)(x, mask))
    assert pooled.shape == (2, 4, 3)
    alone = Pooling(pooling, normalize=True)
    for row, document, (begin, end) in [(0, 0, (0, 3)), (0, 1, (3, 5)), (0, 2, (5, 6)), (1, 0, (0, 7))]:
        np.testing.assert_allclose(pooled[row, document], np.asarray(alone(x[row:row + 1, begin:end],
                                                                           np.ones((1, end - begin))))[0], atol=1e-6)
    np.testing.assert_array_equal(pooled[0, 3], 0)  # slots with no example
    np.testing.assert_array_equal(pooled[1, 1:], 0)
    assert Pooling(pooling, documents=4).compute_output_shape((2, 7, 3), (2, 7)) == (2, 4, 3)
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="documents must be a positive integer or None"):
            Pooling(pooling, documents=bad)
    assert Pooling.from_config(Pooling(pooling, documents=4).get_config()).documents == 4


# Tasks with one output per example, as the packed tests build them (`tiny_task`).
PACKED_TASKS = [
    ("classifier", {"pooling": "mean"}),
    ("classifier", {"pooling": "cls"}),  # the encoder's pooler
    ("classifier", {"pooling": "cls", "hidden_dim": 8, "encoder": {"pooler": False}}),  # a head of its own
    # RoBERTa's layout: no segments, positions offset by 2
    ("classifier", {"pooling": "cls", "hidden_dim": 8, "encoder": {"pooler": False, "num_segments": 0,
                                                                   "position_offset": 2}}),
    ("embedder", {"pooling": "mean", "normalize": True}),
    ("embedder", {"pooling": "cls"}),
]
# Every pass packs a classifier and an embedder that pool by the mean; the
# other heads, which read the same packed encoder outputs, pack in the torch
# pass.
PACKED_CASES = [case if i in (0, 4) else pytest.param(*case, marks=torch_pass_only)
                for i, case in enumerate(PACKED_TASKS)]


@pytest.mark.parametrize("kind, options", PACKED_CASES)
@pytest.mark.parametrize("pairs", [False, True])
def test_predict_on_packed_rows_gives_each_example_its_own_outputs(preprocessor, texts, monkeypatch, kind, options,
                                                                   pairs):
    if kind == "embedder" and pairs:
        pytest.skip("an embedder takes single texts")
    keras.utils.set_random_seed(0)
    model = tiny_task(kind, preprocessor, **options)
    x = (texts[:40], texts[40:80]) if pairs else texts[:80]
    # One example per row, as sorted batches: the reference.
    monkeypatch.setattr(fine_tuning.FineTuningTask, "_packs_predictions", lambda self: False)
    expected = model.predict(x, batch_size=8)
    monkeypatch.undo()
    # Packed rows, whatever the backend compiles (XLA packs them: below).
    monkeypatch.setattr(fine_tuning.FineTuningTask, "_padded_shapes", lambda self: 4)
    packed = []
    spy = packed_rows.packed_batches
    monkeypatch.setattr(fine_tuning, "packed_batches", lambda *a, **k: packed.append(1) or spy(*a, **k))
    actual = model.predict(x, batch_size=8)
    assert packed, "predict did not pack its rows"
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, atol=2e-5)


def test_predict_packs_rows_where_xla_compiles_the_model(preprocessor, texts, monkeypatch):
    model = tiny_task("classifier", preprocessor, pooling="mean")
    packed = []
    spy = packed_rows.packed_batches
    monkeypatch.setattr(fine_tuning, "packed_batches", lambda *a, **k: packed.append(1) or spy(*a, **k))
    model.compile(jit_compile=False)
    eager = model.predict(texts[:40])
    assert not packed  # eager steps take any shape: sorted batches, each padded to its longest row
    if keras.backend.backend() == "torch":
        return  # jit_compile=True is torch.compile there: too slow for this suite
    model.compile(jit_compile=True)
    np.testing.assert_allclose(model.predict(texts[:40]), eager, atol=2e-5)
    assert packed == [1]
    assert [m.jit_compile for m in fine_tuning._PACKED_PREDICTORS[model].values()] == [True]


@pytest.mark.parametrize("seed", range(5))
def test_pack_in_graph_packs_as_pack_rows(seed):
    """The serving graph's packing, row for row what `predict` packs, each
    example's tokens and features moved whole to its place."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    width = int(rng.choice([4, 16, 40]))
    documents = int(rng.choice([1, 3, 32]))
    lengths = np.maximum(rng.integers(1, width + 1, size=int(rng.integers(1, 60))) // int(rng.choice([1, 3])), 1)
    lengths[rng.integers(len(lengths))] = width  # the request pads to its longest
    padding_mask = (np.arange(width)[None] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1, 1000, padding_mask.shape).astype("int32") * padding_mask
    segment_ids = (rng.integers(0, 2, padding_mask.shape) * padding_mask).astype("int32")
    rows, where = pack_in_graph({"token_ids": tf.constant(token_ids), "segment_ids": tf.constant(segment_ids),
                                 "padding_mask": tf.constant(padding_mask)}, documents)
    rows, where = {k: v.numpy() for k, v in rows.items()}, where.numpy()
    expected = pack_rows(lengths, width, documents)
    assert rows["token_ids"].shape == (len(expected), width)
    for r, examples in enumerate(expected):
        assert [(where[e, 0], where[e, 1]) for e in examples] == [(r, d) for d in range(len(examples))]
        column = 0
        for d, e in enumerate(examples):
            span = slice(column, column + lengths[e])
            assert rows["padding_mask"][r, span].tolist() == [d + 1] * lengths[e]
            np.testing.assert_array_equal(rows["token_ids"][r, span], token_ids[e, :lengths[e]])
            np.testing.assert_array_equal(rows["segment_ids"][r, span], segment_ids[e, :lengths[e]])
            column += lengths[e]
        assert not rows["padding_mask"][r, column:].any() and not rows["token_ids"][r, column:].any()
    empty = tf.zeros([0, width], tf.int32)
    rows, where = pack_in_graph({"token_ids": empty, "padding_mask": empty}, documents)
    assert rows["token_ids"].shape == (0, width) and where.shape == (0, 2)


@pytest.mark.parametrize("kind, options", PACKED_TASKS[::2])
def test_serving_runs_the_encoder_on_packed_rows(preprocessor, texts, monkeypatch, kind, options):
    """What a SavedModel runs (tests/test_export.py serves it): the request's
    examples packed, fewer rows than examples, the outputs `predict`'s."""
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the serving function runs in TensorFlow (exports from JAX and torch rebuild the task there)")
    keras.utils.set_random_seed(0)
    model = tiny_task(kind, preprocessor, **options)
    rows = []
    call = type(model.encoder).call

    def counted(self, inputs, **kwargs):
        rows.append(inputs["token_ids"].shape[0])
        return call(self, inputs, **kwargs)

    monkeypatch.setattr(type(model.encoder), "call", counted)
    serve, _ = model.serving_function()
    served = serve(tf.constant(texts[:40]))
    served = next(iter(served.values())).numpy()
    lengths = np.asarray(model.preprocessor(texts[:40])["padding_mask"]).sum(axis=1)
    assert rows == [len(pack_rows(lengths, lengths.max(), documents=16))] and rows[0] < 30  # 64 // 4 a row
    monkeypatch.undo()
    np.testing.assert_allclose(served, model.predict(texts[:40], verbose=0), atol=2e-5)
