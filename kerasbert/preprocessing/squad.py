"""Extractive question answering (SQuAD v1.1 / v2.0): question + context ->
overlapping windows with start/end targets; start/end logits -> answers.

Windows are built in NumPy from one batched call of the tokenizer, because
one example becomes a varying number of rows: the bookkeeping that maps
windows back to examples and tokens back to context characters lives in a
`QuestionAnsweringWindows`, and `decode_answers` uses it to turn a model's
logits into answer texts cut from the original contexts.
"""

import dataclasses
import math
import numbers

import keras
import numpy as np

from kerasbert.preprocessing.preprocessors import TokenizingPreprocessor
from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.checks import abbreviated, check_int
from kerasbert.utils.optional import tf

# Special tokens around the two parts of a window: [CLS] Q [SEP] C [SEP]
# and <s> Q </s></s> C </s>.
_SPECIALS = {"bert": 3, "roberta": 4}


@dataclasses.dataclass(eq=False)
class QuestionAnsweringWindows:
    """The windows of a batch of question/context examples, as NumPy arrays.

    Attributes:
        features: the encoder inputs, a dict of `token_ids`, `segment_ids`
            (all 0 in RoBERTa style) and `padding_mask`, int32
            `(num_windows, sequence_length)`.
        example_index: int32 `(num_windows,)`, the example of each window.
        offsets: int32 `(num_windows, sequence_length, 2)`, the `[start, end)`
            character offsets of each context token in its example's
            context; -1 for question, special and padding tokens.
        contexts: the examples' contexts (a list of str).
        start_positions, end_positions: int32 `(num_windows,)`, the first and
            last token of the answer in each window, or 0 (the `[CLS]`
            position) when the answer is not wholly inside the window or the
            question has none; `None` when no answers were given.
    """

    features: dict
    example_index: np.ndarray
    offsets: np.ndarray
    contexts: list
    start_positions: np.ndarray = None
    end_positions: np.ndarray = None

    def __len__(self):
        return len(self.example_index)

    def __repr__(self):  # not every context once per window
        answers = "with" if self.start_positions is not None else "without"
        return (f"QuestionAnsweringWindows({len(self)} windows of {self.num_examples} examples, "
                f"sequence_length={self.offsets.shape[1]}, {answers} answers)")

    @property
    def num_examples(self):
        return len(self.contexts)

    def dataset(self):
        """An unbatched `tf.data.Dataset` of `(features, (start_positions,
        end_positions))`, or of `features` when no answers were given."""
        features = {k: tf.constant(v) for k, v in self.features.items()}
        if self.start_positions is None:
            return tf.data.Dataset.from_tensor_slices(features)
        labels = (tf.constant(self.start_positions), tf.constant(self.end_positions))
        return tf.data.Dataset.from_tensor_slices((features, labels))


@dataclasses.dataclass
class QuestionAnsweringPrediction:
    """The answer to one question.

    Attributes:
        text: the answer, cut from the original context (`""`: no answer).
        start, end: its `[start, end)` character offsets in the context, so
            `context[start:end] == text`; -1 for no answer.
        score: the answer's score, `start_logit + end_logit` of its span, or
            the null score when the answer is `""`.
        null_score: the lowest `start_logit + end_logit` at `[CLS]` over the
            example's windows (the "no answer" score of SQuAD v2.0).
        n_best: the best spans, highest score first, as `(text, start, end,
            score)` tuples; each character span appears once.
    """

    text: str
    start: int
    end: int
    score: float
    null_score: float
    n_best: list


