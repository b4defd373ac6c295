"""ELECTRA pretraining: a small generator fills the masked positions, the
discriminator tells replaced tokens from original ones."""

import math

import keras
from keras import ops

from kerasbert.encoder import Encoder
from kerasbert.layers.activations import get_activation
from kerasbert.layers.dense import Dense
from kerasbert.layers.heads import MaskedLMHead
from kerasbert.losses import sparse_accuracy, sparse_cross_entropy
from kerasbert.tasks.masked_lm import default_optimizer, mask_targets
from kerasbert.tasks.task import Task, check_encoder, encoder_inputs
from kerasbert.utils.checks import check_choice

# Generator width as a fraction of the discriminator's (hidden size, FFN
# size and attention heads), Table 6 of Clark et al. (2020): 1/4 for Small
# and Large, 1/3 for Base (hidden 768).
PAPER_GENERATOR_FRACTIONS = {256: 1 / 4, 768: 1 / 3, 1024: 1 / 4}


def electra_generator(discriminator, fraction=None, num_layers=None):
    """A generator `Encoder` for `discriminator`, as in the ELECTRA paper:
    the same depth, `fraction` of its hidden size, feed-forward size and
    heads, and embeddings as wide as the discriminator's (they are shared).

    Args:
        discriminator: a `kerasbert.Encoder`.
        fraction: the size multiplier; `None` for the paper's (1/3 for a
            768-wide discriminator, 1/4 otherwise).
        num_layers: the generator's depth; None: the discriminator's
            (DeBERTa-v3's generator has half its depth at its full width).

    Examples:
    >>> import kerasbert
    >>> base_sized = kerasbert.Encoder(vocabulary_size=100, num_layers=1, num_heads=12,
    ...                                hidden_dim=768, intermediate_dim=3072)
    >>> generator = electra_generator(base_sized)
    >>> generator.hidden_dim, generator.num_heads, generator.intermediate_dim
    (256, 4, 1024)
    """
    check_encoder(discriminator, "discriminator")
    if fraction is None:
        fraction = PAPER_GENERATOR_FRACTIONS.get(discriminator.hidden_dim, 1 / 4)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be a number in (0, 1]; got {fraction!r}.")
    config = discriminator.get_config()
    if num_layers is not None:
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive integer or None; got {num_layers!r}.")
        config["num_layers"] = num_layers
        if config.get("num_layer_groups"):
            config["num_layer_groups"] = min(config["num_layer_groups"], num_layers)
    heads = max(1, round(discriminator.num_heads * fraction))
    hidden = max(heads, round(discriminator.hidden_dim * fraction))
    while hidden % heads:  # every head must get the same width
        heads -= 1
    config.update(
        name="generator",
        hidden_dim=hidden,
        num_heads=heads,
        intermediate_dim=max(1, round(discriminator.intermediate_dim * fraction)),
        embedding_dim=discriminator.embedding_width,
        pooler=False,
    )
    return Encoder.from_config(config)


def _check_compatible(generator, discriminator):
    shared = ("vocabulary_size", "embedding_width", "num_segments", "max_sequence_length", "position_offset")
    for name in shared:
        if getattr(generator, name) != getattr(discriminator, name):
            raise ValueError(
                f"The generator shares the discriminator's embeddings, so their {name} must "
                f"agree; got generator {getattr(generator, name)} and discriminator "
                f"{getattr(discriminator, name)}. Build the generator with "
                "kerasbert.tasks.electra_generator(discriminator)."
            )


@keras.saving.register_keras_serializable(package="kerasbert")
class ReplacementSampler(keras.layers.Layer):
    """Samples one token per masked position from the generator's logits
    (Gumbel-max, in the graph), without gradient to the generator."""

    def __init__(self, temperature=1.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.temperature = temperature
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, logits):
        logits = ops.stop_gradient(ops.cast(logits, "float32")) / self.temperature
        uniform = keras.random.uniform(ops.shape(logits), minval=1e-9, maxval=1.0, seed=self.seed_generator)
        gumbel = -ops.log(-ops.log(uniform))
        return ops.cast(ops.argmax(logits + gumbel, axis=-1), "int32")  # (batch, num_masked)

    def compute_output_shape(self, logits_shape):
        return logits_shape[:-1]

    def get_config(self):
        return {**super().get_config(), "temperature": self.temperature, "seed": self.seed}


