"""`kerasbert pretrain`: pretrain an encoder and its tokenizer on text files."""


from kerasbert.cli.common import command_parser, finite_number


def run(args):
    from kerasbert.runs.pretraining import pretrain

    kwargs = {k: v for k, v in vars(args).items() if k not in ("command", "run", "train_files")}
    result = pretrain(train_files=args.train_files, **kwargs)
    last = {k: v[-1] for k, v in result.history.items() if v}
    summary = ", ".join(f"{k} {v:.4g}" for k, v in sorted(last.items()) if k != "step")
    print(f"Pretrained encoder and tokenizer: {result.preset_dir}" + (f" ({summary})" if summary else ""))
    return 0


def add_parser(commands):
    from kerasbert.runs.options import OBJECTIVES, OPTIMIZERS, PRECISIONS

    parser = command_parser(
        commands,
        "pretrain",
        help="pretrain an encoder on plain-text files (MLM, MLM+NSP, MLM+SOP, ELECTRA, ModernBERT, DeBERTa-v3)",
        description="Pretrains an encoder on plain-text files (one sentence per line, a blank "
        "line between documents) and writes OUTPUT/history.json, TensorBoard logs, checkpoints "
        "and the final encoder with its tokenizer as a kerasbert preset in OUTPUT/preset.",
    )
    add = parser.add_argument
    add("--preset", required=True, metavar="NAME",
        help="the architecture (and weights and vocabulary, without --from-scratch): a built-in "
        "preset name or a preset directory; for electra, the discriminator")
    add("--objective", required=True, choices=OBJECTIVES,
        help="masked LM, with next-sentence or sentence-order prediction, ELECTRA's replaced tokens, "
        "ModernBERT's masked LM (30%% masked) or DeBERTa-v3's replaced tokens (gradient-disentangled "
        "embedding sharing)")
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
    add("--learning-rate", type=finite_number, default=1e-4, metavar="LR", help="peak learning rate (default 1e-4)")
    add("--warmup-steps", type=int, metavar="N", help="linear warmup (default: 10%% of the updates)")
    add("--weight-decay", type=finite_number, default=0.01, metavar="X", help="decoupled weight decay (default 0.01)")
    add("--clipnorm", type=finite_number, default=1.0, metavar="X", help="global gradient-norm clipping (default 1.0)")
    add("--accumulation-steps", type=int, default=1, metavar="N", help="gradient accumulation")
    add("--precision", choices=PRECISIONS, default="float32", help="a Keras dtype policy (default float32)")
    add("--jit-compile", choices=("auto", "true", "false"), default="auto",
        help="XLA / torch.compile for the train step (auto: XLA on tensorflow and jax, eager on torch; "
        "mixed_bfloat16 on TensorFlow's own kernels on a CPU with bfloat16 units)")
    add("--whole-word", action="store_true", help="whole-word masking")
    add("--generator-fraction", type=finite_number, metavar="F",
        help="the generator's width relative to the discriminator's (default: ELECTRA's paper; "
        "deberta-v3: 1, at half the depth)")
    add("--log-every", type=int, metavar="N", help="steps per history entry")
    add("--checkpoint-every", type=int, metavar="N", help="steps between checkpoints")
    add("--keep-checkpoints", type=int, default=2, metavar="N", help="the newest checkpoints kept (default 2)")
    add("--seed", type=int, default=0, metavar="N",
        help="the seed of the initial weights, the examples, the masks and dropout (default 0)")
    add("--resume", action="store_true", help="continue the run in --output from its newest checkpoint")
    add("--distribution", choices=("data", "model"),
        help="train on all devices: data parallelism (jax: keras.distribution.DataParallel, across "
        "processes with KERAS_DISTRIBUTION_*; tensorflow: MirroredStrategy, or MultiWorkerMirroredStrategy "
        "with TF_CONFIG; torch: DistributedDataParallel under torchrun) or model parallelism (jax: "
        "ModelParallel with Encoder.get_layout_map); --batch-size is the global batch")
    add("--mesh", metavar="BxM",
        help="with --distribution model: the (batch, model) device mesh, e.g. 2x4 (default 1xALL)")
    add("--verbose", type=int, default=1, choices=(0, 1, 2),
        help="Keras fit's verbosity: 0 silent, 1 a progress bar, 2 a line per history entry")
    parser.set_defaults(run=run)
