"""Unicode NFC in TensorFlow ops, aligned with the input as the `tokenizers`
library (transformers' fast tokenizers) aligns it.

NFC decomposes every character canonically, sorts each run of non-starters
by combining class (stably), then joins each starter with the following
characters that it is not blocked from and that form a primary composite
with it. The tables come from `data/nfc_unicode.npz`, read off the reference
(tools/make_nfc_tables.py), so that they are of its Unicode version.

The reference streams (character, change) pairs: a decomposition's first
character replaces its input character (0), the others are inserted (+1);
they move with their characters when reordered; a composite's change is the
sum of its parts' less one per part it absorbed. Each output character is
then aligned with the input character at its place in that stream: the one
after all input characters the earlier output characters replaced (an
inserted one: the one before), so that a composite made of two input
characters spans only the first.
"""

import functools
import os

import numpy as np

from kerasbert.tokenizers.unicode import _table, _table_mapping
from kerasbert.utils.optional import tf
from kerasbert.utils.ragged import row_ids, substitute

_PATH = os.path.join(os.path.dirname(__file__), "data", "nfc_unicode.npz")
_PAIR = 1 << 21  # code points take 21 bits: the pair (a, b) is a * _PAIR + b


@functools.lru_cache(maxsize=1)
def _tables():
    with np.load(_PATH) as data:
        return {k: data[k] for k in data.files}


def _previous(x, fill):
    """x[i - 1] at i, `fill` at the start."""
    return tf.concat([[fill], x], 0)[:-1]


def _sorted_member(keys, x):
    """Whether each of `x` is in `keys` (sorted, ending with a sentinel above
    every code point)."""
    return tf.equal(tf.gather(keys, tf.searchsorted(keys, x)), x)


