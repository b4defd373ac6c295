"""Bad input at every public entry point of the tasks and the `kerasbert`
command: a correct result, or a ValueError/TypeError whose message names
the argument; never a framework error (TensorFlow's gathers raise on CPU),
a silent clamp or NaN (JAX), a crash or a hang. The checks live in
`kerasbert.utils.examples`; without them every case below fails differently
on each backend. Tiny one-layer tasks over the MiniLM vocabulary, built
once per module; most cases fail before the model runs."""

import os
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import torch_pass_only

import kerasbert
from kerasbert.cli import main
from kerasbert.preprocessing import QuestionAnsweringPreprocessor, TextPreprocessor, TokenClassificationPreprocessor
from kerasbert.readers import Answer, SquadExample
from kerasbert.tasks import fill_mask

LABELS = ["O", "B-PER", "I-PER"]
CONTEXT = "Ada Lovelace wrote the first program in 1843."
MEGABYTE = "word " * 200_000  # 1 MB of text, far past any sequence_length


def encoder(**overrides):
    return kerasbert.Encoder(**{"vocabulary_size": 30522, "num_layers": 1, "num_heads": 2, "hidden_dim": 16,
                                "intermediate_dim": 20, "num_segments": 2, "max_sequence_length": 32,
                                "dropout": 0.0, **overrides})


@pytest.fixture(scope="module")
def tasks(minilm_tokenizer):
    keras.utils.set_random_seed(0)
    text = TextPreprocessor(minilm_tokenizer, sequence_length=16, pad_to_sequence_length=False)
    words = TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=16, pad_to_sequence_length=False)
    windows = QuestionAnsweringPreprocessor(minilm_tokenizer, sequence_length=32, doc_stride=8, max_question_length=8)
    return {
        "classifier": kerasbert.TextClassifier(encoder(), num_classes=3, preprocessor=text),
        "regressor": kerasbert.TextClassifier(encoder(), num_classes=1, preprocessor=text),
        "embedder": kerasbert.TextEmbedder(encoder(), preprocessor=text),
        "tagger": kerasbert.TokenClassifier(encoder(), labels=LABELS, preprocessor=words),
        "answerer": kerasbert.QuestionAnswerer(encoder(), preprocessor=windows),
        "masked_lm": kerasbert.MaskedLM(encoder(), preprocessor=text),
        "pretrainer": kerasbert.BertPretrainer(encoder()),
        "electra": kerasbert.ElectraPretrainer(None, encoder()),
        "tokenizer": minilm_tokenizer,
    }


def raises(error, pattern, call):
    with pytest.raises(error, match=pattern) as info:
        call()
    return str(info.value)


# -- raw examples ------------------------------------------------------------------------------

def labels_for(x):
    """Class ids, one per example of `x` (so that only `x` is wrong)."""
    try:
        return np.zeros(1 if isinstance(x, (str, bytes)) else len(x), "int32")
    except TypeError:
        return np.zeros(1, "int32")


