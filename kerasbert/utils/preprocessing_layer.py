"""The base of kerasbert's TensorFlow-op preprocessing layers."""

import keras


class PreprocessingLayer(keras.layers.Layer):
    """A stateless Keras layer of TensorFlow ops (tokenizers, packers,
    maskers): it takes strings and ragged tensors as they are, so it runs
    eagerly and inside `tf.data` whatever the Keras backend."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Strings and ragged tensors are not backend tensors: keep inputs as given.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
