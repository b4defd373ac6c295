"""The optimizers of the recipes in one call: `pretraining_optimizer`
(LAMB or AdamW with warmup and decay) and `finetuning_optimizer` (AdamW
with layer-wise learning-rate decay)."""

import re

from kerasbert.optimizers.adamw import AdamW
from kerasbert.optimizers.exclusions import DEFAULT_EXCLUDED
from kerasbert.optimizers.lamb import Lamb
from kerasbert.optimizers.schedules import WarmupDecay
from kerasbert.utils.checks import abbreviated, check_int, check_number, is_int

_DECAY_SHAPES = ("linear", "polynomial")


_OPTIMIZERS = ("adamw", "lamb")


# Default decay power of decay="polynomial": NVIDIA's LAMB recipe for BERT
# pretraining decays with power 0.5.
_POLYNOMIAL_POWER = 0.5


def pretraining_optimizer(
    optimizer="adamw",
    *,
    total_steps,
    learning_rate=1e-4,
    warmup_steps=None,
    weight_decay=0.01,
    decay="linear",
    power=None,
    end_learning_rate=0.0,
    clipnorm=1.0,
    accumulation_steps=1,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
):
    """The BERT recipe's optimizer: AdamW or LAMB, warmup and decay, clipping.

    Returns this module's `AdamW` (Keras's AdamW, clipping the global
    gradient under `tf.distribute`) or a `Lamb` with:

    * a `WarmupDecay` schedule peaking at `learning_rate` after
      `warmup_steps` updates and reaching `end_learning_rate` at
      `total_steps`;
    * weight decay `weight_decay` on every variable except those named in
      `DEFAULT_EXCLUDED` (biases, LayerNorm `gamma`/`beta`); AdamW applies
      it decoupled (`w -= lr * weight_decay * w` before the Adam step, the
      same arithmetic as BERT's `AdamWeightDecayOptimizer`), LAMB inside its
      update, before the trust ratio;
    * gradients clipped to a global norm of `clipnorm` (all variables
      together, after accumulation);
    * with `accumulation_steps=k > 1`, Keras's gradient accumulation: each
      update uses the mean gradient of `k` consecutive micro-batches, so
      `k` micro-batches of `b` rows update like one batch of `k * b` rows.
      `total_steps`, `warmup_steps` and `optimizer.iterations` all count
      updates, not micro-batches: `model.fit` runs `k * total_steps`
      batches for the whole schedule.

    Keras's AdamW does not save its weight-decay exclusions in its config:
    after `keras.models.load_model`, call
    `apply_weight_decay_exclusions(model.optimizer)` before training resumes
    (LAMB keeps its exclusions in its config).

    Args:
        optimizer: `"adamw"` or `"lamb"`.
        total_steps: optimizer updates in the whole run, an integer >= 1.
        learning_rate: peak learning rate, > 0.
        warmup_steps: updates of linear warmup, an integer in
            [0, total_steps]; `None` (default): 10% of `total_steps`,
            rounded half up.
        weight_decay: decay rate, >= 0.
        decay: `"linear"` or `"polynomial"`.
        power: exponent of the polynomial decay, > 0; `None` (default):
            0.5 for `"polynomial"` (NVIDIA's LAMB recipe), 1.0 for
            `"linear"` (which accepts no other value).
        end_learning_rate: final learning rate, in [0, learning_rate].
        clipnorm: global gradient-norm limit, > 0, or `None` for no
            clipping. Passed as Keras's `global_clipnorm`.
        accumulation_steps: micro-batches per update, an integer >= 1
            (1: no accumulation).
        beta_1: decay of the first moment, in [0, 1).
        beta_2: decay of the second moment, in [0, 1).
        epsilon: added to the square root of the second moment, > 0
            (LAMB: of the bias-corrected moment; Keras's AdamW: of the
            uncorrected one, the "epsilon hat" of Kingma and Ba).

    Returns:
        A configured `keras.optimizers.Optimizer`, ready for `model.compile`.

    Examples:
    >>> import keras
    >>> optimizer = pretraining_optimizer("lamb", total_steps=1000,
    ...                                   learning_rate=1e-3)
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=optimizer, loss="mse")
    >>> history = model.fit(keras.ops.ones((8, 4)), keras.ops.ones((8, 1)),
    ...                     batch_size=4, verbose=0)
    >>> int(optimizer.iterations)  # two batches, two updates
    2
    >>> # Warmup: 100 updates (10% of total_steps), so after two updates
    >>> # the rate is 2 / 100 of the peak.
    >>> round(float(optimizer.learning_rate), 8)
    2e-05
    """
    if not isinstance(optimizer, str) or optimizer.lower() not in _OPTIMIZERS:
        raise ValueError(
            f"optimizer={abbreviated(optimizer)}; expected one of {_OPTIMIZERS}."
        )
    common = _recipe_arguments(
        total_steps, learning_rate, warmup_steps, weight_decay, decay, power, end_learning_rate,
        clipnorm, accumulation_steps, beta_1, beta_2, epsilon,
    )
    if optimizer.lower() == "lamb":
        return Lamb(exclude_from_weight_decay=DEFAULT_EXCLUDED, **common)
    return AdamW(**common)


