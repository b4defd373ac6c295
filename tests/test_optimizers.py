"""LAMB against the paper's formulas in numpy, weight-decay exclusions, the
warmup schedule, gradient accumulation, serialization and argument errors."""

import keras
import numpy as np
import pytest

from kerasbert import optimizers
from kerasbert.optimizers import (
    DEFAULT_EXCLUDED,
    Lamb,
    WarmupDecay,
    pretraining_optimizer,
)


def numpy_of(variables):
    return [np.array(keras.ops.convert_to_numpy(v), dtype="float64") for v in variables]


# --- references -------------------------------------------------------------

def lamb_reference(weights, gradients, learning_rates, decays, adapts,
                   beta_1=0.9, beta_2=0.999, epsilon=1e-6, weight_decay=0.01):
    """LAMB (You et al. 2019, Algorithm 2 with Adam moments), float64.

    `gradients[t][i]` is the gradient of variable i at step t, or a function
    of the current weights returning the list of gradients."""
    weights = [np.array(w, dtype="float64") for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    for t, (grads, lr) in enumerate(zip(gradients, learning_rates), start=1):
        if callable(grads):
            grads = grads(weights)
        for i, (w, g) in enumerate(zip(weights, grads)):
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g**2
            m_hat = m[i] / (1 - beta_1**t)
            v_hat = v[i] / (1 - beta_2**t)
            update = m_hat / (np.sqrt(v_hat) + epsilon)
            if decays[i]:
                update = update + weight_decay * w
            ratio = 1.0
            if adapts[i]:
                w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(update)
                if w_norm > 0 and u_norm > 0:
                    ratio = w_norm / u_norm
            weights[i] = w - lr * ratio * update
    return weights


def warmup_decay_reference(step, peak, warmup, total, end=0.0, power=1.0):
    if step < warmup:
        return peak * step / warmup
    if step >= total:
        return end
    return end + (peak - end) * (1 - (step - warmup) / (total - warmup)) ** power


def linear_mse_gradients(x, y):
    """Gradients of keras's mean squared error of `x @ kernel + bias` on one batch."""
    def gradients(weights):
        kernel, bias = weights
        residual = x @ kernel + bias - y  # (batch, out)
        scale = 2.0 / residual.size
        return [scale * x.T @ residual, scale * residual.sum(axis=0)]
    return gradients


def linear_model(kernel, bias):
    model = keras.Sequential([keras.Input((kernel.shape[0],)), keras.layers.Dense(kernel.shape[1])])
    model.set_weights([kernel.astype("float32"), bias.astype("float32")])
    return model


# --- LAMB -------------------------------------------------------------------

# name, initial value; "query" starts at 0, so its first trust ratio is 1.
VARIABLES = [
    ("kernel", lambda rng: rng.normal(size=(3, 4))),
    ("bias", lambda rng: rng.normal(size=(4,))),
    ("gamma", lambda rng: 1 + 0.1 * rng.normal(size=(4,))),
    ("beta", lambda rng: 0.1 * rng.normal(size=(4,))),
    ("embeddings", lambda rng: rng.normal(size=(5, 2))),
    ("query", lambda rng: np.zeros((2, 2))),
]


@pytest.mark.parametrize(
    "kwargs, method_exclusions, decayed, adapted",
    [
        # default: biases and LayerNorm get Adam, no decay, no trust ratio
        ({}, None, {"kernel", "embeddings", "query"}, {"kernel", "embeddings", "query"}),
        # separate lists for decay and trust ratio
        (
            {"exclude_from_weight_decay": ("bias",), "exclude_from_layer_adaptation": ("bias", "gamma")},
            None,
            {"kernel", "gamma", "beta", "embeddings", "query"},
            {"kernel", "beta", "embeddings", "query"},
        ),
        # nothing excluded
        ({"exclude_from_weight_decay": ()}, None, {n for n, _ in VARIABLES}, {n for n, _ in VARIABLES}),
        # Keras's `exclude_from_weight_decay()` method is honoured too
        (
            {"exclude_from_weight_decay": ()},
            ["embeddings"],
            {"kernel", "bias", "gamma", "beta", "query"},
            {"kernel", "bias", "gamma", "beta", "query"},
        ),
    ],
)
def test_lamb_matches_numpy_reference(kwargs, method_exclusions, decayed, adapted):
    rng = np.random.default_rng(0)
    initial = [make(rng) for _, make in VARIABLES]
    variables = [
        keras.Variable(value.astype("float32"), name=name) for (name, _), value in zip(VARIABLES, initial)
    ]
    gradients = [[rng.normal(size=w.shape) for w in initial] for _ in range(3)]
    optimizer = Lamb(learning_rate=0.05, weight_decay=0.1, **kwargs)
    if method_exclusions:
        optimizer.exclude_from_weight_decay(var_names=method_exclusions)
    for grads in gradients:
        optimizer.apply([keras.ops.convert_to_tensor(g.astype("float32")) for g in grads], variables)

    names = [name for name, _ in VARIABLES]
    expected = lamb_reference(
        initial, gradients, [0.05] * 3,
        decays=[n in decayed for n in names], adapts=[n in adapted for n in names], weight_decay=0.1,
    )
    for name, actual, want in zip(names, numpy_of(variables), expected):
        np.testing.assert_allclose(actual, want, rtol=2e-5, atol=2e-6, err_msg=name)
    assert int(optimizer.iterations) == 3


def test_lamb_jit_compiled_fit_matches_numpy_reference():
    """model.fit with XLA (jit_compile="auto": XLA on tensorflow and jax;
    torch.compile of a whole train step is covered once, in
    test_pretraining_tasks.py), through `pretraining_optimizer`: schedule,
    global-norm clipping, decay on the kernel, Adam on the bias."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 3))
    y = 3 * rng.normal(size=(12, 2))
    kernel, bias = rng.normal(size=(3, 2)), rng.normal(size=(2,))
    model = linear_model(kernel, bias)
    optimizer = pretraining_optimizer(
        "lamb", total_steps=3, warmup_steps=1, learning_rate=0.1, weight_decay=0.1, clipnorm=0.5
    )
    model.compile(optimizer=optimizer, loss="mse", jit_compile="auto")
    model.fit(x.astype("float32"), y.astype("float32"), batch_size=4, shuffle=False, verbose=0)

    def clipped(batch):
        def gradients(weights):
            grads = linear_mse_gradients(x[batch], y[batch])(weights)
            norm = np.sqrt(sum((g**2).sum() for g in grads))
            assert norm > 0.5  # the clipping is exercised
            return [g * min(1.0, 0.5 / norm) for g in grads]
        return gradients

    steps = [clipped(slice(i, i + 4)) for i in (0, 4, 8)]
    learning_rates = [warmup_decay_reference(s, 0.1, warmup=1, total=3) for s in range(3)]
    assert learning_rates == [0.0, 0.1, 0.05]
    expected = lamb_reference(
        [kernel, bias], steps, learning_rates, decays=[True, False], adapts=[True, False],
        weight_decay=0.1,
    )
    for actual, want in zip(numpy_of(model.trainable_weights), expected):
        np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-6)


def test_lamb_serialization_round_trip(tmp_path):
    schedule = WarmupDecay(1e-3, warmup_steps=2, decay_steps=10, power=0.5)
    optimizer = Lamb(
        learning_rate=schedule, weight_decay=0.05, epsilon=1e-5, global_clipnorm=1.0,
        exclude_from_weight_decay=("bias",), exclude_from_layer_adaptation=("bias", "gamma"),
    )
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(optimizer))
    assert type(restored) is Lamb
    assert restored.get_config() == optimizer.get_config()
    assert restored.weight_decay is None and restored.weight_decay_rate == 0.05
    assert restored.excluded_from_layer_adaptation == ("bias", "gamma")

    # Through a saved model: the class, its config and its state come back.
    model = linear_model(np.ones((2, 1)), np.zeros(1))
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(np.ones((4, 2), "float32"), np.ones((4, 1), "float32"), batch_size=2, verbose=0)
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(loaded.optimizer) is Lamb
    assert loaded.optimizer.get_config() == optimizer.get_config()
    for a, b in zip(numpy_of(loaded.optimizer.variables), numpy_of(optimizer.variables)):
        np.testing.assert_array_equal(a, b)


# --- weight-decay exclusions ------------------------------------------------

class _Extra(keras.layers.Layer):
    """A layer whose own bias-like weight is decayed: names match exactly."""

    def build(self, input_shape):
        self.pos_bias = self.add_weight(name="pos_bias", shape=(3,), initializer="ones")

    def call(self, x):
        return x + self.pos_bias


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_pretraining_optimizer_decays_kernels_not_biases_or_layer_norm(name):
    inputs = keras.Input((4,), dtype="int32")
    hidden = keras.layers.Embedding(7, 3)(inputs)  # "embeddings"
    hidden = keras.layers.Dense(3, bias_initializer="ones")(hidden)  # "kernel", "bias"
    hidden = keras.layers.LayerNormalization(beta_initializer="ones")(hidden)  # "gamma", "beta"
    model = keras.Model(inputs, _Extra()(hidden))
    for variable in model.trainable_variables:
        variable.assign(keras.ops.ones(variable.shape))
    optimizer = pretraining_optimizer(
        name, total_steps=10, warmup_steps=0, learning_rate=0.1, weight_decay=0.5
    )
    zeros = [keras.ops.zeros(v.shape) for v in model.trainable_variables]
    optimizer.apply(zeros, model.trainable_variables)

    # Zero gradients: the Adam part is 0. AdamW: w * (1 - lr * wd). LAMB: the
    # update is wd * w, whose trust ratio is 1 / wd, so w * (1 - lr).
    shrunk = 0.95 if name == "adamw" else 0.9
    names = []
    for variable, value in zip(model.trainable_variables, numpy_of(model.trainable_variables)):
        names.append(variable.name)
        want = 1.0 if variable.name in DEFAULT_EXCLUDED else shrunk
        np.testing.assert_allclose(value, want, rtol=1e-6, err_msg=variable.path)
    assert sorted(names) == ["beta", "bias", "embeddings", "gamma", "kernel", "pos_bias"]


def test_apply_weight_decay_exclusions_after_from_config():
    """Keras's AdamW config drops the exclusions; re-applying restores them."""
    optimizer = keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5)
    restored = keras.optimizers.AdamW.from_config(optimizer.get_config())
    optimizers.apply_weight_decay_exclusions(restored)
    dense = keras.layers.Dense(2, bias_initializer="ones")
    dense.build((None, 2))
    restored.apply([keras.ops.zeros(v.shape) for v in dense.trainable_variables],
                   dense.trainable_variables)
    np.testing.assert_allclose(numpy_of([dense.bias])[0], 1.0)
    with pytest.raises(TypeError, match="optimizer"):
        optimizers.apply_weight_decay_exclusions("adamw")
    with pytest.raises(TypeError, match="names"):
        optimizers.apply_weight_decay_exclusions(restored, names="bias")


