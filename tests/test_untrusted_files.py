"""Files from strangers: loading never runs their code, names in them never
reach outside their directory or name classes, and altered files are refused
(docs/security.md lists these guarantees with their tests)."""

import hashlib
import json
import os
import pathlib
import re
import zipfile

import keras
import numpy as np
import pytest

import kerasbert
from helpers import tiny_encoder
from kerasbert import checkpointing
from kerasbert.convert import to_huggingface

SOURCE = pathlib.Path(kerasbert.__file__).parent


def flip_byte(path, offset_from_end=10):
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0x01  # in the tensor data, past the header
    path.write_bytes(bytes(data))


# -- no code runs on load -----------------------------------------------------

def test_kerasbert_never_unpickles_or_loads_unsafely():
    """A scan of the package: every torch.load is weights-only, nothing
    unpickles, evals, or turns Keras's safe mode off."""
    unsafe = re.compile(r"\bpickle\b|\bdill\b|allow_pickle\s*=\s*True|safe_mode\s*=\s*False|\beval\(|\bexec\(|"
                        r"enable_unsafe_deserialization|yaml\.load\(|marshal")
    found = []
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: {m.group(0)}" for m in unsafe.finditer(text)]
        for call in re.finditer(r"torch\.load\(([^)]*)\)", text):
            if "weights_only=True" not in call.group(1):
                found.append(f"{path.name}: {call.group(0)}")
    assert found == []


