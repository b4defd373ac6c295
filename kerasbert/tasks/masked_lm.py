"""Masked language modelling: logits at the masked positions only."""

import keras

from kerasbert.layers.heads import MaskedLMHead
from kerasbert.tasks.task import Task, check_encoder, encoder_inputs


def masked_lm_graph(encoder):
    """Inputs (the encoder's plus `mask_positions`), the encoder's outputs and
    the tied head's logits `(batch, num_masked, vocabulary_size)`."""
    check_encoder(encoder)
    inputs = encoder_inputs(encoder)
    inputs["mask_positions"] = keras.Input((None,), dtype="int32", name="mask_positions")
    outputs = encoder({k: v for k, v in inputs.items() if k != "mask_positions"})
    head = MaskedLMHead(
        encoder.token_embedding,
        activation=encoder.activation,
        layer_norm_epsilon=encoder.layer_norm_epsilon,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
        dtype=encoder.dtype_policy,
        name="mlm_head",
    )
    logits = head(outputs["sequence_output"], inputs["mask_positions"])
    return inputs, outputs, head, logits


def masked_lm_loss():
    """Cross-entropy averaged over the real targets (`mask_weights` > 0), not
    over all `max_predictions` slots."""
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction="mean_with_sample_weight"
    )


def accuracy():
    return keras.metrics.SparseCategoricalAccuracy(name="accuracy")


def default_optimizer(learning_rate=1e-4):
    """AdamW, weight decay 0.01 on everything but biases and LayerNorm,
    global-norm clipping at 1.0."""
    from kerasbert.optimizers import pretraining_optimizer

    return pretraining_optimizer("adamw", learning_rate=learning_rate, total_steps=None)


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLM(Task):
    """An encoder with a masked-LM head whose decoder is the token embedding.

    Inputs are the encoder's (`token_ids`, `segment_ids` when it has
    segments, `padding_mask`) plus `mask_positions (batch, num_masked)`; the
    output is float32 logits `(batch, num_masked, vocabulary_size)`, computed
    only at those positions. Train it with `fit` on `(x, mask_ids,
    mask_weights)`, e.g. what `kerasbert.preprocessing.MaskedLMPreprocessor`
    or `pretraining_dataset(..., objective="mlm")` yield; the default
    `compile` averages the loss and accuracy over the real targets only.

    Args:
        encoder: a `kerasbert.Encoder`.

    Examples:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.Encoder(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> model = kerasbert.MaskedLM(encoder)
    >>> logits = model({"token_ids": np.array([[2, 7, 4, 3]]),
    ...                 "segment_ids": np.zeros((1, 4), "int32"),
    ...                 "padding_mask": np.ones((1, 4), "int32"),
    ...                 "mask_positions": np.array([[2]])})
    >>> tuple(logits.shape)
    (1, 1, 100)
    """

    def __init__(self, encoder, **kwargs):
        inputs, _, head, logits = masked_lm_graph(encoder)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.mlm_head = head
        self._finish(encoder, encoder=encoder)

    def compile(self, optimizer="auto", loss="auto", weighted_metrics="auto", **kwargs):
        """`compile` with pretraining defaults for every argument left "auto":
        AdamW (see `kerasbert.optimizers.pretraining_optimizer`), the masked
        cross-entropy and accuracy weighted by `mask_weights`."""
        super().compile(
            optimizer=default_optimizer() if optimizer == "auto" else optimizer,
            loss=masked_lm_loss() if loss == "auto" else loss,
            weighted_metrics=[accuracy()] if weighted_metrics == "auto" else weighted_metrics,
            **kwargs,
        )