def _recipe_arguments(total_steps, learning_rate, warmup_steps, weight_decay, decay, power,
                      end_learning_rate, clipnorm, accumulation_steps, beta_1, beta_2, epsilon):
    """Checked optimizer keyword arguments, the schedule included."""
    total_steps = check_int("total_steps", total_steps, 1)
    learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
    if warmup_steps is None:
        warmup_steps = (total_steps + 5) // 10
    elif not is_int(warmup_steps) or not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"warmup_steps must be an integer in [0, total_steps={total_steps}] or None (10% of "
            f"total_steps); got {abbreviated(warmup_steps)}."
        )
    weight_decay = check_number("weight_decay", weight_decay, 0.0)
    if decay not in _DECAY_SHAPES:
        raise ValueError(f"decay={abbreviated(decay)}; expected one of {_DECAY_SHAPES}.")
    if decay == "linear":
        if power is not None and power != 1.0:
            raise ValueError(
                f'power must be None or 1.0 with decay="linear" (decay="polynomial" for another power); '
                f"got {power!r}."
            )
        power = 1.0
    elif power is None:
        power = _POLYNOMIAL_POWER
    power = check_number("power", power, 0.0, low_open=True)
    end_learning_rate = check_number("end_learning_rate", end_learning_rate, 0.0, learning_rate)
    if clipnorm is not None:
        clipnorm = check_number("clipnorm", clipnorm, 0.0, low_open=True)
    accumulation_steps = check_int("accumulation_steps", accumulation_steps, 1)
    beta_1 = check_number("beta_1", beta_1, 0.0, 1.0, high_open=True)
    beta_2 = check_number("beta_2", beta_2, 0.0, 1.0, high_open=True)
    epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)

    schedule = WarmupDecay(
        learning_rate,
        warmup_steps=int(warmup_steps),
        decay_steps=total_steps,
        end_learning_rate=end_learning_rate,
        power=power,
        accumulation_steps=accumulation_steps,
    )
    return {
        "learning_rate": schedule,
        "beta_1": beta_1,
        "beta_2": beta_2,
        "epsilon": epsilon,
        "weight_decay": weight_decay,
        "global_clipnorm": clipnorm,
        "gradient_accumulation_steps": accumulation_steps if accumulation_steps > 1 else None,
    }


def layer_depths(model):
    """`{variable path: depth}` for layer-wise learning-rate decay: 0 for the
    encoder's embeddings (and their projection), `i + 1` for transformer
    layer `i`, `num_layers + 1` for everything above (the pooler and the task
    heads). With cross-layer sharing (ALBERT) a block gets the depth of the
    last layer that applies it."""
    encoder = model if hasattr(model, "transformer_blocks") else getattr(model, "encoder", None)
    if not hasattr(encoder, "transformer_blocks"):
        raise TypeError(f"model must be a kerasbert task or Encoder; got {type(model).__name__}.")
    top = encoder.num_layers + 1
    depths = {v.path: top for v in model.trainable_variables}
    embedding_layers = [encoder.token_embedding, encoder.segment_embedding, encoder.position_embedding,
                        encoder.embeddings_layer_norm, encoder.embeddings_projection]
    for layer in embedding_layers:
        for v in layer.trainable_variables if layer is not None else ():
            depths[v.path] = 0
    blocks = encoder.transformer_blocks
    per_block = encoder.num_layers / len(blocks)  # layers applying each block (ALBERT groups)
    for index, block in enumerate(blocks):
        depth = min(encoder.num_layers, round((index // encoder.num_inner_layers + 1) * per_block))
        for v in block.trainable_variables:
            depths[v.path] = depth
    return depths


def finetuning_optimizer(
    model,
    *,
    total_steps,
    learning_rate=5e-5,
    head_learning_rate_multiplier=100.0,
    layer_decay=1.0,
    warmup_steps=None,
    weight_decay=0.01,
    clipnorm=1.0,
    accumulation_steps=1,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
):
    """The fine-tuning recipe in one call: AdamW with biases and LayerNorm
    kept out of weight decay, a faster new head, layer-wise learning-rate
    decay, linear warmup and linear decay, clipping and accumulation.

    Learning rates per variable (the schedule's value times):

    * the task's own layers (heads, anything outside `model.encoder`):
      `head_learning_rate_multiplier`;
    * encoder variables at depth `d` (see `layer_depths`: embeddings 0,
      layer `i` at `i + 1`, the pooler at `num_layers + 1`):
      `layer_decay ** (num_layers + 1 - d)`, ELECTRA's layer-wise decay
      (1.0: every encoder variable at the base rate).

    Args:
        model: the task (or encoder) to train.
        total_steps: optimizer updates in the whole run, >= 1.
        learning_rate: peak learning rate of the encoder's top.
        head_learning_rate_multiplier: for the task's new layers, > 0.
        layer_decay: in (0, 1].
        warmup_steps: as `pretraining_optimizer`; default 10% of
            `total_steps`.
        weight_decay: as `pretraining_optimizer`.
        clipnorm: as `pretraining_optimizer`.
        accumulation_steps: as `pretraining_optimizer`.
        beta_1: as `pretraining_optimizer`.
        beta_2: as `pretraining_optimizer`.
        epsilon: as `pretraining_optimizer`.

    Returns:
        A `kerasbert.optimizers.AdamW`.
    """
    head_learning_rate_multiplier = check_number(
        "head_learning_rate_multiplier", head_learning_rate_multiplier, 0.0, low_open=True
    )
    layer_decay = check_number("layer_decay", layer_decay, 0.0, 1.0, low_open=True)
    common = _recipe_arguments(
        total_steps, learning_rate, warmup_steps, weight_decay, "linear", None, 0.0,
        clipnorm, accumulation_steps, beta_1, beta_2, epsilon,
    )
    encoder = getattr(model, "encoder", model)
    encoder_paths = {v.path for v in encoder.trainable_variables}
    top = encoder.num_layers + 1
    multipliers = {}
    for path, depth in layer_depths(model).items():
        value = layer_decay ** (top - depth) if path in encoder_paths else head_learning_rate_multiplier
        if value != 1.0:
            multipliers[f"^{re.escape(path)}$"] = value
    return AdamW(learning_rate_multipliers=multipliers, **common)
