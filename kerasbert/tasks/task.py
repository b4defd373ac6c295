"""What every task shares: the encoder's symbolic inputs, an optional
preprocessor (raw text in), task presets (encoder, tokenizer and head
together) and the serving export."""

import inspect
import numbers
import os
import warnings

import keras
import numpy as np

from kerasbert.distribution import StepByStep, spans_host_devices, torch_data_parallel
from kerasbert.encoder import Encoder
from kerasbert.layers import quantization
from kerasbert.layers.lora import DEFAULT_TARGETS
from kerasbert.preprocessing.datasets import select_inputs
from kerasbert.tasks import adapters, process_steps
from kerasbert.tasks.training_faults import (
    NonFiniteLoss,
    NonFiniteLossGuard,
    is_out_of_memory,
    out_of_memory_message,
)
from kerasbert.utils.checks import abbreviated, check_bool, check_int
from kerasbert.utils.examples import check_sample_weight, check_targets, checked_dataset, input_errors
from kerasbert.utils.features import check_features, check_host_features
from kerasbert.utils.hardware import cpu_multiplies_bfloat16
from kerasbert.utils.integrity import check_recorded, digests
from kerasbert.utils.io import read_json, read_safetensors, updating_directory, write_json, write_safetensors
from kerasbert.utils.optional import is_dataset, is_tensor, tf
from kerasbert.utils.registry import subclass_named

TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.safetensors"


def encoder_inputs(encoder):
    """Fresh symbolic inputs for `encoder`: `token_ids`, `segment_ids` (when
    the encoder has segments) and `padding_mask`, each `(batch, seq)` int32."""
    names = ["token_ids", "segment_ids", "padding_mask"] if encoder.num_segments else ["token_ids", "padding_mask"]
    return {name: keras.Input((None,), dtype="int32", name=name) for name in names}


@keras.saving.register_keras_serializable(package="kerasbert")
class EncoderAtPositions(keras.layers.Layer):
    """`encoder.outputs_at(features, positions)` as one layer of a task's
    graph: `sequence_output (batch, n, hidden)` at `positions (batch, n)` and
    `pooled_output`, with the encoder's last layer run at those rows only
    (masked LMs: the masked positions; classifiers: the first token). It
    owns no weights (the encoder's are listed through it, in the encoder's
    order, so checkpoints keep their layout) and is rebuilt by the task,
    never from a config."""

    def __init__(self, encoder, **kwargs):
        kwargs.setdefault("dtype", encoder.dtype_policy)
        super().__init__(**kwargs)
        self.encoder = encoder

    def call(self, features, positions):
        return self.encoder.outputs_at(features, positions)

    def compute_output_shape(self, features_shape, positions_shape):
        hidden = self.encoder.hidden_dim
        return {"sequence_output": (*positions_shape, hidden), "pooled_output": (positions_shape[0], hidden)}


def resolve_jit_compile(jit_compile, compute_dtype, xla_on_tensorflow_cpu=True, run_eagerly=False,
                        distributed=False):
    """A task's `jit_compile`: True and False as given; "auto" is Keras's
    choice (XLA on JAX and on TensorFlow with an accelerator, eager on
    torch, TensorFlow's own kernels on a TensorFlow CPU) except for tasks
    that ask for XLA on a TensorFlow CPU (`xla_on_tensorflow_cpu`: the
    pretraining tasks, whose batches have one shape). They get it unless
    they compute in bfloat16 (`compute_dtype`) on a CPU with bfloat16 matrix
    units: XLA's CPU compiler multiplies bfloat16 matrices in float32,
    oneDNN's kernels on those units. BERT-small's MLM step on an AMX CPU: in
    float32 XLA's ran 1.24x as fast as TensorFlow's kernels, in bfloat16
    TensorFlow's 1.41x as fast as XLA's, and 1.38x on an AVX512-BF16 CPU
    without AMX (docs/performance_history.md). Under a
    `tf.distribute` strategy (`distributed`) or with `run_eagerly` "auto"
    stays Keras's (no XLA)."""
    if not (isinstance(jit_compile, str) and jit_compile == "auto"):
        return jit_compile
    if keras.backend.backend() != "tensorflow" or not xla_on_tensorflow_cpu or run_eagerly or distributed:
        return jit_compile
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return jit_compile
    return not (compute_dtype == "bfloat16" and cpu_multiplies_bfloat16())


