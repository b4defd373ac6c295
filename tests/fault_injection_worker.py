"""Fault injection for tests/test_fault_injection.py, in a process of its own.

`kills DIR N SEED`: for each kind of write kerasbert makes (a preset, a
tokenizer saved into a preset, a training checkpoint, fine-tuning's best
preset and its record, a JSON output file, the conversion of a built-in
preset into the cache), a forked child writes new
versions in a loop and is killed with SIGKILL at a random moment, N times.
After every kill the files are loaded the way kerasbert loads them; a load
counts as good only if it succeeds and shows one whole version (every weight,
the step and the metadata agree). Leftover temporary files show that the
kill landed inside a write.

`corruptions DIR N SEED`: N times per kind of file, a fresh copy of saved
files gets one random corruption (truncation, a flipped byte, overwritten or
zeroed bytes, appended bytes, emptied); loading must then raise a ValueError,
TypeError or FileNotFoundError. A Hugging Face checkpoint directory, which
records no digests, is counted apart.

Prints one JSON object. Runs under KERAS_BACKEND=numpy: the writes do not
depend on the backend, and forked children must not use an accelerator
runtime.
"""

import json
import os
import random
import shutil
import signal
import sys
import time

import numpy as np

import kerasbert
from kerasbert.checkpointing import latest_checkpoint, remove_old_checkpoints, restore_checkpoint, save_checkpoint
from kerasbert.convert import to_huggingface
from kerasbert.runs.finetuning import RECORD_FILE, _save_preset
from kerasbert.tokenizers import Tokenizer, WordPieceTokenizer
from kerasbert.utils.io import read_json, write_json

TINY = dict(vocabulary_size=400, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
            max_sequence_length=64)
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(395)]
TEMPORARY = (".tmp-", ".kerasbert-staging-")


def encoder():
    return kerasbert.Encoder(**TINY)


def trained_model():
    """An encoder with an optimizer whose state a checkpoint holds too."""
    model = encoder()
    model.compile(optimizer=kerasbert.optimizers.AdamW(1e-3))
    model.optimizer.build(model.trainable_variables)
    return model


def set_version(model, k):
    for v in model.weights:
        v.assign(np.full(v.shape, k, v.dtype))


def version_of(model):
    """The one value every weight holds, or None for a mixture."""
    values = {float(x) for v in model.weights for x in np.unique(np.asarray(v.numpy()))}
    return values.pop() if len(values) == 1 else None


def tokenizers():
    # Two vocabularies of the same size that differ in their last token.
    return [WordPieceTokenizer(VOCABULARY[:-1] + [f"v{k}"]) for k in (0, 1)]


# --------------------------------------------------------------------------
# Writers (run in the killed child) and checks (run in the parent after a kill)


class Preset:
    def __init__(self, root):
        self.path, self.model = os.path.join(root, "preset"), encoder()

    def write(self, k):
        set_version(self.model, k)
        kerasbert.save_to_preset(self.model, self.path, version=k)

    def check(self):
        loaded = kerasbert.from_preset(self.path)
        recorded = read_json(os.path.join(self.path, "preset.json"))["metadata"]["version"]
        return version_of(loaded) == recorded


class TokenizerIntoPreset:
    def __init__(self, root):
        self.path, self.model, self.tokenizers = os.path.join(root, "tokenizer"), encoder(), tokenizers()

    def write(self, k):
        set_version(self.model, k)
        self.tokenizers[k % 2].save_to_preset(self.path)
        kerasbert.save_to_preset(self.model, self.path, version=k)

    def check(self):
        vocabulary = Tokenizer.from_preset(self.path).get_vocabulary()
        loaded = kerasbert.from_preset(self.path)
        return vocabulary[-1] in ("v0", "v1") and version_of(loaded) is not None


