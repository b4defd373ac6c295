"""The `kerasbert` command (docs/cli.md).

Results go to stdout (or to an --output file, written atomically); progress
lines go to stderr. Exit status: 0 on success, 2 for bad usage or input
(argparse's own errors, and ValueError, TypeError, FileNotFoundError,
FileExistsError or NotImplementedError raised by a command, printed as one
line `kerasbert COMMAND: error: ...`; also IsADirectoryError,
NotADirectoryError and PermissionError, a path that cannot be used); anything
else is a bug or a failure of the machine, shown with its traceback (exit
status 1).
"""

import argparse
import json
import math
import os
import sys
import textwrap
import warnings

from kerasbert.utils.hardware import prefer_onednn
from kerasbert.utils.optional import import_quietly

EXIT_CODES = """exit status:
  0  success
  2  bad usage or input: an unknown or invalid flag, a missing or unreadable file, a preset
     of the wrong kind, an output that exists without --overwrite (one line on stderr:
     "kerasbert COMMAND: error: ...")
  1  an unexpected failure (a Python traceback)

Results go to stdout or --output; progress lines go to stderr. Every command: docs/cli.md."""


def _number(text):
    """A finite number (an argparse type): NaN and infinities are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
    return value


def _positive_int(text):
    """An integer >= 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def _presets(args):
    from kerasbert.presets import get_preset, list_presets

    rows = []
    for name in list_presets():
        spec = get_preset(name)
        if args.family and spec["family"] != args.family:
            continue
        e = spec["encoder"]
        rows.append((
            name,
            spec["family"],
            f"{spec['metadata']['parameter_count'] / 1e6:.1f}M",
            f"{e['num_layers']}/{e['hidden_dim']}/{e['num_heads']}",
            spec["metadata"]["license"],
            spec["weights"]["huggingface"],
        ))
    header = ("preset", "family", "params", "L/H/A", "license", "weights (Hugging Face)")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(f"`{v}`" if i in (0, 5) else str(v) for i, v in enumerate(row)) + " |")
        return 0
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    return 0


def _pretrain(args):
    from kerasbert.runs.pretraining import pretrain

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "train_files")}
    result = pretrain(train_files=args.train_files, **kwargs)
    last = {k: v[-1] for k, v in result.history.items() if v}
    summary = ", ".join(f"{k} {v:.4g}" for k, v in sorted(last.items()) if k != "step")
    print(f"Pretrained encoder and tokenizer: {result.preset_dir}" + (f" ({summary})" if summary else ""))
    return 0


def _add_pretrain(commands):
    from kerasbert.runs.options import OBJECTIVES, OPTIMIZERS, PRECISIONS

    parser = commands.add_parser(
        "pretrain",
        help="pretrain an encoder on plain-text files (MLM, MLM+NSP, MLM+SOP, ELECTRA)",
        description="Pretrains an encoder on plain-text files (one sentence per line, a blank "
        "line between documents) and writes OUTPUT/history.json, TensorBoard logs, checkpoints "
        "and the final encoder with its tokenizer as a kerasbert preset in OUTPUT/preset.",
    )
    add = parser.add_argument
    add("--preset", required=True, metavar="NAME",
        help="the architecture (and weights and vocabulary, without --from-scratch): a built-in "
        "preset name or a preset directory; for electra, the discriminator")
    add("--objective", required=True, choices=OBJECTIVES,
        help="masked LM, with next-sentence or sentence-order prediction, or ELECTRA's replaced tokens")
    add("--train-files", required=True, metavar="GLOB", action="append",
        help="plain-text training files (repeatable)")
    add("--output", required=True, metavar="DIR", help="the run's directory (history, logs, checkpoints, preset)")
    add("--from-scratch", action="store_true", help="random initial weights")
    add("--vocabulary-size", type=int, metavar="N",
        help="train a new vocabulary of N tokens on the training files (default: the preset's)")
    add("--sequence-length", type=int, default=128, metavar="N", help="tokens per training row (default 128)")
    add("--batch-size", type=int, default=32, metavar="N", help="rows per training step (default 32)")
    add("--steps", type=int, default=1000, metavar="N", help="training steps in all (default 1000)")
    for flag in ("num-layers", "hidden-dim", "num-heads", "intermediate-dim"):
        add(f"--{flag}", type=int, metavar="N", help="change the preset's architecture (needs --from-scratch)")
    add("--optimizer", choices=OPTIMIZERS, default="adamw", help="AdamW or LAMB (default adamw)")
    add("--learning-rate", type=_number, default=1e-4, metavar="LR", help="peak learning rate (default 1e-4)")
    add("--warmup-steps", type=int, metavar="N", help="linear warmup (default: 10%% of the updates)")
    add("--weight-decay", type=_number, default=0.01, metavar="X", help="decoupled weight decay (default 0.01)")
    add("--clipnorm", type=_number, default=1.0, metavar="X", help="global gradient-norm clipping (default 1.0)")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32", help="a Keras dtype policy (default float32)")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: XLA on tensorflow and jax, eager on torch; "
        "mixed_bfloat16 on TensorFlow's own kernels on a CPU with bfloat16 units)")
    add("--whole-word", action="store_true", help="whole-word masking")
    add("--generator-fraction", type=_number, metavar="F",
        help="ELECTRA generator size relative to the discriminator (default: the paper's)")
    add("--log-every", type=int, metavar="N", help="steps per history entry")
    add("--checkpoint-every", type=int, metavar="N", help="steps between checkpoints")
    add("--keep-checkpoints", type=int, default=2, metavar="N", help="the newest checkpoints kept (default 2)")
    add("--seed", type=int, default=0, metavar="N",
        help="the seed of the initial weights, the examples, the masks and dropout (default 0)")
    add("--resume", action="store_true", help="continue the run in --output from its newest checkpoint")
    add("--distribution", choices=("data", "model"),
        help="train on all devices: data parallelism (jax: keras.distribution.DataParallel; "
        "tensorflow: MirroredStrategy, or MultiWorkerMirroredStrategy with TF_CONFIG) or model "
        "parallelism (jax: ModelParallel with Encoder.get_layout_map); --batch-size is the global batch")
    add("--mesh", metavar="BxM",
        help="with --distribution model: the (batch, model) device mesh, e.g. 2x4 (default 1xALL)")
    add("--verbose", type=int, default=1, choices=(0, 1, 2),
        help="Keras fit's verbosity: 0 silent, 1 a progress bar, 2 a line per history entry")
    parser.set_defaults(run=_pretrain)


