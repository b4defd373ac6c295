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

from kerasbert.utils.integrity import check_seal, sealed


def check_path(argument, value):
    """`value` as a path string, or a TypeError / ValueError naming
    `argument` when it cannot name a file."""
    from kerasbert.utils.checks import abbreviated

    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{argument} must be a path (a str or os.PathLike); got {type(value).__name__}: "
                        f"{abbreviated(value)}.")
    path = os.fspath(value)
    if not path.strip() or "\x00" in path:
        raise ValueError(f"{argument}={abbreviated(path)} is not a usable path: it is empty, blank or holds a "
                         "NUL character.")
    return path


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


def write_json(path, data, seal=False):
    """Writes `data` as JSON, atomically; `seal` adds a digest of the content
    that `read_json` checks (kerasbert.utils.integrity)."""
    if seal:
        data = sealed(data)
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
    return check_seal(data, path)


def write_safetensors(path, tensors, metadata=None):
    import numpy as np
    from safetensors.numpy import save_file

    # safetensors writes an array's buffer as it lies in memory: a transposed
    # (non C-contiguous) view would be saved scrambled.
    tensors = {name: np.asarray(value, order="C") for name, value in tensors.items()}
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


def _exchange(a, b):
    """Swaps two paths in one atomic step (Linux `renameat2` with
    RENAME_EXCHANGE); False where the system or file system cannot."""
    import ctypes
    import errno

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_cwd, rename_exchange = -100, 2
    if renameat2(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), b)


@contextlib.contextmanager
def staged_directory(path, start_from_existing=False, first_writer_wins=False):
    """Yields a directory beside `path` to write into (holding hard links to
    `path`'s files if `start_from_existing`); when the block completes, its
    files are synced and it takes `path`'s place. Where the system can swap
    two directories atomically (Linux), a reader, or a process killed at any
    point, sees either the whole previous directory or the whole new one.
    Elsewhere a kill between two renames leaves the previous directory in a
    `.kerasbert-staging-*` folder beside `path`. On failure `path` is left
    as it was. Writers must replace files in it (`atomic_file`), never
    write into them: the files carried over are links to the old ones.

    With `first_writer_wins` (caches, checkpoints of one step), a `path`
    that exists when the block completes, written by another process
    meanwhile, is kept and this directory discarded.
    """
    path = os.fspath(path)
    if os.path.islink(path):  # replace the directory it points to, keep the link
        path = os.path.realpath(path)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise NotADirectoryError(f"{path} exists and is not a directory.")
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".kerasbert-staging-", dir=parent)
    try:
        written = os.path.join(staging, "new")
        if start_from_existing and os.path.isdir(path):
            try:  # new files replace links (atomic_file renames), never write through them
                shutil.copytree(path, written, symlinks=True, copy_function=os.link)
            except OSError:
                shutil.rmtree(written, ignore_errors=True)
                shutil.copytree(path, written, symlinks=True)
        else:
            os.mkdir(written)
        yield written
        for root, _, files in os.walk(written):
            for name in files:
                if not os.path.islink(os.path.join(root, name)):
                    descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
                    try:
                        os.fsync(descriptor)
                    finally:
                        os.close(descriptor)
        if not os.path.lexists(path):
            try:
                os.rename(written, path)
            except OSError:  # written meanwhile
                if not (first_writer_wins and os.path.isdir(path)):
                    raise
        elif first_writer_wins:
            pass
        elif not _exchange(written, path):
            os.replace(path, os.path.join(staging, "replaced"))
            os.replace(written, path)
        _fsync_directory(parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def updating_directory(path, argument="preset_dir"):
    """Yields a copy of directory `path` (or a new empty one) to change;
    the changed copy replaces `path` as a whole (see `staged_directory`).
    `argument` names `path` in errors."""
    return staged_directory(check_path(argument, path), start_from_existing=True)


def replacing_directory(path, overwrite=False, hint="pass overwrite=True", argument="filepath"):
    """Yields an empty directory that replaces `path` as a whole when the
    block completes (see `staged_directory`). An existing `path` raises
    FileExistsError (naming `hint`) unless `overwrite`."""
    path = check_path(argument, path)
    if os.path.lexists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists; {hint} to replace it.")
    return staged_directory(path)
