"""The preset registry and every way `from_preset` resolves a reference."""

import inspect
import json
import os

import numpy as np
import pytest
import torch
import transformers
from helpers import encoder_inputs, minilm_directory, run, tensorflow_pass_only, tiny_encoder

import kerasbert
from kerasbert import presets
from kerasbert.convert import MODEL_TYPES, huggingface_config

REQUIRED = [
    "albert_base_en_v2", "albert_large_en_v2", "all_minilm_l6_v2",
    "bert_base_en_cased", "bert_base_en_uncased", "bert_base_multi_cased",
    "bert_large_en_uncased", "bert_medium_en_uncased", "bert_mini_en_uncased",
    "bert_small_en_uncased", "bert_tiny_en_uncased",
    "electra_base_discriminator_en", "electra_base_generator_en",
    "electra_large_discriminator_en", "electra_small_discriminator_en",
    "electra_small_generator_en", "roberta_base_en", "roberta_large_en",
    "distil_bert_base_en_uncased", "distil_bert_base_multi_cased",
    "xlm_roberta_base_multi", "xlm_roberta_large_multi",
    "deberta_v3_xsmall_en", "deberta_v3_small_en", "deberta_v3_base_en", "deberta_v3_large_en", "deberta_v3_base_multi",
    "modern_bert_base_en", "modern_bert_large_en",
]


def test_every_required_preset_is_listed():
    assert set(REQUIRED) <= set(kerasbert.list_presets())
    assert kerasbert.list_presets() == sorted(kerasbert.list_presets())


@tensorflow_pass_only  # JSON files and transformers' counts
@pytest.mark.parametrize("name", REQUIRED)
def test_preset_files_are_complete_and_counted_by_transformers(name):
    spec = kerasbert.get_preset(name)
    assert spec["name"] == name
    assert spec["family"] in MODEL_TYPES
    assert spec["weights"]["huggingface"].count("/") == 1
    assert spec["tokenizer"]["type"] in ("wordpiece", "sentencepiece", "byte_pair")
    for key in ("parameter_count", "license", "official_name"):
        assert spec["metadata"][key]
    assert spec["description"]
    # The parameter count is transformers' own, for the Hugging Face model
    # this architecture maps to (meta device: nothing allocated).
    class View:
        pass

    view = View()
    defaults = inspect.signature(kerasbert.Encoder).parameters.items()
    view.__dict__.update({k: p.default for k, p in defaults if p.default is not p.empty}, **spec["encoder"])
    hf = huggingface_config(view, spec["family"])
    pooled = ("bert", "roberta", "xlm-roberta")
    kwargs = {"add_pooling_layer": spec["encoder"]["pooler"]} if hf["model_type"] in pooled else {}
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(transformers.AutoConfig.for_model(**hf), **kwargs)
    assert spec["metadata"]["parameter_count"] == sum(p.numel() for p in model.parameters())


@tensorflow_pass_only  # the same variables on every backend; TensorFlow builds them fastest
@pytest.mark.parametrize(
    "name", ["bert_tiny_en_uncased", "albert_base_en_v2", "electra_small_discriminator_en", "roberta_base_en",
             "distil_bert_base_en_uncased", "deberta_v3_xsmall_en"]
)
def test_architecture_without_weights(name):
    encoder = kerasbert.from_preset(name, load_weights=False)
    assert encoder.count_params() == kerasbert.get_preset(name)["metadata"]["parameter_count"]


def test_builtin_preset_from_python_package_is_cached(monkeypatch):
    home = presets.cache_root()
    encoder = kerasbert.from_preset("all_minilm_l6_v2")
    cached = os.path.join(home, "presets", "all_minilm_l6_v2")
    assert sorted(os.listdir(cached)) == sorted(
        ["encoder.safetensors", "preset.json", "vocab.txt", "tokenizer.json",
         "tokenizer_config.json", "special_tokens_map.json"]
    )
    spec = json.load(open(os.path.join(cached, "preset.json")))
    assert spec["metadata"]["license"] == "Apache-2.0"
    assert not [n for n in os.listdir(os.path.dirname(cached)) if n.startswith(".tmp")]

    # Converted once: the next load never looks at the source again.
    def no_source(*args):
        raise AssertionError("the source was read again")

    monkeypatch.setattr(presets, "_fetch_builtin_source", no_source)
    again = kerasbert.from_preset("all_minilm_l6_v2", dtype="bfloat16")
    assert again.token_embedding.embeddings.dtype == "bfloat16"
    inputs = encoder_inputs(encoder, lengths=(5, 3))
    np.testing.assert_allclose(
        run(again, inputs)["sequence_output"].astype("float32"),
        run(encoder, inputs)["sequence_output"],
        atol=0.1,
    )


def test_interrupted_conversion_leaves_no_cache(monkeypatch):
    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setenv("KERASBERT_HOME", os.path.join(presets.cache_root(), "crash"))
    monkeypatch.setattr(presets, "copy_tokenizer_files", crash)
    with pytest.raises(KeyboardInterrupt):
        kerasbert.from_preset("all_minilm_l6_v2")
    parent = os.path.join(presets.cache_root(), "presets")
    assert os.listdir(parent) == []  # neither the preset nor a temporary dir
    monkeypatch.undo()


