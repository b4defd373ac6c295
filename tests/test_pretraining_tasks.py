"""MaskedLM, BertPretrainer and ElectraPretrainer on the current backend:
masked-only logits with a tied decoder, per-objective metrics, ELECTRA's
shared embeddings, in-graph sampling and loss, mixed precision, jit.

What each backend computes differently runs in every pass: the heads'
outputs, the weighted loss, ELECTRA's sampling, a compiled step against an
eager one, gradients through the masked positions, mixed precision. What
fit and compile make of those outputs (logs, schedules, configs, the
sharing of embeddings) runs once, in the torch pass."""

import warnings

import keras
import numpy as np
import pytest
from helpers import block_output_rows, tiny_encoder, torch_pass_only
from keras import ops

import kerasbert
from kerasbert.tasks import task as task_module
from kerasbert.tasks.electra import electra_generator
from kerasbert.utils.hardware import cpu_multiplies_bfloat16

B, SEQ, P = 4, 10, 3


def batch(encoder, seed=0):
    rng = np.random.default_rng(seed)
    x = {
        "token_ids": rng.integers(5, encoder.vocabulary_size, (B, SEQ)).astype("int32"),
        "padding_mask": (np.arange(SEQ)[None, :] < np.array([[10], [8], [6], [10]])).astype("int32"),
        "mask_positions": np.array([[1, 4, 7]] * B, "int32"),
    }
    x["token_ids"] *= x["padding_mask"]
    if encoder.num_segments:
        x["segment_ids"] = np.zeros((B, SEQ), "int32")
    mask_ids = rng.integers(5, encoder.vocabulary_size, (B, P)).astype("int32")
    mask_weights = np.ones((B, P), "float32")
    mask_weights[2, 2] = 0.0  # a padding slot
    return x, mask_ids, mask_weights


def numpy_gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def test_masked_lm_logits_are_the_tied_decoder_at_the_masked_positions():
    encoder = tiny_encoder(embedding_dim=8)  # ALBERT-style: the head maps back to 8
    model = kerasbert.MaskedLM(encoder)
    x, _, _ = batch(encoder)
    logits = ops.convert_to_numpy(model(x))
    assert logits.shape == (B, P, encoder.vocabulary_size) and logits.dtype == np.float32

    # The same numbers from the full sequence output, by hand.
    sequence = ops.convert_to_numpy(encoder({k: v for k, v in x.items() if k != "mask_positions"})["sequence_output"])
    head = model.mlm_head
    h = np.take_along_axis(sequence, x["mask_positions"][:, :, None], axis=1)
    h = numpy_gelu(h @ head.dense.kernel.numpy() + head.dense.bias.numpy())
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + encoder.layer_norm_epsilon)
    h = h * head.layer_norm.gamma.numpy() + head.layer_norm.beta.numpy()
    expected = h @ encoder.token_embedding.embeddings.numpy().T + head.bias.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-4)

    # Tied: the only vocabulary-sized matrix is the encoder's own table.
    matrices = [w for w in model.weights if len(w.shape) == 2 and encoder.vocabulary_size in w.shape]
    assert matrices == [encoder.token_embedding.embeddings]


def test_masked_lm_fit_weights_the_loss_by_mask_weights():
    encoder = tiny_encoder()
    model = kerasbert.MaskedLM(encoder)
    model.compile(optimizer=keras.optimizers.SGD(0.0), jit_compile="auto")
    x, mask_ids, mask_weights = batch(encoder)
    logs = model.evaluate(x, mask_ids, sample_weight=mask_weights, return_dict=True, verbose=0)
    logits = ops.convert_to_numpy(model(x))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(log_probs, mask_ids[..., None], axis=-1)[..., 0]
    expected = (nll * mask_weights).sum() / mask_weights.sum()  # padding slots do not count
    assert logs["loss"] == pytest.approx(expected, rel=1e-4)
    correct = (logits.argmax(-1) == mask_ids)
    assert logs["accuracy"] == pytest.approx((correct * mask_weights).sum() / mask_weights.sum())


