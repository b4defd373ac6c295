"""TensorFlow and TensorFlow Text: optional, imported when first used.

The modeling floors (layers, `Encoder`, presets, conversion, the tasks'
models, optimizers) run on JAX or PyTorch with token ids and need neither.
Text needs them: tokenizers, preprocessors, `tf.data` pipelines and
SavedModel export are TensorFlow graphs. `tf` and `tf_text` below stand for
the two modules and import them at the first attribute read, so that
`import kerasbert` imports neither; where one is missing, that read raises
an ImportError saying what to install.

`is_tensor` and `is_dataset` answer without importing TensorFlow: a value
cannot be a TensorFlow tensor or dataset while TensorFlow is not imported.
"""

import importlib
import importlib.util
import os
import sys
import types

_INSTALL = {
    "tensorflow": "TensorFlow",
    "tensorflow_text": "TensorFlow Text",
}
INSTALL_HINT = (
    "Tokenizers, preprocessors, tf.data pipelines and SavedModel export need TensorFlow and "
    "TensorFlow Text: pip install 'kerasbert[tensorflow]' (or tensorflow and tensorflow-text of the same "
    "minor version). The encoder and the tasks' models run on token ids without them."
)


class _Deferred(types.ModuleType):
    """A module imported at its first attribute read."""

    def __getattr__(self, attribute):
        if attribute.startswith("__"):
            raise AttributeError(attribute)  # probes by tools import nothing
        try:
            module = importlib.import_module(self.__name__)
        except ImportError as error:
            raise ImportError(f"{_INSTALL[self.__name__]} is not installed ({error}). {INSTALL_HINT}") from error
        if self.__name__ == "tensorflow":
            _keep_off_accelerators(module)
        value = getattr(module, attribute)
        setattr(self, attribute, value)  # later reads skip this method
        return value


def _keep_off_accelerators(tensorflow):
    """Hides the GPUs from TensorFlow when another backend computes: there
    TensorFlow only runs the data pipelines, on the CPU, and would otherwise
    reserve most of each GPU's memory the moment it sees it. Where
    TensorFlow has set up its devices already, they are left as they are."""
    keras = sys.modules.get("keras")
    backend = keras.backend.backend() if keras is not None else os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend == "tensorflow":
        return
    try:
        tensorflow.config.set_visible_devices([], "GPU")
    except RuntimeError:  # devices already initialized
        pass


tf = _Deferred("tensorflow")
tf_text = _Deferred("tensorflow_text")


def is_tensor(value):
    """Whether `value` is a TensorFlow tensor (dense, ragged or sparse)."""
    module = sys.modules.get("tensorflow")
    return module is not None and isinstance(value, (module.Tensor, module.RaggedTensor, module.SparseTensor))


def is_ragged(value):
    """Whether `value` is a `tf.RaggedTensor`."""
    module = sys.modules.get("tensorflow")
    return module is not None and isinstance(value, module.RaggedTensor)


def is_dataset(value):
    """Whether `value` is a `tf.data.Dataset`."""
    module = sys.modules.get("tensorflow")
    return module is not None and isinstance(value, module.data.Dataset)


def do_not_convert(function):
    """`tf.autograph.experimental.do_not_convert(function)`, for every
    function kerasbert gives `tf.data`.

    tf.data traces the functions it maps through AutoGraph, which rewrote
    this package's Python source on every new pipeline (1.5 s of the 1.75 s
    trace of a packing map). No kerasbert function branches on tensors in
    Python, so they are traced as written, and with them what they call: a
    preprocessor subclass's methods too, as Keras already traces every
    layer's `call` (write tensor-dependent branches there with `tf.cond`).
    Called where a dataset is built, so TensorFlow is imported already.
    """
    return tf.autograph.experimental.do_not_convert(function)


def import_quietly(name="tensorflow"):
    """Imports `name` if it is installed, its C++ start-up lines kept out of
    stderr; True when it is imported.

    TensorFlow writes them (oneDNN, CUDA drivers, CPU instructions) to file
    descriptor 2 as its libraries load, before its logging reads
    `TF_CPP_MIN_LOG_LEVEL`; errors still surface as Python exceptions.
    """
    if name in sys.modules:
        return True
    if importlib.util.find_spec(name) is None:
        return False
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            importlib.import_module(name)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return True