def test_builtin_preset_offline_without_cache_explains_what_to_do():
    with pytest.raises(kerasbert.PresetNotAvailableError) as info:
        kerasbert.from_preset("bert_tiny_en_uncased")
    message = str(info.value)
    assert "bert_tiny_en_uncased" in message
    assert "google/bert_uncased_L-2_H-128_A-2" in message
    assert "from_preset('/path/to/" in message


def test_hf_reference_offline_without_cache():
    with pytest.raises(kerasbert.PresetNotAvailableError, match="org/missing-model"):
        kerasbert.from_preset("hf://org/missing-model")


def test_hf_reference_served_offline_from_the_hub_cache(monkeypatch, tmp_path):
    """HF_HUB_OFFLINE=1 (set for the whole suite) with the checkpoint in
    huggingface_hub's cache, laid out as the hub client writes it."""
    import shutil

    import huggingface_hub

    repo = tmp_path / "models--sentence-transformers--all-MiniLM-L6-v2"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json"):
        shutil.copy(os.path.join(minilm_directory(), name), snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    encoder = kerasbert.from_preset("hf://sentence-transformers/all-MiniLM-L6-v2")
    reference = kerasbert.from_preset(minilm_directory())
    inputs = encoder_inputs(encoder, lengths=(6, 2))
    np.testing.assert_allclose(run(encoder, inputs)["sequence_output"], run(reference, inputs)["sequence_output"])
    assert kerasbert.from_preset(f"hf://sentence-transformers/all-MiniLM-L6-v2@{revision}").hidden_dim == 384


@pytest.mark.parametrize("reference", ["hf://no-slash", "hf://a/b/c", "hf:///x"])
def test_malformed_hf_reference(reference):
    with pytest.raises(ValueError, match="hf://org/name"):
        kerasbert.from_preset(reference)


def test_unknown_preset_suggests_close_names():
    with pytest.raises(ValueError) as info:
        kerasbert.from_preset("bert_base_uncased")
    assert "bert_base_en_uncased" in str(info.value)
    assert "Did you mean" in str(info.value)


def test_bad_references(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such directory"):
        kerasbert.from_preset(str(tmp_path / "nowhere"))
    with pytest.raises(TypeError, match="preset must be"):
        kerasbert.from_preset(42)
    with pytest.raises(ValueError, match="neither a kerasbert preset"):
        kerasbert.from_preset(str(tmp_path))
    with pytest.raises(TypeError, match="load_weights"):
        kerasbert.from_preset("bert_tiny_en_uncased", load_weights="no")


def test_corrupt_preset_files_get_clear_errors(tmp_path):
    encoder = tiny_encoder()
    directory = tmp_path / "p"
    encoder.save_to_preset(directory)
    weights = directory / "encoder.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # truncated
    with pytest.raises(ValueError, match="records .*the file is truncated"):
        kerasbert.from_preset(directory)
    (directory / "preset.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        kerasbert.from_preset(directory)
    (directory / "preset.json").write_text(json.dumps({"encoder": {"num_layerz": 2}}))
    with pytest.raises(ValueError, match="num_layerz"):
        kerasbert.from_preset(directory)


def test_preset_weights_must_match_architecture(tmp_path):
    tiny_encoder().save_to_preset(tmp_path / "a")
    tiny_encoder(num_layers=2).save_to_preset(tmp_path / "b")
    os.replace(tmp_path / "b" / "encoder.safetensors", tmp_path / "a" / "encoder.safetensors")
    with pytest.raises(ValueError, match="is .* bytes, but .*preset.json records"):
        kerasbert.from_preset(tmp_path / "a")
    spec = json.loads((tmp_path / "a" / "preset.json").read_text())
    del spec["files"], spec["digest"]  # as in a preset written before files had records
    (tmp_path / "a" / "preset.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="does not match the preset's architecture"):
        kerasbert.from_preset(tmp_path / "a")


def test_overwriting_a_preset_is_atomic(tmp_path, monkeypatch):
    directory = tmp_path / "p"
    first = tiny_encoder()
    first.save_to_preset(directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}

    import safetensors.numpy

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    with pytest.raises(OSError):
        tiny_encoder(num_layers=2).save_to_preset(directory)
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    kerasbert.from_preset(directory)  # still loads


@pytest.mark.parametrize("preset_dir, error, message", [
    (None, TypeError, "preset_dir must be a path .*got NoneType"),
    (42, TypeError, "preset_dir must be a path .*got int"),
    ("", ValueError, "preset_dir='' is not a usable path"),
    ("   ", ValueError, "preset_dir='   ' is not a usable path"),
    ("run\x00s", ValueError, r"preset_dir='run\\x00s' is not a usable path"),
])
def test_save_to_preset_refuses_unusable_directories(preset_dir, error, message):
    with pytest.raises(error, match=message):
        tiny_encoder().save_to_preset(preset_dir)


def test_a_huge_unknown_preset_name_is_abbreviated_in_the_error():
    with pytest.raises(ValueError, match=r"preset='aaaa.*\.\.\. \(str, 1,000,000 long\) is not a built-in") as info:
        kerasbert.from_preset("a" * 1_000_000)
    assert len(str(info.value)) < 2000
