"""AdamW for fine-tuning: per-variable learning-rate multipliers (layer-wise
decay) and weight-decay exclusions."""

import re

import keras
from keras import ops

from kerasbert.optimizers.clipping import ClipAcrossReplicas
from kerasbert.optimizers.exclusions import DEFAULT_EXCLUDED, apply_weight_decay_exclusions, check_names
from kerasbert.utils.checks import check_number


@keras.saving.register_keras_serializable(package="kerasbert")
class AdamW(ClipAcrossReplicas, keras.optimizers.AdamW):
    """Keras's AdamW with a learning-rate multiplier per variable, and with
    its weight-decay exclusions saved in its config.

    Each variable's step (the Adam update and the decoupled weight decay
    alike) uses `learning_rate * multiplier`, the multiplier being the value
    of the first pattern in `learning_rate_multipliers` that `re.search`
    finds in the variable's path (`variable.path`, e.g.
    `"transformer_block_3/attention/qkv/kernel"`), or 1.0. That is what
    layer-wise learning-rate decay and a faster head need; the multipliers
    are data, so the optimizer saves and restores with the model.

    Args:
        learning_rate: a float or a schedule (e.g. `WarmupDecay`).
        learning_rate_multipliers: `{path pattern: multiplier > 0}`; None or
            empty for none.
        excluded_from_weight_decay: short variable names kept out of the
            weight decay, matched as `apply_weight_decay_exclusions` does.
        **kwargs: `keras.optimizers.AdamW` arguments (`weight_decay`,
            `beta_1`, `global_clipnorm`, `gradient_accumulation_steps`...).

    Examples:
    >>> dense = keras.layers.Dense(1, name="head")
    >>> dense.build((None, 1))
    >>> optimizer = AdamW(learning_rate=0.1, weight_decay=0.0,
    ...                   learning_rate_multipliers={"^head/": 10.0})
    >>> optimizer.apply([keras.ops.ones(v.shape) for v in dense.trainable_variables],
    ...                 dense.trainable_variables)
    >>> round(float(keras.ops.convert_to_numpy(dense.bias)[0]), 4)  # Adam's first step: -lr
    -1.0
    """

    def __init__(self, learning_rate=0.001, learning_rate_multipliers=None,
                 excluded_from_weight_decay=DEFAULT_EXCLUDED, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        multipliers = dict(learning_rate_multipliers or {})
        for pattern, value in multipliers.items():
            if not isinstance(pattern, str):
                raise TypeError(
                    "learning_rate_multipliers keys must be regular expressions (str) matched against "
                    f"variable paths; got {pattern!r}."
                )
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(
                    f"learning_rate_multipliers key {pattern!r} is not a valid regular expression: {error}."
                ) from None
            multipliers[pattern] = check_number(f"learning_rate_multipliers[{pattern!r}]", value, 0.0, low_open=True)
        self.learning_rate_multipliers = multipliers
        self.excluded_from_weight_decay = check_names("excluded_from_weight_decay", excluded_from_weight_decay)
        apply_weight_decay_exclusions(self, self.excluded_from_weight_decay)

    def multiplier(self, path):
        """The learning-rate multiplier of the variable at `path`."""
        for pattern, value in self.learning_rate_multipliers.items():
            if re.search(pattern, path):
                return value
        return 1.0

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self._multipliers = [self.multiplier(v.path) for v in variables]

    def _apply_weight_decay(self, variables):
        # Applied in `update_step` instead, with each variable's own rate.
        pass

    def update_step(self, gradient, variable, learning_rate):
        scale = self._multipliers[self._get_variable_index(variable)]
        learning_rate = ops.multiply(ops.cast(learning_rate, variable.dtype), scale)
        if self.weight_decay and self._use_weight_decay(variable):
            # Decoupled decay, before the Adam step, as Keras's AdamW does.
            decay = ops.multiply(ops.cast(self.weight_decay, variable.dtype), learning_rate)
            self.assign_sub(variable, ops.multiply(variable, decay))
        if keras.backend.backend() == "tensorflow" and not self.amsgrad:
            _tensorflow_adam_step(self, gradient, variable, learning_rate)
        else:
            super().update_step(gradient, variable, learning_rate)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if keras.backend.backend() != "torch" or self.amsgrad:
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        _torch_adamw_step(self, grads, trainable_variables, learning_rate)

    def get_config(self):
        config = super().get_config()
        config.update(
            learning_rate_multipliers=dict(self.learning_rate_multipliers),
            excluded_from_weight_decay=list(self.excluded_from_weight_decay),
        )
        return config


def _tensorflow_adam_step(optimizer, gradient, variable, learning_rate):
    """Keras's Adam step as TensorFlow's fused `ResourceApplyAdam` kernel:
    the same arithmetic (epsilon added to the uncorrected root), in place
    and in one pass, where the op-by-op form makes several temporaries the
    size of the variable (a word-embedding table's gradient arrives as
    `IndexedSlices`, made dense once here)."""
    import tensorflow as tf

    index = optimizer._get_variable_index(variable)
    dtype = variable.dtype
    step = tf.cast(optimizer.iterations + 1, dtype)
    tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=optimizer._momentums[index].handle, v=optimizer._velocities[index].handle,
        beta1_power=tf.pow(tf.cast(optimizer.beta_1, dtype), step),
        beta2_power=tf.pow(tf.cast(optimizer.beta_2, dtype), step),
        lr=learning_rate, beta1=tf.cast(optimizer.beta_1, dtype), beta2=tf.cast(optimizer.beta_2, dtype),
        epsilon=tf.cast(optimizer.epsilon, dtype), grad=tf.convert_to_tensor(tf.cast(gradient, dtype)),
        use_locking=False,
    )