# --- schedule ---------------------------------------------------------------

@pytest.mark.parametrize(
    "warmup, total, end, power",
    [(10, 110, 0.0, 1.0), (10, 110, 1e-5, 1.0), (4, 20, 1e-5, 0.5), (0, 20, 0.0, 2.0), (5, 5, 1e-5, 1.0)],
)
def test_warmup_decay_values(warmup, total, end, power):
    schedule = WarmupDecay(1e-3, warmup_steps=warmup, decay_steps=total, end_learning_rate=end,
                           power=power)
    steps = sorted({0, 1, warmup // 2, warmup, warmup + 1, (warmup + total) // 2, total - 1,
                    total, total + 1, 10 * total})
    actual = [float(schedule(keras.ops.convert_to_tensor(s, "int32"))) for s in steps]
    expected = [warmup_decay_reference(s, 1e-3, warmup, total, end, power) for s in steps]
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-10)
    assert float(schedule(total + 100)) == pytest.approx(end)


def test_warmup_decay_counts_updates_under_accumulation():
    plain = WarmupDecay(1e-3, warmup_steps=4, decay_steps=12)
    accumulated = WarmupDecay(1e-3, warmup_steps=4, decay_steps=12, accumulation_steps=3)
    for micro_step in range(40):
        assert float(accumulated(micro_step)) == float(plain(micro_step // 3))


def test_warmup_decay_serialization_round_trip():
    schedule = WarmupDecay(2e-4, warmup_steps=3, decay_steps=30, end_learning_rate=1e-6, power=0.5,
                           accumulation_steps=2)
    config = schedule.get_config()
    assert WarmupDecay.from_config(config).get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert type(restored) is WarmupDecay and restored.get_config() == config
    for step in (0, 5, 17, 100):
        assert float(restored(step)) == float(schedule(step))


# --- gradient accumulation ----------------------------------------------------

@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_accumulation_equals_one_step_on_the_whole_batch(name):
    """Two micro-batches of 4 rows update like one batch of 8 (Keras averages
    the accumulated gradients), and the schedule counts updates."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(16, 3)).astype("float32")
    y = rng.normal(size=(16, 2)).astype("float32")
    kernel, bias = rng.normal(size=(3, 2)), rng.normal(size=(2,))
    settings = {"total_steps": 4, "warmup_steps": 0, "learning_rate": 0.1, "weight_decay": 0.1}

    accumulated = linear_model(kernel, bias)
    accumulated.compile(optimizer=pretraining_optimizer(name, accumulation_steps=2, **settings),
                        loss="mse")
    # One micro-batch: gradients are stored, the weights do not move yet.
    accumulated.fit(x[:4], y[:4], batch_size=4, shuffle=False, verbose=0)
    for actual, initial in zip(numpy_of(accumulated.trainable_weights), [kernel, bias]):
        np.testing.assert_allclose(actual, initial, rtol=1e-6)
    assert int(accumulated.optimizer.iterations) == 0
    accumulated.fit(x[4:], y[4:], batch_size=4, shuffle=False, verbose=0)

    whole = linear_model(kernel, bias)
    whole.compile(optimizer=pretraining_optimizer(name, **settings), loss="mse")
    whole.fit(x, y, batch_size=8, shuffle=False, verbose=0)

    for a, b, initial in zip(numpy_of(accumulated.trainable_weights),
                             numpy_of(whole.trainable_weights), [kernel, bias]):
        assert not np.allclose(a, initial, atol=1e-3)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # Two updates each; both schedules are now at update 2 of 4.
    assert int(accumulated.optimizer.iterations) == int(whole.optimizer.iterations) == 2
    assert float(accumulated.optimizer.learning_rate) == pytest.approx(0.05)
    assert float(whole.optimizer.learning_rate) == pytest.approx(0.05)


# --- arguments ----------------------------------------------------------------

def test_pretraining_optimizer_defaults():
    optimizer = pretraining_optimizer(total_steps=1000)
    assert isinstance(optimizer, keras.optimizers.AdamW)
    config = optimizer.get_config()
    schedule = config["learning_rate"]["config"]
    assert schedule["warmup_steps"] == 100 and schedule["decay_steps"] == 1000
    assert schedule["power"] == 1.0 and schedule["learning_rate"] == 1e-4
    assert config["global_clipnorm"] == 1.0 and config["gradient_accumulation_steps"] is None
    assert config["weight_decay"] == 0.01 and config["epsilon"] == 1e-6
    lamb = pretraining_optimizer("lamb", total_steps=25, decay="polynomial", accumulation_steps=4,
                                 clipnorm=None)
    schedule = lamb.get_config()["learning_rate"]["config"]
    assert schedule["warmup_steps"] == 3 and schedule["power"] == 0.5  # round(2.5) half up
    assert schedule["accumulation_steps"] == 4
    assert lamb.gradient_accumulation_steps == 4 and lamb.global_clipnorm is None


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda: pretraining_optimizer("sgd", total_steps=10), "optimizer"),
        (lambda: pretraining_optimizer(total_steps=0), "total_steps"),
        (lambda: pretraining_optimizer(total_steps=10.0), "total_steps"),
        (lambda: pretraining_optimizer(total_steps=10, learning_rate=0), "learning_rate"),
        (lambda: pretraining_optimizer(total_steps=10, warmup_steps=11), "warmup_steps"),
        (lambda: pretraining_optimizer(total_steps=10, warmup_steps=-1), "warmup_steps"),
        (lambda: pretraining_optimizer(total_steps=10, weight_decay=-0.1), "weight_decay"),
        (lambda: pretraining_optimizer(total_steps=10, decay="cosine"), "decay"),
        (lambda: pretraining_optimizer(total_steps=10, power=2.0), "power"),
        (lambda: pretraining_optimizer(total_steps=10, decay="polynomial", power=0), "power"),
        (lambda: pretraining_optimizer(total_steps=10, end_learning_rate=1.0), "end_learning_rate"),
        (lambda: pretraining_optimizer(total_steps=10, clipnorm=0.0), "clipnorm"),
        (lambda: pretraining_optimizer(total_steps=10, accumulation_steps=0), "accumulation_steps"),
        (lambda: pretraining_optimizer(total_steps=10, accumulation_steps=True), "accumulation_steps"),
        (lambda: pretraining_optimizer(total_steps=10, beta_1=1.0), "beta_1"),
        (lambda: pretraining_optimizer(total_steps=10, beta_2=-0.5), "beta_2"),
        (lambda: pretraining_optimizer(total_steps=10, epsilon=0), "epsilon"),
        (lambda: WarmupDecay(1e-3, warmup_steps=10, decay_steps=5), "decay_steps"),
        (lambda: WarmupDecay(1e-3, warmup_steps=-1, decay_steps=5), "warmup_steps"),
        (lambda: WarmupDecay(1e-3, warmup_steps=0, decay_steps=0), "decay_steps"),
        (lambda: WarmupDecay(1e-3, warmup_steps=0, decay_steps=5, power=0.0), "power"),
        (lambda: WarmupDecay(1e-3, 0, 5, end_learning_rate=1e-2), "end_learning_rate"),
        (lambda: WarmupDecay(1e-3, 0, 5, accumulation_steps=0), "accumulation_steps"),
        (lambda: WarmupDecay("1e-3", 0, 5), "learning_rate"),
        (lambda: Lamb(beta_1=1.5), "beta_1"),
        (lambda: Lamb(epsilon=0.0), "epsilon"),
        (lambda: Lamb(weight_decay=-1.0), "weight_decay"),
    ],
)
def test_bad_arguments_name_the_argument(make, argument):
    with pytest.raises((ValueError, TypeError), match=rf"^{argument}\b.*(; got |; expected one of)") as error:
        make()
    assert error.value.args[0].endswith(".")


@pytest.mark.parametrize("argument", ["exclude_from_weight_decay", "exclude_from_layer_adaptation"])
def test_exclusions_must_be_name_sequences(argument):
    with pytest.raises(TypeError, match=argument):
        Lamb(**{argument: "bias"})
    with pytest.raises(TypeError, match=argument):
        Lamb(**{argument: ("bias", 3)})
