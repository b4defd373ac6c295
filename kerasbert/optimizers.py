"""Optimizers and learning-rate schedules for pretraining and fine-tuning.

* `Lamb`: LAMB as used for BERT pretraining (weight decay inside the update,
  trust ratio only where it belongs).
* `WarmupDecay`: linear warmup, then linear or polynomial decay.
* `apply_weight_decay_exclusions`: keep biases and LayerNorm parameters out
  of the weight decay of any Keras optimizer (AdamW included).
* `pretraining_optimizer`: all of the above in one call.

Variables are matched by their *short* Keras name (`variable.name`:
`"kernel"`, `"bias"`, `"gamma"`, `"beta"`, `"embeddings"`), exactly, never
as a substring: `DEFAULT_EXCLUDED` keeps every Dense and head bias and the
LayerNorm scale and offset out of weight decay, and nothing else.

Gradient accumulation (Keras's `gradient_accumulation_steps`, which
`pretraining_optimizer` sets from `accumulation_steps`), as implemented in
Keras 3 and checked by `tests/test_optimizers.py`:

* the gradients of the `k` micro-batches are summed and divided by `k` (a
  mean), then clipped, then applied in one update on the k-th micro-batch;
  the variables do not move in between;
* `optimizer.iterations` counts updates (it is the micro-batch counter
  floor-divided by `k`), and Adam/LAMB bias corrections use it;
* a `LearningRateSchedule` is called with the *micro-batch* counter, which
  is why `WarmupDecay` takes `accumulation_steps` and divides by it, so that
  its step counts (`warmup_steps`, `decay_steps`) are optimizer updates.
"""

import numbers
import re

import keras
from keras import ops

DEFAULT_EXCLUDED = ("bias", "gamma", "beta")
"""Short variable names kept out of weight decay (and, for LAMB, out of the
layer-wise trust ratio): Dense and head biases, LayerNorm scale and offset."""

_DECAY_SHAPES = ("linear", "polynomial")
_OPTIMIZERS = ("adamw", "lamb")
# Default decay power of decay="polynomial": NVIDIA's LAMB recipe for BERT
# pretraining decays with power 0.5.
_POLYNOMIAL_POWER = 0.5


# --- argument checks ------------------------------------------------------

def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(name, value, minimum):
    if not _is_int(value) or value < minimum:
        raise ValueError(
            f"`{name}` must be an integer >= {minimum}. Received: {name}={value!r}"
        )
    return int(value)