def _replace(token_ids, mask_positions, mask_weights, sampled):
    """`token_ids` with each real masked position set to its sample."""
    seq = ops.shape(token_ids)[1]
    real = ops.cast(ops.greater(mask_weights, 0), "int32")[:, :, None]  # (batch, num_masked, 1)
    index = ops.arange(seq, dtype="int32")[None, None, :]  # (1, 1, seq)
    hits = ops.cast(ops.equal(mask_positions[:, :, None], index), "int32") * real  # (batch, num_masked, seq)
    replaced = ops.max(hits, axis=1)  # (batch, seq)
    values = ops.sum(hits * sampled[:, :, None], axis=1)  # (batch, seq)
    return ops.where(ops.equal(replaced, 1), values, token_ids)


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenReplacement(keras.layers.Layer):
    """`token_ids` with each real masked position set to the new token
    given for it (the generator's samples), as a layer of the graph."""

    def call(self, token_ids, mask_positions, mask_weights, new_ids):
        return _replace(token_ids, mask_positions, mask_weights, new_ids)

    def compute_output_shape(self, token_ids_shape, *shapes):
        return token_ids_shape


EMBEDDING_SHARING = ("shared", "gradient_disentangled")


class EncoderOnTokenVectors(keras.layers.Layer):
    """`encoder`'s `sequence_output` with `token_vectors (batch, seq,
    embedding_width)` in place of its token table's, as one layer of a
    task's graph (the encoder's layers are not inlined beside another
    encoder's). It owns no weights and is rebuilt by the task, never from
    a config."""

    def __init__(self, encoder, **kwargs):
        kwargs.setdefault("dtype", encoder.dtype_policy)
        super().__init__(**kwargs)
        self.encoder = encoder

    def call(self, features, token_vectors):
        embedded = self.encoder.embed(features, token_vectors=token_vectors)
        return self.encoder.transform(embedded, features["padding_mask"])

    def compute_output_shape(self, features_shape, token_vectors_shape):
        return (*token_vectors_shape[:-1], self.encoder.hidden_dim)


class _MergeEmbeddingResidual(keras.callbacks.Callback):
    def __init__(self, pretrainer):
        super().__init__()
        self.pretrainer = pretrainer

    def on_epoch_end(self, epoch, logs=None):
        self.pretrainer.merge_embedding_residual()

    def on_train_end(self, logs=None):
        self.pretrainer.merge_embedding_residual()


