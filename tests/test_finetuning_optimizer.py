"""The fine-tuning recipe: per-variable learning rates (head, layer-wise
decay) against AdamW in numpy, weight-decay exclusions, serialization."""

import keras
import numpy as np
import pytest
from helpers import encoder_inputs, tiny_encoder, torch_pass_only

import kerasbert
from kerasbert.optimizers import AdamW, apply_weight_decay_exclusions, finetuning_optimizer, layer_depths


def adamw_reference(weight, gradient, lr, weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6):
    """One AdamW step in float64: decoupled decay, then Adam (Keras's
    epsilon-hat form, first step)."""
    weight = weight * (1 - lr * weight_decay)
    m = (1 - beta_1) * gradient
    v = (1 - beta_2) * gradient**2
    alpha = lr * np.sqrt(1 - beta_2) / (1 - beta_1)
    return weight - alpha * m / (np.sqrt(v) + epsilon)


@pytest.fixture(scope="module")
def classifier():
    return kerasbert.TextClassifier(tiny_encoder(num_layers=3), num_classes=3)


def test_layer_depths(classifier):
    depths = layer_depths(classifier)
    assert depths["token_embedding/embeddings"] == 0
    assert depths["embeddings_layer_norm/gamma"] == 0
    assert depths["transformer_block_0/attention/qkv/kernel"] == 1
    assert depths["transformer_block_2/output_dense/bias"] == 3
    assert depths["pooler_dense/kernel"] == 4
    assert depths["classifier/kernel"] == 4


def test_albert_shared_blocks_take_the_last_layer_depth():
    encoder = tiny_encoder(num_layers=4, num_layer_groups=2, embedding_dim=8)
    depths = layer_depths(encoder)
    assert depths["transformer_block_0/attention/qkv/kernel"] == 2
    assert depths["transformer_block_1/attention/qkv/kernel"] == 4
    assert depths["embeddings_projection/kernel"] == 0


def test_every_variable_steps_with_its_own_rate(classifier):
    optimizer = finetuning_optimizer(
        classifier, total_steps=10, warmup_steps=0, learning_rate=1e-2, head_learning_rate_multiplier=20.0,
        layer_decay=0.5, weight_decay=0.1, clipnorm=None,
    )
    variables = classifier.trainable_variables
    before = [np.asarray(keras.ops.convert_to_numpy(v), "float64") for v in variables]
    rng = np.random.default_rng(0)
    gradients = [rng.normal(size=v.shape).astype("float32") for v in variables]
    optimizer.apply([keras.ops.convert_to_tensor(g) for g in gradients], variables)
    top = classifier.encoder.num_layers + 1
    depths = layer_depths(classifier)
    encoder_paths = {v.path for v in classifier.encoder.trainable_variables}
    for variable, weight, gradient in zip(variables, before, gradients):
        scale = 0.5 ** (top - depths[variable.path]) if variable.path in encoder_paths else 20.0
        decayed = variable.name not in ("bias", "gamma", "beta")
        expected = adamw_reference(weight, gradient.astype("float64"), 1e-2 * scale, 0.1 if decayed else 0.0)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(variable), expected, rtol=1e-4, atol=1e-6,
                                   err_msg=variable.path)


def test_multipliers_survive_serialization(classifier):
    optimizer = finetuning_optimizer(classifier, total_steps=100, layer_decay=0.8,
                                     head_learning_rate_multiplier=5.0)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, AdamW)
    assert restored.learning_rate_multipliers == optimizer.learning_rate_multipliers
    assert restored.multiplier("classifier/kernel") == 5.0
    assert restored.multiplier("transformer_block_0/attention/qkv/kernel") == pytest.approx(0.8**3)
    assert restored.multiplier("pooler_dense/kernel") == 1.0
    assert restored.excluded_from_weight_decay == ("bias", "gamma", "beta")


def test_accumulation_and_schedule_count_updates(classifier):
    optimizer = finetuning_optimizer(classifier, total_steps=10, accumulation_steps=4, warmup_steps=2)
    assert optimizer.gradient_accumulation_steps == 4
    schedule = optimizer._learning_rate
    assert float(schedule(8)) == pytest.approx(5e-5)  # 8 micro-batches = 2 updates: warmup done


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"layer_decay": 0.0}, "layer_decay"),
        ({"layer_decay": 1.5}, "layer_decay"),
        ({"head_learning_rate_multiplier": -1}, "head_learning_rate_multiplier"),
        ({"total_steps": 0}, "total_steps"),
    ],
)
def test_bad_recipe_arguments_name_the_argument(classifier, kwargs, argument):
    kwargs = {"total_steps": 10, **kwargs}
    with pytest.raises(ValueError, match=argument):
        finetuning_optimizer(classifier, **kwargs)


