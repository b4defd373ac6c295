"""`kerasbert.pretrain`: the `kerasbert pretrain` command as a function.

From plain-text files (one sentence per line, a blank line between
documents) to a pretrained encoder preset: a vocabulary (the preset's, or a
new one trained on the files), examples for the objective, a task trained
with `fit`, crash-safe checkpoints, and the final encoder with its tokenizer
in `output/preset`.

Layout of `output/`:

- `run.json`: the run's settings (a resumed run must use the same ones);
- `tokenizer/`: the vocabulary the run uses;
- `checkpoints/step-XXXXXXXX/`: the newest `keep_checkpoints` checkpoints;
- `history.json`: one list per metric (`loss`, `mlm_loss`, ...), one entry
  per `log_every` steps, plus `step`;
- `logs/`: TensorBoard logs;
- `preset/`: the final encoder (the discriminator for ELECTRA and
  DeBERTa-v3) and its
  tokenizer, loadable with `kerasbert.from_preset`.
"""

import dataclasses
import glob
import math
import os

import keras

from kerasbert import checkpointing
from kerasbert.distribution import training_scope
from kerasbert.runs.options import OBJECTIVES, OPTIMIZERS, PRECISIONS  # noqa: F401 (re-exported)
from kerasbert.runs.records import RUN_FILE, extend_history, start_run
from kerasbert.utils.checks import check_choice, check_int
from kerasbert.utils.hardware import xla_on_cpu
from kerasbert.utils.io import read_json

ARCHITECTURE_FLAGS = ("num_layers", "hidden_dim", "num_heads", "intermediate_dim")
# Settings that may change when a run is resumed.
_RESUMABLE_CHANGES = ("steps", "resume", "verbose", "jit_compile", "keep_checkpoints", "distribution", "mesh")


@dataclasses.dataclass
class PretrainingResult:
    """What `pretrain` returns: the trained task model, its tokenizer, the
    history (a dict of lists) and the directory of the saved preset."""

    model: keras.Model
    tokenizer: object
    history: dict
    preset_dir: str


