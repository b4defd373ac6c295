"""KerasHub presets in and out: backbones of every family both have, built by
KerasHub with every tensor random and saved by its own `save_to_preset`,
load as encoders whose outputs are KerasHub's; encoders written with
`to_keras_hub` load in KerasHub with the same outputs; tokenizers agree with
KerasHub's where KerasHub's agree with transformers'; a text classifier's
head goes both ways; `kaggle://` handles go through kagglehub."""

import json
import os

import keras
import numpy as np
import pytest
from helpers import (
    AWKWARD,
    gpt2_directory,
    minilm_directory,
    reference_tokenizer,
    rotten_tomatoes,
    tensorflow_pass_only,
    torch_pass_only,
    train_sentencepiece_model,
)

import kerasbert
from kerasbert.convert import to_keras_hub
from kerasbert.presets import PresetNotAvailableError

keras_hub = pytest.importorskip("keras_hub")
models = keras_hub.models

BASE = dict(num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)

# Per family: the KerasHub backbone and its arguments beyond BASE.
FAMILIES = {
    "bert": (models.BertBackbone, dict(vocabulary_size=61, num_segments=3)),
    "albert": (models.AlbertBackbone, dict(vocabulary_size=61, embedding_dim=6, num_layers=4, num_groups=2,
                                           num_inner_repetitions=2)),
    "roberta": (models.RobertaBackbone, dict(vocabulary_size=61)),
    "xlm_roberta": (models.XLMRobertaBackbone, dict(vocabulary_size=61)),
    "electra": (models.ElectraBackbone, dict(vocab_size=61, embedding_dim=6)),
    "electra_unprojected": (models.ElectraBackbone, dict(vocab_size=61, embedding_dim=8)),
    "distil_bert": (models.DistilBertBackbone, dict(vocabulary_size=61)),
    "deberta_v3": (models.DebertaV3Backbone, dict(vocabulary_size=61, bucket_size=4)),
}


def randomized(model, seed=0):
    """Every variable random, LayerNorm scales near 1: a mapping mistake in
    any tensor changes the outputs."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        noise = rng.normal(size=tuple(variable.shape)).astype("float32")
        variable.assign(1.0 + 0.2 * noise if variable.path.endswith("gamma") else 0.2 * noise)
    return model


def keras_hub_backbone(family, seed=0):
    cls, arguments = FAMILIES[family]
    return randomized(cls(**{**BASE, **arguments}), seed)


def as_lists(ids):
    return ids.to_list() if hasattr(ids, "to_list") else [list(row) for row in ids]


def inputs_for(backbone, seed=0, pad_id=0):
    """Right-padded random inputs (rows of 9, 6 and 3 tokens) under KerasHub's names."""
    rng = np.random.default_rng(seed)
    vocabulary = getattr(backbone, "vocabulary_size", None) or backbone.vocab_size
    mask = (np.arange(9)[None] < np.array([9, 6, 3])[:, None]).astype("int32")
    token_ids = np.where(mask == 1, rng.integers(5, vocabulary, (3, 9)), pad_id).astype("int32")
    inputs = {"token_ids": token_ids, "padding_mask": mask}
    if "segment_ids" in backbone.input:
        inputs["segment_ids"] = (rng.integers(0, backbone.num_segments, (3, 9)) * mask).astype("int32")
    return inputs


def outputs(model, inputs):
    """A model's outputs on `inputs`; token types all 0 where it takes them
    and `inputs` has none (kerasbert's RoBERTa has one type, KerasHub's none)."""
    inputs = {"segment_ids": np.zeros_like(inputs["token_ids"]), **inputs}
    result = model({k: v for k, v in inputs.items() if k in model.input})
    if not isinstance(result, dict):
        result = {"sequence_output": result}
    return {k: keras.ops.convert_to_numpy(v) for k, v in result.items()}


