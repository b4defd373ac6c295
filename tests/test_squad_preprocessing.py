"""Question answering windows (against transformers' overflowing pair
encodings) and the decoding of start/end logits into answer texts."""

import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
import transformers
from helpers import gpt2_directory, minilm_directory, tensorflow_pass_only

from kerasbert.preprocessing.squad import (
    QuestionAnsweringPrediction,
    QuestionAnsweringPreprocessor,
    QuestionAnsweringWindows,
    decode_answers,
)
from kerasbert.tokenizers import BytePairTokenizer

# Plain Python and TensorFlow preprocessing: the same on every Keras backend, so
# checked once, in the tensorflow pass of the suite.
pytestmark = tensorflow_pass_only

CONTEXTS = [
    # Long: several windows at sequence_length 64-128.
    ("Amélie Poulain was born in Paris on 4 September 1973, the only child of Raphaël Poulain, a former army "
    "doctor, and Amandine Fouet, a schoolteacher from Enghien-les-Bains. Because her father believed she had "
    "a heart defect, she was taught at home by her mother and grew up lonely, inventing friends and games. "
    "In 1997 she moved to Montmartre and became a waitress at the Café des 2 Moulins, run by Suzanne, a "
    "former circus performer. On the night of 30 August 1997, startled by the news of Princess Diana's death, "
    "she dropped a perfume stopper that loosened a tile in her bathroom wall. Behind it she discovered an old "
    "metal box of childhood treasures hidden by a boy who had lived in the flat decades earlier. She resolved "
    "to find him, Dominique Bretodeau, and to return the box; if it moved him, she would devote her life to "
    "helping others. The film, directed by Jean-Pierre Jeunet, sold 8.6 million tickets in France in 2001 "
    "and received five Academy Award nominations, including Best Foreign Language Film."),
    # Medium.
    ("Super Bowl 50 was an American football game to determine the champion of the National Football League "
    "for the 2015 season. The American Football Conference champion Denver Broncos defeated the National "
    "Football Conference champion Carolina Panthers 24–10 to earn their third Super Bowl title. The game was "
    "played on February 7, 2016, at Levi's Stadium in Santa Clara, California."),
    # Short: one window.
    "Marie Skłodowska-Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
]
QUESTIONS = [
    "Who?",
    "Where was she born?",
    "Which team won Super Bowl 50, and what was the final score of the game against the Carolina Panthers?",
    "In what year did the events described in this rather long and detailed paragraph take place?",
    "What did Amélie find behind the tile in her bathroom wall after hearing about Princess Diana's death?",
]


def make_examples():
    """Word n-gram answers all over the contexts (interleaved, so contexts
    repeat out of order), a few questions without answer."""
    questions, contexts, starts, texts = [], [], [], []
    for c, context in enumerate(CONTEXTS):
        words = [m.span() for m in re.finditer(r"[\w']+", context)]
        for i in range(len(words)):
            last = min(i + i % 4, len(words) - 1)
            start, end = words[i][0], words[last][1]
            questions.append(QUESTIONS[(i + c) % len(QUESTIONS)])
            contexts.append(context)
            starts.append(start)
            texts.append(context[start:end])
    for i, context in enumerate(CONTEXTS):  # SQuAD v2.0: no answer
        questions.append(QUESTIONS[i])
        contexts.append(context)
        starts.append(None if i % 2 else -1)
        texts.append("")
    order = np.random.default_rng(0).permutation(len(questions))
    return tuple([x[i] for i in order] for x in (questions, contexts, starts, texts))


EXAMPLES = make_examples()


@pytest.fixture(scope="module")
def hf_bert():
    return transformers.AutoTokenizer.from_pretrained(minilm_directory())


@pytest.fixture(scope="module")
def byte_pair_tokenizer():
    """kerasbert's byte-level BPE over GPT-2's merges, RoBERTa style."""
    return BytePairTokenizer(os.path.join(gpt2_directory(), "vocab.json"), os.path.join(gpt2_directory(), "merges.txt"))