def _step_by_step():
    """The callbacks `fit` and `evaluate` add: one step at a time on several
    CPU devices (`kerasbert.distribution.StepByStep`)."""
    return [StepByStep()] if spans_host_devices() else []


def check_encoder(encoder, name="encoder"):
    if not isinstance(encoder, Encoder):
        raise TypeError(
            f"{name} must be a kerasbert.Encoder (e.g. kerasbert.from_preset(...)); "
            f"got {type(encoder).__name__}."
        )
    return encoder


def text_signature(*names):
    """A serving input signature: a 1-D string batch per name."""
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def _task_preset_file(preset):
    """The task file of a local kerasbert task preset directory, else None
    (a KerasHub task preset has a task.json of its own: it is converted)."""
    from kerasbert.presets import is_keras_hub_directory

    if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset) and not is_keras_hub_directory(preset):
        path = os.path.join(os.fspath(preset), TASK_FILE)
        return path if os.path.isfile(path) else None
    return None


class Task(keras.Model):
    """A functional model built around an `Encoder`.

    Subclasses build their graph in `__init__(encoder, ...)`; the model runs
    in the encoder's dtype policy (so `compile` adds loss scaling under
    "mixed_float16"), and `from_preset` builds the encoder first.

    A task with a `preprocessor` (its tokenizer inside) takes raw text:
    `save_to_preset(dir)` writes the encoder, the tokenizer and the task (its
    arguments and head weights), `from_preset(dir)` restores it, and
    `export(path)` writes a SavedModel that serves raw strings.

    `family` is the family of the preset the task came from ("bert", ...;
    None for a task built directly): `save_to_preset` records it and
    `to_huggingface` writes that family's architecture.
    """

    family = None
    # Which Hugging Face head its weights map to (`kerasbert.convert`); None:
    # the encoder alone.
    huggingface_head = None
    # Whether `compile(jit_compile="auto")` runs the task under XLA on a
    # TensorFlow CPU, where Keras's "auto" does not (`resolve_jit_compile`).
    xla_on_tensorflow_cpu = True
    # (No class attribute `preprocessor`: on torch it would hide the layer,
    # which torch's Module keeps in `_modules`.)
    # The preprocessor class `from_preset` builds by default (subclasses),
    # and its default `sequence_length` (at most the encoder's).
    preprocessor_class = None
    default_sequence_length = 512

    def compile(self, *args, jit_compile="auto", **kwargs):
        """`keras.Model.compile`, with "auto" `jit_compile` resolved for
        this task and machine (`resolve_jit_compile`)."""
        jit_compile = resolve_jit_compile(
            jit_compile, self.compute_dtype, self.xla_on_tensorflow_cpu, kwargs.get("run_eagerly", False),
            distributed=getattr(self, "_distribute_strategy", None) is not None,
        )
        super().compile(*args, jit_compile=jit_compile, **kwargs)

    def _record_config(self, policy_source, **config):
        """Records the constructor arguments (`config`) and runs the model in
        `policy_source`'s dtype policy."""
        # Functional models do not record the policy their layers use.
        self.dtype_policy = policy_source.dtype_policy
        self._task_config = config
        quantization.unwrap_quantize(self)

    def _set_preprocessor(self, preprocessor):
        wanted = self.preprocessor_class or keras.layers.Layer
        if preprocessor is not None and not isinstance(preprocessor, wanted):
            name = "a kerasbert preprocessing layer" if self.preprocessor_class is None else \
                f"a kerasbert.preprocessing.{wanted.__name__}"
            raise TypeError(
                f"preprocessor must be {name} or None; got {type(preprocessor).__name__}."
            )
        encoder = getattr(self, "encoder", None)
        length = getattr(preprocessor, "sequence_length", None)
        if encoder is not None and length is not None and length > encoder.max_sequence_length:
            # Positions past the table would index outside it: NaN or garbage, not an error.
            raise ValueError(
                f"The preprocessor's sequence_length={length} is longer than the encoder's position table "
                f"(max_sequence_length={encoder.max_sequence_length}). Give the preprocessor "
                f"sequence_length <= {encoder.max_sequence_length}."
            )
        self.preprocessor = preprocessor

    def get_config(self):
        config = {"name": self.name, "trainable": self.trainable}
        head_modes = quantization.quantized_modes(self, skip=self.encoder)  # the encoder's config has its own
        if head_modes:
            config["dtype"] = keras.dtype_policies.serialize(
                quantization.recorded_policy(self.encoder.dtype_policy, head_modes))
        for key, value in self._task_config.items():
            if isinstance(value, keras.layers.Layer):
                value = keras.saving.serialize_keras_object(value)
            config[key] = value
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        _, head_modes = quantization.split_policy(config.pop("dtype", None))  # the encoder's policy rules
        for key, value in config.items():
            if isinstance(value, dict) and "class_name" in value:
                config[key] = keras.saving.deserialize_keras_object(value)
        task = cls(**config)
        quantization.requantize(task, head_modes, "the config's dtype")
        return task

    # -- training ------------------------------------------------------------

    def fit(self, x=None, y=None, batch_size=None, epochs=1, *args, **kwargs):
        """`keras.Model.fit`, its data checked first (see "checked data"
        below); a NaN or infinite training loss stops it with a
        FloatingPointError that names the step, and running out of memory
        raises a MemoryError that says what to shrink
        (`kerasbert.tasks.training_faults`)."""
        x, y, epochs, kwargs = self._checked_fit_arguments(x, y, batch_size, epochs, kwargs)
        engine = torch_data_parallel()
        if engine is not None:  # each process trains on its share of every batch
            x = engine.distribute_dataset(x)
            if is_dataset(kwargs.get("validation_data")):
                kwargs["validation_data"] = engine.distribute_dataset(kwargs["validation_data"])
        args = (x, y, batch_size, epochs, *args)
        if getattr(self, "_non_finite_loss", None) is None:
            self._non_finite_loss = NonFiniteLoss()
        kwargs["callbacks"] = [NonFiniteLossGuard(self._non_finite_loss), *_step_by_step(),
                               *(kwargs.get("callbacks") or [])]
        try:
            with input_errors():
                return super().fit(*args, **kwargs)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            raise MemoryError(out_of_memory_message(self, batch_size)) from error

    # Keras's steps take (data) on TensorFlow and torch, (state, data) on JAX.
    def train_step(self, *args):
        if torch_data_parallel() is not None:
            return process_steps.torch_train_step(self, *args)
        return process_steps.per_worker_logs(self, super().train_step(*args))

    def test_step(self, *args):
        if torch_data_parallel() is not None:
            return process_steps.torch_test_step(self, *args)
        return process_steps.per_worker_logs(self, super().test_step(*args))

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # TensorFlow only; see kerasbert.tasks.process_steps.
        strategy = process_steps.multi_worker_strategy(self)
        if strategy is not None and iterator is not None:
            iterator, data_batch = None, process_steps.first_local_batch(strategy, iterator)
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        # Keras's train and test steps of every backend compute the loss here.
        loss = super().compute_loss(x, y, y_pred, sample_weight, training=training)
        tracker = getattr(self, "_non_finite_loss", None)
        if training and tracker is not None:
            tracker.update_state(loss)
        return loss

    # -- checked data ----------------------------------------------------------
    # Keras's own methods, with the data checked first (kerasbert.utils.examples):
    # packed features within the encoder's tables, targets within the task's
    # classes, weights finite and >= 0. Without the checks, TensorFlow's CPU
    # gathers raise framework errors, JAX's clamp or give NaN, and a NaN loss
    # spoils the weights for good.

    def _targets(self, raw=False):
        """What `y` holds: a `kerasbert.utils.examples.Targets`, a dict of them
        per output, or None (unchecked). `raw`: the `y` of raw examples."""
        return None

    def _input_encoder(self):
        """The encoder whose tables the inputs index."""
        return getattr(self, "encoder", None) or self.discriminator

    def _checked_data(self, x, y=None, sample_weight=None, names=("x", "y", "sample_weight"), needs_y=False):
        """`(x, y, sample_weight)` checked: packed features (a dict), with
        targets (required with `needs_y`) and weights, or a dataset of them
        with the checks in its pipeline. Other Keras inputs (generators,
        PyDatasets) pass unchecked."""
        encoder, input_names = self._input_encoder(), tuple(self.input)
        if is_dataset(x):
            return checked_dataset(x, encoder, input_names, self._targets()), y, sample_weight
        if x is None or isinstance(x, (str, bytes, list, tuple, np.ndarray, numbers.Number)) or is_tensor(x):
            text = isinstance(x, (str, bytes)) or isinstance(x, (list, tuple)) and x and isinstance(x[0], str)
            hint = "; text goes through a preprocessor first (e.g. kerasbert.preprocessing." + (
                "MaskedLMPreprocessor)" if "mask_positions" in input_names else "TextPreprocessor)") if text else ""
            raise TypeError(f"{names[0]} must be packed features, a dict with {list(input_names)} (or a "
                            f"tf.data.Dataset of them); got {type(x).__name__} {abbreviated(x)}{hint}.")
        if not isinstance(x, dict):
            return x, y, sample_weight
        x = check_features(x, encoder, input_names, names[0])
        tokens = np.shape(x["token_ids"])
        targets = self._targets()
        if targets is not None and (y is not None or needs_y):
            y = check_targets(y, targets, names[1], count=tokens[0], sequence=tokens[1])
        check_sample_weight(sample_weight, names[2], count=tokens[0])
        return x, y, sample_weight

    def __call__(self, *args, **kwargs):
        # Features in host memory (NumPy) are checked as `predict` checks
        # them; tensors (traced, or on a device) pass as they are.
        inputs = args[0] if args else kwargs.get("inputs")
        check_host_features(inputs, self._input_encoder(), tuple(self.input), "inputs")
        return super().__call__(*args, **kwargs)

    def _checked_validation(self, validation_data):
        if validation_data is None:
            return None
        if is_dataset(validation_data):
            return self._checked_data(validation_data)[0]
        if isinstance(validation_data, keras.utils.PyDataset):  # e.g. a fine-tuning task's packed batches
            return validation_data
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError("validation_data must be (x, y), (x, y, sample_weight) or a tf.data.Dataset; got "
                             f"{abbreviated(validation_data)}.")
        names = tuple(f"validation_data[{i}]" for i in range(3))
        return self._checked_data(*validation_data, names=names, needs_y=True)[: len(validation_data)]

    def _checked_fit_arguments(self, x, y, batch_size, epochs, kwargs):
        """`fit`'s `(x, y, epochs, kwargs)`, checked."""
        if batch_size is not None:
            check_int("batch_size", batch_size, 1)
        epochs = check_int("epochs", epochs, 1)
        x, y, weight = self._checked_data(x, y, kwargs.get("sample_weight"), needs_y=True)
        kwargs = dict(kwargs)
        if weight is not None:
            kwargs["sample_weight"] = weight
        if kwargs.get("validation_data") is not None:
            kwargs["validation_data"] = self._checked_validation(kwargs["validation_data"])
        return x, y, epochs, kwargs

    def evaluate(self, x=None, y=None, batch_size=None, *args, **kwargs):
        """`keras.Model.evaluate`, the data checked first (see above)."""
        if batch_size is not None:
            check_int("batch_size", batch_size, 1)
        x, y, weight = self._checked_data(x, y, kwargs.get("sample_weight"), needs_y=True)
        if weight is not None:
            kwargs["sample_weight"] = weight
        engine = torch_data_parallel()
        if engine is not None:
            x = engine.distribute_dataset(x)
        if not isinstance(kwargs.get("callbacks"), keras.callbacks.CallbackList):  # (fit's validation: has them)
            kwargs["callbacks"] = [*_step_by_step(), *(kwargs.get("callbacks") or [])]
        with input_errors():
            return super().evaluate(x, y, batch_size, *args, **kwargs)

    def predict(self, x, batch_size=None, *args, **kwargs):
        """`keras.Model.predict`, the data checked first (see above)."""
        if batch_size is not None:
            check_int("batch_size", batch_size, 1)
        x = self._checked_data(x)[0]
        with input_errors():
            return super().predict(x, batch_size, *args, **kwargs)

    # -- serving -------------------------------------------------------------

    def export(self, filepath, overwrite=False, format="saved_model", **options):
        """Writes the task for serving, from any backend, and returns its
        path (see `kerasbert.export.export`): `format="saved_model"`, a
        SavedModel that takes raw text, the tokenizer inside; `"onnx"`, the
        model on token ids with the tokenizer's files beside it;
        `"litert"`, a WordPiece `TextClassifier` taking raw text.
        `options` are the task's `serving_function` arguments (SavedModel)."""
        from kerasbert.export import export

        if format == "saved_model":
            accepted = [n for n in inspect.signature(self.serving_function).parameters if n != "self"]
            unknown = sorted(set(options) - set(accepted))
            if unknown:
                raise TypeError(
                    f"export() got an unexpected keyword argument {unknown[0]!r}: a {type(self).__name__}'s serving "
                    f"options are {accepted or 'none'}."
                )
        return export(self, filepath, overwrite=overwrite, format=format, **options)

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
    def from_preset(cls, preset, load_weights=True, dtype=None, sequence_length=None, **kwargs):
        """The task on the encoder of `preset` (a built-in name, a kerasbert
        preset directory, a Hugging Face checkpoint directory or
        `hf://org/name`; see `kerasbert.from_preset`), with the preset's
        tokenizer in its default preprocessor when the task has one
        (`sequence_length`: its longest sequence; by default the encoder's
        `max_sequence_length`, at most the task's `default_sequence_length`).
        Other keyword arguments go to the task's constructor.

        A preset directory written by the task's `save_to_preset` restores
        the whole task: arguments, head weights and preprocessor; keyword
        arguments override its arguments. From a Hugging Face checkpoint
        whose heads the task has (`BertForPreTraining`, `...ForMaskedLM`,
        `...ForSequenceClassification`, ...), the task's heads get the
        checkpoint's weights; heads the checkpoint lacks start fresh."""
        from kerasbert.convert.heads import assign_head_weights
        from kerasbert.presets import from_preset, huggingface_checkpoint_directory, preset_family

        saved = _task_preset_file(preset)
        if saved is not None:
            return cls._restore(preset, saved, load_weights, dtype, sequence_length, kwargs)
        encoder = from_preset(preset, load_weights=load_weights, dtype=dtype)
        kwargs, head_weights = cls._head_arguments(preset, kwargs, load_weights)
        kwargs = cls._preset_arguments(preset, preset_family(preset), kwargs)
        if "preprocessor" not in kwargs and cls.preprocessor_class is not None:
            kwargs["preprocessor"] = cls._default_preprocessor(preset, encoder, sequence_length)
        task = cls(encoder, **kwargs)
        task.family = preset_family(preset)
        task.base_preset = adapters.base_reference(preset)
        directory = huggingface_checkpoint_directory(preset) if load_weights and head_weights else None
        if directory is not None:
            assign_head_weights(task, directory)
        return task

    @classmethod
    def _restore(cls, preset, spec_file, load_weights, dtype, sequence_length, kwargs):
        """`from_preset` of a task preset directory (`save_to_preset`)."""
        from kerasbert.presets import checked_arguments, from_preset, preset_family

        directory = os.path.dirname(spec_file)
        spec = read_json(spec_file, "kerasbert task file")
        if spec.get("class_name") != cls.__name__:
            raise ValueError(
                f"{directory} holds a {spec.get('class_name')}, not a {cls.__name__}; "
                f"load it with kerasbert.{spec.get('class_name')}.from_preset."
            )
        # An adapter preset's encoder and tokenizer are its base's.
        base = spec["base"]["preset"] if "lora" in spec else adapters.base_reference(preset)
        encoder = from_preset(base, load_weights=load_weights, dtype=dtype)
        config = checked_arguments(cls, spec.get("config"), f"{spec_file}: 'config'",
                                   reserved=("encoder", "preprocessor"))
        arguments = {**config, **kwargs}
        if "preprocessor" not in kwargs and spec.get("preprocessor") is not None:
            options = dict(checked_arguments(cls.preprocessor_class, spec["preprocessor"],
                                             f"{spec_file}: 'preprocessor'", reserved=("tokenizer",)))
            if sequence_length is not None:
                options["sequence_length"] = sequence_length
            arguments["preprocessor"] = cls.preprocessor_class.from_preset(base, **options)
        task = cls(encoder, **arguments)
        quantization.requantize(task, spec.get("quantization", {}), f"{spec_file}: 'quantization'")
        task.family = preset_family(base)
        task.base_preset = base
        if load_weights:
            check_recorded(directory, TASK_WEIGHTS_FILE, spec, spec_file)
            if "lora" in spec:
                check_recorded(directory, adapters.ADAPTERS_FILE, spec, spec_file)
                adapters.assign_adapters(task, spec, directory, spec_file)
            task._assign_task_weights(os.path.join(directory, TASK_WEIGHTS_FILE))
        elif "lora" in spec:
            task.enable_lora(spec["lora"]["rank"], alpha=spec["lora"]["alpha"], targets=tuple(spec["lora"]["targets"]))
        return task

    @classmethod
    def _head_arguments(cls, preset, kwargs, load_weights):
        """`(kwargs, whether a Hugging Face checkpoint's head weights are
        loaded)`: here always (heads the checkpoint lacks start fresh)."""
        return kwargs, True

    @classmethod
    def _preset_arguments(cls, preset, family, kwargs):
        """Constructor defaults for a preset of `family` (subclasses)."""
        return kwargs

    @classmethod
    def _default_preprocessor(cls, preset, encoder, sequence_length):
        length = sequence_length or min(encoder.max_sequence_length, cls.default_sequence_length)
        try:
            return cls.preprocessor_class.from_preset(preset, **cls._preprocessor_options(length))
        except FileNotFoundError as error:
            warnings.warn(
                f"{error} The {cls.__name__} takes packed features (token_ids, ...), not text; pass "
                f"preprocessor={cls.preprocessor_class.__name__}(tokenizer, ...) for text.",
                stacklevel=4,
            )
            return None

    @classmethod
    def _preprocessor_options(cls, sequence_length):
        """Keyword arguments of the default preprocessor for windows of
        `sequence_length` tokens."""
        options = {"sequence_length": sequence_length}
        if "pad_to_sequence_length" in inspect.signature(cls.preprocessor_class.__init__).parameters:
            options["pad_to_sequence_length"] = False  # batches are padded to their longest rows instead
        return options

    def _head_variables(self):
        encoder_ids = {id(v) for v in self.encoder.weights}
        return [v for v in self.weights if id(v) not in encoder_ids]

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

    def save_to_preset(self, preset_dir, adapters_only=False, base=None):
        """Writes the whole task as a kerasbert preset directory: the
        encoder (`preset.json`, `encoder.safetensors`, which
        `kerasbert.from_preset` loads alone; LoRA adapters folded in), the
        tokenizer's files, and `task.json` + `task.safetensors` (the task's
        arguments and head weights), which `from_preset` of this class
        reads back. The directory is replaced as a whole, keeping files of
        others (`kerasbert.utils.io.updating_directory`); the task file
        records its weights' size and digest.

        `adapters_only=True` writes a task tuned with `enable_lora` as its
        adapters, head and arguments alone, naming `base` (by default the
        preset the task was loaded from), whose encoder and tokenizer
        `from_preset` loads them onto (`kerasbert.tasks.adapters`)."""
        from kerasbert.utils.preset_files import write_encoder_files

        family = getattr(self, "family", None)
        config = {key: value for key, value in self._task_config.items() if key not in ("encoder", "preprocessor")}
        preprocessor = getattr(self, "preprocessor", None)
        spec = {"class_name": type(self).__name__, "config": config}
        head_modes = quantization.quantized_modes(self, skip=self.encoder)
        if head_modes:
            spec["quantization"] = head_modes
        if check_bool("adapters_only", adapters_only):
            spec.update(adapters.adapter_spec(self, getattr(self, "base_preset", None) if base is None else base))
        with updating_directory(preset_dir) as staged:
            if adapters_only:
                write_safetensors(os.path.join(staged, adapters.ADAPTERS_FILE),
                                  adapters.adapter_tensors_by_target(self.encoder), {"format": "kerasbert"})
            else:
                write_encoder_files(self.encoder, staged, os.path.basename(os.path.normpath(preset_dir)),
                                    {"family": family} if family else None)
            if preprocessor is not None:
                if not adapters_only:
                    preprocessor.tokenizer.save_to_preset(staged)
                preprocessor = {k: v for k, v in preprocessor.get_config().items()
                                if k not in ("tokenizer", "name", "trainable", "dtype")}
            tensors = {v.path: quantization.stored_array(v) for v in self._head_variables()}
            write_safetensors(os.path.join(staged, TASK_WEIGHTS_FILE), tensors, {"format": "kerasbert"})
            write_json(os.path.join(staged, TASK_FILE),
                       {**spec, "preprocessor": preprocessor,
                        "files": digests(staged, (TASK_WEIGHTS_FILE,) + (adapters.ADAPTERS_FILE,) * adapters_only)},
                       seal=True)
        return preset_dir

    # -- LoRA ------------------------------------------------------------------

    def enable_lora(self, rank, alpha=None, targets=DEFAULT_TARGETS):
        """Fine-tunes through low-rank adapters: freezes the encoder and
        puts a rank-`rank` adapter, scaled by `alpha / rank`, on each dense
        layer `targets` names in every block ("qkv", "attention_output",
        "intermediate", "output"; `Encoder.enable_lora`); the head stays
        trainable. Compile after enabling. `save_to_preset(dir,
        adapters_only=True)` writes the adapters and the head alone;
        `merge_lora()` folds the adapters in (before export, for one)."""
        self.encoder.enable_lora(rank, alpha, targets)
        self._forget_steps()

    def merge_lora(self):
        """Folds the adapters into the encoder's kernels and removes them;
        the task computes as before, and trains in full again."""
        self.encoder.merge_lora()
        self._forget_steps()

    # -- quantization ----------------------------------------------------------

    def quantize(self, mode, config=None):
        """Quantizes the encoder's and the head's dense layers and embedding
        tables in `mode` through Keras's own quantization (`config`: a
        `keras.quantizers.QuantizationConfig` for that mode, given to the
        dense layers and the embedding tables alike, so leave its weight
        quantizer None for each kind's own; see
        `kerasbert.layers.quantization`): "int8" or "int4" weights for
        inference, or "float8" computation that `fit` trains.
        `save_to_preset`, `.keras` files and `export` keep the quantized
        weights. Compile again after quantizing."""
        quantization.quantize(self, mode, config)
        self._forget_steps()

    def _forget_steps(self):
        # The trainable weights changed: steps traced for the old ones are
        # stale, and a built optimizer's slots belong to them.
        self.train_function = self.test_function = self.predict_function = None
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and optimizer.built:
            self.compiled = False


def load_task(preset):
    """The task a task preset directory holds (written by
    `task.save_to_preset` or `kerasbert finetune`: its `task.json` names the
    class)."""
    spec_file = os.path.join(os.fspath(preset), TASK_FILE)
    if not os.path.exists(preset):
        raise FileNotFoundError(f"{preset} does not exist; give a task preset directory, written by "
                                "task.save_to_preset(...) or `kerasbert finetune` (its best/ or final/).")
    if not os.path.isfile(spec_file):
        raise FileNotFoundError(
            f"{preset} is not a task preset (it has no task.json); give a directory written by "
            "task.save_to_preset(...) or `kerasbert finetune` (its best/ or final/)."
        )
    class_name = read_json(spec_file, "kerasbert task file").get("class_name")
    cls = subclass_named(Task, str(class_name))
    if cls is None or cls is Task or not hasattr(cls, "serving_function"):
        raise ValueError(f"{spec_file} names class {class_name!r}, which is not a kerasbert task.")
    return cls.from_preset(preset)
