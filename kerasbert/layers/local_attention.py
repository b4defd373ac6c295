"""Sliding-window attention in blocks: memory and time linear in the
sequence length."""

from keras import ops


def _padded(x, before, after):
    """`x (batch, seq, ...)` with `before` and `after` zero rows around it."""
    shape = ops.shape(x)
    zeros = [ops.zeros((shape[0], n, *shape[2:]), x.dtype) for n in (before, after)]
    return ops.concatenate([zeros[0], x, zeros[1]], axis=1)


def local_attention(query, key, value, padding_mask, window, scale, probs_dropout=None):
    """Attention in which a token attends only to tokens at most
    `window // 2` positions away, computed block by block: `query`, `key`,
    `value (batch, seq, heads, head_dim)` -> `(batch, seq, heads,
    head_dim)`.

    The sequence is cut into blocks of `window // 2` rows; the queries of a
    block meet the keys of that block and its two neighbours, the only ones
    within reach. Scores are `(batch, blocks, heads, block, 3 * block)`: 3 ×
    `window // 2` per query whatever the sequence's length, where the full
    score matrix holds `seq`. `padding_mask (batch, seq)` (0 at padding, a
    document id >= 1 at real tokens) masks keys as
    `kerasbert.encoder.document_attention_mask` does: a real query sees
    the real keys of its own document, a padding query every real key. A
    query with no key in reach (padding far from every real token) averages
    its three blocks' values. Logits and softmax are float32;
    `probs_dropout` (a layer), when given, drops out the probabilities.

    Examples:
    >>> import numpy as np
    >>> x = np.random.default_rng(0).normal(size=(1, 9, 2, 4)).astype("float32")
    >>> out = local_attention(x, x, x, np.ones((1, 9), "int32"), window=4, scale=0.5)
    >>> tuple(out.shape)
    (1, 9, 2, 4)
    """
    batch, seq, heads, head_dim = ops.shape(query)
    block = max(window // 2, 1)
    blocks = (seq + block - 1) // block
    tail = blocks * block - seq  # zero rows that complete the last block

    def neighbours(x):
        """(batch, seq, ...) -> (batch, blocks, 3 * block, ...): each block's
        rows with those of the blocks before and after it (zeros past the
        ends)."""
        x = _padded(x, block, tail + block)  # (batch, (blocks + 2) * block, ...)
        rest = ops.shape(x)[2:]
        parts = [ops.reshape(x[:, i * block:i * block + blocks * block], (batch, blocks, block, *rest))
                 for i in range(3)]
        return ops.concatenate(parts, axis=2)

    queries = ops.reshape(_padded(query, 0, tail), (batch, blocks, block, heads, head_dim))
    keys, values = neighbours(key), neighbours(value)  # (batch, blocks, 3 * block, heads, head_dim)
    documents = ops.cast(padding_mask, "int32")
    key_documents = neighbours(documents)[:, :, None, :]  # (batch, blocks, 1, 3 * block)
    query_documents = ops.reshape(_padded(documents, 0, tail), (batch, blocks, block))[..., None]
    # Query row r of a block and key column c of its neighbourhood are
    # r - (c - block) positions apart, the same in every block.
    distance = ops.arange(block)[:, None] - (ops.arange(3 * block)[None, :] - block)  # (block, 3 * block)
    allowed = (ops.abs(distance) <= window // 2)[None, None] & ops.not_equal(key_documents, 0) & (
        ops.equal(query_documents, key_documents) | ops.equal(query_documents, 0)
    )  # (batch, blocks, block, 3 * block)
    logits = ops.cast(ops.einsum("bnqhd,bnkhd->bnhqk", queries, keys), "float32") * scale
    logits = ops.where(allowed[:, :, None], logits, -1e9)  # (batch, blocks, heads, block, 3 * block)
    probs = ops.cast(ops.softmax(logits, axis=-1), values.dtype)
    if probs_dropout is not None:
        probs = probs_dropout(probs, training=True)
    context = ops.einsum("bnhqk,bnkhd->bnqhd", probs, values)  # (batch, blocks, block, heads, head_dim)
    return ops.reshape(context, (batch, blocks * block, heads, head_dim))[:, :seq]
