"""The encoder on the current backend: config, serialization, padding, jit,
dtype policies, training, and clear errors for invalid configs."""

import keras
import numpy as np
import pytest

import kerasbert
from helpers import TINY, assert_outputs_close, encoder_inputs, run, tiny_encoder, to_numpy, torch_pass_only

# One tiny config per family: the families differ only in these values.
FAMILIES = {
    "bert": {},
    "albert": dict(embedding_dim=8, num_layers=4, num_layer_groups=2, activation="gelu_approximate"),
    "albert_inner": dict(embedding_dim=8, num_layers=3, num_layer_groups=2, num_inner_layers=2),
    "roberta": dict(num_segments=1, position_offset=2, layer_norm_epsilon=1e-5, pooler=False),
    "electra": dict(embedding_dim=6, pooler=False),
    "distilbert": dict(num_segments=0, pooler=False),
    "deberta": dict(num_segments=0, pooler=False, position_encoding="relative", relative_buckets=4,
                    max_relative_distance=8, layer_norm_epsilon=1e-7),
    "modernbert": dict(num_segments=0, pooler=False, normalization="pre", feedforward="gated", use_bias=False,
                       position_encoding="rotary", rotary_theta=160000.0, local_rotary_theta=10000.0,
                       num_layers=3, local_attention_window=4, global_attention_every=2),
}


@pytest.fixture(params=sorted(FAMILIES))
def family_encoder(request):
    return tiny_encoder(**FAMILIES[request.param])


# A config and its files are the same on every backend: each pass saves and
# rebuilds BERT's encoder, the torch pass every family's.
@pytest.fixture(params=[name if name == "bert" else pytest.param(name, marks=torch_pass_only)
                        for name in sorted(FAMILIES)])
def saved_family_encoder(request):
    return tiny_encoder(**FAMILIES[request.param])


def test_outputs_have_documented_shapes(family_encoder):
    inputs = encoder_inputs(family_encoder, lengths=(7, 3))
    outputs = run(family_encoder, inputs)
    assert outputs["sequence_output"].shape == (2, 7, TINY["hidden_dim"])
    assert outputs["pooled_output"].shape == (2, TINY["hidden_dim"])
    if not family_encoder.pooler:
        np.testing.assert_allclose(
            outputs["pooled_output"], outputs["sequence_output"][:, 0], atol=1e-6
        )


def test_get_config_is_the_constructor(saved_family_encoder):
    config = saved_family_encoder.get_config()
    rebuilt = kerasbert.Encoder.from_config(config)
    assert rebuilt.get_config() == config
    rebuilt.set_weights(saved_family_encoder.get_weights())
    inputs = encoder_inputs(saved_family_encoder)
    assert_outputs_close(run(rebuilt, inputs), run(saved_family_encoder, inputs), atol=1e-6)


def test_keras_file_round_trip(saved_family_encoder, tmp_path):
    path = str(tmp_path / "encoder.keras")
    saved_family_encoder.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(loaded, kerasbert.Encoder)
    inputs = encoder_inputs(saved_family_encoder)
    assert_outputs_close(run(loaded, inputs), run(saved_family_encoder, inputs), atol=1e-6)


def test_a_fresh_process_loads_a_keras_file_after_importing_keras_and_kerasbert(tmp_path):
    import subprocess
    import sys

    path = str(tmp_path / "encoder.keras")
    tiny_encoder().save(path)
    probe = f"import keras\nimport kerasbert\nprint(type(keras.saving.load_model({path!r})).__name__)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split()[-1] == "Encoder", done.stderr[-2000:]


def test_preset_directory_round_trip(saved_family_encoder, tmp_path):
    saved_family_encoder.save_to_preset(tmp_path / "preset", description="a test")
    assert sorted(p.name for p in (tmp_path / "preset").iterdir()) == [
        "encoder.safetensors",
        "preset.json",
    ]
    loaded = kerasbert.from_preset(tmp_path / "preset")
    assert loaded.get_config() == saved_family_encoder.get_config() | {"name": loaded.name}
    inputs = encoder_inputs(saved_family_encoder)
    assert_outputs_close(run(loaded, inputs), run(saved_family_encoder, inputs), atol=1e-6)
    spec = kerasbert.presets.read_json(tmp_path / "preset" / "preset.json")
    assert spec["metadata"]["description"] == "a test"
    assert spec["metadata"]["parameter_count"] == saved_family_encoder.count_params()


