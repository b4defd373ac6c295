"""Knowledge distillation: a smaller student trained on a teacher's outputs
(DistilBERT, Sanh et al. 2019)."""

import math

import keras
import numpy as np
from keras import ops

from kerasbert.encoder import Encoder
from kerasbert.losses import sparse_cross_entropy
from kerasbert.preprocessing.batching import COMPILED_SHAPES
from kerasbert.preprocessing.datasets import make_dataset
from kerasbert.tasks.masked_lm import MaskedLM, default_optimizer
from kerasbert.tasks.task import check_encoder
from kerasbert.tasks.text_classifier import TextClassifier
from kerasbert.tasks.token_classifier import TokenClassifier
from kerasbert.utils.checks import check_int
from kerasbert.utils.optional import is_dataset

# The tasks a Distiller trains: their logits are per example, per token or
# per masked position.
DISTILLED_TASKS = (TextClassifier, TokenClassifier, MaskedLM)


def student_layer_indices(teacher_layers, num_layers):
    """The teacher layers a student of `num_layers` starts from: evenly
    spaced from the first to the last (DistilBERT's 0, 2, 4, 7, 9, 11 of
    12; 0, 2, 5 of 6; the first alone for one)."""
    if num_layers == 1:
        return [0]
    return [int(i) for i in np.round(np.linspace(0, teacher_layers - 1, num_layers))]


def _weights_outside(model, parts):
    """`model`'s weights, in order, less those of the layers `parts`."""
    inner = {id(w) for part in parts for w in part.weights}
    return [w for w in model.weights if id(w) not in inner]


def _assign_in_order(sources, targets, what):
    for source, target in zip(sources, targets, strict=True):
        if tuple(source.shape) != tuple(target.shape):
            raise ValueError(f"{what}: {source.path} {tuple(source.shape)} does not fit {target.path} "
                             f"{tuple(target.shape)}.")
        target.assign(ops.convert_to_numpy(source))  # a copy (JAX: never the teacher's buffer)


def student_encoder(teacher, num_layers):
    """An `Encoder` of the teacher's configuration with `num_layers` layers,
    initialised from the teacher: its embeddings, pooler and final
    LayerNorm, and teacher layers `student_layer_indices(...)` as its layers
    (DistilBERT's initialisation). An ALBERT-style encoder, whose layers
    share weights, keeps its groups. Attention kinds (ModernBERT's local and
    global layers) follow the student's own layer numbers.

    Args:
        teacher: a `kerasbert.Encoder`.
        num_layers: the student's depth, from 1 to the teacher's.

    Examples:
    >>> import kerasbert
    >>> teacher = kerasbert.Encoder(vocabulary_size=100, num_layers=6, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> student = student_encoder(teacher, 3)
    >>> student.num_layers, student.count_params() < teacher.count_params()
    (3, True)
    """
    check_encoder(teacher, "teacher")
    check_int("num_layers", num_layers, 1, teacher.num_layers)
    config = teacher.get_config()
    config["num_layers"] = num_layers
    groups = config.get("num_layer_groups")
    if groups and groups > num_layers:
        raise ValueError(f"num_layers={num_layers} is below the teacher's num_layer_groups={groups}: an "
                         "ALBERT-style student keeps the teacher's groups of shared layers.")
    student = Encoder.from_config(config)
    teacher_blocks, student_blocks = teacher.transformer_blocks, student.transformer_blocks
    if not groups:  # one block per layer: the chosen ones
        teacher_blocks = [teacher_blocks[i] for i in student_layer_indices(teacher.num_layers, num_layers)]
    _assign_in_order(_weights_outside(teacher, teacher.transformer_blocks),
                     _weights_outside(student, student_blocks), "the student's embeddings")
    for source, target in zip(teacher_blocks, student_blocks, strict=True):
        _assign_in_order(source.weights, target.weights, "the student's layers")
    return student


def student_task(teacher, num_layers):
    """A task of the teacher's class and arguments (preprocessor included)
    on `student_encoder(teacher.encoder, num_layers)`, with the teacher's
    head weights: the student `Distiller` trains.

    Examples:
    >>> import kerasbert
    >>> encoder = kerasbert.Encoder(vocabulary_size=100, num_layers=4, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> teacher = kerasbert.TextClassifier(encoder, num_classes=3)
    >>> student = student_task(teacher, 2)
    >>> type(student).__name__, student.encoder.num_layers
    ('TextClassifier', 2)
    """
    _check_task(teacher, "teacher")
    encoder = student_encoder(teacher.encoder, num_layers)
    arguments = {k: v for k, v in teacher._task_config.items() if k != "encoder"}
    student = type(teacher)(encoder, **arguments)
    _assign_in_order(_weights_outside(teacher, [teacher.encoder]), _weights_outside(student, [encoder]),
                     "the student's head")
    student.family = getattr(teacher, "family", None)
    return student


def _check_task(task, name):
    if not isinstance(task, DISTILLED_TASKS):
        raise TypeError(f"{name} must be a {', '.join(t.__name__ for t in DISTILLED_TASKS)}; "
                        f"got {type(task).__name__}.")


