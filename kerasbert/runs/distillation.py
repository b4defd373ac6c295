"""`kerasbert.distill`: the `kerasbert distill` command as a function.

From a teacher task preset (`save_to_preset`, `kerasbert finetune`'s
`best/` or `final/`) and plain-text files to a student task preset with
fewer layers (`kerasbert.tasks.student_task`), trained by a
`kerasbert.Distiller`:

- a `TextClassifier` or `TokenClassifier` teacher (task distillation): the
  student learns the teacher's logits on the files' lines, one example per
  line (a tagger's words split at whitespace), for `epochs` passes;
- a `MaskedLM` teacher (pretraining distillation, DistilBERT's): masked-LM
  batches of the files (one sentence per line, a blank line between
  documents) for `steps` steps, with DistilBERT's losses.

`output/` holds the student (a task preset, loadable with
`kerasbert.tasks.load_task` or the task's `from_preset`) and
`history.json`.
"""

import os

import keras

from kerasbert.utils.checks import check_int, check_number
from kerasbert.utils.io import check_path, write_json

# DistilBERT's pretraining-distillation loss weights (Sanh et al. 2019).
DISTILBERT_WEIGHTS = {"soft_weight": 5.0, "hard_weight": 2.0, "hidden_weight": 1.0}


def _lines(paths):
    lines = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            lines += [line.strip() for line in f if line.strip()]
    if not lines:
        raise ValueError(f"{paths} hold no text (every line is blank).")
    return lines


def distill(teacher, train_files, output, num_layers, epochs=3, steps=1000, batch_size=32, learning_rate=None,
            temperature=2.0, sequence_length=128, jit_compile="auto", seed=0, verbose=1):
    """Distills the task preset `teacher` into a student of `num_layers`
    layers (see the module doc); returns the student.

    Args:
        teacher: a task preset directory (TextClassifier, TokenClassifier
            or MaskedLM).
        train_files: a glob pattern or a list of them: plain-text files.
        output: a new (or empty) directory for the student and its history.
        num_layers: the student's depth (its layers start as evenly spaced
            teacher layers).
        epochs: passes over the lines (task distillation).
        steps: training steps (pretraining distillation).
        batch_size: examples (rows) per step.
        learning_rate: AdamW's constant rate; default 5e-5 for task
            distillation, 1e-4 for pretraining distillation.
        temperature: the soft targets' temperature.
        sequence_length: tokens per masked-LM row (pretraining distillation).
        jit_compile: `compile`'s (True, False or "auto").
        seed: the seed of the order, the masks and dropout.
        verbose: `fit`'s verbosity.
    """
    from kerasbert.optimizers import pretraining_optimizer
    from kerasbert.preprocessing.pretraining_data import pretraining_dataset
    from kerasbert.preprocessing.sentence_pairs import read_documents
    from kerasbert.runs.pretraining import training_files
    from kerasbert.tasks import Distiller, MaskedLM, TokenClassifier, student_task
    from kerasbert.tasks.task import load_task

    for name, value in (("epochs", epochs), ("steps", steps), ("batch_size", batch_size),
                        ("sequence_length", sequence_length)):
        check_int(name, value, 1)
    check_number("temperature", temperature, 0, low_open=True)
    output = check_path("output", output)
    if os.path.isdir(output) and os.listdir(output):
        raise FileExistsError(f"output={output!r} is not empty; give a new directory for the student.")
    paths = training_files(train_files)
    keras.utils.set_random_seed(seed)
    teacher_task = load_task(teacher)
    student = student_task(teacher_task, num_layers)
    pretraining = isinstance(teacher_task, MaskedLM)
    weights = DISTILBERT_WEIGHTS if pretraining else {}
    distiller = Distiller(teacher_task, student, temperature=temperature, **weights)
    rate = learning_rate if learning_rate is not None else (1e-4 if pretraining else 5e-5)
    check_number("learning_rate", rate, 0, low_open=True)
    distiller.compile(optimizer=pretraining_optimizer("adamw", learning_rate=rate, total_steps=1, warmup_steps=0),
                      jit_compile=jit_compile)
    if pretraining:
        tokenizer = student.preprocessor.tokenizer if student.preprocessor is not None else None
        if tokenizer is None:
            raise ValueError(f"{teacher} holds no tokenizer, which pretraining distillation needs to mask text.")
        dataset = pretraining_dataset(read_documents(paths), tokenizer, "mlm", sequence_length, batch_size,
                                      segment_ids=bool(student.encoder.num_segments), seed=seed)
        log_every = max(1, steps // 10)
        history = distiller.fit(dataset, epochs=max(1, steps // log_every), steps_per_epoch=log_every,
                                verbose=verbose).history
    else:
        texts = _lines(paths)
        if isinstance(teacher_task, TokenClassifier):
            texts = [line.split() for line in texts]
        history = distiller.fit(texts, batch_size=batch_size, epochs=epochs, verbose=verbose).history
    student.save_to_preset(output)
    write_json(os.path.join(output, "history.json"), {k: [float(v) for v in vs] for k, vs in history.items()})
    return student