@torch_pass_only
def test_default_compile_trains_at_a_constant_rate():
    # compile() with no arguments: the pretraining recipe for a run of unknown length.
    encoder = tiny_encoder()
    model = kerasbert.MaskedLM(encoder)
    model.compile()
    x, mask_ids, mask_weights = batch(encoder)
    history = model.fit(x, mask_ids, sample_weight=mask_weights, epochs=3, batch_size=B, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    schedule = model.optimizer._learning_rate
    assert [float(schedule(step)) for step in (0, 3, 10_000)] == pytest.approx([1e-4] * 3)
    pretrainer = kerasbert.BertPretrainer(tiny_encoder())
    pretrainer.compile()
    assert float(pretrainer.optimizer._learning_rate(7)) == pytest.approx(1e-4)


@torch_pass_only
@pytest.mark.parametrize("sentence_task", ["nsp", None])  # "sop" is the same head (test_pretraining_heads)
def test_bert_pretrainer_logs_every_objective(sentence_task):
    encoder = tiny_encoder()
    model = kerasbert.BertPretrainer(encoder, sentence_task=sentence_task)
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), jit_compile="auto")
    x, mask_ids, mask_weights = batch(encoder)
    y, weights = {"mlm": mask_ids}, {"mlm": mask_weights}
    if sentence_task:
        y[sentence_task] = np.array([0, 1, 1, 0], "int32")
        weights[sentence_task] = np.ones(B, "float32")
    history = model.fit(x, y, sample_weight=weights, epochs=3, batch_size=B, verbose=0).history
    expected = {"loss", "mlm_loss", "mlm_accuracy"}
    if sentence_task:
        expected |= {f"{sentence_task}_loss", f"{sentence_task}_accuracy"}
        total = np.array(history["mlm_loss"]) + np.array(history[f"{sentence_task}_loss"])
        np.testing.assert_allclose(history["loss"], total, rtol=1e-5)
    else:  # tracked from the loss itself, not computed again
        np.testing.assert_allclose(history["mlm_loss"], history["loss"], rtol=1e-6)
    assert set(history) == expected
    assert history["loss"][-1] < history["loss"][0]


def test_bert_pretrainer_rejects_unknown_sentence_task():
    with pytest.raises(ValueError, match="sentence_task='nsp2'"):
        kerasbert.BertPretrainer(tiny_encoder(), sentence_task="nsp2")


@torch_pass_only
def test_task_serialization_round_trip():
    model = kerasbert.BertPretrainer(tiny_encoder(), sentence_task="sop")
    rebuilt = kerasbert.BertPretrainer.from_config(model.get_config())
    rebuilt.set_weights(model.get_weights())
    x, _, _ = batch(model.encoder)
    for key in ("mlm", "sop"):
        np.testing.assert_allclose(ops.convert_to_numpy(rebuilt(x)[key]),
                                   ops.convert_to_numpy(model(x)[key]), atol=1e-6)
    assert rebuilt.sentence_task == "sop"


# --- ELECTRA --------------------------------------------------------------

def electra(num_layers=3, **kwargs):
    discriminator = tiny_encoder(num_layers=num_layers, num_heads=4, hidden_dim=16, embedding_dim=8)
    return kerasbert.ElectraPretrainer(None, discriminator, seed=1, **kwargs)


@torch_pass_only
def test_electra_generator_size_and_shared_embeddings():
    pretrainer = electra()
    generator, discriminator = pretrainer.generator, pretrainer.discriminator
    # The paper's fraction: 1/4 of hidden size, FFN and heads, same depth.
    assert (generator.hidden_dim, generator.num_heads, generator.num_layers) == (4, 1, 3)
    assert generator.embedding_width == discriminator.embedding_width == 8
    # One token table: the discriminator's, also the generator's decoder.
    assert pretrainer.generator_head.token_embedding is discriminator.token_embedding
    trainable = {id(w) for w in pretrainer.trainable_weights}
    assert id(discriminator.token_embedding.embeddings) in trainable
    assert id(discriminator.position_embedding.embeddings) in trainable
    assert id(generator.token_embedding.embeddings) not in trainable  # unused, frozen


