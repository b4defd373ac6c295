"""Sentence embeddings: one vector per text, pooled from the encoder."""

import keras

from kerasbert.layers.pooling import Pooling
from kerasbert.preprocessing.preprocessors import TextPreprocessor
from kerasbert.presets import preset_pooling
from kerasbert.tasks.fine_tuning import FineTuningTask
from kerasbert.tasks.task import check_encoder, encoder_inputs, text_signature
from kerasbert.utils.examples import Targets


@keras.saving.register_keras_serializable(package="kerasbert")
class TextEmbedder(FineTuningTask):
    """One float32 vector per text: the encoder's `sequence_output` pooled
    by the mean over real tokens or the first token (`pooling`), optionally
    L2-normalised (then the dot product of two embeddings is their cosine
    similarity). `predict` takes raw strings. The default `compile` trains
    it to point its embeddings the way of given target vectors (cosine
    loss), e.g. to distil a larger embedder.

    A preset trained as a sentence embedder records how it pools (its
    JSON's `pooling`): `from_preset("all_minilm_l6_v2")` pools as
    sentence-transformers does for that model (mean, normalised), giving
    its embeddings.

    Args:
        encoder: a `kerasbert.Encoder`.
        pooling: "mean" or "cls".
        normalize: scale each embedding to unit L2 norm.
        preprocessor: a `TextPreprocessor`, or None.

    Examples:
    >>> import kerasbert, numpy as np
    >>> embedder = kerasbert.TextEmbedder.from_preset("all_minilm_l6_v2")
    >>> vectors = embedder.predict(["A man is eating food.",
    ...                             "A man is eating a piece of bread."], verbose=0)
    >>> round(float(vectors[0] @ vectors[1]), 4)
    0.7553
    """

    preprocessor_class = TextPreprocessor

    def __init__(self, encoder, pooling="mean", normalize=False, preprocessor=None, **kwargs):
        check_encoder(encoder)
        pool = Pooling(pooling, normalize, dtype=encoder.dtype_policy, name="pooling")
        inputs = encoder_inputs(encoder)
        outputs = encoder(inputs)
        embeddings = pool(outputs["sequence_output"], inputs["padding_mask"])  # (batch, hidden)
        super().__init__(inputs=inputs, outputs=embeddings, **kwargs)
        self.encoder, self.pooling = encoder, pool
        self._set_preprocessor(preprocessor)
        self._freeze_unused_pooler()
        self._record_config(encoder, encoder=encoder, pooling=pooling, normalize=normalize, preprocessor=preprocessor)
        self.compile()

    @classmethod
    def _preset_arguments(cls, preset, family, kwargs):
        for key, value in preset_pooling(preset).items():
            kwargs.setdefault(key, value)
        return kwargs

    def _packed_outputs(self, sequence_output, padding_mask, documents):
        pool = Pooling(self.pooling.pooling, self.pooling.normalize, documents=documents,
                       dtype=self.pooling.dtype_policy)
        return pool(sequence_output, padding_mask)  # (batch, documents, hidden)

    def _targets(self, raw=False):
        return Targets(None, "target vectors", rank=2, width=self.encoder.hidden_dim)

    def _default_loss(self):
        return keras.losses.CosineSimilarity()

    def serving_function(self):
        """The exported signature: `text`, a 1-D string batch ->
        `embedding` (batch, hidden_dim) float32."""

        def serve(text):
            return {"embedding": self._serving_outputs(text)}

        return serve, text_signature("text")
