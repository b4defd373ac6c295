"""What the fine-tuning tasks share: a preprocessor so that `fit`,
`evaluate` and `predict` take raw text, the fine-tuning recipe as the
default optimizer, and task presets (encoder, tokenizer and head together)."""

import inspect
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from kerasbert.tasks.inputs import COMPILED_SHAPES, GROUP_BY_LENGTH, is_raw, make_dataset, select_inputs
from kerasbert.tasks.task import Task
from kerasbert.utils.io import read_json, read_safetensors, write_json, write_safetensors

TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.safetensors"


def _huggingface_head_config(cls, preset):
    """The config.json of a transformers checkpoint whose architecture is
    the task's (`BertForSequenceClassification` for a TextClassifier...),
    else None."""
    from kerasbert.convert.huggingface import huggingface_checkpoint_directory

    kind = getattr(cls, "huggingface_architecture", None)
    directory = huggingface_checkpoint_directory(preset)
    if kind is None or directory is None:
        return None
    config = read_json(os.path.join(directory, "config.json"), "Hugging Face config.json")
    architectures = config.get("architectures") or []
    return config if any(a.endswith(f"For{kind}") for a in architectures) else None


def text_signature(*names):
    """A serving input signature: a 1-D string batch per name."""
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def _dataset_steps(dataset):
    steps = int(dataset.cardinality())
    return steps if steps > 0 else None