def test_electra_generator_rejects_mismatched_embeddings():
    discriminator = tiny_encoder(hidden_dim=16, num_heads=4, embedding_dim=8)
    generator = tiny_encoder(hidden_dim=4, num_heads=1)  # embeddings 4 wide, not 8
    with pytest.raises(ValueError, match="embedding_width"):
        kerasbert.ElectraPretrainer(generator, discriminator)


def test_electra_samples_from_the_generator_and_labels_replacements():
    pretrainer = electra()
    x, mask_ids, mask_weights = batch(pretrainer.discriminator)
    x["mask_weights"] = mask_weights
    # A generator certain of token 7: every real slot samples 7.
    bias = np.full(pretrainer.discriminator.vocabulary_size, -1e4, "float32")
    bias[7] = 1e4
    pretrainer.generator_head.bias.assign(bias)
    mask_ids[0, 0] = 7  # a correct sample counts as original
    out = pretrainer(x, training=True)
    sampled = ops.convert_to_numpy(out["sampled_ids"])
    assert (sampled == 7).all()

    # The loss: generator MLM + 50 x replaced-token detection, by hand.
    loss = float(ops.convert_to_numpy(pretrainer.compute_loss(x, mask_ids, out, mask_weights)))
    logits = ops.convert_to_numpy(out["generator_logits"]).astype("float64")
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    nll = -np.take_along_axis(log_probs, mask_ids[..., None], axis=-1)[..., 0]
    mlm = (nll * mask_weights).sum() / mask_weights.sum()
    labels = np.zeros((B, SEQ))
    for row in range(B):
        for slot in range(P):
            if mask_weights[row, slot] and mask_ids[row, slot] != 7:
                labels[row, x["mask_positions"][row, slot]] = 1
    assert labels[0, 1] == 0 and labels[0, 4] == 1 and labels[2, 7] == 0  # correct sample; padding slot
    d = ops.convert_to_numpy(out["discriminator_logits"]).astype("float64")
    bce = np.maximum(d, 0) - d * labels + np.log1p(np.exp(-np.abs(d)))
    real = x["padding_mask"] != 0
    rtd = bce[real].mean()
    assert loss == pytest.approx(mlm + 50 * rtd, rel=1e-4)


@torch_pass_only
def test_electra_fit_logs_both_objectives():
    pretrainer = electra(discriminator_weight=10.0)
    pretrainer.compile(optimizer=keras.optimizers.AdamW(1e-2), jit_compile="auto")
    x, mask_ids, mask_weights = batch(pretrainer.discriminator)
    history = pretrainer.fit({**x, "mask_weights": mask_weights}, mask_ids, sample_weight=mask_weights,
                             epochs=2, batch_size=B, verbose=0).history
    assert set(history) == {"loss", "mlm_loss", "mlm_accuracy", "rtd_loss", "rtd_accuracy"}
    np.testing.assert_allclose(history["loss"], np.array(history["mlm_loss"]) + 10 * np.array(history["rtd_loss"]),
                               rtol=1e-4)
    with pytest.raises(ValueError, match="computes its own loss"):
        pretrainer.compile(loss="mse")


