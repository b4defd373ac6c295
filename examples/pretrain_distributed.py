"""Pretrains a small BERT on all devices: data or model (tensor) parallelism.

Without accelerators, try it on 8 virtual CPU devices (JAX):

    XLA_FLAGS="--xla_force_host_platform_device_count=8 --xla_cpu_multi_thread_eigen=false" \\
        KERAS_BACKEND=jax python examples/pretrain_distributed.py --distribution model --mesh 2x4

(The second flag keeps XLA from running a thread pool inside each of the 8
devices' threads: docs/distributed.md.)

On a machine with GPUs, the same command without XLA_FLAGS uses them;
on TensorFlow, `--distribution data` runs MirroredStrategy (and
MultiWorkerMirroredStrategy when TF_CONFIG describes several workers).
The same run from the command line:

    kerasbert pretrain --preset bert_tiny_en_uncased --objective mlm+nsp \\
        --from-scratch --train-files data/kjv_documents.txt --vocabulary-size 4096 \\
        --sequence-length 64 --batch-size 32 --steps 200 --learning-rate 1e-3 \\
        --distribution model --mesh 2x4 --output runs/bert_distributed

It also builds a model inside `kerasbert.distribution.training_scope` by
hand and prints where each of its sharded weights lives. See
docs/distributed.md for multi-host runs, the global batch and checkpoints.
"""

import argparse

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402

from kerasbert.distribution import training_scope  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distribution", choices=("data", "model"), default="data")
    parser.add_argument("--mesh", help="(batch, model) devices for --distribution model, e.g. 2x4")
    parser.add_argument("--train-files", default="data/kjv_documents.txt")
    parser.add_argument("--output", default="runs/bert_distributed")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    print(f"{keras.backend.backend()}: {keras.distribution.list_devices()}")

    # 1. A whole pretraining run. The vocabulary size (4,096) splits evenly
    #    over model axes of up to 4,096 devices; batch 32 over up to 32 replicas.
    result = kerasbert.pretrain(
        "bert_tiny_en_uncased", "mlm+nsp", args.train_files, args.output,
        from_scratch=True, vocabulary_size=4096, sequence_length=64, batch_size=32,
        steps=args.steps, learning_rate=1e-3, resume=True,
        distribution=args.distribution, mesh=args.mesh,
    )
    history = result.history
    print(f"loss {history['loss'][0]:.3f} -> {history['loss'][-1]:.3f}; preset in {result.preset_dir}")

    # 2. By hand: any task built, compiled and fit inside the scope is
    #    distributed the same way.
    with training_scope(args.distribution, args.mesh, batch_size=32) as scope:
        encoder = kerasbert.from_preset(result.preset_dir)
        model = kerasbert.MaskedLM(encoder)
        print(f"{type(scope.engine).__name__} on mesh {scope.mesh_shape}, {scope.replicas} replicas")
        for variable in model.trainable_variables[:8]:
            sharding = getattr(variable.value, "sharding", None)
            print(f"  {variable.path:45} {str(tuple(variable.shape)):12} {getattr(sharding, 'spec', '')}")


if __name__ == "__main__":
    main()