class Checkpoint:
    def __init__(self, root):
        self.path, self.model = os.path.join(root, "checkpoints"), trained_model()

    def write(self, k):
        set_version(self.model, k)
        save_checkpoint(self.path, self.model, k, {"loss": [float(k)]})
        remove_old_checkpoints(self.path, keep=2)

    def check(self):
        fresh = trained_model()
        step, history, _ = restore_checkpoint(latest_checkpoint(self.path), fresh)
        return version_of(fresh) == step == history["loss"][-1]


class BestPreset:
    def __init__(self, root):
        self.path, self.model = os.path.join(root, "best"), encoder()

    def write(self, k):
        set_version(self.model, k)
        _save_preset(self.model, self.path, {"epoch": k})

    def check(self):
        record = read_json(os.path.join(self.path, RECORD_FILE))
        return version_of(kerasbert.from_preset(self.path)) == record["epoch"]


class JsonOutput:
    def __init__(self, root):
        self.path = os.path.join(root, "scores.json")

    def write(self, k):
        write_json(self.path, {"version": k, "rows": [k] * 100_000})

    def check(self):
        data = read_json(self.path)
        return set(data["rows"]) == {data["version"]}


class BuiltinCache:
    """The first use of a built-in preset converts its checkpoint into the
    cache; every version writes into a new cache home."""

    NAME = "all_minilm_l6_v2"
    PAUSE = (0.05, 4.0)  # seconds before the kill: a conversion takes about a second or two

    def __init__(self, root):
        from kerasbert.presets import _fetch_builtin_source, get_preset

        self.root = root
        os.makedirs(root, exist_ok=True)
        source = _fetch_builtin_source(self.NAME, get_preset(self.NAME))
        self.expected = [np.asarray(w) for w in kerasbert.from_preset(source).get_weights()]

    def write(self, k):
        from kerasbert.presets import preset_directory

        os.environ["KERASBERT_HOME"] = os.path.join(self.root, f"home-{k}")
        preset_directory(self.NAME)

    def check(self):
        """Every cache left behind is either absent or whole; then gone."""
        whole = True
        for home in os.listdir(self.root):
            cached = os.path.join(self.root, home, "presets", self.NAME)
            if os.path.isdir(cached):
                weights = kerasbert.from_preset(cached).get_weights()
                whole &= all(np.array_equal(a, b) for a, b in zip(self.expected, weights))
                whole &= kerasbert.Tokenizer.from_preset(cached).vocabulary_size() == 30522
            shutil.rmtree(os.path.join(self.root, home))
        return whole


WRITERS = (Preset, TokenizerIntoPreset, Checkpoint, BestPreset, JsonOutput, BuiltinCache)


def _temporaries(root):
    return sum(name.startswith(TEMPORARY) for _, dirs, files in os.walk(root) for name in dirs + files)


def kills(root, n, seed):
    rng = random.Random(seed)
    report = {}
    for writer_class in WRITERS:
        directory = os.path.join(root, writer_class.__name__)
        writer = writer_class(directory)
        writer.write(0)  # the first good state
        version, good, interrupted, errors = 0, 0, 0, []
        for _ in range(n):
            start, left_before = version + 1, _temporaries(directory)
            pid = os.fork()
            if pid == 0:  # the child writes versions until it is killed
                k = start
                while True:
                    writer.write(k)
                    k += 1
            time.sleep(rng.uniform(*getattr(writer, "PAUSE", (0.01, 0.4))))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            interrupted += _temporaries(directory) > left_before
            try:
                ok = writer.check()
            except Exception as error:  # any failure to load is a corrupt state
                ok = False
                errors.append(f"{type(error).__name__}: {str(error)[:300]}")
            good += bool(ok)
            version += 10_000  # versions never repeat across kills; temporaries left stay, as for a rerun
        report[writer_class.__name__] = {"kills": n, "good_loads": good, "corrupt_loads": n - good,
                                         "kills_with_temporaries_left": interrupted, "errors": errors[:3]}
    return report


# --------------------------------------------------------------------------
# Corruptions


