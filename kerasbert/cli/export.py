"""`kerasbert export`: a task preset as a SavedModel that takes raw strings, as ONNX (token ids in, the
tokenizer's files beside it) or as LiteRT (a WordPiece text classifier, raw strings in)."""

import os

from kerasbert.cli.common import add_answer_flags, command_parser, only_for, positive_int


def run(args):
    from kerasbert.tasks.task import load_task

    options = {"pairs": True} if args.pairs else {}
    for name in ("top_k", "n_best_size", "max_answer_length", "null_score_threshold"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    if args.format != "saved_model":
        for flag, given in (("--quantize", args.quantize is not None), ("--pairs", args.pairs)):
            if given:
                raise ValueError(f"{flag} is for --format saved_model; --format {args.format} "
                                 f"{'holds float weights' if flag == '--quantize' else 'serves single texts'}.")
    if os.path.lexists(args.output) and not args.overwrite:  # before any loading
        raise FileExistsError(f"{args.output} already exists; pass --overwrite to replace it.")
    task = load_task(args.preset)
    kind = type(task).__name__
    if args.pairs and kind != "TextClassifier":
        raise ValueError(f"--pairs is for TextClassifier presets; {args.preset} holds a {kind}.")
    only_for(kind, "MaskedLM", args, ("top_k",))
    only_for(kind, "QuestionAnswerer", args, ("n_best_size", "max_answer_length", "null_score_threshold"))
    if args.quantize is not None:
        task.quantize(args.quantize)
    path = task.export(args.output, overwrite=args.overwrite, format=args.format, **options)
    written = {"saved_model": "SavedModel written: {} (signature serving_default; docs/export.md)",
               "onnx": "ONNX written: {}/model.onnx, token ids in, with the tokenizer's files (docs/export.md)",
               "litert": "LiteRT written: {}/model.tflite (signature serving_default; docs/export.md)"}
    print(written[args.format].format(path))
    return 0


def add_parser(commands):
    parser = command_parser(
        commands,
        "export",
        help="write a fine-tuned task as a SavedModel that takes raw text (or as ONNX or LiteRT)",
        description="Exports a task preset directory (the best/ or final/ of `kerasbert finetune`, "
        "or a task's save_to_preset) as a TensorFlow SavedModel whose serving_default signature "
        "takes raw strings, the tokenizer inside; it runs with TensorFlow and tensorflow-text alone. "
        "--format onnx writes the model on token ids for onnxruntime with the tokenizer's files for "
        "transformers; --format litert a WordPiece text classifier taking raw strings (docs/export.md).",
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("output", metavar="OUTPUT", help="the directory to create")
    add("--format", choices=("saved_model", "onnx", "litert"), default="saved_model",
        help="saved_model (default): raw strings in; onnx: model.onnx on token ids beside the tokenizer's files; "
        "litert: model.tflite for a WordPiece text classifier, raw strings in")
    add("--pairs", action="store_true",
        help="text classifiers: take sentence pairs (inputs text and text_pair)")
    add("--top-k", type=positive_int, metavar="K", help="masked LM: the candidates returned per mask (default 5)")
    add("--n-best-size", type=positive_int, metavar="N",
        help="question answering: the best starts and ends of each window paired into spans (default: the "
        "task's, 20 unless set)")
    add_answer_flags(add)
    add("--quantize", choices=("int8", "int4"),
        help="serve quantized weights: the dense layers and embedding tables in int8 or int4 (Keras's "
        "quantization; docs/export.md)")
    add("--overwrite", action="store_true", help="replace OUTPUT if it exists (only once the new export is complete)")
    parser.set_defaults(run=run)
