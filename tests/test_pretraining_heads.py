"""Pretraining heads from and to transformers checkpoints, every family.

Each reference is a randomly initialised transformers pretraining model
(`BertForPreTraining`, `AlbertForPreTraining`, the `...ForMaskedLM` of
RoBERTa, XLM-RoBERTa and DistilBERT, `ElectraForMaskedLM` +
`ElectraForPreTraining`) of a tiny configuration,
every tensor randomised, saved to a directory and loaded with a task's
`from_preset`; the task's logits must be transformers'.
"""

import os

import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers
from helpers import encoder_inputs, hf_call, randomize_torch_model

import kerasbert
from kerasbert.convert import assign_head_weights, to_huggingface
from kerasbert.utils.io import read_json

COMMON = dict(
    vocab_size=101,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=37,
    max_position_embeddings=40,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
BERT = dict(COMMON, type_vocab_size=2, layer_norm_eps=1e-7, hidden_act="gelu_new")
ALBERT = dict(COMMON, embedding_size=24, num_hidden_groups=1, classifier_dropout_prob=0.0)
ROBERTA = dict(COMMON, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, max_position_embeddings=42)
DISTILBERT = dict(vocab_size=101, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=40,
                  dropout=0.0, attention_dropout=0.0, activation="gelu_new")
DEBERTA = dict(COMMON, type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True, position_buckets=8,
               max_relative_positions=16, pos_att_type=["p2c", "c2p"], position_biased_input=False,
               share_att_key=True, norm_rel_ebd="layer_norm")
ELECTRA = dict(COMMON, embedding_size=24)
ELECTRA_GENERATOR = dict(ELECTRA, hidden_size=16, intermediate_size=20)
LENGTHS = (11, 6, 3)


def _save(model, directory, seed):
    randomize_torch_model(model, seed)
    model.save_pretrained(directory)
    return model


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("bert"))
    return _save(transformers.BertForPreTraining(transformers.BertConfig(**BERT)), directory, 1), directory


@pytest.fixture(scope="module")
def albert(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("albert"))
    return _save(transformers.AlbertForPreTraining(transformers.AlbertConfig(**ALBERT)), directory, 2), directory


# The families whose pretraining model is a masked LM alone: (model class, config).
MASKED_LMS = {
    "roberta": (transformers.RobertaForMaskedLM, transformers.RobertaConfig(**ROBERTA)),
    "xlm-roberta": (transformers.XLMRobertaForMaskedLM, transformers.XLMRobertaConfig(**ROBERTA)),
    "distilbert": (transformers.DistilBertForMaskedLM, transformers.DistilBertConfig(**DISTILBERT)),
    "deberta-v2": (transformers.DebertaV2ForMaskedLM, transformers.DebertaV2Config(**DEBERTA)),
    "modernbert": (transformers.ModernBertForMaskedLM, transformers.ModernBertConfig(
        vocab_size=101, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=40, local_attention=4, global_attn_every_n_layers=2, pad_token_id=0,
        bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3)),
}


@pytest.fixture(scope="module")
def electra(tmp_path_factory):
    """(discriminator, its directory, generator, its directory); the
    generator's embeddings are the discriminator's, as in ELECTRA."""
    disc_dir = str(tmp_path_factory.mktemp("electra_discriminator"))
    gen_dir = str(tmp_path_factory.mktemp("electra_generator"))
    discriminator = _save(transformers.ElectraForPreTraining(transformers.ElectraConfig(**ELECTRA)), disc_dir, 4)
    generator = randomize_torch_model(
        transformers.ElectraForMaskedLM(transformers.ElectraConfig(**ELECTRA_GENERATOR)), seed=5
    )
    with torch.no_grad():
        generator.electra.embeddings.load_state_dict(discriminator.electra.embeddings.state_dict())
    generator.save_pretrained(gen_dir)
    return discriminator, disc_dir, generator, gen_dir


def _inputs(encoder, pad_id=0, seed=0):
    """Encoder inputs plus `mask_positions (batch, 3)`, distinct positions
    inside each row."""
    inputs = encoder_inputs(encoder, lengths=LENGTHS, seed=seed, pad_id=pad_id)
    rng = np.random.default_rng(seed)
    positions = [rng.choice(n, 3, replace=False) for n in LENGTHS]
    inputs["mask_positions"] = np.stack(positions).astype("int32")
    return inputs