@pytest.fixture(scope="module")
def hf_roberta(byte_pair_tokenizer, tmp_path_factory):
    """transformers' fast RoBERTa tokenizer loaded from the files kerasbert
    saves (as in test_byte_pair)."""
    directory = str(tmp_path_factory.mktemp("gpt2_roberta"))
    byte_pair_tokenizer.save_to_preset(directory)
    return transformers.RobertaTokenizerFast.from_pretrained(directory)


def reference_windows(hf, questions, contexts, starts, texts, sequence_length, stride):
    """transformers' windows, context offsets (-1 elsewhere) and the standard
    SQuAD targets derived from its offsets."""
    out = hf(
        questions, contexts, truncation="only_second", max_length=sequence_length, stride=stride,
        return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length",
    )
    offsets, start_positions, end_positions = [], [], []
    for w, example in enumerate(out["overflow_to_sample_mapping"]):
        context_tokens = [i for i, s in enumerate(out.sequence_ids(w)) if s == 1]
        spans = out["offset_mapping"][w]
        row = np.full((sequence_length, 2), -1)
        row[context_tokens] = [spans[i] for i in context_tokens]
        offsets.append(row)
        start = starts[example]
        if start is None or start < 0:
            start_positions.append(0), end_positions.append(0)
            continue
        end = start + len(texts[example])
        first, last = context_tokens[0], context_tokens[-1]
        if not (spans[first][0] <= start and spans[last][1] >= end):
            start_positions.append(0), end_positions.append(0)
            continue
        start_positions.append(max(i for i in context_tokens if spans[i][0] <= start))
        end_positions.append(min(i for i in context_tokens if spans[i][1] >= end))
    return out, np.array(offsets), start_positions, end_positions


def assert_windows_match(preprocessor, hf, sequence_length, stride):
    windows = preprocessor.windows(*EXAMPLES)
    out, offsets, start_positions, end_positions = reference_windows(hf, *EXAMPLES, sequence_length, stride)
    assert windows.example_index.tolist() == out["overflow_to_sample_mapping"]
    assert windows.features["token_ids"].tolist() == out["input_ids"]
    assert windows.features["padding_mask"].tolist() == out["attention_mask"]
    if "token_type_ids" in out:
        assert windows.features["segment_ids"].tolist() == out["token_type_ids"]
    else:  # as the packer's RoBERTa-style rows: all segment 0
        assert not windows.features["segment_ids"].any()
    np.testing.assert_array_equal(windows.offsets, offsets)
    assert windows.start_positions.tolist() == start_positions
    assert windows.end_positions.tolist() == end_positions
    for array in [*windows.features.values(), windows.offsets, windows.example_index,
                  windows.start_positions, windows.end_positions]:
        assert array.dtype == np.int32
    return windows


# -- Windows against transformers ------------------------------------------------
# Windows are NumPy over one TensorFlow tokenizer graph, the same on every
# backend: their parity runs in the tensorflow pass of the suite.

@tensorflow_pass_only
@pytest.mark.parametrize("sequence_length, stride", [(64, 8), (48, 20), (128, 32)])
def test_wordpiece_windows_match_transformers(minilm_tokenizer, hf_bert, sequence_length, stride):
    preprocessor = QuestionAnsweringPreprocessor(
        minilm_tokenizer, sequence_length=sequence_length, doc_stride=stride, max_question_length=24
    )
    windows = assert_windows_match(preprocessor, hf_bert, sequence_length, stride)
    counts = np.bincount(windows.example_index)
    assert counts.max() >= 3 and counts.min() == 1
    assert (windows.start_positions > 0).sum() > len(EXAMPLES[0]) - 3  # most answers fit in some window


@tensorflow_pass_only
@pytest.mark.parametrize("sequence_length, stride", [(64, 8), (96, 30)])
def test_byte_pair_windows_match_transformers(byte_pair_tokenizer, hf_roberta, sequence_length, stride):
    preprocessor = QuestionAnsweringPreprocessor(
        byte_pair_tokenizer, sequence_length=sequence_length, doc_stride=stride, max_question_length=30
    )
    windows = assert_windows_match(preprocessor, hf_roberta, sequence_length, stride)
    assert set(windows.features) == {"token_ids", "segment_ids", "padding_mask"}  # segment 0 (checked above)
    assert np.bincount(windows.example_index).max() >= 3