def _finetune(args):
    from kerasbert.runs.finetuning import finetune

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "no_header")}
    kwargs["header"] = not args.no_header
    kwargs.update(_table_options(args, header=kwargs["header"]))
    result = finetune(**kwargs)
    if result.best_preset_dir is not None:
        print(f"Fine-tuned {args.task}: best val_{result.metric} {result.best_metric:.4f} at epoch "
              f"{result.best_epoch} of {len(result.history['epoch'])}, preset in {result.best_preset_dir} "
              f"(last epoch: {result.final_preset_dir})")
    else:
        loss = result.history.get("loss", [None])[-1]
        print(f"Fine-tuned {args.task} for {len(result.history['epoch'])} epoch(s)"
              + (f" (training loss {loss:.4g})" if loss is not None else "")
              + f", preset in {result.final_preset_dir} (no --validation-file: no best epoch)")
    return 0


def _column_index(flag, value):
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{flag} {value!r}: with --no-header, columns are integer indices such as 0 or 3.") from None


def _table_options(args, header):
    """The given --text-columns, --label-column and --labels as `finetune`'s
    keyword arguments: column names, or indices without a header."""
    options = {}
    if args.text_columns is not None:
        columns = [c.strip() for c in args.text_columns.split(",")]
        options["text_columns"] = columns if header else [_column_index("--text-columns", c) for c in columns]
    if args.label_column is not None:
        options["label_column"] = args.label_column if header else _column_index("--label-column", args.label_column)
    if args.labels is not None:
        options["labels"] = [label.strip() for label in args.labels.split(",")]
    return options


def _add_table_flags(add, run_defaults=False):
    """The flags that say how to read a GLUE-style TSV file (finetune; with
    `run_defaults`, evaluate, where a finetune run's settings fill in)."""
    add("--text-columns", metavar="A[,B]",
        help="classification: the text column, or two for pairs (names; indices with --no-header); "
        "default: " + ("the run's, else " if run_defaults else "") + "GLUE's column names")
    add("--label-column", metavar="NAME",
        help="classification: the label column (default: " + ("the run's, else " if run_defaults else "")
        + "GLUE's names)")
    if not run_defaults:
        add("--no-header", action="store_true", help="classification: the TSV files have no header line")
        return
    add("--no-header", dest="no_header", action="store_true", default=None,
        help="classification: the TSV file has no header line (default: as in the run, else it has one)")
    add("--header", dest="no_header", action="store_false", default=None,
        help="classification: the TSV file starts with a header line (for a run whose files had none)")


