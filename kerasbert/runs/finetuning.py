"""`kerasbert.runs.finetuning.finetune`: the `kerasbert finetune` command as a
function.

From a standard fine-tuning file to a fine-tuned task preset: GLUE-style
TSV files (`classification`: single sentences, pairs, or scores),
CoNLL-2003 files (`ner`) or SQuAD v1.1/v2.0 JSON (`squad`) are read with
`kerasbert.readers`, the task is built with `from_preset`, trained with the
fine-tuning recipe (one `fit` over all epochs, so warmup and decay span the
whole run) and, with a validation file, scored after every epoch with the
task's own metric: the best epoch is kept, and training stops early after
`patience` epochs without improvement.

Layout of `output/`:

- `run.json`: the run's settings (with the labels, columns and metric the
  run resolved);
- `history.json`: one list per value, one entry per epoch: `epoch`, the
  training logs (`loss`, ...) and the validation metrics (`val_accuracy`,
  `val_f1`, ...);
- `best/`: the task after its best epoch by `metric` (with a validation
  file only), replaced only by a complete better one;
- `final/`: the task after the last epoch.

`best/` and `final/` are task presets: `TextClassifier.from_preset(dir)`
(or `TokenClassifier`, `QuestionAnswerer`) restores the whole task, and
`kerasbert.from_preset(dir)` the encoder alone. Each also holds
`finetuning.json`: the epoch it comes from and its validation metrics.
"""

import dataclasses
import numbers
import os

import keras
import numpy as np

from kerasbert.layers.lora import DEFAULT_TARGETS, check_targets, lora_layers
from kerasbert.runs.options import (  # noqa: F401 (re-exported)
    BEST,
    CLASSIFICATION_METRICS,
    FINAL,
    MINIMIZED,
    NER_METRICS,
    REGRESSION_METRICS,
    SQUAD_METRICS,
    TASKS,
)
from kerasbert.runs.records import extend_history, start_run
from kerasbert.runs.scores import classification_scores, regression_scores
from kerasbert.utils.checks import check_bool, check_choice, check_int, check_number
from kerasbert.utils.io import replacing_directory, write_json

# Header names of the GLUE files, tried in order when text_columns /
# label_column are not given.
GLUE_TEXT_COLUMNS = (
    ("sentence1", "sentence2"),  # MNLI, RTE, WNLI, STS-B
    ("#1 String", "#2 String"),  # MRPC
    ("question1", "question2"),  # QQP
    ("question", "sentence"),  # QNLI
    ("premise", "hypothesis"),
    ("sentence",),  # SST-2, CoLA's test set
    ("text",),
)
GLUE_LABEL_COLUMNS = ("gold_label", "label", "Quality", "is_duplicate", "score")
RECORD_FILE = "finetuning.json"


@dataclasses.dataclass
class FinetuningResult:
    """What `finetune` returns.

    Attributes:
        model: the task after the last epoch (the best one is in
            `best_preset_dir`).
        history: one list per value (`epoch`, `loss`, `val_...`), one entry
            per epoch, as in `history.json`.
        metric: the validation metric that picks the best epoch (without
            the `val_` prefix), or None without a validation file.
        best_epoch: the best epoch (1-based), or None.
        best_metric: its value of `metric`, or None.
        best_preset_dir: the best epoch's task preset, or None.
        final_preset_dir: the last epoch's task preset.
        labels: the class or tag names (ids index them), or None.
        settings: the run's settings, as in `run.json` (with the resolved
            labels, columns, metric, `sequence_length`, and for squad
            `squad_version` and `null_score_threshold`).
    """

    model: keras.Model
    history: dict
    metric: str | None
    best_epoch: int | None
    best_metric: float | None
    best_preset_dir: str | None
    final_preset_dir: str
    labels: list | None = None
    settings: dict | None = None


# -- argument checks ----------------------------------------------------------

def _flag(name):
    """An argument's name and its command-line flag: "epochs (--epochs)"."""
    return f"{name} (--{name.replace('_', '-')})"


def _check_only_for(task, name, value, default, tasks):
    if task not in tasks and value != default:
        raise ValueError(
            f"{_flag(name)}={value!r} is for task={' or '.join(repr(t) for t in tasks)}, not task={task!r}; "
            "leave it out."
        )