def _torch_adamw_step(optimizer, grads, variables, learning_rate):
    """`AdamW.update_step` for all variables at once on torch: in place,
    with `torch._foreach_*` kernels over the variables that share a
    learning-rate multiplier and weight-decay setting (as Keras's own torch
    Adam does). Op by op, torch would allocate several temporaries the size
    of each variable, which for a word-embedding table costs as much as the
    rest of the step."""
    import torch

    with torch.no_grad():
        step = ops.cast(optimizer.iterations + 1, "float32")
        learning_rate = ops.cast(learning_rate, "float32")
        # Adam's bias corrections folded into the step size, as Keras does.
        correction = ops.sqrt(1 - ops.power(optimizer.beta_2, step)) / (1 - ops.power(optimizer.beta_1, step))
        groups = {}
        for gradient, variable in zip(grads, variables):
            index = optimizer._get_variable_index(variable)
            decays = bool(optimizer.weight_decay) and optimizer._use_weight_decay(variable)
            value = variable.value
            groups.setdefault((optimizer._multipliers[index], decays), []).append(
                (gradient.to(value.dtype), value, optimizer._momentums[index].value,
                 optimizer._velocities[index].value)
            )
        for (multiplier, decays), members in groups.items():
            gradients, values, momentums, velocities = (list(t) for t in zip(*members))
            rate = learning_rate * multiplier
            if decays:  # decoupled decay, before the Adam step
                torch._foreach_mul_(values, 1 - optimizer.weight_decay * rate)
            torch._foreach_lerp_(momentums, gradients, 1 - optimizer.beta_1)
            torch._foreach_mul_(velocities, optimizer.beta_2)
            torch._foreach_addcmul_(velocities, gradients, gradients, value=1 - optimizer.beta_2)
            denominators = torch._foreach_sqrt(velocities)
            torch._foreach_add_(denominators, optimizer.epsilon)
            updates = torch._foreach_div(momentums, denominators)
            torch._foreach_mul_(updates, rate * correction)
            torch._foreach_sub_(values, updates)