@torch_pass_only
def test_gradient_disentangled_sharing_trains_each_table_by_its_own_loss():
    """DeBERTa-v3's sharing: the masked LM alone moves the generator's
    table E_G, the replaced-token loss alone the residual E_delta, and the
    discriminator alone (its table merged to E_G + E_delta) gives the
    pretrainer's discriminator outputs."""
    discriminator = tiny_encoder(num_layers=2, num_heads=4, hidden_dim=16, num_segments=0,
                                 position_encoding="relative", relative_buckets=4, max_relative_distance=8,
                                 layer_norm_epsilon=1e-7)
    start = ops.convert_to_numpy(discriminator.token_embedding.embeddings)
    generator = electra_generator(discriminator, fraction=1.0, num_layers=1)
    assert (generator.num_layers, generator.hidden_dim) == (1, 16)
    x, mask_ids, mask_weights = batch(discriminator)
    x = {**x, "mask_weights": mask_weights}

    def trained(**weights):
        keras.utils.set_random_seed(0)
        pretrainer = kerasbert.ElectraPretrainer(electra_generator(discriminator, 1.0, 1), discriminator, seed=1,
                                                 embedding_sharing="gradient_disentangled", **weights)
        np.testing.assert_array_equal(ops.convert_to_numpy(pretrainer.generator.token_embedding.embeddings), start)
        # One step: no tracing, except on JAX, which compiles it faster than it dispatches op by op.
        pretrainer.compile(optimizer=keras.optimizers.SGD(1.0), run_eagerly=keras.backend.backend() != "jax")
        pretrainer.fit(x, mask_ids, sample_weight=mask_weights, batch_size=B, verbose=0)
        return pretrainer, *(ops.convert_to_numpy(t) for t in (
            pretrainer.generator.token_embedding.embeddings, pretrainer.embedding_residual.embeddings))

    _, table, residual = trained(discriminator_weight=0.0)  # the masked LM alone
    assert not np.allclose(table, start) and not residual.any()
    discriminator.token_embedding.embeddings.assign(start)
    pretrainer, table, residual = trained(generator_weight=0.0)  # replaced tokens alone
    np.testing.assert_array_equal(table, start)
    assert residual.any()
    merged = ops.convert_to_numpy(discriminator.token_embedding.embeddings)  # by fit, at its end
    np.testing.assert_allclose(merged, table + residual, rtol=1e-6)
    out = pretrainer(x, training=False)
    corrupted = np.array(x["token_ids"])
    sampled = ops.convert_to_numpy(out["sampled_ids"])
    for row, slot in zip(*np.nonzero(mask_weights)):
        corrupted[row, x["mask_positions"][row, slot]] = sampled[row, slot]
    alone = discriminator({"token_ids": corrupted, "padding_mask": x["padding_mask"]})["sequence_output"]
    head = pretrainer.get_layer("discriminator_output")(pretrainer.get_layer("discriminator_dense")(alone))
    np.testing.assert_allclose(ops.convert_to_numpy(head)[..., 0], ops.convert_to_numpy(out["discriminator_logits"]),
                               atol=1e-5)
    with pytest.raises(ValueError, match="embedding_sharing"):
        kerasbert.ElectraPretrainer(None, discriminator, embedding_sharing="tied")


@torch_pass_only
def test_electra_generator_default_fractions_follow_the_paper():
    sizes = {}
    for name in ("electra_small_discriminator_en", "electra_base_discriminator_en",
                 "electra_large_discriminator_en"):
        config = kerasbert.get_preset(name)["encoder"]
        discriminator = kerasbert.Encoder(**{**config, "num_layers": 1, "vocabulary_size": 10})
        generator = electra_generator(discriminator)
        sizes[name] = (generator.hidden_dim, generator.num_heads, generator.intermediate_dim)
    assert sizes == {
        "electra_small_discriminator_en": (64, 1, 256),
        "electra_base_discriminator_en": (256, 4, 1024),
        "electra_large_discriminator_en": (256, 4, 1024),
    }


# --- Precision and XLA ----------------------------------------------------

