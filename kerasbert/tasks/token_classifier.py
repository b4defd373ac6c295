"""Token classification (NER): word tags from sub-word logits, optionally
through a CRF."""

import numbers
import types
import unicodedata

import keras
import numpy as np
from keras import ops

from kerasbert.layers.crf import CRF, bio_transition_mask
from kerasbert.layers.dense import Dense
from kerasbert.layers.dropout import Dropout
from kerasbert.metrics import TagAccuracy, entity_scores, entity_spans, split_tag
from kerasbert.preprocessing.alignment import TokenClassificationPreprocessor
from kerasbert.preprocessing.datasets import select_inputs
from kerasbert.readers import TokenData
from kerasbert.tasks.fine_tuning import FineTuningTask, check_labels, named_targets
from kerasbert.tasks.head_layers import check_activation, head_transform, resolved_head_dim
from kerasbert.tasks.task import check_encoder, encoder_inputs, text_signature
from kerasbert.utils.checks import abbreviated, check_number
from kerasbert.utils.examples import Targets, check_examples
from kerasbert.utils.optional import tf
from kerasbert.utils.ragged import row_ids

# Punctuation as BERT's pre-tokenizer splits it off words (Unicode's P*
# and the ASCII symbols among it), and the spaces between words that
# trimming it may leave on an entity's edge ("London ." -> "London").
_EDGE = r"[\t\n\f\r\x0b \pZ\pP$+<=>^`|~]"


def _is_edge(character):
    return character in "\t\n\f\r\x0b $+<=>^`|~" or unicodedata.category(character)[0] in "PZ"


def _trimmed(text, start, end):
    """An entity's `[start, end)` in `text` without the punctuation the word
    splitter left on its edges ("London." -> "London", as transformers'
    pipelines give it); an entity of punctuation alone stays whole."""
    first, last = start, end
    while first < last and _is_edge(text[first]):
        first += 1
    while last > first and _is_edge(text[last - 1]):
        last -= 1
    return (first, last) if first < last else (start, end)


def _chunk_tables(labels):
    """Per label id: its prefix code (0 O, 1 B, 2 I, 3 E, 4 S) and the id of
    its entity type among the sorted types; None when the labels are not all
    IOB/IOBES tags."""
    try:
        split = [split_tag(label) for label in labels]
    except ValueError:
        return None
    types = sorted({kind for _, kind in split if kind is not None})
    prefixes = np.array(["OBIES".index(prefix) for prefix, _ in split], np.int32)
    type_ids = np.array([types.index(kind) if kind is not None else -1 for _, kind in split], np.int32)
    return prefixes, type_ids, types


