"""BERT's and ALBERT's pretraining: masked LM plus a sentence-level task."""

import keras
from keras import ops

from kerasbert.tasks.masked_lm import (
    accuracy,
    default_optimizer,
    mask_targets,
    masked_lm_graph,
    masked_lm_loss,
)
from kerasbert.tasks.task import Task
from kerasbert.utils.examples import Targets

SENTENCE_TASKS = ("nsp", "sop", None)


def _unscaled_for_replicas(loss):
    """Under `tf.distribute` Keras divides each replica's loss by the number
    of replicas; its loss trackers multiply it back."""
    if keras.backend.backend() != "tensorflow":
        return loss
    import tensorflow as tf

    return loss * ops.cast(tf.distribute.get_strategy().num_replicas_in_sync, loss.dtype)


@keras.saving.register_keras_serializable(package="kerasbert")
class BertPretrainer(Task):
    """Masked LM plus next-sentence (BERT) or sentence-order (ALBERT)
    prediction from the pooled output.

    Inputs are `MaskedLM`'s. Outputs are a dict: `"mlm"`, logits
    `(batch, num_masked, vocabulary_size)` at the masked positions, and,
    unless `sentence_task=None`, `"nsp"` or `"sop"`, logits `(batch, 2)`
    (label 0: the natural order, as in transformers). `fit` takes `y =
    {"mlm": mask_ids, "nsp": labels}` and `sample_weight = {"mlm":
    mask_weights, "nsp": ones}` (what `kerasbert.preprocessing.
    pretraining_dataset` yields), and its log shows every objective apart:
    `loss, mlm_loss, mlm_accuracy, nsp_loss, nsp_accuracy`.

    Args:
        encoder: a `kerasbert.Encoder`.
        sentence_task: "nsp", "sop" or None (masked LM only, as RoBERTa).

    Examples:
    >>> import kerasbert
    >>> encoder = kerasbert.Encoder(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> sorted(kerasbert.BertPretrainer(encoder, sentence_task="sop").output)
    ['mlm', 'sop']
    """

    # Its heads' weights in Hugging Face checkpoints: `...ForPreTraining` (`...ForMaskedLM` without a sentence task)
    # (`kerasbert.convert`).
    huggingface_head = "masked_lm"

    def __init__(self, encoder, sentence_task="nsp", **kwargs):
        if sentence_task not in SENTENCE_TASKS:
            raise ValueError(
                f"sentence_task={sentence_task!r} is not supported; expected "
                "'nsp' (next-sentence prediction), 'sop' (sentence order) or None."
            )
        inputs, encoder_outputs, head, logits = masked_lm_graph(encoder)
        outputs = {"mlm": logits}
        sentence_head = None
        if sentence_task:
            sentence_head = keras.layers.Dense(
                2,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
                dtype=encoder.dtype_policy,
                name=f"{sentence_task}_head",
            )
            outputs[sentence_task] = sentence_head(encoder_outputs["pooled_output"])  # (batch, 2)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.encoder = encoder
        self.sentence_task = sentence_task
        self.mlm_head = head
        self.sentence_head = sentence_head
        # With one objective Keras logs no per-output loss: `mlm_loss` is
        # then tracked from the loss itself (see `compute_loss`), not
        # computed a second time from the logits.
        self.mlm_loss_tracker = None if sentence_task else keras.metrics.Mean(name="mlm_loss")
        self._record_config(encoder, encoder=encoder, sentence_task=sentence_task)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        if self.mlm_loss_tracker is not None:
            # As Keras tracks `loss` (and each output's loss when there are
            # several): the replica's loss, unscaled, weighted by batch size.
            batch = ops.shape(y_pred["mlm"])[0]
            self.mlm_loss_tracker.update_state(_unscaled_for_replicas(loss), sample_weight=batch)
        return loss

    def _targets(self, raw=False):
        targets = {"mlm": mask_targets(self.encoder)}
        if self.sentence_task:
            order = "next-sentence" if self.sentence_task == "nsp" else "sentence-order"
            targets[self.sentence_task] = Targets(2, f"{order} labels (0: the natural order)")
        return targets

    def compile(self, optimizer="auto", loss="auto", weighted_metrics="auto", **kwargs):
        """`compile` with pretraining defaults for every argument left "auto":
        AdamW, cross-entropy per objective (the masked one averaged over real
        targets), accuracy per objective."""
        objectives = ["mlm"] + ([self.sentence_task] if self.sentence_task else [])
        if loss == "auto":
            loss = {name: masked_lm_loss() for name in objectives}
        if weighted_metrics == "auto":
            weighted_metrics = {name: [accuracy()] for name in objectives}
            if not self.sentence_task:
                # Keras prefixes metric names with the output's only when
                # there are several outputs: name it here.
                weighted_metrics = {"mlm": [accuracy(name="mlm_accuracy")]}
        super().compile(
            optimizer=default_optimizer() if optimizer == "auto" else optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )
