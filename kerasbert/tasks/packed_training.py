"""Training on packed rows: several examples to a row, few input shapes.

Where the model is compiled once per input shape (XLA on JAX, TensorFlow
under `jit_compile=True`), `fit` on in-memory examples padded each batch
to one of a few fitted lengths: on all-MiniLM-L6-v2's Rotten Tomatoes
snippets four programs (3.5-4.3 s each to compile on a 2-core CPU) and 24%
of the positions padding. A task with one output per example (a
classifier's logits, an embedder's vector) trains instead on rows that pack
several of a batch's examples each, as it predicts
(`kerasbert.tasks.packed_prediction`): the padding mask numbers a row's
examples 1, 2, 3, ..., so the encoder keeps each token's attention and
position inside its example, and the task pools each example apart. A
batch holds `batch_size` examples, as before, in as many rows as
first-fit decreasing needs, rounded up to one of a few fitted row counts
(`packed_row_counts`): one row width, two or three programs, and 10-13%
of the positions padding on those snippets.

The batch's features carry `EXAMPLE_SLOTS`, `(examples, 2)`: each
example's row and its number there. `FineTuningTask.call` takes such
features through `packed_trainer`, a graph of the task's own layers whose
outputs are the task's, one per example in the batch's order, so `y`,
`sample_weight`, the loss and the metrics are what they are on padded
batches. Examples longer than `PACKED_WIDTH` tokens are not packed: a
task with any such example trains on padded batches.
"""

import weakref

import keras
import numpy as np
from keras import ops

from kerasbert.distribution import check_global_batch
from kerasbert.tasks.inputs import (
    COMPILED_SHAPES,
    PADDING_MULTIPLE,
    SHAPE_COST,
    check_last_batch_splits,
    checked_batch_size,
    fitted_boundaries,
    tokenized_lengths,
)
from kerasbert.tasks.packed_prediction import PACKED_WIDTH, documents_per_row, pack_rows, place_rows
from kerasbert.tasks.task import encoder_inputs
from kerasbert.utils.optional import tf

# The feature of a packed batch that says where each example is: `(examples,
# 2)` int32, its row and its number in that row (1 for the row's first).
EXAMPLE_SLOTS = "example_slots"
# Examples a row of the packed graph may hold: rows are at most
# `PACKED_WIDTH` tokens wide and hold at most one example per
# `DOCUMENT_TOKENS` tokens.
TRAINING_DOCUMENTS = documents_per_row(PACKED_WIDTH)
# Random batches whose rows are counted to fit the row counts.
SAMPLED_BATCHES = 512

# task -> the graph of its layers on packed rows
_PACKED_TRAINERS = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="kerasbert")
class ExampleOutputs(keras.layers.Layer):
    """The outputs of a packed batch's examples, in the batch's order:
    from `outputs (rows, documents, ...)`, one per example slot, and
    `slots (examples, 2)`, each example's row and number there (from 1),
    `(examples, ...)`. Never casts (`autocast=False`)."""

    def __init__(self, documents, **kwargs):
        super().__init__(autocast=False, **kwargs)
        self.documents = documents

    def call(self, outputs, slots):
        flat = ops.reshape(outputs, (-1, *outputs.shape[2:]))  # (rows * documents, ...)
        slots = ops.cast(slots, "int32")
        index = slots[:, 0] * self.documents + slots[:, 1] - 1  # (examples,)
        return ops.take(flat, index, axis=0)  # (examples, ...)

    def compute_output_shape(self, outputs_shape, slots_shape):
        return (slots_shape[0], *outputs_shape[2:])

    def get_config(self):
        return {**super().get_config(), "documents": self.documents}


def packed_trainer(task):
    """The graph of `task`'s layers on packed rows (built once per task):
    its encoder's inputs and `EXAMPLE_SLOTS` -> the task's outputs for each
    example, from `task._packed_outputs`. Its weights are the task's."""
    if task not in _PACKED_TRAINERS:
        inputs = encoder_inputs(task.encoder)
        slots = keras.Input((2,), dtype="int32", name=EXAMPLE_SLOTS)
        sequence_output = task.encoder(inputs)["sequence_output"]  # (rows, width, hidden)
        outputs = task._packed_outputs(sequence_output, inputs["padding_mask"], TRAINING_DOCUMENTS)
        outputs = ExampleOutputs(TRAINING_DOCUMENTS, name="example_outputs")(outputs, slots)  # (examples, ...)
        _PACKED_TRAINERS[task] = keras.Model({**inputs, EXAMPLE_SLOTS: slots}, outputs, name=f"{task.name}_packed")
    return _PACKED_TRAINERS[task]


def epoch_batches(lengths, batch_size, shuffle, rng):
    """One epoch's batches of the examples of these `lengths`: lists of
    example indices, `batch_size` each but the last. In order without
    `shuffle`; with it, stratified by length: all but `len(lengths) %
    batch_size` random examples (the last batch) are sorted by length (equal
    lengths in random order) and cut into `batch_size` strata of
    consecutive lengths, and each batch takes one random example of every
    stratum. Every example is still in one batch an epoch, and each batch is
    a random sample of the examples (stratified sampling), but every batch
    holds about as many tokens, so that nearly all pack into the same number
    of rows: on MiniLM's Rotten Tomatoes snippets 11 or 12 rows of 80
    tokens, where random batches needed 9 to 14.

    >>> batches = epoch_batches(np.array([5, 1, 4, 2, 3, 6, 9]), 3, True, np.random.default_rng(0))
    >>> [len(b) for b in batches], sorted(np.concatenate(batches).tolist())
    ([3, 3, 1], [0, 1, 2, 3, 4, 5, 6])
    """
    count = len(lengths)
    if not shuffle:
        return [np.arange(begin, min(begin + batch_size, count)) for begin in range(0, count, batch_size)]
    full = count // batch_size  # whole batches
    order = rng.permutation(count)
    kept, rest = order[:full * batch_size], order[full * batch_size:]
    kept = kept[np.argsort(lengths[kept], kind="stable")]
    strata = rng.permuted(kept.reshape(batch_size, full), axis=1)  # (batch_size, full): a stratum a row
    return [strata[:, j] for j in range(full)] + ([rest] if len(rest) else [])