ENTRY_POINTS = {
    "classifier.fit": lambda t, x: t["classifier"].fit(x, labels_for(x), verbose=0),
    "classifier.evaluate": lambda t, x: t["classifier"].evaluate(x, labels_for(x), verbose=0),
    "classifier.predict": lambda t, x: t["classifier"].predict(x, verbose=0),
    "embedder.predict": lambda t, x: t["embedder"].predict(x, verbose=0),
    "tagger.predict_tags": lambda t, x: t["tagger"].predict_tags(x),
    "tagger.predict_entities": lambda t, x: t["tagger"].predict_entities(x),
    "fill_mask": lambda t, x: fill_mask(t["masked_lm"], t["tokenizer"], x),
}
# (id, x, error, pattern): `{x}` stands for the argument's name.
BAD_EXAMPLES = [
    ("None", None, ValueError, r"{x} is None"),
    ("empty string", "", TypeError, r"{x} must be a batch of examples, not a single string"),
    ("bare string", "A fine film.", TypeError, r"{x} must be a batch of examples, not a single string"),
    ("tensor string", tf.constant("A fine film."), TypeError, r"{x} must be a batch of examples, not a single"),
    ("empty list", [], ValueError, r"{x} holds no examples"),
    ("empty array", np.array([], str), ValueError, r"{x} holds no examples"),
    ("number", 5, TypeError, r"{x} must be a list of strings"),
    ("set", {"a", "b"}, TypeError, r"{x} must be a list of strings.*a set has no order"),
    ("list of None", [None], TypeError, r"{x}.* None"),
    ("list of numbers", [1, 2], TypeError, r"{x}.*int 1|{x}\[0\].*int"),
    ("int array", np.array([1, 2]), TypeError, r"{x} must hold text"),
    ("int tensor", tf.constant([1, 2]), TypeError, r"{x} must hold text"),
]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize(("case", "x", "error", "pattern"), BAD_EXAMPLES, ids=[c[0] for c in BAD_EXAMPLES])
def test_bad_raw_examples_are_refused_naming_the_argument(tasks, entry, case, x, error, pattern):
    name = "texts" if entry == "fill_mask" else "x"
    raises(error, pattern.format(x=name), lambda: ENTRY_POINTS[entry](tasks, x))


@pytest.mark.parametrize("entry", ["classifier.predict", "embedder.predict", "fill_mask"])
def test_a_2d_array_is_not_a_batch_of_texts(tasks, entry):
    name = "texts" if entry == "fill_mask" else "x"
    raises(ValueError, rf"{name} must be a 1-D batch of strings; got an array of shape \(2, 2\)",
           lambda: ENTRY_POINTS[entry](tasks, np.array([["a", "b"], ["c", "d"]])))


def test_awkward_text_gives_a_result_in_seconds(tasks):
    """Empty and whitespace-only strings, invalid UTF-8, NUL and 1 MB of
    text (truncated to sequence_length) are text like any other."""
    texts = ["", " \t\n", b"\xff\xfe not utf-8", "nul\x00inside", "a\ud800b", MEGABYTE]
    start = time.perf_counter()
    for name in ("classifier", "embedder"):
        outputs = tasks[name].predict(texts, verbose=0)
        assert len(outputs) == len(texts) and np.all(np.isfinite(outputs)), name
    tags = tasks["tagger"].predict_tags(["", "   ", "nul\x00inside", b"\xff bad"])
    assert [len(t) for t in tags] == [0, 0, 1, 2]
    assert time.perf_counter() - start < 60


# -- targets and weights ------------------------------------------------------------------------

TEXTS = ["a good film", "a bad film", "fine"]
BAD_TARGETS = [
    ("class 3 of 3", np.array([3, 0, 1]), ValueError, r"y\[0\]=3 is out of range: y must hold class ids: integers "
                                                       r"in \[0, 3\)"),
    ("negative class", np.array([0, -1, 1]), ValueError, r"y\[1\]=-1 is out of range"),
    ("huge class", np.array([2 ** 40, 0, 1]), ValueError, r"y\[0\]=1099511627776 is out of range"),
    ("class names", ["pos", "neg", "pos"], TypeError, r"y\[0\] must be a number \(class ids\); got str 'pos' "
                                                      r"\(map names to ids"),
    ("fractions", np.array([0.5, 0.0, 1.0]), TypeError, r"y\[0\]=0.5 is not an integer"),
    ("NaN", np.array([np.nan, 0, 1]), ValueError, r"y\[0\] is nan"),
    ("one-hot", np.eye(3), ValueError, r"y must have shape \(examples,\).*one-hot"),
    ("too few", np.array([0, 1]), ValueError, r"y has 2 entries but x has 3 examples"),
    ("None", None, ValueError, r"y is None; training and evaluation need the targets"),
]


@pytest.mark.parametrize("method", ["fit", "evaluate"])
@pytest.mark.parametrize(("case", "y", "error", "pattern"), BAD_TARGETS, ids=[c[0] for c in BAD_TARGETS])
def test_bad_class_ids_are_refused_before_the_model_runs(tasks, method, case, y, error, pattern):
    raises(error, pattern, lambda: getattr(tasks["classifier"], method)(TEXTS, y, verbose=0))


