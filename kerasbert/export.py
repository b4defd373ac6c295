"""Serving: a task as a TensorFlow SavedModel that takes raw text.

`export(task, path)` (also `task.export(path)`) writes a SavedModel whose
`serving_default` signature takes 1-D `tf.string` batches and returns named
outputs. Tokenization, packing, truncation and the post-processing run in
the graph, so the SavedModel needs nothing but TensorFlow and
tensorflow-text: TF Serving, or `tf.saved_model.load` in a process without
kerasbert.

Whichever backend trained the task, TensorFlow builds the graph: from JAX or
torch the task is written as a preset (weights, tokenizer, arguments) and
rebuilt from it by a TensorFlow subprocess (`python -m kerasbert.export`).
The SavedModel is written beside `path` and moved into place when complete,
so `path` never holds half an export.
"""

import importlib
import json
import os
import subprocess
import sys
import tempfile

import keras

from kerasbert.utils.io import replacing_directory

SIGNATURE = "serving_default"


def export(task, path, overwrite=False, **options):
    """Writes `task` as a SavedModel at `path` (see the module doc) and
    returns `path`.

    Args:
        task: a kerasbert task with a preprocessor (`TextClassifier`,
            `TextEmbedder`, ...).
        path: the SavedModel directory to create.
        overwrite: replace an existing `path` (else FileExistsError).
        **options: the task's serving options (e.g. `pairs=True` for a
            sentence-pair `TextClassifier`).
    """
    serving = getattr(task, "serving_function", None)
    if serving is None:
        raise TypeError(f"{type(task).__name__} cannot be exported for serving: it has no serving_function.")
    if getattr(task, "preprocessor", None) is None:
        raise ValueError(
            f"this {type(task).__name__} has no preprocessor, so its SavedModel could not take text; build it "
            "with from_preset or pass preprocessor=..."
        )
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be the SavedModel directory to create (a str or os.PathLike); got "
                        f"{type(path).__name__} {path!r:.80}.")
    serving(**options)  # bad options fail here, before anything is written
    path = os.fspath(path)
    with replacing_directory(path, overwrite) as written:
        if keras.backend.backend() == "tensorflow":
            write_saved_model(task, written, options)
        else:
            with tempfile.TemporaryDirectory(prefix=".kerasbert-preset-", dir=os.path.dirname(written)) as preset:
                task.save_to_preset(preset)
                _write_in_tensorflow(preset, written, options, type(task))
    return path


def write_saved_model(task, path, options):
    """The TensorFlow half of `export`: traces `task.serving_function` and
    saves it, with the task's variables and the tokenizer's tables."""
    serve, input_signature = task.serving_function(**options)
    archive = keras.export.ExportArchive()
    # The endpoint brings the variables it reads; `track` adds the lookup tables
    # of the tokenizer, which Keras finds by walking what it is given and
    # tracing every tf.function on the way. The preprocessor holds them all:
    # walking the whole task (1.2-1.7 s more an export) would find no more.
    archive.track(task.preprocessor)
    for name in ("variables", "trainable_variables", "non_trainable_variables"):
        # As track(task) lists them. The TensorFlow variables inside Keras's: the archive saves those
        # the endpoint reads, and a Keras variable listed beside them would be saved a second time.
        archive.add_variable_collection(name, [variable.value for variable in getattr(task, name)])
    archive.add_endpoint(SIGNATURE, serve, input_signature=input_signature)
    archive.write_out(path, verbose=False)


def _write_in_tensorflow(preset, path, options, task_class):
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    command = [sys.executable, "-m", "kerasbert.export", preset, path, json.dumps(options),
               f"{task_class.__module__}:{task_class.__qualname__}"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(
            f"rebuilding the task in TensorFlow for the export failed (exit status {done.returncode}):\n"
            f"{done.stderr[-4000:]}"
        )


def _main(argv):
    """Rebuilds a task from its preset with the class that wrote it
    (`module:ClassName`, as `_write_in_tensorflow` names it) and writes it."""
    preset, path, options, class_path = argv[1], argv[2], json.loads(argv[3]), argv[4]
    module, _, name = class_path.partition(":")
    task = getattr(importlib.import_module(module), name).from_preset(preset)
    write_saved_model(task, path, options)


if __name__ == "__main__":
    _main(sys.argv)
