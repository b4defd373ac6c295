"""Extractive question answering (SQuAD v1.1 and v2.0)."""

import math

import keras
import numpy as np

from kerasbert.layers.dense import Dense
from kerasbert.metrics import squad_scores
from kerasbert.preprocessing.batching import GROUP_BY_LENGTH, SHAPE_COST, fitted_boundaries
from kerasbert.preprocessing.datasets import make_dataset, select_inputs
from kerasbert.preprocessing.squad import (
    QuestionAnsweringPreprocessor,
    QuestionAnsweringWindows,
    best_answers,
    check_decoding_options,
    decode_answers,
)
from kerasbert.readers import SquadExample
from kerasbert.tasks.fine_tuning import _RAW_TYPES, FineTuningTask
from kerasbert.tasks.head_layers import check_activation, head_transform, resolved_head_dim
from kerasbert.tasks.task import check_encoder, encoder_inputs, text_signature
from kerasbert.utils.checks import abbreviated, check_int
from kerasbert.utils.examples import Targets
from kerasbert.utils.features import SEQUENCE
from kerasbert.utils.optional import do_not_convert, tf


def _examples(examples, name="examples"):
    """SquadExamples, or a (questions, contexts) pair -> (questions,
    contexts, answer starts or None, answer texts or None)."""
    if isinstance(examples, tuple) and len(examples) == 2:
        questions, contexts = examples
        return list(questions), list(contexts), None, None
    examples = list(examples) if isinstance(examples, (list, tuple)) else examples
    if not isinstance(examples, list) or not all(isinstance(e, SquadExample) for e in examples):
        raise TypeError(
            f"{name} must be a list of kerasbert.readers.SquadExample (read_squad(path)) or a pair "
            f"(questions, contexts) of lists of strings; got {type(examples).__name__}."
        )
    starts = [e.answers[0].start if e.answers and not e.is_impossible else -1 for e in examples]
    texts = [e.answers[0].text if e.answers and not e.is_impossible else "" for e in examples]
    return [e.question for e in examples], [e.context for e in examples], starts, texts