def test_padding_never_changes_real_positions(family_encoder):
    inputs = encoder_inputs(family_encoder, lengths=(8, 5), seq=8)
    padded = encoder_inputs(family_encoder, lengths=(8, 5), seq=8)
    # Same rows with 7 extra padded positions.
    for key, value in inputs.items():
        padded[key] = np.pad(value, ((0, 0), (0, 7)))
    short, long = run(family_encoder, inputs), run(family_encoder, padded)
    for row, length in enumerate((8, 5)):
        np.testing.assert_allclose(
            long["sequence_output"][row, :length],
            short["sequence_output"][row, :length],
            atol=1e-5,
        )
    np.testing.assert_allclose(long["pooled_output"], short["pooled_output"], atol=1e-5)


def test_padded_tokens_are_not_attended():
    encoder = tiny_encoder()
    inputs = encoder_inputs(encoder, lengths=(5,), seq=9)
    changed = {k: v.copy() for k, v in inputs.items()}
    changed["token_ids"][:, 5:] = 7  # garbage under the padding
    a, b = run(encoder, inputs), run(encoder, changed)
    np.testing.assert_allclose(a["sequence_output"][:, :5], b["sequence_output"][:, :5], atol=1e-6)


def test_cross_layer_sharing_reuses_blocks():
    shared = tiny_encoder(num_layers=6, num_layer_groups=2)
    unshared = tiny_encoder(num_layers=6)
    assert len(shared.transformer_blocks) == 2
    assert len(unshared.transformer_blocks) == 6
    per_block = unshared.transformer_blocks[0].count_params()
    assert unshared.count_params() - shared.count_params() == 4 * per_block
    # The shared encoder really applies 6 layers: not the same as 2.
    two_layers = tiny_encoder(num_layers=2, num_layer_groups=2)
    two_layers.set_weights(shared.get_weights())
    inputs = encoder_inputs(shared)
    assert not np.allclose(
        run(shared, inputs)["sequence_output"], run(two_layers, inputs)["sequence_output"], atol=1e-3
    )


# torch.compile takes 5-10 s an encoder (a full run at 178bd67), the first
# one 30-40 s: on torch, the families whose attention and feed-forward
# differ most (relative positions; rotary, local attention, a gated
# feed-forward and pre-norm), not all eight. ALBERT's shared block and
# embedding projection compile in test_one_jit_training_step_changes_every_weight.
TORCH_COMPILED = ("deberta", "modernbert")


def test_jit_compiled_predict_matches_eager(family_encoder, request):
    if keras.backend.backend() == "torch" and request.node.callspec.params["family_encoder"] not in TORCH_COMPILED:
        pytest.skip(f"torch compiles {TORCH_COMPILED} (see TORCH_COMPILED)")
    inputs = encoder_inputs(family_encoder, lengths=(6, 4, 2, 6), seq=6)
    eager = to_numpy(family_encoder(inputs, training=False))  # not `run`: on JAX that compiles
    family_encoder.compile(jit_compile=True)
    compiled = family_encoder.predict(inputs, batch_size=4, verbose=0)
    assert_outputs_close(
        {k: np.asarray(v) for k, v in compiled.items()}, eager, atol=1e-5
    )


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision(policy):
    reference = tiny_encoder()
    mixed = tiny_encoder(dtype=policy)
    mixed.set_weights(reference.get_weights())
    assert all(v.dtype == "float32" for v in mixed.weights)  # float32 master weights
    inputs = encoder_inputs(reference)
    outputs = mixed(inputs)
    compute = policy.split("_")[1]
    assert keras.backend.standardize_dtype(outputs["sequence_output"].dtype) == compute
    # LayerNorm and softmax in float32 keep the result close to float32's.
    tolerance = 0.1 if compute == "bfloat16" else 0.02
    for key, value in run(reference, inputs).items():
        got = keras.ops.convert_to_numpy(keras.ops.cast(outputs[key], "float32"))
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, value, atol=tolerance)


def test_dtype_policy_survives_serialization():
    encoder = tiny_encoder(dtype="mixed_bfloat16")
    rebuilt = kerasbert.Encoder.from_config(encoder.get_config())
    assert rebuilt.dtype_policy.name == "mixed_bfloat16"
    assert rebuilt.transformer_blocks[0].attention.qkv.compute_dtype == "bfloat16"