@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_training_step(policy):
    encoder = tiny_encoder(dtype=policy)
    model = kerasbert.BertPretrainer(encoder, sentence_task="nsp")
    # float16 without XLA on JAX: its CPU compiler has no float16 x float16
    # -> float32 matmul ("F16_F16_F32 not supported by dot_general on CPU");
    # GPUs do. bfloat16 compiles (and JAX runs 2.5 min op by op without).
    # "auto" elsewhere: on a TensorFlow CPU XLA for float16, and for
    # bfloat16 XLA or TensorFlow's kernels, as the CPU has bfloat16 units.
    jit_compile = False if policy == "mixed_float16" and keras.backend.backend() == "jax" else "auto"
    model.compile(optimizer=keras.optimizers.AdamW(1e-3), jit_compile=jit_compile)
    if policy == "mixed_float16":
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    x, mask_ids, mask_weights = batch(encoder)
    y = {"mlm": mask_ids, "nsp": np.array([0, 1, 1, 0], "int32")}
    w = {"mlm": mask_weights, "nsp": np.ones(B, "float32")}
    before = [w_.numpy().copy() for w_ in model.trainable_weights]
    history = model.fit(x, y, sample_weight=w, epochs=1, batch_size=B, verbose=0).history
    assert np.isfinite(history["loss"][0])
    assert all(v.dtype == "float32" for v in model.trainable_weights)  # float32 master weights
    assert ops.convert_to_numpy(model(x)["mlm"]).dtype == np.float32
    changed = [not np.array_equal(a, b.numpy()) for a, b in zip(before, model.trainable_weights)]
    assert sum(changed) > len(changed) // 2


@pytest.mark.parametrize("bfloat16_units", [True, False])
@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_auto_jit_compile_runs_bfloat16_on_tensorflow_kernels_where_the_cpu_multiplies_it(
        policy, bfloat16_units, monkeypatch):
    """`compile(jit_compile="auto")`: XLA on JAX, eager on torch; on a
    TensorFlow CPU XLA for float32 pretraining, TensorFlow's own kernels
    (oneDNN's bfloat16 matrix units) for bfloat16 where the CPU has them,
    and always for fine-tuning tasks; True and False stay as given."""
    monkeypatch.setattr(task_module, "cpu_multiplies_bfloat16", lambda: bfloat16_units)
    pretrainer = kerasbert.MaskedLM(tiny_encoder(dtype=policy))
    classifier = kerasbert.TextClassifier(tiny_encoder(dtype=policy), num_classes=2)
    pretrainer.compile(jit_compile="auto")
    classifier.compile(jit_compile="auto")
    backend = keras.backend.backend()
    if backend == "tensorflow":
        assert pretrainer.jit_compile is not (policy == "mixed_bfloat16" and bfloat16_units)
        assert classifier.jit_compile is False
    else:
        assert pretrainer.jit_compile is classifier.jit_compile is (backend == "jax")
    for given in (True, False):
        pretrainer.compile(jit_compile=given)
        assert pretrainer.jit_compile is given
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras warns when it must turn jit_compile=True off
        pretrainer.compile(jit_compile="auto", run_eagerly=True)
    assert pretrainer.jit_compile is False


def test_cpu_bfloat16_units_are_read_from_the_cpu_flags(tmp_path):
    for flags, expected in [("fpu avx512f avx512_bf16 avx512_vnni", True), ("fpu avx512f amx_bf16 amx_tile", True),
                            ("fpu avx2 avx512f avx512_fp16", False)]:
        path = tmp_path / f"cpuinfo-{expected}-{len(flags)}"
        path.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\n")
        assert cpu_multiplies_bfloat16(str(path)) is expected
    assert cpu_multiplies_bfloat16(str(tmp_path / "missing")) is False


