"""The CRF layer against brute-force enumeration (likelihood, Viterbi paths and
gradients), against pytorch-crf, under constraints, in a functional model (jit
predict, fit) and under mixed precision."""

import itertools

import keras
import numpy as np
import pytest

from kerasbert.layers.crf import CRF, FORBIDDEN_SCORE, bio_transition_mask

BIO_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]

# Non-prefix masks as in BERT NER (first sub-words only), a prefix mask, a
# single position and an empty row.
MASKS = np.array(
    [
        [1, 1, 1, 1, 1],
        [1, 1, 1, 0, 0],
        [0, 1, 0, 1, 1],
        [1, 0, 0, 0, 1],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 0, 0],
    ],
    dtype="int32",
)


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def random_crf(num_tags, seed, scale=1.0, **kwargs):
    """A built CRF with random (not zero) weights."""
    rng = np.random.default_rng(seed)
    crf = CRF(num_tags, **kwargs)
    crf.build((None, None, num_tags))
    crf.transitions.assign(scale * rng.normal(size=(num_tags, num_tags)).astype("float32"))
    crf.start_transitions.assign(scale * rng.normal(size=(num_tags,)).astype("float32"))
    crf.end_transitions.assign(scale * rng.normal(size=(num_tags,)).astype("float32"))
    return crf


def effective_weights(crf):
    """The weights with the constraint penalties added, as numpy."""

    def penalty(allowed, shape):
        return np.zeros(shape) if allowed is None else np.where(allowed, 0.0, FORBIDDEN_SCORE)

    n = crf.num_tags
    return (
        numpy(crf.transitions) + penalty(crf.allowed_transitions, (n, n)),
        numpy(crf.start_transitions) + penalty(crf.allowed_starts, (n,)),
        numpy(crf.end_transitions) + penalty(crf.allowed_ends, (n,)),
    )


def enumerate_scores(emissions, mask, transitions, start, end):
    """{tag sequence over the unmasked positions: score} for one row."""
    positions = np.flatnonzero(mask)
    scores = {}
    for sequence in itertools.product(range(len(start)), repeat=len(positions)):
        score = start[sequence[0]] + end[sequence[-1]]
        score += sum(emissions[p, t] for p, t in zip(positions, sequence))
        score += sum(transitions[a, b] for a, b in itertools.pairwise(sequence))
        scores[sequence] = score
    return positions, scores


def brute_force(crf, emissions, tags, masks):
    """Log-likelihoods and Viterbi paths by enumerating every sequence."""
    transitions, start, end = effective_weights(crf)
    log_likelihoods, paths = [], np.zeros(masks.shape, "int32")
    for row, mask in enumerate(masks):
        if not mask.any():
            log_likelihoods.append(0.0)
            continue
        positions, scores = enumerate_scores(emissions[row].astype("float64"), mask, transitions, start, end)
        values = np.array(list(scores.values()))
        log_partition = values.max() + np.log(np.exp(values - values.max()).sum())
        log_likelihoods.append(scores[tuple(tags[row, positions])] - log_partition)
        paths[row, positions] = max(scores, key=scores.get)
    return np.array(log_likelihoods), paths


def random_tags(rng, masks, num_tags):
    tags = rng.integers(0, num_tags, masks.shape)
    return np.where(masks == 1, tags, -100).astype("int32")  # padding labels ignored


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "bio"])
def test_matches_brute_force_enumeration(constrained):
    rng = np.random.default_rng(1)
    if constrained:
        transitions, starts = bio_transition_mask(BIO_LABELS[:4])  # O B-PER I-PER B-LOC
        kwargs = {"allowed_transitions": transitions, "allowed_starts": starts, "allowed_ends": [1, 1, 0, 1]}
    else:
        kwargs = {}
    crf = random_crf(4, seed=2, **kwargs)
    emissions = rng.normal(size=(*MASKS.shape, 4)).astype("float32")
    tags = random_tags(rng, MASKS, 4)
    if constrained:
        _, tags = brute_force(crf, emissions, tags, MASKS)  # an allowed gold sequence
        tags = np.where(MASKS == 1, tags, -1)
    expected_log_likelihood, expected_paths = brute_force(crf, emissions, tags, MASKS)

    log_likelihood = numpy(crf.log_likelihood(emissions, tags, MASKS))
    assert log_likelihood.dtype == np.float32 and log_likelihood.shape == (len(MASKS),)
    np.testing.assert_allclose(log_likelihood, expected_log_likelihood, atol=1e-4)
    if not constrained:
        np.testing.assert_allclose(numpy(crf.negative_log_likelihood(emissions, tags, MASKS)), -log_likelihood)
    paths = numpy(crf(emissions, mask=MASKS))
    assert paths.dtype == np.int32
    np.testing.assert_array_equal(paths, expected_paths)


