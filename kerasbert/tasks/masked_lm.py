"""Masked language modelling: logits at the masked positions only."""

import keras

from kerasbert.layers.heads import MaskedLMHead
from kerasbert.losses import SparseAccuracy, SparseCrossEntropy
from kerasbert.preprocessing.preprocessors import TextPreprocessor
from kerasbert.tasks.task import EncoderAtPositions, Task, check_encoder, encoder_inputs, text_signature
from kerasbert.utils.examples import Targets
from kerasbert.utils.optional import tf


def masked_lm_graph(encoder):
    """Inputs (the encoder's plus `mask_positions`), the encoder's outputs
    (`sequence_output` at the masked positions only, `(batch, num_masked,
    hidden)`, and `pooled_output`) and the tied head's logits `(batch,
    num_masked, vocabulary_size)`."""
    check_encoder(encoder)
    inputs = encoder_inputs(encoder)
    inputs["mask_positions"] = keras.Input((None,), dtype="int32", name="mask_positions")
    features = {k: v for k, v in inputs.items() if k != "mask_positions"}
    outputs = EncoderAtPositions(encoder, name=f"{encoder.name}_at_mask_positions")(
        features, inputs["mask_positions"]
    )
    head = MaskedLMHead(
        encoder.token_embedding,
        activation=encoder.activation,
        layer_norm_epsilon=encoder.layer_norm_epsilon,
        kernel_initializer=keras.initializers.TruncatedNormal(stddev=encoder.initializer_range),
        use_bias=encoder.use_bias,
        dtype=encoder.dtype_policy,
        name="mlm_head",
    )
    logits = head(outputs["sequence_output"])  # (batch, num_masked, vocabulary)
    return inputs, outputs, head, logits


def masked_lm_loss():
    """Cross-entropy averaged over the real targets (`mask_weights` > 0), not
    over all `max_predictions` slots, read at the targets' logits
    (`kerasbert.losses`)."""
    return SparseCrossEntropy(reduction="mean_with_sample_weight")


def mask_targets(encoder):
    """The targets of a masked LM: the original token ids at the masked
    positions, `(batch, num_masked)`."""
    return Targets(encoder.vocabulary_size, "token ids", rank=2)


def accuracy(name="accuracy"):
    return SparseAccuracy(name=name)


def default_optimizer(learning_rate=1e-4):
    """AdamW at a constant `learning_rate`, weight decay 0.01 on everything
    but biases and LayerNorm, global-norm clipping at 1.0: the recipe of
    `kerasbert.optimizers.pretraining_optimizer` for a run of unknown
    length (pass that function's optimizer, with `total_steps`, for warmup
    and decay)."""
    from kerasbert.optimizers import pretraining_optimizer

    return pretraining_optimizer("adamw", learning_rate=learning_rate, total_steps=1, warmup_steps=0,
                                 end_learning_rate=learning_rate)


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

    With a `preprocessor` (`from_preset` gives one when the preset has a
    tokenizer) the task is saved with its tokenizer (`save_to_preset`) and
    exports a SavedModel that fills in the mask tokens of raw text
    (`export`, see `serving_function`).

    Args:
        encoder: a `kerasbert.Encoder`.
        preprocessor: a `TextPreprocessor` for raw text (serving), or None.

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

    # Its heads' weights in Hugging Face checkpoints: the masked-LM head of transformers' `...ForMaskedLM`
    # (`kerasbert.convert`).
    huggingface_head = "masked_lm"

    preprocessor_class = TextPreprocessor

    def __init__(self, encoder, preprocessor=None, **kwargs):
        inputs, _, head, logits = masked_lm_graph(encoder)
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        self.encoder = encoder
        self.mlm_head = head
        self._set_preprocessor(preprocessor)
        self._record_config(encoder, encoder=encoder, preprocessor=preprocessor)

    def _targets(self, raw=False):
        return mask_targets(self.encoder)

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

    def serving_function(self, top_k=5):
        """The exported signature: `text`, a 1-D string batch with the
        tokenizer's mask token (`[MASK]`, `<mask>`) where words are missing
        -> the `top_k` most likely tokens at each mask: `token_ids` (int32),
        `tokens` (string) and `probabilities` (float32), each `(batch,
        masks, top_k)`, padded to the batch's most masks with -1, "" and 0
        (`kerasbert.tasks.fill_mask`'s answers)."""
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= self.encoder.vocabulary_size:
            raise ValueError(f"top_k must be an integer in [1, {self.encoder.vocabulary_size}]; got {top_k!r}.")
        if self.preprocessor is None:
            raise ValueError("this MaskedLM has no preprocessor; build it with from_preset or pass "
                             "preprocessor=TextPreprocessor(tokenizer, ...).")
        tokenizer = self.preprocessor.tokenizer
        mask_id = tokenizer.special_token_ids["mask"]

        def serve(text):
            features = self._serving_features(text)
            found = tf.where(tf.equal(features["token_ids"], mask_id))  # (masks, 2): row, position
            masks = tf.RaggedTensor.from_value_rowids(
                tf.cast(found[:, 1], tf.int32), found[:, 0], nrows=tf.shape(text, out_type=tf.int64)[0])
            features["mask_positions"] = masks.to_tensor(0)  # (batch, most masks)
            is_mask = tf.ones_like(masks, tf.bool).to_tensor(False)[:, :, None]  # (batch, masks, 1)
            logits = self(features, training=False)  # (batch, masks, vocabulary)
            probabilities, token_ids = tf.math.top_k(tf.nn.softmax(logits, axis=-1), top_k)  # (batch, masks, k)
            return {"token_ids": tf.where(is_mask, token_ids, -1),
                    "tokens": tf.where(is_mask, tokenizer.id_to_token_tensor(token_ids), ""),
                    "probabilities": tf.where(is_mask, probabilities, 0.0)}

        return serve, text_signature("text")