@keras.saving.register_keras_serializable(package="kerasbert")
class QuestionAnsweringPreprocessor(TokenizingPreprocessor):
    """Turns questions and contexts into windows for extractive question
    answering, with the answers' token positions as training targets.

    Each window is `[CLS] question [SEP] context part [SEP]` (RoBERTa style:
    `<s> question </s></s> context part </s>`), padded to `sequence_length`.
    Questions keep their first `max_question_length` tokens; long contexts are
    cut into windows that overlap by `doc_stride` tokens, so every context
    token is in some window. Windows are the same as those of a transformers
    fast tokenizer called with `truncation="only_second",
    max_length=sequence_length, stride=doc_stride,
    return_overflowing_tokens=True` (for questions that are not truncated).
    Texts are tokenised as given; transformers' `run_qa.py` strips the
    questions' leading whitespace first (`q.lstrip()`), which matters for
    byte-level BPE.

    `windows()` does the work and keeps the bookkeeping (which example each
    window belongs to, character offsets of context tokens) that
    `decode_answers` needs. Calling the layer returns only the windows'
    features, one row per window (not per example).

    Args:
        tokenizer: a `kerasbert.Tokenizer`.
        sequence_length: the length of every window, special tokens included.
        doc_stride: the number of context tokens shared by consecutive
            windows of one context (transformers' `stride`, `run_qa.py`'s
            `--doc_stride`; Google's BERT `run_squad.py` used the name for
            the distance between window starts instead).
        max_question_length: questions longer than this many tokens keep
            their first `max_question_length`.

    Examples:
    >>> preprocessor = QuestionAnsweringPreprocessor.from_preset(
    ...     "all_minilm_l6_v2", sequence_length=16, doc_stride=2, max_question_length=4)
    >>> windows = preprocessor.windows(
    ...     ["Who wrote it?"], ["It was written by Amélie Poulain in Paris, in the summer of 1990."],
    ...     answer_starts=[18], answer_texts=["Amélie Poulain"])
    >>> len(windows), windows.example_index.tolist()
    (3, [0, 0, 0])
    >>> windows.start_positions.tolist(), windows.end_positions.tolist()
    ([10, 0, 0], [13, 0, 0])
    >>> logits = np.full((3, 16), -10.0)
    >>> start_logits, end_logits = logits.copy(), logits.copy()
    >>> start_logits[0, 10], end_logits[0, 13] = 5.0, 5.0
    >>> decode_answers(windows, start_logits, end_logits)[0].text
    'Amélie Poulain'
    """

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_question_length=64, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(tokenizer, Tokenizer):
            raise TypeError(f"tokenizer must be a kerasbert Tokenizer; got {type(tokenizer).__name__}.")
        check_int("sequence_length", sequence_length, 1)
        check_int("doc_stride", doc_stride, 0)
        check_int("max_question_length", max_question_length, 1)
        self.tokenizer = tokenizer
        self.style = getattr(tokenizer, "packing_style", "bert")
        specials = _SPECIALS[self.style]
        # The fewest context tokens a window can hold: with the longest question.
        context_length = sequence_length - specials - max_question_length
        if context_length < 1:
            raise ValueError(
                f"sequence_length={sequence_length} is too small: a question of max_question_length="
                f"{max_question_length} tokens and {specials} special tokens leave no room for context. "
                f"Use sequence_length > {specials + max_question_length} (with room for some context) "
                "or a smaller max_question_length."
            )
        if doc_stride >= context_length:
            raise ValueError(
                f"doc_stride={doc_stride} must be smaller than the context tokens of a window, "
                f"sequence_length - max_question_length - {specials} special tokens = {context_length}, "
                "or windows would not advance. Use a smaller doc_stride or max_question_length, or a "
                "larger sequence_length."
            )
        self.sequence_length = sequence_length
        self.doc_stride = doc_stride
        self.max_question_length = max_question_length
        ids = tokenizer.special_token_ids
        self.cls_id, self.sep_id, self.pad_id = ids["cls"], ids["sep"], ids["pad"]

    # -- Windows ------------------------------------------------------------

    def windows(self, questions, contexts, answer_starts=None, answer_texts=None):
        """Questions and contexts (lists of str of equal length) ->
        `QuestionAnsweringWindows`.

        `answer_starts` and `answer_texts` give, per example, the character
        start and the text of the (first) gold answer, or `None`/-1 and `""`
        for a question without answer (SQuAD v2.0). With them, each window
        gets start/end positions: the first context token that ends after
        the answer's start and the last one that starts before its end, when
        the answer is wholly inside the window, else 0 (`[CLS]`).
        """
        questions = _text_list(questions, "questions")
        contexts = _text_list(contexts, "contexts")
        if len(questions) != len(contexts):
            raise ValueError(
                f"questions and contexts must have the same length; got {len(questions)} and {len(contexts)}."
            )
        answers = None
        if answer_starts is not None or answer_texts is not None:
            answers = _answer_spans(answer_starts, answer_texts, contexts)

        q_ids, q_rows, q_lengths, _, _ = self._tokenize(questions)
        c_ids, c_rows, c_lengths, c_starts, c_ends = self._tokenize(contexts)
        layout = self.window_layout((q_ids, q_rows, q_lengths), (c_ids, c_rows, c_lengths, c_starts, c_ends),
                                    self.sequence_length)
        layout = {k: v.numpy() if not isinstance(v, dict) else {n: t.numpy() for n, t in v.items()}
                  for k, v in layout.items()}
        features, example_index, offsets = layout["features"], layout["example_index"], layout["offsets"]
        windows = QuestionAnsweringWindows(features, example_index, offsets, contexts)
        if answers is not None:
            # The answer's tokens in its whole context, then in each window.
            first, last = _answer_tokens(answers, c_rows, c_lengths, c_starts, c_ends)  # (examples,), -1: none
            first, last = first[example_index], last[example_index]
            part_start, head = layout["part_start"], layout["head"]
            inside = (first >= 0) & (first >= part_start) & (last < part_start + layout["part_length"])
            shift = head - part_start  # context token -> window position
            windows.start_positions = np.where(inside, first + shift, 0).astype("int32")
            windows.end_positions = np.where(inside, last + shift, 0).astype("int32")
        return windows

    def window_layout(self, questions, contexts, width):
        """The windows of tokenized examples, in TensorFlow ops (eager, or
        in a serving graph).

        Args:
            questions: `(ids, rows, lengths)`: the flat token ids of the
                questions, each example's first index into them and its
                number of tokens.
            contexts: `(ids, rows, lengths, starts, ends)`, likewise, with
                the tokens' flat character starts and ends.
            width: the positions per window row (`sequence_length`, or less
                when every window is shorter).

        Returns:
            A dict of `features` (int32 `(windows, width)` each),
            `example_index`, `part_start` (the window's first context token
            in its example's context), `part_length`, `head` (its first
            context position), all int32 `(windows,)`, and `offsets` (int32
            `(windows, width, 2)`, -1 off the context).
        """
        q_ids, q_rows, q_lengths = (tf.cast(t, tf.int32) for t in questions)
        c_ids, c_rows, c_lengths, c_starts, c_ends = (tf.cast(t, tf.int32) for t in contexts)
        q_lengths = tf.minimum(q_lengths, self.max_question_length)  # (examples,)

        # Windows: each example's context is cut into parts of `budget`
        # tokens starting every `budget - doc_stride` tokens, until one
        # reaches the end (transformers' Encoding.truncate).
        budget = self.sequence_length - _SPECIALS[self.style] - q_lengths  # (examples,) > doc_stride
        step = budget - self.doc_stride
        over = tf.maximum(c_lengths - budget, 0)
        num_windows = 1 + (over + step - 1) // step  # 1 + ceil(over / step)
        example_index = tf.repeat(tf.range(tf.size(num_windows)), num_windows)  # (windows,)
        first_window = tf.cumsum(num_windows, exclusive=True)
        window_in_example = tf.range(tf.size(example_index)) - tf.gather(first_window, example_index)
        part_start = window_in_example * tf.gather(step, example_index)  # (windows,), in the context's tokens
        part_length = tf.minimum(tf.gather(budget, example_index), tf.gather(c_lengths, example_index) - part_start)

        # Position -> what it holds, all windows at once.
        q_length = tf.gather(q_lengths, example_index)[:, None]  # (windows, 1)
        head = q_length + (2 if self.style == "bert" else 3)  # the first context position
        tail = head + part_length[:, None]  # the final separator's position
        position = tf.range(width)[None, :]  # (1, width)
        is_question = (position >= 1) & (position <= q_length)  # (windows, width)
        is_context = (position >= head) & (position < tail)
        is_separator = (position == q_length + 1) | (position == tail)
        if self.style == "roberta":
            is_separator |= position == q_length + 2

        def take(flat, index):  # flat values at clipped indices (unused ones anywhere)
            flat = tf.concat([flat, tf.zeros([1], flat.dtype)], 0)  # never empty
            return tf.gather(flat, tf.clip_by_value(index, 0, tf.size(flat) - 1))

        q_index = tf.gather(q_rows, example_index)[:, None] + position - 1
        c_index = tf.gather(c_rows, example_index)[:, None] + part_start[:, None] + position - head
        token_ids = tf.where(position == 0, self.cls_id, tf.where(is_separator, self.sep_id, self.pad_id))
        token_ids = tf.where(is_question, take(q_ids, q_index), token_ids)
        token_ids = tf.where(is_context, take(c_ids, c_index), token_ids)
        features = {"token_ids": token_ids}
        # BERT style: the context and its [SEP] are segment 1; else all 0 (as the packer's).
        in_context = (position >= head) & (position <= tail) if self.style == "bert" else tf.zeros_like(is_context)
        features["segment_ids"] = tf.cast(in_context, tf.int32)
        features["padding_mask"] = tf.cast(position <= tail, tf.int32)
        offsets = tf.stack([tf.where(is_context, take(c_starts, c_index), -1),
                            tf.where(is_context, take(c_ends, c_index), -1)], axis=-1)  # (windows, width, 2)
        return {"features": features, "example_index": example_index, "offsets": offsets,
                "part_start": part_start, "part_length": part_length, "head": head[:, 0]}

    def _tokenize(self, texts):
        """-> flat ids, each text's first index into them and its number of
        tokens, flat character starts and ends (NumPy). Each distinct text
        is tokenised once (SQuAD repeats contexts), so texts may share rows."""
        unique, inverse = np.unique(np.array(texts, dtype=object), return_inverse=True) if texts else ([], [])
        ids, starts, ends = self.tokenizer.tokenize_with_offsets(list(unique))
        splits = ids.row_splits.numpy()
        ids, starts, ends = (x.flat_values.numpy() for x in (ids, starts, ends))
        inverse = np.asarray(inverse, "int64")
        return ids, splits[:-1][inverse], np.diff(splits)[inverse], starts, ends

    # -- Layer --------------------------------------------------------------

    def call(self, questions, contexts=None):
        """The windows' features as tensors, one row per window. Eager only;
        the window -> example bookkeeping that decoding needs is in
        `windows()`. `questions` may also be a `(questions, contexts)` pair."""
        if contexts is None:
            if not (isinstance(questions, tuple) and len(questions) == 2):
                raise ValueError(
                    "contexts is missing: call the layer on (questions, contexts), two batches of strings."
                )
            questions, contexts = questions
        features = self.windows(questions, contexts).features
        return {k: tf.constant(v) for k, v in features.items()}

    def options(self):
        return {"sequence_length": self.sequence_length, "doc_stride": self.doc_stride,
                "max_question_length": self.max_question_length}