def _add_finetune(commands):
    from kerasbert.runs.options import PRECISIONS, TASKS

    parser = commands.add_parser(
        "finetune",
        help="fine-tune a preset on GLUE-style TSV, CoNLL-2003 or SQuAD files",
        description="Fine-tunes a preset on a classification (GLUE-style TSV), NER (CoNLL-2003) or "
        "question-answering (SQuAD v1.1/v2.0 JSON) file. With --validation-file, every epoch is scored "
        "with the task's metric, the best epoch is kept as a task preset in OUTPUT/best and --patience "
        "stops early; OUTPUT/final holds the last epoch, OUTPUT/history.json the per-epoch losses and "
        "metrics, OUTPUT/run.json the settings.",
    )
    add = parser.add_argument
    add("--task", required=True, choices=TASKS,
        help="classification (GLUE-style TSV), ner (CoNLL-2003) or squad (SQuAD JSON)")
    add("--preset", required=True, metavar="NAME",
        help="a built-in preset name, a preset directory (also a task preset such as a previous OUTPUT/best), "
        "a Hugging Face checkpoint directory or hf://org/name")
    add("--train-file", required=True, metavar="PATH", help="the training file, in the --task's format")
    add("--validation-file", metavar="PATH", help="scored every epoch to keep the best one")
    add("--output", required=True, metavar="DIR", help="a new (or empty) directory for the run")
    _add_table_flags(add)
    add("--regression", action="store_true", help="classification: fit scores (STS-B) instead of classes")
    add("--labels", metavar="A,B,...",
        help="classification: the class names in id order; ner: every tag (default: the training file's)")
    add("--crf", action="store_true", help="ner: a CRF output layer")
    add("--sequence-length", type=int, metavar="N",
        help="tokens per example (window for squad); default the encoder's, at most 512 (384 for squad)")
    add("--doc-stride", type=int, metavar="N", help="squad: tokens shared by consecutive windows")
    add("--max-question-length", type=int, metavar="N", help="squad: tokens kept of each question")
    add("--max-answer-length", type=int, default=30, metavar="N", help="squad: the longest answer in tokens")
    add("--batch-size", type=int, default=32, metavar="N", help="examples per training step (default 32)")
    add("--epochs", type=int, default=3, metavar="N", help="passes over the training file (default 3)")
    add("--learning-rate", type=_number, metavar="LR", help="peak learning rate (default 5e-5)")
    add("--head-learning-rate-multiplier", type=_number, metavar="X",
        help="the new head's learning rate relative to the encoder's (default 10)")
    add("--layer-decay", type=_number, metavar="X", help="layer-wise learning-rate decay in (0, 1] (default 1)")
    add("--weight-decay", type=_number, metavar="X", help="AdamW weight decay (default 0.01)")
    add("--warmup-fraction", type=_number, metavar="X", help="share of the updates spent warming up (default 0.1)")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32", help="a Keras dtype policy (default float32)")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: Keras's choice)")
    add("--metric", metavar="NAME",
        help="the validation metric that picks the best epoch (default: accuracy, pearson with "
        "--regression, f1 for ner and squad)")
    add("--patience", type=int, metavar="N", help="stop after N epochs without a better --metric")
    add("--null-score-threshold", type=_number, metavar="X",
        help="squad v2.0: answer nothing when the no-answer score beats the best span by more (default 0)")
    add("--from-scratch", action="store_true", help="random initial weights (a baseline)")
    add("--seed", type=int, default=0, metavar="N",
        help="the seed of the head's initial weights, shuffling and dropout (default 0)")
    add("--verbose", type=int, default=1, choices=(0, 1, 2),
        help="0 silent, 1 a progress bar and a line per epoch, 2 a line per epoch")
    parser.set_defaults(run=_finetune)


