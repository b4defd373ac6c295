"""Training on packed rows (kerasbert.tasks.packed_training): each epoch's
batches, their layout, the packed batches, and a task's outputs, gradients
and `fit` on packed rows against the same examples one per row."""

import keras
import numpy as np
import pytest
from helpers import rotten_tomatoes, tiny_task, torch_pass_only
# The first 300 snippets, and MiniLM's preprocessor padding to the longest row.
from test_packed_prediction import PACKED_CASES, PACKED_TASKS, preprocessor, texts  # noqa: F401 (fixtures)

from kerasbert.preprocessing.packed_rows import (
    EXAMPLE_SLOTS,
    epoch_batches,
    pack_rows,
    packed_layout,
    packed_training_batches,
)
from kerasbert.preprocessing import batching, datasets, packed_rows
from kerasbert.tasks import fine_tuning
from kerasbert.tasks.packed_training import ExampleOutputs

NAMES = ("token_ids", "segment_ids", "padding_mask")


@pytest.mark.parametrize("count", [96, 101, 7])
def test_epoch_batches_take_every_example_once_one_from_each_length_stratum(count):
    rng = np.random.default_rng(0)
    lengths = rng.permutation(count) + 1  # distinct lengths: each example's stratum is known
    batches = epoch_batches(lengths, 8, True, rng)
    assert sorted(np.concatenate(batches).tolist()) == list(range(count))
    full = count // 8
    assert [len(b) for b in batches] == [8] * full + ([count % 8] if count % 8 else [])
    rest = batches[full] if count % 8 else np.zeros([0], int)
    stratified = np.sort(lengths[np.setdiff1d(np.arange(count), rest)])
    for batch in batches[:full]:
        ranks = np.searchsorted(stratified, np.sort(lengths[batch]))
        assert (ranks // full == np.arange(8)).all()  # its i-th shortest from the i-th stratum
    later = epoch_batches(lengths, 8, True, rng)
    assert [b.tolist() for b in later] != [b.tolist() for b in batches]  # each epoch its own batches
    assert np.concatenate(epoch_batches(lengths, 8, False, rng)).tolist() == list(range(count))  # in order


def test_stratified_batches_need_fewer_rows_than_random_ones():
    lengths = np.minimum(np.random.default_rng(1).geometric(1 / 27, 4000) + 6, 65)  # snippet-like lengths
    rng = np.random.default_rng(0)
    stratified = [len(pack_rows(lengths[b], 72, 18)) for b in epoch_batches(lengths, 32, True, rng)[:-1]]
    random = [len(pack_rows(lengths[rng.choice(4000, 32, replace=False)], 72, 18)) for _ in range(125)]
    assert max(stratified) - min(stratified) < max(random) - min(random)


def test_packed_layout_holds_the_batches_in_few_row_counts(monkeypatch):
    lengths = np.random.default_rng(1).integers(3, 60, 2000)  # the longest 59 tokens
    width, counts = packed_layout(lengths, 32, False, np.random.default_rng(0))
    assert width in (64, 72, 80, 88) and counts[-1] == 32 and list(counts) == sorted(set(counts))
    assert len(counts) - 1 <= batching.COMPILED_SHAPES
    needed = [len(pack_rows(lengths[b], width, width // 4)) for b in epoch_batches(lengths, 32, False, None)[:-1]]
    assert max(needed) <= counts[-2]  # in order, every whole batch was counted
    padded = np.asarray(counts)[np.searchsorted(counts, needed)].sum() * width
    assert padded < 0.75 * 32 * len(needed) * 64  # against one example a row padded to the longest
    monkeypatch.setattr(packed_rows, "SHAPE_COST", 10**9)  # compilations cost more than any padding
    assert len(packed_layout(lengths, 32, True, np.random.default_rng(0))[1]) == 2  # one count, and 32


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("chunk", [4096, 40])  # packed alone in one chunk, or several
def test_packed_batches_hold_every_example_whole_with_its_target_and_weight(preprocessor, texts, monkeypatch, pairs,
                                                                           chunk):
    monkeypatch.setattr(datasets, "PACKING_CHUNK", chunk)
    x = (texts[:150], texts[150:]) if pairs else texts
    count = 150 if pairs else 300
    ids, weights = np.arange(count), np.linspace(0.5, 2.0, count).astype("float32")  # y: each example's index
    batches = packed_training_batches(preprocessor, preprocessor.tokenize_examples(x), ids, weights, batch_size=16,
                                      shuffle=True, seed=3, input_names=NAMES)
    alone = {k: np.asarray(v) for k, v in preprocessor(x).items()}  # each example packed alone
    lengths = alone["padding_mask"].sum(axis=1)
    assert len(batches) == batches.num_batches == -(-count // 16)
    epochs = []
    for _ in range(2):
        epochs.append([batches[i] for i in range(len(batches))])
        batches.on_epoch_end()  # as Keras calls it
    assert [b[1].tolist() for b in epochs[0]] != [b[1].tolist() for b in epochs[1]]  # reshuffled
    shapes = {f["token_ids"].shape for batches in epochs for f, _, _ in batches[:-1]}
    assert len({width for _, width in shapes}) == 1 and len(shapes) <= 1 + batching.COMPILED_SHAPES
    for batches in epochs:
        assert sorted(np.concatenate([y for _, y, _ in batches]).tolist()) == list(range(count))
        for features, y, w in batches:
            assert sorted(features) == sorted([*NAMES, EXAMPLE_SLOTS])
            np.testing.assert_array_equal(w, weights[y])
            slots = features[EXAMPLE_SLOTS]
            assert slots.shape == (len(y), 2) and len(set(map(tuple, slots))) == len(y)
            for i, (row, number) in zip(y, slots):
                columns = np.flatnonzero(features["padding_mask"][row] == number)
                assert len(columns) == lengths[i] and (np.diff(columns) == 1).all()  # whole and contiguous
                for key in ("token_ids", "segment_ids"):
                    np.testing.assert_array_equal(features[key][row, columns], alone[key][i, :lengths[i]])
            used = sorted(set(slots[:, 0].tolist()))
            assert used == list(range(len(used)))  # the rows in use first ...
            assert (features["padding_mask"][used] > 0).sum() == lengths[y].sum()  # ... holding nothing else
            for key, value in features.items():  # filler rows: copies of the first
                if key != EXAMPLE_SLOTS:
                    np.testing.assert_array_equal(value[len(used):], np.repeat(value[:1], len(value) - len(used), 0))


def test_examples_longer_than_packed_rows_are_not_packed(preprocessor, texts, monkeypatch):
    monkeypatch.setattr(packed_rows, "PACKED_WIDTH", 16)
    tokenized = preprocessor.tokenize_examples(texts[:40])
    assert packed_training_batches(preprocessor, tokenized, np.zeros(40), input_names=NAMES) is None


def _task(kind, preprocessor, options, seed=0):
    keras.utils.set_random_seed(seed)
    options = dict(options)
    if kind == "classifier":
        options["dropout"] = 0.0  # the head's; the encoder's is 0 too: outputs and steps are deterministic
    return tiny_task(kind, preprocessor, **options)


def _targets(kind, count):
    rng = np.random.default_rng(1)
    return rng.integers(0, 3, count) if kind == "classifier" else rng.normal(size=(count, 16)).astype("float32")


@pytest.mark.parametrize("kind, options", PACKED_CASES)
def test_a_packed_batch_gives_each_example_its_outputs_and_gradients_alone(preprocessor, texts, kind, options):
    model = _task(kind, preprocessor, options)
    names = tuple(model.input)
    y = _targets(kind, 24)
    batches = packed_training_batches(preprocessor, preprocessor.tokenize_examples(texts[:24]), y, batch_size=24,
                                      input_names=names)
    assert len(batches) == 1
    packed, packed_y = batches[0]
    np.testing.assert_array_equal(packed_y, y)  # in order without shuffling
    assert len(packed["token_ids"]) < 12  # several examples a row
    padded = {k: np.asarray(v) for k, v in preprocessor(texts[:24]).items() if k in names}
    expected = np.asarray(model.predict_on_batch(padded))
    np.testing.assert_allclose(np.asarray(model.predict_on_batch(packed)), expected, atol=2e-5)
    # One training step on each: the same loss and the same weights after it.
    initial = model.get_weights()
    twin = _task(kind, preprocessor, options)
    twin.set_weights(initial)
    for m in (model, twin):
        m.compile(optimizer=keras.optimizers.SGD(0.5))
    loss = float(np.ravel(model.train_on_batch(padded, y))[0])
    packed_loss = float(np.ravel(twin.train_on_batch(packed, y))[0])
    assert abs(loss - packed_loss) < 1e-5 * max(1.0, abs(loss))
    for padded_after, packed_after in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_allclose(packed_after, padded_after, atol=2e-5)
    moved = sum(not np.allclose(before, after) for before, after in zip(initial, twin.get_weights()))
    assert moved > len(initial) // 2  # the step trained the encoder, not only the head


def test_example_outputs_take_each_example_from_its_slot():
    outputs = np.arange(2 * 3 * 2, dtype="float32").reshape(2, 3, 2)  # (rows, documents, 2)
    slots = np.array([[1, 2], [0, 1], [1, 1]], "int32")  # row, number in the row (from 1)
    layer = ExampleOutputs(3)
    np.testing.assert_array_equal(np.asarray(layer(outputs, slots)), outputs[[1, 0, 1], [1, 0, 0]])
    assert layer.compute_output_shape((2, 3, 2), (3, 2)) == (3, 2)
    assert ExampleOutputs.from_config(layer.get_config()).documents == 3


def _spy(monkeypatch):
    calls = []
    spy = packed_rows.packed_training_batches

    def packed(*args, **kwargs):
        batches = spy(*args, **kwargs)
        calls.append(batches is not None)
        return batches

    monkeypatch.setattr(fine_tuning, "packed_training_batches", packed)
    return calls


def test_fit_trains_on_packed_rows_where_xla_compiles_the_model(preprocessor, texts, monkeypatch):
    labels = np.array([label for _, label in rotten_tomatoes()[:300]])
    model = _task("classifier", preprocessor, {"pooling": "mean"})
    calls = _spy(monkeypatch)
    model.compile(jit_compile=False)
    model.fit(texts[:16], labels[:16], batch_size=16, verbose=0)  # one step: JAX compiles each op at each shape
    assert not calls  # eager steps take any shape: batches padded to their longest row
    if keras.backend.backend() == "torch":
        return  # jit_compile=True is torch.compile there: too slow for this suite
    model.compile(jit_compile=True)
    history = model.fit(texts[:64], labels[:64], batch_size=16, epochs=2, verbose=0,
                        validation_data=(texts[64:96], labels[64:96]))
    assert calls == [True, True]  # the training data and the validation data
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(np.isfinite(v).all() for v in history.history.values())
    loss, accuracy = model.evaluate(texts[64:96], labels[64:96], verbose=0)[:2]
    assert calls == [True, True, True]
    np.testing.assert_allclose([loss, accuracy], [history.history["val_loss"][-1],
                                                  history.history["val_accuracy"][-1]], atol=1e-5)


@pytest.mark.parametrize("kind, options", [pytest.param(*PACKED_TASKS[1], marks=torch_pass_only), PACKED_TASKS[4]])
def test_fit_on_packed_rows_trains_the_weights_fit_on_padded_rows_does(preprocessor, texts, monkeypatch, kind,
                                                                       options):
    """One batch an epoch (every example in it), no dropout: both ways give the
    same steps, the fine-tuning recipe's optimizer included."""
    y = _targets(kind, 24)
    calls = _spy(monkeypatch)
    weights = []
    for packed in (False, True):
        model = _task(kind, preprocessor, options)
        monkeypatch.setattr(fine_tuning.FineTuningTask, "_padded_shapes", lambda self, p=packed: 4 if p else None)
        model.fit(texts[:24], y, batch_size=32, epochs=3, verbose=0)
        weights.append(model.get_weights())
    assert calls == [True]
    for padded, packed in zip(*weights):
        np.testing.assert_allclose(packed, padded, atol=5e-5)


def test_packed_fit_checks_the_counts_of_targets_and_weights(preprocessor, texts, monkeypatch):
    model = _task("classifier", preprocessor, {"pooling": "mean"})
    monkeypatch.setattr(fine_tuning.FineTuningTask, "_padded_shapes", lambda self: 4)
    with pytest.raises(ValueError, match="y has 9 entries but x has 10 examples"):
        model.fit(texts[:10], np.zeros(9, "int32"))
    with pytest.raises(ValueError, match="sample_weight has 3 entries but x has 10 examples"):
        model.fit(texts[:10], np.zeros(10, "int32"), sample_weight=np.ones(3))


def test_packed_batches_split_over_data_parallel_replicas(preprocessor, texts):
    """Replicas split each batch's rows and examples: row counts are multiples
    of them, and a last batch is cut to one (evaluation, which drops none,
    refuses a last batch that is not)."""
    tokenized = preprocessor.tokenize_examples(texts[:70])  # batches of 16: 4 whole, then 6 examples
    batches = packed_training_batches(preprocessor, tokenized, np.arange(70), batch_size=16, shuffle=True,
                                      input_names=NAMES, replicas=4)
    assert len(batches) == 5 and all(count % 4 == 0 for count in batches.row_counts)
    for epoch in range(2):
        sizes = [len(batches[i][1]) for i in range(len(batches))]
        assert sizes == [16, 16, 16, 16, 4]  # 2 of the 70 sit out
        assert all(len(batches[i][0]["token_ids"]) % 4 == 0 for i in range(len(batches)))
        batches.on_epoch_end()
    with pytest.raises(ValueError, match="last batch of 6 examples .* cannot be split over the 4 data-parallel"):
        packed_training_batches(preprocessor, tokenized, np.arange(70), batch_size=16, input_names=NAMES, replicas=4,
                                cut_partial_batch=False)
    with pytest.raises(ValueError, match="batch_size=18 .* must be a multiple of the 4 data-parallel replicas"):
        packed_training_batches(preprocessor, tokenized, np.arange(70), batch_size=18, input_names=NAMES, replicas=4)


def test_packed_batches_follow_keras_random_seed(preprocessor, texts):
    tokenized = preprocessor.tokenize_examples(texts[:100])
    drawn = []
    for seed in (3, 3, 4):
        keras.utils.set_random_seed(seed)
        batches = packed_training_batches(preprocessor, tokenized, np.arange(100), batch_size=16, shuffle=True,
                                          input_names=NAMES)
        drawn.append([batches[i][1].tolist() for i in range(len(batches))])
    assert drawn[0] == drawn[1] != drawn[2]
