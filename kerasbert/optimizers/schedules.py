"""Learning-rate schedules: linear warmup, then linear or polynomial decay."""


import keras
from keras import ops

from kerasbert.utils.checks import check_int, check_number


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
        self.learning_rate = check_number("learning_rate", learning_rate, 0.0, low_open=True)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, 0)
        self.decay_steps = check_int("decay_steps", decay_steps, 1)
        if self.decay_steps < self.warmup_steps:
            raise ValueError(
                f"decay_steps counts all updates, warmup included, so it must be >= "
                f"warmup_steps={self.warmup_steps}; got {decay_steps!r}."
            )
        self.end_learning_rate = check_number(
            "end_learning_rate", end_learning_rate, 0.0, self.learning_rate
        )
        self.power = check_number("power", power, 0.0, low_open=True)
        self.accumulation_steps = check_int("accumulation_steps", accumulation_steps, 1)

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