@pytest.mark.parametrize(("case", "y", "pattern"), [
    ("NaN score", np.array([np.nan, 1.0, 2.0]), r"y\[0\] is nan; scores must be finite"),
    ("infinite score", np.array([1.0, np.inf, 2.0]), r"y\[1\] is inf"),
    ("two scores each", np.ones((3, 2)), r"y must have shape \(examples,\)"),
])
def test_bad_scores_are_refused(tasks, case, y, pattern):
    raises(ValueError, pattern, lambda: tasks["regressor"].fit(TEXTS, y, verbose=0))


@pytest.mark.parametrize(("case", "weights", "pattern"), [
    ("NaN", np.array([np.nan, 1.0, 1.0]), r"sample_weight\[0\] is nan"),
    ("negative", np.array([1.0, -1.0, 1.0]), r"sample_weight\[1\]=-1.0 is negative"),
    ("too few", np.ones(2), r"sample_weight has 2 entries but x has 3 examples"),
])
def test_bad_sample_weights_are_refused(tasks, case, weights, pattern):
    # A NaN or negative weight gave a NaN loss, and NaN weights for good.
    raises(ValueError, pattern, lambda: tasks["classifier"].fit(TEXTS, np.zeros(3, "int32"), sample_weight=weights,
                                                                verbose=0))


@pytest.mark.parametrize(("case", "validation", "error", "pattern"), [
    ("x alone", (TEXTS,), ValueError, r"validation_data must be \(x, y\)"),
    ("class out of range", (TEXTS, np.array([0, 5, 0])), ValueError, r"validation_data\[1\]\[1\]=5 is out of range"),
    ("a list of texts", TEXTS, TypeError, r"validation_data\[0\] must be a batch of examples"),
])
def test_bad_validation_data_is_refused(tasks, case, validation, error, pattern):
    raises(error, pattern, lambda: tasks["classifier"].fit(TEXTS, np.zeros(3, "int32"), validation_data=validation,
                                                           verbose=0))


WORDS = [["Ada", "wrote"], ["Bob", "met", "Ada"]]
BAD_TAGS = [
    ("a tag too many", [[1, 0, 0], [1, 0, 1]], ValueError, r"y\[0\] has 3 values but example 0 of x has 2 words"),
    ("tag 3 of 3", [[1, 0], [1, 3, 1]], ValueError, r"y\[1\]\[1\]=3 is out of range: y must hold tag ids"),
    ("an unknown tag name", [["B-PER", "O"], ["B-PER", "O", "B-XYZ"]], ValueError,
     r"y\[1\]\[2\]='B-XYZ' is not one of the task's labels"),
    ("a tag name among ids", [["B-PER", 0], [1, 0, 1]], ValueError, r"y\[0\]\[1\]=0 is not one of the task's labels"),
    ("float tags", [[1.0, 0.0], [1.0, 0.0, 1.0]], TypeError, r"y\[0\]\[0\]=1.0 is a float"),
    ("one list for all", [1, 0], TypeError, r"y\[0\] must be a list of tag ids, one per word"),
    ("too few sentences", [[1, 0]], ValueError, r"y has 1 entries but x has 2 examples"),
]


@pytest.mark.parametrize(("case", "y", "error", "pattern"), BAD_TAGS, ids=[c[0] for c in BAD_TAGS])
def test_bad_word_tags_are_refused(tasks, case, y, error, pattern):
    raises(error, pattern, lambda: tasks["tagger"].fit(WORDS, y, verbose=0))