def _same_content(path, original, data):
    """A JSON file that still parses to the same object (say, only its
    final newline cut) holds the same content: not a corruption."""
    if not path.endswith(".json"):
        return False
    try:
        return json.loads(bytes(data)) == json.loads(original)
    except ValueError:
        return False


def corrupt(path, rng):
    """Applies one random corruption that changes the file's content."""
    original = open(path, "rb").read()
    while True:
        kind, data = _corrupted(bytearray(original), rng)
        if not _same_content(path, original, data):
            break
    with open(path, "wb") as f:
        f.write(data)
    return kind


def _corrupted(data, rng):
    kind = rng.choice(["truncate", "flip", "overwrite", "zero_block", "append", "empty"])
    if kind == "truncate":
        data = data[: rng.randrange(len(data))]
    elif kind == "flip":
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    elif kind == "overwrite":
        i = rng.randrange(len(data))
        before = bytes(data[i:i + 16])
        data[i:i + 16] = bytes(rng.randrange(256) for _ in range(len(before)))
        if bytes(data[i:i + 16]) == before:
            data[i] ^= 0xFF
    elif kind == "zero_block":
        i = rng.randrange(len(data))
        block = data[i:i + 4096]
        data[i:i + 4096] = bytes(len(block)) if any(block) else b"\xff" * len(block)
    elif kind == "append":
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    else:
        data = bytearray()
    return kind, data


def _load_preset(path):
    kerasbert.from_preset(path)
    Tokenizer.from_preset(path)


def _load_checkpoint(path):
    restore_checkpoint(latest_checkpoint(path), trained_model())


def _load_best(path):
    read_json(os.path.join(path, RECORD_FILE))
    kerasbert.from_preset(path)


def corruptions(root, n, seed):
    rng = random.Random(seed)
    model, tokenizer = trained_model(), tokenizers()[0]
    set_version(model, 3)
    clean = os.path.join(root, "clean")
    kerasbert.save_to_preset(model, os.path.join(clean, "preset"))
    tokenizer.save_to_preset(os.path.join(clean, "preset"))
    save_checkpoint(os.path.join(clean, "checkpoints"), model, 7, {"loss": [1.0]})
    _save_preset(model, os.path.join(clean, "best"), {"epoch": 2})
    to_huggingface(model, os.path.join(clean, "huggingface"), model_type="bert")
    tokenizer.save_to_preset(os.path.join(clean, "huggingface"))
    artifacts = {"preset": _load_preset, "checkpoints": _load_checkpoint, "best": _load_best,
                 "huggingface": _load_preset}
    report = {}
    for artifact, load in artifacts.items():
        files = sorted(os.path.relpath(os.path.join(d, f), os.path.join(clean, artifact))
                       for d, _, names in os.walk(os.path.join(clean, artifact)) for f in names)
        counts = {"corruptions": 0, "clear_errors": 0, "silent_loads": 0, "other_errors": 0}
        examples = {"silent_loads": [], "other_errors": []}  # which file, which corruption
        for trial in range(n):
            copy = os.path.join(root, f"{artifact}-{trial}")
            shutil.copytree(os.path.join(clean, artifact), copy)
            name = rng.choice(files)
            kind = corrupt(os.path.join(copy, name), rng)
            counts["corruptions"] += 1
            try:
                load(copy)
                outcome = "silent_loads"
            except (ValueError, TypeError, FileNotFoundError):
                outcome = "clear_errors"
            except Exception as error:  # noqa: BLE001 -- anything else is a finding
                outcome = "other_errors"
                kind += f" -> {type(error).__name__}: {str(error)[:200]}"
            counts[outcome] += 1
            if outcome in examples:
                examples[outcome].append(f"{name}: {kind}")
            shutil.rmtree(copy)
        report[artifact] = {**counts, "examples": {k: v[:5] for k, v in examples.items()}}
    return report


if __name__ == "__main__":
    mode, root, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps({"kills": kills, "corruptions": corruptions}[mode](root, n, seed)))
