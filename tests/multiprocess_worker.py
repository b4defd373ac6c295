"""One process of a data-parallel `kerasbert.pretrain` run, started the way
clusters start them (tests/test_multiprocess.py starts two): on JAX with
the `KERAS_DISTRIBUTION_*` variables, on TensorFlow with `TF_CONFIG`, on
torch under `torchrun`.

    python tests/multiprocess_worker.py PRESET TEXT OUTPUT REPORTS STEPS [EXIT_AFTER]

Trains "mlm" from PRESET on TEXT into OUTPUT for STEPS global batches of 8
(resuming OUTPUT's run when it holds one). With EXIT_AFTER, every process
ends itself (`os._exit(3)`, no cleanup: a kill) once the checkpoint of that
step is written. Writes REPORTS/process-N.json: the paths this process
created, wrote, renamed or removed under OUTPUT (seen through Python's audit
events) and the history it returned.
"""

import json
import os
import sys


def process_index():
    if "KERAS_DISTRIBUTION_PROCESS_ID" in os.environ:
        return int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
    if "TF_CONFIG" in os.environ:
        return json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    return int(os.environ["RANK"])


class Writes:
    """The paths under `root` this process changes, from the audit events
    of `open` (for writing), `os.mkdir`, `os.rename`, `os.remove`,
    `os.rmdir`, `os.link`, `shutil.rmtree` and `tempfile.mkdtemp`."""

    EVENTS = ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.link", "shutil.rmtree", "tempfile.mkdtemp")

    def __init__(self, root):
        self.root = os.path.realpath(root) + os.sep
        self.paths = set()

    def __call__(self, event, args):
        if event == "open":
            path, mode, flags = args
            writing = any(c in (mode or "") for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            candidates = [path] if writing else []
        elif event in self.EVENTS:
            candidates = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        else:
            return
        for path in candidates:
            path = os.path.realpath(os.fsdecode(path))
            if path.startswith(self.root):
                self.paths.add(path[len(self.root):])


def barrier():
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("worker-exit")
    elif backend == "torch":
        import torch.distributed

        torch.distributed.barrier()
    else:
        import tensorflow as tf

        strategy = tf.distribute.get_strategy()
        strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)


def main():
    preset, text, output, reports, steps = sys.argv[1:6]
    exit_after = int(sys.argv[6]) if len(sys.argv) > 6 else None
    index = process_index()
    writes = Writes(output)
    sys.addaudithook(writes)

    def report(history):
        os.makedirs(reports, exist_ok=True)
        with open(os.path.join(reports, f"process-{index}.json"), "w") as f:
            json.dump({"writes": sorted(writes.paths), "history": history}, f)

    import keras

    import kerasbert

    class Exit(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):  # after the run's recorder wrote the checkpoint
            if (epoch + 1) * 4 == exit_after:
                barrier()
                report(None)
                os._exit(3)

    result = kerasbert.pretrain(
        preset, "mlm", text, output, sequence_length=32, batch_size=8, steps=int(steps),
        learning_rate=1e-2, warmup_steps=2, log_every=4, seed=0, verbose=0,
        resume=os.path.isfile(os.path.join(output, "run.json")), distribution="data",
        callbacks=[Exit()] if exit_after else None,
    )
    report(result.history)


if __name__ == "__main__":
    main()
