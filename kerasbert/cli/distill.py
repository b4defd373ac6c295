"""`kerasbert distill`: a smaller student of a task, trained on the teacher's outputs."""

from kerasbert.cli.common import command_parser, finite_number


def run(args):
    from kerasbert.runs.distillation import distill

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run")}
    kwargs["jit_compile"] = {"auto": "auto", "true": True, "false": False}[kwargs["jit_compile"]]
    student = distill(**kwargs)
    print(f"Distilled a {student.encoder.num_layers}-layer {type(student).__name__}: {args.output}")
    return 0


def add_parser(commands):
    parser = command_parser(
        commands,
        "distill",
        help="distill a task into a student with fewer layers (DistilBERT)",
        description="Trains a student with fewer layers, started from every other layer of the teacher, "
        "on the teacher's outputs: a classifier's or tagger's logits on the lines of the files (task "
        "distillation), or a masked LM's on masked-LM batches of them (pretraining distillation, with "
        "DistilBERT's losses). Writes the student as a task preset in OUTPUT, with OUTPUT/history.json.",
    )
    add = parser.add_argument
    add("--teacher", required=True, metavar="DIR",
        help="a task preset directory (task.save_to_preset, or kerasbert finetune's best/ or final/)")
    add("--train-files", required=True, metavar="GLOB", action="append",
        help="plain-text files: one example per line (a masked LM: a blank line between documents)")
    add("--output", required=True, metavar="DIR", help="a new (or empty) directory for the student")
    add("--num-layers", required=True, type=int, metavar="N", help="the student's layers")
    add("--epochs", type=int, default=3, metavar="N", help="passes over the lines (task distillation; default 3)")
    add("--steps", type=int, default=1000, metavar="N", help="training steps (a masked LM; default 1000)")
    add("--batch-size", type=int, default=32, metavar="N", help="examples per step (default 32)")
    add("--learning-rate", type=finite_number, metavar="LR",
        help="AdamW's rate (default 5e-5; a masked LM: 1e-4)")
    add("--temperature", type=finite_number, default=2.0, metavar="T", help="of the soft targets (default 2)")
    add("--sequence-length", type=int, default=128, metavar="N", help="tokens per masked-LM row (default 128)")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: as kerasbert pretrain)")
    add("--seed", type=int, default=0, metavar="N", help="the seed of the order, masks and dropout (default 0)")
    add("--verbose", type=int, default=1, choices=(0, 1, 2), help="Keras fit's verbosity")
    parser.set_defaults(run=run)
