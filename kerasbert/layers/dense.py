"""A dense layer whose product is one 2-D matrix product."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` that flattens `(..., in)` inputs to one
    `(rows, in)` matrix for its product and restores the leading axes after.

    On TensorFlow Keras takes a 3-D input times a 2-D kernel as
    `tf.tensordot`: a `MatMul` between two reshapes, so the bias addition
    and the activation come after the reshape back, and the executed graph
    runs them apart (`_MklMatMul`, `BiasAdd`, the GELU's `Erfc` and
    multiplications). On 2-D rows they follow the `MatMul` directly and
    grappler's oneDNN remapper fuses the three into one
    `_MklNativeFusedMatMul`, which runs faster:
    all-MiniLM-L6-v2's forward of 32 rows took about 15% less time at 16 to
    64 tokens (docs/performance_history.md). The other backends take the product as
    it is: torch's `matmul` folds the leading axes the same way (two more
    ops would only add Python time per step), and XLA fuses as it likes. A
    quantized layer runs Keras's quantized call, unflattened. Weights,
    config, serialization and `quantize` are `keras.layers.Dense`'s.

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

    def quantize(self, mode=None, type_check=True, config=None):
        # Keras quantizes no subclass of Dense unless told to skip that
        # check (a subclass's `call` may compute something else); this one
        # computes what Dense does, so `model.quantize(...)` covers it.
        return super().quantize(mode, type_check=False, config=config)