def test_long_questions_keep_their_first_tokens(minilm_tokenizer):
    preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, 32, doc_stride=4, max_question_length=5)
    question = QUESTIONS[-1]
    windows = preprocessor.windows([question], [CONTEXTS[2]])
    ids = minilm_tokenizer([question]).to_list()[0]
    assert len(ids) > 5
    for row in windows.features["token_ids"]:
        assert row[:7].tolist() == [101, *ids[:5], 102]
    assert (windows.offsets[:, :7] == -1).all()


def test_short_and_empty_contexts(minilm_tokenizer):
    preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, 16, doc_stride=2, max_question_length=4)
    windows = preprocessor.windows(["Who?", "Who?"], ["", "Marie"], [None, 0], ["", "Marie"])
    assert windows.features["token_ids"][:, :6].tolist() == [[101, 2040, 1029, 102, 102, 0],
                                                            [101, 2040, 1029, 102, 5032, 102]]
    assert windows.start_positions.tolist() == [0, 4] and windows.end_positions.tolist() == [0, 4]
    empty = preprocessor.windows([], [])
    assert len(empty) == 0 and empty.offsets.shape == (0, 16, 2)


# -- Decoding --------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_windows(minilm_tokenizer):
    preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, 64, doc_stride=8, max_question_length=24)
    return preprocessor.windows(["Who moved to Montmartre?"], [CONTEXTS[0]])


def position_of(windows, window, text, context=CONTEXTS[0]):
    """The window positions of the first and last token of `text`."""
    start = context.index(text)
    offsets = windows.offsets[window]
    first = np.flatnonzero(offsets[:, 0] == start)
    last = np.flatnonzero(offsets[:, 1] == start + len(text))
    assert len(first) == 1 and len(last) == 1, f"{text!r} is not inside window {window}"
    return int(first[0]), int(last[0])


def logits_at(windows, spans, low=-5.0):
    """Start/end logits low everywhere but at {(window, position): value}."""
    rng = np.random.default_rng(0)
    start = low + rng.uniform(-1, 0, windows.offsets.shape[:2])
    end = low + rng.uniform(-1, 0, windows.offsets.shape[:2])
    for (window, first, last), (start_value, end_value) in spans.items():
        start[window, first], end[window, last] = start_value, end_value
    return start, end


def test_decodes_the_original_characters_from_a_later_window(long_windows):
    windows = long_windows
    assert len(windows) >= 4
    text = "Café des 2 Moulins"  # accents and casing, which the uncased tokenizer drops
    assert (windows.offsets[0, :, 0] == CONTEXTS[0].index(text)).sum() == 0  # not in the first window
    first, last = position_of(windows, 1, text)
    start, end = logits_at(windows, {(1, first, last): (6.0, 5.0)})
    [prediction] = decode_answers(windows, keras.ops.convert_to_tensor(start), keras.ops.convert_to_tensor(end))
    assert isinstance(prediction, QuestionAnsweringPrediction)
    assert prediction.text == text
    assert CONTEXTS[0][prediction.start:prediction.end] == text
    assert prediction.score == pytest.approx(11.0)


def test_n_best_order_and_spans_too_long(long_windows):
    windows = long_windows
    last_window = len(windows) - 1
    # Start logits grow and end logits shrink along the text, so the spans
    # that pair one answer's start with a later one's end score lower.
    spans = {"Best Foreign Language Film": (6.0, 3.0), "Academy Award": (3.0, 5.0), "five": (1.0, 6.0)}
    placed = {(last_window, *position_of(windows, last_window, text)): v for text, v in spans.items()}
    start, end = logits_at(windows, placed)
    [prediction] = decode_answers(windows, start, end, n_best_size=5)
    assert [(t, s) for t, _, _, s in prediction.n_best[:3]] == [
        ("Best Foreign Language Film", 9.0), ("Academy Award", 8.0), ("five", 7.0)
    ]
    assert prediction.n_best[3][3] == 6.0  # "five ... Academy Award"
    assert [s for *_, s in prediction.n_best] == sorted((s for *_, s in prediction.n_best), reverse=True)
    assert len(prediction.n_best) == 5
    assert len({(s, e) for _, s, e, _ in prediction.n_best}) == 5
    for text, start_char, end_char, _ in prediction.n_best:
        assert CONTEXTS[0][start_char:end_char] == text
    # "Best Foreign Language Film" is 4 tokens: too long for 3.
    [prediction] = decode_answers(windows, start, end, max_answer_length=3)
    assert prediction.text == "Academy Award"
    assert all(len(t.split()) <= 3 for t, *_ in prediction.n_best)


