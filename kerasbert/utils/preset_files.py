"""The kerasbert preset directory: `preset.json` (the encoder's
architecture, metadata, and the size and SHA-256 digest of each file it
holds) beside `encoder.safetensors` and any tokenizer files. Loading
refuses a file that does not match its record."""

import os

from kerasbert.utils.integrity import check_recorded, digests
from kerasbert.utils.io import read_json, updating_directory, write_json, write_safetensors

PRESET_FILE = "preset.json"
WEIGHTS_FILE = "encoder.safetensors"
# Files a tokenizer may need; copied along when a checkpoint is converted.
TOKENIZER_FILES = (
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "spm.model",
    "vocab.json",
    "merges.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def is_huggingface_directory(directory):
    """Whether `directory` holds a Hugging Face checkpoint (its config.json)."""
    return os.path.isfile(os.path.join(directory, "config.json"))


def write_preset(encoder, preset_dir, spec=None, metadata=None):
    """Writes `encoder` (a `kerasbert.Encoder`) as a preset directory,
    replacing the directory as a whole (`updating_directory`) and keeping
    the other files in it. `spec`: a preset description to keep (family,
    tokenizer settings), whose `encoder` entry is replaced by the encoder's
    config; `metadata`: extra JSON-serialisable entries. Returns
    `preset_dir`."""
    with updating_directory(preset_dir) as staged:
        write_encoder_files(encoder, staged, os.path.basename(os.path.normpath(preset_dir)), spec, metadata)
    return preset_dir


def write_encoder_files(encoder, directory, name, spec=None, metadata=None):
    """Writes `encoder.safetensors`, then `preset.json` with its records,
    into `directory` (`save_to_preset` without the directory swap)."""
    # Imported here: it imports Keras, which `kerasbert presets` runs without.
    from kerasbert.layers.quantization import quantized_modes

    config = {k: v for k, v in encoder.get_config().items() if k not in ("name", "trainable", "dtype")}
    spec = dict(spec or {})
    spec.pop("weights", None)
    spec["name"] = spec.get("name", name)
    spec["encoder"] = config
    modes = quantized_modes(encoder)
    if modes:
        spec["quantization"] = modes  # {layer path: mode}: quantized again on loading, then assigned
    tensors = encoder.weight_tensors()  # LoRA adapters folded in
    spec["metadata"] = {**spec.get("metadata", {}), "parameter_count": int(sum(t.size for t in tensors.values())),
                        **(metadata or {})}
    write_safetensors(os.path.join(directory, WEIGHTS_FILE), tensors, {"format": "kerasbert"})
    spec["files"] = digests(directory, (WEIGHTS_FILE, *TOKENIZER_FILES))
    write_json(os.path.join(directory, PRESET_FILE), spec, seal=True)


def check_preset_files(directory, names):
    """Checks those of `names` in `directory` against the sizes and digests
    `preset.json` records, when `directory` is a kerasbert preset directory."""
    path = os.path.join(directory, PRESET_FILE)
    if os.path.isfile(path):
        spec = read_json(path, "kerasbert preset file")
        for name in names:
            check_recorded(directory, name, spec, path)


def record_preset_files(directory):
    """Rewrites `preset.json`'s records of the weights and tokenizer files
    in `directory` (after a tokenizer is saved into a preset directory)."""
    path = os.path.join(directory, PRESET_FILE)
    if os.path.isfile(path):
        spec = read_json(path, "kerasbert preset file")
        spec["files"] = digests(directory, (WEIGHTS_FILE, *TOKENIZER_FILES))
        write_json(path, spec, seal=True)