class NFC:
    """Canonical composition, as TensorFlow constants built once. Its
    lookup table is `compose_table`, which the tokenizer that owns it keeps
    as an attribute of its own, so that a SavedModel carries it.

    Call it on code points `(batch, None)` (ragged, int) to get the
    normalised code points `(batch, None)` (int32) and the span
    `[start, end)` of input characters (places in the row) each one is
    aligned with, flat `(chars,)` int64.
    """

    def __init__(self):
        t = _tables()
        self._decomposition = tuple(tf.constant(a) for a in _table(_table_mapping(t, "decomposition")))
        sentinel = [0x110000]
        self._class_keys = tf.constant(np.concatenate([t["class_keys"], sentinel]).astype(np.int64))
        self._class_values = tf.constant(np.concatenate([t["class_values"], [0]]).astype(np.int64))
        firsts, seconds = t["composition_first"].astype(np.int64), t["composition_second"].astype(np.int64)
        self._seconds = tf.constant(np.concatenate([np.unique(seconds), sentinel]).astype(np.int64))
        self.compose_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(firsts * _PAIR + seconds), tf.constant(t["composition_result"].astype(np.int64))
            ),
            default_value=-1,
        )

    def _combining_class(self, value):
        slot = tf.searchsorted(self._class_keys, value)
        return tf.where(tf.equal(tf.gather(self._class_keys, slot), value), tf.gather(self._class_values, slot), tf.zeros_like(value))

    def __call__(self, chars):
        input_start = chars.row_starts()
        # 1. Canonical decomposition.
        cps = tf.cast(chars.flat_values, tf.int32)
        value, owner, part = substitute(cps, *self._decomposition, tf.zeros_like(cps, tf.bool))
        value = tf.cast(value, tf.int64)  # (k,)
        row = tf.gather(row_ids(chars), owner)
        change = tf.cast(part > 0, tf.int64)
        ccc = self._combining_class(value)
        size = tf.size(value, tf.int64)
        row_start = tf.not_equal(row, _previous(row, -1))
        # 2. Canonical order: each run of non-starters sorted by class.
        run = tf.cumsum(tf.cast((ccc == 0) | _previous(ccc == 0, True) | row_start, tf.int64)) - 1
        order = tf.argsort(run * 256 + ccc, stable=True)
        value, ccc, change = (tf.gather(t, order) for t in (value, ccc, change))
        absorbed, composites = self._compose_blocks(value, ccc, change, row, row_start, chars.nrows())
        # absorbed: (a,) positions joined into the starter before them
        # composites: (block starts, values, changes) of the starters that changed
        starts, new_values, new_changes = composites
        value = tf.tensor_scatter_nd_update(value, starts[:, None], new_values)
        change = tf.tensor_scatter_nd_update(change, starts[:, None], new_changes)
        keep = tf.equal(tf.scatter_nd(absorbed[:, None], tf.ones_like(absorbed), [size]), 0)
        value, change, row = (tf.boolean_mask(t, keep) for t in (value, change, row))
        # 3. Alignment with the input characters.
        consumed = tf.where(change <= 0, 1 - change, tf.zeros_like(change))
        place = tf.cumsum(consumed, exclusive=True) - tf.gather(input_start, row)
        place = tf.where(change <= 0, place, place - 1)
        start = tf.maximum(place, 0)
        end = tf.where(place < 0, tf.zeros_like(place), place + 1)
        rows = tf.cast(chars.nrows(), tf.int32)
        lengths = tf.math.bincount(tf.cast(row, tf.int32), minlength=rows, dtype=chars.row_splits.dtype)[:rows]
        normalized = tf.RaggedTensor.from_row_lengths(tf.cast(value, tf.int32), lengths, validate=False)
        return normalized, start, end

    def _compose_blocks(self, value, ccc, change, row, row_start, num_rows):
        """Canonical composition on decomposed, ordered text. A block is a
        starter (its composee) with what follows it up to the next starter,
        except starters that are only ever second in a pair (Hangul vowels and
        trailing consonants, a few vowel signs), which may join the composee
        when every mark before them joined it. Each round takes, in every
        block still going, the next mark that can join (second in some pair,
        not blocked by an earlier mark of its class), or that starter."""
        size = tf.size(value, tf.int64)
        index = tf.range(size)
        starter = tf.equal(ccc, 0)
        second = _sorted_member(self._seconds, value)
        big = size + 1
        first_starter = tf.math.unsorted_segment_min(tf.where(starter, index, big), row, num_rows)
        block_start = row_start | (starter & ~second) | tf.equal(index, tf.gather(first_starter, row))
        block_first = tf.boolean_mask(index, block_start)  # (blocks,)
        block_end = tf.concat([block_first[1:], [size]], 0)
        # Sub-runs: the composee's marks, then each such starter's marks.
        subrun = tf.cumsum(tf.cast(block_start | starter, tf.int64)) - 1
        key = subrun * 256 + ccc  # non-decreasing
        group = tf.cumsum(tf.cast(block_start | starter | tf.not_equal(ccc, _previous(ccc, -1)), tf.int64)) - 1
        first_other = tf.math.unsorted_segment_min(tf.where(~starter & ~second, index, big), group, size + 1)
        eligible = ~starter & second & (index < tf.gather(first_other, group))
        eligible_at = tf.concat([tf.boolean_mask(index, eligible), [size]], 0)
        joining_at = tf.concat([tf.boolean_mask(index, starter & second), [size]], 0)

        def next_at(positions, x):
            return tf.gather(positions, tf.searchsorted(positions, x))

        def lookup(t, x):
            return tf.gather(t, tf.minimum(x, size - 1))

        def compose(first, x):
            return self.compose_table.lookup(first * _PAIR + lookup(value, x))

        has_composee = tf.gather(starter, block_first)
        after = block_first + 1
        going = has_composee & (
            (next_at(eligible_at, after) < block_end) | (next_at(joining_at, after) < block_end)
        )
        block = tf.boolean_mask(tf.range(tf.size(block_first, tf.int64)), going)
        first = tf.boolean_mask(block_first, going)
        state = (block, tf.gather(value, first), tf.gather(change, first), first, -tf.ones_like(first), first,
                 tf.zeros_like(first))
        empty = tf.zeros([0], tf.int64)

        def keep_going(block, *_):
            return tf.size(block) > 0

        def step(block, comp, chg, p, last, run_first, run_absorbed, done_block, done_comp, done_chg, absorbed):
            end = tf.gather(block_end, block)
            joining = tf.minimum(next_at(joining_at, p + 1), end)
            low = tf.searchsorted(key, lookup(subrun, p) * 256 + last, side="right", out_type=tf.int64)
            mark = next_at(eligible_at, tf.maximum(low, p + 1))
            mark_ok = mark < joining
            all_joined = tf.equal(run_absorbed, joining - run_first - 1)
            join_ok = ~mark_ok & (joining < end) & all_joined
            target = tf.where(mark_ok, mark, joining)
            result = compose(comp, target)
            success = (mark_ok | join_ok) & (result >= 0)
            absorbed = tf.concat([absorbed, tf.boolean_mask(target, success)], 0)
            comp = tf.where(success, result, comp)
            chg = tf.where(success, chg + lookup(change, target) - 1, chg)
            p = tf.where(mark_ok | join_ok, target, p)
            joined = join_ok & success
            last = tf.where(mark_ok & ~success, lookup(ccc, target), tf.where(joined, -tf.ones_like(last), last))
            run_first = tf.where(joined, target, run_first)
            run_absorbed = tf.where(joined, tf.zeros_like(run_absorbed), run_absorbed + tf.cast(mark_ok & success, tf.int64))
            more = mark_ok | joined
            done = ~more
            done_block = tf.concat([done_block, tf.boolean_mask(block, done)], 0)
            done_comp = tf.concat([done_comp, tf.boolean_mask(comp, done)], 0)
            done_chg = tf.concat([done_chg, tf.boolean_mask(chg, done)], 0)
            kept = (tf.boolean_mask(t, more) for t in (block, comp, chg, p, last, run_first, run_absorbed))
            return (*kept, done_block, done_comp, done_chg, absorbed)

        loop_vars = (*state, empty, empty, empty, empty)
        out = tf.while_loop(
            keep_going, step, loop_vars,
            shape_invariants=tuple(tf.TensorShape([None]) for _ in loop_vars),
            parallel_iterations=1,
        )
        done_block, done_comp, done_chg, absorbed = out[-4:]
        return absorbed, (tf.gather(block_first, done_block), done_comp, done_chg)