def _export(args):
    from kerasbert.tasks.task import load_task

    options = {"pairs": True} if args.pairs else {}
    for name in ("top_k", "n_best_size", "max_answer_length", "null_score_threshold"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if os.path.lexists(args.output) and not args.overwrite:  # before any loading
        raise FileExistsError(f"{args.output} already exists; pass --overwrite to replace it.")
    task = load_task(args.preset)
    kind = type(task).__name__
    if args.pairs and kind != "TextClassifier":
        raise ValueError(f"--pairs is for TextClassifier presets; {args.preset} holds a {kind}.")
    _only_for(kind, "MaskedLM", args, ("top_k",))
    _only_for(kind, "QuestionAnswerer", args, ("n_best_size", "max_answer_length", "null_score_threshold"))
    path = task.export(args.output, overwrite=args.overwrite, **options)
    print(f"SavedModel written: {path} (signature serving_default; docs/export.md)")
    return 0


def _add_export(commands):
    parser = commands.add_parser(
        "export",
        help="write a fine-tuned task as a SavedModel that takes raw text",
        description="Exports a task preset directory (the best/ or final/ of `kerasbert finetune`, "
        "or a task's save_to_preset) as a TensorFlow SavedModel whose serving_default signature "
        "takes raw strings, the tokenizer inside; it runs with TensorFlow and tensorflow-text alone "
        "(docs/export.md).",
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("output", metavar="OUTPUT", help="the SavedModel directory to create")
    add("--pairs", action="store_true",
        help="text classifiers: take sentence pairs (inputs text and text_pair)")
    add("--top-k", type=_positive_int, metavar="K", help="masked LM: the candidates returned per mask (default 5)")
    add("--n-best-size", type=_positive_int, metavar="N",
        help="question answering: the best starts and ends of each window paired into spans (default: the "
        "task's, 20 unless set)")
    add("--max-answer-length", type=_positive_int, metavar="N",
        help="question answering: the longest answer in tokens (default: the task's, 30 unless set)")
    add("--null-score-threshold", type=_number, metavar="X",
        help="question answering, SQuAD v2.0: answer \"\" when the no-answer score beats the best span by "
        "more than X (default: the task's; 0 after `kerasbert finetune` on a SQuAD v2.0 file)")
    add("--overwrite", action="store_true", help="replace OUTPUT if it exists (only once the new export is complete)")
    parser.set_defaults(run=_export)


# -- shared by convert, evaluate, predict and embed ----------------------------

def _wrapped(text):
    """A description kept readable by the raw formatter its examples need."""
    return textwrap.fill(text, width=100)


def _step(message):
    """A progress line on stderr (stdout is for results)."""
    print(f"kerasbert: {message}", file=sys.stderr, flush=True)


def _check_file(flag, path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag} {path!r} is not a file.")
    return path


def _check_output(path, flag="--output"):
    """A file to write: not a directory (before any work is done)."""
    if path is not None and os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path!r} is a directory; give the path of a file to write.")
    return path


def _load_task(preset, need_text=True):
    """The task a task preset directory holds (with a preprocessor when
    `need_text`)."""
    from kerasbert.tasks.task import load_task

    _step(f"loading {preset} ...")
    task = load_task(preset)
    if need_text and getattr(task, "preprocessor", None) is None:
        raise ValueError(f"{preset} holds a {type(task).__name__} without a tokenizer, so it cannot read text.")
    return task


# The `kerasbert finetune` task that writes each task class.
_FINETUNE_TASKS = {"TextClassifier": "classification", "TokenClassifier": "ner", "QuestionAnswerer": "squad"}


def _run_settings(preset, task):
    """The settings of the `kerasbert finetune` run that wrote `preset` (its
    OUTPUT/best or OUTPUT/final): OUTPUT/run.json, or {} for other presets."""
    from kerasbert.runs.options import BEST, FINAL
    from kerasbert.utils.io import read_json

    directory = os.path.abspath(preset)
    path = os.path.join(os.path.dirname(directory), "run.json")
    if os.path.basename(directory) not in (BEST, FINAL) or not os.path.isfile(path):
        return {}
    settings = read_json(path, "kerasbert finetune run.json")
    if settings.get("task") != _FINETUNE_TASKS.get(type(task).__name__):
        return {}
    _step(f"flags not given default to the settings of the run in {path}")
    return settings


def _read_lines(flag, path):
    """The non-blank lines of a UTF-8 text file, with their line numbers."""
    _check_file(flag, path)
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{flag} {path!r} is not UTF-8 text: {e}.") from None
    return [(number, line) for number, line in enumerate(lines, 1) if line.strip()]


def _read_texts(args, pairs=False):
    """The TEXT arguments or the lines of --file: a list of strings, or with
    `pairs` a tuple (first, second) of two lists."""
    if args.texts and args.file is not None:
        raise ValueError(f"give texts as arguments or --file {args.file!r}, not both.")
    if args.file is not None:
        rows = _read_lines("--file", args.file)
        if not pairs:
            texts = [line for _, line in rows]
        else:
            texts = []
            for number, line in rows:
                fields = line.split("\t")
                if len(fields) != 2:
                    raise ValueError(
                        f"--file {args.file!r}, line {number}: --pairs needs two tab-separated texts; "
                        f"found {len(fields)} field(s)."
                    )
                texts.append(fields)
        where = f"--file {args.file!r}"
    else:
        texts, where = list(args.texts), "the command line"
        if pairs:
            if len(texts) % 2:
                raise ValueError(f"--pairs takes texts two by two (first second first second ...); got {len(texts)}.")
            texts = [texts[i:i + 2] for i in range(0, len(texts), 2)]
    if not texts:
        raise ValueError(f"no texts in {where}: give TEXT arguments or --file PATH (one text per line).")
    if pairs:
        return [first for first, _ in texts], [second for _, second in texts]
    return texts


def _write_json_lines(records, output):
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    if output is None:
        for line in lines:
            print(line)
        return
    from kerasbert.utils.io import atomic_file

    with atomic_file(output) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    _step(f"wrote {len(lines)} line(s) to {output}")


# -- convert ---------------------------------------------------------------------

def _convert(args):
    from kerasbert.presets import huggingface_checkpoint_directory, preset_directory
    from kerasbert.utils.io import replacing_directory

    source, output = args.source, args.output
    if os.path.lexists(output) and not args.overwrite:  # before any reading
        raise FileExistsError(f"{output} already exists; pass --overwrite to replace it.")
    directory = preset_directory(source)  # fetches and caches a built-in preset or hf:// first
    from_huggingface = huggingface_checkpoint_directory(source) is not None
    to = args.to or ("kerasbert" if from_huggingface else "huggingface")
    model, description = _read_model(source, directory, from_huggingface)
    target = "a kerasbert preset" if to == "kerasbert" else "a Hugging Face checkpoint"
    _step(f"writing {description} as {target} ...")
    with replacing_directory(output, args.overwrite, hint="pass --overwrite") as staging, \
            warnings.catch_warnings(record=True) as caught:
        if to == "kerasbert":
            _write_kerasbert(model, source, directory, staging)
        else:
            _write_huggingface(model, source, directory, staging)
        written = sorted(os.listdir(staging))
    for warning in caught:
        if issubclass(warning.category, UserWarning):  # what a format cannot hold, said of OUTPUT
            _step(f"note: {str(warning.message).replace(staging, output)}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    kind = "kerasbert preset" if to == "kerasbert" else "Hugging Face checkpoint"
    print(f"Converted {source} to a {kind}: {output} ({', '.join(written)})")
    return 0


def _read_model(source, directory, from_huggingface):
    """(the task or encoder `source` holds, a description of it)."""
    import kerasbert
    from kerasbert.tasks.fine_tuning import TASK_FILE, _huggingface_head_config

    if os.path.isfile(os.path.join(directory, TASK_FILE)):
        task = _load_task(source, need_text=False)
        return task, f"the {type(task).__name__} task"
    if from_huggingface:
        for cls in (kerasbert.TextClassifier, kerasbert.TokenClassifier, kerasbert.QuestionAnswerer):
            config = _huggingface_head_config(cls, source)
            if config is not None:
                _step(f"reading weights of {source} ({config['architectures'][0]} -> {cls.__name__}) ...")
                return cls.from_preset(source), f"the {cls.__name__} task"
    _step(f"reading weights of {source} ...")
    return kerasbert.from_preset(source), "the encoder"


def _tokenizer_files(directory, staging):
    """Copies the tokenizer files (Hugging Face names, which kerasbert reads
    too) of `directory`; the names copied."""
    from kerasbert.presets import TOKENIZER_FILES, _copy_tokenizer_files

    _copy_tokenizer_files(directory, staging)
    return [name for name in TOKENIZER_FILES if os.path.isfile(os.path.join(staging, name))]


def _write_kerasbert(model, source, directory, staging):
    from kerasbert.encoder import Encoder
    from kerasbert.presets import PRESET_FILE, preset_family
    from kerasbert.utils.io import read_json
    from kerasbert.utils.preset_files import write_preset

    if not isinstance(model, Encoder):
        if getattr(model, "preprocessor", None) is None:
            raise ValueError(
                f"{source} has no tokenizer files, which a kerasbert task preset needs (its task.json names "
                "the preprocessor); add them (tokenizer.json, or vocab.txt with tokenizer_config.json) or "
                "convert with --to huggingface."
            )
        model.save_to_preset(staging)
        return
    spec_file = os.path.join(directory, PRESET_FILE)
    if os.path.isfile(spec_file):  # a kerasbert preset: its description (family, tokenizer settings) is kept
        spec = read_json(spec_file, "kerasbert preset file")
    else:
        family = preset_family(source)
        spec = {"family": family} if family else None
    write_preset(model, staging, spec=spec)
    if not _tokenizer_files(directory, staging):
        _step(f"note: {source} has no tokenizer files; the preset holds the encoder alone")


def _write_huggingface(model, source, directory, staging):
    import kerasbert
    from kerasbert.convert.huggingface import MODEL_TYPES
    from kerasbert.presets import preset_family

    if isinstance(model, kerasbert.Encoder):
        family = preset_family(source)
        try:  # the tokenizer as kerasbert reads it, in the files transformers reads
            tokenizer = kerasbert.Tokenizer.from_preset(directory)
        except FileNotFoundError:
            tokenizer = None
    else:
        family = getattr(model, "family", None)
        tokenizer = model.preprocessor.tokenizer if getattr(model, "preprocessor", None) is not None else None
        if isinstance(model, kerasbert.TextEmbedder):
            _step("note: a Hugging Face checkpoint has no place for a TextEmbedder's pooling; its encoder is written")
            model = model.encoder
    kerasbert.convert.to_huggingface(model, staging, model_type=family if family in MODEL_TYPES else None)
    if tokenizer is not None:
        tokenizer.save_to_preset(staging)
    else:
        _step(f"note: {source} has no tokenizer files; the checkpoint holds the weights alone")


def _add_convert(commands):
    parser = commands.add_parser(
        "convert",
        help="convert between Hugging Face checkpoints and kerasbert presets",
        description=_wrapped(
            "Converts a Hugging Face checkpoint into a kerasbert preset directory, or a kerasbert "
            "preset (a built-in name, an encoder preset or a task preset) into a Hugging Face checkpoint "
            "(config.json + model.safetensors) that transformers loads; the tokenizer files go along. A task "
            "(a task preset's task.json, or a checkpoint whose architecture is ...ForSequenceClassification, "
            "...ForTokenClassification or ...ForQuestionAnswering) is converted with its head; other "
            "checkpoints give the encoder alone. OUTPUT is written in a directory beside it and moved into "
            "place when complete."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  kerasbert convert /path/to/bert-base-uncased presets/bert_base      # Hugging Face -> kerasbert\n"
        "  kerasbert convert runs/sst2/best hf/sst2                            # task preset -> transformers\n"
        "  kerasbert convert all_minilm_l6_v2 minilm --to kerasbert            # a built-in, as a directory",
    )
    add = parser.add_argument
    add("source", metavar="SOURCE",
        help="a Hugging Face checkpoint directory or hf://org/name, a built-in preset name, or a kerasbert "
        "preset directory (an encoder's, or a task's with task.json)")
    add("output", metavar="OUTPUT", help="the directory to create")
    add("--to", choices=("kerasbert", "huggingface"),
        help="the format to write (default: kerasbert from a Hugging Face checkpoint, huggingface from a "
        "built-in name or a kerasbert preset)")
    add("--overwrite", action="store_true",
        help="replace OUTPUT if it exists (only once the new files are complete)")
    parser.set_defaults(run=_convert)


# -- evaluate --------------------------------------------------------------------

def _evaluate(args):
    from kerasbert.readers import read_conll, read_squad
    from kerasbert.runs.finetuning import _Validator
    from kerasbert.utils.io import write_json

    _check_output(args.output)
    _check_file("--file", args.file)
    task = _load_task(args.preset)
    kind = type(task).__name__
    if kind not in _FINETUNE_TASKS:
        raise TypeError(
            f"{args.preset} holds a {kind}; kerasbert evaluate scores TextClassifier, TokenClassifier and "
            "QuestionAnswerer presets."
        )
    _only_for(kind, "TextClassifier", args, ("text_columns", "label_column", "no_header", "labels"))
    _only_for(kind, "QuestionAnswerer", args, ("null_score_threshold", "max_answer_length"))
    run = _run_settings(args.preset, task)
    settings = {"task": _FINETUNE_TASKS[kind], "batch_size": args.batch_size, "regression": False}
    _step(f"reading {args.file} ...")
    if kind == "TextClassifier":
        data = _read_classification_file(args, task, run)
        settings["regression"] = task.num_classes == 1
    elif kind == "TokenClassifier":
        data = read_conll(args.file, label_names=task.labels)  # a tag the task does not know: file and line
    else:
        data = read_squad(args.file)
    if len(data) == 0:
        raise ValueError(f"--file {args.file!r} holds no examples.")
    _step(f"scoring {len(data)} example(s) with the {kind} ...")
    if kind == "QuestionAnswerer":
        # The task's decoding settings (those of its run), under the flags.
        if (args.null_score_threshold is None and task.null_score_threshold is None
                and any(e.is_impossible for e in data)):
            _step("the file has unanswerable questions but the task always answers with a span (it has no null "
                  "score threshold); --null-score-threshold 0 scores it as SQuAD v2.0")
        scores = task.evaluate_squad(data, batch_size=args.batch_size, max_answer_length=args.max_answer_length,
                                     null_score_threshold=args.null_score_threshold)
    else:
        scores = _Validator(settings, data)(task)
    print(json.dumps(scores, indent=2))
    if args.output is not None:
        write_json(args.output, scores)
        _step(f"wrote {args.output}")
    return 0


def _only_for(kind, owner, args, names):
    for name in names:
        if kind != owner and getattr(args, name) is not None:
            raise ValueError(f"--{name.replace('_', '-')} is for {owner} presets; {args.preset} holds a {kind}.")


def _read_classification_file(args, task, run):
    """The GLUE-style TSV of `evaluate`, read as `kerasbert finetune` reads
    its validation file: flags first, then the run's settings, then GLUE's
    column names; class names from --labels, the run, the task or the file."""
    from kerasbert.readers import read_glue_tsv
    from kerasbert.runs.finetuning import _glue_columns

    header = not args.no_header if args.no_header is not None else run.get("header", True)
    options = _table_options(args, header)
    text_columns = options.get("text_columns", run.get("text_columns"))
    label_column = options.get("label_column", run.get("label_column"))
    text_columns, label_column = _glue_columns(args.file, text_columns, label_column, header)
    if task.num_classes == 1:
        return read_glue_tsv(args.file, text_columns, label_column, header=header, regression=True)
    sources = [("--labels", options.get("labels")), ("the run's labels", run.get("labels")),
               ("the task's labels", getattr(task, "labels", None))]
    source, labels = next(((name, value) for name, value in sources if value), (f"the labels of {args.file}", None))
    data = read_glue_tsv(args.file, text_columns, label_column, header=header, label_names=labels)
    if len(data.label_names) != task.num_classes:
        raise ValueError(
            f"the classifier has {task.num_classes} classes, but {source} are {len(data.label_names)}: "
            f"{data.label_names}; pass --labels with every class name, in class-id order."
        )
    return data


def _add_evaluate(commands):
    parser = commands.add_parser(
        "evaluate",
        help="score a task preset on a labelled GLUE TSV, CoNLL-2003 or SQuAD file",
        description=_wrapped(
            "Scores a task preset on a labelled file in its task's format and prints the metrics "
            "`kerasbert finetune` reports for validation, as a JSON object: TextClassifier, a GLUE-style TSV "
            "(accuracy, matthews_correlation, loss, and f1 for two classes; pearson, spearman and "
            "mean_squared_error for a regressor); TokenClassifier, a CoNLL-2003 file (entity-level f1, "
            "precision, recall); QuestionAnswerer, a SQuAD v1.1/v2.0 JSON file (exact_match and f1, and "
            "HasAns_/NoAns_ scores for v2.0). For OUTPUT/best or OUTPUT/final of `kerasbert finetune`, "
            "the flags not given default to the run's settings in OUTPUT/run.json (columns, header, "
            "labels, null-score threshold, maximum answer length)."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  kerasbert evaluate runs/sst2/best --file glue/SST-2/dev.tsv\n"
        "  kerasbert evaluate runs/cola/best --file dev.tsv --no-header --text-columns 3 --label-column 1\n"
        "  kerasbert evaluate runs/squad/best --file dev-v2.0.json --output scores.json",
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("--file", required=True, metavar="PATH",
        help="the labelled file: GLUE-style TSV (TextClassifier), CoNLL-2003 (TokenClassifier) or SQuAD "
        "JSON (QuestionAnswerer)")
    _add_table_flags(add, run_defaults=True)
    add("--labels", metavar="A,B,...",
        help="classification: the class names as written in the file, in class-id order (default: the "
        "run's, the task's, or the file's sorted)")
    add("--null-score-threshold", type=_number, metavar="X",
        help="squad: answer nothing when the no-answer score beats the best span by more (default: the "
        "task's; 0 after `kerasbert finetune` on a SQuAD v2.0 file)")
    add("--max-answer-length", type=_positive_int, metavar="N",
        help="squad: the longest answer in tokens (default: the task's)")
    add("--batch-size", type=_positive_int, default=32, metavar="N", help="examples per prediction batch (default 32)")
    add("--output", metavar="JSON", help="also write the metrics to this JSON file")
    parser.set_defaults(run=_evaluate)


# -- predict -----------------------------------------------------------------------

def _predict(args):
    _check_output(args.output)
    if args.file is not None:
        _check_file("--file", args.file)
    task = _load_task(args.preset)
    kind = type(task).__name__
    if kind == "TextEmbedder":
        raise ValueError(
            f"{args.preset} holds a TextEmbedder: `kerasbert embed {args.preset} --file PATH --output "
            "vectors.npy` writes its embeddings."
        )
    if kind not in _FINETUNE_TASKS:
        raise TypeError(
            f"{args.preset} holds a {kind}; kerasbert predict runs TextClassifier, TokenClassifier and "
            "QuestionAnswerer presets."
        )
    if args.pairs and kind != "TextClassifier":
        raise ValueError(f"--pairs is for TextClassifier presets; {args.preset} holds a {kind}.")
    _only_for(kind, "QuestionAnswerer", args, ("null_score_threshold", "max_answer_length"))
    run = _run_settings(args.preset, task)
    if kind == "QuestionAnswerer":
        records = _predict_answers(args, task)
    else:
        texts = _read_texts(args, pairs=args.pairs)
        count = len(texts[0]) if args.pairs else len(texts)
        _step(f"predicting {count} example(s) with the {kind} ...")
        if kind == "TextClassifier":
            records = _classify(task, texts, args.batch_size, run)
        else:
            records = _tag(task, texts, args.batch_size)
    _write_json_lines(records, args.output)
    return 0


def _classify(task, texts, batch_size, run):
    import numpy as np

    from kerasbert.runs.finetuning import _log_softmax

    logits = np.asarray(task.predict(texts, batch_size=batch_size))  # (n, num_classes)
    pairs = isinstance(texts, tuple)
    firsts = texts[0] if pairs else texts
    if task.num_classes == 1:
        scores = logits[:, 0].tolist()
        return [{"text": t, **({"text_pair": texts[1][i]} if pairs else {}), "score": scores[i]}
                for i, t in enumerate(firsts)]
    labels = getattr(task, "labels", None) or run.get("labels")
    if labels is not None and len(labels) != task.num_classes:
        labels = None
    probabilities = np.exp(_log_softmax(logits))
    records = []
    for i, text in enumerate(firsts):
        label = int(probabilities[i].argmax())
        record = {"text": text, **({"text_pair": texts[1][i]} if pairs else {}), "label": label}
        if labels is not None:
            record["label_name"] = labels[label]
        record["probabilities"] = probabilities[i].tolist()
        records.append(record)
    return records


def _tag(task, texts, batch_size):
    if task.labels is None:  # no tag names: word-level tag ids
        return [{"text": t, "tags": tags.tolist()} for t, tags in zip(texts, task.predict_tags(texts, batch_size))]
    return [{"text": t, "entities": [{**e, "words": list(e["words"])} for e in entities]}
            for t, entities in zip(texts, task.predict_entities(texts, batch_size=batch_size))]


def _predict_answers(args, task):
    if args.texts or args.file is None:
        raise ValueError(
            "question answering reads --file: JSON lines {\"question\": ..., \"context\": ...} or a SQuAD JSON file."
        )
    examples = _read_questions(args.file)
    _step(f"answering {len(examples)} question(s) ...")
    questions = [e["question"] for e in examples]
    # The task's decoding settings (those of its run), under the flags.
    predictions = task.predict_answers((questions, [e["context"] for e in examples]), batch_size=args.batch_size,
                                       max_answer_length=args.max_answer_length,
                                       null_score_threshold=args.null_score_threshold)
    return [{**({"id": e["id"]} if "id" in e else {}), "question": e["question"], "answer": p.text,
             "start": int(p.start), "end": int(p.end), "score": float(p.score)}
            for e, p in zip(examples, predictions)]


def _read_questions(path):
    """[{"question", "context"(, "id")}] from a SQuAD JSON file or JSON lines."""
    from kerasbert.readers import read_squad

    rows = _read_lines("--file", path)
    try:
        whole = json.loads("\n".join(line for _, line in rows))
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "data" in whole:
        return [{"id": e.id, "question": e.question, "context": e.context} for e in read_squad(path)]
    examples = []
    for number, line in rows:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"--file {path!r}, line {number}: not JSON ({e}).") from None
        if not (isinstance(row, dict) and isinstance(row.get("question"), str) and isinstance(row.get("context"), str)):
            raise ValueError(
                f"--file {path!r}, line {number}: expected an object with string fields \"question\" and "
                "\"context\" (or a SQuAD JSON file)."
            )
        examples.append(row)
    if not examples:
        raise ValueError(f"--file {path!r} holds no questions.")
    return examples


def _add_predict(commands):
    parser = commands.add_parser(
        "predict",
        help="run a task preset on texts and print one JSON line per input",
        description=_wrapped(
            "Runs a task preset on texts given as arguments or in --file, and prints one JSON "
            "line per input: TextClassifier {text, label, label_name (when the class names are known), "
            "probabilities} or, for a regressor, {text, score} (with text_pair for --pairs); TokenClassifier "
            "{text, entities: [{type, start, end, text, words}]} (or {text, tags} of tag ids when the task "
            "has no tag names); QuestionAnswerer {question, answer, start, end, score} (and id) for "
            "questions in --file. A TextEmbedder's vectors come from `kerasbert embed`."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  kerasbert predict runs/sst2/best \"A gem of a film.\" \"Dull and far too long.\"\n"
        "  kerasbert predict runs/mrpc/best --pairs --file pairs.tsv --output predictions.jsonl\n"
        "  kerasbert predict runs/squad/best --file questions.jsonl",
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("texts", nargs="*", metavar="TEXT",
        help="texts to classify or tag (with --pairs: first second first second ...)")
    add("--file", metavar="PATH",
        help="inputs instead of TEXT: one text per line (blank lines skipped), a tab between the two texts "
        "with --pairs; question answering: JSON lines {\"question\", \"context\"} or a SQuAD JSON file")
    add("--pairs", action="store_true", help="text classifiers: the inputs are sentence pairs")
    add("--null-score-threshold", type=_number, metavar="X",
        help="question answering: answer \"\" when the no-answer score beats the best span by more "
        "(default: the task's; 0 after `kerasbert finetune` on a SQuAD v2.0 file)")
    add("--max-answer-length", type=_positive_int, metavar="N",
        help="question answering: the longest answer in tokens (default: the task's)")
    add("--batch-size", type=_positive_int, default=32, metavar="N", help="inputs per prediction batch (default 32)")
    add("--output", metavar="PATH", help="write the JSON lines to this file (replaced atomically) instead of stdout")
    parser.set_defaults(run=_predict)


# -- embed -------------------------------------------------------------------------

def _embed(args):
    import numpy as np

    import kerasbert
    from kerasbert.utils.io import atomic_file

    _check_output(args.output)
    texts = _read_texts(args)
    options = {name: getattr(args, name) for name in ("pooling", "normalize") if getattr(args, name) is not None}
    _step(f"loading {args.preset} ...")
    embedder = kerasbert.TextEmbedder.from_preset(args.preset, **options)
    if embedder.preprocessor is None:
        raise ValueError(f"{args.preset} has no tokenizer files, so it cannot read text.")
    _step(f"embedding {len(texts)} text(s) ...")
    vectors = np.asarray(embedder.predict(texts, batch_size=args.batch_size), np.float32)  # (n, hidden)
    with atomic_file(args.output) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, vectors)
    print(f"Wrote embeddings of shape {vectors.shape} (float32) to {args.output}")
    return 0


def _add_embed(commands):
    parser = commands.add_parser(
        "embed",
        help="write sentence embeddings of texts as a .npy array",
        description=_wrapped(
            "Embeds texts (arguments or --file) with a TextEmbedder task preset, or with any "
            "encoder (a built-in preset name, a preset directory, a Hugging Face checkpoint) pooled as "
            "TextEmbedder.from_preset pools it (all_minilm_l6_v2: mean, normalised, as sentence-transformers; "
            "other encoders: the mean over tokens), and writes a float32 array of shape (texts, hidden_dim) "
            "with numpy.save, row i for text i."),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
        "  kerasbert embed all_minilm_l6_v2 \"A man is eating food.\" --output vectors.npy\n"
        "  kerasbert embed runs/embedder/final --file sentences.txt --output vectors.npy --batch-size 64",
    )
    add = parser.add_argument
    add("preset", metavar="PRESET",
        help="a TextEmbedder task preset directory, or an encoder: a built-in name, a preset directory, a "
        "Hugging Face checkpoint directory or hf://org/name")
    add("texts", nargs="*", metavar="TEXT", help="texts to embed")
    add("--file", metavar="PATH", help="texts instead of TEXT: one per line (blank lines skipped)")
    add("--output", required=True, metavar="PATH.npy", help="the array file to write (replaced atomically)")
    add("--pooling", choices=("mean", "cls"),
        help="pool the mean over real tokens or the first token (default: the preset's, else mean)")
    add("--normalize", action=argparse.BooleanOptionalAction,
        help="scale each vector to unit length, so dot products are cosine similarities (default: the preset's)")
    add("--batch-size", type=_positive_int, default=32, metavar="N", help="texts per prediction batch (default 32)")
    parser.set_defaults(run=_embed)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kerasbert",
        description="BERT, ALBERT, RoBERTa and ELECTRA on Keras 3.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    presets = commands.add_parser("presets", help="list the built-in presets as a table")
    presets.add_argument(
        "--family", choices=["bert", "albert", "roberta", "electra"],
        help="show only one model family",
    )
    presets.add_argument(
        "--markdown", action="store_true", help="print a Markdown table (docs/presets.md uses it)"
    )
    presets.set_defaults(run=_presets)
    _add_pretrain(commands)
    _add_finetune(commands)
    _add_export(commands)
    _add_convert(commands)
    _add_evaluate(commands)
    _add_predict(commands)
    _add_embed(commands)
    return parser


def main(argv=None):
    # Before TensorFlow is imported, which reads both once: its C++ log lines
    # stay out of the output, and its oneDNN kernels are on.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    prefer_onednn()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # TEXT arguments after a flag (`embed PRESET --output v.npy TEXT`) are still texts
        if getattr(args, "texts", None) is None or any(e.startswith("-") for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.texts = [*args.texts, *extra]
    if getattr(args, "jit_compile", None) is not None:
        args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    import_quietly("tensorflow")
    try:
        return args.run(args)
    except (ValueError, TypeError, NotImplementedError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError) as e:
        parser.exit(2, f"kerasbert {args.command}: error: {e}\n")
    except (FloatingPointError, MemoryError) as e:  # a NaN loss or out of memory (kerasbert.tasks.training_faults)
        parser.exit(3, f"kerasbert {args.command}: training stopped: {e}\n")


if __name__ == "__main__":
    sys.exit(main())