@keras.saving.register_keras_serializable(package="kerasbert")
class ElectraPretrainer(Task):
    """ELECTRA's replaced-token detection (Clark et al. 2020).

    The generator, a small encoder, predicts the masked tokens (masked LM);
    a token is sampled from its distribution at each masked position, in
    the graph; the discriminator reads the input with those samples in place
    and predicts, at every real position, whether the token was replaced
    (a sample equal to the original counts as original). The loss is
    `generator_weight * mlm_loss + discriminator_weight * rtd_loss` (1 and 50
    in the paper); no gradient flows through the sampling. After
    pretraining, `pretrainer.discriminator` is the encoder to fine-tune or
    save.

    How the two share embeddings (`embedding_sharing`):

    - "shared" (ELECTRA): the generator reads the discriminator's
      embeddings (token, segment and position tables and their LayerNorm:
      `discriminator.embed`) and its masked-LM decoder is the
      discriminator's token table; the generator's own embedding layers are
      unused and frozen. Both losses train the one table.
    - "gradient_disentangled" (DeBERTa-v3, He et al. 2021): the generator
      reads its own embeddings, its token table `E_G` (trained by the
      masked LM alone; its decoder); the discriminator's token vectors are
      `stop_gradient(E_G) + E_delta`, where `E_delta` (the
      `embedding_residual` layer, zeros at first) is trained by the
      replaced-token loss alone. `E_G` starts as the discriminator's table,
      so a pretrained discriminator keeps its vectors. The discriminator's
      own table holds `E_G + E_delta`: `merge_embedding_residual()` writes
      it, which `fit` does after every epoch and at its end.

    Inputs are `MaskedLM`'s plus `mask_weights` (1.0 at real targets, 0.0
    at padding slots); `fit` takes `y = mask_ids` (the original tokens) and
    `sample_weight = mask_weights`. Outputs: `generator_logits (batch,
    num_masked, vocabulary_size)`, `sampled_ids (batch, num_masked)`,
    `discriminator_logits (batch, seq)`. The log shows `loss, mlm_loss,
    mlm_accuracy, rtd_loss, rtd_accuracy` (accuracy over real positions).

    Args:
        generator: a `kerasbert.Encoder` whose embeddings are as wide as the
            discriminator's (see `electra_generator`); `None` builds one of
            the paper's size.
        discriminator: a `kerasbert.Encoder`.
        generator_weight: the weight of the generator's loss.
        discriminator_weight: the weight of the discriminator's loss.
        temperature: the sampling temperature.
        seed: seed of the sampling.
        embedding_sharing: "shared" or "gradient_disentangled" (above).

    Examples:
    >>> import kerasbert
    >>> discriminator = kerasbert.Encoder(vocabulary_size=100, num_layers=2, num_heads=4,
    ...                                   hidden_dim=32, intermediate_dim=64)
    >>> pretrainer = kerasbert.ElectraPretrainer(None, discriminator)
    >>> pretrainer.generator.hidden_dim
    8
    """

    # Its heads' weights in Hugging Face checkpoints: `ElectraForPreTraining` and the generator's `ElectraForMaskedLM`
    # (`kerasbert.convert`).
    huggingface_head = "electra_pretraining"

    def __init__(
        self,
        generator,
        discriminator,
        generator_weight=1.0,
        discriminator_weight=50.0,
        temperature=1.0,
        seed=None,
        embedding_sharing="shared",
        **kwargs,
    ):
        check_encoder(discriminator, "discriminator")
        check_choice("embedding_sharing", embedding_sharing, EMBEDDING_SHARING)
        disentangled = embedding_sharing == "gradient_disentangled"
        if generator is None:
            generator = electra_generator(discriminator)
        check_encoder(generator, "generator")
        _check_compatible(generator, discriminator)
        for name, value in [("generator_weight", generator_weight),
                            ("discriminator_weight", discriminator_weight), ("temperature", temperature)]:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}.")
        if temperature == 0:
            raise ValueError("temperature must be > 0; got 0.")

        # === Layers ===
        init = keras.initializers.TruncatedNormal(stddev=discriminator.initializer_range)
        generator_table = generator.token_embedding if disentangled else discriminator.token_embedding
        generator_head = MaskedLMHead(
            generator_table,  # tied: the generator's token table
            activation=generator.activation,
            layer_norm_epsilon=generator.layer_norm_epsilon,
            kernel_initializer=init,
            dtype=discriminator.dtype_policy,
            name="generator_head",
        )
        sampler = ReplacementSampler(temperature, seed, dtype=discriminator.dtype_policy, name="sampler")
        discriminator_dense = Dense(
            discriminator.hidden_dim, activation=get_activation(discriminator.activation),
            kernel_initializer=init, dtype=discriminator.dtype_policy, name="discriminator_dense",
        )
        discriminator_output = Dense(
            1, kernel_initializer=init, dtype=discriminator.dtype_policy, name="discriminator_output"
        )

        # === Graph ===
        inputs = encoder_inputs(discriminator)
        inputs["mask_positions"] = keras.Input((None,), dtype="int32", name="mask_positions")
        inputs["mask_weights"] = keras.Input((None,), dtype="float32", name="mask_weights")
        encoder_keys = [k for k in inputs if k not in ("mask_positions", "mask_weights")]
        # (batch, seq, embedding_width): the generator's own, or the discriminator's (shared)
        embedded = (generator if disentangled else discriminator).embed(inputs)
        generated = generator.transform(
            embedded, inputs["padding_mask"], positions=inputs["mask_positions"]
        )  # (batch, masked, gen_hidden): its last layer at the masked positions only
        generator_logits = generator_head(generated)  # (batch, masked, vocab)
        sampled = sampler(generator_logits)  # (batch, masked)
        corrupted = TokenReplacement(name="replacement")(
            inputs["token_ids"], inputs["mask_positions"], inputs["mask_weights"], sampled
        )  # (batch, seq)
        discriminator_inputs = {**{k: inputs[k] for k in encoder_keys}, "token_ids": corrupted}
        residual = None
        if disentangled:
            residual = keras.layers.Embedding(
                discriminator.vocabulary_size, discriminator.embedding_width, embeddings_initializer="zeros",
                dtype=discriminator.dtype_policy, name="embedding_residual",
            )
            # stop_gradient(E_G) + E_delta at the corrupted tokens: (batch, seq, embedding_width)
            vectors = ops.stop_gradient(generator.token_embedding(corrupted)) + residual(corrupted)
            sequence = EncoderOnTokenVectors(discriminator, name="discriminator_on_token_vectors")(
                discriminator_inputs, vectors)  # (batch, seq, hidden)
        else:
            sequence = discriminator(discriminator_inputs)["sequence_output"]  # (batch, seq, hidden)
        discriminator_logits = ops.squeeze(
            discriminator_output(discriminator_dense(sequence)), axis=-1
        )  # (batch, seq)
        outputs = {
            "generator_logits": generator_logits,
            "sampled_ids": sampled,
            "discriminator_logits": ops.cast(discriminator_logits, "float32"),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

        # === Config ===
        if disentangled:
            # E_G starts as the discriminator's table (E_delta is zeros).
            # A copy: on JAX an assigned array is the same buffer, which one train step cannot donate twice.
            generator.token_embedding.embeddings.assign(ops.convert_to_numpy(discriminator.token_embedding.embeddings))
        else:
            for layer in (generator.token_embedding, generator.segment_embedding,
                          generator.position_embedding, generator.embeddings_layer_norm):
                if layer is not None:
                    layer.trainable = False  # unused: the discriminator's are shared
        self.embedding_residual = residual
        self.embedding_sharing = embedding_sharing
        self.generator = generator
        self.discriminator = discriminator
        self.generator_head = generator_head
        self.generator_weight = generator_weight
        self.discriminator_weight = discriminator_weight
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy_tracker = keras.metrics.Mean(name="mlm_accuracy")
        self.rtd_loss_tracker = keras.metrics.Mean(name="rtd_loss")
        self.rtd_accuracy_tracker = keras.metrics.Mean(name="rtd_accuracy")
        self._record_config(
            discriminator, generator=generator, discriminator=discriminator,
            generator_weight=generator_weight, discriminator_weight=discriminator_weight,
            temperature=temperature, seed=seed, embedding_sharing=embedding_sharing,
        )

    def merge_embedding_residual(self):
        """With gradient-disentangled sharing: writes `E_G + E_delta` (the
        discriminator's token vectors in pretraining) into the
        discriminator's own token table, so that `self.discriminator` alone
        gives what it gave here. `fit` calls it after every epoch and at its
        end; nothing to do with "shared"."""
        if self.embedding_residual is None:
            return
        table = self.generator.token_embedding.embeddings + self.embedding_residual.embeddings
        self.discriminator.token_embedding.embeddings.assign(table)

    def fit(self, *args, callbacks=None, **kwargs):
        if self.embedding_residual is not None:
            callbacks = [*(callbacks or []), _MergeEmbeddingResidual(self)]
        return super().fit(*args, callbacks=callbacks, **kwargs)

    @classmethod
    def from_preset(cls, preset, generator=None, generator_fraction=None, load_weights=True,
                    dtype=None, **kwargs):
        """The pretrainer for the discriminator `preset`. `generator`: `None`
        for a new generator of the paper's size (or `generator_fraction` of
        the discriminator's), a preset reference, or an `Encoder`.

        From Hugging Face checkpoints, the discriminator head comes from an
        `ElectraForPreTraining` `preset` and the generator head from an
        `ElectraForMaskedLM` `generator`; heads a checkpoint lacks start
        fresh."""
        from kerasbert.convert.heads import assign_head_weights
        from kerasbert.presets import from_preset, huggingface_checkpoint_directory

        discriminator = from_preset(preset, load_weights=load_weights, dtype=dtype)
        generator_reference = None
        if generator is None:
            generator = electra_generator(discriminator, generator_fraction)
        elif not isinstance(generator, Encoder):
            generator_reference = generator
            generator = from_preset(generator, load_weights=load_weights, dtype=dtype)
        pretrainer = cls(generator, discriminator, **kwargs)
        if load_weights:
            directory = huggingface_checkpoint_directory(preset)
            generator_directory = None
            if generator_reference is not None:
                generator_directory = huggingface_checkpoint_directory(generator_reference)
            assign_head_weights(pretrainer, directory, generator_directory)
        return pretrainer

    def _targets(self, raw=False):
        return mask_targets(self.discriminator)

    def enable_lora(self, rank, alpha=None, targets=None):
        raise TypeError(
            "ElectraPretrainer trains a generator and a discriminator from scratch; LoRA adapts one pretrained "
            "encoder to a task. Enable it on the task built on the pretrained discriminator (TextClassifier, ...)."
        )

    def quantize(self, mode, config=None):
        raise TypeError(
            "ElectraPretrainer trains a generator and a discriminator from scratch; quantize the task built on "
            "the pretrained discriminator (TextClassifier, ...) for inference."
        )

    def export(self, filepath, overwrite=False, format="saved_model", **options):
        raise TypeError(
            "ElectraPretrainer cannot be exported: its outputs are sampled at random (the generator's "
            "replacements), so no fixed graph reproduces them. Save pretrainer.discriminator with save_to_preset "
            "and export the task built on it (TextClassifier, ...)."
        )

    def save_to_preset(self, preset_dir, adapters_only=False, base=None):
        raise TypeError(
            "ElectraPretrainer is saved as its pretrained encoder: pretrainer.discriminator.save_to_preset(dir), "
            "which every task's from_preset loads."
        )

    def compile(self, optimizer="auto", **kwargs):
        """`compile` with AdamW by default; the loss is built in (see the
        class docstring), so `loss` and `metrics` are not accepted."""
        for name in ("loss", "metrics", "weighted_metrics"):
            if kwargs.get(name) is not None:
                raise ValueError(
                    f"ElectraPretrainer computes its own loss and metrics; got {name}={kwargs[name]!r}. "
                    "Set generator_weight / discriminator_weight in the constructor instead."
                )
        super().compile(optimizer=default_optimizer() if optimizer == "auto" else optimizer, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        mask_weights = ops.cast(x["mask_weights"], "float32")  # (batch, masked)
        mask_ids = ops.cast(y, "int32")
        generator_logits = y_pred["generator_logits"]
        sampled = y_pred["sampled_ids"]

        # Generator: masked LM over the real targets.
        mlm = sparse_cross_entropy(mask_ids, generator_logits)  # (batch, masked)
        targets = ops.maximum(ops.sum(mask_weights), 1.0)
        mlm_loss = ops.sum(mlm * mask_weights) / targets
        correct = sparse_accuracy(mask_ids, generator_logits)

        # Discriminator: replaced (1) or original (0) at every real position.
        # 1 where a real slot's sample differs from its original token.
        changed = mask_weights * ops.cast(ops.not_equal(sampled, mask_ids), "float32")  # (batch, masked)
        token_ids = ops.cast(x["token_ids"], "int32")
        labels = ops.cast(_replace(
            ops.zeros_like(token_ids), ops.cast(x["mask_positions"], "int32"), changed,
            ops.ones_like(sampled),
        ), "float32")  # (batch, seq)
        real = ops.cast(ops.not_equal(x["padding_mask"], 0), "float32")
        logits = y_pred["discriminator_logits"]
        rtd = keras.losses.binary_crossentropy(labels[..., None], logits[..., None], from_logits=True)
        positions = ops.maximum(ops.sum(real), 1.0)
        rtd_loss = ops.sum(rtd * real) / positions
        predicted = ops.cast(ops.greater(logits, 0.0), "float32")
        rtd_correct = ops.cast(ops.equal(predicted, labels), "float32")

        self.mlm_loss_tracker.update_state(mlm_loss)
        self.mlm_accuracy_tracker.update_state(correct, sample_weight=mask_weights)
        self.rtd_loss_tracker.update_state(rtd_loss)
        self.rtd_accuracy_tracker.update_state(rtd_correct, sample_weight=real)
        return self.generator_weight * mlm_loss + self.discriminator_weight * rtd_loss