def _check_real(name, value, minimum=None, maximum=None, min_open=False, max_open=False):
    """A real number in [minimum, maximum]; an end is excluded when `*_open`."""
    ok = _is_real(value)
    if ok and minimum is not None:
        ok = value > minimum if min_open else value >= minimum
    if ok and maximum is not None:
        ok = value < maximum if max_open else value <= maximum
    if not ok:
        low = "(" if min_open else "["
        high = ")" if max_open else "]"
        low_value = "-inf" if minimum is None else minimum
        high_value = "inf" if maximum is None else maximum
        raise ValueError(
            f"`{name}` must be a number in {low}{low_value}, {high_value}{high}. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def _check_names(name, value):
    """A sequence of variable short names, as a tuple (None -> ())."""
    if value is None:
        return ()
    if isinstance(value, str):
        raise TypeError(
            f"`{name}` must be a sequence of variable names such as "
            f"('bias', 'gamma', 'beta'), not a single string. "
            f"Received: {name}={value!r}; write ({value!r},) for one name."
        )
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(
            f"`{name}` must be a sequence of variable names such as "
            f"('bias', 'gamma', 'beta'), or None. Received: {name}={value!r}"
        ) from None
    for item in names:
        if not isinstance(item, str) or not item:
            raise TypeError(
                f"`{name}` must hold non-empty strings (short variable names). "
                f"Received: {name}={value!r}"
            )
    return names


def _short_name(variable):
    # A Keras variable's `.name` is already short ("bias"); the TensorFlow
    # variable behind it is named by path ("encoder/dense/bias:0").
    return re.sub(r":\d+$", "", str(variable.name)).rsplit("/", 1)[-1]


# --- weight-decay exclusions for any optimizer ----------------------------

def apply_weight_decay_exclusions(optimizer, names=DEFAULT_EXCLUDED):
    """Keeps variables with these short names out of an optimizer's weight decay.

    Works for any Keras optimizer with decoupled weight decay (`AdamW`,
    `Adam(weight_decay=...)`, ...) through its
    `exclude_from_weight_decay(var_names=...)`. Keras matches `var_names` with
    `re.search` against `variable.name`, which is the short name (`"bias"`)
    on JAX and torch but the full path (`"encoder/dense/bias:0"`) on
    TensorFlow; so the names become one anchored pattern that matches the
    last path component exactly on every backend (`"bias"` excludes
    `.../bias` but not `.../pos_bias`).

    This replaces exclusions set earlier through
    `optimizer.exclude_from_weight_decay`. Keras does not save them with the
    optimizer's config: call this again on an optimizer restored by
    `keras.models.load_model` or `from_config`, before training resumes.

    Args:
        optimizer: a `keras.optimizers.Optimizer`.
        names: short variable names to exclude; empty excludes nothing.

    Returns:
        The optimizer, for chaining.

    Examples:
    >>> optimizer = apply_weight_decay_exclusions(
    ...     keras.optimizers.AdamW(learning_rate=0.1, weight_decay=0.5))
    >>> dense = keras.layers.Dense(1, bias_initializer="ones")
    >>> dense.build((None, 1))
    >>> _ = dense.kernel.assign([[1.0]])
    >>> zeros = [keras.ops.zeros(v.shape) for v in dense.trainable_variables]
    >>> optimizer.apply(zeros, dense.trainable_variables)
    >>> def values(v):
    ...     return [round(float(x), 6) for x in keras.ops.convert_to_numpy(v).ravel()]
    >>> values(dense.kernel), values(dense.bias)  # kernel: 1 - 0.1 * 0.5
    ([0.95], [1.0])
    """
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(
            "`optimizer` must be a keras.optimizers.Optimizer. "
            f"Received: optimizer={optimizer!r}"
        )
    names = _check_names("names", names)
    if not names:
        optimizer.exclude_from_weight_decay(var_names=None)
        return optimizer
    alternatives = "|".join(re.escape(n) for n in names)
    pattern = rf"(?:^|/)(?:{alternatives})(?::\d+)?$"
    optimizer.exclude_from_weight_decay(var_names=[pattern])
    return optimizer


# --- LAMB -----------------------------------------------------------------

class _ClipAcrossReplicas:
    """Clips the gradients of the whole global batch under `tf.distribute`.

    Keras clips (`clipnorm`, `global_clipnorm`, `clipvalue`) each replica's
    gradients before summing them across replicas, so under MirroredStrategy
    a global-norm clip sees a replica's share and gives a different update
    from the same batch on one device. Here the replicas first sum their
    gradients (one extra all-reduce), clip that, and hand back an equal share
    each, so Keras's own sum afterwards is the clipped global gradient.
    """

    def _clip_gradients(self, grads):
        if keras.backend.backend() != "tensorflow" or not (
            self.clipnorm or self.global_clipnorm or self.clipvalue
        ):
            return super()._clip_gradients(grads)
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync if context is not None else 1
        if replicas == 1:
            return super()._clip_gradients(grads)
        present = [g for g in grads if g is not None]
        summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
        summed = [None if g is None else next(summed) for g in grads]
        return [None if g is None else g / replicas for g in super()._clip_gradients(summed)]


@keras.saving.register_keras_serializable(package="kerasbert")
class Lamb(_ClipAcrossReplicas, keras.optimizers.Optimizer):
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
        self.beta_1 = _check_real("beta_1", beta_1, 0.0, 1.0, max_open=True)
        self.beta_2 = _check_real("beta_2", beta_2, 0.0, 1.0, max_open=True)
        self.epsilon = _check_real("epsilon", epsilon, 0.0, min_open=True)
        self.weight_decay_rate = (
            0.0 if weight_decay is None else _check_real("weight_decay", weight_decay, 0.0)
        )
        self.excluded_from_weight_decay = _check_names(
            "exclude_from_weight_decay", exclude_from_weight_decay
        )
        self.excluded_from_layer_adaptation = (
            None
            if exclude_from_layer_adaptation is None
            else _check_names("exclude_from_layer_adaptation", exclude_from_layer_adaptation)
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
            name = _short_name(variable)
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


# --- learning-rate schedule -----------------------------------------------

@keras.saving.register_keras_serializable(package="kerasbert")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup to a peak, then linear or polynomial decay to an end value.

    With `step` the number of optimizer updates done before this one
    (0-based), `W = warmup_steps`, `D = decay_steps` (total, warmup
    included), `peak = learning_rate`, `end = end_learning_rate`:

    ```
    step <  W:      peak * step / W               (BERT's warmup: 0 at step 0)
    W <= step < D:  end + (peak - end) * (1 - (step - W) / (D - W)) ** power
    step >= D:      end
    ```

    `power=1.0` is a linear decay. The decay starts at the peak at the end
    of warmup, as in Hugging Face's `get_linear_schedule_with_warmup`; the
    original BERT code instead decays over the whole run from step 0, so
    its rate just after warmup is `peak * (1 - W / D)`.

    Args:
        learning_rate: the peak learning rate, > 0.
        warmup_steps: updates of linear warmup, an integer >= 0 (0: start
            at the peak).
        decay_steps: total updates of the schedule, warmup included, an
            integer >= max(1, warmup_steps).
        end_learning_rate: the rate at and after `decay_steps`, in
            [0, learning_rate].
        power: exponent of the decay, > 0 (1.0: linear).
        accumulation_steps: micro-batches per optimizer update when the
            optimizer accumulates gradients (`gradient_accumulation_steps`),
            else 1. Keras then calls the schedule with the micro-batch
            counter; dividing it by this number keeps every step count here
            in optimizer updates.

    Examples:
    >>> schedule = WarmupDecay(1e-3, warmup_steps=10, decay_steps=110)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 60, 110, 200)]
    [0.0, 0.0005, 0.001, 0.0005, 0.0, 0.0]
    >>> optimizer = keras.optimizers.AdamW(learning_rate=schedule)
    """

    def __init__(
        self,
        learning_rate,
        warmup_steps,
        decay_steps,
        end_learning_rate=0.0,
        power=1.0,
        accumulation_steps=1,
    ):
        self.learning_rate = _check_real("learning_rate", learning_rate, 0.0, min_open=True)
        self.warmup_steps = _check_int("warmup_steps", warmup_steps, 0)
        self.decay_steps = _check_int("decay_steps", decay_steps, 1)
        if self.decay_steps < self.warmup_steps:
            raise ValueError(
                "`decay_steps` counts all updates, warmup included, so it must "
                f"be >= warmup_steps={self.warmup_steps}. "
                f"Received: decay_steps={decay_steps!r}"
            )
        self.end_learning_rate = _check_real(
            "end_learning_rate", end_learning_rate, 0.0, self.learning_rate
        )
        self.power = _check_real("power", power, 0.0, min_open=True)
        self.accumulation_steps = _check_int("accumulation_steps", accumulation_steps, 1)

    def __call__(self, step):
        step = ops.convert_to_tensor(step)
        if self.accumulation_steps > 1:
            step = ops.floor_divide(step, self.accumulation_steps)
        step = ops.cast(step, "float32")
        peak, end = self.learning_rate, self.end_learning_rate
        warmup, total = float(self.warmup_steps), float(self.decay_steps)

        warmup_lr = ops.multiply(peak / max(warmup, 1.0), step)
        done = ops.clip(ops.divide(ops.subtract(step, warmup), max(total - warmup, 1.0)), 0.0, 1.0)
        decay_lr = ops.add(end, ops.multiply(peak - end, ops.power(1.0 - done, self.power)))
        lr = ops.where(ops.less(step, warmup), warmup_lr, decay_lr)
        # Only needed when decay_steps == warmup_steps (no decay phase).
        return ops.where(ops.greater_equal(step, total), end, lr)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "accumulation_steps": self.accumulation_steps,
        }


# --- one call -------------------------------------------------------------

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
            f"`optimizer` must be one of {_OPTIMIZERS}. Received: optimizer={optimizer!r}"
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
    total_steps = _check_int("total_steps", total_steps, 1)
    learning_rate = _check_real("learning_rate", learning_rate, 0.0, min_open=True)
    if warmup_steps is None:
        warmup_steps = (total_steps + 5) // 10
    elif not _is_int(warmup_steps) or not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"`warmup_steps` must be an integer in [0, total_steps={total_steps}] "
            f"or None (10% of total_steps). Received: warmup_steps={warmup_steps!r}"
        )
    weight_decay = _check_real("weight_decay", weight_decay, 0.0)
    if decay not in _DECAY_SHAPES:
        raise ValueError(f"`decay` must be one of {_DECAY_SHAPES}. Received: decay={decay!r}")
    if decay == "linear":
        if power is not None and power != 1.0:
            raise ValueError(
                '`power` must be None or 1.0 with decay="linear"; use '
                f'decay="polynomial" for another power. Received: power={power!r}'
            )
        power = 1.0
    elif power is None:
        power = _POLYNOMIAL_POWER
    power = _check_real("power", power, 0.0, min_open=True)
    end_learning_rate = _check_real("end_learning_rate", end_learning_rate, 0.0, learning_rate)
    if clipnorm is not None:
        clipnorm = _check_real("clipnorm", clipnorm, 0.0, min_open=True)
    accumulation_steps = _check_int("accumulation_steps", accumulation_steps, 1)
    beta_1 = _check_real("beta_1", beta_1, 0.0, 1.0, max_open=True)
    beta_2 = _check_real("beta_2", beta_2, 0.0, 1.0, max_open=True)
    epsilon = _check_real("epsilon", epsilon, 0.0, min_open=True)

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


# --- fine-tuning ----------------------------------------------------------

@keras.saving.register_keras_serializable(package="kerasbert")
class AdamW(_ClipAcrossReplicas, keras.optimizers.AdamW):
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
                    "`learning_rate_multipliers` keys must be regular expressions (str) matched "
                    f"against variable paths. Received key: {pattern!r}"
                )
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(
                    f"`learning_rate_multipliers` key {pattern!r} is not a valid regular expression: {error}"
                ) from None
            multipliers[pattern] = _check_real(f"learning_rate_multipliers[{pattern!r}]", value, 0.0, min_open=True)
        self.learning_rate_multipliers = multipliers
        self.excluded_from_weight_decay = _check_names("excluded_from_weight_decay", excluded_from_weight_decay)
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
    head_learning_rate_multiplier=10.0,
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
        head_learning_rate_multiplier: > 0, for the task's new layers.
        layer_decay: in (0, 1].
        warmup_steps, weight_decay, clipnorm, accumulation_steps, beta_1,
            beta_2, epsilon: as `pretraining_optimizer` (warmup defaults
            to 10% of `total_steps`).

    Returns:
        A `kerasbert.optimizers.AdamW`.
    """
    head_learning_rate_multiplier = _check_real(
        "head_learning_rate_multiplier", head_learning_rate_multiplier, 0.0, min_open=True
    )
    layer_decay = _check_real("layer_decay", layer_decay, 0.0, 1.0, min_open=True)
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