def test_negative_tags_are_words_left_out(tasks):
    tagger = tasks["tagger"]
    history = tagger.fit(WORDS, [[-100, 0], [1, 0, -1]], sample_weight=[[1.0, 0.5], [1.0, 1.0, 1.0]], verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    raises(ValueError, r"sample_weight\[1\] has 2 values but example 1 of x has 3 words",
           lambda: tagger.fit(WORDS, [[1, 0], [1, 0, 1]], sample_weight=[[1.0, 1.0], [1.0, 1.0]], verbose=0))


@pytest.mark.parametrize(("case", "tags", "pattern"), [
    ("unknown tag", [["B-LOC", "O"], ["O", "O", "O"]], r"tags\[0\]\[0\]='B-LOC' is neither one of the labels"),
    ("tag id 7", [[7, 0], [0, 0, 0]], r"tags\[0\]\[0\]=7 is neither"),
    ("a tag short", [["O"], ["O", "O", "O"]], r"tags\[0\] has 1 tags but example 0 of words has 2 words"),
    ("a sentence short", [["O", "O"]], r"tags must hold one list of tags per example of words \(2 examples\)"),
])
def test_evaluate_entities_checks_the_tags(tasks, case, tags, pattern):
    raises(ValueError, pattern, lambda: tasks["tagger"].evaluate_entities(WORDS, tags))


# -- packed features (what the backends disagree on) ---------------------------------------------

def features(batch=2, seq=6, **changes):
    packed = {"token_ids": np.full((batch, seq), 1000, "int32"), "segment_ids": np.zeros((batch, seq), "int32"),
              "padding_mask": np.ones((batch, seq), "int32"), "mask_positions": np.array([[1, 2]] * batch, "int32"),
              "mask_weights": np.ones((batch, 2), "float32")}
    packed.update(changes)
    return packed


# (id, features, error, pattern): `{x}` stands for the argument's name.
BAD_FEATURES = [
    ("token id = vocabulary_size", features(token_ids=np.full((2, 6), 30522, "int32")), ValueError,
     r"{x}\['token_ids'\]\[0\]\[0\]=30522 is out of range: token_ids must be token ids, in \[0, 30522\)"),
    ("negative token id", features(token_ids=np.full((2, 6), -1, "int32")), ValueError,
     r"{x}\['token_ids'\]\[0\]\[0\]=-1 is out of range"),
    ("segment id = num_segments", features(segment_ids=np.full((2, 6), 2, "int32")), ValueError,
     r"{x}\['segment_ids'\]\[0\]\[0\]=2 is out of range.*num_segments=2"),
    ("longer than the position table", features(seq=40), ValueError,
     r"{x}\['token_ids'\] holds sequences of 40 positions; .*max_sequence_length=32"),
    ("float token ids", features(token_ids=np.full((2, 6), 1000.5)), TypeError,
     r"{x}\['token_ids'\] must hold integers"),
    ("shapes differ", features(padding_mask=np.ones((2, 5), "int32")), ValueError,
     r"{x}\['padding_mask'\] has shape \(2, 5\); it must be \(2, 6\)"),
    ("padding mask -1", features(padding_mask=np.full((2, 6), -1, "int32")), ValueError,
     r"{x}\['padding_mask'\]\[0\]\[0\]=-1 is out of range"),
    ("mask position past the sequence", features(mask_positions=np.array([[1, 6], [1, 2]], "int32")), ValueError,
     r"{x}\['mask_positions'\]\[0\]\[1\]=6 is out of range.*in \[0, 6\)"),
]
PACKED_ENTRY_POINTS = {
    "classifier.predict": lambda t, f: t["classifier"].predict(f, verbose=0),
    "classifier.fit": lambda t, f: t["classifier"].fit(f, np.zeros(2, "int32"), verbose=0),
    "tagger.evaluate": lambda t, f: t["tagger"].evaluate(f, np.zeros((2, 6), "int32"), verbose=0),
    "masked_lm.fit": lambda t, f: t["masked_lm"].fit(f, np.ones((2, 2), "int32"), verbose=0),
    "masked_lm.call": lambda t, f: t["masked_lm"](f),
    "pretrainer.fit": lambda t, f: t["pretrainer"].fit(f, {"mlm": np.ones((2, 2), "int32"), "nsp": np.zeros(2)},
                                                       verbose=0),
    "electra.predict": lambda t, f: t["electra"].predict(f, verbose=0),
}


@pytest.mark.parametrize("entry", PACKED_ENTRY_POINTS)
@pytest.mark.parametrize(("case", "packed", "error", "pattern"), BAD_FEATURES, ids=[c[0] for c in BAD_FEATURES])
def test_packed_features_are_checked_on_every_backend(tasks, entry, case, packed, error, pattern):
    model = tasks[entry.split(".")[0]]
    if case.startswith("mask position") and "mask_positions" not in model.input:
        pytest.skip("no mask_positions input")
    packed = {k: v for k, v in packed.items() if k in model.input}
    name = "inputs" if entry.endswith(".call") else "x"
    raises(error, pattern.format(x=name), lambda: PACKED_ENTRY_POINTS[entry](tasks, packed))


@pytest.mark.parametrize(("entry", "y", "pattern"), [
    ("masked_lm", np.array([[30522, 1], [1, 1]]), r"y\[0\]\[0\]=30522 is out of range: y must hold token ids"),
    ("electra", np.array([[-1, 1], [1, 1]]), r"y\[0\]\[0\]=-1 is out of range"),
    ("pretrainer", {"mlm": np.ones((2, 2), "int32"), "nsp": np.array([2, 0])}, r"y\['nsp'\]\[0\]=2 is out of range"),
    ("pretrainer", {"mlm": np.ones((2, 2), "int32")}, r"y lacks \['nsp'\]"),
    ("tagger", np.full((2, 6), 3), r"y\[0\]\[0\]=3 is out of range: y must hold tag ids"),
    ("answerer", {"start_logits": np.array([0, 6]), "end_logits": np.array([0, 1])},
     r"y\['start_logits'\]\[1\]=6 is out of range: .* integers in \[0, 6\)"),
])
def test_packed_targets_are_checked(tasks, entry, y, pattern):
    model = tasks[entry]
    packed = {k: v for k, v in features().items() if k in model.input}
    raises(ValueError, pattern, lambda: model.fit(packed, y, verbose=0))


def test_datasets_are_checked_in_their_pipeline(tasks):
    """A tf.data dataset is not read up front: its batches are checked as
    they pass (no work in the model's step), and the check's failure is a
    ValueError like the others, on every backend."""
    classifier = tasks["classifier"]
    labels = tf.data.Dataset.from_tensor_slices((TEXTS, [0, 7, 1]))
    raises(ValueError, r"y must hold class ids in \[0, 3\); a batch of the dataset holds values from 0(.0)? to "
                       r"7(.0)?", lambda: classifier.evaluate(labels, verbose=0))
    packed = tf.data.Dataset.from_tensor_slices(features(token_ids=np.full((2, 6), 40000, "int32"))).batch(2)
    raises(ValueError, r"x\['token_ids'\] must be token ids.*40000", lambda: classifier.predict(packed, verbose=0))
    raises(TypeError, r"x: the dataset's elements must be text",
           lambda: classifier.predict(tf.data.Dataset.from_tensor_slices([1, 2]), verbose=0))
    raises(TypeError, r"y: the dataset's targets must be class ids",
           lambda: classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, ["a", "b", "c"])), verbose=0))
    # Good data still goes through, and trains to a finite loss.
    history = classifier.fit(tf.data.Dataset.from_tensor_slices((TEXTS, [0, 2, 1])), verbose=0)
    assert np.isfinite(history.history["loss"]).all()


