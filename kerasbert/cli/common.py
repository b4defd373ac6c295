"""What the commands share: argument types, reading inputs, writing
results, loading a task preset."""

import argparse
import json
import math
import os
import shutil
import sys
import textwrap


def finite_number(text):
    """A finite number (an argparse type): NaN and infinities are refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
    return value


def positive_int(text):
    """An integer >= 1 (an argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text!r}")
    return value


def column_index(flag, value):
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{flag} {value!r}: with --no-header, columns are integer indices such as 0 or 3.") from None


def table_options(args, header):
    """The given --text-columns, --label-column and --labels as `finetune`'s
    keyword arguments: column names, or indices without a header."""
    options = {}
    if args.text_columns is not None:
        columns = [c.strip() for c in args.text_columns.split(",")]
        options["text_columns"] = columns if header else [column_index("--text-columns", c) for c in columns]
    if args.label_column is not None:
        options["label_column"] = args.label_column if header else column_index("--label-column", args.label_column)
    if args.labels is not None:
        options["labels"] = [label.strip() for label in args.labels.split(",")]
    return options


def add_answer_flags(add):
    """How a question-answering task picks its answers (evaluate, predict,
    export), defaulting to the task's own settings."""
    add("--max-answer-length", type=positive_int, metavar="N",
        help="question answering: the longest answer in tokens (default: the task's, 30 unless set)")
    add("--null-score-threshold", type=finite_number, metavar="X",
        help="question answering, SQuAD v2.0: answer \"\" when the no-answer score beats the best span by "
        "more than X (default: the task's; 0 after `kerasbert finetune` on a SQuAD v2.0 file)")


def add_table_flags(add, run_defaults=False):
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


def command_parser(commands, name, help, description=None, examples=()):
    """The parser of command `name` (under `commands`, argparse
    subparsers): its description wrapped to the terminal (at most 100
    columns), then its flags, then its example command lines, kept as
    written."""
    width = min(100, shutil.get_terminal_size().columns - 2)  # argparse's own width for the flags
    return commands.add_parser(
        name, help=help, description=description and textwrap.fill(description, width=width),
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples) if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def step(message):
    """A progress line on stderr (stdout is for results)."""
    print(f"kerasbert: {message}", file=sys.stderr, flush=True)


def check_file(flag, path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{flag} {path!r} is not a file.")
    return path


def check_output(path, flag="--output"):
    """A file to write: not a directory (before any work is done)."""
    if path is not None and os.path.isdir(path):
        raise IsADirectoryError(f"{flag} {path!r} is a directory; give the path of a file to write.")
    return path


def load_task(preset, need_text=True):
    """The task a task preset directory holds (with a preprocessor when
    `need_text`)."""
    from kerasbert.tasks.task import load_task

    step(f"loading {preset} ...")
    task = load_task(preset)
    if need_text and getattr(task, "preprocessor", None) is None:
        raise ValueError(f"{preset} holds a {type(task).__name__} without a tokenizer, so it cannot read text.")
    return task


# The `kerasbert finetune` task that writes each task class.
FINETUNE_TASKS = {"TextClassifier": "classification", "TokenClassifier": "ner", "QuestionAnswerer": "squad"}


def run_settings(preset, task):
    """The settings of the `kerasbert finetune` run that wrote `preset` (its
    OUTPUT/best or OUTPUT/final): OUTPUT/run.json, or {} for other presets."""
    from kerasbert.runs.options import BEST, FINAL
    from kerasbert.runs.records import RUN_FILE
    from kerasbert.utils.io import read_json

    directory = os.path.abspath(preset)
    path = os.path.join(os.path.dirname(directory), RUN_FILE)
    if os.path.basename(directory) not in (BEST, FINAL) or not os.path.isfile(path):
        return {}
    settings = read_json(path, "kerasbert finetune run.json")
    if settings.get("task") != FINETUNE_TASKS.get(type(task).__name__):
        return {}
    step(f"flags not given default to the settings of the run in {path}")
    return settings


def read_lines(flag, path):
    """The non-blank lines of a UTF-8 text file, with their line numbers."""
    check_file(flag, path)
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{flag} {path!r} is not UTF-8 text: {e}.") from None
    return [(number, line) for number, line in enumerate(lines, 1) if line.strip()]


def read_texts(args, pairs=False):
    """The TEXT arguments or the lines of --file: a list of strings, or with
    `pairs` a tuple (first, second) of two lists."""
    if args.texts and args.file is not None:
        raise ValueError(f"give texts as arguments or --file {args.file!r}, not both.")
    if args.file is not None:
        rows = read_lines("--file", args.file)
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


def write_json_lines(records, output):
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    if output is None:
        for line in lines:
            print(line)
        return
    from kerasbert.utils.io import atomic_file

    with atomic_file(output) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    step(f"wrote {len(lines)} line(s) to {output}")


def only_for(kind, owner, args, names):
    for name in names:
        if kind != owner and getattr(args, name) is not None:
            raise ValueError(f"--{name.replace('_', '-')} is for {owner} presets; {args.preset} holds a {kind}.")