def _hf(model, inputs):
    """transformers' outputs (eval mode, no gradient) on our inputs."""
    return {k: v.numpy() for k, v in hf_call(model, inputs).items()}


def _at(logits, positions):
    """(batch, seq, vocab) logits at `positions (batch, num_masked)`."""
    return np.take_along_axis(logits, positions[:, :, None], axis=1)


def _run(task, inputs):
    # One compiled call: op-by-op eager JAX compiles every op of a new model.
    outputs = task.predict_on_batch(inputs)
    return {k: np.asarray(v) for k, v in outputs.items()} if isinstance(outputs, dict) else np.asarray(outputs)


def _close(actual, expected, name):
    np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0, err_msg=name)


def _check_bert_pretrainer(task, reference, inputs, sentence_task, sentence_key):
    expected = _hf(reference, inputs)
    actual = _run(task, inputs)
    _close(actual["mlm"], _at(expected["prediction_logits"], inputs["mask_positions"]), "mlm")
    _close(actual[sentence_task], expected[sentence_key], sentence_task)


def _load_and_reload(task, directory):
    """transformers' model read back from what `to_huggingface` wrote, with
    no tensor missing or left over."""
    to_huggingface(task, directory)
    auto = transformers.AutoModelForPreTraining
    if read_json(os.path.join(directory, "config.json"))["architectures"][0].endswith("ForMaskedLM"):
        auto = transformers.AutoModelForMaskedLM
    model, info = auto.from_pretrained(directory, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return model


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_bert_pretrainer_matches_transformers_both_ways(family, request, tmp_path):
    reference, directory = request.getfixturevalue(family)
    sentence_task, key = {"bert": ("nsp", "seq_relationship_logits"), "albert": ("sop", "sop_logits")}[family]
    task = kerasbert.BertPretrainer.from_preset(directory, sentence_task=sentence_task)
    inputs = _inputs(task.encoder)
    _check_bert_pretrainer(task, reference, inputs, sentence_task, key)

    reloaded = _load_and_reload(task, str(tmp_path))
    assert type(reloaded).__name__ == type(reference).__name__
    _check_bert_pretrainer(task, reloaded, inputs, sentence_task, key)


@pytest.mark.parametrize("family", sorted(MASKED_LMS))
def test_masked_lm_matches_transformers_both_ways(family, tmp_path):
    model_class, config = MASKED_LMS[family]
    reference = _save(model_class(config), str(tmp_path / "hf"), len(family))
    task = kerasbert.MaskedLM.from_preset(str(tmp_path / "hf"))
    inputs = _inputs(task.encoder, pad_id=config.pad_token_id)
    expected = _at(_hf(reference, inputs)["logits"], inputs["mask_positions"])
    _close(_run(task, inputs), expected, "mlm")

    reloaded = _load_and_reload(task, str(tmp_path / "back"))
    assert isinstance(reloaded, model_class)
    _close(_at(_hf(reloaded, inputs)["logits"], inputs["mask_positions"]), expected, "reloaded mlm")


def _check_electra(pretrainer, discriminator, generator, inputs):
    # No real target (mask_weights 0): nothing is replaced, so the
    # discriminator reads the input as transformers' does.
    weights = np.zeros(inputs["mask_positions"].shape, "float32")
    actual = _run(pretrainer, {**inputs, "mask_weights": weights})
    _close(actual["discriminator_logits"], _hf(discriminator, inputs)["logits"], "discriminator")
    expected = _at(_hf(generator, inputs)["logits"], inputs["mask_positions"])
    _close(actual["generator_logits"], expected, "generator")


def test_electra_pretrainer_matches_transformers_both_ways(electra, tmp_path):
    discriminator, disc_dir, generator, gen_dir = electra
    pretrainer = kerasbert.ElectraPretrainer.from_preset(disc_dir, generator=gen_dir)
    inputs = _inputs(pretrainer.discriminator)
    _check_electra(pretrainer, discriminator, generator, inputs)

    out, gen_out = str(tmp_path / "discriminator"), str(tmp_path / "generator")
    to_huggingface(pretrainer, out, generator_directory=gen_out)
    reloaded_disc, info = transformers.AutoModelForPreTraining.from_pretrained(out, output_loading_info=True)
    reloaded_gen, gen_info = transformers.AutoModelForMaskedLM.from_pretrained(gen_out, output_loading_info=True)
    for loading in (info, gen_info):
        assert not any(loading[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), loading
    assert isinstance(reloaded_disc, transformers.ElectraForPreTraining)
    assert isinstance(reloaded_gen, transformers.ElectraForMaskedLM)
    _check_electra(pretrainer, reloaded_disc, reloaded_gen, inputs)


def test_electra_generator_as_masked_lm(electra):
    """A generator checkpoint read as a `MaskedLM`: the same tensors as the
    pretrainer's generator head, whose logits are checked above."""
    _, _, generator, gen_dir = electra
    head = kerasbert.MaskedLM.from_preset(gen_dir).mlm_head
    reference = generator.generator_predictions
    expected = [
        (head.dense.kernel, reference.dense.weight.T),
        (head.dense.bias, reference.dense.bias),
        (head.layer_norm.gamma, reference.LayerNorm.weight),
        (head.layer_norm.beta, reference.LayerNorm.bias),
        (head.bias, generator.generator_lm_head.bias),
    ]
    for variable, tensor in expected:
        np.testing.assert_array_equal(variable.numpy(), tensor.detach().numpy(), err_msg=variable.path)


def test_checkpoint_without_heads_keeps_fresh_heads(tmp_path):
    model = randomize_torch_model(transformers.BertModel(transformers.BertConfig(**BERT)))
    model.save_pretrained(tmp_path)
    task = kerasbert.BertPretrainer.from_preset(str(tmp_path))
    assert assign_head_weights(task, str(tmp_path)) == []
    np.testing.assert_array_equal(task.mlm_head.bias.numpy(), 0.0)  # the fresh initialisation


def test_head_of_another_sentence_task_is_not_loaded(bert, tmp_path):
    _, directory = bert
    task = kerasbert.BertPretrainer.from_preset(directory, sentence_task="sop")
    assert assign_head_weights(task, directory) == ["mlm"]
    with pytest.raises(ValueError, match="'nsp'"):
        to_huggingface(task, str(tmp_path))
    assert not (tmp_path / "config.json").exists()


def test_legacy_names_and_misshapen_heads(bert, tmp_path):
    """TF-era `LayerNorm.gamma` names and an output bias stored only as
    `cls.predictions.decoder.bias` load; a head of the wrong shape is named."""
    _, directory = bert
    tensors = safetensors.numpy.load_file(os.path.join(directory, "model.safetensors"))
    tensors["cls.predictions.decoder.bias"] = tensors.pop("cls.predictions.bias")
    for part, legacy in (("weight", "gamma"), ("bias", "beta")):
        tensors[f"cls.predictions.transform.LayerNorm.{legacy}"] = tensors.pop(
            f"cls.predictions.transform.LayerNorm.{part}"
        )
    safetensors.numpy.save_file(tensors, str(tmp_path / "model.safetensors"))
    transformers.BertConfig(**BERT).save_pretrained(tmp_path)
    task = kerasbert.BertPretrainer.from_preset(str(tmp_path))
    modern = kerasbert.BertPretrainer.from_preset(directory)  # its logits are checked above
    for legacy, expected in zip(task.mlm_head.weights, modern.mlm_head.weights):
        np.testing.assert_array_equal(legacy.numpy(), expected.numpy(), err_msg=legacy.path)

    tensors["cls.seq_relationship.weight"] = np.zeros((3, BERT["hidden_size"]), np.float32)
    safetensors.numpy.save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"cls\.seq_relationship\.weight"):
        assign_head_weights(task, str(tmp_path))


def test_fixed_gelu_of_transformers_heads_is_flagged(tmp_path):
    """RoBERTa's and ELECTRA's masked-LM heads in transformers apply exact
    GELU whatever `hidden_act`; ours apply the encoder's activation."""
    config = transformers.RobertaConfig(**dict(ROBERTA, hidden_act="relu"))
    randomize_torch_model(transformers.RobertaForMaskedLM(config)).save_pretrained(tmp_path / "relu")
    with pytest.warns(UserWarning, match="whatever the config's hidden_act"):
        task = kerasbert.MaskedLM.from_preset(str(tmp_path / "relu"))
    with pytest.warns(UserWarning, match="'relu'"):
        to_huggingface(task, str(tmp_path / "written"))