def test_one_jit_training_step_changes_every_weight():
    # Dropout everywhere (including attention probabilities) under XLA.
    encoder = tiny_encoder(num_layers=2, dropout=0.1, embedding_dim=8, num_layer_groups=1)
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in encoder.input}
    logits = keras.layers.Dense(2)(encoder(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    data = encoder_inputs(encoder, lengths=(9, 6, 1, 4), seed=3)
    before = [np.array(w) for w in encoder.get_weights()]
    history = model.fit(data, np.array([0, 1, 1, 0]), epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    after = encoder.get_weights()
    unchanged = [v.path for v, a, b in zip(encoder.weights, before, after) if np.array_equal(a, b)]
    assert not unchanged


def test_dropout_is_active_only_in_training():
    encoder = tiny_encoder(dropout=0.3)
    inputs = encoder_inputs(encoder)
    a = keras.ops.convert_to_numpy(encoder(inputs, training=True)["sequence_output"])
    b = keras.ops.convert_to_numpy(encoder(inputs, training=True)["sequence_output"])
    assert not np.allclose(a, b)
    assert_outputs_close(run(encoder, inputs), run(encoder, inputs), atol=0)


@pytest.mark.parametrize("explicit_at_inference", [False, True])
def test_explicit_attention_is_the_fused_attention(monkeypatch, explicit_at_inference):
    # The explicit path (heads in front, its own softmax), taken in training
    # with attention dropout and at inference on JAX's CPU, must equal
    # Keras's dot_product_attention (the backend's fused kernel), padding
    # and documents included; the draw switched off.
    from kerasbert.layers import attention

    layer = kerasbert.layers.SelfAttention(num_heads=2, hidden_dim=8, dropout=0.1)
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype("float32")
    padding_mask = np.array([[1, 1, 2, 2, 0], [1, 1, 1, 0, 0]])
    mask = kerasbert.encoder.document_attention_mask(padding_mask)
    layer.probs_dropout.rate = 0.0
    monkeypatch.setattr(attention, "xla_on_cpu", lambda: False)
    fused = keras.ops.convert_to_numpy(layer(x, attention_mask=mask, training=False))
    monkeypatch.setattr(attention, "xla_on_cpu", lambda: explicit_at_inference)
    explicit = keras.ops.convert_to_numpy(layer(x, attention_mask=mask, training=not explicit_at_inference))
    np.testing.assert_allclose(explicit, fused, atol=1e-5)


def test_jax_on_a_cpu_attends_explicitly(monkeypatch):
    # What decides the path: on JAX's CPU, inference takes the explicit
    # products (faster there); elsewhere Keras's dot_product_attention.
    from kerasbert.layers import attention
    from kerasbert.utils.hardware import xla_on_cpu

    assert xla_on_cpu() == (keras.backend.backend() == "jax")  # the test machines have no accelerator
    calls = []
    monkeypatch.setattr(keras.ops, "dot_product_attention", lambda *a, **k: calls.append(1) or a[0])
    layer = kerasbert.layers.SelfAttention(num_heads=2, hidden_dim=8)
    layer(np.zeros((1, 3, 8), "float32"), training=False)
    assert bool(calls) != xla_on_cpu()


@pytest.mark.parametrize(
    "overrides, error, words",
    [
        (dict(hidden_dim=10, num_heads=3), ValueError, ["hidden_dim=10", "num_heads=3"]),
        (dict(num_layer_groups=4, num_layers=3), ValueError, ["num_layer_groups=4", "num_layers=3"]),
        (dict(activation="gelu_new"), ValueError, ["activation='gelu_new'", "gelu_approximate"]),
        (dict(num_layers=0), ValueError, ["num_layers", "positive integer"]),
        (dict(num_layers=2.0), TypeError, ["num_layers", "integer"]),
        (dict(vocabulary_size=True), TypeError, ["vocabulary_size"]),
        (dict(dropout=1.5), ValueError, ["dropout", "[0, 1)"]),
        (dict(embedding_dim=-1), ValueError, ["embedding_dim"]),
        (dict(layer_norm_epsilon=0), ValueError, ["layer_norm_epsilon"]),
        (dict(pooler="yes"), TypeError, ["pooler"]),
        (dict(num_segments=-1), ValueError, ["num_segments"]),
        (dict(normalization="sandwich"), ValueError, ["normalization", "'pre'"]),
        (dict(feedforward="swiglu"), ValueError, ["feedforward", "'gated'"]),
        (dict(position_encoding="alibi"), ValueError, ["position_encoding", "'rotary'"]),
        (dict(global_attention_every=3), ValueError, ["global_attention_every=3", "local_attention_window"]),
        (dict(local_attention_window=1), ValueError, ["local_attention_window"]),
        (dict(position_encoding="rotary", position_offset=2), ValueError, ["position_offset=2"]),
        (dict(position_encoding="rotary", hidden_dim=6, num_heads=2), ValueError, ["even"]),
        (dict(normalization="pre", num_layer_groups=1), ValueError, ["num_layer_groups"]),
        (dict(rotary_theta=0), ValueError, ["rotary_theta"]),
    ],
)
def test_invalid_configs_name_the_argument(overrides, error, words):
    with pytest.raises(error) as info:
        tiny_encoder(**overrides)
    for word in words:
        assert word in str(info.value)


def test_no_segment_input_without_segments():
    encoder = tiny_encoder(num_segments=0)
    assert sorted(encoder.input) == ["padding_mask", "token_ids"]
    inputs = encoder_inputs(encoder)
    assert "segment_ids" not in inputs
    assert run(encoder, inputs)["sequence_output"].shape[0] == 3


@pytest.mark.parametrize("change, message", [
    (dict(token_ids=53), r"inputs\['token_ids'\]\[0\]\[1\]=53 is out of range: .*vocabulary_size=53"),
    (dict(token_ids=-1), r"inputs\['token_ids'\]\[0\]\[1\]=-1 is out of range"),
    (dict(segment_ids=3), r"inputs\['segment_ids'\]\[0\]\[1\]=3 is out of range: .*num_segments=3"),
])
def test_numpy_ids_outside_the_tables_are_refused_on_every_backend(change, message):
    """TensorFlow's gathers would raise a framework error; JAX's would clamp
    or give NaN without a word."""
    encoder = tiny_encoder()
    inputs = encoder_inputs(encoder, lengths=(4, 3))
    for key, value in change.items():
        inputs[key][0, 1] = value
    with pytest.raises(ValueError, match=message):
        encoder(inputs)
    with pytest.raises(ValueError, match=message.replace("inputs", "x")):
        encoder.predict(inputs, verbose=0)


def test_numpy_sequences_longer_than_the_position_table_are_refused():
    encoder = tiny_encoder()
    inputs = encoder_inputs(encoder, lengths=(30,), seq=30)
    with pytest.raises(ValueError, match=r"sequences of 30 positions; .*max_sequence_length=24"):
        encoder(inputs)


def test_outputs_at_equals_the_full_outputs_gathered(family_encoder):
    # Packed documents, padding rows, repeated positions and position 0:
    # the last layer run at the chosen rows only gives those rows of the
    # full output, and the same pooled output.
    inputs = encoder_inputs(family_encoder, lengths=(9, 6, 1))
    inputs["padding_mask"][0, 4:9] = 2  # row 0 packs two documents
    positions = np.array([[0, 3, 5, 8], [2, 2, 7, 1], [0, 0, 0, 0]], "int32")
    full = run(family_encoder, inputs)
    at = {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in family_encoder.outputs_at(inputs, positions).items()}
    expected = np.take_along_axis(full["sequence_output"], positions[:, :, None], axis=1)
    np.testing.assert_allclose(at["sequence_output"], expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(at["pooled_output"], full["pooled_output"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("training", [False, True])
def test_attention_at_query_positions_is_the_full_attention_gathered(training):
    # Both attention paths: the fused one (inference) and the explicit
    # softmax (training with attention dropout, its draw switched off).
    block = kerasbert.layers.TransformerBlock(num_heads=2, hidden_dim=8, intermediate_dim=12, attention_dropout=0.1)
    block.attention.probs_dropout.rate = 0.0
    x = np.random.default_rng(1).standard_normal((2, 5, 8)).astype("float32")
    mask = kerasbert.encoder.document_attention_mask(np.array([[1, 1, 2, 2, 0], [1, 1, 1, 0, 0]]))
    positions = np.array([[4, 0, 2], [1, 1, 3]], "int32")
    full = keras.ops.convert_to_numpy(block(x, attention_mask=mask, training=training))
    at = keras.ops.convert_to_numpy(block(x, attention_mask=mask, training=training, query_positions=positions))
    assert at.shape == (2, 3, 8)
    np.testing.assert_allclose(at, np.take_along_axis(full, positions[:, :, None], axis=1), atol=1e-5)


def _block_and_inputs(**kwargs):
    block = kerasbert.layers.TransformerBlock(num_heads=2, hidden_dim=8, intermediate_dim=12, dropout=0.5, **kwargs)
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype("float32")
    mask = kerasbert.encoder.document_attention_mask(np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]))
    return block, x, mask


def _seeded_call(block, x, mask, training):
    # The same dropout masks for every call (torch draws from its global generator).
    keras.utils.set_random_seed(0)
    block.output_dropout.seed_generator.state.assign(np.array([7, 0], "uint32"))
    block.attention_output_dropout.seed_generator.state.assign(np.array([8, 0], "uint32"))
    return keras.ops.convert_to_numpy(keras.ops.cast(block(x, attention_mask=mask, training=training), "float32"))


def _through_layer_call(monkeypatch):
    from kerasbert.layers import attention, transformer_block

    def layer_call(owner, layer, inputs, **kwargs):
        return layer(inputs, **kwargs)

    for module in (attention, transformer_block):
        monkeypatch.setattr(module, "call_sublayer", layer_call)


def _sublayer_calls(monkeypatch):
    """The class names of the layers whose Keras `__call__` runs from now on."""
    called, layer_call = [], keras.layers.Layer.__call__

    def spy(self, *args, **kwargs):
        called.append(type(self).__name__)
        return layer_call(self, *args, **kwargs)

    monkeypatch.setattr(keras.layers.Layer, "__call__", spy)
    return called


@pytest.mark.parametrize("training", [False, True])
def test_sublayers_called_directly_give_what_their_layer_calls_give(monkeypatch, training):
    # A block calls its sublayers through `call_sublayer` (on torch their
    # `call`, directly): the outputs of `__call__`, and the training flag
    # still reaches the dropouts.
    block, x, mask = _block_and_inputs()
    inference = _seeded_call(block, x, mask, training=False)
    direct = _seeded_call(block, x, mask, training)
    _through_layer_call(monkeypatch)
    np.testing.assert_allclose(direct, _seeded_call(block, x, mask, training), atol=1e-6, rtol=0)
    assert np.allclose(direct, inference, atol=1e-6) != training  # dropout ran only when training


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="the direct calls are torch's (its steps are not traced)")
def test_torch_blocks_skip_their_sublayers_layer_call(monkeypatch):
    block, x, mask = _block_and_inputs()
    block(x, attention_mask=mask, training=False)
    called = _sublayer_calls(monkeypatch)
    block(x, attention_mask=mask, training=True)
    assert called == ["TransformerBlock"]


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="the direct calls are torch's (its steps are not traced)")
@pytest.mark.parametrize("case", ["float32 sublayers in a mixed block", "quantized", "remat"])
def test_torch_sublayers_that_need_layer_call_keep_it(monkeypatch, case):
    # Another dtype policy than the block's (its autocast scope would be
    # wrong), a quantized or a rematerialized sublayer: Keras's `__call__`,
    # and the same outputs as with every sublayer called through it.
    if case == "remat":
        with keras.RematScope(mode="full"):
            block, x, mask = _block_and_inputs()
    else:
        block, x, mask = _block_and_inputs(dtype="mixed_bfloat16" if case.startswith("float32") else None)
    block(x, attention_mask=mask, training=False)
    if case.startswith("float32"):
        for layer in (block.intermediate_dense, block.output_dense, block.output_layer_norm):
            layer.dtype_policy = "float32"
    if case == "quantized":
        block.output_dense.quantize("int8")
    called = _sublayer_calls(monkeypatch)
    direct = _seeded_call(block, x, mask, training=False)
    assert "Dense" in called
    monkeypatch.undo()
    _through_layer_call(monkeypatch)
    np.testing.assert_allclose(direct, _seeded_call(block, x, mask, training=False), atol=1e-6, rtol=0)


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 1, 3, 4)])
def test_dense_flattened_product_is_the_keras_dense(shape):
    # kerasbert's Dense (one 2-D product on TensorFlow): the values and
    # shape of keras.layers.Dense with the same weights.
    x = np.random.default_rng(3).standard_normal(shape).astype("float32")
    ours = kerasbert.layers.Dense(5, activation="gelu")
    theirs = keras.layers.Dense(5, activation="gelu")
    ours.build(shape)
    theirs.build(shape)
    theirs.set_weights(ours.get_weights())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ours(x)), keras.ops.convert_to_numpy(theirs(x)),
                               atol=1e-5, rtol=0)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the 2-D product is for TensorFlow's remapper")
def test_dense_is_one_2d_matmul_on_tensorflow():
    # Traced with every axis unknown: the product's MatMul feeds the bias
    # addition directly (no reshape between them, which would keep oneDNN
    # from fusing the two and the activation), and Keras's values.
    import tensorflow as tf

    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype("float32")
    layer = kerasbert.layers.Dense(5, activation="gelu")
    layer.build(x.shape)
    expected = keras.ops.convert_to_numpy(keras.layers.Dense.call(layer, x))
    traced = tf.function(layer.call).get_concrete_function(tf.TensorSpec([None, None, None], "float32"))
    (product,) = [op for op in traced.graph.get_operations() if op.type == "MatMul"]
    assert {consumer.type for consumer in product.outputs[0].consumers()} in ({"BiasAdd"}, {"AddV2"})
    np.testing.assert_allclose(traced(tf.constant(x)).numpy(), expected, atol=1e-5, rtol=0)
