"""`kerasbert evaluate`: a fine-tuned task's scores on a labelled file."""

import json

from kerasbert.cli.common import (
    FINETUNE_TASKS,
    add_answer_flags,
    add_table_flags,
    check_file,
    check_output,
    command_parser,
    load_task,
    only_for,
    positive_int,
    run_settings,
    step,
    table_options,
)


def run(args):
    from kerasbert.readers import read_conll, read_squad
    from kerasbert.runs.finetuning import Validator
    from kerasbert.utils.io import write_json

    check_output(args.output)
    check_file("--file", args.file)
    task = load_task(args.preset)
    kind = type(task).__name__
    if kind not in FINETUNE_TASKS:
        raise TypeError(
            f"{args.preset} holds a {kind}; kerasbert evaluate scores TextClassifier, TokenClassifier and "
            "QuestionAnswerer presets."
        )
    only_for(kind, "TextClassifier", args, ("text_columns", "label_column", "no_header", "labels"))
    only_for(kind, "QuestionAnswerer", args, ("null_score_threshold", "max_answer_length"))
    run = run_settings(args.preset, task)
    settings = {"task": FINETUNE_TASKS[kind], "batch_size": args.batch_size, "regression": False}
    step(f"reading {args.file} ...")
    if kind == "TextClassifier":
        data = _read_classification_file(args, task, run)
        settings["regression"] = task.num_classes == 1
    elif kind == "TokenClassifier":
        data = read_conll(args.file, label_names=task.labels)  # a tag the task does not know: file and line
    else:
        data = read_squad(args.file)
    if len(data) == 0:
        raise ValueError(f"--file {args.file!r} holds no examples.")
    step(f"scoring {len(data)} example(s) with the {kind} ...")
    if kind == "QuestionAnswerer":
        # The task's decoding settings (those of its run), under the flags.
        if (args.null_score_threshold is None and task.null_score_threshold is None
                and any(e.is_impossible for e in data)):
            step("the file has unanswerable questions but the task always answers with a span (it has no null "
                  "score threshold); --null-score-threshold 0 scores it as SQuAD v2.0")
        scores = task.evaluate_squad(data, batch_size=args.batch_size, max_answer_length=args.max_answer_length,
                                     null_score_threshold=args.null_score_threshold)
    else:
        scores = Validator(settings, data)(task)
    print(json.dumps(scores, indent=2))
    if args.output is not None:
        write_json(args.output, scores)
        step(f"wrote {args.output}")
    return 0


def _read_classification_file(args, task, run):
    """The GLUE-style TSV of `evaluate`, read as `kerasbert finetune` reads
    its validation file: flags first, then the run's settings, then GLUE's
    column names; class names from --labels, the run, the task or the file."""
    from kerasbert.readers import read_glue_tsv
    from kerasbert.runs.finetuning import glue_columns

    header = not args.no_header if args.no_header is not None else run.get("header", True)
    options = table_options(args, header)
    text_columns = options.get("text_columns", run.get("text_columns"))
    label_column = options.get("label_column", run.get("label_column"))
    text_columns, label_column = glue_columns(args.file, text_columns, label_column, header)
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


def add_parser(commands):
    parser = command_parser(
        commands,
        "evaluate",
        help="score a task preset on a labelled GLUE TSV, CoNLL-2003 or SQuAD file",
        description="Scores a task preset on a labelled file in its task's format and prints the metrics "
        "`kerasbert finetune` reports for validation, as a JSON object: TextClassifier, a GLUE-style TSV "
        "(accuracy, matthews_correlation, loss, and f1 for two classes; pearson, spearman and "
        "mean_squared_error for a regressor); TokenClassifier, a CoNLL-2003 file (entity-level f1, "
        "precision, recall); QuestionAnswerer, a SQuAD v1.1/v2.0 JSON file (exact_match and f1, and "
        "HasAns_/NoAns_ scores for v2.0). For OUTPUT/best or OUTPUT/final of `kerasbert finetune`, "
        "the flags not given default to the run's settings in OUTPUT/run.json (columns, header, "
        "labels, null-score threshold, maximum answer length).",
        examples=(
            "kerasbert evaluate runs/sst2/best --file glue/SST-2/dev.tsv",
            "kerasbert evaluate runs/cola/best --file dev.tsv --no-header --text-columns 3 --label-column 1",
            "kerasbert evaluate runs/squad/best --file dev-v2.0.json --output scores.json",
        ),
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("--file", required=True, metavar="PATH",
        help="the labelled file: GLUE-style TSV (TextClassifier), CoNLL-2003 (TokenClassifier) or SQuAD "
        "JSON (QuestionAnswerer)")
    add_table_flags(add, run_defaults=True)
    add("--labels", metavar="A,B,...",
        help="classification: the class names as written in the file, in class-id order (default: the "
        "run's, the task's, or the file's sorted)")
    add_answer_flags(add)
    add("--batch-size", type=positive_int, default=32, metavar="N", help="examples per prediction batch (default 32)")
    add("--output", metavar="JSON", help="also write the metrics to this JSON file")
    parser.set_defaults(run=run)