def assert_same_outputs(actual, expected, mask, names=("sequence_output", "pooled_output")):
    """Equal at the real tokens (KerasHub's RoBERTa gives padding other
    position rows than transformers' and kerasbert's, and DeBERTa's padding
    attends differently) and pooled where both pool."""
    compared = [n for n in names if n in actual and n in expected]
    assert "sequence_output" in compared
    np.testing.assert_allclose(actual["sequence_output"][mask == 1], expected["sequence_output"][mask == 1],
                               atol=1e-5, rtol=0)
    if "pooled_output" in compared:
        np.testing.assert_allclose(actual["pooled_output"], expected["pooled_output"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", list(FAMILIES))  # on every backend: KerasHub's backbone is the backend's
def test_keras_hub_backbone_loads_and_writes_back(family, tmp_path):
    backbone = keras_hub_backbone(family)
    backbone.save_to_preset(str(tmp_path / "hub"))
    encoder = kerasbert.from_preset(str(tmp_path / "hub"))
    pad_id = 1 if "roberta" in family else 0
    inputs = inputs_for(backbone, pad_id=pad_id)
    # ELECTRA's KerasHub pooler has no counterpart in ELECTRA's checkpoints, nor in kerasbert's encoder.
    assert encoder.pooler == (family in ("bert", "albert"))
    assert_same_outputs(outputs(encoder, inputs), outputs(backbone, inputs), inputs["padding_mask"],
                        names=("sequence_output", "pooled_output") if encoder.pooler else ("sequence_output",))
    assert kerasbert.presets.preset_family(str(tmp_path / "hub")) == {
        "xlm_roberta": "xlm-roberta", "distil_bert": "distilbert", "deberta_v3": "deberta-v2",
        "electra_unprojected": "electra"}.get(family, family)

    # Out: other random weights, written with to_keras_hub, loaded by KerasHub.
    randomized(encoder, seed=1)
    to_keras_hub(encoder, str(tmp_path / "out"), model_type=kerasbert.presets.preset_family(str(tmp_path / "hub")))
    loaded = keras_hub.models.Backbone.from_preset(str(tmp_path / "out"))
    assert type(loaded) is type(backbone)
    assert_same_outputs(outputs(loaded, inputs), outputs(encoder, inputs), inputs["padding_mask"],
                        names=("sequence_output", "pooled_output") if encoder.pooler else ("sequence_output",))


@tensorflow_pass_only
def test_a_transformers_shaped_roberta_encoder_goes_to_keras_hub(tmp_path):
    """RoBERTa checkpoints carry one token type and a pooler: the type's row
    is folded into the positions (exact), the pooler left out (a warning)."""
    encoder = randomized(kerasbert.Encoder(vocabulary_size=61, num_segments=1, position_offset=2,
                                           layer_norm_epsilon=1e-5, **BASE))
    with pytest.warns(UserWarning, match="no pooler"):
        to_keras_hub(encoder, str(tmp_path / "out"), model_type="roberta")
    loaded = keras_hub.models.Backbone.from_preset(str(tmp_path / "out"))
    inputs = inputs_for(loaded, pad_id=1)
    expected = outputs(encoder, inputs)
    assert_same_outputs(outputs(loaded, inputs), expected, inputs["padding_mask"], names=("sequence_output",))


# -- Tokenizers ---------------------------------------------------------------


@pytest.fixture(scope="module")
def texts():
    return [text for text, _ in rotten_tomatoes()[:500]] + AWKWARD


@pytest.fixture(scope="module")
def albert_directory(tmp_path_factory):
    """An ALBERT-layout spiece.model trained here on real reviews."""
    directory = tmp_path_factory.mktemp("albert_spm")
    corpus = directory / "reviews.txt"
    corpus.write_text("\n".join(text for text, _ in rotten_tomatoes()), encoding="utf-8")
    train_sentencepiece_model(corpus, directory, sentences=4000, vocabulary_size=800)
    corpus.unlink()
    return str(directory)


# The special pieces of the SentencePiece layouts of XLM-RoBERTa (fairseq's
# ids beside them) and DeBERTa-v3, as their models hold them.
SENTENCEPIECE_LAYOUTS = {
    "xlm_roberta": ("sentencepiece.bpe", dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)),
    "deberta_v3": ("spm", dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
                               eos_piece="[SEP]", unk_piece="[UNK]")),
}