# -- Decoding -----------------------------------------------------------------

def decode_answers(windows, start_logits, end_logits, *, n_best_size=20, max_answer_length=30,
                   null_score_threshold=None):
    """Start/end logits of the windows -> one `QuestionAnsweringPrediction`
    per example.

    In each window, the `n_best_size` highest start and end logits over
    context tokens are paired into spans (end not before start, at most
    `max_answer_length` tokens), scored `start_logit + end_logit`; the best
    span over the example's windows is the answer, cut from the original
    context. SQuAD v2.0: with `null_score_threshold` set, the answer is `""`
    when `null_score - best_span_score > null_score_threshold` (BERT's
    `null_score_diff_threshold`); `None` always answers with a span (v1.1).

    Args:
        windows: the `QuestionAnsweringWindows` the logits were computed on.
        start_logits: `(num_windows, sequence_length)` array or tensor of
            any backend, the answer's start.
        end_logits: the same for the answer's end.
    """
    if not isinstance(windows, QuestionAnsweringWindows):
        raise TypeError(f"windows must be a QuestionAnsweringWindows; got {type(windows).__name__}.")
    check_decoding_options(n_best_size, max_answer_length, null_score_threshold)
    shape = windows.offsets.shape[:2]
    start_logits = _logits(start_logits, "start_logits", shape)
    end_logits = _logits(end_logits, "end_logits", shape)

    is_context = windows.offsets[:, :, 0] >= 0  # (windows, seq)
    k = min(n_best_size, shape[1])
    # The k best context positions of each window (non-context ones last).
    start_top = np.argsort(-np.where(is_context, start_logits, -np.inf), axis=1, kind="stable")[:, :k]  # (w, k)
    end_top = np.argsort(-np.where(is_context, end_logits, -np.inf), axis=1, kind="stable")[:, :k]
    rows = np.arange(len(windows))[:, None]
    scores = start_logits[rows, start_top][:, :, None] + end_logits[rows, end_top][:, None, :]  # (w, k, k)
    first, last = start_top[:, :, None], end_top[:, None, :]
    valid = (
        is_context[rows, start_top][:, :, None] & is_context[rows, end_top][:, None, :]
        & (last >= first) & (last - first < max_answer_length)
    )
    # A window adds at most n_best_size spans to its example's n-best list:
    # keep its best n_best_size pairs only.
    scores = np.where(valid, scores, -np.inf).reshape(len(windows), k * k)
    best = np.argsort(-scores, axis=1, kind="stable")[:, :n_best_size]  # (w, n)
    window, rank = np.nonzero(np.isfinite(np.take_along_axis(scores, best, axis=1)))  # candidate spans
    pair = best[window, rank]
    candidate_score = scores[window, pair]
    first, last = start_top[window, pair // k], end_top[window, pair % k]
    example = windows.example_index[window]
    order = np.lexsort((-candidate_score, example))  # by example, best first
    bounds = np.searchsorted(example[order], np.arange(windows.num_examples + 1)).tolist()
    # Python lists for the per-example loop (NumPy scalars are slow there).
    char_start = windows.offsets[window[order], first[order], 0].tolist()
    char_end = windows.offsets[window[order], last[order], 1].tolist()
    candidate_score = candidate_score[order].tolist()

    null_scores = np.full(windows.num_examples, np.inf)
    np.minimum.at(null_scores, windows.example_index, start_logits[:, 0] + end_logits[:, 0])

    predictions = []
    for e, context in enumerate(windows.contexts):
        n_best, seen = [], set()
        for c in range(bounds[e], bounds[e + 1]):
            span = char_start[c], char_end[c]
            if span in seen:  # the same text from an overlapping window
                continue
            seen.add(span)
            n_best.append((context[span[0]:span[1]], *span, candidate_score[c]))
            if len(n_best) == n_best_size:
                break
        null_score = float(null_scores[e])
        no_answer = not n_best or (
            null_score_threshold is not None and null_score - n_best[0][3] > null_score_threshold
        )
        if no_answer:
            predictions.append(QuestionAnsweringPrediction("", -1, -1, null_score, null_score, n_best))
        else:
            text, start, end, score = n_best[0]
            predictions.append(QuestionAnsweringPrediction(text, start, end, score, null_score, n_best))
    return predictions


def best_answers(layout, contexts, start_logits, end_logits, *, n_best_size=20, max_answer_length=30,
                 null_score_threshold=None):
    """`decode_answers`' answers in TensorFlow ops (for serving graphs):
    the best span of each example, without the n-best lists.

    Args:
        layout: `QuestionAnsweringPreprocessor.window_layout`'s dict.
        contexts: `(examples,)` strings, the texts the offsets index.
        start_logits, end_logits: `(windows, width)` float32 tensors.

    Returns:
        A dict of `answer` (string, "" for none), `start`, `end` (int32
        character offsets into the context, -1 for none) and `score`
        (float32: the span's `start_logit + end_logit`, or the null score
        when there is no answer), each `(examples,)`.
    """
    offsets, example_index = layout["offsets"], layout["example_index"]
    examples = tf.shape(contexts)[0]
    is_context = offsets[:, :, 0] >= 0  # (windows, width)
    k = tf.minimum(n_best_size, tf.shape(start_logits)[1])
    # The k best context positions of each window, then every pair of them.
    start_score, start_top = tf.math.top_k(tf.where(is_context, start_logits, -np.inf), k)  # (windows, k)
    end_score, end_top = tf.math.top_k(tf.where(is_context, end_logits, -np.inf), k)
    first, last = start_top[:, :, None], end_top[:, None, :]  # (windows, k, 1), (windows, 1, k)
    valid = (tf.math.is_finite(start_score)[:, :, None] & tf.math.is_finite(end_score)[:, None, :]
             & (last >= first) & (last - first < max_answer_length))
    scores = tf.reshape(tf.where(valid, start_score[:, :, None] + end_score[:, None, :], -np.inf),
                        [tf.shape(valid)[0], -1])  # (windows, k * k)
    pair = tf.argmax(scores, axis=1, output_type=tf.int32)  # each window's best, the first of ties
    window_score = tf.reduce_max(scores, axis=1)
    best_score = tf.math.unsorted_segment_max(window_score, example_index, examples)  # (examples,)
    # The example's first window with its best score, as decode_answers' stable order picks.
    windows = tf.range(tf.shape(example_index)[0])
    is_best = window_score >= tf.gather(best_score, example_index)
    window = tf.math.unsorted_segment_min(tf.where(is_best, windows, tf.int32.max), example_index, examples)
    window = tf.minimum(window, tf.maximum(tf.shape(example_index)[0] - 1, 0))
    pair = tf.gather(pair, window)
    at_start = tf.stack([window, tf.gather_nd(start_top, tf.stack([window, pair // k], 1))], 1)  # (examples, 2)
    at_end = tf.stack([window, tf.gather_nd(end_top, tf.stack([window, pair % k], 1))], 1)
    start = tf.gather_nd(offsets[:, :, 0], at_start)
    end = tf.gather_nd(offsets[:, :, 1], at_end)
    null_score = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], example_index, examples)
    # (A segment max over -inf alone gives float32's lowest, not -inf.)
    found = tf.math.unsorted_segment_max(tf.cast(tf.math.is_finite(window_score), tf.int32), example_index, examples)
    none = found < 1
    if null_score_threshold is not None:
        none |= null_score - best_score > null_score_threshold
    start, end = tf.where(none, -1, start), tf.where(none, -1, end)
    answer = tf.strings.substr(contexts, tf.maximum(start, 0), end - start, unit="UTF8_CHAR")
    return {"answer": tf.where(none, "", answer), "start": start, "end": end,
            "score": tf.where(none, null_score, best_score)}


def check_decoding_options(n_best_size, max_answer_length, null_score_threshold):
    """The options of `decode_answers` and `best_answers`, checked."""
    check_int("n_best_size", n_best_size, 1)
    check_int("max_answer_length", max_answer_length, 1)
    if null_score_threshold is not None and (
        isinstance(null_score_threshold, bool) or not isinstance(null_score_threshold, numbers.Real)
        or math.isnan(null_score_threshold)
    ):
        raise TypeError(f"null_score_threshold must be a number or None; got {null_score_threshold!r}.")


# -- Helpers --------------------------------------------------------------------

def _text_list(texts, name):
    """A list/tuple/array of strings, or an eager rank-1 tf.string tensor ->
    list of str."""
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, not a single string; wrap it: [{name}].")
    if isinstance(texts, tf.Tensor):
        if texts.dtype != tf.string or texts.shape.rank != 1:
            raise TypeError(f"{name} must be a 1-D tf.string tensor; got {texts.dtype.name} of shape {texts.shape}.")
        texts = texts.numpy().tolist()
    elif isinstance(texts, np.ndarray):
        texts = texts.tolist()
    if not isinstance(texts, (list, tuple)):
        raise TypeError(f"{name} must be a list of strings; got {type(texts).__name__}: {texts!r:.80}.")
    result = []
    for i, text in enumerate(texts):
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a string; got {type(text).__name__}: {text!r:.40}.")
        result.append(text)
    return result


def _answer_spans(answer_starts, answer_texts, contexts):
    """-> int64 (examples, 2) character [start, end) of each answer; -1 for none."""
    if answer_starts is None or answer_texts is None:
        missing = "answer_texts" if answer_texts is None else "answer_starts"
        raise ValueError(f"answer_starts and answer_texts go together; {missing} is missing.")
    for name, values in (("answer_starts", answer_starts), ("answer_texts", answer_texts)):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise TypeError(f"{name} must be a list with one entry per example; got {values!r:.80}.")
        if len(values) != len(contexts):
            raise ValueError(f"{name} must have one entry per example ({len(contexts)}); got {len(values)}.")
    spans = np.full((len(contexts), 2), -1, "int64")
    for i, (start, text, context) in enumerate(zip(answer_starts, answer_texts, contexts)):
        if start is None or (isinstance(start, numbers.Integral) and not isinstance(start, bool) and start == -1):
            if text not in (None, ""):
                raise ValueError(
                    f"answer_texts[{i}]={text!r:.60} but answer_starts[{i}]={start!r} marks no answer; "
                    "give its character start, or \"\" for a question without answer."
                )
            continue
        if isinstance(start, bool) or not isinstance(start, numbers.Integral) or not 0 <= start < len(context):
            raise ValueError(
                f"answer_starts[{i}]={start!r} must be a character index into its context "
                f"(0 to {len(context) - 1}), or None/-1 for no answer."
            )
        if not isinstance(text, str) or not text:
            raise ValueError(f"answer_texts[{i}]={text!r:.60} must be the answer's text, a non-empty string.")
        found = context[start:start + len(text)]
        if found != text:
            raise ValueError(
                f"answer_texts[{i}]={text!r:.60} is not at answer_starts[{i}]={start} of its context, "
                f"which holds {found!r:.60} there."
            )
        spans[i] = start, start + len(text)
    return spans


def _answer_tokens(spans, rows, lengths, starts, ends):
    """The first and last context token of each answer, as indices into the
    example's context tokens: the first token ending after the answer's start
    and the last one starting before its end (-1 for none)."""
    first = np.full(len(spans), -1, "int64")
    last = np.full(len(spans), -1, "int64")
    for e, (start, end) in enumerate(spans):
        if start < 0:
            continue
        row = slice(rows[e], rows[e] + lengths[e])
        a = np.searchsorted(ends[row], start, side="right")  # offsets are non-decreasing
        b = np.searchsorted(starts[row], end, side="left") - 1
        if a <= b:  # else the answer holds no token (whitespace, dropped characters)
            first[e], last[e] = a, b
    return first, last


def _logits(logits, name, shape):
    try:
        array = np.asarray(keras.ops.convert_to_numpy(logits), dtype="float64")
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers (num_windows, sequence_length); got {abbreviated(logits)}.") from None
    if array.shape != tuple(shape):
        raise ValueError(
            f"{name} must have shape (num_windows, sequence_length) = {tuple(shape)}, one row per window; "
            f"got {array.shape}."
        )
    if np.isnan(array).any() or np.isposinf(array).any():
        raise ValueError(f"{name} holds NaN or +inf values; the model's outputs went wrong before decoding.")
    return array
