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
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "jit_compile", None) is not None:
        args.jit_compile = {"auto": "auto", "true": True, "false": False}[args.jit_compile]
    try:
        return args.run(args)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as e:
        parser.exit(2, f"kerasbert {args.command}: error: {e}\n")


if __name__ == "__main__":
    sys.exit(main())
