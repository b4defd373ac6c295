"""Adapter presets: a LoRA-tuned task written as its adapters and head alone,
with the name and a digest of the base preset they were trained on.

`task.save_to_preset(dir, adapters_only=True)` writes `task.json` (the
task's arguments, the adapters' rank, alpha and targets, the base), the
head's weights (`task.safetensors`) and the adapters' (`adapters.safetensors`);
`from_preset(dir)` loads the base's encoder and tokenizer, checks that its
weights are those the adapters were trained on, and puts the adapters back.
The adapters are keyed by target and block (`qkv/0/lora_kernel_a`), not by
variable path, so that they load onto any encoder of the base's shape.
"""

import hashlib
import os

import numpy as np

from kerasbert.layers.lora import ADAPTER_NAMES, adapter_settings, base_tensors, target_layers
from kerasbert.layers.quantization import stored_array
from kerasbert.utils.io import read_safetensors

ADAPTERS_FILE = "adapters.safetensors"


def base_reference(preset):
    """How an adapter preset names its base: a local directory by its
    absolute path, a built-in name or `hf://` reference as given."""
    if isinstance(preset, (str, os.PathLike)) and os.path.isdir(preset):
        return os.path.abspath(os.fspath(preset))
    return str(preset)


def base_digest(encoder):
    """The SHA-256 of the encoder's weights without its adapters (float32,
    in the encoder's order)."""
    digest = hashlib.sha256()
    for tensor in base_tensors(encoder).values():
        digest.update(np.ascontiguousarray(tensor, np.float32).tobytes())
    return digest.hexdigest()


def _adapter_variables(encoder, targets):
    """{"<target>/<block>/<lora_kernel_a|b>": variable} of the adapters on
    `encoder`'s `targets`."""
    return {f"{target}/{index}/{name}": getattr(layer, name) for target in targets
            for index, layer in enumerate(target_layers(encoder, (target,))) for name in ADAPTER_NAMES}


def adapter_tensors_by_target(encoder):
    """{"<target>/<block>/<lora_kernel_a|b>": float32 array} of the adapters
    on `encoder`."""
    variables = _adapter_variables(encoder, adapter_settings(encoder)["targets"])
    return {key: stored_array(v) for key, v in variables.items()}


def adapter_spec(task, base):
    """task.json's entries of an adapter preset of `task` on `base`."""
    settings = adapter_settings(task.encoder)
    if settings is None:
        raise ValueError("adapters_only=True writes LoRA adapters, and this task has none; call "
                         "task.enable_lora(rank) and train it first, or save the whole task.")
    if base is None:
        raise ValueError("adapters_only=True needs the base preset the adapters were trained on: pass base=... "
                         "(a preset name or directory), or load the task with from_preset, which records it.")
    return {"lora": settings, "base": {"preset": base_reference(base), "sha256": base_digest(task.encoder)}}


def assign_adapters(task, spec, directory, spec_file):
    """Checks the base encoder of `task` against the adapter preset's
    record, enables its adapters and assigns their weights."""
    recorded = spec["base"].get("sha256")
    if recorded != base_digest(task.encoder):
        raise ValueError(
            f"{spec_file}: the adapters were trained on a base whose weights differ from those of "
            f"{spec['base']['preset']!r} now (SHA-256 {recorded} recorded); load them onto the base they were "
            "trained on."
        )
    settings = spec["lora"]
    task.enable_lora(settings["rank"], alpha=settings["alpha"], targets=tuple(settings["targets"]))
    path = os.path.join(directory, ADAPTERS_FILE)
    tensors = read_safetensors(path)
    expected = _adapter_variables(task.encoder, settings["targets"])
    if set(tensors) != set(expected):
        raise ValueError(f"{path} holds adapters {sorted(tensors)[:4]}..., but the base's encoder with "
                         f"{settings} has {sorted(expected)[:4]}...")
    for key, variable in expected.items():
        if tuple(tensors[key].shape) != tuple(variable.shape):
            raise ValueError(f"{path}: {key} has shape {tensors[key].shape}, the base's encoder needs "
                             f"{tuple(variable.shape)}.")
        variable.assign(tensors[key])

