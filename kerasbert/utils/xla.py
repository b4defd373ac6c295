"""Whether the code being traced will run as one XLA program."""

import keras


def traced_for_xla():
    """True while tracing a computation that XLA compiles whole: always on
    JAX, under `jit_compile=True` (a `tf.function` compiled by XLA) on
    TensorFlow, never on torch. Layers use it to choose between a form that
    XLA fuses into one kernel and the framework's own kernels, which run op
    by op otherwise.

    >>> traced_for_xla() == (keras.backend.backend() == "jax")
    True
    """
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    return not tf.executing_eagerly() and control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
