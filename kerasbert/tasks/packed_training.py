"""Training on packed rows (`kerasbert.preprocessing.packed_rows`): the
graph of a task's own layers that takes a packed batch and gives the task's
outputs one per example, in the batch's order, so that `y`,
`sample_weight`, the loss and the metrics are what they are on padded
batches."""

import weakref

import keras
from keras import ops

from kerasbert.preprocessing.packed_rows import EXAMPLE_SLOTS, TRAINING_DOCUMENTS
from kerasbert.tasks.task import encoder_inputs

# task -> the graph of its layers on packed rows
_PACKED_TRAINERS = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="kerasbert")
class ExampleOutputs(keras.layers.Layer):
    """The outputs of a packed batch's examples, in the batch's order:
    from `outputs (rows, documents, ...)`, one per example slot, and
    `slots (examples, 2)`, each example's row and number there (from 1),
    `(examples, ...)`. Never casts (`autocast=False`)."""

    def __init__(self, documents, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.documents = documents

    def call(self, outputs, slots):
        flat = ops.reshape(outputs, (-1, *outputs.shape[2:]))  # (rows * documents, ...)
        slots = ops.cast(slots, "int32")
        index = slots[:, 0] * self.documents + slots[:, 1] - 1  # (examples,)
        return ops.take(flat, index, axis=0)  # (examples, ...)

    def compute_output_shape(self, outputs_shape, slots_shape):
        return (slots_shape[0], *outputs_shape[2:])

    def get_config(self):
        return {**super().get_config(), "documents": self.documents}


def packed_trainer(task):
    """The graph of `task`'s layers on packed rows (built once per task):
    its encoder's inputs and `EXAMPLE_SLOTS` -> the task's outputs for each
    example, from `task._packed_outputs`. Its weights are the task's."""
    if task not in _PACKED_TRAINERS:
        inputs = encoder_inputs(task.encoder)
        slots = keras.Input((2,), dtype="int32", name=EXAMPLE_SLOTS)
        sequence_output = task.encoder(inputs)["sequence_output"]  # (rows, width, hidden)
        outputs = task._packed_outputs(sequence_output, inputs["padding_mask"], TRAINING_DOCUMENTS)
        outputs = ExampleOutputs(TRAINING_DOCUMENTS, name="example_outputs")(outputs, slots)  # (examples, ...)
        _PACKED_TRAINERS[task] = keras.Model({**inputs, EXAMPLE_SLOTS: slots}, outputs, name=f"{task.name}_packed")
    return _PACKED_TRAINERS[task]
