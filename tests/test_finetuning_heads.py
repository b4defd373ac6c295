"""Fine-tuning heads from and to transformers, every family.

Each reference is a randomly initialised transformers
`...ForSequenceClassification`, `...ForTokenClassification` or
`...ForQuestionAnswering` of a tiny configuration, every tensor randomised,
saved and loaded with the task's `from_preset`: the task's logits must be
transformers'. Written back with `to_huggingface`, transformers loads the
checkpoint and gives the same logits again. The conversion is numpy and
the same on every backend, and the encoder's parity is checked on each
backend elsewhere: the whole matrix runs in the tensorflow pass, one case
on the others.
"""

import warnings

import numpy as np
import pytest
import transformers
import keras
from helpers import (block_output_rows, compared_positions, encoder_inputs, hf_call, randomize_torch_model,
                     tiny_encoder)

import kerasbert
from kerasbert.convert import to_huggingface

COMMON = dict(
    vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
    max_position_embeddings=40, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
)
CONFIGS = {
    "bert": (transformers.BertConfig, dict(COMMON, type_vocab_size=2, hidden_act="gelu_new")),
    "albert": (transformers.AlbertConfig, dict(COMMON, embedding_size=24, num_hidden_groups=1,
                                                classifier_dropout_prob=0.0)),
    "roberta": (transformers.RobertaConfig, dict(COMMON, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
                                                  max_position_embeddings=42)),
    "xlm-roberta": (transformers.XLMRobertaConfig, dict(COMMON, type_vocab_size=1, layer_norm_eps=1e-5,
                                                          pad_token_id=1, max_position_embeddings=42)),
    "electra": (transformers.ElectraConfig, dict(COMMON, embedding_size=24)),
    "deberta-v2": (transformers.DebertaV2Config, dict(
        COMMON, type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True, position_buckets=8,
        max_relative_positions=16, pos_att_type=["p2c", "c2p"], position_biased_input=False, share_att_key=True,
        norm_rel_ebd="layer_norm", pooler_dropout=0.0)),
    "distilbert": (transformers.DistilBertConfig, dict(
        vocab_size=101, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=40, dropout=0.0,
        attention_dropout=0.0, seq_classif_dropout=0.0, qa_dropout=0.0)),
    # Two layers, the second local (a window of 4): the first-token
    # classifier's last layer runs at that token through a local layer.
    "modernbert": (transformers.ModernBertConfig, dict(
        vocab_size=101, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        max_position_embeddings=40, local_attention=4, global_attn_every_n_layers=2, pad_token_id=0,
        bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3, classifier_activation="silu")),
}
PREFIX = {"bert": "Bert", "albert": "Albert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta", "electra": "Electra",
          "distilbert": "DistilBert", "deberta-v2": "DebertaV2", "modernbert": "ModernBert"}
TASKS = {
    "SequenceClassification": kerasbert.TextClassifier,
    "TokenClassification": kerasbert.TokenClassifier,
    "QuestionAnswering": kerasbert.QuestionAnswerer,
}
LABELS = ["O", "B-PER", "I-PER"]


def logits_of(output):
    if hasattr(output, "start_logits"):
        return np.stack([output.start_logits.numpy(), output.end_logits.numpy()], -1)
    return output.logits.numpy()


def task_logits(task, inputs):
    out = task.predict(inputs, verbose=0)
    if isinstance(out, dict):
        return np.stack([out["start_logits"], out["end_logits"]], -1)
    return out


def build_reference(family, architecture, directory, seed, **options):
    config_class, config = CONFIGS[family]
    config = dict(config, **options)
    if architecture != "QuestionAnswering":  # whose head has 2 outputs: start, end
        config = dict(config, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                      label2id={label: i for i, label in enumerate(LABELS)})
    config = config_class(**config)
    model_class = getattr(transformers, f"{PREFIX[family]}For{architecture}")
    model = randomize_torch_model(model_class(config), seed)
    model.save_pretrained(directory)
    return model


MATRIX = [(f, a) for f in sorted(CONFIGS) for a in sorted(TASKS)]
if keras.backend.backend() != "tensorflow":
    MATRIX = [("roberta", "SequenceClassification")]


