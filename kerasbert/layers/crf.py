"""A linear-chain conditional random field (CRF) on top of token emissions,
for token classification (NER): exact log-likelihood for training, Viterbi
decoding for prediction, optional hard constraints such as IOB2's "I-X only
after B-X or I-X"."""

import keras
import numpy as np
from keras import ops

# Added to the score of a forbidden transition, start or end. Finite, so that
# no -inf ever reaches a logsumexp or a gradient; exp(-1e4) is exactly 0 in
# float32, so forbidden sequences carry no probability mass and never win
# the Viterbi max while an allowed one exists.
FORBIDDEN_SCORE = -1e4


def bio_transition_mask(labels):
    """The transitions and starts that are valid in the IOB2 (BIO) scheme.

    `I-X` may only follow `B-X` or `I-X`, and a sequence may not start with
    `I-X`; every other transition, start and end is allowed.

    Args:
        labels: the tag names in tag-id order, each `"O"`, `"B-<type>"` or
            `"I-<type>"`.

    Returns:
        `(allowed_transitions, allowed_starts)`: a `num_tags x num_tags` and a
        `num_tags` nested list of bools, for the `CRF` arguments of the same
        names (`allowed_transitions[i][j]`: may tag `j` follow tag `i`).

    Examples:
    >>> transitions, starts = bio_transition_mask(["O", "B-PER", "I-PER"])
    >>> transitions
    [[True, True, False], [True, True, True], [True, True, True]]
    >>> starts
    [True, True, False]
    """
    if isinstance(labels, str) or not all(isinstance(label, str) for label in labels):
        raise TypeError(f"`labels` must be a list of strings. Received: labels={labels!r}")
    labels = list(labels)
    if not labels:
        raise ValueError("`labels` must name at least one tag. Received: labels=[]")
    parsed = []  # (prefix, entity type)
    for label in labels:
        if label == "O":
            parsed.append(("O", None))
        elif label[:2] in ("B-", "I-") and len(label) > 2:
            parsed.append((label[0], label[2:]))
        else:
            raise ValueError(
                f"`labels` must be IOB2 tags: 'O', 'B-<type>' or 'I-<type>'. Received: label={label!r} "
                f"in labels={labels!r}"
            )
    allowed_transitions = [
        [to_prefix != "I" or (from_prefix != "O" and from_type == to_type) for to_prefix, to_type in parsed]
        for from_prefix, from_type in parsed
    ]
    allowed_starts = [prefix != "I" for prefix, _ in parsed]
    return allowed_transitions, allowed_starts


def _bool_matrix(value, shape, name):
    """A bool-like nested list or array as a nested list of Python bools of `shape`."""
    try:
        array = np.asarray(value)
    except ValueError as error:  # ragged nested lists
        raise ValueError(
            f"`{name}` must be a bool-like array of shape {shape}. Received a ragged value: {name}={value!r}"
        ) from error
    if array.shape != shape:
        raise ValueError(
            f"`{name}` must have shape {shape} (`num_tags` = {shape[0]}). Received shape {array.shape}: "
            f"{name}={value!r}"
        )
    if array.dtype != bool and not (array.dtype.kind in "iuf" and np.all((array == 0) | (array == 1))):
        raise ValueError(f"`{name}` must hold booleans (or 0/1). Received: {name}={value!r}")
    return array.astype(bool).tolist()