@keras.saving.register_keras_serializable(package="kerasbert")
class QuestionAnswerer(FineTuningTask):
    """Finds the answer to a question in a context (SQuAD v1.1 / v2.0).

    A dense layer gives every token of a `[CLS] question [SEP] context
    [SEP]` window a start and an end logit: outputs `{"start_logits",
    "end_logits"}`, float32 `(batch, seq)` — transformers'
    `...ForQuestionAnswering` head, whose weights `from_preset` keeps.

    Contexts longer than a window are split into overlapping windows
    (`QuestionAnsweringPreprocessor`: `sequence_length`, `doc_stride`);
    `predict_answers` searches the n best spans of every window, keeps
    those of at most `max_answer_length` tokens inside the context, and
    returns the best one cut from the original text by character offsets,
    or "" when the no-answer score beats it by more than
    `null_score_threshold` (SQuAD v2.0). `evaluate_squad` scores
    predictions with the official exact-match and F1.

    `fit` and `evaluate` take `kerasbert.readers.read_squad(path)`
    examples (or a `QuestionAnsweringWindows` of windows with answers);
    windows whose answer lies outside them point at `[CLS]`. Raw
    `(questions, contexts)` go to `predict_answers`.

    The decoding settings are the task's own: `predict_answers`,
    `evaluate_squad` and the exported SavedModel use them unless a call
    overrides them, so every route gives the same answers, and a task
    preset keeps them (`kerasbert finetune` on a SQuAD v2.0 file sets
    `null_score_threshold=0.0`).

    Args:
        encoder: a `kerasbert.Encoder`.
        preprocessor: a `QuestionAnsweringPreprocessor`, or None.
        n_best_size: the best starts and ends searched per window.
        max_answer_length: the longest answer, in tokens.
        null_score_threshold: SQuAD v2.0: answer "" when the no-answer
            score beats the best span's by more than this; None (SQuAD
            v1.1): always a span.
        hidden_dim: the width of a dense layer before the output layer, as
            `TokenClassifier`'s (ModernBERT's head: its presets' default).
        activation: that dense layer's activation.
        head_norm: a LayerNorm after that dense layer.
    """

    # Its heads' weights in Hugging Face checkpoints: `...ForQuestionAnswering`
    # (`kerasbert.convert`).
    huggingface_head = "question_answering"

    preprocessor_class = QuestionAnsweringPreprocessor
    per_token_outputs = True
    huggingface_architecture = "QuestionAnswering"
    default_sequence_length = 384  # SQuAD's windows

    def __init__(self, encoder, preprocessor=None, n_best_size=20, max_answer_length=30, null_score_threshold=None,
                 hidden_dim=None, activation="gelu", head_norm=False, **kwargs):
        check_encoder(encoder)
        check_decoding_options(n_best_size, max_answer_length, null_score_threshold)
        hidden_dim = resolved_head_dim(hidden_dim, head_norm, encoder, default=0)
        check_activation(activation)
        head_dense, head_norm_layer = head_transform(encoder, hidden_dim, activation, head_norm, "qa")
        output_dense = Dense(
            2, kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
            dtype=encoder.dtype_policy, name="qa_outputs",
        )
        inputs = encoder_inputs(encoder)
        x = encoder(inputs)["sequence_output"]  # (batch, seq, hidden)
        for layer in (head_dense, head_norm_layer):
            x = x if layer is None else layer(x)
        logits = output_dense(x)  # (batch, seq, 2)
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(logits)
        outputs = {
            "start_logits": keras.layers.Lambda(lambda t: t[..., 0], name="start_logits")(logits),  # (batch, seq)
            "end_logits": keras.layers.Lambda(lambda t: t[..., 1], name="end_logits")(logits),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder, self.output_dense = encoder, output_dense
        self.head_dense, self.head_norm = head_dense, head_norm_layer
        self._set_preprocessor(preprocessor)
        self._freeze_unused_pooler()
        self.n_best_size, self.max_answer_length = int(n_best_size), int(max_answer_length)
        self.null_score_threshold = None if null_score_threshold is None else float(null_score_threshold)
        self._record_config(encoder, encoder=encoder, preprocessor=preprocessor, n_best_size=self.n_best_size,
                     max_answer_length=self.max_answer_length, null_score_threshold=self.null_score_threshold,
                     hidden_dim=hidden_dim, activation=activation, head_norm=head_norm)
        self.compile()

    @classmethod
    def _preprocessor_options(cls, sequence_length):
        # transformers' SQuAD settings (stride 128, questions of 64 tokens at
        # 384), scaled down for shorter windows.
        return {"sequence_length": sequence_length, "doc_stride": min(128, sequence_length // 3),
                "max_question_length": min(64, sequence_length // 4)}

    def _targets(self, raw=False):
        return {name: Targets(SEQUENCE, f"{name[:-len('_logits')]} positions")
                for name in ("start_logits", "end_logits")}

    def _holds_raw_examples(self, x, name="x"):
        """Raw text is not what `fit`, `evaluate` and `predict` take here:
        a TypeError that says what they take (packed features pass)."""
        if x is not None and not isinstance(x, _RAW_TYPES):
            return False
        if isinstance(x, (list, tuple)) and not x:
            raise ValueError(f"{name} holds no examples; give at least one.")
        raise TypeError(
            f"{name} must be SQuAD examples (a list of kerasbert.readers.SquadExample, e.g. read_squad(path)), "
            "their QuestionAnsweringWindows (model.windows(examples)) or packed features (a dict); got "
            f"{type(x).__name__} {abbreviated(x)}. For the answers to (questions, contexts), call predict_answers."
        )

    def _default_loss(self):
        # transformers' loss: the mean of the start and end cross-entropies.
        return {name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
                for name in ("start_logits", "end_logits")}

    def compile(self, optimizer="auto", loss="auto", metrics="auto", loss_weights=None, **kwargs):
        if isinstance(metrics, str) and metrics == "auto":
            metrics = {name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                       for name in ("start_logits", "end_logits")}
        if loss_weights is None and isinstance(loss, str) and loss == "auto":
            loss_weights = {"start_logits": 0.5, "end_logits": 0.5}
        super().compile(optimizer, loss, metrics, loss_weights=loss_weights, **kwargs)

    # -- windows -------------------------------------------------------------

    def _check_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                "this QuestionAnswerer has no preprocessor; build it with from_preset or pass "
                "preprocessor=QuestionAnsweringPreprocessor(...)."
            )

    def windows(self, examples):
        """The `QuestionAnsweringWindows` of `examples` (SquadExamples, or a
        pair (questions, contexts)), with answers where the examples have
        them."""
        self._check_preprocessor()
        questions, contexts, starts, texts = _examples(examples)
        return self.preprocessor.windows(questions, contexts, starts, texts)

    def _window_dataset(self, windows, batch_size, shuffle=False, keep_order=False, labels=True):
        dataset = windows.dataset()
        if not labels and windows.start_positions is not None:
            dataset = dataset.map(do_not_convert(lambda features, _: features))
        elif labels:
            dataset = dataset.map(do_not_convert(lambda f, y: (f, {"start_logits": y[0], "end_logits": y[1]})))
        if shuffle:
            dataset = dataset.shuffle(len(windows), reshuffle_each_iteration=True)
        return make_dataset(
            self.preprocessor, dataset, batch_size=batch_size, shuffle=shuffle,
            boundaries=fitted_boundaries(np.count_nonzero(windows.features["padding_mask"], axis=1),
                                         self.preprocessor.sequence_length, self._padded_shapes(),
                                         shape_cost=SHAPE_COST),
            group_by_length=1 if keep_order else GROUP_BY_LENGTH,
            input_names=tuple(self.input),  # the encoder's: no segment ids where it has no token types
        )

    def _answer_windows(self, x, batch_size, shuffle=False, name="x"):
        """SquadExamples or windows with answers -> a dataset of windows and
        their answer positions; anything else unchanged."""
        if isinstance(x, list) and x and all(isinstance(e, SquadExample) for e in x):
            x = self.windows(x)
        if isinstance(x, QuestionAnsweringWindows):
            if x.start_positions is None:
                raise ValueError(f"{name} must be windows with answers: those of SQuAD examples with answers "
                                 "(read_squad), not of (questions, contexts).")
            return self._window_dataset(x, batch_size, shuffle=shuffle)
        return x

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, shuffle=True, **kwargs):
        """`keras.Model.fit`, also on SQuAD examples (`read_squad(path)`) or
        their `QuestionAnsweringWindows`; `validation_data` likewise."""
        epochs = check_int("epochs", epochs, 1)
        windows = self._answer_windows(x, batch_size, shuffle=shuffle)
        if windows is not x:
            x, batch_size = windows, None
        validation_data = self._answer_windows(validation_data, batch_size, name="validation_data")
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data,
                           shuffle=shuffle, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """`keras.Model.evaluate` (the loss and accuracy of the start and end
        positions), also on SQuAD examples or their windows."""
        windows = self._answer_windows(x, batch_size)
        if windows is not x:
            x, batch_size = windows, None
        return super().evaluate(x, y, batch_size=batch_size, **kwargs)

    def _decoding(self, n_best_size, max_answer_length, null_score_threshold):
        """The decoding settings of a call: the given ones over the task's."""
        options = {"n_best_size": self.n_best_size if n_best_size is None else n_best_size,
                   "max_answer_length": self.max_answer_length if max_answer_length is None else max_answer_length,
                   "null_score_threshold": (self.null_score_threshold if null_score_threshold is None
                                            else null_score_threshold)}
        check_decoding_options(**options)
        if options["null_score_threshold"] == math.inf:
            options["null_score_threshold"] = None
        return options

    def predict_answers(self, examples, batch_size=None, n_best_size=None, max_answer_length=None,
                        null_score_threshold=None):
        """Answers to SquadExamples or a pair (questions, contexts) of
        lists: a list of `QuestionAnsweringPrediction` (`text`, character
        `start`/`end` in the context, `score`, `null_score`, `n_best`).
        The decoding settings default to the task's; `null_score_threshold=
        math.inf` always answers with a span."""
        windows = self.windows(examples)
        options = self._decoding(n_best_size, max_answer_length, null_score_threshold)
        outputs = self.predict_batches(self._window_dataset(windows, batch_size, keep_order=True, labels=False))
        return decode_answers(windows, outputs["start_logits"], outputs["end_logits"], **options)

    def evaluate_squad(self, examples, batch_size=None, n_best_size=None, max_answer_length=None,
                       null_score_threshold=None):
        """Official SQuAD exact match and F1 (percent) of `predict_answers`
        on SquadExamples, with the counts scored (`total`); with v2.0
        examples also the HasAns/NoAns scores. The decoding settings default
        to the task's."""
        if not (isinstance(examples, (list, tuple)) and all(isinstance(e, SquadExample) for e in examples)):
            raise TypeError("examples must be a list of kerasbert.readers.SquadExample (read_squad(path)), whose "
                            f"answers are scored; got {type(examples).__name__} {abbreviated(examples)}.")
        predictions = self.predict_answers(examples, batch_size, n_best_size=n_best_size,
                                           max_answer_length=max_answer_length,
                                           null_score_threshold=null_score_threshold)
        return squad_scores({e.id: p.text for e, p in zip(examples, predictions)}, examples)

    # -- serving -------------------------------------------------------------

    def serving_function(self, n_best_size=None, max_answer_length=None, null_score_threshold=None):
        """The exported signature: `question` and `context`, 1-D string
        batches -> `answer` (the best span's text, "" for none), `start`,
        `end` (int32 character offsets into the context, -1 for none) and
        `score` (float32), what `predict_answers` gives with the same
        settings (by default the task's). The windowing, the span search and
        the cutting run in the graph."""
        options = self._decoding(n_best_size, max_answer_length, null_score_threshold)
        self._check_preprocessor()
        preprocessor = self.preprocessor

        def serve(question, context):
            q_ids, _, _ = preprocessor.tokenizer.tokenize_with_offsets(question)  # (examples, None)
            c_ids, c_starts, c_ends = preprocessor.tokenizer.tokenize_with_offsets(context)
            layout = preprocessor.window_layout(
                (q_ids.flat_values, q_ids.row_starts(), q_ids.row_lengths()),
                (c_ids.flat_values, c_ids.row_starts(), c_ids.row_lengths(), c_starts.flat_values,
                 c_ends.flat_values),
                preprocessor.sequence_length,
            )
            # Windows trimmed to the longest one: (windows, width).
            width = tf.reduce_max(tf.concat([tf.reduce_sum(layout["features"]["padding_mask"], axis=1), [1]], 0))
            features = {k: v[:, :width] for k, v in layout["features"].items()}
            layout["offsets"] = layout["offsets"][:, :width]
            logits = self(select_inputs(features, tuple(self.input)), training=False)
            texts = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="replace",
                                                 replacement_char=0xFFFD)  # what the offsets index
            return best_answers(layout, texts, logits["start_logits"], logits["end_logits"], **options)

        return serve, text_signature("question", "context")
