"""Serving: a task as a TensorFlow SavedModel that takes raw text, as ONNX
that takes token ids, or as LiteRT that takes raw text.

`export(task, path, format=...)` (also `task.export(path, format=...)`)
writes a directory:

- `"saved_model"`: a SavedModel whose `serving_default` signature takes 1-D
  `tf.string` batches and returns named outputs. Tokenization, packing,
  truncation and the post-processing run in the graph, so the SavedModel
  needs nothing but TensorFlow and tensorflow-text: TF Serving, or
  `tf.saved_model.load` in a process without kerasbert.
- `"onnx"`: `model.onnx`, the task's Keras model converted by Keras's own
  ONNX export (tf2onnx): inputs the model's (`token_ids`, `segment_ids` where
  the encoder has segments, `padding_mask`, a masked LM's `mask_positions`),
  int32 with dynamic batch and sequence axes; outputs the model's, by name.
  Beside it the tokenizer's files (`tokenizer_config.json` with the
  preprocessor's `sequence_length` as `model_max_length`), which load in
  transformers' `AutoTokenizer.from_pretrained`. Runs in onnxruntime alone.
- `"litert"`: `model.tflite` for a WordPiece `TextClassifier`: strings in,
  the SavedModel's outputs out, tokenized in the graph by tensorflow-text's
  `FastBertTokenizer`, whose LiteRT kernels tensorflow-text's registrar
  provides, with a normaliser table built from kerasbert's rules (see
  `kerasbert.export.litert` and `kerasbert.export.bert_normalizer`).

Whichever backend trained the task, TensorFlow builds the graph: from JAX or
torch the task is written as a preset (weights, tokenizer, arguments) and
rebuilt from it by a TensorFlow subprocess (`python -m kerasbert.export`).
ONNX and LiteRT hold float32 weights: a task in another dtype policy is
rebuilt from its preset in float32 there too. The export is written beside
`path` and moved into place when complete, so `path` never holds half an
export.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile

import keras

from kerasbert.export.litert import check_litert, write_litert
from kerasbert.export.onnx import check_onnx, write_onnx
from kerasbert.export.saved_model import check_saved_model, write_saved_model
from kerasbert.utils.io import replacing_directory

FORMATS = ("saved_model", "onnx", "litert")
CHECKS = {"saved_model": check_saved_model, "onnx": check_onnx, "litert": check_litert}
WRITERS = {"saved_model": write_saved_model, "onnx": write_onnx, "litert": write_litert}
# The subprocess's exit status for a task its format refuses (its message follows on stderr).
_REFUSED = 3


def export(task, path, overwrite=False, format="saved_model", **options):
    """Writes `task` in `format` at `path` (see the module doc) and returns
    `path`.

    Args:
        task: a kerasbert task; with a preprocessor (`from_preset` gives
            one) for "saved_model" and "litert".
        path: the directory to create.
        overwrite: replace an existing `path` (else FileExistsError).
        format: "saved_model", "onnx" or "litert".
        **options: the task's serving options, for "saved_model" (e.g.
            `pairs=True` for a sentence-pair `TextClassifier`).
    """
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is not an export format; expected one of {FORMATS}.")
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be the directory to create (a str or os.PathLike); got "
                        f"{type(path).__name__} {path!r:.80}.")
    CHECKS[format](task, options)  # refusals and bad options fail here, before anything is written
    path = os.fspath(path)
    # ONNX and LiteRT hold float32: another policy's task is rebuilt from its preset in float32.
    float32 = format != "saved_model" and task.dtype_policy.name != "float32"
    with replacing_directory(path, overwrite) as written:
        if keras.backend.backend() == "tensorflow" and not float32:
            WRITERS[format](task, written, options)
        else:
            with tempfile.TemporaryDirectory(prefix=".kerasbert-preset-", dir=os.path.dirname(written)) as preset:
                task.save_to_preset(preset)
                _write_in_tensorflow(preset, written, options, type(task), format, "float32" if float32 else None)
    return path


# -- From JAX and torch: the TensorFlow subprocess ------------------------------

def _write_in_tensorflow(preset, path, options, task_class, format="saved_model", dtype=None):
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    command = [sys.executable, "-m", "kerasbert.export", preset, path, json.dumps(options),
               f"{task_class.__module__}:{task_class.__qualname__}", format, json.dumps(dtype)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode == _REFUSED:  # the task's own refusal, as the error it was
        kind, _, message = done.stderr.strip().rpartition("\n")[2].partition(": ")
        raise (TypeError if kind == "TypeError" else ValueError)(message)
    if done.returncode:
        raise RuntimeError(
            f"rebuilding the task in TensorFlow for the export failed (exit status {done.returncode}):\n"
            f"{done.stderr[-4000:]}"
        )


def _main(argv):
    """Rebuilds a task from its preset with the class that wrote it
    (`module:ClassName`, as `_write_in_tensorflow` names it), in `dtype`
    where given, and writes it in `format`."""
    preset, path, options, class_path = argv[1], argv[2], json.loads(argv[3]), argv[4]
    format, dtype = argv[5], json.loads(argv[6])
    module, _, name = class_path.partition(":")
    task = getattr(importlib.import_module(module), name).from_preset(preset, dtype=dtype)
    try:
        WRITERS[format](task, path, options)
    except (TypeError, ValueError) as error:
        print(f"{type(error).__name__}: {error}".replace("\n", " "), file=sys.stderr)
        sys.exit(_REFUSED)