@keras.saving.register_keras_serializable(package="kerasbert")
class CRF(keras.layers.Layer):
    """A linear-chain CRF: Viterbi decoding when called, log-likelihood for
    training.

    The score of a tag sequence `y` over the unmasked positions
    `p_1 < ... < p_n` of a row is

        start[y_1] + sum_i emissions[p_i, y_i]
                   + sum_i transitions[y_{i-1}, y_i] + end[y_n]

    and `p(y | emissions)` is its softmax over all `num_tags ** n` sequences.
    Masked positions are skipped, not just cut off at the end: the chain links
    consecutive unmasked positions wherever they are, so a BERT NER model can
    unmask only the first sub-word of each word (mask `[0, 1, 0, 1, 1, 0]`)
    and the CRF sees one tag per word. A row with no unmasked position has
    log-likelihood 0 and decodes to zeros.

    Weights, all float32 and zero-initialised (so an untrained CRF decodes
    like a per-token argmax of the emissions): `transitions`
    `(num_tags, num_tags)` (`transitions[i, j]`: score of tag `i` followed by
    tag `j`), `start_transitions (num_tags,)` and `end_transitions
    (num_tags,)`.

    Constraints (`allowed_*`) add `FORBIDDEN_SCORE` (-1e4, a constant, not a
    weight) to every forbidden transition, start or end, in decoding and in
    the log-likelihood alike: the distribution is over allowed sequences
    only, and Viterbi never returns a forbidden one (as long as an allowed
    one exists). Gold sequences should therefore be allowed ones; a forbidden
    gold sequence gets a log-likelihood near -1e4. For IOB2 tags,
    `bio_transition_mask(labels)` gives the constraints.

    All arithmetic is float32 whatever the dtype policy: emissions are cast
    to float32 inside, and the layer does not autocast its variables, so it
    can sit on a `"mixed_float16"` or `"mixed_bfloat16"` model unchanged.

    Args:
        num_tags: number of tags (the emissions' last dimension).
        allowed_transitions: optional `(num_tags, num_tags)` bool-like nested
            list; `allowed_transitions[i][j]` is whether tag `j` may follow
            tag `i`. `None`: all allowed.
        allowed_starts: optional `(num_tags,)` bool-like list: tags that may
            begin a sequence. `None`: all allowed.
        allowed_ends: optional `(num_tags,)` bool-like list: tags that may
            end a sequence (e.g. for BIOES). `None`: all allowed.

    Call arguments:
        emissions: `(batch, seq, num_tags)` unnormalised tag scores, any
            float dtype.
        mask: optional `(batch, seq)` bool or int; positions where it is
            False/0 are skipped. Defaults to all positions.

    Returns:
        `(batch, seq)` int32, the most likely tag sequence (Viterbi), 0 at
        masked positions.

    Methods `log_likelihood(emissions, tags, mask=None)` and
    `negative_log_likelihood(emissions, tags, mask=None)` return `(batch,)`
    float32 for training; tags at masked positions are ignored (padding
    labels such as -100 are fine there).

    Examples:
    >>> import numpy as np
    >>> transitions, starts = bio_transition_mask(["O", "B-PER", "I-PER"])
    >>> crf = CRF(3, allowed_transitions=transitions, allowed_starts=starts)
    >>> emissions = np.array([[[0., 0., 5.], [9., 0., 0.], [0., 0., 1.], [0., 1., 0.]]], "float32")
    >>> mask = np.array([[1, 0, 1, 1]])
    >>> keras.ops.convert_to_numpy(crf(emissions, mask=mask))  # no I-PER first
    array([[1, 0, 2, 1]], dtype=int32)
    >>> nll = crf.negative_log_likelihood(emissions, np.array([[1, -100, 2, 1]]), mask)
    >>> tuple(nll.shape), keras.backend.standardize_dtype(nll.dtype)
    ((1,), 'float32')
    """

    def __init__(self, num_tags, allowed_transitions=None, allowed_starts=None, allowed_ends=None, **kwargs):
        # Variables are read in float32 even under a mixed policy, and float
        # inputs are not cast down on the way in.
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        self.supports_masking = True  # the decoded tags keep the input's mask
        if isinstance(num_tags, bool) or not isinstance(num_tags, (int, np.integer)) or num_tags < 1:
            raise ValueError(f"`num_tags` must be a positive integer. Received: num_tags={num_tags!r}")
        self.num_tags = int(num_tags)
        self.allowed_transitions = (
            None
            if allowed_transitions is None
            else _bool_matrix(allowed_transitions, (self.num_tags, self.num_tags), "allowed_transitions")
        )
        self.allowed_starts = (
            None if allowed_starts is None else _bool_matrix(allowed_starts, (self.num_tags,), "allowed_starts")
        )
        self.allowed_ends = (
            None if allowed_ends is None else _bool_matrix(allowed_ends, (self.num_tags,), "allowed_ends")
        )

        def penalty(allowed, shape):
            if allowed is None:
                return np.zeros(shape, "float32")
            return np.where(np.asarray(allowed), 0.0, FORBIDDEN_SCORE).astype("float32")

        n = self.num_tags
        self._transition_penalty = penalty(self.allowed_transitions, (n, n))
        self._start_penalty = penalty(self.allowed_starts, (n,))
        self._end_penalty = penalty(self.allowed_ends, (n,))

    def build(self, emissions_shape):
        self._check_emissions_shape(emissions_shape)
        n = self.num_tags
        self.transitions = self.add_weight(name="transitions", shape=(n, n), initializer="zeros", dtype="float32")
        self.start_transitions = self.add_weight(
            name="start_transitions", shape=(n,), initializer="zeros", dtype="float32"
        )
        self.end_transitions = self.add_weight(name="end_transitions", shape=(n,), initializer="zeros", dtype="float32")
        self.built = True

    def _check_emissions_shape(self, shape):
        shape = tuple(shape)
        if len(shape) != 3:
            raise ValueError(
                f"`emissions` must have shape (batch, seq, num_tags={self.num_tags}). Received shape {shape}."
            )
        if shape[-1] is not None and shape[-1] != self.num_tags:
            raise ValueError(
                f"The last dimension of `emissions` must equal num_tags={self.num_tags}. "
                f"Received emissions shape {shape}."
            )

    # --- shared preparation ---------------------------------------------------

    def _scores(self):
        """The constrained float32 weights: transitions (tags, tags), start (tags,), end (tags,)."""
        transitions = ops.cast(self.transitions, "float32") + ops.convert_to_tensor(self._transition_penalty)
        start = ops.cast(self.start_transitions, "float32") + ops.convert_to_tensor(self._start_penalty)
        end = ops.cast(self.end_transitions, "float32") + ops.convert_to_tensor(self._end_penalty)
        return transitions, start, end

    def _prepare(self, emissions, mask):
        """float32 emissions (batch, seq, tags) and three (batch, seq) bool
        masks: unmasked positions, the first and the last unmasked one of
        each row (where the chain starts and ends)."""
        emissions = ops.convert_to_tensor(emissions)
        self._check_emissions_shape(emissions.shape)
        if not self.built:
            self.build(emissions.shape)
        emissions = ops.cast(emissions, "float32")  # (batch, seq, tags)
        if mask is None:
            mask = ops.ones_like(emissions[:, :, 0], dtype="bool")
        else:
            mask = ops.convert_to_tensor(mask)
            if len(mask.shape) != 2 or any(
                a is not None and b is not None and a != b for a, b in zip(mask.shape, emissions.shape[:2])
            ):
                raise ValueError(
                    f"`mask` must have shape (batch, seq) = {tuple(emissions.shape[:2])} like the emissions. "
                    f"Received mask shape {tuple(mask.shape)}."
                )
            mask = ops.cast(mask, "bool")  # (batch, seq)
        count = ops.cumsum(ops.cast(mask, "int32"), axis=1)  # (batch, seq) unmasked positions so far
        first = ops.logical_and(mask, ops.equal(count, 1))
        last = ops.logical_and(mask, ops.equal(count, count[:, -1:]))
        return emissions, mask, first, last

    def _pack(self, emissions, mask, first, last):
        """One time-major float32 tensor to scan over: (seq, batch, tags + 3).

        Keras' TensorFlow `scan` fails on several `xs` of unknown length
        (`Input((None, num_tags))`), so the three masks travel as extra 0/1
        columns of the emissions."""
        columns = [ops.cast(column, "float32")[:, :, None] for column in (mask, first, last)]  # (batch, seq, 1)
        packed = ops.concatenate([emissions, *columns], axis=-1)  # (batch, seq, tags + 3)
        return ops.transpose(packed, (1, 0, 2))  # (seq, batch, tags + 3)

    def _unpack(self, step_inputs):
        """(batch, tags + 3) -> emissions (batch, tags) and the unmasked,
        first and last flags (batch,) as bools."""
        n = self.num_tags
        flags = [ops.greater(step_inputs[:, n + i], 0.5) for i in range(3)]
        return (step_inputs[:, :n], *flags)

    # --- decoding -------------------------------------------------------------

    def call(self, emissions, mask=None):
        transitions, start, end = self._scores()
        emissions, mask, first, last = self._prepare(emissions, mask)
        # (batch, 1) + (tags,) -> (batch, tags): every tag pointing to itself
        identity = ops.zeros_like(mask, dtype="int32")[:, :1] + ops.arange(self.num_tags, dtype="int32")

        def forward(carry, inputs):
            score, _ = carry  # (batch, tags): best score of a path ending in each tag
            emission, unmasked, is_first, _ = self._unpack(inputs)  # (batch, tags), 3 x (batch,)
            # (batch, prev, 1) + (1, prev, next) -> (batch, prev, next)
            candidates = score[:, :, None] + transitions[None]
            chained = ops.max(candidates, axis=1) + emission  # (batch, tags)
            started = start[None] + emission
            new_score = ops.where(is_first[:, None], started, ops.where(unmasked[:, None], chained, score))
            # Masked steps and the first step point each tag to itself, so
            # backtracking walks through them unchanged.
            linked = ops.logical_and(unmasked, ops.logical_not(is_first))
            backpointers = ops.where(linked[:, None], ops.cast(ops.argmax(candidates, axis=1), "int32"), identity)
            return (new_score, backpointers), (new_score, backpointers)  # TF's scan: outputs shaped like the carry

        init = (ops.zeros_like(emissions[:, 0]), identity)
        (score, _), (_, backpointers) = ops.scan(forward, init, self._pack(emissions, mask, first, last))
        last_tag = ops.cast(ops.argmax(score + end[None], axis=1), "int32")  # (batch,)

        def backward(tag, step_backpointers):
            # tag: (batch,) best tag at this step; step_backpointers: (batch, tags)
            previous = ops.take_along_axis(step_backpointers, tag[:, None], axis=1)[:, 0]
            return previous, tag

        _, tags = ops.scan(backward, last_tag, backpointers, reverse=True)  # (seq, batch)
        tags = ops.transpose(tags, (1, 0))  # (batch, seq)
        return ops.where(mask, tags, ops.zeros_like(tags))

    # --- training -------------------------------------------------------------

    def log_likelihood(self, emissions, tags, mask=None):
        """log p(tags | emissions) over the unmasked positions.

        Args:
            emissions: `(batch, seq, num_tags)`, any float dtype.
            tags: `(batch, seq)` integer gold tags; values at masked positions
                are ignored (may be -1, -100, ...).
            mask: optional `(batch, seq)` bool/int; False/0 skips a position.

        Returns:
            `(batch,)` float32; 0 for rows with no unmasked position.
        """
        transitions, start, end = self._scores()
        emissions, mask, first, last = self._prepare(emissions, mask)
        gold = self._gold_score(emissions, tags, mask, first, last, transitions, start, end)
        log_partition = self._log_partition(self._pack(emissions, mask, first, last), transitions, start, end)
        return ops.where(ops.any(mask, axis=1), gold - log_partition, ops.zeros_like(gold))

    def _gold_score(self, emissions, tags, mask, first, last, transitions, start, end):
        """(batch,) score of the given tag sequences, without a loop."""
        n = self.num_tags
        tags = ops.cast(ops.convert_to_tensor(tags), "int32")
        tags = ops.where(mask, ops.clip(tags, 0, n - 1), ops.zeros_like(tags))  # (batch, seq), padding labels out

        def masked_sum(values, where):  # (batch, seq) -> (batch,)
            return ops.sum(ops.where(where, values, ops.zeros_like(values)), axis=1)

        score = masked_sum(ops.take_along_axis(emissions, tags[:, :, None], axis=2)[:, :, 0], mask)
        score += masked_sum(ops.take(start, tags), first) + masked_sum(ops.take(end, tags), last)
        # Transitions link consecutive unmasked positions wherever they are:
        # move the unmasked tags to the front of the row, in order, and pair
        # neighbours there.
        positions = ops.cumsum(ops.ones_like(tags), axis=1) - 1  # (batch, seq): 0, 1, 2, ...
        seq = ops.shape(tags)[1]
        order = ops.argsort(ops.where(mask, positions, positions + seq), axis=1)
        packed_tags = ops.take_along_axis(tags, order, axis=1)  # (batch, seq): unmasked tags first
        pair_scores = ops.take(ops.reshape(transitions, (-1,)), packed_tags[:, :-1] * n + packed_tags[:, 1:])
        count = ops.sum(ops.cast(mask, "int32"), axis=1)  # (batch,)
        return score + masked_sum(pair_scores, ops.less(positions[:, 1:], count[:, None]))

    def _log_partition(self, packed, transitions, start, end):
        """(batch,) log of the sum of exp(score) over all tag sequences.

        The forward algorithm, with the forward-backward marginals as its
        gradient (written out rather than left to autodiff: the TensorFlow
        scan cannot be differentiated under XLA, and the marginals cost one
        more scan rather than a stored tape of every step).
        """

        @ops.custom_gradient
        def log_partition(packed, transitions, start, end):
            emissions = packed[:, :, : self.num_tags]  # (seq, batch, tags)

            def forward(carry, inputs):
                alpha, _ = carry  # (batch, tags): log-sum of the paths ending in each tag here
                emission, unmasked, is_first, _ = self._unpack(inputs)
                # (batch, prev, 1) + (1, prev, next) -> logsumexp over prev
                chained = ops.logsumexp(alpha[:, :, None] + transitions[None], axis=1) + emission
                started = start[None] + emission
                alpha = ops.where(is_first[:, None], started, ops.where(unmasked[:, None], chained, alpha))
                return (alpha, alpha), (alpha, alpha)  # TF's scan: outputs shaped like the carry

            zeros = ops.zeros_like(emissions[0])  # (batch, tags)
            (alpha, _), (alphas, _) = ops.scan(forward, (zeros, zeros), packed)  # alphas: (seq, batch, tags)
            log_z = ops.logsumexp(alpha + end[None], axis=1)  # (batch,)

            def grad(*args, upstream=None):
                if upstream is None:
                    (upstream,) = args

                def backward(carry, inputs):
                    # following: (batch, tags) emission + beta of the next unmasked position
                    following, _ = carry
                    emission, unmasked, _, is_last = self._unpack(inputs)
                    # (batch, 1, next) + (1, prev, next) -> logsumexp over next
                    chained = ops.logsumexp(following[:, None, :] + transitions[None], axis=2)
                    beta = ops.where(is_last[:, None], ops.broadcast_to(end[None], ops.shape(chained)), chained)
                    following = ops.where(unmasked[:, None], emission + beta, following)
                    return (following, beta), (following, beta)

                # betas: (seq, batch, tags) log-sum of the continuations after each tag
                _, (_, betas) = ops.scan(backward, (zeros, zeros), packed, reverse=True)
                unmasked, is_first, is_last = (ops.greater(packed[:, :, self.num_tags + i], 0.5) for i in range(3))
                weight = upstream[None, :, None]  # (1, batch, 1)
                # p(tag at t = j): (seq, batch, tags)
                node = ops.exp(alphas + betas - log_z[None, :, None])
                node = ops.where(unmasked[:, :, None], node * weight, ops.zeros_like(node))
                d_start = ops.sum(ops.where(is_first[:, :, None], node, ops.zeros_like(node)), axis=(0, 1))
                d_end = ops.sum(ops.where(is_last[:, :, None], node, ops.zeros_like(node)), axis=(0, 1))
                # p(tag at the previous unmasked position = i, tag at t = j):
                # (seq, batch, prev, 1) + (1, 1, prev, next) + (seq, batch, 1, next)
                previous = ops.concatenate([zeros[None], alphas[:-1]], axis=0)  # alpha carried into step t
                pair = previous[:, :, :, None] + transitions[None, None] + (emissions + betas)[:, :, None, :]
                pair = ops.exp(pair - log_z[None, :, None, None]) * weight[:, :, :, None]
                linked = ops.logical_and(unmasked, ops.logical_not(is_first))[:, :, None, None]
                d_transitions = ops.sum(ops.where(linked, pair, ops.zeros_like(pair)), axis=(0, 1))
                d_packed = ops.concatenate([node, ops.zeros_like(packed[:, :, self.num_tags :])], axis=-1)
                return d_packed, d_transitions, d_start, d_end

            return log_z, grad

        return log_partition(packed, transitions, start, end)

    def negative_log_likelihood(self, emissions, tags, mask=None):
        """`-log_likelihood(emissions, tags, mask)`, `(batch,)` float32: the
        per-row training loss (average it, or let a Keras loss reduction do
        it)."""
        return -self.log_likelihood(emissions, tags, mask)

    # --- Keras plumbing -------------------------------------------------------

    def compute_output_shape(self, emissions_shape, mask_shape=None):
        return tuple(emissions_shape)[:-1]

    def compute_output_spec(self, emissions, mask=None):
        return keras.KerasTensor(self.compute_output_shape(emissions.shape), dtype="int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            num_tags=self.num_tags,
            allowed_transitions=self.allowed_transitions,
            allowed_starts=self.allowed_starts,
            allowed_ends=self.allowed_ends,
        )
        return config