# -- classification: GLUE-style TSV ------------------------------------------------

def _header(path):
    """The column names on a TSV file's first line."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            return f.readline().rstrip("\r\n").split("\t")
    except UnicodeDecodeError as e:
        raise ValueError(f"TSV file {path} is not UTF-8 text: {e}.") from None


def glue_columns(path, text_columns, label_column, header):
    """(text_columns, label_column), the missing ones found among GLUE's
    header names."""
    if text_columns is not None:
        text_columns = [text_columns] if isinstance(text_columns, (str, numbers.Integral)) else list(text_columns)
    if text_columns is not None and label_column is not None:
        return text_columns, label_column
    if not header:
        raise ValueError(
            "header=False (--no-header): give text_columns (--text-columns) and label_column "
            "(--label-column) as column indices, e.g. text_columns=[3], label_column=1 for CoLA."
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"TSV file not found: {path}")
    names = _header(path)
    if text_columns is None:
        found = [list(c) for c in GLUE_TEXT_COLUMNS if all(n in names for n in c)]
        if not found:
            raise ValueError(
                f"text_columns (--text-columns) is needed: {path}'s header {names} has none of GLUE's "
                f"text columns {[list(c) for c in GLUE_TEXT_COLUMNS]}."
            )
        text_columns = found[0]
    if label_column is None:
        found = [n for n in GLUE_LABEL_COLUMNS if n in names]
        if not found:
            raise ValueError(
                f"label_column (--label-column) is needed: {path}'s header {names} has none of GLUE's "
                f"label columns {list(GLUE_LABEL_COLUMNS)}."
            )
        label_column = found[0]
    return text_columns, label_column


def _looks_like_scores(names):
    """Whether class names are numbers that are not all integers ("4.800")."""
    try:
        values = [float(n) for n in names]
    except ValueError:
        return False
    return any(not v.is_integer() for v in values) or any("." in n for n in names)


def _read_classification(settings):
    from kerasbert.readers import read_glue_tsv

    text_columns, label_column = glue_columns(
        settings["train_file"], settings["text_columns"], settings["label_column"], settings["header"]
    )
    options = {"header": settings["header"], "regression": settings["regression"], "label_names": settings["labels"]}
    train = read_glue_tsv(settings["train_file"], text_columns, label_column, **options)
    if not settings["regression"] and settings["labels"] is None and _looks_like_scores(train.label_names):
        raise ValueError(
            f"label_column={label_column!r} of {settings['train_file']} holds scores such as "
            f"{train.label_names[-1]!r}: pass regression=True (--regression) to fit them, or "
            "labels=[...] (--labels) to treat them as classes."
        )
    if not settings["regression"] and len(train.label_names) < 2:
        raise ValueError(
            f"{settings['train_file']} has a single label {train.label_names} in label_column={label_column!r}; "
            "classification needs two or more (or pass labels=[...] with every class)."
        )
    validation = None
    if settings["validation_file"] is not None:
        if not settings["regression"]:
            options["label_names"] = train.label_names
        validation = read_glue_tsv(settings["validation_file"], text_columns, label_column, **options)
    settings.update(text_columns=text_columns, label_column=label_column,
                    labels=None if settings["regression"] else list(train.label_names))
    return train, validation


# -- the run --------------------------------------------------------------------

def _squad_windows(sequence_length, doc_stride, max_question_length):
    """Window settings that fit `sequence_length`: transformers' run_qa.py
    defaults (384, 128, 64) scaled down for shorter windows."""
    if max_question_length is None:
        max_question_length = min(64, sequence_length // 4)
    if doc_stride is None:
        doc_stride = min(128, sequence_length // 3)
    return {"sequence_length": sequence_length, "doc_stride": doc_stride,
            "max_question_length": max(1, max_question_length)}


def _build_task(settings):
    from kerasbert.presets import from_preset
    from kerasbert.tasks import QuestionAnswerer, TextClassifier, TokenClassifier

    common = {"load_weights": not settings["from_scratch"], "dtype": settings["precision"]}
    task, length = settings["task"], settings["sequence_length"]
    if task == "classification":
        names = {"num_classes": 1} if settings["regression"] else {"labels": settings["labels"]}
        return TextClassifier.from_preset(settings["preset"], sequence_length=length, **names, **common)
    if task == "ner":
        return TokenClassifier.from_preset(settings["preset"], labels=settings["labels"], crf=settings["crf"],
                                           sequence_length=length, **common)
    from kerasbert.preprocessing import QuestionAnsweringPreprocessor

    if length is None:  # the task's default: the encoder's longest, at most 384
        probe = from_preset(settings["preset"], load_weights=False)
        length = min(probe.max_sequence_length, QuestionAnswerer.default_sequence_length)
        del probe
    windows = _squad_windows(length, settings["doc_stride"], settings["max_question_length"])
    preprocessor = QuestionAnsweringPreprocessor.from_preset(settings["preset"], **windows)
    # The run's decoding settings are the task's: its presets, `predict`
    # and its SavedModel answer as the run was scored.
    return QuestionAnswerer.from_preset(settings["preset"], preprocessor=preprocessor,
                                        max_answer_length=settings["max_answer_length"],
                                        null_score_threshold=settings["null_score_threshold"], **common)


def _sequence_length(model):
    return int(model.preprocessor.sequence_length)


class Validator:
    """The task-level validation metrics of a model (a dict of floats)."""

    def __init__(self, settings, validation):
        self.settings, self.validation = settings, validation

    def __call__(self, model):
        s, data, batch = self.settings, self.validation, self.settings["batch_size"]
        if s["task"] == "classification":
            outputs = np.asarray(model.predict(data.x, batch_size=batch))
            if s["regression"]:
                return regression_scores(outputs[:, 0], data.y)
            return classification_scores(outputs, data.y)
        if s["task"] == "ner":
            scores = model.evaluate_entities(data.words, data.tags, batch_size=batch)
            return {k: float(scores[k]) for k in NER_METRICS}
        scores = model.evaluate_squad(data, batch_size=batch)
        return {k: float(v) for k, v in scores.items() if not k.endswith("total")}


def _check_lora(settings):
    """Resolves the LoRA settings (alpha: the rank; targets: all four)."""
    if settings["lora_rank"] is None:
        for name in ("lora_alpha", "lora_targets"):
            if settings[name] is not None:
                raise ValueError(f"{_flag(name)}={settings[name]!r} needs lora_rank (--lora-rank).")
        return
    if settings["from_scratch"]:
        raise ValueError("lora_rank (--lora-rank) adapts the preset's weights; from_scratch (--from-scratch) "
                         "trains random ones in full. Give one of them.")
    settings["lora_alpha"] = float(settings["lora_rank"] if settings["lora_alpha"] is None else settings["lora_alpha"])
    targets = DEFAULT_TARGETS if settings["lora_targets"] is None else settings["lora_targets"]
    settings["lora_targets"] = list(check_targets(targets, _flag("lora_targets")))


def _save_preset(model, directory, record):
    """Writes the task preset and its record beside `directory`, then puts
    them in its place as a whole (`replacing_directory`); a LoRA run's
    preset holds its adapters and head, naming its base."""
    options = {"adapters_only": True} if lora_layers(getattr(model, "encoder", model)) else {}
    with replacing_directory(directory, overwrite=True) as staged:
        model.save_to_preset(staged, **options)
        write_json(os.path.join(staged, RECORD_FILE), record, seal=True)


class _EpochRecorder(keras.callbacks.Callback):
    """After every epoch: scores the model on the validation data, extends
    the history (history.json), saves a better epoch as the best preset and
    stops training after `patience` epochs without improvement."""

    def __init__(self, output, settings, validator, verbose):
        super().__init__()
        self.output, self.settings, self.validator, self.verbose = output, settings, validator, verbose
        self.history, self.best_epoch, self.best_metric, self.waited = {}, None, None, 0

    def _better(self, value):
        if np.isnan(value):  # a diverged epoch is never the best
            return False
        if self.best_metric is None:
            return True
        if self.settings["metric"] in MINIMIZED:
            return value < self.best_metric
        return value > self.best_metric

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch + 1, **{k: float(v) for k, v in (logs or {}).items()}}
        scores = self.validator(self.model) if self.validator is not None else {}
        entry.update({f"val_{k}": v for k, v in scores.items()})
        extend_history(self.output, self.history, entry)
        if self.validator is None:
            return
        metric = self.settings["metric"]
        value = scores[metric]
        improved = self._better(value)
        if improved:
            self.best_epoch, self.best_metric, self.waited = epoch + 1, value, 0
            _save_preset(self.model, os.path.join(self.output, BEST),
                         {"epoch": epoch + 1, "metric": metric, "validation": scores})
        else:
            self.waited += 1
        if self.verbose:
            shown = ", ".join(f"val_{k} {v:.4f}" for k, v in scores.items())
            print(f"Epoch {epoch + 1}: {shown}" + (" (best so far)" if improved else ""))
        patience = self.settings["patience"]
        if patience is not None and self.waited >= patience:
            if self.verbose:
                print(f"Stopping: val_{metric} has not improved for {patience} epoch(s) "
                      f"(best {self.best_metric:.4f} at epoch {self.best_epoch}).")
            self.model.stop_training = True


def finetune(
    task,
    preset,
    train_file,
    output,
    *,
    validation_file=None,
    text_columns=None,
    label_column=None,
    labels=None,
    regression=False,
    header=True,
    crf=False,
    sequence_length=None,
    doc_stride=None,
    max_question_length=None,
    max_answer_length=30,
    batch_size=32,
    epochs=3,
    learning_rate=None,
    head_learning_rate_multiplier=None,
    layer_decay=None,
    weight_decay=None,
    warmup_fraction=None,
    accumulation_steps=1,
    precision="float32",
    jit_compile="auto",
    metric=None,
    patience=None,
    null_score_threshold=None,
    from_scratch=False,
    lora_rank=None,
    lora_alpha=None,
    lora_targets=None,
    seed=0,
    callbacks=None,
    verbose=1,
):
    """Fine-tunes a preset on a standard task file; returns a `FinetuningResult`.

    Args:
        task: "classification" (a GLUE-style TSV file -> `TextClassifier`:
            one text column for single sentences, two for pairs, or scores
            with `regression`), "ner" (a CoNLL-2003 file ->
            `TokenClassifier`) or "squad" (SQuAD v1.1/v2.0 JSON ->
            `QuestionAnswerer`).
        preset: the encoder to start from: a built-in preset name, a
            kerasbert preset directory (an encoder's, or a task preset such
            as a previous run's `best/`), a Hugging Face checkpoint directory
            (its `...For{SequenceClassification,TokenClassification,
            QuestionAnswering}` head is kept when it fits) or `hf://org/name`.
        train_file: the training file.
        output: the run's directory (see the module docstring); it must not
            exist or be empty.
        validation_file: scored after every epoch, to keep the best epoch
            and stop early; without it there is no `best/`, only `final/`.
        text_columns: classification: the text column (or a list of two for
            pairs), header names or (with `header=False`) integer indices;
            by default GLUE's column names found in the header (`sentence`,
            `sentence1`/`sentence2`, `#1 String`/`#2 String`,
            `question1`/`question2`, `question`/`sentence`).
        label_column: classification: the label's column, as
            `text_columns`; by default GLUE's (`label`, `gold_label`,
            `Quality`, `is_duplicate`, `score`).
        labels: classification: the class names as written in the file
            (class ids index them; default: the training file's, sorted);
            ner: every tag (default: the training file's, "O" first).
        regression: classification: fit a score (STS-B) with one output and
            mean squared error.
        header: classification: whether the TSV files start with a header.
        crf: ner: a CRF output layer (valid IOB2 sequences only).
        sequence_length: tokens per example (per window for squad); default
            the encoder's `max_sequence_length`, at most 512 (384 for squad).
        doc_stride: squad: context tokens shared by consecutive windows;
            default transformers' 128 at 384 tokens, scaled down for
            shorter windows (a third of `sequence_length`).
        max_question_length: squad: the question's token budget; default
            transformers' 64 at 384 tokens, scaled down for shorter windows
            (a quarter of `sequence_length`).
        max_answer_length: squad: the longest answer in tokens.
        batch_size: the training's batch size.
        epochs: the training's passes over `train_file`.
        learning_rate: the peak learning rate of the fine-tuning recipe
            (`FineTuningTask.compile`), scheduled over all `epochs`; None:
            the recipe's default, 5e-5.
        head_learning_rate_multiplier: the recipe's; None: its default,
            100.0.
        layer_decay: the recipe's; None: its default, 1.0.
        weight_decay: the recipe's; None: its default, 0.01.
        warmup_fraction: the recipe's; None: its default, 0.1.
        accumulation_steps: the recipe's micro-batches per optimizer update.
        precision: "float32", "mixed_bfloat16" or "mixed_float16".
        jit_compile: True, False or "auto" (XLA on JAX, and on TensorFlow
            with a GPU or TPU; eager on torch and on TensorFlow on CPU).
        metric: the validation metric that picks the best epoch (and that
            `patience` watches): classification "accuracy" (default), "f1"
            (two classes: class 1's), "matthews_correlation", "loss";
            regression "pearson" (default), "spearman",
            "mean_squared_error"; ner "f1" (default), "precision", "recall"
            (entity-level, seqeval's); squad "f1" (default), "exact_match"
            (and v2.0's "HasAns_f1", "NoAns_f1", ...). "loss" and
            "mean_squared_error" are minimised, the others maximised; a tie
            keeps the earlier epoch.
        patience: stop after this many epochs without a better `metric`
            (None: train every epoch); needs `validation_file`.
        null_score_threshold: squad v2.0: answer "" when the no-answer score
            beats the best span's by more than this; default 0.0 when a file
            has impossible questions, else None (always a span).
        from_scratch: random initial weights (a baseline) instead of the
            preset's.
        lora_rank: tune low-rank adapters of this rank instead of the whole
            encoder (`Task.enable_lora`). The run's presets then hold the
            adapters and the head, and name `preset` as their base
            (`save_to_preset(adapters_only=True)`).
        lora_alpha: the adapters' alpha; default the rank.
        lora_targets: the layers given adapters; default all four: "qkv",
            "attention_output", "intermediate", "output".
        seed: the seed of the head's initial weights, shuffling and dropout.
        callbacks: extra Keras callbacks for `fit`; they run before each
            epoch's validation.
        verbose: 0 silent, 1 a progress bar and a line per epoch, 2 a line
            per epoch.
    """
    # The run's settings are its arguments, less where it is written and
    # the callbacks; run.json records them once resolved.
    settings = {name: value for name, value in locals().items() if name not in ("output", "callbacks")}
    from kerasbert.runs.pretraining import PRECISIONS, _check_precision_runs_here

    check_choice(_flag("task"), task, TASKS)
    check_choice(_flag("precision"), precision, PRECISIONS)
    check_choice(_flag("jit_compile"), jit_compile, (True, False, "auto"))
    for name, minimum in (("batch_size", 1), ("epochs", 1), ("accumulation_steps", 1), ("seed", 0),
                          ("max_answer_length", 1)):
        check_int(_flag(name), settings[name], minimum)
    for name, minimum in (("sequence_length", 1), ("patience", 1), ("doc_stride", 0),
                          ("max_question_length", 1), ("lora_rank", 1)):
        check_int(_flag(name), settings[name], minimum, allow_none=True)
    numbers_checked = (("learning_rate", 0, np.inf, True), ("head_learning_rate_multiplier", 0, np.inf, True),
                       ("layer_decay", 0, 1, True), ("weight_decay", 0, np.inf, False),
                       ("warmup_fraction", 0, 1, False), ("null_score_threshold", -np.inf, np.inf, False),
                       ("lora_alpha", 0, np.inf, True))
    for name, low, high, low_open in numbers_checked:
        check_number(_flag(name), settings[name], low, high, low_open=low_open, allow_none=True)
    for name in ("regression", "header", "crf", "from_scratch"):
        check_bool(_flag(name), settings[name])
    for name, default in (("text_columns", None), ("label_column", None), ("regression", False),
                          ("header", True)):
        _check_only_for(task, name, settings[name], default, ("classification",))
    _check_only_for(task, "crf", crf, False, ("ner",))
    _check_only_for(task, "labels", labels, None, ("classification", "ner"))
    for name, default in (("doc_stride", None), ("max_question_length", None), ("max_answer_length", 30),
                          ("null_score_threshold", None)):
        _check_only_for(task, name, settings[name], default, ("squad",))
    _check_lora(settings)
    if labels is not None:
        if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
            raise TypeError(f"labels must be a list of names such as ['0', '1'] or ['O', 'B-PER']; got {labels!r}.")
        if regression:
            raise ValueError(
                f"labels (--labels)={list(labels)} names classes; regression=True (--regression) fits scores. "
                "Give one of them."
            )
        settings["labels"] = labels = list(labels)
    names = REGRESSION_METRICS if regression else {
        "classification": CLASSIFICATION_METRICS, "ner": NER_METRICS, "squad": SQUAD_METRICS}[task]
    if validation_file is None:
        for name in ("metric", "patience"):
            if settings[name] is not None:
                raise ValueError(
                    f"{_flag(name)}={settings[name]!r} needs validation_file (--validation-file): epochs are "
                    "compared on it."
                )
    else:
        settings["metric"] = metric = names[0] if metric is None else metric
        check_choice(_flag("metric"), metric, names)
    _check_precision_runs_here(precision, jit_compile)
    for name in ("train_file", "validation_file"):
        if settings[name] is not None:
            settings[name] = os.fspath(settings[name])
            if not os.path.isfile(settings[name]):
                raise FileNotFoundError(f"{_flag(name)}={settings[name]!r} is not a file.")
    settings["preset"] = os.fspath(preset)
    output = os.fspath(output)
    if os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        raise FileExistsError(
            f"output (--output)={output!r} already exists and is not an empty directory; fine-tuning "
            "never overwrites a run: choose another output directory."
        )

    # Data.
    from kerasbert.readers import read_conll, read_squad

    if task == "classification":
        train, validation = _read_classification(settings)
    elif task == "ner":
        train = read_conll(settings["train_file"], label_names=labels)
        settings["labels"] = list(train.label_names)
        validation = None if validation_file is None else read_conll(
            settings["validation_file"], label_names=train.label_names)
    else:
        train = read_squad(settings["train_file"])
        validation = None if validation_file is None else read_squad(settings["validation_file"])
        impossible = any(e.is_impossible for e in [*train, *(validation or [])])
        settings["squad_version"] = "2.0" if impossible else "1.1"
        if null_score_threshold is None and impossible:
            settings["null_score_threshold"] = 0.0
    if len(train) == 0:
        raise ValueError(f"train_file (--train-file)={settings['train_file']!r} holds no examples.")
    if validation is not None and len(validation) == 0:
        raise ValueError(f"validation_file (--validation-file)={settings['validation_file']!r} holds no examples.")

    # The task, compiled with the recipe.
    keras.utils.set_random_seed(seed)
    model = _build_task(settings)
    if lora_rank is not None:
        model.enable_lora(lora_rank, alpha=settings["lora_alpha"], targets=tuple(settings["lora_targets"]))
    recipe = {k: settings[k] for k in ("learning_rate", "head_learning_rate_multiplier", "layer_decay",
                                       "weight_decay", "warmup_fraction")}
    model.compile(accumulation_steps=accumulation_steps, jit_compile=jit_compile, **recipe)
    settings["sequence_length"] = _sequence_length(model)
    if task == "squad":
        settings.update(doc_stride=model.preprocessor.doc_stride,
                        max_question_length=model.preprocessor.max_question_length)

    start_run(output, settings)
    validator = None if validation is None else Validator(settings, validation)
    recorder = _EpochRecorder(output, settings, validator, verbose)
    fit_options = {"batch_size": batch_size, "epochs": epochs, "callbacks": [*(callbacks or []), recorder],
                       "verbose": verbose}
    if task == "classification":
        model.fit(train.x, train.y, **fit_options)
    elif task == "ner":
        model.fit(train.words, train.tag_ids(), **fit_options)
    else:
        model.fit(train, **fit_options)

    final = os.path.join(output, FINAL)
    last = {k[4:]: v[-1] for k, v in recorder.history.items() if k.startswith("val_")}
    _save_preset(model, final, {"epoch": recorder.history["epoch"][-1], "metric": settings["metric"],
                                "validation": last or None})
    best = os.path.join(output, BEST) if recorder.best_epoch is not None else None
    return FinetuningResult(model, recorder.history, settings["metric"], recorder.best_epoch,
                            recorder.best_metric, best, final, settings.get("labels"), settings)
