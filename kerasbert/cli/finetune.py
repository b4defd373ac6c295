"""`kerasbert finetune`: fine-tune a preset on a GLUE, CoNLL or SQuAD file."""


from kerasbert.cli.common import add_table_flags, command_parser, finite_number, positive_int, table_options


def run(args):
    from kerasbert.runs.finetuning import finetune

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "no_header")}
    kwargs["header"] = not args.no_header
    kwargs.update(table_options(args, header=kwargs["header"]))
    if args.lora_targets is not None:
        kwargs["lora_targets"] = [name.strip() for name in args.lora_targets.split(",")]
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


def add_parser(commands):
    from kerasbert.runs.options import PRECISIONS, TASKS

    parser = command_parser(
        commands,
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
    add_table_flags(add)
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
    add("--learning-rate", type=finite_number, metavar="LR", help="peak learning rate (default 5e-5)")
    add("--head-learning-rate-multiplier", type=finite_number, metavar="X",
        help="the new head's learning rate relative to the encoder's (default 100)")
    add("--layer-decay", type=finite_number, metavar="X", help="layer-wise learning-rate decay in (0, 1] (default 1)")
    add("--weight-decay", type=finite_number, metavar="X", help="AdamW weight decay (default 0.01)")
    add("--warmup-fraction", type=finite_number, metavar="X",
        help="share of the updates spent warming up (default 0.1)")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32", help="a Keras dtype policy (default float32)")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: Keras's choice)")
    add("--metric", metavar="NAME",
        help="the validation metric that picks the best epoch (default: accuracy, pearson with "
        "--regression, f1 for ner and squad)")
    add("--patience", type=int, metavar="N", help="stop after N epochs without a better --metric")
    add("--null-score-threshold", type=finite_number, metavar="X",
        help="squad v2.0: answer nothing when the no-answer score beats the best span by more (default 0)")
    add("--from-scratch", action="store_true", help="random initial weights (a baseline)")
    add("--lora-rank", type=positive_int, metavar="N",
        help="tune rank-N LoRA adapters instead of the whole encoder; the run's presets hold the adapters and "
        "the head and name PRESET as their base")
    add("--lora-alpha", type=finite_number, metavar="X", help="the adapters' scale is X / rank (default: the rank)")
    add("--lora-targets", metavar="A,B,...",
        help="the dense layers adapted in every block, among qkv, attention_output, intermediate, output "
        "(default: all four)")
    add("--seed", type=int, default=0, metavar="N",
        help="the seed of the head's initial weights, shuffling and dropout (default 0)")
    add("--verbose", type=int, default=1, choices=(0, 1, 2),
        help="0 silent, 1 a progress bar and a line per epoch, 2 a line per epoch")
    parser.set_defaults(run=run)