@pytest.fixture(scope="module")
def layout_directories(tmp_path_factory):
    """{layout: a directory holding its SentencePiece model, trained here on
    real reviews}."""
    corpus = tmp_path_factory.mktemp("layout_corpus") / "reviews.txt"
    corpus.write_text("\n".join(text for text, _ in rotten_tomatoes()), encoding="utf-8")
    directories = {}
    for layout, (name, pieces) in SENTENCEPIECE_LAYOUTS.items():
        directories[layout] = tmp_path_factory.mktemp(layout)
        train_sentencepiece_model(corpus, directories[layout], sentences=4000, name=name, pieces=pieces,
                                  vocabulary_size=800)
    return {layout: str(directory) for layout, directory in directories.items()}


def tokenizer_cases(albert_directory, layouts=None):
    import transformers

    minilm = minilm_directory()
    if layouts is not None:  # the SentencePiece layouts of XLM-RoBERTa and DeBERTa-v3
        return {
            "xlm_roberta": (models.XLMRobertaBackbone, models.XLMRobertaTokenizer(
                proto=os.path.join(layouts["xlm_roberta"], "sentencepiece.bpe.model")),
                reference_tokenizer(transformers.XLMRobertaTokenizerFast, layouts["xlm_roberta"]), None),
            "deberta_v3": (models.DebertaV3Backbone, models.DebertaV3Tokenizer(
                proto=os.path.join(layouts["deberta_v3"], "spm.model")),
                reference_tokenizer(transformers.DebertaV2TokenizerFast, layouts["deberta_v3"]), None),
        }
    return {
        "wordpiece": (models.BertBackbone, models.BertTokenizer(vocabulary=os.path.join(minilm, "vocab.txt"),
                                                                lowercase=True),
                      reference_tokenizer(transformers.BertTokenizerFast, minilm), 30522),
        "byte_pair": (models.RobertaBackbone,
                      models.RobertaTokenizer(vocabulary=os.path.join(gpt2_directory(), "vocab.json"),
                                              merges=os.path.join(gpt2_directory(), "merges.txt")),
                      reference_tokenizer(transformers.RobertaTokenizerFast, gpt2_directory()), None),
        "sentencepiece": (models.AlbertBackbone,
                          models.AlbertTokenizer(proto=os.path.join(albert_directory, "spiece.model")),
                          reference_tokenizer(transformers.AlbertTokenizerFast, albert_directory), None),
    }


@tensorflow_pass_only
@pytest.mark.parametrize("kind", ["wordpiece", "byte_pair", "sentencepiece", "xlm_roberta", "deberta_v3"])
def test_keras_hub_tokenizers_load_as_kerasbert_tokenizers(kind, texts, albert_directory, tmp_path, request):
    """kerasbert's tokenizer from a KerasHub preset gives KerasHub's ids
    wherever KerasHub's agree with transformers' (KerasHub keeps the accents
    uncased BERT strips, and does not lowercase or fold ALBERT's input as
    transformers' ALBERT does: kerasbert follows transformers there)."""
    layouts = request.getfixturevalue("layout_directories") if kind in SENTENCEPIECE_LAYOUTS else None
    cls, hub_tokenizer, hf, _ = tokenizer_cases(albert_directory, layouts)[kind]
    size = hub_tokenizer.vocabulary_size()
    extra = {models.AlbertBackbone: {"embedding_dim": 4}, models.DebertaV3Backbone: {"bucket_size": 4}}.get(cls, {})
    backbone = cls(vocabulary_size=size, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=4,
                   max_sequence_length=8, **extra)
    backbone.save_to_preset(str(tmp_path))
    hub_tokenizer.save_to_preset(str(tmp_path))
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    if kind == "sentencepiece":  # KerasHub's ALBERT tokenizer does not lowercase: on lowercase text it can agree
        texts = [text.lower() for text in texts]
    hub_ids = as_lists(hub_tokenizer(texts))
    hf_ids = hf(texts, add_special_tokens=False)["input_ids"]
    agreed = [i for i, (a, b) in enumerate(zip(hub_ids, hf_ids)) if a == b]
    assert len(agreed) >= 0.9 * len(texts)
    ours = tokenizer([texts[i] for i in agreed]).to_list()
    assert ours == [hub_ids[i] for i in agreed]
    assert tokenizer.special_tokens == {kind_: getattr(hf, f"{kind_}_token")
                                        for kind_ in ("cls", "sep", "pad", "mask", "unk")}


