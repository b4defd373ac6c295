"""`kerasbert convert`: kerasbert presets <-> Hugging Face checkpoints, and
KerasHub presets in and out."""

import os
import warnings

from kerasbert.cli.common import command_parser, load_task, step


def run(args):
    from kerasbert.presets import huggingface_checkpoint_directory, is_keras_hub_directory, preset_directory
    from kerasbert.utils.io import replacing_directory

    source, output = args.source, args.output
    if os.path.lexists(output) and not args.overwrite:  # before any reading
        raise FileExistsError(f"{output} already exists; pass --overwrite to replace it.")
    directory = preset_directory(source)  # fetches and caches a built-in preset, hf:// or KerasHub's first
    from_huggingface = huggingface_checkpoint_directory(source) is not None
    to = args.to or ("kerasbert" if from_huggingface else "huggingface")
    from_keras_hub = source.startswith("kaggle://") or (os.path.isdir(source) and is_keras_hub_directory(source))
    # A KerasHub preset is read as the Hugging Face checkpoint it converts to.
    model, description = _read_model(directory if from_keras_hub else source, directory, from_huggingface)
    step(f"writing {description} as {_KINDS[to]} ...")
    with replacing_directory(output, args.overwrite, hint="pass --overwrite") as staging, \
            warnings.catch_warnings(record=True) as caught:
        if to == "kerasbert":
            _write_kerasbert(model, source, directory, staging)
        elif to == "keras-hub":
            _write_keras_hub(model, source, directory, staging, args.approximate_gelu)
        else:
            _write_huggingface(model, source, directory, staging)
        written = sorted(os.listdir(staging))
    for warning in caught:
        if issubclass(warning.category, UserWarning):  # what a format cannot hold, said of OUTPUT
            step(f"note: {str(warning.message).replace(staging, output)}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    print(f"Converted {source} to {_KINDS[to]}: {output} ({', '.join(written)})")
    return 0


_KINDS = {"kerasbert": "a kerasbert preset", "huggingface": "a Hugging Face checkpoint",
          "keras-hub": "a KerasHub preset"}


def _read_model(source, directory, from_huggingface):
    """(the task or encoder `source` holds, a description of it)."""
    import kerasbert
    from kerasbert.tasks.fine_tuning import TASK_FILE, huggingface_head_config

    if os.path.isfile(os.path.join(directory, TASK_FILE)):
        task = load_task(source, need_text=False)
        return task, f"the {type(task).__name__} task"
    if from_huggingface:
        for cls in (kerasbert.TextClassifier, kerasbert.TokenClassifier, kerasbert.QuestionAnswerer):
            config = huggingface_head_config(cls, source)
            if config is not None:
                step(f"reading weights of {source} ({config['architectures'][0]} -> {cls.__name__}) ...")
                return cls.from_preset(source), f"the {cls.__name__} task"
    step(f"reading weights of {source} ...")
    return kerasbert.from_preset(source), "the encoder"


def _tokenizer_files(directory, staging):
    """Copies the tokenizer files (Hugging Face names, which kerasbert reads
    too) of `directory`; the names copied."""
    from kerasbert.presets import TOKENIZER_FILES, copy_tokenizer_files

    copy_tokenizer_files(directory, staging)
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
        step(f"note: {source} has no tokenizer files; the preset holds the encoder alone")


def _write_huggingface(model, source, directory, staging):
    import kerasbert
    from kerasbert.convert.configs import MODEL_TYPES
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
            step("note: a Hugging Face checkpoint has no place for a TextEmbedder's pooling; its encoder is written")
            model = model.encoder
    kerasbert.convert.to_huggingface(model, staging, model_type=family if family in MODEL_TYPES else None)
    if tokenizer is not None:
        tokenizer.save_to_preset(staging)
    else:
        step(f"note: {source} has no tokenizer files; the checkpoint holds the weights alone")


def _write_keras_hub(model, source, directory, staging, approximate_gelu):
    import kerasbert
    from kerasbert.convert.keras_hub import BACKBONE_OF
    from kerasbert.presets import preset_family

    tokenizer = None
    if isinstance(model, kerasbert.Encoder):
        family = preset_family(source)
        try:
            tokenizer = kerasbert.Tokenizer.from_preset(directory)
        except FileNotFoundError:
            step(f"note: {source} has no tokenizer files; the preset holds the backbone alone")
    else:
        family = getattr(model, "family", None)
        if isinstance(model, kerasbert.TextEmbedder):
            step("note: KerasHub's backbone has no place for a TextEmbedder's pooling; its encoder is written")
            tokenizer = model.preprocessor.tokenizer if model.preprocessor is not None else None
            model = model.encoder
    kerasbert.convert.to_keras_hub(model, staging, model_type=family if family in BACKBONE_OF else None,
                                   tokenizer=tokenizer, approximate_gelu=approximate_gelu)


def add_parser(commands):
    parser = command_parser(
        commands,
        "convert",
        help="convert between Hugging Face checkpoints, KerasHub presets and kerasbert presets",
        description="Converts a Hugging Face checkpoint or a KerasHub preset (a directory or kaggle://) into a "
        "kerasbert preset directory, or a kerasbert preset (a built-in name, an encoder preset or a task "
        "preset) into a Hugging Face checkpoint (config.json + model.safetensors) that transformers loads or, "
        "with --to keras-hub, a KerasHub preset that keras_hub's from_preset loads (BERT, ALBERT, RoBERTa, "
        "XLM-RoBERTa, ELECTRA, DistilBERT, DeBERTa-v3; a TextClassifier as the family's text classifier); the "
        "tokenizer files go along. A task "
        "(a task preset's task.json, or a checkpoint whose architecture is ...ForSequenceClassification, "
        "...ForTokenClassification or ...ForQuestionAnswering) is converted with its head; other "
        "checkpoints give the encoder alone. OUTPUT is written in a directory beside it and moved into "
        "place when complete.",
        examples=(
            "kerasbert convert /path/to/bert-base-uncased presets/bert_base      # Hugging Face -> kerasbert",
            "kerasbert convert runs/sst2/best hf/sst2                            # task preset -> transformers",
            "kerasbert convert all_minilm_l6_v2 minilm --to kerasbert            # a built-in, as a directory",
            "kerasbert convert /path/to/keras_hub_preset presets/from_keras_hub  # KerasHub -> kerasbert",
            "kerasbert convert runs/sst2/best kh/sst2 --to keras-hub             # task preset -> KerasHub",
        ),
    )
    add = parser.add_argument
    add("source", metavar="SOURCE",
        help="a Hugging Face checkpoint directory or hf://org/name, a KerasHub preset directory or "
        "kaggle://org/model/keras/variant, a built-in preset name, or a kerasbert preset directory (an "
        "encoder's, or a task's with task.json)")
    add("output", metavar="OUTPUT", help="the directory to create")
    add("--to", choices=("kerasbert", "huggingface", "keras-hub"),
        help="the format to write (default: kerasbert from a Hugging Face checkpoint or a KerasHub preset, "
        "huggingface from a built-in name or a kerasbert preset)")
    add("--approximate-gelu", action="store_true",
        help="with --to keras-hub: write an encoder with exact GELU into a family whose KerasHub backbone "
        "applies its tanh approximation (BERT, ALBERT, ELECTRA), as KerasHub's own presets of those models do; "
        "outputs then differ slightly")
    add("--overwrite", action="store_true",
        help="replace OUTPUT if it exists (only once the new files are complete)")
    parser.set_defaults(run=run)
