"""A dense layer whose product is one 2-D matrix product."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` that flattens `(..., in)` inputs to one
    `(rows, in)` matrix for its product and restores the leading axes after.

    On TensorFlow a 3-D input times a 2-D kernel is a `BatchMatMulV2`; as a
    2-D `MatMul`, grappler's oneDNN remapper fuses it with the bias addition
    and the activation that follow (one `_MklNativeFusedMatMul` in the
    executed graph, where the 3-D product runs as `_MklMatMul`, `BiasAdd`
    and the GELU's `Erfc` and multiplications), which runs faster:
    all-MiniLM-L6-v2's forward of 32 rows took 10-17% less time at 16 to 64
    tokens (docs/performance.md). The other backends take the product as it
    is: torch folds the leading axes the same way inside `matmul` (two more
    ops would only add Python time per step), and XLA fuses as it likes. Weights, config and serialization are
    `keras.layers.Dense`'s.

    Examples:
    >>> import numpy as np
    >>> layer = Dense(4)
    >>> tuple(layer(np.ones((2, 3, 5), "float32")).shape)
    (2, 3, 4)
    """

    def call(self, inputs, training=None):
        if keras.backend.backend() != "tensorflow" or len(inputs.shape) <= 2:
            return super().call(inputs)
        shape = ops.shape(inputs)  # (..., in)
        rows = ops.reshape(inputs, (-1, shape[-1]))  # (prod(...), in)
        return ops.reshape(super().call(rows), (*shape[:-1], self.units))  # (..., units)
