"""What the fine-tuning tasks share: `fit`, `evaluate` and `predict` on raw
text through the preprocessor, the fine-tuning recipe as the default
optimizer, and the heads of transformers' task checkpoints."""

import itertools
import numbers
import os
import warnings
import weakref

import keras
import numpy as np

from kerasbert.convert.heads import NORMALIZED_HEADS, normalized_head_arguments
from kerasbert.distribution import data_parallel_replicas
from kerasbert.preprocessing.batching import COMPILED_SHAPES, GROUP_BY_LENGTH, checked_batch_size
from kerasbert.preprocessing.datasets import check_example_counts, make_dataset, pack_batch, sorted_batches
from kerasbert.preprocessing.packed_rows import (
    EXAMPLE_SLOTS,
    documents_per_row,
    pack_in_graph,
    packed_batches,
    packed_training_batches,
)
from kerasbert.readers import TextData, TokenData
from kerasbert.tasks.packed_training import packed_trainer
from kerasbert.tasks.task import (  # noqa: F401 (TASK_FILE, TASK_WEIGHTS_FILE, text_signature: re-exported)
    TASK_FILE,
    TASK_WEIGHTS_FILE,
    Task,
    encoder_inputs,
    text_signature,
)
from kerasbert.utils.checks import abbreviated, check_int, check_number
from kerasbert.utils.examples import (
    check_examples,
    check_sample_weight,
    check_targets,
    check_text_dataset,
    checked_dataset,
    input_errors,
)
from kerasbert.utils.features import check_features
from kerasbert.utils.io import read_json
from kerasbert.utils.optional import is_dataset, is_tensor, tf

# task -> {(documents, jit_compile): its packed predictor}
_PACKED_PREDICTORS = weakref.WeakKeyDictionary()


def huggingface_head_config(cls, preset):
    """The config.json of a transformers checkpoint whose architecture is
    the task's (`BertForSequenceClassification` for a TextClassifier...),
    else None."""
    from kerasbert.presets import huggingface_checkpoint_directory

    kind = getattr(cls, "huggingface_architecture", None)
    directory = huggingface_checkpoint_directory(preset)
    if kind is None or directory is None:
        return None
    config = read_json(os.path.join(directory, "config.json"), "Hugging Face config.json")
    architectures = config.get("architectures") or []
    return config if any(a.endswith(f"For{kind}") for a in architectures) else None


def named_targets(y, labels, name, per_word=False):
    """Targets given as class names (strings; per word: lists of them) as
    their ids in `labels`, the task's class names; other targets unchanged.
    A name not in `labels` is a ValueError naming where it is."""
    if labels is None or not isinstance(y, (list, tuple, np.ndarray)):
        return y

    def values(row):  # a row as a list, or None for a single value
        return row.tolist() if isinstance(row, np.ndarray) else list(row) if isinstance(row, (list, tuple)) else None

    rows = [values(row) for row in y] if per_word else [values(y)]
    if not any(isinstance(v, str) for row in rows if row is not None for v in row):
        return y
    index = {label: i for i, label in enumerate(labels)}

    def ids(row, where):
        for i, value in enumerate(row):
            if not isinstance(value, str) or value not in index:
                raise ValueError(f"{name}{where}[{i}]={value!r} is not one of the task's labels {labels}.")
        return np.array([index[v] for v in row], np.int32)

    if per_word:
        return [ids(row, f"[{i}]") for i, row in enumerate(rows)]
    return ids(rows[0], "")


def check_labels(num_classes, labels, example):
    """(num_classes, labels) of a task built with either: the number of
    classes, or their names (`labels`, which set the number)."""
    if labels is not None:
        if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
            raise TypeError(f"labels must be a list of class names such as {example}; got {labels!r}.")
        labels = list(labels)
        if len(set(labels)) != len(labels) or not labels:
            raise ValueError(f"labels must be distinct and non-empty; got {labels}.")
        if num_classes is not None and num_classes != len(labels):
            raise ValueError(f"num_classes={num_classes} but {len(labels)} labels were given: {labels}.")
        return len(labels), labels
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or num_classes < 1:
        raise ValueError(
            f"Give num_classes (a positive integer) or labels (class names); got num_classes={num_classes!r}."
        )
    return int(num_classes), None


# What `fit`, `evaluate` and `predict` take as raw examples, other than text.
_RAW_TYPES = (str, bytes, list, tuple, set, frozenset, np.ndarray, numbers.Number)  # and TensorFlow tensors


