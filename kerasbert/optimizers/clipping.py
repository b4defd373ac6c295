"""Gradient clipping of the whole global batch under `tf.distribute`."""


import keras


class ClipAcrossReplicas:
    """Clips the gradients of the whole global batch under `tf.distribute`.

    Keras clips (`clipnorm`, `global_clipnorm`, `clipvalue`) each replica's
    gradients before summing them across replicas, so under MirroredStrategy
    a global-norm clip sees a replica's share and gives a different update
    from the same batch on one device. Here the replicas first sum their
    gradients (one extra all-reduce), clip that, and hand back an equal share
    each, so Keras's own sum afterwards is the clipped global gradient.
    """

    def _clip_gradients(self, grads):
        if keras.backend.backend() != "tensorflow" or not (
            self.clipnorm or self.global_clipnorm or self.clipvalue
        ):
            return super()._clip_gradients(grads)
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        replicas = context.num_replicas_in_sync if context is not None else 1
        if replicas == 1:
            return super()._clip_gradients(grads)
        present = [g for g in grads if g is not None]
        summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
        summed = [None if g is None else next(summed) for g in grads]
        return [None if g is None else g / replicas for g in super()._clip_gradients(summed)]