class FineTuningTask(Task):
    """A `Task` with a `preprocessor` and the fine-tuning recipe.

    * `fit`, `evaluate` and `predict` take raw examples (lists of strings,
      pairs of lists, `tf.data` datasets of strings) and run them through
      `preprocessor` in `tf.data`, padding each batch to a few fixed lengths
      (`kerasbert.tasks.inputs`); packed features pass through untouched.
    * `compile()` with `optimizer="auto"` (the default, also applied at
      construction) builds, at each `fit`, the recipe of
      `kerasbert.optimizers.finetuning_optimizer` over that call's steps:
      AdamW without decay on biases and LayerNorm, `head_learning_rate_multiplier`
      for the new head, layer-wise decay, 10% warmup then linear decay.
    * `save_to_preset(dir)` writes the encoder, the tokenizer and the task
      (its arguments and head weights); `from_preset(dir)` restores it.

    `family` is the family of the preset the task came from ("bert", ...;
    None for a task built directly): `save_to_preset` records it and
    `to_huggingface` writes that family's architecture.
    """

    family = None

    # Subclasses: the preprocessor class `from_preset` builds by default,
    # and whether the outputs are per token, `(batch, seq, ...)`.
    preprocessor_class = None
    per_token_outputs = False
    # transformers' `{Family}For{huggingface_architecture}` holds this head.
    huggingface_architecture = None
    # The default preprocessor's `sequence_length` (at most the encoder's).
    default_sequence_length = 512
    # Defaults of the recipe; `compile(...)` overrides them.
    recipe_defaults = {"learning_rate": 5e-5, "head_learning_rate_multiplier": 10.0, "layer_decay": 1.0,
                       "weight_decay": 0.01, "warmup_fraction": 0.1}

    def _freeze_unused_pooler(self):
        """Tasks that read `sequence_output` only: the pooler gets no
        gradient, so it is left out of training (and its warning)."""
        if self.encoder.pooler_dense is not None:
            self.encoder.pooler_dense.trainable = False

    def _set_preprocessor(self, preprocessor):
        if preprocessor is not None and not isinstance(preprocessor, keras.layers.Layer):
            raise TypeError(
                f"preprocessor must be a kerasbert preprocessing layer or None; got {type(preprocessor).__name__}."
            )
        self.preprocessor = preprocessor

    # -- compile: the recipe as the default --------------------------------

    def _default_loss(self):
        raise NotImplementedError

    def _default_metrics(self):
        return None

    def compile(self, optimizer="auto", loss="auto", metrics="auto", *, learning_rate=None,
                head_learning_rate_multiplier=None, layer_decay=None, weight_decay=None,
                warmup_fraction=None, accumulation_steps=1, **kwargs):
        """`keras.Model.compile` with the task's defaults for every argument
        left "auto". With `optimizer="auto"`, the keyword arguments
        `learning_rate`, `head_learning_rate_multiplier`, `layer_decay`,
        `weight_decay`, `warmup_fraction` and `accumulation_steps` set the
        recipe (see `kerasbert.optimizers.finetuning_optimizer`)."""
        recipe = dict(self.recipe_defaults)
        given = {"learning_rate": learning_rate, "head_learning_rate_multiplier": head_learning_rate_multiplier,
                 "layer_decay": layer_decay, "weight_decay": weight_decay, "warmup_fraction": warmup_fraction}
        recipe.update({k: v for k, v in given.items() if v is not None})
        recipe["accumulation_steps"] = accumulation_steps
        fraction = recipe["warmup_fraction"]
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
            raise ValueError(f"warmup_fraction must be a number in [0, 1]; got {fraction!r}.")
        self._recipe = recipe if isinstance(optimizer, str) and optimizer == "auto" else None
        if self._recipe is not None:
            # A stand-in until `fit` knows the number of steps.
            optimizer = self._recipe_optimizer(total_steps=None)
        if kwargs.get("jit_compile", "auto") == "auto" and keras.backend.backend() == "tensorflow" \
                and not tf.config.list_logical_devices("GPU") and not tf.config.list_logical_devices("TPU"):
            # On CPU TensorFlow's own kernels ran these steps faster than XLA
            # (docs/results.md), and need no compilation per padded length.
            kwargs["jit_compile"] = False
        self._compile_arguments = dict(
            loss=self._default_loss() if isinstance(loss, str) and loss == "auto" else loss,
            metrics=self._default_metrics() if isinstance(metrics, str) and metrics == "auto" else metrics,
            **kwargs,
        )
        super().compile(optimizer=optimizer, **self._compile_arguments)

    def get_compile_config(self):
        config = super().get_compile_config()
        if config is not None and getattr(self, "_recipe", None) is not None:
            config = {**config, "optimizer": "auto", "recipe": dict(self._recipe)}
        return config

    def compile_from_config(self, config):
        """Compiles a model restored by `keras.models.load_model` as it was
        compiled when saved (the recipe included)."""
        config = dict(config)
        recipe = config.pop("recipe", None) or {}
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config, **recipe)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def _recipe_optimizer(self, total_steps):
        from kerasbert.optimizers import AdamW, WarmupDecay, finetuning_optimizer

        r = self._recipe
        if total_steps is None:  # unknown length: a constant rate
            optimizer = finetuning_optimizer(
                self, total_steps=1, warmup_steps=0, learning_rate=r["learning_rate"],
                head_learning_rate_multiplier=r["head_learning_rate_multiplier"], layer_decay=r["layer_decay"],
                weight_decay=r["weight_decay"], accumulation_steps=r["accumulation_steps"],
            )
            config = optimizer.get_config()
            config["learning_rate"] = WarmupDecay(r["learning_rate"], 0, 1, end_learning_rate=r["learning_rate"])
            return AdamW.from_config(config)
        updates = max(1, total_steps // r["accumulation_steps"])
        return finetuning_optimizer(
            self, total_steps=updates, warmup_steps=int(round(r["warmup_fraction"] * updates)),
            learning_rate=r["learning_rate"], head_learning_rate_multiplier=r["head_learning_rate_multiplier"],
            layer_decay=r["layer_decay"], weight_decay=r["weight_decay"],
            accumulation_steps=r["accumulation_steps"],
        )

    # -- fit / evaluate / predict on raw examples --------------------------

    def _feed(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, keep_order=False,
              sort_by_length=False):
        if self.preprocessor is None or not (isinstance(x, tf.data.Dataset) or is_raw(x)):
            return None
        return make_dataset(self.preprocessor, x, y, sample_weight, batch_size=batch_size, shuffle=shuffle,
                            shapes=self._padded_shapes(), group_by_length=1 if keep_order else GROUP_BY_LENGTH,
                            input_names=tuple(self.input), sort_by_length=sort_by_length)

    def _padded_shapes(self):
        # XLA compiles the step once per input shape: a few padded lengths
        # then; eager steps (torch, TensorFlow without XLA) take any.
        return COMPILED_SHAPES if getattr(self, "jit_compile", False) else None

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, shuffle=True,
            sample_weight=None, steps_per_epoch=None, **kwargs):
        """`keras.Model.fit`, also on raw examples (see the class doc);
        with the "auto" optimizer each call runs one full schedule."""
        dataset = self._feed(x, y, sample_weight, batch_size, shuffle=shuffle)
        if dataset is not None:
            x, y, sample_weight, batch_size = dataset, None, None, None
        if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
            validation = self._feed(*validation_data, batch_size=None) if is_raw(validation_data[0]) else None
            validation_data = validation if validation is not None else validation_data
        elif isinstance(validation_data, tf.data.Dataset):
            validation_data = self._feed(validation_data) or validation_data
        if getattr(self, "_recipe", None) is not None:
            steps = steps_per_epoch or (_dataset_steps(x) if isinstance(x, tf.data.Dataset) else None)
            if steps is None and x is not None and not isinstance(x, tf.data.Dataset):
                count = len(x[next(iter(x))]) if isinstance(x, dict) else len(x)
                steps = -(-count // (batch_size or 32))
            total = None if steps is None else steps * epochs - kwargs.get("initial_epoch", 0) * steps
            keras.Model.compile(self, optimizer=self._recipe_optimizer(total), **self._compile_arguments)
            if self.built:  # its slots made now, eagerly, not traced into the first step (seconds on TensorFlow)
                self.optimizer.build(self.trainable_variables)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data,
                           shuffle=shuffle and dataset is None, sample_weight=sample_weight,
                           steps_per_epoch=steps_per_epoch, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`, also on raw examples."""
        dataset = self._feed(x, y, sample_weight, batch_size)
        if dataset is not None:
            x, y, sample_weight, batch_size = dataset, None, None, None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict`, also on raw examples. Lists are predicted
        in order of length (fewer padded positions); the outputs come back
        in the input's order, per-token outputs padded with zeros to the
        preprocessor's `sequence_length`."""
        if self.preprocessor is None or not is_raw(x) and not isinstance(x, tf.data.Dataset):
            return super().predict(x, batch_size=batch_size, **kwargs)
        if isinstance(x, tf.data.Dataset):
            return self.predict_batches(self._feed(x, batch_size=batch_size, keep_order=True))
        dataset, order = self._feed(x, batch_size=batch_size, keep_order=True, sort_by_length=True)
        outputs = self.predict_batches(dataset)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return keras.tree.map_structure(lambda a: a[inverse], outputs)

    def predict_batches(self, dataset):
        """The model's outputs on every batch of `dataset` (batches of
        features, e.g. trimmed to different lengths), concatenated; outputs
        per token are padded with zeros to the preprocessor's
        `sequence_length` first."""
        width = self.preprocessor.sequence_length
        self._trace_for_any_length(dataset)
        collected = []
        for batch in dataset.as_numpy_iterator():
            features = batch[0] if isinstance(batch, tuple) else batch
            collected.append(keras.tree.map_structure(np.asarray, self.predict_on_batch(features)))

        def join(*parts):
            if self.per_token_outputs:  # (batch, seq, ...): pad seq to `width`
                parts = [np.pad(p, [(0, 0), (0, width - p.shape[1])] + [(0, 0)] * (p.ndim - 2)) for p in parts]
            return np.concatenate(parts, axis=0)

        if not collected:
            raise ValueError("there is nothing to predict: the input holds no examples.")
        return keras.tree.map_structure(join, *collected)

    def _trace_for_any_length(self, dataset):
        """TensorFlow graphs: traces the predict function once for the
        dataset's batches, whatever their rows and padded length. Left to
        itself it traced again for each new batch shape until it relaxed
        them, 1.2-1.8 s each on MiniLM."""
        if keras.backend.backend() != "tensorflow" or self.run_eagerly:
            return
        spec = dataset.element_spec
        features = spec[0] if isinstance(spec, tuple) else spec
        self.make_predict_function()
        self.predict_function.get_concrete_function([(features,)])

    # -- serving -------------------------------------------------------------

    def export(self, filepath, overwrite=False, **options):
        """Writes a SavedModel that takes raw text, the tokenizer inside
        (see `kerasbert.export.export`), from any backend; returns its path.
        `options` are the task's `serving_function` arguments."""
        from kerasbert.export import export

        return export(self, filepath, overwrite=overwrite, **options)

    def serving_function(self, **options):
        """`(fn, input_signature)`: the exported `serving_default`, a
        TensorFlow function of named 1-D string batches returning a dict of
        named outputs (subclasses)."""
        raise NotImplementedError(f"{type(self).__name__} has no serving signature.")

    def _serving_features(self, texts):
        """In the serving graph: raw strings (or a pair of batches) -> the
        model's inputs, each batch padded to its longest row."""
        return select_inputs(self.preprocessor(texts), tuple(self.input))

    # -- presets -------------------------------------------------------------

    @classmethod
    def _preset_arguments(cls, preset, family, kwargs):
        """Constructor defaults for a preset of `family` (subclasses)."""
        return kwargs

    @classmethod
    def from_preset(cls, preset, load_weights=True, dtype=None, sequence_length=None, **kwargs):
        """The task on `preset`'s encoder, with the preset's tokenizer in its
        default preprocessor (`sequence_length`: its longest sequence; by
        default the encoder's `max_sequence_length`, at most 512, or 384
        for question answering). A preset
        directory written by the task's `save_to_preset` restores the whole
        task: arguments, head weights and preprocessor; keyword arguments
        override its arguments."""
        from kerasbert.presets import from_preset, preset_directory, preset_family

        directory = preset_directory(preset)
        saved = os.path.join(directory, TASK_FILE)
        encoder = from_preset(preset, load_weights=load_weights, dtype=dtype)
        if os.path.isfile(saved):
            spec = read_json(saved, "kerasbert task file")
            if spec.get("class_name") != cls.__name__:
                raise ValueError(
                    f"{directory} holds a {spec.get('class_name')}, not a {cls.__name__}; "
                    f"load it with kerasbert.{spec.get('class_name')}.from_preset."
                )
            arguments = {**spec["config"], **kwargs}
            if "preprocessor" not in kwargs:
                options = dict(spec.get("preprocessor") or {})
                if sequence_length is not None:
                    options["sequence_length"] = sequence_length
                arguments["preprocessor"] = cls.preprocessor_class.from_preset(directory, **options)
            task = cls(encoder, **arguments)
            task.family = preset_family(preset)
            if load_weights:
                task._assign_task_weights(os.path.join(directory, TASK_WEIGHTS_FILE))
            return task
        head_config = _huggingface_head_config(cls, preset)
        given = dict(kwargs)
        if head_config is not None:
            kwargs = {**cls._huggingface_arguments(head_config), **kwargs}
        kwargs = cls._preset_arguments(preset, preset_family(preset), kwargs)
        if "preprocessor" not in kwargs and cls.preprocessor_class is not None:
            kwargs["preprocessor"] = cls._default_preprocessor(preset, encoder, sequence_length)
        task = cls(encoder, **kwargs)
        task.family = preset_family(preset)
        if load_weights and head_config is not None:
            from kerasbert.convert.huggingface import assign_head_weights, huggingface_checkpoint_directory

            conflicting = {k: v for k, v in cls._huggingface_arguments(head_config).items()
                           if k in given and given[k] != v}
            if conflicting:
                warnings.warn(
                    f"{preset}: the checkpoint's head was trained with {cls._huggingface_arguments(head_config)}, "
                    f"not {conflicting}; the task starts with a fresh head.",
                    stacklevel=2,
                )
            else:
                assign_head_weights(task, huggingface_checkpoint_directory(preset))
        return task

    @classmethod
    def _huggingface_arguments(cls, head_config):
        """Constructor arguments read from a matching transformers
        checkpoint's config.json (e.g. its number of labels)."""
        return {}

    def _head_variables(self):
        encoder_ids = {id(v) for v in self.encoder.weights}
        return [v for v in self.weights if id(v) not in encoder_ids]

    @classmethod
    def _default_preprocessor(cls, preset, encoder, sequence_length):
        length = sequence_length or min(encoder.max_sequence_length, cls.default_sequence_length)
        try:
            return cls.preprocessor_class.from_preset(preset, **cls._preprocessor_options(length))
        except FileNotFoundError as error:
            warnings.warn(
                f"{error} The {cls.__name__} takes packed features (token_ids, ...), not text; pass "
                f"preprocessor={cls.preprocessor_class.__name__}(tokenizer, ...) for text.",
                stacklevel=3,
            )
            return None

    @classmethod
    def _preprocessor_options(cls, sequence_length):
        """Keyword arguments of the default preprocessor for windows of
        `sequence_length` tokens."""
        options = {"sequence_length": sequence_length}
        if "pad_to_sequence_length" in inspect.signature(cls.preprocessor_class.__init__).parameters:
            options["pad_to_sequence_length"] = False  # batches are padded to a few lengths instead
        return options

    def _assign_task_weights(self, path):
        tensors = read_safetensors(path)
        variables = {v.path: v for v in self._head_variables()}
        if set(tensors) != set(variables):
            raise ValueError(
                f"{path} holds head weights {sorted(tensors)}, but this task's head has {sorted(variables)}."
            )
        for name, variable in variables.items():
            if tuple(tensors[name].shape) != tuple(variable.shape):
                raise ValueError(f"{path}: {name} has shape {tensors[name].shape}, the head needs {variable.shape}.")
        for name, variable in variables.items():
            variable.assign(tensors[name])

    def save_to_preset(self, preset_dir):
        """Writes the whole task as a kerasbert preset directory: the
        encoder (`preset.json`, `encoder.safetensors`, which
        `kerasbert.from_preset` loads alone), the tokenizer's files, and
        `task.json` + `task.safetensors` (the task's arguments and head
        weights), which `from_preset` of this class reads back. The task
        file is written last, so it always describes complete files."""
        from kerasbert.presets import save_to_preset

        family = getattr(self, "family", None)
        save_to_preset(self.encoder, preset_dir, _spec={"family": family} if family else None)
        config = {}
        for key, value in self._task_config.items():
            if key in ("encoder", "preprocessor"):
                continue
            config[key] = value
        preprocessor = None
        if self.preprocessor is not None:
            self.preprocessor.tokenizer.save_to_preset(preset_dir)
            preprocessor = {k: v for k, v in self.preprocessor.get_config().items()
                            if k not in ("tokenizer", "name", "trainable", "dtype")}
        tensors = {v.path: np.asarray(keras.ops.convert_to_numpy(v), np.float32) for v in self._head_variables()}
        write_safetensors(os.path.join(preset_dir, TASK_WEIGHTS_FILE), tensors, {"format": "kerasbert"})
        write_json(os.path.join(preset_dir, TASK_FILE),
                   {"class_name": type(self).__name__, "config": config, "preprocessor": preprocessor})
        return preset_dir
