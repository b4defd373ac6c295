"""The SavedModel: the task's serving function, the tokenizer inside, traced
and written by Keras's `ExportArchive`."""

import keras

SIGNATURE = "serving_default"


def check_saved_model(task, options):
    """Refuses a task without a serving function or a preprocessor; bad
    serving options fail in the task's `serving_function`."""
    serving = getattr(task, "serving_function", None)
    if serving is None:
        raise TypeError(f"{type(task).__name__} cannot be exported for serving: it has no serving_function.")
    check_preprocessor(task, "SavedModel")
    serving(**options)


def check_preprocessor(task, export):
    """Refuses a task without a preprocessor for an `export` that takes
    text."""
    if getattr(task, "preprocessor", None) is None:
        raise ValueError(
            f"this {type(task).__name__} has no preprocessor, so its {export} could not take text; build it with "
            "from_preset or pass preprocessor=..."
        )


def write_saved_model(task, path, options):
    """The TensorFlow half of a SavedModel export: traces `task.serving_function` and
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
