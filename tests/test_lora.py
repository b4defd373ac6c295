"""LoRA: `enable_lora` on the encoder's dense layers (the fused QKV
included), against PEFT's adapters on the same transformers model; training
that moves the adapters and the head alone; `merge_lora`; adapter presets
that name their base."""

import os

import keras
import numpy as np
import pytest
from helpers import encoder_inputs, hf_outputs, make_hf_checkpoint, run, tiny_encoder, torch_pass_only

import kerasbert
from kerasbert.layers.lora import ADAPTER_NAMES, lora_layers
from kerasbert.tasks.task import load_task

ALL_TARGETS = ("qkv", "attention_output", "intermediate", "output")
# The transformers modules of a BERT layer each target adapts.
BERT_MODULES = {"qkv": ("attention.self.query", "attention.self.key", "attention.self.value"),
                "attention_output": ("attention.output.dense",), "intermediate": ("intermediate.dense",),
                "output": ("output.dense",)}


def random_adapters(encoder, seed=0):
    """Every adapter's A and B random (B starts at zeros, A at He-uniform)."""
    rng = np.random.default_rng(seed)
    for layer in lora_layers(encoder):
        for name in ADAPTER_NAMES:
            variable = getattr(layer, name)
            variable.assign(0.3 * rng.standard_normal(variable.shape).astype("float32"))


def numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable))


def test_adapters_compute_what_peft_computes(tmp_path, targets=ALL_TARGETS):
    """PEFT adapts the query, key and value projections apart; one adapter
    on the fused QKV is theirs with one A shared by the three and B's three
    column blocks."""
    import peft
    import torch
    import transformers

    hf = make_hf_checkpoint(tmp_path / "bert", "bert", vocab_size=60, hidden_size=16, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=24, max_position_embeddings=32)
    encoder = kerasbert.from_preset(str(tmp_path / "bert"))
    encoder.enable_lora(3, alpha=6.0, targets=targets)
    random_adapters(encoder)
    modules = [f"encoder.layer.{i}.{m}" for i in range(encoder.num_layers) for t in targets for m in BERT_MODULES[t]]
    adapted = peft.get_peft_model(hf, peft.LoraConfig(r=3, lora_alpha=6.0, lora_dropout=0.0, target_modules=modules))
    named = dict(adapted.base_model.model.named_modules())
    with torch.no_grad():
        for i, block in enumerate(encoder.transformer_blocks):
            layers = {"qkv": block.attention.qkv, "attention_output": block.attention.output_dense,
                      "intermediate": block.intermediate_dense, "output": block.output_dense}
            for target in targets:
                a, b = numpy(layers[target].lora_kernel_a), numpy(layers[target].lora_kernel_b)
                width = b.shape[1] // len(BERT_MODULES[target])
                for j, name in enumerate(BERT_MODULES[target]):  # B's column blocks: query, key, value
                    module = named[f"encoder.layer.{i}.{name}"]
                    module.lora_A["default"].weight.copy_(torch.from_numpy(a.T.copy()))
                    module.lora_B["default"].weight.copy_(torch.from_numpy(b[:, j * width:(j + 1) * width].T.copy()))
    inputs = encoder_inputs(encoder, lengths=(9, 4, 1), seed=1)
    expected = hf_outputs(adapted, inputs)
    actual = run(encoder, inputs)
    for key in expected:
        np.testing.assert_allclose(actual[key], expected[key], atol=1e-4, err_msg=key)
    # Written for transformers, the adapters are folded into the kernels.
    kerasbert.convert.to_huggingface(encoder, tmp_path / "merged")
    merged = hf_outputs(transformers.AutoModel.from_pretrained(tmp_path / "merged"), inputs)
    for key in expected:
        np.testing.assert_allclose(merged[key], expected[key], atol=1e-4, err_msg=key)
    encoder.merge_lora()  # the same model without adapters
    assert not lora_layers(encoder) and not [v for v in encoder.weights if "lora" in v.path]
    assert all(v.trainable for v in encoder.weights)
    merged = run(encoder, inputs)
    for key in expected:
        np.testing.assert_allclose(merged[key], actual[key], atol=1e-5, err_msg=key)