def test_jit_compiled_training_matches_eager():
    """One ELECTRA step (the most involved graph: sampling, scatter, two
    encoders) with jit_compile=True gives the eager step's weights. (The
    generator is made certain of one token: XLA may draw other random
    numbers than eager execution. One layer each: compiling, above all
    torch.compile's, takes time by the layer, and depth adds nothing the
    first layer does not have.)"""
    results = []
    for jit in (False, True):
        keras.utils.set_random_seed(3)
        pretrainer = electra(num_layers=1)
        bias = np.zeros(pretrainer.discriminator.vocabulary_size, "float32")
        bias[7] = 1e4
        pretrainer.generator_head.bias.assign(bias)
        pretrainer.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=jit)
        x, mask_ids, mask_weights = batch(pretrainer.discriminator)
        pretrainer.fit({**x, "mask_weights": mask_weights}, mask_ids, sample_weight=mask_weights,
                       epochs=1, batch_size=B, verbose=0)
        results.append([w.numpy() for w in pretrainer.trainable_weights])
    for eager, compiled in zip(*results):
        np.testing.assert_allclose(compiled, eager, atol=1e-4)


def test_masked_lm_runs_its_last_layer_at_the_masked_positions_only(monkeypatch):
    """The speed-up of `Encoder.outputs_at`: the last block's output has one
    row per masked position (and the first token), the others the whole
    sequence."""
    encoder = tiny_encoder()
    model = kerasbert.MaskedLM(encoder)
    x, _, _ = batch(encoder)
    rows = block_output_rows(model, x, monkeypatch)
    assert rows == [SEQ] * (encoder.num_layers - 1) + [1 + P]


@pytest.mark.parametrize("sentence_task", [None, pytest.param("nsp", marks=torch_pass_only)])
def test_training_at_the_masked_positions_matches_training_on_the_full_output(sentence_task):
    """Gradients are unchanged: one SGD step of the pretrainer gives the
    weights of one step of the same model that computes the last layer
    everywhere and gathers afterwards."""
    keras.utils.set_random_seed(0)
    encoders = [tiny_encoder(embedding_dim=8, num_layers=3, num_layer_groups=2) for _ in range(2)]
    encoders[1].set_weights(encoders[0].get_weights())
    pretrainer = kerasbert.BertPretrainer(encoders[0], sentence_task=sentence_task)
    features = {k: keras.Input((None,), dtype="int32", name=k) for k in encoders[1].input}
    positions = keras.Input((None,), dtype="int32", name="mask_positions")
    outputs = encoders[1](features)
    head = kerasbert.layers.MaskedLMHead(encoders[1].token_embedding, name="mlm_head")
    reference_outputs = {"mlm": head(outputs["sequence_output"], positions)}
    if sentence_task:
        reference_outputs["nsp"] = keras.layers.Dense(2, name="nsp_head")(outputs["pooled_output"])
    reference = keras.Model({**features, "mask_positions": positions}, reference_outputs)
    head.set_weights(pretrainer.mlm_head.get_weights())
    if sentence_task:
        reference.get_layer("nsp_head").set_weights(pretrainer.sentence_head.get_weights())

    x, mask_ids, mask_weights = batch(encoders[0])
    y, weights = {"mlm": mask_ids}, {"mlm": mask_weights}
    if sentence_task:
        y["nsp"], weights["nsp"] = np.array([0, 1, 1, 0]), np.ones(B, "float32")
    initial = {v.path: v.numpy() for v in pretrainer.trainable_weights}
    results = []
    for model in (pretrainer, reference):
        model.compile(optimizer=keras.optimizers.SGD(0.5),
                      loss={k: keras.losses.SparseCategoricalCrossentropy(from_logits=True) for k in y})
        model.fit(x, y, sample_weight=weights, batch_size=B, epochs=1, shuffle=False, verbose=0)
        results.append({v.path: v.numpy() for v in model.trainable_weights})
    assert sorted(results[0]) == sorted(results[1]) == sorted(initial)
    for path, value in results[0].items():
        np.testing.assert_allclose(value, results[1][path], atol=2e-6, err_msg=path)
    moved = [path for path in initial if not np.allclose(initial[path], results[0][path], atol=1e-6)]
    assert "transformer_block_1/output_dense/kernel" in moved  # the last block's (shared) weights
    assert len(moved) > len(initial) // 2