def test_bad_multiplier_patterns():
    with pytest.raises(ValueError, match="regular expression"):
        AdamW(learning_rate_multipliers={"(": 2.0})
    with pytest.raises(ValueError, match="learning_rate_multipliers"):
        AdamW(learning_rate_multipliers={"head": 0.0})
    with pytest.raises(TypeError, match="model must be"):
        layer_depths(keras.Sequential([keras.layers.Dense(1)]))


def test_several_steps_match_keras_adamw(classifier):
    # Our AdamW with every multiplier 1 is Keras's AdamW (with the same
    # exclusions), step after step; on torch it takes its in-place path.
    variables = classifier.trainable_variables
    start = [keras.ops.convert_to_numpy(v) for v in variables]
    rng = np.random.default_rng(1)
    steps = [[rng.normal(size=v.shape).astype("float32") for v in variables] for _ in range(3)]

    def train(optimizer):
        for variable, value in zip(variables, start):
            variable.assign(value)
        for gradients in steps:
            optimizer.apply([keras.ops.convert_to_tensor(g) for g in gradients], variables)
        return [keras.ops.convert_to_numpy(v) for v in variables]

    ours = train(AdamW(1e-2, weight_decay=0.1, learning_rate_multipliers={"^classifier/": 1.0}))
    reference = train(apply_weight_decay_exclusions(keras.optimizers.AdamW(1e-2, weight_decay=0.1)))
    for variable, value in zip(variables, start):
        variable.assign(value)
    for variable, a, b in zip(variables, ours, reference):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=variable.path)


def token_id_data(rng, rows):
    """`rows` random packed rows of 8 tokens and their class labels."""
    features = encoder_inputs(tiny_encoder(), lengths=(8,) * rows, seed=int(rng.integers(1 << 30)))
    return features, rng.integers(0, 3, rows)


@pytest.mark.parametrize("accumulation_steps", [pytest.param(1, marks=torch_pass_only), 3])
def test_each_fit_runs_its_own_schedule_as_a_task_compiled_anew(accumulation_steps):
    # The recipe's schedule spans one fit: a second fit of another length
    # trains as the same task compiled again would (moments, accumulated
    # gradients and step counter at zero, warmup and decay over its own
    # steps), not on the first fit's schedule traced into the train step.
    rng = np.random.default_rng(0)
    first, second = token_id_data(rng, 40), token_id_data(rng, 12)
    models = [kerasbert.TextClassifier(tiny_encoder(dropout=0.0), num_classes=3, dropout=0.0) for _ in range(2)]
    models[1].set_weights(models[0].get_weights())
    recipe = {"learning_rate": 1e-2, "warmup_fraction": 0.2, "accumulation_steps": accumulation_steps}
    for model in models:
        model.compile(**recipe)
        # 10 batches: 10 updates warming up over 2, or 3 of 3 batches each
        # and one batch's gradient left accumulated.
        model.fit(*first, batch_size=4, shuffle=False, verbose=0)
    models[1].compile(**recipe)
    for model in models:
        model.fit(*second, batch_size=4 // accumulation_steps or 1, shuffle=False, verbose=0)
    for a, b in zip(*(model.get_weights() for model in models)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fit_after_trainable_changes_asks_for_compile():
    rng = np.random.default_rng(0)
    model = kerasbert.TextClassifier(tiny_encoder(dropout=0.0), num_classes=3, dropout=0.0)
    model.compile()
    model.encoder.trainable = False
    with pytest.raises(ValueError, match=r"call compile\(\) again"):
        model.fit(*token_id_data(rng, 8), batch_size=4, verbose=0)
    model.compile()
    frozen = model.encoder.get_weights()
    model.fit(*token_id_data(rng, 8), batch_size=4, verbose=0)  # the head alone trains
    for a, b in zip(frozen, model.encoder.get_weights()):
        np.testing.assert_array_equal(a, b)