def test_no_mask_means_every_position():
    rng = np.random.default_rng(3)
    crf = random_crf(4, seed=4)
    emissions = rng.normal(size=(*MASKS.shape, 4)).astype("float32")
    tags = rng.integers(0, 4, MASKS.shape).astype("int32")
    expected_log_likelihood, expected_paths = brute_force(crf, emissions, tags, np.ones_like(MASKS))
    np.testing.assert_allclose(numpy(crf.log_likelihood(emissions, tags)), expected_log_likelihood, atol=1e-4)
    np.testing.assert_array_equal(numpy(crf(emissions)), expected_paths)


def test_matches_pytorch_crf():
    import torch
    import torchcrf

    rng = np.random.default_rng(5)
    num_tags, lengths = 4, np.array([5, 3, 1, 4, 2, 5])  # torchcrf needs prefix masks, non-empty
    crf = random_crf(num_tags, seed=6)
    emissions = rng.normal(size=(*MASKS.shape, num_tags)).astype("float32")
    tags = rng.integers(0, num_tags, MASKS.shape).astype("int64")
    mask = np.arange(MASKS.shape[1])[None, :] < lengths[:, None]

    reference = torchcrf.CRF(num_tags, batch_first=True)
    with torch.no_grad():
        reference.transitions.copy_(torch.from_numpy(numpy(crf.transitions)))
        reference.start_transitions.copy_(torch.from_numpy(numpy(crf.start_transitions)))
        reference.end_transitions.copy_(torch.from_numpy(numpy(crf.end_transitions)))
        expected = reference(
            torch.from_numpy(emissions), torch.from_numpy(tags), torch.from_numpy(mask), reduction="none"
        ).numpy()
        expected_paths = reference.decode(torch.from_numpy(emissions), torch.from_numpy(mask))

    np.testing.assert_allclose(numpy(crf.log_likelihood(emissions, tags, mask)), expected, atol=1e-4)
    paths = numpy(crf(emissions, mask=mask))
    for row, length in enumerate(lengths):
        assert paths[row, :length].tolist() == expected_paths[row]
        assert not paths[row, length:].any()


def test_bio_constraints_hold_in_decoding():
    allowed_transitions, allowed_starts = bio_transition_mask(BIO_LABELS)
    crf = random_crf(5, seed=7, scale=3.0, allowed_transitions=allowed_transitions, allowed_starts=allowed_starts)
    rng = np.random.default_rng(8)
    emissions = rng.normal(size=(64, 9, 5)).astype("float32") * 3
    emissions[..., [2, 4]] += 2.0  # tempt it with I- tags everywhere
    masks = (rng.random((64, 9)) < 0.6).astype("int32")
    paths = numpy(crf(emissions, mask=masks))
    inside_tags = 0
    for path, mask in zip(paths, masks):
        sequence = path[mask == 1]
        assert not path[mask == 0].any()
        if len(sequence):
            assert allowed_starts[sequence[0]], (sequence, mask)
        for a, b in itertools.pairwise(sequence):
            assert allowed_transitions[a][b], (sequence, mask)
        inside_tags += np.isin(sequence, [2, 4]).sum()
    assert inside_tags > 0  # the check is not vacuous


def test_bio_transition_mask_rules_and_errors():
    transitions, starts = bio_transition_mask(BIO_LABELS)
    assert starts == [True, True, False, True, False]
    assert transitions[1][2] and transitions[2][2] and not transitions[3][2] and not transitions[0][4]
    assert all(row[0] and row[1] and row[3] for row in transitions)  # O and B-X may follow anything
    with pytest.raises(ValueError, match="X-PER"):
        bio_transition_mask(["O", "X-PER"])
    with pytest.raises(TypeError, match="labels"):
        bio_transition_mask("O B-PER")


