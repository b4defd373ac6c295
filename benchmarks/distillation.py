"""Distillation: all-MiniLM-L6-v2's Rotten Tomatoes classifier into three
layers (task distillation), and a small masked LM on the King James text
into two (pretraining distillation, DistilBERT's losses).

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/distillation.py \
        --json benchmarks/results/distillation.json [--rounds 3]

Task distillation, round r (seed r): the teacher is fine-tuned exactly as
`benchmarks/finetuning.py` fine-tunes kerasbert (all-MiniLM-L6-v2, a fresh
2-class head, the first 4,000 rows of the seed's permutation, one epoch,
batch 32, the default recipe at 5e-5, at most 128 tokens); the student is
`student_task(teacher, 3)` (teacher layers 0, 2 and 5, its embeddings and
head) trained by `Distiller(teacher, student, temperature=2)` on the
teacher's logits on the same 4,000 texts (no labels) for 3 epochs, batch
32, AdamW at 1e-4 decaying linearly to 0. These settings were fixed before
any measurement, not tuned. Both are scored on the 2,000 test rows after
the training rows; prediction (`predict` on the raw strings, tokenisation
included) is timed on them, teacher and student alternating, 3 times each,
the median kept.

Pretraining distillation, once: the teacher is a 4-layer MaskedLM (hidden
128, 2 heads, feed-forward 512, all-MiniLM-L6-v2's WordPiece vocabulary)
pretrained from scratch on `pretraining_dataset(..., "mlm")` rows of 64
tokens of the King James text's first 90% of documents for 1,500 steps
(batch 32, AdamW 1e-3, linear decay). Two 2-layer students start from its
layers 0 and 3 (`student_task`) and train 600 steps on the same stream:
one with DistilBERT's losses (soft 5, masked LM 2, cosine 1, T=2), one
with the masked LM alone. All three are scored on 40 masked batches of
the last 10% of documents (masked-LM loss and accuracy over the masked
tokens).
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from common import run_stamp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from finetuning import LEARNING_RATE, MAX_TOKENS, WEIGHT_DECAY, split  # noqa: E402

BATCH, STUDENT_LAYERS, EPOCHS, STUDENT_RATE, TEMPERATURE = 32, 3, 3, 1e-4, 2.0


def accuracy(model, x, y):
    return float(np.mean(np.argmax(model.predict(x, batch_size=BATCH, verbose=0), -1) == y))


def predict_seconds(models, x, repeats=3):
    times = {name: [] for name in models}
    for i in range(repeats):
        for name, model in (models.items() if i % 2 == 0 else reversed(models.items())):
            start = time.perf_counter()
            model.predict(x, batch_size=BATCH, verbose=0)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def task_round(seed):
    import keras

    import kerasbert
    from kerasbert.optimizers import pretraining_optimizer

    (x, y), (x_test, y_test) = split(seed, 4000, 2000)
    keras.utils.set_random_seed(seed)
    teacher = kerasbert.TextClassifier.from_preset("all_minilm_l6_v2", num_classes=2, sequence_length=MAX_TOKENS)
    teacher.compile(learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
    start = time.perf_counter()
    teacher.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    teacher_train_s = time.perf_counter() - start
    student = kerasbert.tasks.student_task(teacher, STUDENT_LAYERS)
    distiller = kerasbert.Distiller(teacher, student, temperature=TEMPERATURE)
    steps = EPOCHS * -(-len(x) // BATCH)
    distiller.compile(optimizer=pretraining_optimizer("adamw", learning_rate=STUDENT_RATE, total_steps=steps,
                                                      warmup_steps=0))
    start = time.perf_counter()
    history = distiller.fit(x, batch_size=BATCH, epochs=EPOCHS, verbose=0).history
    distill_s = time.perf_counter() - start
    result = {"seed": seed, "teacher_accuracy": accuracy(teacher, x_test, y_test),
              "student_accuracy": accuracy(student, x_test, y_test),
              "teacher_train_s": teacher_train_s, "distill_s": distill_s,
              "soft_loss": [float(v) for v in history["soft_loss"]],
              "teacher_params": teacher.count_params(), "student_params": student.count_params()}
    seconds = predict_seconds({"teacher": teacher, "student": student}, x_test)
    result.update(teacher_predict_s=seconds["teacher"], student_predict_s=seconds["student"])
    result["kept_accuracy"] = result["student_accuracy"] / result["teacher_accuracy"]
    result["predict_speedup"] = seconds["teacher"] / seconds["student"]
    print(json.dumps({k: v for k, v in result.items() if k != "soft_loss"}), flush=True)
    return result


def pretraining_run(seed=0):
    import keras

    import kerasbert
    from kerasbert.optimizers import pretraining_optimizer
    from kerasbert.preprocessing.pretraining_data import pretraining_dataset
    from kerasbert.preprocessing.sentence_pairs import read_documents

    documents = read_documents(os.path.join(HERE, "..", "data", "kjv_documents.txt"))
    cut = int(len(documents) * 0.9)
    tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    keras.utils.set_random_seed(seed)

    def stream(docs, stream_seed):
        return pretraining_dataset(docs, tokenizer, "mlm", 64, BATCH, segment_ids=False, seed=stream_seed)

    train, held_out = stream(documents[:cut], seed), stream(documents[cut:], seed + 1).take(40)
    encoder = kerasbert.Encoder(vocabulary_size=tokenizer.vocabulary_size(), num_layers=4, num_heads=2,
                                hidden_dim=128, intermediate_dim=512, num_segments=0, max_sequence_length=64)
    teacher = kerasbert.MaskedLM(encoder)

    def optimizer(rate, steps):
        return pretraining_optimizer("adamw", learning_rate=rate, total_steps=steps, warmup_steps=steps // 10)

    def scores(model):
        model.compile()
        loss, accuracy = model.evaluate(held_out, verbose=0)
        return {"mlm_loss": float(loss), "mlm_accuracy": float(accuracy)}

    teacher.compile(optimizer=optimizer(1e-3, 1500))
    teacher.fit(train, steps_per_epoch=1500, epochs=1, verbose=0)
    result = {"teacher": {"layers": 4, **scores(teacher)}}
    for name, weights in (("distilled", dict(soft_weight=5.0, hard_weight=2.0, hidden_weight=1.0)),
                          ("masked_lm_only", dict(soft_weight=0.0, hard_weight=1.0))):
        keras.utils.set_random_seed(seed)
        student = kerasbert.tasks.student_task(teacher, 2)
        distiller = kerasbert.Distiller(teacher, student, temperature=TEMPERATURE, **weights)
        distiller.compile(optimizer=optimizer(1e-3, 600))
        distiller.fit(train, steps_per_epoch=600, epochs=1, verbose=0)
        result[name] = {"layers": 2, **scores(student)}
    print(json.dumps(result), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    import keras

    rounds = [task_round(seed) for seed in range(args.rounds)]
    summary = {key: {"mean": statistics.mean(r[key] for r in rounds), "min": min(r[key] for r in rounds)}
               for key in ("teacher_accuracy", "student_accuracy", "kept_accuracy", "predict_speedup")}
    out = {**run_stamp(), "backend": keras.backend.backend(), "task": {"rounds": rounds, "summary": summary},
           "pretraining": pretraining_run()}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