def test_no_answer_threshold(long_windows):
    windows = long_windows
    first, last = position_of(windows, 2, "Princess Diana")
    start, end = logits_at(windows, {(1, first + 0, first + 0): (1.0, 1.0), (2, first, last): (3.0, 3.0)})
    start[:, 0], end[:, 0] = 5.0, 4.0
    start[1, 0] = 1.0  # the null score is the lowest over windows: 1 + 4
    [v1] = decode_answers(windows, start, end)
    assert v1.text == "Princess Diana" and v1.null_score == pytest.approx(5.0)
    assert v1.score == pytest.approx(6.0)
    [answered] = decode_answers(windows, start, end, null_score_threshold=-1.0)  # 5 - 6 = -1, not > -1
    assert answered.text == "Princess Diana"
    [unanswered] = decode_answers(windows, start, end, null_score_threshold=-1.5)
    assert (unanswered.text, unanswered.start, unanswered.end) == ("", -1, -1)
    assert unanswered.score == pytest.approx(5.0) and unanswered.n_best[0][0] == "Princess Diana"
    start[:, 0] = 30.0
    assert decode_answers(windows, start, end, null_score_threshold=0.0)[0].text == ""
    assert decode_answers(windows, start, end)[0].text == "Princess Diana"  # v1.1: always a span


@pytest.mark.parametrize("style", ["wordpiece", pytest.param("byte_pair", marks=tensorflow_pass_only)])
def test_gold_positions_decode_to_gold_answers(style, request):
    tokenizer = request.getfixturevalue("minilm_tokenizer" if style == "wordpiece" else "byte_pair_tokenizer")
    preprocessor = QuestionAnsweringPreprocessor(tokenizer, 64, doc_stride=16, max_question_length=30)
    questions, contexts, starts, texts = EXAMPLES
    windows = preprocessor.windows(questions, contexts, starts, texts)
    start = np.zeros(windows.offsets.shape[:2])
    end = np.zeros(windows.offsets.shape[:2])
    answered = windows.start_positions > 0
    rows = np.flatnonzero(answered)
    start[rows, windows.start_positions[rows]] = 10.0
    end[rows, windows.end_positions[rows]] = 10.0
    predictions = decode_answers(windows, start, end, max_answer_length=64)
    assert len(predictions) == len(questions)
    has_answer = np.zeros(len(questions), bool)
    has_answer[windows.example_index[answered]] = True
    for i, prediction in enumerate(predictions):
        if starts[i] is None or starts[i] < 0:
            assert not has_answer[i]
            continue
        assert has_answer[i], f"answer {texts[i]!r} is in no window"
        assert prediction.text == texts[i]
        assert (prediction.start, prediction.end) == (starts[i], starts[i] + len(texts[i]))
        # Several windows hold the answer: one n-best entry per character span.
        assert len({(s, e) for _, s, e, _ in prediction.n_best}) == len(prediction.n_best)


# -- Layer -------------------------------------------------------------------------

