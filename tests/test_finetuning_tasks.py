"""The fine-tuning tasks on every backend: fit and predict on raw text,
under jit and mixed precision, round trips through `save_to_preset` and
`.keras`, and their errors. Tiny encoders over the MiniLM vocabulary keep
them fast; the samples in tests/data are in the real formats.

Every pass trains each task kind (the CRF tagger for the taggers), predicts,
round-trips a classifier and trains under mixed precision; what a task
does with outputs computed alike on every backend (class names, readers'
files, decoding options, other tasks' round trips) is checked once, in the
torch pass."""

import math
import os

import keras
import numpy as np
import pytest
from helpers import TINY, tensorflow_pass_only, torch_pass_only

import kerasbert
from kerasbert.preprocessing import (
    QuestionAnsweringPreprocessor,
    TextPreprocessor,
    TokenClassificationPreprocessor,
)
from kerasbert.readers import read_conll, read_glue_tsv, read_squad

SAMPLES = os.path.join(os.path.dirname(__file__), "data")


def small_encoder(dtype=None, **overrides):
    config = {**TINY, "vocabulary_size": 30522, "hidden_dim": 16, "num_layers": 2, "num_segments": 2,
              "max_sequence_length": 128, "initializer_range": 0.3, **overrides}
    return kerasbert.Encoder(**config, dtype=dtype)