def _entity_tensors(tag_ids, words, starts, ends, texts, tables):
    """In the graph: entity spans from per-word tag ids, chunked as
    `kerasbert.metrics.entity_spans` does (seqeval's default mode).

    Args:
        tag_ids: flat `(words,)` int32 tag ids, -1 read as "O".
        words: the ragged `(batch, words)` words (row structure).
        starts, ends: flat `(words,)` character offsets of the words.
        texts: `(batch,)` the texts the offsets index.
        tables: `_chunk_tables(labels)`.

    Returns:
        Dense `(batch, most entities)` `entity_types`, `entity_texts`
        (padded "") and `entity_starts`, `entity_ends` (padded -1).
    """
    prefixes, type_ids, types = tables
    known = tag_ids >= 0
    prefix = tf.where(known, tf.gather(prefixes, tf.maximum(tag_ids, 0)), 0)  # (words,), 0: O
    kind = tf.where(known, tf.gather(type_ids, tf.maximum(tag_ids, 0)), -1)
    row = row_ids(words)
    first_in_row = tf.range(tf.size(row, out_type=tf.int64)) == tf.gather(words.row_splits, row)
    previous_prefix = tf.where(first_in_row, 0, tf.roll(prefix, 1, axis=0))
    previous_kind = tf.where(first_in_row, -1, tf.roll(kind, 1, axis=0))
    # I-/E- after B-/I- of the same type continues an entity; anything else
    # but O starts one. A continuing word follows a non-O word, so every
    # word of an entity is its start or a continuation.
    continues = ((prefix == 2) | (prefix == 3)) & ((previous_prefix == 1) | (previous_prefix == 2)) \
        & (kind == previous_kind)
    begins = (prefix != 0) & ~continues
    entity = tf.cumsum(tf.cast(begins, tf.int32)) - 1  # (words,): the entity of each member word
    member = begins | continues
    count = tf.reduce_sum(tf.cast(begins, tf.int32))
    index = tf.range(tf.size(prefix))
    first = tf.boolean_mask(index, begins)  # (entities,)
    last = tf.math.unsorted_segment_max(tf.boolean_mask(index, member), tf.boolean_mask(entity, member), count)
    entity_row = tf.gather(row, first)
    start, end = tf.gather(starts, first), tf.gather(ends, last)
    text = tf.strings.substr(tf.gather(texts, entity_row), start, end - start, unit="UTF8_CHAR")
    # Punctuation the word splitter left on the entity's edges (`_trimmed`).
    length = tf.strings.length(text, unit="UTF8_CHAR")
    lead = length - tf.strings.length(tf.strings.regex_replace(text, f"^{_EDGE}+", ""), unit="UTF8_CHAR")
    trail = length - tf.strings.length(tf.strings.regex_replace(text, f"{_EDGE}+$", ""), unit="UTF8_CHAR")
    keep = lead + trail < length  # an entity of punctuation alone stays whole
    lead, trail = tf.where(keep, lead, 0), tf.where(keep, trail, 0)
    start, end = start + lead, end - trail
    text = tf.strings.substr(text, lead, length - lead - trail, unit="UTF8_CHAR")

    def padded(values, default):  # (entities,) -> (batch, most entities)
        return tf.RaggedTensor.from_value_rowids(values, entity_row, nrows=words.nrows()).to_tensor(default)

    return {"entity_types": padded(tf.gather(tf.constant(types), tf.gather(kind, first)), ""),
            "entity_texts": padded(text, ""), "entity_starts": padded(start, -1), "entity_ends": padded(end, -1)}


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
        hidden_dim: width of a dense layer between the encoder and the
            output layer; None: the encoder's `hidden_dim` with
            `head_norm`, else none (0).
        activation: that layer's activation.
        head_norm: a LayerNorm after that layer (ModernBERT's heads; its
            presets' default).
    """

    # Its heads' weights in Hugging Face checkpoints: `...ForTokenClassification`
    # (`kerasbert.convert`).
    huggingface_head = "token_classification"

    preprocessor_class = TokenClassificationPreprocessor
    per_token_outputs = True
    raw_word_lists = True
    huggingface_architecture = "TokenClassification"

    def __init__(self, encoder, num_classes=None, labels=None, crf=False, preprocessor=None, dropout=0.1,
                 hidden_dim=None, activation="gelu", head_norm=False, **kwargs):
        check_encoder(encoder)
        num_classes, labels = check_labels(num_classes, labels, example="['O', 'B-PER', 'I-PER']")
        if not isinstance(crf, bool):
            raise TypeError(f"crf must be True or False; got {crf!r}.")
        check_number("dropout", dropout, 0, 1, high_open=True)
        hidden_dim = resolved_head_dim(hidden_dim, head_norm, encoder, default=0)
        check_activation(activation)
        policy = encoder.dtype_policy

        # Layers.
        head_dense, head_norm_layer = head_transform(encoder, hidden_dim, activation, head_norm, "classifier")
        output_dense = Dense(
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
        for layer in (head_dense, head_norm_layer):
            x = x if layer is None else layer(x)
        x = Dropout(dropout, dtype=policy, name="classifier_dropout")(x)
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(output_dense(x))
        if crf_layer is not None:
            # Built here so its weights exist; it runs in the loss and in decoding.
            crf_layer.build(logits.shape)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # Config.
        self.encoder, self.output_dense, self.crf = encoder, output_dense, crf_layer
        self.head_dense, self.head_norm = head_dense, head_norm_layer
        self.num_classes, self.labels = num_classes, labels
        self._set_preprocessor(preprocessor)
        self._freeze_unused_pooler()
        self._record_config(encoder, encoder=encoder, num_classes=num_classes, labels=labels, crf=crf,
                     preprocessor=preprocessor, dropout=dropout, hidden_dim=hidden_dim, activation=activation,
                     head_norm=head_norm)
        self.compile()

    @classmethod
    def _huggingface_arguments(cls, head_config):
        arguments = super()._huggingface_arguments(head_config)
        id2label = head_config.get("id2label") or {}
        if id2label:
            return {**arguments, "labels": [id2label[k] for k in sorted(id2label, key=int)]}
        return {**arguments, "num_classes": int(head_config.get("num_labels", 2))}

    def _examples_and_targets(self, x, y, names):
        """`read_conll`'s data: its words, its tags as this task's ids (a
        tag the task does not know: a ValueError naming file and line); tag
        names as targets: their ids."""
        if isinstance(x, TokenData):
            if y is not None:
                raise ValueError(f"{names[1]} must be None when {names[0]} is a TokenData (read_conll): its tags "
                                 "are the targets.")
            return x.words, x.tag_ids(self.labels)
        return x, named_targets(y, self.labels, names[1], per_word=True)

    def _targets(self, raw=False):
        # Raw examples: a tag id per word (negative: left out); packed: per position.
        return Targets(self.num_classes, "tag ids", rank=2, per_word=raw)

    def _check_tokenized(self, tokenized, y, sample_weight, names):
        """One tag (and weight, when given per word) per word of each example."""
        words = tokenized.row_lengths().numpy()  # (examples,): words per example
        for name, values in zip(names[1:], (y, sample_weight)):
            if values is None or name == names[2] and not any(isinstance(v, (list, tuple, np.ndarray)) for v in values):
                continue  # no values, or weights per example
            if isinstance(values, np.ndarray) and values.dtype != object:  # dense rows: the first values of each
                if values.ndim == 2 and values.shape[1] < words.max(initial=0):
                    i = int(np.argmax(words > values.shape[1]))
                    raise ValueError(f"{name} has {values.shape[1]} columns but example {i} of x has {words[i]} "
                                     "words; give one value per word.")
                continue
            for i, (row, count) in enumerate(zip(values, words)):
                if len(row) != count:
                    raise ValueError(f"{name}[{i}] has {len(row)} values but example {i} of x has {count} words "
                                     f"(x is split at whitespace); give one value per word.")

    def _default_loss(self):
        # Averaged over the labelled words, not over every position.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto", **kwargs):
        """As `FineTuningTask.compile`; the default metric is the accuracy
        over labelled words (weighted by the targets' sample weights) of
        the predicted tags: with a CRF, its Viterbi-decoded ones."""
        default = isinstance(weighted_metrics, str) and weighted_metrics == "auto"
        # Updated where the loss is computed (`compute_loss`), where every
        # backend's step can read the CRF's weights (JAX's metrics step
        # cannot); held in a read-only view, listed by `metrics` alone.
        self._tag_accuracy = types.MappingProxyType(
            {"metric": TagAccuracy(None if self.crf is None else self.crf.__call__)} if default else {})
        super().compile(optimizer, loss, metrics, weighted_metrics=None if default else weighted_metrics, **kwargs)

    @property
    def metrics(self):
        tracked = getattr(self, "_tag_accuracy", None) or {}
        return [*super().metrics, *tracked.values()]

    def get_compile_config(self):
        config = super().get_compile_config()
        if config is not None and getattr(self, "_tag_accuracy", None):
            config = {**config, "weighted_metrics": "auto"}  # made again with the task's CRF
        return config

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if y is not None and getattr(self, "_tag_accuracy", None):
            self._tag_accuracy["metric"].update_state(y, y_pred, sample_weight)
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
        check_examples(x, word_lists=True, pairs=False)
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

    def serving_function(self):
        """The exported signature: `text`, a 1-D string batch (words are the
        runs between whitespace) -> per word, padded to the batch's most
        words, `words` (""), `word_starts`, `word_ends` (character offsets,
        -1) and `tag_ids` (int32, -1 also for words cut off by
        `sequence_length`); with `labels`, `tags` (names, "O" for cut-off
        words) and, for IOB/IOBES labels, the entities padded to the batch's
        most: `entity_types`, `entity_texts`, `entity_starts`,
        `entity_ends`. A CRF decodes with Viterbi in the graph."""
        self._check_preprocessor()
        tables = _chunk_tables(self.labels) if self.labels is not None else None

        def serve(text):
            features, words, first_token, starts, ends, texts = self.preprocessor.text_features(text)
            logits = self(select_inputs(features, tuple(self.input)), training=False)  # (batch, seq, tags)
            kept = first_token >= 0  # (words,)
            at = tf.stack([row_ids(words), tf.maximum(first_token, 0)], axis=1)  # (words, 2)
            if self.crf is None:
                best = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (batch, seq)
            else:  # Viterbi over the first sub-words
                marks = tf.scatter_nd(tf.boolean_mask(at, kept), tf.ones_like(tf.boolean_mask(first_token, kept)),
                                      tf.shape(logits, out_type=tf.int64)[:2])
                best = tf.cast(self.crf(logits, marks > 0), tf.int32)
            tag_ids = tf.where(kept, tf.gather_nd(best, at), -1)  # (words,)

            def padded(values, default):  # (words,) -> (batch, most words)
                return words.with_flat_values(values).to_tensor(default)

            outputs = {"words": words.to_tensor(""), "word_starts": padded(starts, -1),
                       "word_ends": padded(ends, -1), "tag_ids": padded(tag_ids, -1)}
            if self.labels is not None:
                names = tf.gather(tf.constant(self.labels), tf.maximum(tag_ids, 0))
                outputs["tags"] = padded(tf.where(kept, names, "O"), "")
            if tables is not None:
                outputs.update(_entity_tensors(tag_ids, words, starts, ends, texts, tables))
            return outputs

        return serve, text_signature("text")

    def _names(self, tag_ids):
        if self.labels is None:
            raise ValueError("entity spans need tag names: build the TokenClassifier with labels=[...].")
        return ["O" if t < 0 else self.labels[t] for t in tag_ids]

    def predict_entities(self, x, batch_size=None):
        """Entities in each example: a list of dicts `{"type", "start",
        "end", "text", "words"}` per example, with `start`/`end` character
        offsets into the text (for word lists, into the words joined by
        single spaces) and `words` the `[first, last + 1)` word range.
        Words are split at whitespace; punctuation they carry on the
        entity's edges is left out of it ("London." gives "London")."""
        self._check_preprocessor()
        check_examples(x, word_lists=True, pairs=False)
        if self.labels is None:
            self._names([])
        alignment = self.preprocessor.word_alignment(x)
        results = []
        for tags, example in zip(self.predict_tags(x, batch_size=batch_size), alignment):
            spans = example["word_spans"]
            text = example.get("text")
            entities = []
            for kind, first, last in entity_spans(self._names(tags)):
                start, end = spans[first][0], spans[last - 1][1]
                if text is not None:
                    start, end = _trimmed(text, start, end)
                entities.append({"type": kind, "start": int(start), "end": int(end),
                                 "text": text[start:end] if text is not None else None, "words": (first, last)})
            results.append(entities)
        return results

    def evaluate_entities(self, words, tags=None, batch_size=None):
        """Entity-level precision, recall and F1 (seqeval's default
        semantics, see `kerasbert.metrics.entity_scores`) of the predicted
        tags of `words` against `tags` (lists of tag names, or of ids), or
        of a `read_conll` file's data against its tags."""
        self._names([])  # tag names needed
        if isinstance(words, TokenData):  # read_conll's: its tags checked against the labels, by file and line
            if tags is not None:
                raise ValueError("tags must be None when words is a TokenData (read_conll): its tags are scored.")
            words.tag_ids(self.labels)
            words, tags = words.words, words.tags
        check_examples(words, "words", word_lists=True, pairs=False)
        if isinstance(tags, (str, bytes)) or not isinstance(tags, (list, tuple, np.ndarray)) or len(tags) != len(words):
            raise ValueError(f"tags must hold one list of tags per example of words ({len(words)} examples); got "
                             f"{abbreviated(tags)}.")
        predicted = [self._names(t) for t in self.predict_tags(words, batch_size=batch_size)]
        return entity_scores(self._tag_names(tags, [len(row) for row in predicted]), predicted)

    def _tag_names(self, tags, words):
        """`tags` (per example, a list of tag names or ids) as names, checked:
        one per word (`words` per example), each one of the labels."""
        names = []
        for i, (row, count) in enumerate(zip(tags, words)):
            if isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
                raise TypeError(f"tags[{i}] must be a list of tags, one per word; got {abbreviated(row)}.")
            if len(row) != count:
                raise ValueError(f"tags[{i}] has {len(row)} tags but example {i} of words has {count} words; give "
                                 "one tag per word.")
            names.append([])
            for j, tag in enumerate(np.asarray(row).tolist() if isinstance(row, np.ndarray) else row):
                if isinstance(tag, str) and tag in self.labels:
                    names[-1].append(tag)
                elif isinstance(tag, numbers.Integral) and not isinstance(tag, bool) and 0 <= tag < self.num_classes:
                    names[-1].append(self.labels[tag])
                else:
                    raise ValueError(f"tags[{i}][{j}]={tag!r} is neither one of the labels {self.labels} nor a tag id "
                                     f"in [0, {self.num_classes}).")
        return names