def _checked_weight(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"{name} must be a finite number >= 0; got {value!r}.")
    return float(value)


def _weighted_mean(values, weights):
    return ops.sum(values * weights) / ops.maximum(ops.sum(weights), 1.0)


@keras.saving.register_keras_serializable(package="kerasbert")
class Distiller(keras.Model):
    """Trains `student` to give `teacher`'s outputs: knowledge distillation.

    Both are tasks of one class: `TextClassifier` or `TokenClassifier`
    (task distillation: a fine-tuned teacher's logits on the task's texts)
    or `MaskedLM` (pretraining distillation, DistilBERT's). The teacher is
    frozen and runs in the same step. The loss is

    - `soft_weight` x the cross-entropy between the teacher's and the
      student's distributions at `temperature`, times `temperature**2`
      (Hinton et al.; for a regressor, `num_classes=1`, the squared error
      between their scores), averaged over examples, real tokens or real
      masked slots;
    - `hard_weight` x the student's own loss on the targets, when `fit` is
      given targets (labels; a `MaskedLM`'s masked tokens);
    - `hidden_weight` x `1 - cosine` between the students' and the
      teacher's last hidden states at every real token (`MaskedLM` only;
      their widths must agree, as a student from `student_task` has).

    DistilBERT's pretraining distillation is `soft_weight=5`,
    `hard_weight=2`, `hidden_weight=1`, `temperature=2` on masked-LM batches
    (`pretraining_dataset(..., "mlm")`); `student_task(teacher, k)` builds
    its student from every other teacher layer. The log shows `loss`,
    `soft_loss`, and `hard_loss` / `hidden_loss` where they count.

    `fit` takes what the student takes: raw texts (through the student's
    preprocessor; the teacher must read the same tokens) with or without
    targets, or packed features. After `fit`, `distiller.student` is the
    trained task.

    Args:
        teacher: a fine-tuned (or pretrained) task.
        student: a task of the same class and vocabulary (`student_task`).
        temperature: the softmax temperature of the soft targets.
        soft_weight: the weight of the loss on the soft targets.
        hard_weight: the weight of the loss on the labels.
        hidden_weight: the weight of the loss on the hidden states.

    Examples:
    >>> import numpy as np, kerasbert
    >>> encoder = kerasbert.Encoder(vocabulary_size=100, num_layers=4, num_heads=2,
    ...                             hidden_dim=16, intermediate_dim=32)
    >>> teacher = kerasbert.TextClassifier(encoder, num_classes=3)
    >>> distiller = kerasbert.Distiller(teacher, student_task(teacher, 2))
    >>> x = {"token_ids": np.array([[2, 7, 4, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> sorted(distiller(x))  # then distiller.fit(x) trains the student
    ['logits', 'teacher_logits']
    """

    def __init__(self, teacher, student, temperature=2.0, soft_weight=1.0, hard_weight=0.0, hidden_weight=0.0,
                 **kwargs):
        super().__init__(**kwargs)
        _check_task(teacher, "teacher")
        _check_task(student, "student")
        if type(student) is not type(teacher):
            raise TypeError(f"teacher and student must be tasks of one class; got a {type(teacher).__name__} "
                            f"and a {type(student).__name__}.")
        if student.encoder.vocabulary_size != teacher.encoder.vocabulary_size:
            raise ValueError(f"The student has {student.encoder.vocabulary_size} token embeddings and the teacher "
                             f"{teacher.encoder.vocabulary_size}; both must read the same tokens.")
        if not isinstance(student, MaskedLM) and student.num_classes != teacher.num_classes:
            raise ValueError(f"The student has {student.num_classes} classes and the teacher {teacher.num_classes}.")
        self.temperature = _checked_weight("temperature", temperature)
        if self.temperature == 0:
            raise ValueError("temperature must be > 0; got 0.")
        self.soft_weight = _checked_weight("soft_weight", soft_weight)
        self.hard_weight = _checked_weight("hard_weight", hard_weight)
        self.hidden_weight = _checked_weight("hidden_weight", hidden_weight)
        if self.hidden_weight and not isinstance(student, MaskedLM):
            raise ValueError("hidden_weight compares the encoders' hidden states at every token, which a MaskedLM "
                             f"distiller computes; a {type(student).__name__} distills its logits (hidden_weight=0).")
        if self.hidden_weight and student.encoder.hidden_dim != teacher.encoder.hidden_dim:
            raise ValueError(f"hidden_weight needs hidden states of one width; the student's are "
                             f"{student.encoder.hidden_dim} wide and the teacher's {teacher.encoder.hidden_dim}.")
        teacher.trainable = False
        self.teacher, self.student = teacher, student
        self.preprocessor = student.preprocessor
        self._trackers = {name: keras.metrics.Mean(name=f"{name}_loss") for name, weight in
                          (("soft", 1.0), ("hard", self.hard_weight), ("hidden", self.hidden_weight)) if weight}

    def _outputs(self, task, inputs, training):
        """The task's logits (and, for the hidden-state loss, its last
        hidden states at every token)."""
        features = {k: inputs[k] for k in task.input}
        if not self.hidden_weight:
            return task(features, training=training), None
        encoder_features = {k: features[k] for k in task.encoder.input}
        hidden = task.encoder(encoder_features, training=training)["sequence_output"]  # (batch, seq, hidden)
        return task.mlm_head(hidden, features["mask_positions"]), hidden

    def call(self, inputs, training=False):
        logits, hidden = self._outputs(self.student, inputs, training)
        teacher_logits, teacher_hidden = self._outputs(self.teacher, inputs, False)
        outputs = {"logits": ops.cast(logits, "float32"),
                   "teacher_logits": ops.stop_gradient(ops.cast(teacher_logits, "float32"))}
        if hidden is not None:
            outputs.update(hidden=ops.cast(hidden, "float32"),
                           teacher_hidden=ops.stop_gradient(ops.cast(teacher_hidden, "float32")))
        return outputs

    def _weights(self, x, sample_weight):
        """Where the losses count: examples (classifiers), real tokens
        (taggers) or real masked slots (masked LMs: `sample_weight`)."""
        if isinstance(self.student, TokenClassifier):
            weights = ops.cast(ops.not_equal(x["padding_mask"], 0), "float32")  # (batch, seq)
        elif isinstance(self.student, MaskedLM):
            weights = ops.cast(sample_weight if sample_weight is not None else ops.ones_like(x["mask_positions"]),
                               "float32")  # (batch, masked)
        else:
            weights = ops.ones_like(x["padding_mask"][:, 0], "float32")  # (batch,)
            if sample_weight is not None:
                weights = weights * ops.cast(sample_weight, "float32")
        return weights

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        logits, teacher_logits = y_pred["logits"], y_pred["teacher_logits"]
        weights = self._weights(x, sample_weight)
        t = self.temperature
        if isinstance(self.student, TextClassifier) and self.student.num_classes == 1:
            soft = ops.square(logits - teacher_logits)[..., 0]  # regression: the scores themselves
        else:
            targets = ops.softmax(teacher_logits / t, axis=-1)
            soft = -ops.sum(targets * ops.log_softmax(logits / t, axis=-1), axis=-1) * (t * t)
        losses = {"soft": _weighted_mean(soft, weights)}
        if self.hard_weight and y is not None:
            if isinstance(self.student, TextClassifier) and self.student.num_classes == 1:
                hard = ops.square(logits[..., 0] - ops.cast(ops.reshape(y, ops.shape(logits[..., 0])), "float32"))
                losses["hard"] = _weighted_mean(hard, weights)
            else:
                labels = ops.cast(y, "int32")
                known = weights * ops.cast(ops.greater_equal(labels, 0), "float32")  # tags < 0: left out
                losses["hard"] = _weighted_mean(sparse_cross_entropy(ops.maximum(labels, 0), logits), known)
        if self.hidden_weight:
            hidden, teacher_hidden = y_pred["hidden"], y_pred["teacher_hidden"]
            cosine = ops.sum(hidden * teacher_hidden, axis=-1) / ops.maximum(
                ops.norm(hidden, axis=-1) * ops.norm(teacher_hidden, axis=-1), 1e-8)  # (batch, seq)
            real = ops.cast(ops.not_equal(x["padding_mask"], 0), "float32")
            losses["hidden"] = _weighted_mean(1.0 - cosine, real)
        scales = {"soft": self.soft_weight, "hard": self.hard_weight, "hidden": self.hidden_weight}
        for name, value in losses.items():
            self._trackers[name].update_state(value)
        return sum(scales[name] * value for name, value in losses.items())

    @property
    def metrics(self):
        return [*super().metrics, *self._trackers.values()]

    def compile(self, optimizer="auto", **kwargs):
        """`compile` with AdamW by default (`kerasbert.optimizers`'
        pretraining optimizer); the loss is built in (see the class doc)."""
        for name in ("loss", "metrics", "weighted_metrics"):
            if kwargs.get(name) is not None:
                raise ValueError(f"Distiller computes its own loss; got {name}={kwargs[name]!r}. Set "
                                 "soft_weight, hard_weight and hidden_weight in the constructor instead.")
        super().compile(optimizer=default_optimizer() if optimizer == "auto" else optimizer, **kwargs)

    def fit(self, x=None, y=None, batch_size=None, epochs=1, shuffle=True, sample_weight=None, **kwargs):
        """`keras.Model.fit`; raw texts (or word lists for a tagger) go
        through the student's preprocessor in length-grouped batches."""
        if not self.compiled:
            self.compile()
        raw = x is not None and not isinstance(x, dict) and not is_dataset(x) and self.preprocessor is not None
        if raw:
            x = make_dataset(self.preprocessor, x, y, sample_weight, batch_size=batch_size or 32, shuffle=shuffle,
                             shapes=COMPILED_SHAPES if self.jit_compile else None,
                             input_names=tuple(self.student.input))
            y = sample_weight = batch_size = None
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=shuffle and not is_dataset(x),
                           sample_weight=sample_weight, **kwargs)
