"""The `kerasbert` command."""

import argparse
import sys


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
    from kerasbert.pretraining import pretrain

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "train_files")}
    result = pretrain(train_files=args.train_files, **kwargs)
    last = {k: v[-1] for k, v in result.history.items() if v}
    summary = ", ".join(f"{k} {v:.4g}" for k, v in sorted(last.items()) if k != "step")
    print(f"Pretrained encoder and tokenizer: {result.preset_dir}" + (f" ({summary})" if summary else ""))
    return 0


def _add_pretrain(commands):
    from kerasbert.pretraining import OBJECTIVES, OPTIMIZERS, PRECISIONS

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
    add("--objective", required=True, choices=OBJECTIVES)
    add("--train-files", required=True, metavar="GLOB", action="append",
        help="plain-text training files (repeatable)")
    add("--output", required=True, metavar="DIR")
    add("--from-scratch", action="store_true", help="random initial weights")
    add("--vocabulary-size", type=int, metavar="N",
        help="train a new vocabulary of N tokens on the training files (default: the preset's)")
    add("--sequence-length", type=int, default=128, metavar="N")
    add("--batch-size", type=int, default=32, metavar="N")
    add("--steps", type=int, default=1000, metavar="N", help="training steps in all")
    for flag in ("num-layers", "hidden-dim", "num-heads", "intermediate-dim"):
        add(f"--{flag}", type=int, metavar="N", help="change the preset's architecture (needs --from-scratch)")
    add("--optimizer", choices=OPTIMIZERS, default="adamw")
    add("--learning-rate", type=float, default=1e-4, metavar="LR", help="peak learning rate")
    add("--warmup-steps", type=int, metavar="N", help="linear warmup (default: 10%% of the updates)")
    add("--weight-decay", type=float, default=0.01)
    add("--clipnorm", type=float, default=1.0, help="global gradient-norm clipping")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: Keras's choice)")
    add("--whole-word", action="store_true", help="whole-word masking")
    add("--generator-fraction", type=float, metavar="F",
        help="ELECTRA generator size relative to the discriminator (default: the paper's)")
    add("--log-every", type=int, metavar="N", help="steps per history entry")
    add("--checkpoint-every", type=int, metavar="N", help="steps between checkpoints")
    add("--keep-checkpoints", type=int, default=2, metavar="N")
    add("--seed", type=int, default=0)
    add("--resume", action="store_true", help="continue the run in --output from its newest checkpoint")
    add("--verbose", type=int, default=1, choices=(0, 1, 2))
    parser.set_defaults(run=_pretrain)


def _finetune(args):
    from kerasbert.finetuning import finetune

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "no_header")}
    kwargs["header"] = not args.no_header
    if args.text_columns is not None:
        columns = [c.strip() for c in args.text_columns.split(",")]
        kwargs["text_columns"] = [_column_index("--text-columns", c) for c in columns] if args.no_header else columns
    if args.label_column is not None and args.no_header:
        kwargs["label_column"] = _column_index("--label-column", args.label_column)
    if args.labels is not None:
        kwargs["labels"] = [label.strip() for label in args.labels.split(",")]
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


def _add_finetune(commands):
    from kerasbert.finetuning import TASKS
    from kerasbert.pretraining import PRECISIONS

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
    add("--task", required=True, choices=TASKS)
    add("--preset", required=True, metavar="NAME",
        help="a built-in preset name, a preset directory (also a task preset such as a previous OUTPUT/best), "
        "a Hugging Face checkpoint directory or hf://org/name")
    add("--train-file", required=True, metavar="PATH")
    add("--validation-file", metavar="PATH", help="scored every epoch to keep the best one")
    add("--output", required=True, metavar="DIR", help="a new (or empty) directory for the run")
    add("--text-columns", metavar="A[,B]",
        help="classification: the text column, or two for pairs (names; indices with --no-header); "
        "default: GLUE's column names")
    add("--label-column", metavar="NAME", help="classification: the label column (default: GLUE's names)")
    add("--regression", action="store_true", help="classification: fit scores (STS-B) instead of classes")
    add("--no-header", action="store_true", help="classification: the TSV files have no header line")
    add("--labels", metavar="A,B,...",
        help="classification: the class names in id order; ner: every tag (default: the training file's)")
    add("--crf", action="store_true", help="ner: a CRF output layer")
    add("--sequence-length", type=int, metavar="N",
        help="tokens per example (window for squad); default the encoder's, at most 512 (384 for squad)")
    add("--doc-stride", type=int, metavar="N", help="squad: tokens shared by consecutive windows")
    add("--max-question-length", type=int, metavar="N", help="squad: tokens kept of each question")
    add("--max-answer-length", type=int, default=30, metavar="N", help="squad: the longest answer in tokens")
    add("--batch-size", type=int, default=32, metavar="N")
    add("--epochs", type=int, default=3, metavar="N")
    add("--learning-rate", type=float, metavar="LR", help="peak learning rate (default 5e-5)")
    add("--head-learning-rate-multiplier", type=float, metavar="X",
        help="the new head's learning rate relative to the encoder's (default 10)")
    add("--layer-decay", type=float, metavar="X", help="layer-wise learning-rate decay in (0, 1] (default 1)")
    add("--weight-decay", type=float, metavar="X", help="AdamW weight decay (default 0.01)")
    add("--warmup-fraction", type=float, metavar="X", help="share of the updates spent warming up (default 0.1)")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: Keras's choice)")
    add("--metric", metavar="NAME",
        help="the validation metric that picks the best epoch (default: accuracy, pearson with "
        "--regression, f1 for ner and squad)")
    add("--patience", type=int, metavar="N", help="stop after N epochs without a better --metric")
    add("--null-score-threshold", type=float, metavar="X",
        help="squad v2.0: answer nothing when the no-answer score beats the best span by more (default 0)")
    add("--from-scratch", action="store_true", help="random initial weights (a baseline)")
    add("--seed", type=int, default=0)
    add("--verbose", type=int, default=1, choices=(0, 1, 2))
    parser.set_defaults(run=_finetune)


def _export(args):
    from kerasbert.export import load_task

    options = {"pairs": True} if args.pairs else {}
    path = load_task(args.preset).export(args.output, overwrite=args.overwrite, **options)
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
    add("--overwrite", action="store_true", help="replace OUTPUT if it exists (only once the new export is complete)")
    parser.set_defaults(run=_export)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kerasbert",
        description="BERT, ALBERT, RoBERTa and ELECTRA on Keras 3.",
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
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "jit_compile", None) is not None:
        args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    try:
        return args.run(args)
    except (ValueError, TypeError, NotImplementedError, FileNotFoundError, FileExistsError) as e:
        parser.exit(2, f"kerasbert {args.command}: error: {e}\n")


if __name__ == "__main__":
    sys.exit(main())
