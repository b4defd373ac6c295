"""Crash-safe file writes and safe reads of JSON and safetensors files.

Every file kerasbert writes goes to a temporary name in the same directory,
is flushed to disk, then renamed over the destination: a reader sees either
the old file or the whole new one, never half of one.
"""

import contextlib
import json
import os
import shutil
import tempfile


def _fsync_directory(path):
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path; on success renames it to `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path), dir=directory)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_directory(directory)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_json(path, data):
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")


def read_json(path, what="JSON file"):
    """Reads a JSON object, turning decode errors into a clear ValueError."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{what} {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{what} {path} must hold a JSON object; found {type(data).__name__}."
        )
    return data


def write_safetensors(path, tensors, metadata=None):
    from safetensors.numpy import save_file

    with atomic_file(path) as tmp:
        save_file(tensors, tmp, metadata=metadata)


def read_safetensors(path):
    """Reads a safetensors file into a dict of numpy arrays (float32 for
    half-precision tensors), with a clear error on corrupt files."""
    import numpy as np
    from safetensors import SafetensorError, safe_open

    tensors = {}
    try:
        with safe_open(path, framework="numpy") as f:
            for name in f.keys():
                tensors[name] = f.get_tensor(name)
    except (SafetensorError, OSError, ValueError, TypeError) as e:
        if "bf16" in str(e).lower() or "bfloat16" in str(e).lower():
            return _read_safetensors_with_torch(path)
        raise ValueError(
            f"{path} is not a readable safetensors file ({e}); the file may be "
            "truncated or corrupted. Download or convert it again."
        ) from None
    return {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in tensors.items()}


def _read_safetensors_with_torch(path):
    # numpy has no bfloat16; torch reads it without unpickling anything.
    try:
        import torch
        from safetensors.torch import load_file
    except ImportError:
        raise ValueError(
            f"{path} stores bfloat16 tensors, which need PyTorch to read; "
            "install torch or convert the checkpoint to float32."
        ) from None
    return {k: v.to(torch.float32).numpy() for k, v in load_file(path).items()}


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temporary directory that replaces `path` on success.

    If `path` appeared meanwhile (another process finished first), the
    existing directory is kept and the temporary one discarded.
    """
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=parent)
    try:
        yield tmp
        for root, _, files in os.walk(tmp):
            for name in files:
                with open(os.path.join(root, name), "rb+") as f:
                    os.fsync(f.fileno())
        try:
            os.rename(tmp, path)
        except OSError:
            if not os.path.isdir(path):
                raise
        _fsync_directory(parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def replacing_directory(path, overwrite=False, hint="pass overwrite=True"):
    """Yields an empty directory beside `path` to write into; when the block
    completes, it takes `path`'s place. An existing `path` raises
    FileExistsError (naming `hint`) unless `overwrite`, and even then goes
    only once the new directory is complete; on failure `path` is left as it
    was."""
    path = os.fspath(path)
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists; {hint} to replace it.")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".kerasbert-staging-", dir=parent)
    try:
        written = os.path.join(staging, "new")
        os.mkdir(written)
        yield written
        if os.path.lexists(path):
            os.replace(path, os.path.join(staging, "replaced"))
        os.replace(written, path)
        _fsync_directory(parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