def _dataset_steps(dataset):
    """The batches of an epoch of a tf.data dataset or a PyDataset, or None."""
    steps = len(dataset) if isinstance(dataset, keras.utils.PyDataset) else int(dataset.cardinality())
    return steps if steps > 0 else None


class FineTuningTask(Task):
    """A `Task` with a `preprocessor` and the fine-tuning recipe.

    * `fit`, `evaluate` and `predict` take raw examples (lists of strings,
      pairs of lists, `tf.data` datasets of strings) and run them through
      `preprocessor` in `tf.data`, padding each batch to a few fixed lengths
      (`kerasbert.preprocessing.datasets`); packed features pass through untouched.
      Where the model is compiled per input shape, a task with one output
      per example (`_packed_outputs`) trains, evaluates and predicts on
      in-memory examples in rows that pack several each instead
      (`kerasbert.preprocessing.packed_rows`, `kerasbert.tasks.packed_training`).
    * `compile()` with `optimizer="auto"` (the default, also applied at
      construction) gives the recipe of `kerasbert.optimizers.finetuning_optimizer`:
      AdamW without decay on biases and LayerNorm, `head_learning_rate_multiplier`
      for the new head, layer-wise decay; each `fit` starts it afresh on
      10% warmup then linear decay over that call's steps.
    * `from_preset` of a transformers checkpoint with the task's head
      (`...ForSequenceClassification`, ...) keeps that head.
    * Bad data fails before anything runs: raw examples, targets (`_targets`)
      and weights are checked here, packed features by `Task`
      (`kerasbert.utils.examples`), with a ValueError or TypeError naming the
      argument.

    Task presets and the serving export are `Task`'s.
    """

    # Whether the outputs are per token, `(batch, seq, ...)`.
    per_token_outputs = False
    # On a TensorFlow CPU "auto" leaves these steps to TensorFlow's own
    # kernels (Keras's choice): they ran them faster than XLA
    # (docs/results.md), and compile nothing per padded length.
    xla_on_tensorflow_cpu = False
    # Raw examples are lists of words too (else pairs of texts may be).
    raw_word_lists = False
    # transformers' `{Family}For{huggingface_architecture}` holds this head.
    huggingface_architecture = None
    # Defaults of the recipe; `compile(...)` overrides them.
    recipe_defaults = {"learning_rate": 5e-5, "head_learning_rate_multiplier": 100.0, "layer_decay": 1.0,
                       "weight_decay": 0.01, "warmup_fraction": 0.1}

    def _freeze_unused_pooler(self):
        """Tasks that read `sequence_output` only: the pooler gets no
        gradient, so it is left out of training (and its warning)."""
        if self.encoder.pooler_dense is not None:
            self.encoder.pooler_dense.trainable = False

    def call(self, inputs, training=None, mask=None):
        # Packed rows (`kerasbert.tasks.packed_training`): the same layers,
        # the task's outputs per example.
        if isinstance(inputs, dict) and EXAMPLE_SLOTS in inputs:
            return packed_trainer(self)(inputs, training=training)
        return super().call(inputs, training=training, mask=mask)

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
        _PACKED_PREDICTORS.pop(self, None)  # compiled anew with the task
        recipe = dict(self.recipe_defaults)
        given = {"learning_rate": learning_rate, "head_learning_rate_multiplier": head_learning_rate_multiplier,
                 "layer_decay": layer_decay, "weight_decay": weight_decay, "warmup_fraction": warmup_fraction}
        recipe.update({k: v for k, v in given.items() if v is not None})
        recipe["accumulation_steps"] = accumulation_steps
        check_number("warmup_fraction", recipe["warmup_fraction"], 0, 1)
        self._recipe = recipe if isinstance(optimizer, str) and optimizer == "auto" else None
        if self._recipe is not None:
            # A stand-in schedule until `fit` knows the number of steps.
            optimizer = self._recipe_optimizer()
        super().compile(
            optimizer=optimizer,
            loss=self._default_loss() if isinstance(loss, str) and loss == "auto" else loss,
            metrics=self._default_metrics() if isinstance(metrics, str) and metrics == "auto" else metrics,
            **kwargs,
        )

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

    def _recipe_optimizer(self):
        """The recipe's AdamW at a constant rate, until `fit` knows its steps."""
        from kerasbert.optimizers import finetuning_optimizer

        r = self._recipe
        optimizer = finetuning_optimizer(
            self, total_steps=1, warmup_steps=0, learning_rate=r["learning_rate"],
            head_learning_rate_multiplier=r["head_learning_rate_multiplier"], layer_decay=r["layer_decay"],
            weight_decay=r["weight_decay"], accumulation_steps=r["accumulation_steps"],
        )
        optimizer.learning_rate = self._recipe_schedule(None)
        # What its learning-rate multipliers and slots are made for (paths,
        # which Keras does not track as the model's own).
        self._recipe_variables = frozenset(v.path for v in self.trainable_variables)
        return optimizer

    def _recipe_schedule(self, total_steps):
        """Warmup and linear decay over `total_steps` train steps (None: a
        constant rate, for data of unknown length)."""
        from kerasbert.optimizers import WarmupDecay

        r = self._recipe
        accumulation = r["accumulation_steps"]
        if total_steps is None:
            return WarmupDecay(r["learning_rate"], 0, 1, end_learning_rate=r["learning_rate"],
                               accumulation_steps=accumulation)
        updates = max(1, total_steps // accumulation)
        return WarmupDecay(r["learning_rate"], warmup_steps=int(round(r["warmup_fraction"] * updates)),
                           decay_steps=updates, accumulation_steps=accumulation)

    def _start_schedule(self, total_steps):
        """The recipe's optimizer starts afresh on a schedule of
        `total_steps`, as a new one would: moments, accumulators and step
        counter at zero, a loss scale (mixed float16) at its initial value;
        a train step traced for another schedule is traced again."""
        if frozenset(v.path for v in self.trainable_variables) != self._recipe_variables:
            raise ValueError(
                "the variables that train changed since compile() (a layer's `trainable` was set): call "
                "compile() again before fit, as Keras asks, so that the recipe's optimizer and its learning-rate "
                "multipliers cover the variables that train now."
            )
        optimizer = self.optimizer
        optimizer.learning_rate = self._recipe_schedule(total_steps)
        if optimizer.built:
            for variable in getattr(optimizer, "inner_optimizer", optimizer).variables:
                variable.assign(keras.ops.zeros_like(variable.value))
            if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
                optimizer.step_counter.assign(0)
                optimizer.dynamic_scale.assign(optimizer.initial_scale)
        elif self.built:  # its slots made now, eagerly, not traced into the first step (seconds on TensorFlow)
            optimizer.build(self.trainable_variables)
        if self.train_function is not None:
            self.make_train_function(force=True)

    # -- fit / evaluate / predict on raw examples --------------------------

    def _holds_raw_examples(self, x, name="x"):
        """Whether `x` holds raw examples for the preprocessor (checked by
        `check_examples`) rather than packed features or another Keras
        input; raw examples without a preprocessor are a TypeError."""
        if x is not None and not isinstance(x, _RAW_TYPES) and not is_tensor(x):
            return False
        if self.preprocessor is None:
            raise TypeError(
                f"this {type(self).__name__} has no preprocessor, so {name} must be packed features (a dict with "
                f"{list(self.input)}); got {type(x).__name__} {abbreviated(x)}. Build it with from_preset or pass "
                "preprocessor=... to give it text."
            )
        check_examples(x, name, word_lists=self.raw_word_lists, pairs=not self.raw_word_lists)
        return True

    def _examples_and_targets(self, x, y, names):
        """`x` and `y` with a reader's data (`read_glue_tsv`'s `TextData`,
        `read_conll`'s `TokenData`) taken apart and named classes turned
        into the task's ids (subclasses); else unchanged."""
        return x, y

    def _check_tokenized(self, tokenized, y, sample_weight, names):
        """Raw examples' targets checked against the tokenized examples
        (subclasses: e.g. one tag per word)."""

    def _batches_of(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, keep_order=False,
              replicas=1, cut_partial_batch=True, needs_y=False, names=("x", "y", "sample_weight")):
        """A dataset of `make_dataset` for raw examples (their targets and
        weights checked; `needs_y`: targets required) or a dataset of them;
        None for other inputs (packed features), which Keras takes."""
        x, y = self._examples_and_targets(x, y, names)
        if is_dataset(x):
            if self.preprocessor is None:
                return None
            check_text_dataset(x, names[0])
        elif not self._holds_raw_examples(x, names[0]):
            return None
        else:
            targets = self._targets(raw=True)
            if targets is not None and (y is not None or needs_y):
                y = check_targets(y, targets, names[1])
            check_sample_weight(sample_weight, names[2])

        def check_tokenized(tokenized, y, sample_weight):
            self._check_tokenized(tokenized, y, sample_weight, names)

        tokenized = None
        if self._trains_packed(x, y, keep_order):
            check_example_counts(x, y, sample_weight)
            tokenized = self.preprocessor.tokenize_examples(x)
            check_tokenized(tokenized, y, sample_weight)
            batches = packed_training_batches(self.preprocessor, tokenized, y, sample_weight, batch_size=batch_size,
                                              shuffle=shuffle, input_names=tuple(self.input), replicas=replicas,
                                              cut_partial_batch=cut_partial_batch)
            if batches is not None:
                packed_trainer(self)  # built now, not while a step is traced
                return batches
        return make_dataset(self.preprocessor, x, y, sample_weight, batch_size=batch_size, shuffle=shuffle,
                            shapes=self._padded_shapes(), group_by_length=1 if keep_order else GROUP_BY_LENGTH,
                            input_names=tuple(self.input), replicas=replicas, cut_partial_batch=cut_partial_batch,
                            check_tokenized=None if tokenized is not None else check_tokenized, tokenized=tokenized)

    def _trains_packed(self, x, y, keep_order):
        """Whether `_batches_of` packs these in-memory raw examples and targets
        into rows (`kerasbert.tasks.packed_training`): for `fit` and
        `evaluate` of a task with one output per example, where the model is
        compiled per input shape."""
        return (not is_dataset(x) and y is not None and not keep_order
                and self._padded_shapes() is not None and self._packs_predictions())

    def _padded_shapes(self):
        # XLA compiles the step once per input shape: a few padded lengths
        # then; eager steps (torch, TensorFlow without XLA) take any.
        return COMPILED_SHAPES if getattr(self, "jit_compile", False) else None

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None, shuffle=True,
            sample_weight=None, steps_per_epoch=None, **kwargs):
        """`keras.Model.fit`, also on raw examples (see the class doc);
        with the "auto" optimizer each call runs one full schedule."""
        epochs = check_int("epochs", epochs, 1)
        if isinstance(validation_data, (TextData, TokenData)):
            validation_data = (validation_data, None)
        if validation_data is not None and not is_dataset(validation_data) and (
                not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3)):
            raise ValueError("validation_data must be (x, y), (x, y, sample_weight), a tf.data.Dataset or the "
                             f"data of a reader (read_glue_tsv, read_conll); got {abbreviated(validation_data)}.")
        dataset = self._batches_of(x, y, sample_weight, batch_size, shuffle=shuffle, replicas=data_parallel_replicas(),
                             needs_y=True)
        if dataset is not None:
            x, y, sample_weight, batch_size = dataset, None, None, None
        if validation_data is not None and not is_dataset(validation_data):
            validation = self._batches_of(*validation_data, batch_size=None, replicas=data_parallel_replicas(),
                                    cut_partial_batch=False, needs_y=True,
                                    names=tuple(f"validation_data[{i}]" for i in range(3)))
            validation_data = validation if validation is not None else validation_data
        elif is_dataset(validation_data):
            validation_data = self._batches_of(validation_data, names=("validation_data",) * 3) or validation_data
        if getattr(self, "_recipe", None) is not None:
            steps = steps_per_epoch or (_dataset_steps(x) if (is_dataset(x) or isinstance(x, keras.utils.PyDataset))
                                        else None)
            if steps is None and x is not None and not is_dataset(x):
                count = len(x[next(iter(x))]) if isinstance(x, dict) else len(x)
                steps = -(-count // (batch_size or 32))
            self._start_schedule(None if steps is None else steps * epochs - kwargs.get("initial_epoch", 0) * steps)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, validation_data=validation_data,
                           shuffle=shuffle and dataset is None, sample_weight=sample_weight,
                           steps_per_epoch=steps_per_epoch, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`, also on raw examples."""
        dataset = self._batches_of(x, y, sample_weight, batch_size, replicas=data_parallel_replicas(),
                             cut_partial_batch=False, needs_y=True)
        if dataset is not None:
            x, y, sample_weight, batch_size = dataset, None, None, None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict`, also on raw examples. Lists are packed
        eagerly, without a tf.data pipeline, and predicted in order of
        length (fewer padded positions), in batches of at least
        `batch_size` rows that hold more short rows, up to `PREDICT_POSITIONS`
        padded positions (`sorted_batches`); the outputs come back in the
        input's order, per-token outputs padded with zeros to the
        preprocessor's `sequence_length`. Up to `batch_size` examples are
        packed as one batch by a traced function (`pack_batch`). Where the
        model is compiled per input shape (XLA; `torch.compile` under
        `jit_compile=True`), a task with one output per example (a
        classifier's, an embedder's) predicts instead on rows that pack
        several examples each, in one or two shapes
        (`kerasbert.preprocessing.packed_rows`)."""
        if not is_dataset(x) and not self._holds_raw_examples(x) or self.preprocessor is None:
            return super().predict(x, batch_size=batch_size, **kwargs)
        if is_dataset(x):
            return self.predict_batches(self._batches_of(x, batch_size=batch_size, keep_order=True))
        first = x[0] if isinstance(x, tuple) else x
        if not isinstance(first, (tf.Tensor, tf.RaggedTensor)) and len(first) <= checked_batch_size(batch_size):
            # One batch: packed directly (traced from the second such call),
            # no tf.data pipeline to build (most of the time of a `predict`
            # on a few strings).
            features = pack_batch(self.preprocessor, x, shapes=self._padded_shapes(), input_names=tuple(self.input))
            return self.predict_batches([features])
        names = tuple(self.input)

        def check(features):
            check_features(features, self._input_encoder(), names)

        if self._padded_shapes() is not None and self._packs_predictions():
            batches, where, documents = packed_batches(self.preprocessor, x, batch_size=batch_size,
                                                       input_names=names, check=check)
            outputs = self._predict_on(self._packed_predictor(documents), batches)  # (rows, documents, ...)
            return keras.tree.map_structure(lambda a: a[where[:, 0], where[:, 1]], outputs)
        batches, order = sorted_batches(self.preprocessor, x, batch_size=batch_size, shapes=self._padded_shapes(),
                                        input_names=names, check=check)
        outputs = self.predict_batches(batches)
        rows = np.flatnonzero(order >= 0)  # filler rows (-1) are dropped
        inverse = np.empty(len(rows), np.int64)
        inverse[order[rows]] = rows
        return keras.tree.map_structure(lambda a: a[inverse], outputs)

    def predict_batches(self, dataset):
        """The model's outputs on every batch of `dataset` (a dataset, or an
        iterable of batches of features, e.g. trimmed to different lengths),
        concatenated; outputs per token are padded with zeros to the
        preprocessor's `sequence_length` first."""
        width = self.preprocessor.sequence_length
        if is_dataset(dataset):
            dataset = checked_dataset(dataset, self._input_encoder(), tuple(self.input))
            self._trace_for_any_length(dataset.element_spec)
            batches = dataset.as_numpy_iterator()
        else:
            batches = (keras.tree.map_structure(np.asarray, batch) for batch in dataset)
            first = next(batches, None)
            if first is not None:
                self._trace_for_any_length(tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, a.dtype), first))
                batches = itertools.chain([first], batches)

        def pad(p):  # (batch, seq, ...): seq padded to `width`
            return np.pad(p, [(0, 0), (0, width - p.shape[1])] + [(0, 0)] * (p.ndim - 2))

        return self._predict_on(self, batches, pad if self.per_token_outputs else None)

    @staticmethod
    def _predict_on(model, batches, pad=None):
        """`model.predict_on_batch` on every batch of features (or
        `(features, ...)`), each output `pad`ded, then concatenated."""
        collected = []
        with input_errors():
            for batch in batches:
                features = batch[0] if isinstance(batch, tuple) else batch
                outputs = keras.tree.map_structure(np.asarray, model.predict_on_batch(features))
                collected.append(outputs if pad is None else keras.tree.map_structure(pad, outputs))
        if not collected:
            raise ValueError("there is nothing to predict: the input holds no examples.")
        return keras.tree.map_structure(lambda *parts: np.concatenate(parts, axis=0), *collected)

    # -- prediction on packed rows (kerasbert.preprocessing.packed_rows) ------

    def _packed_outputs(self, sequence_output, padding_mask, documents):
        """The task's outputs for each example of rows that pack several
        (`padding_mask` numbering them 1 to at most `documents`): `(batch,
        documents, ...)` from the encoder's `sequence_output`. Tasks with
        one output per example define it; with it `predict` on a list packs
        its examples into rows where the model is compiled per input shape:
        one or two shapes, hardly any padding."""
        raise NotImplementedError

    def _packs_predictions(self):
        return type(self)._packed_outputs is not FineTuningTask._packed_outputs

    def _serving_outputs(self, texts):
        """In the serving graph: the model's outputs for raw strings (a
        batch, or a pair of batches). A task with one output per example
        runs on rows that pack several of the request's examples each, at
        the width of its longest (`pack_in_graph`), and gathers each
        example's outputs back: the same outputs, on fewer positions when
        the lengths differ."""
        features = self._serving_features(texts)  # (batch, longest)
        if not self._packs_predictions():
            return self(features, training=False)
        documents = documents_per_row(self.preprocessor.sequence_length)
        rows, where = pack_in_graph(features, documents)  # (rows, longest); (batch, 2)
        outputs = self._packed_predictor(documents)(rows, training=False)  # (rows, documents, ...)
        return keras.tree.map_structure(lambda output: tf.gather_nd(output, where), outputs)  # (batch, ...)

    def _forget_steps(self):
        super()._forget_steps()
        _PACKED_PREDICTORS.pop(self, None)

    def _packed_predictor(self, documents):
        """A model of this task's layers: packed features -> `_packed_outputs`,
        compiled as the task is (one per `documents`, kept until the task is
        compiled again)."""
        models = _PACKED_PREDICTORS.setdefault(self, {})
        key = (documents, self.jit_compile)
        if key not in models:
            inputs = encoder_inputs(self.encoder)
            sequence_output = self.encoder(inputs)["sequence_output"]  # (batch, seq, hidden)
            outputs = self._packed_outputs(sequence_output, inputs["padding_mask"], documents)
            model = keras.Model(inputs, outputs, name=f"{self.name}_packed")
            model.compile(jit_compile=self.jit_compile)
            models[key] = model
        return models[key]

    def _trace_for_any_length(self, spec):
        """TensorFlow graphs: traces the predict function once for batches
        of `spec` (a dataset's element spec), whatever their rows and padded
        length. Left to itself it traced again for each new batch shape
        until it relaxed them, 1.2-1.8 s each on MiniLM."""
        if keras.backend.backend() != "tensorflow" or self.run_eagerly:
            return
        features = spec[0] if isinstance(spec, tuple) else spec
        features = {k: tf.TensorSpec([None] * v.shape.rank, v.dtype) for k, v in features.items()}
        self.make_predict_function()
        self.predict_function.get_concrete_function([(features,)])

    # -- presets -------------------------------------------------------------

    @classmethod
    def _head_arguments(cls, preset, kwargs, load_weights):
        """From a transformers checkpoint with the task's head
        (`BertForSequenceClassification` for a TextClassifier...): its head
        arguments (number of labels, names) under the given ones, and
        whether its head weights fit; a checkpoint whose head was trained
        for other arguments than the given ones gives a fresh head."""
        head_config = huggingface_head_config(cls, preset)
        if head_config is None:
            return kwargs, False
        saved = cls._huggingface_arguments(head_config)
        classes = len(saved["labels"]) if "labels" in saved else saved.get("num_classes")
        compared = {**saved, "num_classes": classes}
        conflicting = {k: kwargs[k] for k, v in compared.items() if k in kwargs and v is not None and kwargs[k] != v}
        if not conflicting:
            return {**saved, **kwargs}, True
        if load_weights:
            warnings.warn(
                f"{preset}: the checkpoint's head was trained with {saved}, not {conflicting}; "
                "the task starts with a fresh head.",
                stacklevel=3,
            )
        return kwargs, False

    @classmethod
    def _preset_arguments(cls, preset, family, kwargs):
        """A head of a family whose heads are normalized (ModernBERT): dense,
        GELU, LayerNorm before the output layer."""
        if family in NORMALIZED_HEADS:
            kwargs.setdefault("head_norm", True)
            kwargs.setdefault("activation", "gelu")
        return kwargs

    @classmethod
    def _huggingface_arguments(cls, head_config):
        """Constructor arguments read from a matching transformers
        checkpoint's config.json (e.g. its number of labels; a normalized
        head's activation)."""
        return normalized_head_arguments(head_config)