@pytest.mark.parametrize("family, architecture", MATRIX)
def test_heads_match_transformers_both_ways(family, architecture, tmp_path):
    reference = build_reference(family, architecture, tmp_path / "hf", seed=len(family) + len(architecture))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no tokenizer files in these checkpoints
        task = TASKS[architecture].from_preset(str(tmp_path / "hf"))
    inputs = encoder_inputs(task.encoder, lengths=(9, 5), pad_id=1 if "roberta" in family else 0)
    expected = logits_of(hf_call(reference, inputs))
    np.testing.assert_allclose(at_compared(task_logits(task, inputs), task.encoder, inputs),
                               at_compared(expected, task.encoder, inputs), atol=1e-4)
    if architecture in ("TokenClassification", "SequenceClassification"):
        assert task.labels == LABELS  # id2label's names
        assert task.num_classes == len(LABELS)

    to_huggingface(task, str(tmp_path / "back"))
    written = transformers.AutoConfig.from_pretrained(str(tmp_path / "back"))
    assert written.architectures == [f"{PREFIX[family]}For{architecture}"]
    reloaded = getattr(transformers, f"AutoModelFor{architecture}").from_pretrained(str(tmp_path / "back"))
    np.testing.assert_allclose(logits_of(hf_call(reloaded, inputs)), expected, atol=1e-4)


def at_compared(logits, encoder, inputs):
    """Per-token logits at the positions whose outputs transformers' encoder
    also gives kerasbert's (`helpers.compared_positions`): DeBERTa's and far
    padding in local layers differ; sentence logits whole."""
    if logits.ndim < 3:
        return logits
    return logits[compared_positions(encoder, inputs["padding_mask"])]


def test_a_modernbert_classifier_pools_as_its_config_says(tmp_path):
    """`classifier_pooling="mean"` read and written back; the head is
    normalized and on the mean of the real tokens."""
    reference = build_reference("modernbert", "SequenceClassification", tmp_path / "hf", seed=3,
                                classifier_pooling="mean")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = kerasbert.TextClassifier.from_preset(str(tmp_path / "hf"))
    assert task.get_config()["pooling"] == "mean" and task.get_config()["activation"] == "silu"
    inputs = encoder_inputs(task.encoder, lengths=(9, 5))
    expected = logits_of(hf_call(reference, inputs))
    np.testing.assert_allclose(task.predict(inputs, verbose=0), expected, atol=1e-4)
    to_huggingface(task, str(tmp_path / "back"))
    assert transformers.AutoConfig.from_pretrained(str(tmp_path / "back")).classifier_pooling == "mean"


def test_a_different_label_count_starts_a_fresh_head(tmp_path):
    build_reference("bert", "SequenceClassification", tmp_path / "hf", seed=0)
    with pytest.warns(UserWarning, match="fresh head"):
        task = kerasbert.TextClassifier.from_preset(str(tmp_path / "hf"), num_classes=5)
    assert task.num_classes == 5


def test_heads_transformers_lacks_are_refused_or_flagged(tmp_path):
    encoder = kerasbert.Encoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match="dense layer"):
        to_huggingface(kerasbert.TextClassifier(encoder, num_classes=2, hidden_dim=8), str(tmp_path / "a"))
    with pytest.raises(ValueError, match="pools by 'mean'"):
        to_huggingface(kerasbert.TextClassifier(encoder, num_classes=2, pooling="mean"), str(tmp_path / "c"))
    with pytest.warns(UserWarning, match="no CRF"):
        to_huggingface(kerasbert.TokenClassifier(encoder, labels=LABELS, crf=True), str(tmp_path / "b"))
    with pytest.raises(ValueError, match="dense layer"):
        to_huggingface(kerasbert.QuestionAnswerer(encoder, head_norm=True), str(tmp_path / "d"))
    modern = kerasbert.Encoder(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                               num_segments=0, pooler=False, normalization="pre", feedforward="gated",
                               use_bias=False, position_encoding="rotary", position_offset=0)
    with pytest.raises(ValueError, match="head_norm=False"):
        to_huggingface(kerasbert.TokenClassifier(modern, num_classes=2), str(tmp_path / "e"), model_type="modernbert")


@pytest.mark.parametrize("pooling, hidden_dim, last_rows", [("cls", None, 2), ("cls", 8, 2), ("mean", None, 9)])
def test_a_first_token_classifier_runs_its_last_layer_at_that_token_only(pooling, hidden_dim, last_rows, monkeypatch):
    # The parity above checks the numbers; this checks that the saving is
    # taken: the last block computes the first token (and the pooler's copy
    # of it), not all 9 rows, unless mean pooling reads every row.
    encoder = tiny_encoder()
    model = kerasbert.TextClassifier(encoder, num_classes=3, pooling=pooling, hidden_dim=hidden_dim)
    inputs = encoder_inputs(encoder, lengths=(9, 6, 1))
    rows = block_output_rows(model, inputs, monkeypatch, training=False)
    assert rows == [9] * (encoder.num_layers - 1) + [last_rows]
