"""Token classification (NER): word tags from sub-word logits, optionally
through a CRF."""

import keras
import numpy as np
from keras import ops

from kerasbert.layers.crf import CRF, bio_transition_mask
from kerasbert.metrics import entity_scores, entity_spans
from kerasbert.preprocessing.alignment import TokenClassificationPreprocessor
from kerasbert.tasks.fine_tuning import FineTuningTask
from kerasbert.tasks.task import check_encoder, encoder_inputs


def _check_labels(num_classes, labels):
    if labels is not None:
        if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
            raise TypeError(f"labels must be a list of tag names such as ['O', 'B-PER', 'I-PER']; got {labels!r}.")
        labels = list(labels)
        if len(set(labels)) != len(labels) or not labels:
            raise ValueError(f"labels must be distinct and non-empty; got {labels}.")
        if num_classes is not None and num_classes != len(labels):
            raise ValueError(f"num_classes={num_classes} but {len(labels)} labels were given: {labels}.")
        return len(labels), labels
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(
            f"Give num_classes (a positive integer) or labels (tag names); got num_classes={num_classes!r}."
        )
    return num_classes, None


def _is_bio(labels):
    return labels is not None and all(label == "O" or label[:2] in ("B-", "I-") for label in labels)


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenClassifier(FineTuningTask):
    """Tags every word of a text (named entities, parts of speech, ...).

    Labels are per word; each word's label goes to its first sub-word and
    the other sub-words are left out of the loss (`TokenClassificationPreprocessor`
    builds the targets and weights). The output is float32 logits
    `(batch, seq, num_classes)` per sub-word.

    With `crf=True` a linear-chain CRF (`kerasbert.layers.CRF`) links the
    first sub-words of consecutive words: training minimises its negative
    log-likelihood, and decoding is Viterbi in the graph. With IOB2 `labels`
    the CRF forbids invalid transitions (`I-X` after anything but `B-X` or
    `I-X`), so decoded tag sequences are always valid.

    `fit` takes raw strings or pre-split words (a list of word lists, e.g.
    `kerasbert.readers.read_conll(...).words`) with per-word tag ids;
    `predict_tags` returns word-level tags and `predict_entities` entity
    spans with character offsets; `evaluate_entities` scores entities as
    seqeval does.

    Args:
        encoder: a `kerasbert.Encoder`.
        num_classes: number of tags (or give `labels`).
        labels: the tag names, e.g. `["O", "B-PER", "I-PER", ...]`.
        crf: add a CRF output layer.
        preprocessor: a `TokenClassificationPreprocessor`, or None.
        dropout: dropout before the output layer.
    """

    preprocessor_class = TokenClassificationPreprocessor
    per_token_outputs = True
    huggingface_architecture = "TokenClassification"

    def __init__(self, encoder, num_classes=None, labels=None, crf=False, preprocessor=None, dropout=0.1, **kwargs):
        check_encoder(encoder)
        num_classes, labels = _check_labels(num_classes, labels)
        if not isinstance(crf, bool):
            raise TypeError(f"crf must be True or False; got {crf!r}.")
        policy = encoder.dtype_policy

        # Layers.
        output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
            dtype=policy, name="classifier",
        )
        crf_layer = None
        if crf:
            constraints = {}
            if _is_bio(labels):
                transitions, starts = bio_transition_mask(labels)
                constraints = {"allowed_transitions": transitions, "allowed_starts": starts}
            crf_layer = CRF(num_classes, name="crf", **constraints)

        # Graph.
        inputs = encoder_inputs(encoder)
        x = encoder(inputs)["sequence_output"]  # (batch, seq, hidden)
        x = keras.layers.Dropout(dropout, dtype=policy, name="classifier_dropout")(x)
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(output_dense(x))
        if crf_layer is not None:
            # Built here so its weights exist; it runs in the loss and in decoding.
            crf_layer.build(logits.shape)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # Config.
        self.encoder, self.output_dense, self.crf = encoder, output_dense, crf_layer
        self.num_classes, self.labels = num_classes, labels
        self._set_preprocessor(preprocessor)
        self._freeze_unused_pooler()
        self._finish(encoder, encoder=encoder, num_classes=num_classes, labels=labels, crf=crf,
                     preprocessor=preprocessor, dropout=dropout)
        self.compile()

    @classmethod
    def _huggingface_arguments(cls, head_config):
        id2label = head_config.get("id2label") or {}
        if id2label:
            return {"labels": [id2label[k] for k in sorted(id2label, key=int)]}
        return {"num_classes": int(head_config.get("num_labels", 2))}

    def _default_loss(self):
        # Averaged over the labelled words, not over every position.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto", **kwargs):
        """As `FineTuningTask.compile`; the default metric is the accuracy
        over labelled words (weighted by the targets' sample weights)."""
        if isinstance(weighted_metrics, str) and weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer, loss, metrics, weighted_metrics=weighted_metrics, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if self.crf is None or y is None:
            return super().compute_loss(x, y, y_pred, sample_weight, training=training)
        # The chain runs over the labelled positions: first sub-words.
        mask = ops.greater(sample_weight, 0) if sample_weight is not None else None
        loss = ops.mean(self.crf.negative_log_likelihood(y_pred, y, mask))
        for extra in self.losses:
            loss = loss + ops.cast(extra, loss.dtype)
        return loss

    # -- words and entities ------------------------------------------------

    def _check_preprocessor(self):
        if self.preprocessor is None:
            raise ValueError(
                "this TokenClassifier has no preprocessor; build it with from_preset or pass "
                "preprocessor=TokenClassificationPreprocessor(...)."
            )

    def predict_tags(self, x, batch_size=None, **kwargs):
        """Word-level tag ids: for each example an int array with one tag per
        word (-1 for words cut off by `sequence_length`). `x`: raw strings
        (words split at whitespace) or lists of words."""
        self._check_preprocessor()
        logits = self.predict(x, batch_size=batch_size, verbose=kwargs.pop("verbose", 0), **kwargs)  # (n, seq, tags)
        alignment = self.preprocessor.word_alignment(x)
        if self.crf is None:
            best = logits.argmax(-1)  # (n, seq)
        else:  # Viterbi over each example's first sub-words, all examples at once
            mask = np.zeros(logits.shape[:2], bool)
            for row, example in enumerate(alignment):
                first = np.asarray(example["first_token"])
                mask[row, first[first >= 0]] = True
            best = ops.convert_to_numpy(self.crf(logits, mask))
        tags = []
        for row, example in zip(best, alignment):
            first = np.asarray(example["first_token"])
            tags.append(np.where(first >= 0, row[np.maximum(first, 0)], -1).astype(np.int32))
        return tags

    def _names(self, tag_ids):
        if self.labels is None:
            raise ValueError("entity spans need tag names: build the TokenClassifier with labels=[...].")
        return ["O" if t < 0 else self.labels[t] for t in tag_ids]

    def predict_entities(self, x, batch_size=None):
        """Entities in each example: a list of dicts `{"type", "start",
        "end", "text", "words"}` per example, with `start`/`end` character
        offsets into the text (for word lists, into the words joined by
        single spaces) and `words` the `[first, last + 1)` word range."""
        alignment = self.preprocessor.word_alignment(x) if self.preprocessor is not None else None
        results = []
        for tags, example in zip(self.predict_tags(x, batch_size=batch_size), alignment):
            spans = example["word_spans"]
            text = example.get("text")
            entities = []
            for kind, first, last in entity_spans(self._names(tags)):
                start, end = spans[first][0], spans[last - 1][1]
                entities.append({"type": kind, "start": int(start), "end": int(end),
                                 "text": text[start:end] if text is not None else None, "words": (first, last)})
            results.append(entities)
        return results

    def evaluate_entities(self, words, tags, batch_size=None):
        """Entity-level precision, recall and F1 (seqeval's default
        semantics, see `kerasbert.metrics.entity_scores`) of the predicted
        tags of `words` against `tags` (lists of tag names, or of ids)."""
        predicted = [self._names(t) for t in self.predict_tags(words, batch_size=batch_size)]
        truth = [[self.labels[t] if not isinstance(t, str) else t for t in row] for row in tags]
        return entity_scores(truth, predicted)
