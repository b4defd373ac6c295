"""Training checkpoints that a killed run can resume from exactly.

A checkpoint is a directory `step-00000400/` holding every variable of the
model (weights, and the random-seed states of dropout and sampling layers;
on torch also the global generator that unseeded dropout uses)
and of its optimizer (moments, step counter, loss scale, accumulated
gradients), plus the training history up to that step. It is written under
a temporary name and renamed into place when complete, and
`checkpoint.json` is its last file, so a directory that exists with that file
is whole: a run killed while saving leaves at most a `.tmp-*` directory that
nothing ever loads. `checkpoint.json` records the size and SHA-256 digest of
the state file, and a state file that does not match is refused.
"""

import os
import re
import shutil

import keras
import numpy as np

from kerasbert.utils.integrity import check_recorded, digests
from kerasbert.utils.io import (
    read_json,
    read_safetensors,
    staged_directory,
    write_json,
    write_safetensors,
)

STATE_FILE = "state.safetensors"
INFO_FILE = "checkpoint.json"
_NAME = re.compile(r"^step-(\d{8})$")


def _states(model):
    """(key, variable) for every variable a resumed run needs, in a fixed order."""
    pairs = [(f"model/{i:05d}", v) for i, v in enumerate(model.variables)]
    if model.optimizer is not None:
        pairs += [(f"optimizer/{i:05d}", v) for i, v in enumerate(model.optimizer.variables)]
    return pairs


def _global_random_state():
    """Random state outside Keras variables: on torch, unseeded dropout
    draws from torch's global generator."""
    if keras.backend.backend() != "torch":
        return {}
    import torch

    return {"rng/torch": torch.random.get_rng_state().numpy()}


def set_global_random_state(tensors):
    """Sets the random state `restore_checkpoint` returned. Call it just
    before the first resumed train step: Keras's `fit` draws from torch's
    generator while it sets up."""
    if "rng/torch" in tensors and keras.backend.backend() == "torch":
        import torch

        torch.random.set_rng_state(torch.from_numpy(tensors["rng/torch"]))


def save_checkpoint(directory, model, step, history):
    """Writes `directory/step-XXXXXXXX` for `model` (and its optimizer) at
    `step`, with `history` (a dict of lists). Returns its path."""
    path = os.path.join(directory, f"step-{step:08d}")
    states = _states(model)
    tensors = {key: np.asarray(v.numpy()) for key, v in states}
    tensors.update(_global_random_state())
    with staged_directory(path, first_writer_wins=True) as tmp:
        write_safetensors(os.path.join(tmp, STATE_FILE), tensors)
        write_json(os.path.join(tmp, INFO_FILE), {
            "step": step,
            "history": history,
            "variables": {key: v.path for key, v in states},
            "files": digests(tmp, (STATE_FILE,)),
        }, seal=True)
    return path


def list_checkpoints(directory):
    """The complete checkpoints in `directory`, oldest first, as (step, path)."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        path = os.path.join(directory, name)
        if match and os.path.isfile(os.path.join(path, INFO_FILE)) and os.path.isfile(
            os.path.join(path, STATE_FILE)
        ):
            found.append((int(match.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory):
    """The path of the newest complete checkpoint in `directory`, or None."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def remove_old_checkpoints(directory, keep):
    """Deletes all but the newest `keep` complete checkpoints."""
    for _, path in list_checkpoints(directory)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def restore_checkpoint(path, model):
    """Loads a checkpoint into `model` (whose optimizer must be compiled in);
    returns `(step, history, random_state)`, the last for
    `set_global_random_state`."""
    info = read_json(os.path.join(path, INFO_FILE), "checkpoint file")
    try:
        check_recorded(path, STATE_FILE, info, os.path.join(path, INFO_FILE))
        tensors = read_safetensors(os.path.join(path, STATE_FILE))
    except ValueError as error:
        older = [p for _, p in list_checkpoints(os.path.dirname(path)) if p != path]
        hint = f" Delete {path} to resume from {older[-1]}." if older else ""
        raise ValueError(f"{error}{hint}") from None
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    states = _states(model)
    random_state = {k: tensors.pop(k) for k in list(tensors) if k.startswith("rng/")}
    if sorted(tensors) != sorted(key for key, _ in states):
        raise ValueError(
            f"The checkpoint {path} holds {len(tensors)} variables but this model and "
            f"optimizer have {len(states)}: it was written by a different model "
            "configuration or optimizer."
        )
    for key, variable in states:
        if tuple(tensors[key].shape) != tuple(variable.shape):
            raise ValueError(
                f"The checkpoint {path} does not fit this model: {info['variables'].get(key, key)} "
                f"has shape {tensors[key].shape}, the model needs {tuple(variable.shape)}."
            )
        variable.assign(tensors[key].astype(variable.dtype))
    return int(info["step"]), info.get("history", {}), random_state
