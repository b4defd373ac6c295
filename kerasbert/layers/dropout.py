"""Dropout whose keep mask is an integer hash, fused into the kernel that applies it."""

import keras
import numpy as np
from keras import ops

from kerasbert.utils.xla import traced_for_xla

_WORD_RANGE = 1 << 32
_GOLDEN = np.uint32(0x9E3779B9)


@keras.saving.register_keras_serializable(package="kerasbert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with a cheaper keep mask under XLA (JAX, and TensorFlow with `jit_compile`).

    Keras draws one 32-bit random number per element (threefry on JAX,
    Philox on TensorFlow) in a kernel of its own, whose output goes through
    memory before the mask is applied. Here each element's 32 bits are a
    hash of its flat index under a key mixed from the call's seed: two
    rounds of a multiply-xorshift integer mix (a counter-based generator
    like Philox and threefry, with fewer rounds). It is plain integer
    arithmetic in `keras.ops`, so XLA fuses it into the elementwise kernel
    that applies the mask and no random tensor is written or read. An
    element is dropped when its bits are below `round(rate * 2**32)`: the
    realised rate is `rate` to within 2**-33, and kept elements are scaled
    by the inverse of the realised keep probability, keeping the layer
    unbiased.

    On a BERT-small MLM train step, 16-bit random draws were 10%
    (JAX) and 5% (TensorFlow) faster than Keras's dropout, and this hash
    another 2% and 4% faster than those draws (docs/performance_history.md). The masks
    differ from Keras's, not their distribution: `tests/test_dropout.py`
    checks the rate at several thresholds, the scale, and the independence
    of elements at strides of the index and of successive calls. PyTorch
    keeps Keras's path (`torch.nn.functional.dropout` is already a fused
    kernel), and so does TensorFlow outside XLA (`jit_compile=False`, the
    default on CPUs), where the hash would run as some twenty kernels of its
    own: fine-tuning MiniLM there, steps with it took as long as with
    Keras's dropout, and the first step (its trace) 1.1-1.9 s longer. A
    `noise_shape` and an active
    `keras.distribution` keep Keras's path too (see docs/distributed.md).

    It takes the arguments of `keras.layers.Dropout`, which it subclasses:
    `rate`, the fraction of the inputs to drop, in [0, 1); `noise_shape`
    and `seed`, as there.

    Examples:
    >>> import numpy as np
    >>> layer = Dropout(0.5, seed=1)
    >>> y = layer(np.ones((2, 1000), "float32"), training=True)
    >>> sorted(set(np.round(np.asarray(y), 3).ravel().tolist()))
    [0.0, 2.0]
    """

    def call(self, inputs, training=False):
        if (
            not training
            or not 0 < self.rate < 1
            or self.noise_shape is not None
            or not traced_for_xla()
            or keras.distribution.distribution() is not None
        ):
            return super().call(inputs, training=training)
        threshold = min(int(round(self.rate * _WORD_RANGE)), _WORD_RANGE - 1)
        keep_probability = 1.0 - threshold / _WORD_RANGE
        keep = ops.greater_equal(hashed_bits(inputs, self.seed_generator.next()), np.uint32(threshold))
        scaled = inputs * ops.cast(1.0 / keep_probability, inputs.dtype)
        return ops.where(keep, scaled, ops.zeros_like(inputs))


def _mix(x):
    """One round of a 32-bit multiply-xorshift mix (the "lowbias32"
    constants of Wellons' hash prospector): each input bit flips about half
    of the output bits."""
    x = ops.bitwise_xor(x, ops.right_shift(x, np.uint32(16))) * np.uint32(0x7FEB352D)
    x = ops.bitwise_xor(x, ops.right_shift(x, np.uint32(15))) * np.uint32(0x846CA68B)
    return ops.bitwise_xor(x, ops.right_shift(x, np.uint32(16)))


def hashed_bits(inputs, seed):
    """Uniform uint32 bits of `inputs`' shape: each element's flat index,
    hashed under a key mixed from `seed` (two integers, e.g. a
    `keras.random.SeedGenerator`'s draw)."""
    seed = ops.cast(seed, "uint32")  # (2,)
    key = _mix(ops.bitwise_xor(seed[0], _mix(seed[1] + _GOLDEN)))
    shape = ops.shape(inputs)
    size = 1
    for dim in shape:  # ints, or scalar tensors for dynamic TensorFlow dims
        size = size * dim
    index = ops.cast(ops.arange(size, dtype="int32"), "uint32")  # (size,)
    bits = _mix(_mix(ops.bitwise_xor(index, key)) + key)
    return ops.reshape(bits, shape)