@pytest.mark.parametrize(("argument", "value"), [
    ("batch_size", 0), ("batch_size", -1), ("batch_size", 2.5), ("batch_size", "4"), ("batch_size", True),
    ("epochs", 0), ("epochs", -1), ("epochs", 1.5), ("epochs", None),
])
@pytest.mark.parametrize("entry", ["classifier", "masked_lm", "answerer"])
def test_counts_are_positive_integers(tasks, entry, argument, value):
    model = tasks[entry]
    data = {"classifier": (TEXTS, np.zeros(3, "int32")),
            "masked_lm": ({k: v for k, v in features().items() if k in model.input}, np.ones((2, 2), "int32")),
            "answerer": ([SquadExample("1", "t", "Who?", CONTEXT, (Answer("Ada Lovelace", 0),))], None)}[entry]
    error = ValueError if type(value) is int else TypeError  # a wrong type, or a count below 1
    raises(error, rf"{argument} must be a positive integer; got {value!r}",
           lambda: model.fit(*data, **{argument: value}, verbose=0))
    if argument == "batch_size" and entry != "answerer":
        raises(error, r"batch_size must be a positive integer", lambda: model.predict(data[0], batch_size=value))


# -- task-specific entry points ----------------------------------------------------------------

def test_question_answerer_says_what_it_takes(tasks):
    answerer = tasks["answerer"]
    raises(TypeError, r"x must be SQuAD examples .* call predict_answers", lambda: answerer.fit(["Who?"], verbose=0))
    raises(TypeError, r"x must be SQuAD examples", lambda: answerer.predict((["Who?"], [CONTEXT]), verbose=0))
    raises(ValueError, r"x holds no examples", lambda: answerer.fit([], verbose=0))
    raises(TypeError, r"examples must be a list of kerasbert.readers.SquadExample",
           lambda: answerer.evaluate_squad((["Who?"], [CONTEXT])))
    outside = SquadExample("2", "t", "When?", CONTEXT, (Answer("1999", 100),))
    raises(ValueError, r"answer_starts\[0\]=100", lambda: answerer.fit([outside], verbose=0))
    raises(ValueError, r"questions and contexts must have the same length",
           lambda: answerer.predict_answers((["a", "b"], [CONTEXT])))