def packed_layout(lengths, batch_size, shuffle, rng, replicas=1):
    """`(width, row_counts)` for packed batches of examples of these
    `lengths` (tokens, at most `PACKED_WIDTH`): the row width, a multiple of
    `PADDING_MULTIPLE` from the longest example's up to 24 tokens wider,
    and the row counts batches are padded to, multiples of `replicas` (the
    data-parallel replicas that split each batch's rows), at most
    `COMPILED_SHAPES` below `batch_size` (the most a batch can need), which
    is last. Each width's counts are fitted as `fitted_boundaries` fits
    lengths, to the rows that the batches of a few epochs (`epoch_batches`,
    at most `SAMPLED_BATCHES` batches) need; a count beyond the first must
    save `SHAPE_COST` padded positions an epoch. The width kept pads the
    fewest positions, compilations counted."""
    count = len(lengths)
    steps = -(-count // batch_size)
    batches = []
    while len(batches) < min(steps, SAMPLED_BATCHES):
        epoch = epoch_batches(lengths, batch_size, shuffle, rng)
        # The last, partial batch has a program of its own anyway.
        batches += epoch[:count // batch_size] if count >= batch_size else epoch
        if not shuffle:
            break
    batches = batches[:SAMPLED_BATCHES]
    longest = int(-(-lengths.max() // PADDING_MULTIPLE) * PADDING_MULTIPLE)
    best = None
    for width in range(longest, min(longest + 24, PACKED_WIDTH) + 1, PADDING_MULTIPLE):
        documents = documents_per_row(width)
        needed = np.array([len(pack_rows(lengths[b], width, documents)) for b in batches])
        shape_cost = SHAPE_COST / width * len(needed) / steps  # in rows of the batches counted
        row_counts = fitted_boundaries(needed, batch_size, shapes=COMPILED_SHAPES, multiple=replicas,
                                       shape_cost=shape_cost)
        padded = np.asarray(row_counts)[np.searchsorted(row_counts, needed)]
        used = len(set(padded.tolist()))
        cost = padded.sum() * width * steps / len(needed) + SHAPE_COST * used
        if best is None or cost < best[0]:
            best = (cost, width, row_counts)
    return best[1], best[2]


class PackedBatches(keras.utils.PyDataset):
    """Batches of packed rows for `fit` and `evaluate`, a `keras.utils.PyDataset`:
    each `(features, y[, sample_weight])`, `batch_size` examples (the
    last batch fewer) in rows `width` tokens wide, the features with
    `EXAMPLE_SLOTS`, and each example's `y` and weight in the batch's
    order. Built by `packed_training_batches`.

    Each epoch's batches (`epoch_batches`) are drawn at its start, each
    batch packed as it is read: its examples into rows by first-fit
    decreasing (`pack_rows`, at most `width // DOCUMENT_TOKENS` a row),
    padded to the smallest of `row_counts` that holds them. Batches are
    NumPy arrays made on the thread that trains: no tf.data pipeline, whose
    Python-calling source (`from_generator`) left glibc's allocator mapping
    and unmapping the temporaries of later XLA programs (three times the
    page faults of a MiniLM `predict` after `fit`, 10% of its time).
    """

    def __init__(self, tokens, lengths, targets, *, batch_size, shuffle, width, row_counts, rng, replicas=1):
        super().__init__()
        self.tokens, self.lengths, self.targets = tokens, lengths, targets
        self.offsets = np.cumsum(lengths) - lengths  # each example's first token in `tokens`
        self.batch_size, self.shuffle, self.rng, self.replicas = batch_size, shuffle, rng, replicas
        self.width, self.row_counts = width, np.asarray(row_counts)
        self.documents = documents_per_row(width)
        self.batches = self._epoch()

    def _epoch(self):
        """An epoch's batches; data-parallel replicas split each batch's
        examples and rows, so a last batch is cut to a multiple of them (at
        most `replicas - 1` examples sit out an epoch, as on padded
        batches), and left out if that leaves none."""
        batches = epoch_batches(self.lengths, self.batch_size, self.shuffle, self.rng)
        kept = len(batches[-1]) // self.replicas * self.replicas
        return batches[:-1] + [batches[-1][:kept]] if kept else batches[:-1]

    @property
    def num_batches(self):
        return len(self.batches)

    def __len__(self):
        return len(self.batches)

    def on_epoch_end(self):
        if self.shuffle:
            self.batches = self._epoch()

    def __getitem__(self, index):
        examples = self.batches[index]
        rows = pack_rows(self.lengths[examples], self.width, self.documents)  # lists of indices into `examples`
        in_rows = np.concatenate(rows)
        chosen = examples[in_rows]  # the examples in row order
        sizes = self.lengths[chosen]
        starts = np.cumsum(sizes) - sizes
        where = np.repeat(self.offsets[chosen] - starts, sizes) + np.arange(sizes.sum())  # their tokens
        counts = [len(row) for row in rows]
        row_count = int(self.row_counts[np.searchsorted(self.row_counts, len(rows))])
        features = place_rows({k: v[where] for k, v in self.tokens.items()}, sizes, counts, row_count, self.width)
        slots = np.zeros((len(examples), 2), np.int32)
        slots[in_rows, 0] = np.repeat(np.arange(len(rows)), counts)
        slots[in_rows, 1] = np.concatenate([np.arange(1, n + 1) for n in counts])
        features[EXAMPLE_SLOTS] = slots
        element = (features, *(t[examples] for t in self.targets))
        return element if len(element) > 1 else features


def packed_training_batches(preprocessor, tokenized, y=None, sample_weight=None, *, batch_size=32, shuffle=False,
                            seed=None, input_names=None, replicas=1, cut_partial_batch=True):
    """In-memory examples, tokenized (`preprocessor.tokenize_examples`),
    with their targets and weights, as `PackedBatches` for `fit` (with
    `shuffle`) or `evaluate`; None when some example is longer than
    `PACKED_WIDTH` tokens. The examples are packed alone once, a chunk at a
    time (`tokenized_lengths`), and only their real tokens kept; the rows'
    width and counts are `packed_layout`'s. `seed` (default: drawn from
    NumPy's global generator, which `keras.utils.set_random_seed` seeds)
    draws the epochs' batches. `replicas` and `cut_partial_batch` are
    `make_dataset`'s.
    """
    batch_size = checked_batch_size(batch_size)
    check_global_batch(batch_size, replicas)
    if not cut_partial_batch:
        check_last_batch_splits(int(tf.nest.flatten(tokenized)[0].shape[0]), batch_size, replicas)
    kept = {}

    def keep(features):  # each example's real tokens, one after the other
        real = features["padding_mask"] > 0
        for key, value in features.items():
            kept.setdefault(key, []).append(value[real])

    _, lengths, _, _ = tokenized_lengths(preprocessor, None, batch_size=batch_size, input_names=input_names,
                                         check=keep, tokenized=tokenized)
    if not len(lengths) or lengths.max() > PACKED_WIDTH:
        return None
    rng = np.random.default_rng(np.random.randint(2**31) if seed is None else seed)
    width, row_counts = packed_layout(lengths, batch_size, shuffle, np.random.default_rng(rng.integers(2**31)),
                                      replicas)
    tokens = {key: np.concatenate(values) for key, values in kept.items()}
    targets = [np.asarray(v) for v in (y, sample_weight) if v is not None]
    return PackedBatches(tokens, lengths, targets, batch_size=batch_size, shuffle=shuffle, width=width,
                         row_counts=row_counts, rng=rng, replicas=replicas)