def same_outputs(a, b, atol=1e-5):
    for x, y in zip(keras.tree.flatten(a), keras.tree.flatten(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol)


@pytest.fixture(scope="module")
def sst2():
    return read_glue_tsv(os.path.join(SAMPLES, "glue_sst2.tsv"), "sentence", "label")


@pytest.fixture(scope="module")
def mrpc():
    return read_glue_tsv(os.path.join(SAMPLES, "glue_mrpc.tsv"), ["#1 String", "#2 String"], "Quality")


@pytest.fixture(scope="module")
def conll():
    return read_conll(os.path.join(SAMPLES, "conll2003_sample.txt"))


# --- TextClassifier ---------------------------------------------------------

def text_classifier(tokenizer, num_classes=2, dtype=None, **kwargs):
    preprocessor = TextPreprocessor(tokenizer, sequence_length=64, pad_to_sequence_length=False)
    return kerasbert.TextClassifier(small_encoder(dtype), num_classes=num_classes, preprocessor=preprocessor,
                                    **kwargs)


@pytest.fixture(scope="module")
def classifier(minilm_tokenizer, sst2):
    """A classifier trained on the SST-2 sample (mean pooling: a tiny random
    encoder's [CLS] carries too little of the sentence to learn fast)."""
    keras.utils.set_random_seed(0)  # module fixtures run before the per-test seed
    model = text_classifier(minilm_tokenizer, dropout=0.2, pooling="mean")
    model.compile(learning_rate=5e-3, head_learning_rate_multiplier=10.0, warmup_fraction=0.0)
    # 20 epochs: every seed from 0 to 9 reaches 100% on the sample (10 left some at 67-75%).
    history = model.fit(sst2.x, sst2.y, batch_size=4, epochs=20, verbose=0)
    return model, history.history


def test_classifier_learns_raw_sentences_and_predicts_in_order(classifier, sst2):
    model, history = classifier
    assert history["loss"][-1] < history["loss"][0]
    logits = model.predict(sst2.x, batch_size=5)
    assert logits.shape == (len(sst2), 2) and logits.dtype == np.float32
    # Predicted sorted by length, returned in input order.
    one_by_one = np.concatenate([model.predict(sst2.x[i:i + 1], verbose=0) for i in (0, 1)])
    np.testing.assert_allclose(logits[:2], one_by_one, atol=1e-5)
    assert model.evaluate(sst2.x, sst2.y, verbose=0, return_dict=True)["accuracy"] >= 0.9


def test_predict_packs_a_few_examples_without_tf_data(classifier, sst2, monkeypatch):
    model, _ = classifier
    expected = model.predict(sst2.x, batch_size=2)  # more examples than a batch: a tf.data pipeline
    monkeypatch.setattr(type(model), "_batches_of", lambda *a, **k: pytest.fail("built a tf.data pipeline"))
    np.testing.assert_allclose(model.predict(sst2.x[:3]), expected[:3], atol=1e-5)
    np.testing.assert_allclose(model.predict(np.array(sst2.x[3:4])), expected[3:4], atol=1e-5)
    with pytest.raises(ValueError, match="no examples"):
        model.predict([])
    with pytest.raises(ValueError, match="batch_size must be a positive integer; got 0"):
        model.predict(sst2.x[:3], batch_size=0)


@tensorflow_pass_only
def test_predict_traces_the_tensorflow_graph_once_for_every_padded_length(minilm_tokenizer, sst2):
    model = text_classifier(minilm_tokenizer)
    model.predict(sst2.x, batch_size=3)  # batches of several lengths, and a last smaller one
    assert model.predict_function.experimental_get_tracing_count() == 1


@torch_pass_only
def test_classifier_pairs_and_regression(minilm_tokenizer, mrpc):
    model = text_classifier(minilm_tokenizer, num_classes=1)
    history = model.fit(mrpc.x, mrpc.y.astype("float32"), batch_size=5, epochs=2, verbose=0)
    assert set(history.history) == {"loss", "mean_absolute_error"}
    scores = model.predict(mrpc.x)
    assert scores.shape == (len(mrpc), 1)
    # A dataset of raw pairs, unbatched, works the same way.
    dataset = mrpc.dataset()
    np.testing.assert_allclose(model.predict(dataset), scores, atol=1e-5)


def test_classifier_round_trips(classifier, sst2, tmp_path):
    model, _ = classifier
    expected = model.predict(sst2.x[:3])
    model.save_to_preset(tmp_path / "preset")
    restored = kerasbert.TextClassifier.from_preset(str(tmp_path / "preset"))
    assert restored.get_config()["dropout"] == 0.2 and restored.num_classes == 2
    same_outputs(restored.predict(sst2.x[:3]), expected)
    assert kerasbert.from_preset(str(tmp_path / "preset")).count_params() == model.encoder.count_params()
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    same_outputs(reloaded.predict(sst2.x[:3]), expected)


def test_classifier_under_mixed_precision_and_jit(minilm_tokenizer, sst2):
    model = text_classifier(minilm_tokenizer, dtype="mixed_bfloat16", hidden_dim=8, activation="gelu")
    model.compile(jit_compile=keras.backend.backend() != "torch")  # XLA; torch.compile is not used
    model.fit(sst2.x, sst2.y, batch_size=6, verbose=0)
    logits = model.predict(sst2.x[:2])
    assert logits.dtype == np.float32 and np.all(np.isfinite(logits))


def test_a_preprocessor_longer_than_the_position_table_is_refused(minilm_tokenizer):
    # Found training a QuestionAnswerer: positions past the table gave a NaN loss, no error.
    encoder = small_encoder(max_sequence_length=32)
    long = TextPreprocessor(minilm_tokenizer, sequence_length=64)
    with pytest.raises(ValueError, match=r"sequence_length=64 .* \(max_sequence_length=32\)"):
        kerasbert.TextClassifier(encoder, num_classes=2, preprocessor=long)
    with pytest.raises(ValueError, match="sequence_length=64"):
        kerasbert.QuestionAnswerer(encoder, preprocessor=QuestionAnsweringPreprocessor(
            minilm_tokenizer, sequence_length=64, doc_stride=16, max_question_length=16))
    fits = TextPreprocessor(minilm_tokenizer, sequence_length=32)
    assert kerasbert.TextClassifier(encoder, num_classes=2, preprocessor=fits).preprocessor is fits


@torch_pass_only
def test_classifier_takes_class_names_and_reader_data(minilm_tokenizer, sst2, tmp_path):
    """Class names it knows are targets; `read_glue_tsv`'s data is mapped by
    name, whatever the file's own order of names."""
    model = text_classifier(minilm_tokenizer, num_classes=None, labels=["negative", "positive"])
    ids = np.asarray(sst2.y)
    named = [["negative", "positive"][i] for i in ids]
    expected = model.evaluate(sst2.x, ids, verbose=0, return_dict=True)
    assert model.evaluate(sst2.x, named, verbose=0, return_dict=True) == pytest.approx(expected)
    path = tmp_path / "named.tsv"
    path.write_text("sentence\tlabel\n" + "".join(f"{x}\t{n}\n" for x, n in zip(sst2.x, named)))
    data = read_glue_tsv(path, "sentence", "label", label_names=["positive", "negative"])  # its own order
    assert model.evaluate(data, verbose=0, return_dict=True) == pytest.approx(expected)
    model.fit(sst2.x[:4], named[:4], verbose=0, validation_data=data)
    with pytest.raises(ValueError, match=r"y\[1\]='neutral' is not one of the task's labels"):
        model.fit(sst2.x[:2], ["negative", "neutral"], verbose=0)
    path.write_text("sentence\tlabel\nfine\tneutral\n")
    with pytest.raises(ValueError, match=r"named.tsv, line 2: label 'neutral' is not one of the given label_names"):
        model.evaluate(read_glue_tsv(path, "sentence", "label"), verbose=0)


def test_classifier_errors(minilm_tokenizer, sst2):
    with pytest.raises(ValueError, match="num_classes"):
        kerasbert.TextClassifier(small_encoder(), num_classes=0)
    with pytest.raises(TypeError, match="encoder"):
        kerasbert.TextClassifier("bert", num_classes=2)
    model = text_classifier(minilm_tokenizer)
    with pytest.raises(ValueError, match="y has 2 entries"):
        model.fit(sst2.x, sst2.y[:2], verbose=0)
    with pytest.raises(ValueError, match="warmup_fraction"):
        model.compile(warmup_fraction=2)


# --- TokenClassifier --------------------------------------------------------

def token_classifier(tokenizer, labels, crf=False, dtype=None):
    preprocessor = TokenClassificationPreprocessor(tokenizer, sequence_length=64, pad_to_sequence_length=False)
    return kerasbert.TokenClassifier(small_encoder(dtype), labels=labels, crf=crf, preprocessor=preprocessor)


# Trained to learn the sample in the torch pass (eager, the shortest); a
# few epochs elsewhere, for the checks that need a trained tagger, not a
# good one: the steps themselves are checked on every backend.
LEARNING_EPOCHS = 20 if keras.backend.backend() == "torch" else 4


# The softmax tagger is the classifier's head at every token: in the torch pass.
@pytest.fixture(scope="module", params=[pytest.param(False, marks=torch_pass_only), True], ids=["softmax", "crf"])
def ner(request, minilm_tokenizer, conll):
    """A token classifier (softmax or CRF) trained on the CoNLL sample."""
    keras.utils.set_random_seed(0)
    model = token_classifier(minilm_tokenizer, conll.label_names, crf=request.param)
    model.compile(learning_rate=1e-2, head_learning_rate_multiplier=2.0, warmup_fraction=0.0)
    # 12 of the 13 sentences: whole batches, so few distinct shapes to compile.
    history = model.fit(conll.words[:12], conll.tag_ids()[:12], batch_size=4, epochs=LEARNING_EPOCHS, verbose=0)
    return model, history.history


@torch_pass_only
def test_token_classifier_learns_conll_entities(ner, conll):
    model, history = ner
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    scores = model.evaluate_entities(conll.words, conll.tags)
    assert scores["f1"] > 0.5, scores
    tags = model.predict_tags(conll.words[:3])
    assert [len(t) for t in tags] == [len(w) for w in conll.words[:3]]
    if model.crf is not None:  # the CRF only decodes valid IOB2 sequences
        for row in model.predict_tags(conll.words):
            names = [conll.label_names[t] for t in row]
            for previous, tag in zip(["O"] + names, names):
                assert not tag.startswith("I-") or previous[2:] == tag[2:], names


def test_token_classifier_accuracy_is_that_of_the_predicted_tags(ner, conll):
    """The logged accuracy is over the tags `predict_tags` gives (with a
    CRF its Viterbi-decoded ones, not the argmax of the emissions)."""
    model, history = ner
    assert {"accuracy", "loss"} <= set(history) and not any("_accuracy" in k for k in history)
    logged = model.evaluate(conll.words, conll.tag_ids(), batch_size=4, verbose=0, return_dict=True)["accuracy"]
    predicted = model.predict_tags(conll.words)
    hits = [(p == t) for p, t in zip(predicted, conll.tag_ids())]
    assert logged == pytest.approx(np.concatenate(hits).mean(), abs=1e-6)
    if model.crf is not None:  # the argmax of the emissions is another thing
        logits = model.predict(conll.words, verbose=0)
        alignment = model.preprocessor.word_alignment(conll.words)
        argmax = [row.argmax(-1)[np.asarray(a["first_token"])] for row, a in zip(logits, alignment)]
        assert any((a != p).any() for a, p in zip(argmax, predicted))


@torch_pass_only
def test_a_file_read_for_a_trained_tagger_uses_its_labels(ner, conll, tmp_path):
    """A validation file with fewer tags than the training file: its own
    label list numbers them otherwise. Given as read, the task maps its tags
    by name; a tag the task does not know is an error naming file and line."""
    model, _ = ner
    lines = []
    for words, tags in zip(conll.words[:6], conll.tags[:6]):
        lines += [f"{w} {'O' if t.endswith('MISC') else t}" for w, t in zip(words, tags)] + [""]
    (tmp_path / "valid.txt").write_text("\n".join(lines))
    valid = read_conll(tmp_path / "valid.txt")
    assert valid.label_names != model.labels  # its ids would mean other tags
    expected = model.evaluate(valid.words, valid.tag_ids(model.labels), verbose=0, return_dict=True)
    assert model.evaluate(valid, verbose=0, return_dict=True) == pytest.approx(expected)
    names = [[t for t in row] for row in valid.tags]  # tag names as targets
    assert model.evaluate(valid.words, names, verbose=0, return_dict=True) == pytest.approx(expected)
    assert model.evaluate_entities(valid) == model.evaluate_entities(valid.words, valid.tags)
    lines[4] = lines[4].split()[0] + " B-LCO"
    (tmp_path / "typo.txt").write_text("\n".join(lines))
    typo = read_conll(tmp_path / "typo.txt")
    for call in (lambda: model.evaluate(typo, verbose=0), lambda: model.evaluate_entities(typo),
                 lambda: model.fit(typo, verbose=0)):
        with pytest.raises(ValueError, match=r"typo.txt, line 5: tag 'B-LCO' is not one of the given label_names"):
            call()
    with pytest.raises(ValueError, match=r"y\[0\]\[4\]='B-LCO' is not one of the task's labels"):
        model.evaluate(typo.words, typo.tags, verbose=0)


def test_token_classifier_predicts_a_few_sentences_as_a_dataset_does(ner, conll):
    model, _ = ner
    # 3 sentences: one batch packed directly; all 13 in batches of 2: tf.data.
    # (Per-token outputs at padding positions depend on the batch's width.)
    few = model.predict_tags(conll.words[:3])
    for a, b in zip(few, model.predict_tags(conll.words, batch_size=2)[:3]):
        np.testing.assert_array_equal(a, b)


@torch_pass_only  # a tagger that finds entities: trained in full in the torch pass
def test_token_classifier_entities_point_into_raw_text(ner, conll):
    model, _ = ner
    texts = ["  ".join(words) for words in conll.words[:4]]
    found = model.predict_entities(texts)
    assert any(found)
    for text, entities in zip(texts, found):
        for entity in entities:
            assert text[entity["start"]:entity["end"]] == entity["text"]
            assert entity["type"] in {"PER", "ORG", "LOC", "MISC"}


def test_entities_leave_out_the_punctuation_glued_to_words():
    from kerasbert.tasks.token_classifier import _trimmed

    text = "born in (London.) and «São Paulo», then ?!"
    assert text[slice(*_trimmed(text, 8, 17))] == "London"
    assert text[slice(*_trimmed(text, 22, 34))] == "São Paulo"
    assert text[slice(*_trimmed(text, 40, 42))] == "?!"  # punctuation alone stays
    assert _trimmed("U.S.", 0, 4) == (0, 3)  # as transformers' pre-tokenizer splits it
    assert _trimmed("in London . now", 3, 11) == (3, 9)  # "London ." of two words


@torch_pass_only
def test_token_classifier_round_trips(ner, conll, tmp_path):
    model, _ = ner
    expected = model.predict_tags(conll.words[:3])
    model.save_to_preset(tmp_path / "preset")
    restored = kerasbert.TokenClassifier.from_preset(str(tmp_path / "preset"))
    assert restored.labels == conll.label_names and (restored.crf is not None) == (model.crf is not None)
    same_outputs(restored.predict_tags(conll.words[:3]), expected)
    model.save(tmp_path / "model.keras")
    same_outputs(keras.models.load_model(tmp_path / "model.keras").predict_tags(conll.words[:3]), expected)


def test_token_classifier_errors():
    with pytest.raises(ValueError, match="num_classes"):
        kerasbert.TokenClassifier(small_encoder())
    with pytest.raises(ValueError, match="labels"):
        kerasbert.TokenClassifier(small_encoder(), num_classes=3, labels=["O", "B-X"])


# --- QuestionAnswerer -------------------------------------------------------

@pytest.fixture(scope="module")
def squad_v2():
    return read_squad(os.path.join(SAMPLES, "squad_v2_sample.json"))


def question_answerer(tokenizer, dtype=None):
    preprocessor = QuestionAnsweringPreprocessor(tokenizer, sequence_length=128, doc_stride=16, max_question_length=32)
    return kerasbert.QuestionAnswerer(small_encoder(dtype), preprocessor=preprocessor)


@pytest.fixture(scope="module")
def reader(minilm_tokenizer, squad_v2):
    keras.utils.set_random_seed(0)
    model = question_answerer(minilm_tokenizer)
    model.compile(learning_rate=5e-3, head_learning_rate_multiplier=10.0, warmup_fraction=0.0)
    history = model.fit(squad_v2, batch_size=16, epochs=12, verbose=0)
    return model, history.history


def test_question_answerer_learns_the_sample_and_scores_it(reader, squad_v2):
    model, history = reader
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    answers = model.predict_answers(squad_v2, null_score_threshold=0.0)
    for example, answer in zip(squad_v2, answers):
        if answer.text:
            assert example.context[answer.start:answer.end] == answer.text
    scores = model.evaluate_squad(squad_v2, null_score_threshold=0.0)
    assert {"exact_match", "f1", "HasAns_f1", "NoAns_f1"} <= set(scores)
    assert scores["f1"] > 30, scores


def test_question_answerer_logs_name_each_metric(reader):
    _, history = reader
    assert sorted(history) == ["end_logits_accuracy", "end_logits_loss", "loss", "start_logits_accuracy",
                               "start_logits_loss"]


@torch_pass_only
def test_question_answerer_decodes_with_its_own_settings(reader, squad_v2, tmp_path):
    """`null_score_threshold`, `max_answer_length` and `n_best_size` are
    the task's (kept by its presets); a call's arguments override them."""
    model, _ = reader
    strict = kerasbert.QuestionAnswerer(model.encoder, preprocessor=model.preprocessor, null_score_threshold=0.0,
                                        max_answer_length=3, n_best_size=5)
    strict.output_dense.set_weights(model.output_dense.get_weights())
    expected = model.predict_answers(squad_v2, null_score_threshold=0.0, max_answer_length=3, n_best_size=5)
    assert [a.text for a in strict.predict_answers(squad_v2)] == [a.text for a in expected]
    assert "" in [a.text for a in expected]
    always = model.predict_answers(squad_v2)
    assert [a.text for a in strict.predict_answers(squad_v2, null_score_threshold=math.inf)] == [
        a.text for a in model.predict_answers(squad_v2, max_answer_length=3, n_best_size=5)]
    assert "" not in [a.text for a in always]  # the default: always a span
    strict.save_to_preset(tmp_path / "strict")
    restored = kerasbert.QuestionAnswerer.from_preset(str(tmp_path / "strict"))
    assert (restored.null_score_threshold, restored.max_answer_length, restored.n_best_size) == (0.0, 3, 5)
    with pytest.raises(TypeError, match="null_score_threshold"):
        kerasbert.QuestionAnswerer(model.encoder, null_score_threshold="0")


@torch_pass_only
def test_question_answerer_round_trips(reader, squad_v2, tmp_path):
    model, _ = reader
    expected = [a.text for a in model.predict_answers(squad_v2[:3])]
    model.save_to_preset(tmp_path / "preset")
    restored = kerasbert.QuestionAnswerer.from_preset(str(tmp_path / "preset"))
    assert restored.preprocessor.sequence_length == 128
    assert [a.text for a in restored.predict_answers(squad_v2[:3])] == expected
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert [a.text for a in reloaded.predict_answers(squad_v2[:3])] == expected


@pytest.mark.parametrize("task", ["ner-crf", pytest.param("squad", marks=torch_pass_only)])
def test_tasks_train_under_mixed_precision(minilm_tokenizer, conll, squad_v2, task):
    if task == "squad":
        model = question_answerer(minilm_tokenizer, dtype="mixed_bfloat16")
        model.fit(squad_v2[:4], batch_size=4, verbose=0)
        assert all(isinstance(a.text, str) for a in model.predict_answers(squad_v2[:2]))
    else:
        model = token_classifier(minilm_tokenizer, conll.label_names, crf=True, dtype="mixed_bfloat16")
        model.fit(conll.words[:4], conll.tag_ids()[:4], batch_size=2, verbose=0)
        assert [len(t) for t in model.predict_tags(conll.words[:2])] == [len(w) for w in conll.words[:2]]
    assert model.encoder.compute_dtype == "bfloat16"


# --- TextEmbedder -----------------------------------------------------------

@torch_pass_only
def test_embedder_pools_and_round_trips(minilm_tokenizer, sst2, tmp_path):
    preprocessor = TextPreprocessor(minilm_tokenizer, sequence_length=64, pad_to_sequence_length=False)
    model = kerasbert.TextEmbedder(small_encoder(), pooling="cls", normalize=True, preprocessor=preprocessor)
    vectors = model.predict(sst2.x[:4])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    targets = np.eye(16, dtype="float32")[:4]
    history = model.fit(sst2.x[:4], targets, batch_size=2, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save_to_preset(tmp_path / "preset")
    same_outputs(kerasbert.TextEmbedder.from_preset(str(tmp_path / "preset")).predict(sst2.x[:4]),
                 model.predict(sst2.x[:4]))
    with pytest.raises(ValueError, match="pooling"):
        kerasbert.TextEmbedder(small_encoder(), pooling="max")