# On torch, jit_compile=True means torch.compile: it works with the CRF, but
# inductor takes 20-40 s per input shape on a CPU (a lone Dense takes ~20 s),
# too slow for the suite; XLA is what this test is about.
JIT_COMPILE = keras.backend.backend() != "torch"


def test_functional_model_predict_with_jit_and_dynamic_length():
    num_tags = 4
    emissions = keras.Input((None, num_tags), name="emissions")
    mask = keras.Input((None,), dtype="int32", name="mask")
    crf = CRF(num_tags, name="crf")
    outputs = crf(emissions, mask=mask)
    assert outputs.dtype == "int32" and tuple(outputs.shape) == (None, None)
    model = keras.Model({"emissions": emissions, "mask": mask}, outputs)
    rng = np.random.default_rng(9)
    crf.transitions.assign(rng.normal(size=(num_tags, num_tags)).astype("float32"))
    model.compile(jit_compile=JIT_COMPILE)
    for seq in (5, 3):
        inputs = {"emissions": rng.normal(size=(2, seq, num_tags)).astype("float32"), "mask": MASKS[:2, :seq]}
        predicted = model.predict(inputs, verbose=0)
        np.testing.assert_array_equal(predicted, numpy(crf(inputs["emissions"], mask=inputs["mask"])))