# -- Tasks ----------------------------------------------------------------------


def keras_hub_classifier(tmp_path):
    """A random KerasHub BertTextClassifier with MiniLM's vocabulary, saved."""
    tokenizer = models.BertTokenizer(vocabulary=os.path.join(minilm_directory(), "vocab.txt"), lowercase=True)
    backbone = models.BertBackbone(vocabulary_size=30522, **BASE)
    task = models.BertTextClassifier(backbone, num_classes=3,
                                     preprocessor=models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16))
    randomized(task)
    task.save_to_preset(str(tmp_path))
    return task


TEXTS = ["a fine film, well acted", "dull and far too long"]


def logits(task, features):
    return keras.ops.convert_to_numpy(task({k: v for k, v in features.items() if k in task.input}))


@tensorflow_pass_only
def test_a_keras_hub_text_classifier_round_trips_with_its_head(tmp_path, monkeypatch):
    """A KerasHub BertTextClassifier preset (here through a kaggle:// handle,
    kagglehub answering from a local directory) gives a TextClassifier with
    its head and tokenizer; written back with to_keras_hub, KerasHub loads
    the same logits and preprocessor."""
    import kagglehub

    hub = keras_hub_classifier(tmp_path / "hub")
    asked = []
    monkeypatch.setattr(kagglehub, "model_download", lambda handle, *a, **k: asked.append(handle) or str(
        tmp_path / "hub"))
    task = kerasbert.TextClassifier.from_preset("kaggle://someone/bert/keras/tiny_classifier/1")
    assert asked[0] == "someone/bert/keras/tiny_classifier/1" and task.num_classes == 3 and task.family == "bert"
    features = {k: keras.ops.convert_to_numpy(v) for k, v in hub.preprocessor(TEXTS).items()}
    np.testing.assert_allclose(logits(task, features), logits(hub, features), atol=1e-5, rtol=0)
    assert task.preprocessor.tokenizer(TEXTS).to_list() == as_lists(hub.preprocessor.tokenizer(TEXTS))

    to_keras_hub(task, str(tmp_path / "out"))
    loaded = keras_hub.models.TextClassifier.from_preset(str(tmp_path / "out"))
    assert type(loaded) is models.BertTextClassifier
    np.testing.assert_allclose(logits(loaded, features), logits(task, features), atol=1e-5, rtol=0)
    back = {k: keras.ops.convert_to_numpy(v) for k, v in loaded.preprocessor(TEXTS).items()}
    np.testing.assert_array_equal(back["token_ids"], features["token_ids"])


@tensorflow_pass_only
def test_a_keras_hub_roberta_masked_lm_brings_its_head_and_bert_s_is_left_out(tmp_path):
    backbone = keras_hub_backbone("roberta")
    hub = randomized(models.RobertaMaskedLM(backbone, preprocessor=None))
    hub.save_to_preset(str(tmp_path / "roberta"))
    task = kerasbert.MaskedLM.from_preset(str(tmp_path / "roberta"))  # a local KerasHub task directory
    inputs = inputs_for(backbone, pad_id=1)
    positions = np.array([[0, 4], [1, 5], [2, 0]], "int32")
    types = {"segment_ids": np.zeros_like(inputs["token_ids"])}  # kerasbert's RoBERTa has one token type
    expected = keras.ops.convert_to_numpy(hub({**inputs, "mask_positions": positions}))
    actual = task({**inputs, **types, "mask_positions": positions})
    actual = keras.ops.convert_to_numpy(actual["logits"] if isinstance(actual, dict) else actual)
    np.testing.assert_allclose(actual, expected, atol=1e-5, rtol=0)
    to_keras_hub(task, str(tmp_path / "out"))
    loaded = keras_hub.models.MaskedLM.from_preset(str(tmp_path / "out"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded({**inputs, "mask_positions": positions})),
                               expected, atol=1e-5, rtol=0)

    bert = models.BertMaskedLM(keras_hub_backbone("bert"), preprocessor=None)
    bert.save_to_preset(str(tmp_path / "bert"))
    with pytest.warns(UserWarning, match="head is left out.*'gelu'.*epsilon"):
        kerasbert.from_preset(str(tmp_path / "bert"))


