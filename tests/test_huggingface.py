"""Exact parity with transformers for every family, both directions.

Each reference is a randomly initialised transformers model of a small,
non-default configuration, every tensor randomised, saved to a directory
and loaded with `kerasbert.from_preset`.
"""

import os

import keras
import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers

import kerasbert
from helpers import (
    assert_outputs_close,
    encoder_inputs,
    hf_outputs,
    make_hf_checkpoint,
    compared_positions,
    randomize_torch_model,
    run,
    tensorflow_pass_only,
    torch_pass_only,
)
from kerasbert.convert.weights import _normalise_names

COMMON = dict(
    vocab_size=97,
    hidden_size=48,
    num_hidden_layers=3,
    num_attention_heads=3,
    intermediate_size=37,
    max_position_embeddings=40,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
# DistilBERT's config.json names the same values differently.
DISTILBERT = dict(vocab_size=97, dim=48, n_layers=3, n_heads=3, hidden_dim=37, max_position_embeddings=40,
                  dropout=0.0, attention_dropout=0.0)
# Local layers see 4 tokens either side: the inputs below are longer.
MODERNBERT = dict(vocab_size=97, hidden_size=48, num_hidden_layers=4, num_attention_heads=3, intermediate_size=37,
                  max_position_embeddings=40, local_attention=8, global_attn_every_n_layers=3, pad_token_id=0,
                  bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3)
# DeBERTa-v3's attention with 8 buckets reaching 16 tokens: the inputs below
# are longer, so distances fall in the log buckets too.
DEBERTA = dict(COMMON, type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True, position_buckets=8,
               max_relative_positions=16, pos_att_type=["p2c", "c2p"], position_biased_input=False,
               share_att_key=True, norm_rel_ebd="layer_norm")
CONFIGS = {
    "bert": ("bert", dict(COMMON, type_vocab_size=3, layer_norm_eps=1e-7)),
    "bert_gelu_tanh": ("bert", dict(COMMON, hidden_act="gelu_new", num_attention_heads=4)),
    "albert_2_groups": (
        "albert",
        dict(COMMON, num_hidden_layers=4, num_hidden_groups=2, embedding_size=24,
             hidden_act="gelu_new", classifier_dropout_prob=0.0),
    ),
    "albert_uneven_groups": (
        "albert",
        dict(COMMON, num_hidden_layers=5, num_hidden_groups=2, inner_group_num=2,
             embedding_size=48, hidden_act="gelu"),
    ),
    "roberta": (
        "roberta",
        dict(COMMON, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
             max_position_embeddings=42),
    ),
    "roberta_pad_3": (
        "roberta",
        dict(COMMON, type_vocab_size=2, layer_norm_eps=1e-5, pad_token_id=3,
             max_position_embeddings=44, hidden_act="relu"),
    ),
    "xlm_roberta": (
        "xlm-roberta",
        dict(COMMON, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, max_position_embeddings=42),
    ),
    "distilbert": ("distilbert", DISTILBERT),
    "distilbert_relu": ("distilbert", dict(DISTILBERT, n_heads=4, activation="relu", max_position_embeddings=33)),
    "deberta_v3": ("deberta-v2", DEBERTA),
    "deberta_v3_no_buckets_segments": ("deberta-v2", dict(DEBERTA, position_buckets=-1, max_relative_positions=12,
                                                          type_vocab_size=2, hidden_act="gelu_new")),
    "modernbert": ("modernbert", MODERNBERT),
    "modernbert_biases_every_2": (
        "modernbert", dict(MODERNBERT, num_hidden_layers=5, global_attn_every_n_layers=2, attention_bias=True,
                           mlp_bias=True, norm_bias=True, local_attention=6, hidden_activation="gelu_new",
                           global_rope_theta=1000.0, local_rope_theta=500.0)),
    "electra": ("electra", dict(COMMON, embedding_size=24)),
    "electra_same_width": ("electra", dict(COMMON, embedding_size=48, layer_norm_eps=1e-6)),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def checkpoint(request, tmp_path_factory):
    model_type, config = CONFIGS[request.param]
    directory = str(tmp_path_factory.mktemp(request.param))
    model = make_hf_checkpoint(directory, model_type, seed=len(request.param), **config)
    return model_type, config, model, directory


def _inputs(encoder, config, lengths=(13, 7, 1, 30), seed=1):
    return encoder_inputs(encoder, lengths=lengths, seed=seed, pad_id=config.get("pad_token_id", 0))


# Variants whose differences from their family's first config are in the
# conversion (an activation's name, the padding id and with it the position
# offset, no embedding projection): their encoders run the first config's
# ops, so on JAX and torch (about 5 s a config there) the first configs do.
CONVERSION_VARIANTS = ("bert_gelu_tanh", "roberta_pad_3", "distilbert_relu", "electra_same_width")


def test_outputs_match_transformers(checkpoint, request):
    if keras.backend.backend() != "tensorflow" and request.node.callspec.params["checkpoint"] in CONVERSION_VARIANTS:
        pytest.skip("a conversion variant: on every backend, its family's first config (CONVERSION_VARIANTS)")
    model_type, config, model, directory = checkpoint
    encoder = kerasbert.from_preset(directory)
    for seed, lengths in [(1, (13, 7, 1, 30)), (2, (5, 5)), (3, (encoder.max_sequence_length,))]:
        inputs = _inputs(encoder, config, lengths, seed)
        expected = hf_outputs(model, inputs)  # every position, padding included
        actual = run(encoder, inputs)
        if "pooled_output" not in expected:  # ELECTRA has no pooler
            assert not encoder.pooler
            actual.pop("pooled_output")
        compared = compared_positions(encoder, inputs["padding_mask"])
        actual["sequence_output"] = actual["sequence_output"][compared]
        expected["sequence_output"] = expected["sequence_output"][compared]
        assert_outputs_close(actual, expected, atol=1e-4)


@tensorflow_pass_only  # the encoder's tables and transformers' models only
def test_configuration_is_mapped(checkpoint):
    model_type, config, model, directory = checkpoint
    encoder = kerasbert.from_preset(directory)
    assert encoder.num_layers == config.get("num_hidden_layers", config.get("n_layers"))
    assert encoder.vocabulary_size == config["vocab_size"]
    assert encoder.count_params() == sum(p.numel() for p in model.parameters())
    if model_type in ("roberta", "xlm-roberta"):
        assert encoder.position_offset == config["pad_token_id"] + 1
    if model_type == "albert":
        assert len(encoder.transformer_blocks) == 2 * config.get("inner_group_num", 1)


@tensorflow_pass_only  # the encoder's tables and transformers' models only
def test_round_trip_reproduces_the_tensors(checkpoint, tmp_path):
    model_type, config, model, directory = checkpoint
    encoder = kerasbert.from_preset(directory)
    kerasbert.convert.to_huggingface(encoder, str(tmp_path), model_type=model_type)
    original = _normalise_names(safetensors.numpy.load_file(os.path.join(directory, "model.safetensors")))
    written = safetensors.numpy.load_file(str(tmp_path / "model.safetensors"))
    assert sorted(written) == sorted(original)
    for name in original:
        np.testing.assert_array_equal(written[name], original[name], err_msg=name)
    # ... and transformers loads it as the same model.
    reloaded = transformers.AutoModel.from_pretrained(str(tmp_path)).eval()
    inputs = _inputs(encoder, config)
    assert_outputs_close(hf_outputs(reloaded, inputs), hf_outputs(model, inputs), atol=1e-6)


@tensorflow_pass_only  # the encoder's tables and transformers' models only
def test_model_type_is_inferred_for_writing(checkpoint, tmp_path):
    model_type, config, model, directory = checkpoint
    encoder = kerasbert.from_preset(directory)
    kerasbert.convert.to_huggingface(encoder, str(tmp_path))
    reloaded = transformers.AutoModel.from_pretrained(str(tmp_path)).eval()
    inputs = _inputs(encoder, config)
    expected = hf_outputs(model, inputs)
    got = hf_outputs(reloaded, inputs)
    np.testing.assert_allclose(got["sequence_output"], expected["sequence_output"], atol=1e-5)


def test_pytorch_binary_and_legacy_names(tmp_path):
    """bert-base-uncased style: task prefix, LayerNorm gamma/beta, a
    pytorch_model.bin read with weights_only=True."""
    config = transformers.BertConfig(**COMMON)
    model = randomize_torch_model(transformers.BertModel(config), seed=5)
    state = {}
    for name, tensor in model.state_dict().items():
        name = "bert." + name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[name] = tensor
    state["cls.predictions.bias"] = torch.zeros(COMMON["vocab_size"])  # a head we ignore
    torch.save(state, tmp_path / "pytorch_model.bin")
    config.save_pretrained(tmp_path)
    encoder = kerasbert.from_preset(str(tmp_path))
    inputs = encoder_inputs(encoder, lengths=(11, 4))
    assert_outputs_close(run(encoder, inputs), hf_outputs(model, inputs), atol=1e-4)


def test_pickled_code_is_never_run(tmp_path):
    class Payload:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    torch.save({"embeddings.word_embeddings.weight": Payload()}, tmp_path / "pytorch_model.bin")
    transformers.BertConfig(**COMMON).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="weights-only"):
        kerasbert.from_preset(str(tmp_path))
    assert not (tmp_path / "pwned").exists()


def test_checkpoint_without_pooler_gets_none(tmp_path):
    config = transformers.RobertaConfig(**dict(COMMON, max_position_embeddings=42))
    model = randomize_torch_model(transformers.RobertaModel(config, add_pooling_layer=False))
    model.save_pretrained(tmp_path)
    encoder = kerasbert.from_preset(str(tmp_path))
    assert encoder.pooler is False
    inputs = encoder_inputs(encoder, lengths=(9, 3), pad_id=1)
    np.testing.assert_allclose(
        run(encoder, inputs)["sequence_output"], hf_outputs(model, inputs)["sequence_output"], atol=1e-4
    )


def test_sharded_safetensors(tmp_path):
    config = transformers.BertConfig(**COMMON)
    model = randomize_torch_model(transformers.BertModel(config), seed=7)
    model.save_pretrained(tmp_path, max_shard_size="100KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    encoder = kerasbert.from_preset(str(tmp_path))
    inputs = encoder_inputs(encoder, lengths=(6,))
    assert_outputs_close(run(encoder, inputs), hf_outputs(model, inputs), atol=1e-4)


def test_bfloat16_checkpoint(tmp_path):
    config = transformers.BertConfig(**COMMON)
    model = randomize_torch_model(transformers.BertModel(config), seed=8).to(torch.bfloat16)
    model.save_pretrained(tmp_path)
    encoder = kerasbert.from_preset(str(tmp_path))
    reference = model.to(torch.float32)
    inputs = encoder_inputs(encoder, lengths=(6,))
    assert_outputs_close(run(encoder, inputs), hf_outputs(reference, inputs), atol=1e-4)


@pytest.mark.parametrize("model_type, kwargs, words", [
    ("bert", dict(position_offset=2), ["roberta"]),
    ("electra", dict(), ["pooler"]),
    ("roberta", dict(num_layer_groups=1), ["albert"]),
    ("distilbert", dict(), ["num_segments", "pooler"]),
    ("modernbert", dict(num_segments=0, pooler=False), ["normalization='post'", "feedforward", "position_encoding"]),
    ("bert", dict(normalization="pre", position_encoding="rotary"), ["only modernbert"]),
])
def test_unrepresentable_exports_are_refused(tmp_path, model_type, kwargs, words):
    from helpers import tiny_encoder

    encoder = tiny_encoder(**kwargs)
    with pytest.raises(ValueError) as info:
        kerasbert.convert.to_huggingface(encoder, str(tmp_path), model_type=model_type)
    assert all(w in str(info.value) for w in words)
    assert not (tmp_path / "config.json").exists()


def test_unsupported_configs_are_named(tmp_path):
    transformers.BertConfig(**COMMON, position_embedding_type="relative_key").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'"):
        kerasbert.from_preset(str(tmp_path), load_weights=False)
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(ValueError, match="model_type='gpt2'"):
        kerasbert.from_preset(str(tmp_path))


def test_mismatched_config_and_weights(tmp_path):
    model = randomize_torch_model(transformers.BertModel(transformers.BertConfig(**COMMON)))
    model.save_pretrained(tmp_path)
    transformers.BertConfig(**dict(COMMON, intermediate_size=38)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="does not match the weights"):
        kerasbert.from_preset(str(tmp_path))


# The same keras.ops program as the short inputs compared on every backend above: once, in the torch pass.
@torch_pass_only
def test_modernbert_matches_transformers_at_8192_tokens(tmp_path):
    """ModernBERT's whole context: one row of 8,192 tokens and one of 5,000
    padded to it, local layers with transformers' 128-token window."""
    config = dict(MODERNBERT, hidden_size=24, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                  max_position_embeddings=8192, local_attention=128)
    model = make_hf_checkpoint(str(tmp_path), "modernbert", seed=1, **config)
    encoder = kerasbert.from_preset(str(tmp_path))
    inputs = encoder_inputs(encoder, lengths=(8192, 5000), seed=0)
    compared = compared_positions(encoder, inputs["padding_mask"])
    expected = hf_outputs(model, inputs)["sequence_output"][compared]
    np.testing.assert_allclose(run(encoder, inputs)["sequence_output"][compared], expected, atol=1e-4, rtol=0)
