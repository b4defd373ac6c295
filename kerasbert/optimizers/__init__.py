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

from kerasbert.optimizers.adamw import AdamW
from kerasbert.optimizers.exclusions import DEFAULT_EXCLUDED, apply_weight_decay_exclusions
from kerasbert.optimizers.lamb import Lamb
from kerasbert.optimizers.recipes import finetuning_optimizer, layer_depths, pretraining_optimizer
from kerasbert.optimizers.schedules import WarmupDecay

__all__ = [
    "DEFAULT_EXCLUDED",
    "AdamW",
    "Lamb",
    "WarmupDecay",
    "apply_weight_decay_exclusions",
    "finetuning_optimizer",
    "layer_depths",
    "pretraining_optimizer",
]