def _default_log_every(steps):
    # The largest divisor of `steps` up to 100 (and a tenth of the run).
    target = max(1, min(100, steps // 10))
    return next(d for d in range(target, 0, -1) if steps % d == 0)


def _check_precision_runs_here(precision, jit_compile):
    if precision == "mixed_float16" and jit_compile is not False and xla_on_cpu():
        raise ValueError(
            "precision='mixed_float16' with XLA cannot run on JAX's CPU backend (it has no "
            "float16 matmul accumulating in float32); use precision='mixed_bfloat16', or "
            "jit_compile=False, or a GPU."
        )


def training_files(train_files):
    patterns = [train_files] if isinstance(train_files, (str, os.PathLike)) else list(train_files)
    paths = sorted({p for pattern in patterns for p in glob.glob(os.fspath(pattern))})
    paths = [p for p in paths if os.path.isfile(p)]
    if not paths:
        raise FileNotFoundError(f"train_files={train_files!r} matches no file.")
    return paths


def _preset_description(preset):
    """(encoder config, tokenizer type or None, tokenizer options) of a
    built-in preset or a directory, without loading weights."""
    from kerasbert.presets import from_preset, get_preset, list_presets

    if preset in list_presets() and not os.path.isdir(preset):
        spec = get_preset(preset)
        tokenizer = dict(spec.get("tokenizer", {}))
        return dict(spec["encoder"]), tokenizer.pop("type", None), tokenizer
    config = from_preset(preset, load_weights=False).get_config()
    config = {k: v for k, v in config.items() if k not in ("name", "trainable", "dtype")}
    return config, None, {}


def _new_vocabulary(kind, options, paths, size, directory, preset):
    from kerasbert.tokenizers import training

    if kind is None:
        from kerasbert.tokenizers import (
            BytePairTokenizer,
            SentencePieceTokenizer,
            Tokenizer,
            WordPieceTokenizer,
        )

        existing = Tokenizer.from_preset(preset)
        kinds = {WordPieceTokenizer: "wordpiece", SentencePieceTokenizer: "sentencepiece",
                 BytePairTokenizer: "byte_pair"}
        kind = kinds[type(existing)]
        options = {"lowercase": getattr(existing, "lowercase", True)}
    lowercase = options.get("lowercase", True)
    if kind == "wordpiece":
        return training.train_wordpiece(
            paths, size, directory, lowercase=lowercase, strip_accents=options.get("strip_accents")
        )
    if kind == "sentencepiece":
        return training.train_sentencepiece(
            paths, size, directory, lowercase=lowercase, strip_accents=options.get("strip_accents", True)
        )
    return training.train_bpe(paths, size, directory)


def _build_encoder(config, settings, vocabulary_size):
    from kerasbert.encoder import Encoder
    from kerasbert.presets import from_preset

    overrides = {k: settings[k] for k in ARCHITECTURE_FLAGS if settings[k] is not None}
    if not settings["from_scratch"]:
        if overrides:
            raise ValueError(
                f"{', '.join(f'{k}={v}' for k, v in overrides.items())} changes the architecture, "
                "so the preset's weights cannot be used: add from_scratch=True (--from-scratch)."
            )
        encoder = from_preset(settings["preset"], dtype=settings["precision"])
        if encoder.vocabulary_size != vocabulary_size:
            raise ValueError(
                f"The preset's encoder has {encoder.vocabulary_size} token embeddings but the "
                f"vocabulary has {vocabulary_size} tokens; a new vocabulary needs from_scratch=True."
            )
        return encoder
    config = {**config, **overrides, "vocabulary_size": vocabulary_size}
    if config.get("num_layer_groups"):
        config["num_layer_groups"] = min(config["num_layer_groups"], config["num_layers"])
    config["max_sequence_length"] = max(config["max_sequence_length"], settings["sequence_length"])
    return Encoder(**config, dtype=settings["precision"])


# The rows and mask rate of each objective's data (`pretraining_dataset`):
# ModernBERT's masked LM masks 30% of packed rows; DeBERTa-v3's replaced
# tokens are ELECTRA's.
_OBJECTIVE_DATA = {"modernbert": ("mlm", 0.3), "deberta-v3": ("electra", 0.15)}

# The objectives that train an ElectraPretrainer (the encoder is its discriminator).
_REPLACED_TOKENS = ("electra", "deberta-v3")


def _task(encoder, settings):
    from kerasbert.tasks import BertPretrainer, ElectraPretrainer
    from kerasbert.tasks.electra import electra_generator

    objective = settings["objective"]
    if objective == "electra":
        generator = electra_generator(encoder, settings["generator_fraction"])
        return ElectraPretrainer(generator, encoder, seed=settings["seed"])
    if objective == "deberta-v3":
        # Half the discriminator's depth at its width (or the given fraction of it).
        generator = electra_generator(encoder, settings["generator_fraction"] or 1.0,
                                      num_layers=max(1, encoder.num_layers // 2))
        return ElectraPretrainer(generator, encoder, seed=settings["seed"], embedding_sharing="gradient_disentangled")
    if objective == "modernbert":
        return BertPretrainer(encoder, sentence_task=None)
    sentence_task = objective.partition("+")[2] or None
    if sentence_task and encoder.num_segments < 2:
        raise ValueError(
            f"objective={objective!r} packs sentence pairs into two segments, but the encoder has "
            f"num_segments={encoder.num_segments} (RoBERTa-style); use objective='mlm'."
        )
    return BertPretrainer(encoder, sentence_task=sentence_task)


def _dataset(documents, tokenizer, encoder, settings, start_step):
    from tensorflow.autograph.experimental import do_not_convert

    from kerasbert.preprocessing.pretraining_data import pretraining_dataset

    objective, mask_rate = _OBJECTIVE_DATA.get(settings["objective"], (settings["objective"], 0.15))
    dataset = pretraining_dataset(
        documents, tokenizer, objective, settings["sequence_length"], settings["batch_size"],
        mask_rate=mask_rate, whole_word=settings["whole_word"], segment_ids=bool(encoder.num_segments),
        seed=settings["seed"], start_step=start_step,
    )
    if objective == "mlm":
        # BertPretrainer without a sentence task: one "mlm" output.
        dataset = dataset.map(do_not_convert(lambda x, y, w: (x, {"mlm": y}, {"mlm": w})))
    elif objective == "electra":
        dataset = dataset.map(do_not_convert(lambda x, y, w: ({**x, "mask_weights": w}, y, w)))
    return dataset


class _RunRecorder(keras.callbacks.Callback):
    """After every `log_every` steps: extends the history and writes
    history.json; every `checkpoint_every` steps (and at the end) saves a
    checkpoint that includes that history. Only in the process that
    `writes` (the chief); the others keep the history in memory."""

    def __init__(self, output, history, settings, random_state=None, writes=True):
        super().__init__()
        self.output = output
        self.history = history
        self.settings = settings
        self.random_state = random_state
        self.writes = writes

    def on_train_batch_begin(self, batch, logs=None):
        if self.random_state:  # a resumed run: as the killed one left it
            checkpointing.set_global_random_state(self.random_state)
            self.random_state = None

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.settings["log_every"]
        entry = {"step": step, **{k: float(v) for k, v in (logs or {}).items()}}
        extend_history(self.output if self.writes else None, self.history, entry)
        if not self.writes:
            return
        if step % self.settings["checkpoint_every"] == 0 or step == self.settings["steps"]:
            directory = os.path.join(self.output, "checkpoints")
            checkpointing.save_checkpoint(directory, self.model, step, self.history)
            checkpointing.remove_old_checkpoints(directory, self.settings["keep_checkpoints"])


def pretrain(
    preset,
    objective,
    train_files,
    output,
    from_scratch=False,
    vocabulary_size=None,
    sequence_length=128,
    batch_size=32,
    steps=1000,
    num_layers=None,
    hidden_dim=None,
    num_heads=None,
    intermediate_dim=None,
    optimizer="adamw",
    learning_rate=1e-4,
    warmup_steps=None,
    weight_decay=0.01,
    clipnorm=1.0,
    accumulation_steps=1,
    precision="float32",
    jit_compile="auto",
    whole_word=False,
    generator_fraction=None,
    log_every=None,
    checkpoint_every=None,
    keep_checkpoints=2,
    seed=0,
    resume=False,
    distribution=None,
    mesh=None,
    callbacks=None,
    verbose=1,
):
    """Pretrains an encoder on plain-text files; returns a `PretrainingResult`.

    Args:
        preset: the architecture (and, without `from_scratch`, the weights
            and vocabulary) to start from: a built-in preset name or a
            preset / Hugging Face directory. For "electra" it is the
            discriminator; the generator is built from it.
        objective: "mlm" (dynamic masking on full-sentence rows, several
            documents packed per row with attention kept inside each:
            RoBERTa), "mlm+nsp" (BERT), "mlm+sop" (ALBERT), "electra",
            "modernbert" (ModernBERT's: "mlm" with 30% of the tokens
            masked; the head runs at the masked positions only) or
            "deberta-v3" (ELECTRA's replaced tokens with gradient-
            disentangled embedding sharing and a generator of half the
            discriminator's depth at its width; `ElectraPretrainer`).
        train_files: a glob pattern (or a list of them) of plain-text files,
            one sentence per line, a blank line between documents.
        output: the run's directory (see the module docstring).
        from_scratch: random initial weights instead of the preset's.
        vocabulary_size: train a new vocabulary of that size (of the
            preset's tokenizer type) on `train_files`; `None` uses the
            preset's vocabulary.
        sequence_length: the length of every row of a batch.
        batch_size: the rows of every batch.
        steps: training steps (batches) in all; with `accumulation_steps=k`
            the optimizer updates `steps / k` times.
        num_layers: shrink (or change) the preset's architecture, as the
            next three do; needs `from_scratch`.
        hidden_dim: as `num_layers`.
        num_heads: as `num_layers`.
        intermediate_dim: as `num_layers`.
        optimizer: see `kerasbert.optimizers.pretraining_optimizer`, as for
            the next five (linear warmup, then linear decay to 0 at the last
            update).
        learning_rate: the peak learning rate.
        warmup_steps: updates of linear warmup; default 10% of the updates.
        weight_decay: as `pretraining_optimizer`.
        clipnorm: as `pretraining_optimizer`.
        accumulation_steps: as `pretraining_optimizer`.
        precision: "float32", "mixed_bfloat16" or "mixed_float16" (with
            dynamic loss scaling).
        jit_compile: True, False or "auto": XLA on TensorFlow and JAX,
            eager on torch; on a TensorFlow CPU with bfloat16 matrix units
            (AMX, AVX512-BF16) "mixed_bfloat16" runs on TensorFlow's own
            kernels, which use them (`kerasbert.tasks.task.resolve_jit_compile`).
        whole_word: mask whole words.
        generator_fraction: ELECTRA's generator size relative to the
            discriminator; `None` for the paper's.
        log_every: steps per history entry (one Keras "epoch"); defaults to
            a divisor of `steps` near `steps / 10`, at most 100.
        checkpoint_every: steps between checkpoints, a multiple of
            `log_every` (default: `log_every`).
        keep_checkpoints: how many of the newest checkpoints to keep.
        seed: the seed of the initial weights, the examples, the masks and
            dropout: two runs with the same seed give the same weights.
        resume: continue the run in `output` from its newest checkpoint; it
            ends with the weights an uninterrupted run would have.
        distribution: None (one device), "data" or "model"; see
            `kerasbert.distribution.training_scope` and docs/distributed.md.
            `batch_size` is the global batch, split over the replicas.
        mesh: the `(batch, model)` device mesh of "model", e.g. "2x4" or
            (2, 4); default all devices on the model axis.
        callbacks: extra Keras callbacks for `fit`.
        verbose: `fit`'s verbosity (1: a progress bar).
    """
    # The run's settings are its arguments (recorded in run.json), less where
    # it is written and the callbacks.
    settings = {name: value for name, value in locals().items() if name not in ("output", "callbacks")}
    from kerasbert.tokenizers import Tokenizer

    check_choice("objective", objective, OBJECTIVES)
    check_choice("precision", precision, PRECISIONS)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("jit_compile", jit_compile, (True, False, "auto"))
    for name, value in [("sequence_length", sequence_length), ("batch_size", batch_size),
                        ("steps", steps), ("accumulation_steps", accumulation_steps),
                        ("keep_checkpoints", keep_checkpoints)]:
        check_int(name, value, 1)
    for name in ("vocabulary_size", "log_every", "checkpoint_every", *ARCHITECTURE_FLAGS):
        check_int(name, locals()[name], 1, allow_none=True)
    log_every = log_every or _default_log_every(steps)
    checkpoint_every = checkpoint_every or log_every
    if steps % log_every or checkpoint_every % log_every:
        raise ValueError(
            f"steps={steps} and checkpoint_every={checkpoint_every} must be multiples of "
            f"log_every={log_every} (one history entry per log_every steps)."
        )
    _check_precision_runs_here(precision, jit_compile)
    scope = training_scope(distribution, mesh, batch_size)
    paths = training_files(train_files)
    output = os.fspath(output)
    settings.update(
        preset=os.fspath(preset), train_files=paths, log_every=log_every,
        checkpoint_every=checkpoint_every, mesh=None if mesh is None else list(scope.mesh_shape),
    )
    config, kind, options = _preset_description(settings["preset"])
    _check_sequence_length(sequence_length, batch_size, num_heads or config["num_heads"], config, from_scratch)
    run_file = os.path.join(output, RUN_FILE)
    if os.path.isfile(run_file):
        if not resume:
            raise FileExistsError(
                f"{output} already holds a pretraining run; pass resume=True (--resume) to "
                "continue it, or choose another output directory."
            )
        previous = read_json(run_file, "run settings file")
        changed = {
            k: (previous.get(k), v) for k, v in settings.items()
            if k not in _RESUMABLE_CHANGES and previous.get(k) != v
        }
        if changed:
            raise ValueError(
                f"resume=True continues the run in {output}, which used other settings "
                f"(was, now): {changed}. Resume with the same settings or use a new output."
            )
    # Several processes: each checks the directory before the chief (process 0)
    # writes anything, and only the chief writes; the others read what it wrote.
    scope.barrier("kerasbert-pretrain-checked")
    tokenizer_dir = os.path.join(output, "tokenizer")
    if scope.is_chief:
        start_run(output, settings)
        # Vocabulary: made (or copied) once, then read back by every resume.
        if os.path.isdir(tokenizer_dir) and resume:
            tokenizer = Tokenizer.from_preset(tokenizer_dir)
        elif vocabulary_size:
            tokenizer = _new_vocabulary(kind, options, paths, vocabulary_size, tokenizer_dir, settings["preset"])
        else:
            tokenizer = Tokenizer.from_preset(settings["preset"])
            tokenizer.save_to_preset(tokenizer_dir)
    scope.barrier("kerasbert-pretrain-tokenizer")
    if not scope.is_chief:
        tokenizer = Tokenizer.from_preset(tokenizer_dir)

    with scope:
        model, recorder, preset_dir = _train(settings, config, tokenizer, paths, output, callbacks, scope.is_chief)
    scope.barrier("kerasbert-pretrain-done")  # the preset is whole when any process returns
    return PretrainingResult(model, tokenizer, recorder.history, preset_dir)


def _check_sequence_length(sequence_length, batch_size, heads, config, from_scratch):
    """Refuses windows longer than a preset's position table, and attention
    matrices no tensor can hold."""
    table = config["max_sequence_length"]
    if not from_scratch and sequence_length > table:
        raise ValueError(
            f"sequence_length={sequence_length} is longer than the preset's position table "
            f"(max_sequence_length={table}): use sequence_length <= {table}, or from_scratch=True "
            "(--from-scratch) for a new, longer table."
        )
    values = batch_size * heads * sequence_length**2
    if values >= 2**31:
        fits = math.isqrt((2**31 - 1) // (batch_size * heads))
        raise ValueError(
            f"sequence_length={sequence_length} with batch_size={batch_size} makes each layer's attention "
            f"matrix batch x heads x length^2 = {values:,} values, more than one tensor holds (2^31). "
            f"Use sequence_length <= {fits} at this batch size, or a smaller batch_size."
        )


def _train(settings, config, tokenizer, paths, output, callbacks, writes):
    """Builds, compiles and fits the task, then writes the final preset
    (`writes`: whether this process writes the run's files)."""
    from kerasbert.optimizers import pretraining_optimizer
    from kerasbert.preprocessing.sentence_pairs import read_documents

    objective, steps, verbose = settings["objective"], settings["steps"], settings["verbose"]
    log_every, accumulation_steps = settings["log_every"], settings["accumulation_steps"]
    keras.utils.set_random_seed(settings["seed"])
    encoder = _build_encoder(config, settings, tokenizer.vocabulary_size())
    model = _task(encoder, settings)
    model.compile(
        optimizer=pretraining_optimizer(
            settings["optimizer"], learning_rate=settings["learning_rate"],
            total_steps=steps // accumulation_steps, warmup_steps=settings["warmup_steps"],
            weight_decay=settings["weight_decay"], clipnorm=settings["clipnorm"],
            accumulation_steps=accumulation_steps,
        ),
        jit_compile=settings["jit_compile"],
    )

    start_step, history, random_state = 0, {}, {}
    latest = checkpointing.latest_checkpoint(os.path.join(output, "checkpoints")) if settings["resume"] else None
    if latest:
        start_step, history, random_state = checkpointing.restore_checkpoint(latest, model)
        if verbose:
            print(f"Resuming {output} at step {start_step} of {steps}.")
    documents = read_documents(paths)
    dataset = _dataset(documents, tokenizer, encoder, settings, start_step)
    recorder = _RunRecorder(output, history, settings, random_state, writes)
    board = [keras.callbacks.TensorBoard(os.path.join(output, "logs"), update_freq="epoch")] if writes else []
    if start_step < steps:
        model.fit(
            dataset,
            epochs=steps // log_every,
            initial_epoch=start_step // log_every,
            steps_per_epoch=log_every,
            shuffle=False,  # the stream is already in a seeded order
            callbacks=[recorder, *board, *(callbacks or [])],
            verbose=verbose,
        )
    if objective in _REPLACED_TOKENS:
        model.merge_embedding_residual()  # (DeBERTa-v3) as fit's end does, also when it did not run
        final = model.discriminator
    else:
        final = model.encoder
    preset_dir = os.path.join(output, "preset")
    if writes:
        final.save_to_preset(
            preset_dir, description=f"Pretrained by kerasbert ({objective}, {steps} steps) on "
            f"{len(paths)} file(s).",
        )
        tokenizer.save_to_preset(preset_dir)
    return model, recorder, preset_dir