def test_a_pickled_checkpoint_with_code_is_refused_without_running_it(tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "code-ran"

    class Payload:
        def __reduce__(self):  # plain unpickling would call open(marker, "w")
            return (open, (str(marker), "w"))

    checkpoint = tmp_path / "hf"
    to_huggingface(tiny_encoder(), checkpoint, model_type="bert")
    os.remove(checkpoint / "model.safetensors")
    torch.save({"bert.embeddings.word_embeddings.weight": Payload()}, checkpoint / "pytorch_model.bin")
    with pytest.raises(ValueError, match="weights-only PyTorch checkpoint .*Unsupported global.*never unpickles"):
        kerasbert.from_preset(checkpoint)
    assert not marker.exists()


def test_a_keras_archive_naming_other_code_is_refused(tmp_path):
    model = kerasbert.TextClassifier(tiny_encoder(), num_classes=2)
    model.save(tmp_path / "model.keras")
    archive = zipfile.ZipFile(tmp_path / "model.keras")
    config = json.loads(archive.read("config.json"))
    config["config"]["encoder"].update(module="os", class_name="system", registered_name=None)
    with zipfile.ZipFile(tmp_path / "evil.keras", "w") as evil:
        for item in archive.infolist():
            evil.writestr(item, json.dumps(config) if item.filename == "config.json" else archive.read(item))
    with pytest.raises((TypeError, ValueError), match="system"):
        keras.saving.load_model(tmp_path / "evil.keras")  # safe_mode=True, Keras's default


# -- presets name arguments, never code ---------------------------------------

def edit_json(path, change):
    data = json.loads(path.read_text())
    data.pop("digest", None)  # as an attacker (or a hand edit) would
    change(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("change, message", [
    (lambda s: s["encoder"].update(activation="os.system"), "activation='os.system'; expected one of"),
    (lambda s: s["encoder"].update(class_name="Lambda"), r"unknown Encoder argument\(s\) \['class_name'\]"),
    (lambda s: s.update(encoder=["keras.layers.Lambda"]), "must be a JSON object of Encoder arguments"),
])
def test_preset_json_naming_classes_or_functions_is_refused(tmp_path, change, message):
    tiny_encoder().save_to_preset(tmp_path / "p")
    edit_json(tmp_path / "p" / "preset.json", change)
    with pytest.raises(ValueError, match=message):
        kerasbert.from_preset(tmp_path / "p")


@pytest.mark.parametrize("change, message", [
    (lambda s: s["config"].update(activation={"class_name": "Lambda", "config": {}}),
     "activation=.* names a class or function"),
    (lambda s: s["config"].update(activations=["relu"]), r"unknown TextClassifier argument\(s\) \['activations'\]"),
    (lambda s: s.update(class_name="Lambda"), "holds a Lambda, not a TextClassifier"),
    (lambda s: s.update(config="os.system"), "must be a JSON object of TextClassifier arguments"),
])
def test_task_json_naming_classes_or_functions_is_refused(tmp_path, change, message):
    kerasbert.TextClassifier(tiny_encoder(), num_classes=2).save_to_preset(tmp_path / "t")
    edit_json(tmp_path / "t" / "task.json", change)
    with pytest.raises(ValueError, match=message):
        kerasbert.TextClassifier.from_preset(tmp_path / "t")


@pytest.mark.parametrize("shard", ["../outside.safetensors", "/etc/passwd", "sub/../../outside.safetensors"])
def test_shard_names_cannot_leave_the_checkpoint_directory(tmp_path, shard):
    checkpoint = tmp_path / "hf"
    to_huggingface(tiny_encoder(), checkpoint, model_type="bert")
    os.replace(checkpoint / "model.safetensors", tmp_path / "outside.safetensors")
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": shard}}))
    with pytest.raises(ValueError, match="missing or unsafe shard"):
        kerasbert.from_preset(checkpoint)


# -- altered files are refused --------------------------------------------------

def test_altered_weights_are_refused_by_their_recorded_digest(tmp_path):
    tiny_encoder().save_to_preset(tmp_path / "p")
    weights = tmp_path / "p" / "encoder.safetensors"
    flip_byte(weights)  # same size, still a valid safetensors file
    with pytest.raises(ValueError, match="does not match the SHA-256 digest .*preset.json records"):
        kerasbert.from_preset(tmp_path / "p")


def test_altered_vocabulary_is_refused(tmp_path, minilm_tokenizer):
    minilm_tokenizer.save_to_preset(tmp_path / "p")  # into a directory without preset.json: no records
    tiny_encoder(vocabulary_size=minilm_tokenizer.vocabulary_size()).save_to_preset(tmp_path / "p")
    assert kerasbert.Tokenizer.from_preset(tmp_path / "p").get_vocabulary() == minilm_tokenizer.get_vocabulary()
    vocab = tmp_path / "p" / "vocab.txt"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace("\nthe\n", "\nteh\n"), encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt is .* bytes|vocab.txt does not match"):
        kerasbert.Tokenizer.from_preset(tmp_path / "p")


def test_a_tokenizer_saved_into_a_preset_updates_its_records(tmp_path, minilm_tokenizer):
    directory = tmp_path / "p"
    tiny_encoder(vocabulary_size=minilm_tokenizer.vocabulary_size()).save_to_preset(directory)
    (directory / "NOTES.md").write_text("mine")
    minilm_tokenizer.save_to_preset(directory)
    spec = json.loads((directory / "preset.json").read_text())
    digest = hashlib.sha256((directory / "vocab.txt").read_bytes()).hexdigest()
    assert spec["files"]["vocab.txt"]["sha256"] == digest
    assert (directory / "NOTES.md").read_text() == "mine"  # other files stay
    kerasbert.Tokenizer.from_preset(directory)
    kerasbert.from_preset(directory)


def test_altered_task_head_is_refused(tmp_path):
    kerasbert.TextClassifier(tiny_encoder(), num_classes=2).save_to_preset(tmp_path / "t")
    flip_byte(tmp_path / "t" / "task.safetensors")
    with pytest.raises(ValueError, match="does not match the SHA-256 digest .*task.json records"):
        kerasbert.TextClassifier.from_preset(tmp_path / "t")


def test_a_hand_edited_preset_json_is_refused_until_its_digest_is_removed(tmp_path):
    tiny_encoder().save_to_preset(tmp_path / "p")
    path = tmp_path / "p" / "preset.json"
    path.write_text(path.read_text().replace('"dropout": 0.0', '"dropout": 0.5'))
    with pytest.raises(ValueError, match="edited by hand.*delete its 'digest' entry"):
        kerasbert.from_preset(tmp_path / "p")
    edit_json(path, lambda spec: None)
    assert kerasbert.from_preset(tmp_path / "p").dropout == 0.5


def test_an_altered_checkpoint_is_refused_and_the_previous_one_named(tmp_path):
    model = tiny_encoder()
    model.compile(optimizer="adam")
    for step in (1, 2):
        checkpointing.save_checkpoint(tmp_path, model, step, {"loss": [1.0] * step})
    latest = checkpointing.latest_checkpoint(tmp_path)
    flip_byte(pathlib.Path(latest) / checkpointing.STATE_FILE)
    with pytest.raises(ValueError, match=r"(?s)SHA-256.*Delete .*step-00000002 to resume from .*step-00000001"):
        checkpointing.restore_checkpoint(latest, model)
    info = pathlib.Path(latest) / checkpointing.INFO_FILE
    info.write_text(info.read_text().replace('"step": 2', '"step": 3'))
    with pytest.raises(ValueError, match="no longer matches the digest"):
        checkpointing.restore_checkpoint(latest, model)


def test_hub_cache_files_are_checked_against_their_blob_name(tmp_path):
    """The Hugging Face cache names a large file's blob by its SHA-256."""
    source = tmp_path / "source"
    to_huggingface(tiny_encoder(), source, model_type="bert")
    blobs, snapshot = tmp_path / "cache" / "blobs", tmp_path / "cache" / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for name in ("config.json", "model.safetensors"):
        blob = blobs / hashlib.sha256((source / name).read_bytes()).hexdigest()
        blob.write_bytes((source / name).read_bytes())
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))
    expected = kerasbert.from_preset(source).get_weights()
    loaded = kerasbert.from_preset(snapshot).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(expected, loaded))
    flip_byte(pathlib.Path(os.path.realpath(snapshot / "model.safetensors")))
    with pytest.raises(ValueError, match="Hugging Face cache name"):
        kerasbert.from_preset(snapshot)


def test_written_weights_read_back_exactly_even_from_transposed_views(tmp_path):
    """safetensors writes an array's memory as it lies: a transposed view
    (as the numpy backend's variables can be) must be laid out first."""
    from kerasbert.utils.io import read_safetensors, write_safetensors

    kernel = np.arange(12, dtype="float32").reshape(3, 4)
    write_safetensors(tmp_path / "w.safetensors", {"kernel": kernel.T, "column": kernel[:, 1]})
    read = read_safetensors(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(read["kernel"], kernel.T)
    np.testing.assert_array_equal(read["column"], kernel[:, 1])
    write_safetensors(tmp_path / "s.safetensors", {"step": np.asarray(7, "int64")})
    assert read_safetensors(tmp_path / "s.safetensors")["step"].shape == ()


@pytest.mark.parametrize("damage", ["w\x00\x00\x00", "w" * 300])
def test_a_damaged_vocabulary_without_records_gets_a_clear_error(tmp_path, damage):
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", damage, "##s"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocabulary\[6\]=.* cannot be a WordPiece token.*damaged"):
        kerasbert.Tokenizer.from_preset(tmp_path)