# -- References and errors --------------------------------------------------------


@tensorflow_pass_only
def test_kaggle_handles_are_checked_and_a_failed_download_says_what_to_do(monkeypatch):
    import kagglehub

    with pytest.raises(ValueError, match="not a valid Kaggle model handle"):
        kerasbert.from_preset("kaggle://keras/bert")

    def offline(handle, *args, **kwargs):
        raise ConnectionError("Failed to resolve 'api.kaggle.com'")

    monkeypatch.setattr(kagglehub, "model_download", offline)
    with pytest.raises(PresetNotAvailableError, match=r"keras/bert/keras/bert_tiny_en_uncased.*ConnectionError.*"
                       r"pass its directory"):
        kerasbert.from_preset("kaggle://keras/bert/keras/bert_tiny_en_uncased")


@tensorflow_pass_only
def test_what_keras_hub_cannot_hold_is_refused(tmp_path):
    exact = kerasbert.Encoder(vocabulary_size=61, **BASE)  # BERT's exact GELU
    with pytest.raises(ValueError, match=r"activation='gelu'.*gelu_approximate.*approximate_gelu=True"):
        to_keras_hub(exact, str(tmp_path / "a"))
    to_keras_hub(exact, str(tmp_path / "a"), approximate_gelu=True)
    assert keras_hub.models.Backbone.from_preset(str(tmp_path / "a")).num_layers == 2
    modern = kerasbert.Encoder(vocabulary_size=61, num_segments=0, normalization="pre", feedforward="gated",
                               use_bias=False, position_encoding="rotary", pooler=False, **BASE)
    with pytest.raises(ValueError, match="'modernbert' has no KerasHub backbone"):
        to_keras_hub(modern, str(tmp_path / "b"))
    wide = kerasbert.Encoder(vocabulary_size=61, activation="gelu_approximate", layer_norm_epsilon=1e-6, **BASE)
    with pytest.raises(ValueError, match="layer_norm_epsilon=1e-06: KerasHub's is 1e-12"):
        to_keras_hub(wide, str(tmp_path / "c"))
    approximate = kerasbert.Encoder(vocabulary_size=61, activation="gelu_approximate", **BASE)
    approximate.quantize("int8")
    with pytest.raises(ValueError, match="quantized"):
        to_keras_hub(approximate, str(tmp_path / "d"))
    with pytest.raises(TypeError, match="writes a kerasbert.Encoder, TextClassifier or MaskedLM"):
        to_keras_hub(keras.Sequential(), str(tmp_path / "e"))


@tensorflow_pass_only
def test_keras_hub_files_that_kerasbert_does_not_read_are_refused(tmp_path):
    backbone = keras_hub_backbone("bert")
    backbone.save_to_preset(str(tmp_path))
    path = tmp_path / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "class_name": "GemmaBackbone"}))
    with pytest.raises(ValueError, match="GemmaBackbone.*kerasbert reads the KerasHub backbones"):
        kerasbert.from_preset(str(tmp_path))
    config["config"]["num_layers"] = {"class_name": "Evil", "config": {}}
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match="num_layers=.* is not a plain value"):
        kerasbert.from_preset(str(tmp_path))


@torch_pass_only
def test_convert_command_reads_and_writes_keras_hub_presets(tmp_path, capsys):
    from kerasbert.cli import main

    keras_hub_classifier(tmp_path / "hub")
    assert main(["convert", str(tmp_path / "hub"), str(tmp_path / "kb")]) == 0
    task = kerasbert.TextClassifier.from_preset(str(tmp_path / "kb"))
    assert task.num_classes == 3
    assert main(["convert", str(tmp_path / "kb"), str(tmp_path / "back"), "--to", "keras-hub"]) == 0
    assert "a KerasHub preset" in capsys.readouterr().out
    loaded = keras_hub.models.TextClassifier.from_preset(str(tmp_path / "back"))
    features = {k: keras.ops.convert_to_numpy(v) for k, v in loaded.preprocessor(TEXTS).items()}
    np.testing.assert_allclose(logits(loaded, features), logits(task, features), atol=1e-5, rtol=0)
