"""What every task shares: the encoder's symbolic inputs and `from_preset`."""

import keras

from kerasbert.encoder import Encoder


def encoder_inputs(encoder):
    """Fresh symbolic inputs for `encoder`: `token_ids`, `segment_ids` (when
    the encoder has segments) and `padding_mask`, each `(batch, seq)` int32."""
    names = ["token_ids", "segment_ids", "padding_mask"] if encoder.num_segments else ["token_ids", "padding_mask"]
    return {name: keras.Input((None,), dtype="int32", name=name) for name in names}


def check_encoder(encoder, name="encoder"):
    if not isinstance(encoder, Encoder):
        raise TypeError(
            f"{name} must be a kerasbert.Encoder (e.g. kerasbert.from_preset(...)); "
            f"got {type(encoder).__name__}."
        )
    return encoder


class Task(keras.Model):
    """A functional model built around an `Encoder`.

    Subclasses build their graph in `__init__(encoder, ...)`; the model runs
    in the encoder's dtype policy (so `compile` adds loss scaling under
    "mixed_float16"), and `from_preset` builds the encoder first.
    """

    def _finish(self, policy_source, **config):
        """Records the constructor arguments (`config`) and runs the model in
        `policy_source`'s dtype policy."""
        # Functional models do not record the policy their layers use.
        self.dtype_policy = policy_source.dtype_policy
        self._task_config = config

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable}
        for key, value in self._task_config.items():
            if isinstance(value, keras.layers.Layer):
                value = keras.saving.serialize_keras_object(value)
            config[key] = value
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key, value in config.items():
            if isinstance(value, dict) and "class_name" in value:
                config[key] = keras.saving.deserialize_keras_object(value)
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, load_weights=True, dtype=None, **kwargs):
        """The task on the encoder of `preset` (a built-in name, a kerasbert
        preset directory, a Hugging Face checkpoint directory or
        `hf://org/name`; see `kerasbert.from_preset`). Other keyword
        arguments go to the task's constructor.

        From a Hugging Face pretraining checkpoint (`BertForPreTraining`,
        `...ForMaskedLM`), the task's heads get the checkpoint's head weights
        too; heads the checkpoint lacks start fresh."""
        from kerasbert.convert.huggingface import (
            assign_head_weights,
            huggingface_checkpoint_directory,
        )
        from kerasbert.presets import from_preset

        task = cls(from_preset(preset, load_weights=load_weights, dtype=dtype), **kwargs)
        if load_weights:
            directory = huggingface_checkpoint_directory(preset)
            if directory is not None:
                assign_head_weights(task, directory)
        return task
