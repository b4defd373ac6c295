"""Every task trains and predicts on this backend's accelerator: a smoke
test for GPU machines (`benchmarks/gpu_run.sh` runs it on JAX and torch).

    KERAS_BACKEND=jax python benchmarks/gpu_smoke.py [--precision mixed_bfloat16] [--json out.json]

Each task is built on a small BERT (L2 H128 A2 I512, vocabulary 30,522),
compiled with its defaults (AdamW; XLA on JAX, eager on torch), trained
3 steps on random token ids (16 rows of 128 tokens, padding at the end of
half the rows) and asked to predict; the run checks that the loss and the
predictions are finite and that the weights live on the accelerator, and
reports each task's seconds for build + fit + predict. Token ids in:
neither TensorFlow nor a download is needed. Exits 1 when any task fails
(the others still run), 2 when the backend sees no GPU (unless
`--allow-cpu`).
"""

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

ROWS, SEQ, MASKED, VOCABULARY = 16, 128, 20, 30522


def features(rng, segments=True):
    lengths = np.where(np.arange(ROWS) % 2, SEQ, SEQ // 2)
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1000, VOCABULARY, (ROWS, SEQ)).astype("int32") * mask
    x = {"token_ids": token_ids, "padding_mask": mask}
    if segments:
        x["segment_ids"] = ((np.arange(SEQ)[None, :] >= lengths[:, None] // 2) * mask).astype("int32")
    return x


def masked(rng, x):
    positions = np.sort([rng.choice(np.arange(1, SEQ // 2), MASKED, replace=False) for _ in range(ROWS)],
                        axis=1).astype("int32")
    ids = rng.integers(1000, VOCABULARY, (ROWS, MASKED)).astype("int32")
    return {**x, "mask_positions": positions}, ids, np.ones((ROWS, MASKED), "float32")


def cases(kerasbert, rng):
    """(name, build(encoder) -> task, x, y, sample_weight) for every task."""
    x = features(rng)
    mx, mask_ids, mask_weights = masked(rng, x)
    labels = rng.integers(0, 2, ROWS).astype("int32")
    tags = rng.integers(0, 5, (ROWS, SEQ)).astype("int32")
    starts = rng.integers(1, SEQ // 2, ROWS).astype("int32")
    return [
        ("MaskedLM", lambda e: kerasbert.MaskedLM(e), mx, mask_ids, mask_weights),
        ("BertPretrainer(nsp)", lambda e: kerasbert.BertPretrainer(e, sentence_task="nsp"), mx,
         {"mlm": mask_ids, "nsp": labels}, {"mlm": mask_weights, "nsp": np.ones(ROWS, "float32")}),
        ("ElectraPretrainer", lambda e: kerasbert.ElectraPretrainer(kerasbert.tasks.electra_generator(e), e),
         {**mx, "mask_weights": mask_weights}, mask_ids, mask_weights),
        ("TextClassifier", lambda e: kerasbert.TextClassifier(e, num_classes=2), x, labels, None),
        ("TokenClassifier", lambda e: kerasbert.TokenClassifier(e, num_classes=5), x, tags, None),
        ("TokenClassifier(crf)", lambda e: kerasbert.TokenClassifier(e, num_classes=5, crf=True), x, tags, None),
        ("QuestionAnswerer", lambda e: kerasbert.QuestionAnswerer(e), x,
         {"start_logits": starts, "end_logits": starts + 3}, None),
        ("TextEmbedder", lambda e: kerasbert.TextEmbedder(e), x, None, None),
    ]


def on_accelerator(variable):
    import keras

    backend = keras.backend.backend()
    value = variable.value
    if backend == "jax":
        return all(d.platform != "cpu" for d in value.devices())
    if backend == "torch":
        return value.device.type != "cpu"
    return "GPU" in value.device


def run_case(kerasbert, keras, name, build, x, y, weight, precision, accelerator):
    start = time.perf_counter()
    encoder = kerasbert.Encoder(vocabulary_size=VOCABULARY, num_layers=2, num_heads=2, hidden_dim=128,
                                intermediate_dim=512, max_sequence_length=SEQ, dtype=precision)
    task = build(encoder)
    result = {"task": name}
    if y is not None:
        task.compile()
        history = task.fit(x, y, sample_weight=weight, batch_size=ROWS // 3 + 1, epochs=1, verbose=0).history
        result["loss"] = float(history["loss"][-1])
        assert np.isfinite(result["loss"]), history
    outputs = task.predict(x, verbose=0)
    for value in keras.tree.flatten(outputs):
        assert np.all(np.isfinite(np.asarray(value, "float32"))), f"{name}: non-finite predictions"
    result["on_accelerator"] = all(on_accelerator(v) for v in task.weights)
    assert result["on_accelerator"] or not accelerator, f"{name}: weights on the CPU"
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", default="mixed_bfloat16", choices=("mixed_bfloat16", "float32"))
    parser.add_argument("--allow-cpu", action="store_true", help="run where the backend sees no GPU")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    import keras

    import kerasbert

    backend = keras.backend.backend()
    devices = [str(d) for d in keras.distribution.list_devices()] if backend == "jax" else []
    if backend == "torch":
        import torch

        devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    gpu = any("cuda" in d.lower() or "gpu" in d.lower() or "nvidia" in d.lower() or "h100" in d.lower()
              for d in devices)
    if not gpu and not args.allow_cpu:
        print(f"{backend} sees no GPU ({devices}); pass --allow-cpu to run on the CPU.", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    results, failed = [], 0
    for name, build, x, y, weight in cases(kerasbert, rng):
        try:
            result = run_case(kerasbert, keras, name, build, x, y, weight, args.precision, gpu)
        except Exception as error:  # report and go on with the next task
            failed += 1
            result = {"task": name, "error": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()[-3000:]}
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "traceback"}), flush=True)
    report = {"backend": backend, "devices": devices, "precision": args.precision, "results": results,
              "keras": keras.__version__}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