def test_training_moves_the_adapters_and_the_head_alone(tmp_path):
    keras.utils.set_random_seed(0)
    task = kerasbert.TextClassifier(tiny_encoder(num_layers=2), num_classes=2)
    x = encoder_inputs(task.encoder, lengths=(9, 6, 3, 8), seed=2)
    y = np.array([0, 1, 1, 0])
    base = task.predict(x, verbose=0)
    trainable = {v.path for v in task.trainable_weights}
    task.enable_lora(2, targets=("qkv", "attention_output"))
    np.testing.assert_allclose(task.predict(x, verbose=0), base, atol=1e-6)  # B starts at zeros
    adapters = {getattr(layer, n).path for layer in lora_layers(task.encoder) for n in ADAPTER_NAMES}
    head = {v.path for v in task._head_variables()}
    assert len(adapters) == 2 * 2 * 2  # 2 blocks x 2 targets x (A, B)
    assert {v.path for v in task.trainable_weights} == adapters | head
    before = {v.path: numpy(v) for v in task.weights}
    task.compile(learning_rate=1e-2, warmup_fraction=0.0)
    task.fit(x, y, batch_size=4, epochs=2, verbose=0)
    moved = {v.path for v in task.weights if not np.array_equal(numpy(v), before[v.path])}
    assert moved <= adapters | head and moved & adapters and moved & head
    lora = task.predict(x, verbose=0)
    # A .keras file holds the adapters folded in (Keras's own LoRA saving).
    task.save(tmp_path / "task.keras")
    loaded = keras.saving.load_model(tmp_path / "task.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), lora, atol=1e-5)
    task.merge_lora()
    np.testing.assert_allclose(task.predict(x, verbose=0), lora, atol=1e-5)
    assert not [v for v in task.weights if "lora" in v.path]
    assert {v.path for v in task.trainable_weights} == trainable  # trained in full again


def test_shared_blocks_share_their_adapters():
    encoder = tiny_encoder(num_layers=4, num_layer_groups=1)
    encoder.enable_lora(2)
    assert len(lora_layers(encoder)) == 4  # one block: its four dense layers


@torch_pass_only
def test_adapter_presets_load_onto_their_base(tmp_path, minilm_tokenizer):
    base = tmp_path / "base"
    kerasbert.save_to_preset(tiny_encoder(vocabulary_size=minilm_tokenizer.vocabulary_size(), num_layers=2), base)
    minilm_tokenizer.save_to_preset(base)
    task = kerasbert.TextClassifier.from_preset(str(base), num_classes=3, sequence_length=16)
    task.enable_lora(4, alpha=8)
    random_adapters(task.encoder)
    texts = ["A gem of a film.", "Dull, and far too long.", "Yes!"]
    expected = task.predict(texts, verbose=0)

    task.save_to_preset(tmp_path / "adapters", adapters_only=True)
    assert sorted(os.listdir(tmp_path / "adapters")) == ["adapters.safetensors", "task.json", "task.safetensors"]
    loaded = load_task(tmp_path / "adapters")  # as the commands load a task preset
    np.testing.assert_allclose(loaded.predict(texts, verbose=0), expected, atol=1e-5)
    assert loaded.base_preset == os.path.abspath(base)
    assert {v.path for v in loaded.trainable_weights} == {v.path for v in loaded.weights if "lora" in v.path} | {
        v.path for v in loaded._head_variables()}
    loaded.save_to_preset(tmp_path / "again", adapters_only=True)  # its base is its own base's

    task.save_to_preset(tmp_path / "full")  # adapters folded into the encoder
    full = kerasbert.TextClassifier.from_preset(tmp_path / "full")
    assert not lora_layers(full.encoder)
    np.testing.assert_allclose(full.predict(texts, verbose=0), expected, atol=1e-5)

    kerasbert.save_to_preset(tiny_encoder(vocabulary_size=minilm_tokenizer.vocabulary_size(), num_layers=2), base)
    with pytest.raises(ValueError, match="trained on a base whose weights differ"):
        kerasbert.TextClassifier.from_preset(tmp_path / "adapters")


def test_lora_errors(tmp_path):
    task = kerasbert.TextClassifier(tiny_encoder(num_layers=1), num_classes=2)
    with pytest.raises(ValueError, match="rank"):
        task.enable_lora(0)
    with pytest.raises(ValueError, match="query"):
        task.enable_lora(2, targets=("query",))
    with pytest.raises(TypeError, match="targets"):
        task.enable_lora(2, targets="qkv")
    with pytest.raises(ValueError, match="alpha"):
        task.enable_lora(2, alpha=-1.0)
    with pytest.raises(ValueError, match="has none"):
        task.save_to_preset(tmp_path / "a", adapters_only=True)
    task.enable_lora(2)
    with pytest.raises(ValueError, match="already enabled"):
        task.enable_lora(2)
    with pytest.raises(ValueError, match="base="):
        task.save_to_preset(tmp_path / "a", adapters_only=True)
    assert not os.path.exists(tmp_path / "a")
    encoder = tiny_encoder(num_layers=1)
    pretrainer = kerasbert.ElectraPretrainer(kerasbert.tasks.electra_generator(encoder), encoder)
    with pytest.raises(TypeError, match="from scratch"):
        pretrainer.enable_lora(2)