class CRFTagger(keras.Model):
    """Emissions and decoded tags as outputs; the loss is the CRF's NLL."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mask = keras.ops.greater_equal(y, 0)  # -100 marks padding and non-first sub-words
        nll = self.get_layer("crf").negative_log_likelihood(y_pred["emissions"], y, mask)
        return keras.ops.mean(nll)


def test_fit_lowers_the_negative_log_likelihood_and_trains_transitions():
    vocabulary, num_tags = 6, 3
    rng = np.random.default_rng(10)
    token_ids = rng.integers(0, vocabulary, (32, 7))
    # Tags follow the tokens, but tag 2 only ever follows tags 1 or 2: a job for transitions.
    tags = (token_ids % 2).astype("int32")
    tags[:, 1:] = np.where((tags[:, :-1] == 1) & (token_ids[:, 1:] >= 4), 2, tags[:, 1:])
    tags[:, 5:] = -100  # padding
    features = np.eye(vocabulary, dtype="float32")[token_ids]

    inputs = keras.Input((None, vocabulary))
    emissions = keras.layers.Dense(num_tags)(inputs)
    model = CRFTagger(inputs, {"emissions": emissions, "tags": CRF(num_tags, name="crf")(emissions)})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    before = numpy(model.get_layer("crf").transitions).copy()
    history = model.fit(features, tags, batch_size=8, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    assert np.abs(numpy(model.get_layer("crf").transitions) - before).max() > 1e-3


def expected_gradients(crf, emissions, tags, masks):
    """d(mean NLL)/d(emissions, transitions, start, end) by enumeration:
    expected counts minus gold counts."""
    transitions, start, end = effective_weights(crf)
    n = crf.num_tags
    grads = [np.zeros(emissions.shape), np.zeros((n, n)), np.zeros(n), np.zeros(n)]
    for row, mask in enumerate(masks):
        if not mask.any():
            continue
        positions, scores = enumerate_scores(emissions[row].astype("float64"), mask, transitions, start, end)
        values = np.array(list(scores.values()))
        probabilities = np.exp(values - values.max())
        probabilities /= probabilities.sum()
        gold = tuple(tags[row, positions])
        for sequence, probability in [*zip(scores, probabilities), (gold, -1.0)]:
            weight = probability / len(masks)
            grads[0][row, positions, sequence] += weight
            np.add.at(grads[1], (sequence[:-1], sequence[1:]), weight)
            grads[2][sequence[0]] += weight
            grads[3][sequence[-1]] += weight
    return grads


def test_gradients_are_marginals_in_a_compiled_train_step():
    """One SGD(1.0) step moves every weight by minus its gradient: the CRF's
    hand-written forward-backward gradient against enumeration."""
    rng = np.random.default_rng(13)
    batch, seq, num_tags = *MASKS.shape, 4
    crf = random_crf(num_tags, seed=14, name="crf")
    # Emissions as a Dense kernel on one-hot (row, position) features.
    inputs = keras.Input((None, batch * seq))
    dense = keras.layers.Dense(num_tags, use_bias=False)
    emissions = dense(inputs)
    model = CRFTagger(inputs, {"emissions": emissions, "tags": crf(emissions)})
    table = rng.normal(size=(batch, seq, num_tags)).astype("float32")
    dense.kernel.assign(table.reshape(batch * seq, num_tags))
    tags = random_tags(rng, MASKS, num_tags)
    expected = expected_gradients(crf, table, tags, MASKS)
    expected_loss = -brute_force(crf, table, tags, MASKS)[0].mean()

    weights = [dense.kernel, crf.transitions, crf.start_transitions, crf.end_transitions]
    before = [numpy(w).copy() for w in weights]
    model.compile(optimizer=keras.optimizers.SGD(1.0), jit_compile=JIT_COMPILE)
    features = np.eye(batch * seq, dtype="float32").reshape(batch, seq, batch * seq)
    loss = model.train_on_batch(features, tags)
    np.testing.assert_allclose(loss, expected_loss, atol=1e-4)
    steps = [b - numpy(w) for b, w in zip(before, weights)]
    np.testing.assert_allclose(steps[0].reshape(table.shape), expected[0], atol=1e-5)
    for step, grad, name in zip(steps[1:], expected[1:], ["transitions", "start", "end"]):
        np.testing.assert_allclose(step, grad, atol=1e-5, err_msg=name)


def test_config_round_trip():
    transitions, starts = bio_transition_mask(BIO_LABELS)
    crf = CRF(5, allowed_transitions=transitions, allowed_starts=starts, allowed_ends=[1, 0, 1, 1, 1], name="ner")
    config = crf.get_config()
    assert config["num_tags"] == 5 and config["allowed_ends"] == [True, False, True, True, True]
    restored = keras.layers.deserialize(keras.layers.serialize(crf))
    assert isinstance(restored, CRF) and restored.get_config() == config
    assert CRF.from_config(CRF(3).get_config()).allowed_transitions is None


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_computes_in_float32(policy):
    rng = np.random.default_rng(11)
    emissions = rng.normal(size=(*MASKS.shape, 4)).astype("float16")
    tags = random_tags(rng, MASKS, 4)
    keras.config.set_dtype_policy(policy)
    crf = random_crf(4, seed=12)
    assert crf.transitions.dtype == "float32"
    log_likelihood = crf.log_likelihood(emissions, tags, MASKS)
    assert keras.backend.standardize_dtype(log_likelihood.dtype) == "float32"
    # The float16 emissions, exactly, in float64 arithmetic.
    expected_log_likelihood, expected_paths = brute_force(crf, emissions.astype("float64"), tags, MASKS)
    np.testing.assert_allclose(numpy(log_likelihood), expected_log_likelihood, atol=1e-4)
    np.testing.assert_array_equal(numpy(crf(emissions, mask=MASKS)), expected_paths)


def test_bad_arguments():
    for bad in (0, -2, 2.5, True, "4"):
        with pytest.raises(ValueError, match="num_tags"):
            CRF(bad)
    with pytest.raises(ValueError, match=r"allowed_transitions.*\(3, 3\)"):
        CRF(3, allowed_transitions=[[True, False], [True, True]])
    with pytest.raises(ValueError, match="allowed_starts"):
        CRF(3, allowed_starts=[True, False])
    with pytest.raises(ValueError, match="allowed_transitions"):
        CRF(2, allowed_transitions=[[0, 2], [1, 1]])
    with pytest.raises(ValueError, match="num_tags=3"):
        CRF(3)(np.zeros((2, 4, 5), "float32"))
    with pytest.raises(ValueError, match="num_tags=3"):
        CRF(3)(np.zeros((2, 3), "float32"))
    crf = CRF(3)
    crf.build((1, 2, 3))
    with pytest.raises(ValueError, match="mask"):
        crf(np.zeros((1, 2, 3), "float32"), mask=np.ones((1, 3), "int32"))
    with pytest.raises(ValueError, match="num_tags=3"):
        crf.log_likelihood(np.zeros((1, 2, 4), "float32"), np.zeros((1, 2), "int32"))