@pytest.mark.parametrize(("options", "error", "pattern"), [
    (dict(top_k=0), ValueError, r"top_k must be an integer in \[1, 30522\]; got 0"),
    (dict(top_k="3"), TypeError, r"top_k must be an integer"),
    (dict(sequence_length=100), ValueError, r"sequence_length must be an integer in \[3, 32\]; got 100"),
    (dict(model="classifier"), TypeError, r"model must be a MaskedLM, a BertPretrainer or an ElectraPretrainer"),
    (dict(tokenizer=None), TypeError, r"tokenizer must be a kerasbert Tokenizer"),
    (dict(texts=[MEGABYTE + " [MASK]"]), ValueError, r"every text needs a \[MASK\] token within its first "
                                                     r"sequence_length=32 tokens; texts\[0\] = 'word word"),
])
def test_fill_mask_checks_its_arguments(tasks, options, error, pattern):
    options = {"model": "masked_lm", "tokenizer": tasks["tokenizer"], "texts": ["The [MASK] is red."],
               "sequence_length": 32, **options}
    options["model"] = tasks[options["model"]]
    message = raises(error, pattern, lambda: fill_mask(**options))
    assert len(message) < 400  # the 1 MB text is abbreviated


@pytest.mark.parametrize(("build", "error", "pattern"), [
    (lambda t: kerasbert.TokenClassifier(encoder(), labels=LABELS, dropout=-1), ValueError, r"dropout must be"),
    (lambda t: kerasbert.TokenClassifier(encoder(), num_classes=3, preprocessor=t["classifier"].preprocessor),
     TypeError, r"preprocessor must be a kerasbert.preprocessing.TokenClassificationPreprocessor"),
    (lambda t: kerasbert.TextClassifier(encoder(), num_classes=2, preprocessor=t["tokenizer"]), TypeError,
     r"preprocessor must be a kerasbert.preprocessing.TextPreprocessor"),
    (lambda t: kerasbert.TextClassifier(encoder(), num_classes=2, hidden_dim=4, activation="nope"), ValueError,
     r"activation='nope' is not a Keras activation"),
    (lambda t: kerasbert.ElectraPretrainer(None, encoder(), temperature=float("inf")), ValueError,
     r"temperature must be a finite number"),
    (lambda t: kerasbert.ElectraPretrainer(None, encoder(), generator_weight=float("nan")), ValueError,
     r"generator_weight must be a finite number"),
])
def test_constructors_check_their_arguments(tasks, build, error, pattern):
    raises(error, pattern, lambda: build(tasks))


