"""LAMB, the layer-wise adaptive optimizer of BERT pretraining."""


import keras
from keras import ops

from kerasbert.optimizers.clipping import ClipAcrossReplicas
from kerasbert.optimizers.exclusions import DEFAULT_EXCLUDED, check_names, short_name
from kerasbert.utils.checks import check_number


@keras.saving.register_keras_serializable(package="kerasbert")
class Lamb(ClipAcrossReplicas, keras.optimizers.Optimizer):
    """LAMB (You et al. 2019), the layer-wise adaptive optimizer of BERT pretraining.

    For each variable `w` with gradient `g`, at update `t` (1-based):

    ```
    m = beta_1 * m + (1 - beta_1) * g
    v = beta_2 * v + (1 - beta_2) * g**2
    update = (m / (1 - beta_1**t)) / (sqrt(v / (1 - beta_2**t)) + epsilon)
    update += weight_decay * w             # unless excluded from weight decay
    r = ||w|| / ||update||                 # unless excluded from layer
                                           # adaptation (then r = 1); r = 1
                                           # when either norm is 0
    w -= learning_rate * r * update
    ```

    Norms are over the whole variable. Unlike `keras.optimizers.Lamb`, the
    weight decay is part of the update (so the trust ratio sees it) and is
    not applied a second time by Keras's decoupled decay, and biases and
    LayerNorm parameters get neither decay nor trust ratio: for them this
    is Adam.

    `exclude_from_weight_decay` and `exclude_from_layer_adaptation` hold
    short variable names (`variable.name`, such as `"bias"`, `"gamma"`,
    `"beta"`, `"embeddings"`), matched exactly. Variables excluded through
    the inherited `optimizer.exclude_from_weight_decay(var_list=...,
    var_names=...)` method, called before the first update, are excluded
    from weight decay as well.

    The decay rate is kept as `optimizer.weight_decay_rate` (and as
    `"weight_decay"` in the config); `optimizer.weight_decay` stays `None`
    so that Keras's own decoupled decay remains off.

    Args:
        learning_rate: a float, a `LearningRateSchedule` (such as
            `WarmupDecay`) or a callable without arguments.
        beta_1: decay of the first-moment estimate, in [0, 1).
        beta_2: decay of the second-moment estimate, in [0, 1).
        epsilon: added to the square root of the second moment, > 0.
        weight_decay: decay rate, >= 0, added to the update as
            `weight_decay * w` (`None`: 0).
        exclude_from_weight_decay: short names of variables without weight
            decay; defaults to `DEFAULT_EXCLUDED`; `None` or `()` excludes
            nothing.
        exclude_from_layer_adaptation: short names of variables without
            trust ratio; `None` (default) excludes exactly the variables
            excluded from weight decay.
        **kwargs: the standard `keras.optimizers.Optimizer` arguments
            (`global_clipnorm`, `clipnorm`, `clipvalue`,
            `gradient_accumulation_steps`, `loss_scale_factor`, `use_ema`,
            `name`, ...), except `weight_decay`, which is the one above.

    Examples:
    >>> optimizer = Lamb(learning_rate=0.1, weight_decay=0.0)
    >>> kernel = keras.Variable([[3.0, 4.0]], name="kernel")
    >>> bias = keras.Variable([1.0, 1.0], name="bias")
    >>> optimizer.apply([keras.ops.ones((1, 2)), keras.ops.ones((2,))],
    ...                 [kernel, bias])
    >>> # kernel: update (1, 1), trust ratio 5 / sqrt(2), so it moves by
    >>> # 0.1 * 5 / sqrt(2) ~ 0.354; bias (excluded): plain Adam, 0.1.
    >>> def values(v):
    ...     return [round(float(x), 3) for x in keras.ops.convert_to_numpy(v).ravel()]
    >>> values(kernel), values(bias)
    ([2.646, 3.646], [0.9, 0.9])
    """

    def __init__(
        self,
        learning_rate=0.001,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        weight_decay=0.01,
        exclude_from_weight_decay=DEFAULT_EXCLUDED,
        exclude_from_layer_adaptation=None,
        **kwargs,
    ):
        # Keras's decoupled decay (applied before `update_step`) must stay
        # off: ours is inside the update.
        kwargs["weight_decay"] = None
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta_1 = check_number("beta_1", beta_1, 0.0, 1.0, high_open=True)
        self.beta_2 = check_number("beta_2", beta_2, 0.0, 1.0, high_open=True)
        self.epsilon = check_number("epsilon", epsilon, 0.0, low_open=True)
        self.weight_decay_rate = (
            0.0 if weight_decay is None else check_number("weight_decay", weight_decay, 0.0)
        )
        self.excluded_from_weight_decay = check_names(
            "exclude_from_weight_decay", exclude_from_weight_decay
        )
        self.excluded_from_layer_adaptation = (
            None
            if exclude_from_layer_adaptation is None
            else check_names("exclude_from_layer_adaptation", exclude_from_layer_adaptation)
        )

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self._momentums, self._velocities = self.add_optimizer_variables(
            variables, ["momentum", "velocity"]
        )
        # Per-variable Python flags, fixed at build time: the update step
        # branches on them while tracing, never on tensor values.
        self._decays, self._adapts = [], []
        for variable in variables:
            name = short_name(variable)
            decays = (
                self.weight_decay_rate > 0
                and name not in self.excluded_from_weight_decay
                and self._use_weight_decay(variable)  # the inherited method's list
            )
            if self.excluded_from_layer_adaptation is None:
                adapts = name not in self.excluded_from_weight_decay and (
                    self._use_weight_decay(variable)
                )
            else:
                adapts = name not in self.excluded_from_layer_adaptation
            self._decays.append(decays)
            self._adapts.append(adapts)

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)  # counts updates, 1-based
        beta_1 = ops.cast(self.beta_1, dtype)
        beta_2 = ops.cast(self.beta_2, dtype)

        m = self._momentums[index]
        v = self._velocities[index]
        self.assign(m, ops.add(ops.multiply(m, beta_1), ops.multiply(gradient, 1.0 - beta_1)))
        self.assign(
            v, ops.add(ops.multiply(v, beta_2), ops.multiply(ops.square(gradient), 1.0 - beta_2))
        )
        m_hat = ops.divide(m, 1.0 - ops.power(beta_1, step))
        v_hat = ops.divide(v, 1.0 - ops.power(beta_2, step))
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), ops.cast(self.epsilon, dtype)))

        if self._decays[index]:
            update = ops.add(update, ops.multiply(ops.cast(self.weight_decay_rate, dtype), variable))
        if self._adapts[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            both = ops.logical_and(ops.greater(w_norm, 0.0), ops.greater(u_norm, 0.0))
            # The divisor is never 0, so the branch not taken holds no inf/nan.
            ratio = ops.where(both, ops.divide(w_norm, ops.where(both, u_norm, 1.0)), 1.0)
            lr = ops.multiply(lr, ratio)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "beta_1": self.beta_1,
                "beta_2": self.beta_2,
                "epsilon": self.epsilon,
                "weight_decay": self.weight_decay_rate,
                "exclude_from_weight_decay": list(self.excluded_from_weight_decay),
                "exclude_from_layer_adaptation": (
                    None
                    if self.excluded_from_layer_adaptation is None
                    else list(self.excluded_from_layer_adaptation)
                ),
            }
        )
        return config
