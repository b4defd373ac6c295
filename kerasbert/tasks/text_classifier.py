"""Sentence and sentence-pair classification (and regression)."""

import keras
from keras import ops

from kerasbert.convert.heads import CLASSIFIER_ACTIVATIONS, NORMALIZED_HEADS
from kerasbert.layers.dropout import Dropout
from kerasbert.layers.pooling import POOLINGS, Pooling
from kerasbert.preprocessing.preprocessors import TextPreprocessor
from kerasbert.presets import preset_pooling
from kerasbert.readers import TextData
from kerasbert.tasks.fine_tuning import FineTuningTask, check_labels, named_targets
from kerasbert.tasks.head_layers import check_activation, head_transform, resolved_head_dim
from kerasbert.tasks.task import EncoderAtPositions, check_encoder, encoder_inputs, text_signature
from kerasbert.utils.checks import check_number
from kerasbert.utils.examples import Targets
from kerasbert.utils.optional import tf


def _apply(layers, x):
    for layer in layers:
        x = layer(x)
    return x


@keras.saving.register_keras_serializable(package="kerasbert")
class TextClassifier(FineTuningTask):
    """Classifies single sentences or sentence pairs, or scores them
    (`num_classes=1`: regression, STS-B style). Outputs float32 logits
    `(batch, num_classes)`.

    With `pooling="cls"` (the default) the head reads the first token
    (`[CLS]`/`<s>`): with the encoder's pooler (BERT, ALBERT) it is dropout
    and a dense layer on `pooled_output`; without one (RoBERTa, ELECTRA)
    dropout, a dense layer of `hidden_dim` with `activation`, dropout and
    the output layer on the first token of `sequence_output` — the heads of
    transformers' `...ForSequenceClassification`, whose weights
    `from_preset` keeps. With `pooling="mean"` it reads the mean of
    `sequence_output` over the real tokens instead: what sentence
    embedders such as all-MiniLM-L6-v2 were trained to make meaningful (and
    their presets' default here), where their `[CLS]` pooler never was.

    `fit`, `evaluate` and `predict` take raw strings (a list, or a tuple
    `(first, second)` of two lists for pairs) through `preprocessor`; the
    default `compile` is the fine-tuning recipe with sparse categorical
    cross-entropy and accuracy (mean squared error for regression).

    Args:
        encoder: a `kerasbert.Encoder`.
        num_classes: number of classes, or 1 for regression (or give
            `labels`).
        preprocessor: a `TextPreprocessor` (or None: inputs are packed
            features).
        dropout: dropout before the dense layers.
        hidden_dim: width of the head's own dense layer; None: none when the
            encoder has a pooler or `pooling="mean"` (unless `head_norm`),
            else the encoder's `hidden_dim`.
        activation: that layer's activation.
        head_norm: a LayerNorm after that layer (ModernBERT's head: dense,
            activation, LayerNorm; ModernBERT presets' default).
        pooling: "cls" (the first token) or "mean" (over real tokens).
        labels: the class names in id order (e.g. `["negative",
            "positive"]`), or None. The exported model returns them
            (`label_name`) and `to_huggingface` writes them as `id2label`.

    Examples:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.Encoder(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> model = kerasbert.TextClassifier(encoder, num_classes=3)
    >>> logits = model.predict({"token_ids": np.array([[2, 7, 4, 3]]),
    ...                         "segment_ids": np.zeros((1, 4), "int32"),
    ...                         "padding_mask": np.ones((1, 4), "int32")}, verbose=0)
    >>> logits.shape
    (1, 3)
    """

    # Its heads' weights in Hugging Face checkpoints: `...ForSequenceClassification`
    # (`kerasbert.convert`).
    huggingface_head = "sequence_classification"

    preprocessor_class = TextPreprocessor
    huggingface_architecture = "SequenceClassification"

    def __init__(self, encoder, num_classes=None, preprocessor=None, dropout=0.1, hidden_dim=None,
                 activation="tanh", pooling="cls", labels=None, head_norm=False, **kwargs):
        check_encoder(encoder)
        if num_classes is None and labels is None:
            raise ValueError("Give num_classes (a positive integer, 1 for regression) or labels (class names).")
        num_classes, labels = check_labels(num_classes, labels, example="['negative', 'positive']")
        if labels is not None and num_classes == 1:
            raise ValueError(f"labels={labels} names a single class; classification needs two or more "
                             "(regression, num_classes=1, has no class names).")
        check_number("dropout", dropout, 0, 1, high_open=True)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}; expected one of {POOLINGS}.")
        hidden_dim = resolved_head_dim(hidden_dim, head_norm, encoder,
                                       default=0 if encoder.pooler or pooling == "mean" else encoder.hidden_dim)
        check_activation(activation)
        policy = encoder.dtype_policy
        initializer = keras.initializers.TruncatedNormal(stddev=encoder.initializer_range)

        # Layers.
        head_dense, head_norm_layer = head_transform(encoder, hidden_dim, activation, head_norm, "classifier")
        output_dense = keras.layers.Dense(num_classes, kernel_initializer=initializer, dtype=policy,
                                          name="classifier")

        # Graph.
        inputs = encoder_inputs(encoder)
        if pooling == "mean":
            outputs = encoder(inputs)
            x = Pooling("mean", dtype=policy, name="pooling")(outputs["sequence_output"], inputs["padding_mask"])
        else:
            # Only the first token is read: the last layer runs at that row alone.
            first = ops.zeros_like(inputs["padding_mask"][:, :1])  # (batch, 1)
            outputs = EncoderAtPositions(encoder, name=f"{encoder.name}_at_first_token")(inputs, first)
            # (batch, hidden): the pooler's, or the first token
            x = outputs["pooled_output"] if head_dense is None else outputs["sequence_output"][:, 0, :]
        # The head, from the pooled vector (..., hidden) to the logits (..., num_classes).
        head = []
        if head_dense is not None:
            head = [Dropout(dropout, dtype=policy, name="classifier_dense_dropout"), head_dense]
            head += [head_norm_layer] if head_norm_layer is not None else []
        head += [Dropout(dropout, dtype=policy, name="classifier_dropout"), output_dense,
                 keras.layers.Activation("linear", dtype="float32", name="logits")]
        logits = _apply(head, x)  # (batch, num_classes)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # Config.
        self.encoder = encoder
        self.num_classes, self.labels = num_classes, labels
        self.head_dense, self.head_norm, self.output_dense = head_dense, head_norm_layer, output_dense
        self._head = lambda x: _apply(head, x)  # a function: not tracked, nothing saved
        self._set_preprocessor(preprocessor)
        if pooling == "mean" or head_dense is not None:  # the pooler is not read
            self._freeze_unused_pooler()
        self._record_config(encoder, encoder=encoder, num_classes=num_classes, preprocessor=preprocessor, dropout=dropout,
                     hidden_dim=hidden_dim, activation=activation, pooling=pooling, labels=labels,
                     head_norm=head_norm)
        self.compile()

    @classmethod
    def _preset_arguments(cls, preset, family, kwargs):
        if family in CLASSIFIER_ACTIVATIONS:
            kwargs.setdefault("activation", CLASSIFIER_ACTIVATIONS[family])
        if "pooling" in preset_pooling(preset):  # a sentence embedder: its own pooling
            kwargs.setdefault("pooling", preset_pooling(preset)["pooling"])
        return super()._preset_arguments(preset, family, kwargs)

    @classmethod
    def _huggingface_arguments(cls, head_config):
        id2label = head_config.get("id2label") or {}
        names = [str(id2label[k]) for k in sorted(id2label, key=int)]
        num_classes = int(head_config.get("num_labels") or len(names) or 2)
        # transformers' LABEL_0, LABEL_1, ... are no names.
        arguments = super()._huggingface_arguments(head_config)
        if head_config.get("model_type") in NORMALIZED_HEADS:
            arguments["pooling"] = head_config.get("classifier_pooling", "cls")
        if len(names) == num_classes > 1 and names != [f"LABEL_{i}" for i in range(num_classes)]:
            return {**arguments, "labels": names}
        return {**arguments, "num_classes": num_classes}

    def _packed_outputs(self, sequence_output, padding_mask, documents):
        pooling = self._task_config["pooling"]
        pool = Pooling(pooling, documents=documents, dtype=self.encoder.dtype_policy)
        x = pool(sequence_output, padding_mask)  # (batch, documents, hidden)
        if pooling == "cls" and self.head_dense is None and self.encoder.pooler:
            x = self.encoder.pooler_dense(x)  # as `pooled_output`
        return self._head(x)  # (batch, documents, num_classes)

    def _examples_and_targets(self, x, y, names):
        """`read_glue_tsv`'s data: its texts, its labels as this task's ids
        (by name where both have names); class names as targets: their ids."""
        if isinstance(x, TextData):
            if y is not None:
                raise ValueError(f"{names[1]} must be None when {names[0]} is a TextData (read_glue_tsv): its "
                                 "labels are the targets.")
            if x.y is None:
                raise ValueError(f"{names[0]} holds no labels (read_glue_tsv without label_column).")
            mapped = x.label_ids(self.labels) if self.labels is not None and x.label_names is not None else x.y
            return x.x, mapped
        return x, named_targets(y, self.labels, names[1])

    def _targets(self, raw=False):
        if self.num_classes == 1:
            return Targets(None, "scores")
        return Targets(self.num_classes, "class ids")

    def _default_loss(self):
        if self.num_classes == 1:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def _default_metrics(self):
        if self.num_classes == 1:
            return [keras.metrics.MeanAbsoluteError(name="mean_absolute_error")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def serving_function(self, pairs=False):
        """The exported signature: `text` (and `text_pair` with `pairs=True`),
        1-D string batches -> `logits` (batch, num_classes), and for
        classification `probabilities` (softmax), `label` (int32 argmax)
        and, with `labels`, `label_name` (its name)."""
        if not isinstance(pairs, bool):
            raise TypeError(f"pairs must be True or False; got {pairs!r}.")

        def serve(*texts):
            logits = self._serving_outputs(texts if pairs else texts[0])
            if self.num_classes == 1:
                return {"logits": logits}
            label = keras.ops.cast(keras.ops.argmax(logits, axis=-1), "int32")
            outputs = {"logits": logits, "probabilities": keras.ops.softmax(logits, axis=-1), "label": label}
            if self.labels is not None:
                outputs["label_name"] = tf.gather(tf.constant(self.labels), label)
            return outputs

        return serve, text_signature(*(("text", "text_pair") if pairs else ("text",)))
