"""Sizes and SHA-256 digests of the files in preset and checkpoint
directories.

The JSON file that describes a directory (`preset.json`, `task.json`,
`checkpoint.json`) records, under `"files"`, the size and digest of each
file it vouches for, and is written after them. Loading checks a file
against its record before reading it, so a truncated or corrupted weights or
vocabulary file is refused with a clear error rather than loaded. The
records guard against accidents (a full disk, a bad copy, bit rot); someone
who can rewrite the files can rewrite the records too (docs/security.md).
"""

import hashlib
import json
import os

_CHUNK = 1 << 22


SEAL = "digest"


def _content_digest(data):
    canonical = json.dumps({k: v for k, v in data.items() if k != SEAL}, sort_keys=True, ensure_ascii=True,
                           separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("ascii")).hexdigest()


def sealed(data):
    """`data` (a JSON object kerasbert writes and later trusts) with a
    `"digest"` entry: the SHA-256 of its canonical form."""
    data = json.loads(json.dumps(data))  # digest what a reader will see (string keys, lists)
    return {**{k: v for k, v in data.items() if k != SEAL}, SEAL: _content_digest(data)}


def check_seal(data, path):
    """Refuses a JSON object read from `path` whose `"digest"` entry no
    longer matches its content; objects without one pass."""
    if SEAL in data and data[SEAL] != _content_digest(data):
        raise ValueError(
            f"{path} no longer matches the digest kerasbert recorded in it when writing it: the file is "
            f"corrupted, or was edited by hand. Save it again; if you edited it on purpose, delete its "
            f"{SEAL!r} entry."
        )
    return data


def file_digest(path):
    """`{"bytes": size, "sha256": hex digest}` of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return {"bytes": os.path.getsize(path), "sha256": digest.hexdigest()}


def digests(directory, names):
    """The records of those of `names` that exist in `directory`."""
    return {
        name: file_digest(os.path.join(directory, name))
        for name in names
        if os.path.isfile(os.path.join(directory, name))
    }


def check_file(path, record, described_by):
    """Raises ValueError unless the file at `path` has the size and digest of
    `record` (from `described_by`, the JSON file holding it)."""
    if not isinstance(record, dict) or not {"bytes", "sha256"} <= set(record):
        raise ValueError(f"{described_by}: the record of {os.path.basename(path)} is malformed: {record!r}.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing; {described_by} lists it.")
    size = os.path.getsize(path)
    if size != record["bytes"]:
        raise ValueError(
            f"{path} is {size:,} bytes, but {described_by} records {record['bytes']:,}: the file is "
            f"{'truncated' if size < record['bytes'] else 'corrupted'}. Save, convert or download it again."
        )
    if file_digest(path)["sha256"] != record["sha256"]:
        raise ValueError(
            f"{path} does not match the SHA-256 digest {described_by} records: the file is corrupted. "
            "Save, convert or download it again."
        )


def check_recorded(directory, name, spec, described_by):
    """Checks `directory/name` against `spec["files"][name]` if `spec`
    records it (directories written before records existed have none)."""
    files = spec.get("files", {})
    if not isinstance(files, dict):
        raise ValueError(f"{described_by}: 'files' must map file names to records; got {files!r}.")
    if name in files:
        check_file(os.path.join(directory, name), files[name], described_by)


def check_hub_blob(path):
    """Checks a file of the Hugging Face Hub cache against its name: the
    cache links large (LFS) files to `blobs/<sha256 of the content>`."""
    blob = os.path.basename(os.path.realpath(path))
    if os.path.islink(path) and len(blob) == 64 and all(c in "0123456789abcdef" for c in blob):
        check_file(path, {"bytes": os.path.getsize(path), "sha256": blob}, "its Hugging Face cache name")