def test_call_dataset_and_serialization(minilm_tokenizer):
    preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, 32, doc_stride=4, max_question_length=8)
    questions, contexts = ["Who won?", "When?"], [CONTEXTS[1], CONTEXTS[2]]
    starts = [CONTEXTS[1].index("Denver"), CONTEXTS[2].index("1911")]
    windows = preprocessor.windows(questions, contexts, starts, ["Denver", "1911"])
    features = preprocessor(questions, contexts)
    assert set(features) == {"token_ids", "segment_ids", "padding_mask"}
    assert features["token_ids"].shape == (len(windows), 32)
    np.testing.assert_array_equal(features["token_ids"].numpy(), windows.features["token_ids"])
    pair = preprocessor((questions, contexts))
    np.testing.assert_array_equal(pair["padding_mask"].numpy(), windows.features["padding_mask"])
    tensors = preprocessor.windows(tf.constant(questions), tf.constant(contexts))
    np.testing.assert_array_equal(tensors.offsets, windows.offsets)

    batch = next(iter(windows.dataset().batch(100)))
    x, (start, end) = batch
    np.testing.assert_array_equal(x["segment_ids"].numpy(), windows.features["segment_ids"])
    assert start.numpy().tolist() == windows.start_positions.tolist()
    assert end.numpy().tolist() == windows.end_positions.tolist()
    unlabelled = preprocessor.windows(questions, contexts).dataset()
    assert isinstance(unlabelled.element_spec, dict)
    assert isinstance(windows, QuestionAnsweringWindows) and windows.num_examples == 2
    assert repr(windows) == (f"QuestionAnsweringWindows({len(windows)} windows of 2 examples, sequence_length=32, "
                             "with answers)")  # no context, once per window

    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(preprocessor))
    assert isinstance(restored, QuestionAnsweringPreprocessor)
    assert (restored.sequence_length, restored.doc_stride, restored.max_question_length) == (32, 4, 8)
    assert restored.get_config() == preprocessor.get_config()  # the tokenizer's vocabulary included


# -- Errors ------------------------------------------------------------------------

def test_bad_arguments(minilm_tokenizer):
    with pytest.raises(TypeError, match="kerasbert Tokenizer"):
        QuestionAnsweringPreprocessor("bert")
    with pytest.raises(ValueError, match=r"sequence_length=20 is too small.*no room for context"):
        QuestionAnsweringPreprocessor(minilm_tokenizer, 20, doc_stride=0, max_question_length=17)
    with pytest.raises(ValueError, match=r"doc_stride=10 must be smaller.* = 10"):
        QuestionAnsweringPreprocessor(minilm_tokenizer, 29, doc_stride=10, max_question_length=16)
    with pytest.raises(ValueError, match="doc_stride must be an integer >= 0; got -1"):
        QuestionAnsweringPreprocessor(minilm_tokenizer, 64, doc_stride=-1)

    preprocessor = QuestionAnsweringPreprocessor(minilm_tokenizer, 32, doc_stride=4, max_question_length=8)
    with pytest.raises(ValueError, match="same length; got 2 and 1"):
        preprocessor.windows(["a", "b"], ["c"])
    with pytest.raises(TypeError, match="not a single string"):
        preprocessor.windows("a", "b")
    with pytest.raises(TypeError, match=r"contexts\[1\] must be a string; got int"):
        preprocessor.windows(["a", "b"], ["c", 3])
    with pytest.raises(ValueError, match=r"answer_texts\[0\]='Curie' is not at answer_starts\[0\]=0 .*'Marie'"):
        preprocessor.windows(["Who?"], [CONTEXTS[2]], [0], ["Curie"])
    with pytest.raises(ValueError, match="answer_texts is missing"):
        preprocessor.windows(["Who?"], [CONTEXTS[2]], [0])
    with pytest.raises(ValueError, match=r"answer_starts must have one entry per example \(1\); got 2"):
        preprocessor.windows(["Who?"], [CONTEXTS[2]], [0, 1], ["Marie"])
    with pytest.raises(ValueError, match=r"answer_starts\[0\]=500 must be a character index"):
        preprocessor.windows(["Who?"], [CONTEXTS[2]], [500], ["Marie"])
    with pytest.raises(ValueError, match=r"answer_texts\[0\]='Marie' but answer_starts\[0\]=-1 marks no answer"):
        preprocessor.windows(["Who?"], [CONTEXTS[2]], [-1], ["Marie"])

    windows = preprocessor.windows(["Who?"], [CONTEXTS[2]])
    good = np.zeros((len(windows), 32))
    with pytest.raises(ValueError, match=r"end_logits must have shape .*\(1, 32\).*got \(1, 31\)"):
        decode_answers(windows, good, good[:, :31])
    with pytest.raises(ValueError, match="n_best_size must be a positive integer; got 0"):
        decode_answers(windows, good, good, n_best_size=0)
    with pytest.raises(TypeError, match="windows must be a QuestionAnsweringWindows"):
        decode_answers(windows.features, good, good)
