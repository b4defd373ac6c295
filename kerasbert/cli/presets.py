"""`kerasbert presets`: the built-in presets as a table."""

from kerasbert.cli.common import command_parser


def run(args):
    from kerasbert.presets import get_preset, list_presets

    families = sorted({get_preset(name)["family"] for name in list_presets()})
    if args.family is not None and args.family not in families:
        raise ValueError(f"--family {args.family!r} is not a family of the built-in presets; they are {families}.")
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


def add_parser(commands):
    parser = command_parser(commands, "presets", help="list the built-in presets as a table")
    parser.add_argument("--family", help="show only one model family (bert, distilbert, xlm-roberta, ...)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (docs/presets.md uses it)")
    parser.set_defaults(run=run, tensorflow=False)  # a table of data files: nothing to import