def test_numpy_integers_count_as_integers():
    assert kerasbert.TextClassifier(encoder(), num_classes=np.int64(2)).num_classes == 2


@pytest.mark.parametrize(("task", "options", "error", "pattern"), [
    ("classifier", dict(top_k=3), TypeError, r"unexpected keyword argument 'top_k': a TextClassifier's serving "
                                             r"options are \['pairs'\]"),
    ("embedder", dict(pairs=True), TypeError, r"unexpected keyword argument 'pairs'.*are none"),
    ("classifier", dict(path=None), TypeError, r"path must be the directory to create"),
    ("classifier", dict(format="tflite"), ValueError, r"format='tflite' is not an export format; expected one of "
                                                      r"\('saved_model', 'onnx', 'litert'\)"),
])
def test_export_checks_its_arguments_before_writing(tasks, tmp_path, task, options, error, pattern):
    path = options.pop("path", tmp_path / "model")
    raises(error, pattern, lambda: tasks[task].export(path, **options))
    assert os.listdir(tmp_path) == []


# -- the command ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def presets(tasks, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_input_presets")
    for name in ("classifier", "answerer"):
        tasks[name].save_to_preset(root / name)
    (root / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (root / "empty.txt").write_text("\n \n")
    (root / "broken.jsonl").write_text('{"question": "Who?", "context": "Ada"}\n{not json\n')
    (root / "a_directory").mkdir()
    return root


@torch_pass_only
@pytest.mark.parametrize(("command", "message"), [
    (["predict", "{root}/classifier", "a", "--batch-size", "0"],
     "argument --batch-size: must be a positive integer; got '0'"),
    (["predict", "{root}/answerer", "--file", "{root}/broken.jsonl", "--null-score-threshold", "nan"],
     "argument --null-score-threshold: must be a finite number; got 'nan'"),
    (["predict", "{root}/classifier", "--file", "{root}/latin1.txt"], "--file '{root}/latin1.txt' is not UTF-8 text"),
    (["predict", "{root}/classifier", "--file", "{root}/empty.txt"], "no texts in --file"),
    (["predict", "{root}/classifier", "--file", "{root}/missing.txt"], "--file '{root}/missing.txt' is not a file"),
    (["predict", "{root}/classifier", "a", "--output", "{root}/a_directory"],
     "--output '{root}/a_directory' is a directory"),
    (["predict", "{root}/answerer", "--file", "{root}/broken.jsonl"], "broken.jsonl', line 2: not JSON"),
    (["embed", "{root}/classifier", "a", "--output", "{root}/a_directory"],
     "--output '{root}/a_directory' is a directory"),
    (["export", "{root}/classifier", "{root}/out", "--top-k", "3"], "--top-k is for MaskedLM presets"),
    (["export", "{root}/answerer", "{root}/out", "--pairs"], "--pairs is for TextClassifier presets"),
    (["evaluate", "{root}/classifier", "--file", "{root}/latin1.txt", "--batch-size", "-2"],
     "argument --batch-size: must be a positive integer; got '-2'"),
])
def test_the_command_refuses_bad_input_in_one_line(presets, capsys, command, message):
    root = str(presets)
    command = [part.format(root=root) for part in command]
    with pytest.raises(SystemExit) as info:
        main(command)
    assert info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith(f"kerasbert {command[0]}: error:") and message.format(root=root) in errors[0], err
    assert not (presets / "out").exists()


def test_packed_documents_numbered_in_the_padding_mask_are_accepted():
    """A padding mask of document numbers (document packing) is valid input."""
    encoder = kerasbert.Encoder(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=8,
                                max_sequence_length=8)
    model = kerasbert.TextEmbedder(encoder)
    packed = {"token_ids": np.array([[2, 5, 3, 2, 6, 3, 0, 0]], "int32"),
              "padding_mask": np.array([[1, 1, 1, 2, 2, 2, 0, 0]], "int32")}
    if "segment_ids" in model.input:
        packed["segment_ids"] = np.zeros((1, 8), "int32")
    assert np.asarray(model.predict(packed, verbose=0)).shape[0] == 1
