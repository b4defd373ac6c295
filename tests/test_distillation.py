"""Distillation: students from teachers' layers, the Distiller's losses by
hand, and `kerasbert distill` end to end."""

import json
import os

import keras
import numpy as np
import pytest
from helpers import rotten_tomatoes, tiny_encoder, torch_pass_only
from keras import ops

import kerasbert
from kerasbert.cli import main
from kerasbert.preprocessing import TextPreprocessor
from kerasbert.tasks import student_encoder, student_task
from kerasbert.tasks.distiller import student_layer_indices


def numpy_of(x):
    return np.asarray(ops.convert_to_numpy(x))


def features(encoder, batch=4, seq=9, seed=0):
    rng = np.random.default_rng(seed)
    lengths = np.array([seq, seq - 3, 4, 2][:batch])
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    x = {"token_ids": (rng.integers(1, encoder.vocabulary_size, (batch, seq)) * mask).astype("int32"),
         "padding_mask": mask}
    if encoder.num_segments:
        x["segment_ids"] = np.zeros((batch, seq), "int32")
    return x


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_a_student_starts_from_evenly_spaced_teacher_layers_and_the_head():
    assert student_layer_indices(12, 6) == [0, 2, 4, 7, 9, 11]  # DistilBERT's
    assert student_layer_indices(6, 3) == [0, 2, 5] and student_layer_indices(6, 1) == [0]
    teacher = kerasbert.TextClassifier(tiny_encoder(num_layers=6, pooler=True), num_classes=3)
    student = student_task(teacher, 3)
    assert type(student) is kerasbert.TextClassifier and student.encoder.num_layers == 3
    for i, j in zip([0, 2, 5], range(3)):
        for a, b in zip(teacher.encoder.transformer_blocks[i].weights, student.encoder.transformer_blocks[j].weights):
            np.testing.assert_array_equal(numpy_of(a), numpy_of(b))
    for a, b in [(teacher.encoder.token_embedding.embeddings, student.encoder.token_embedding.embeddings),
                 (teacher.output_dense.kernel, student.output_dense.kernel)]:
        np.testing.assert_array_equal(numpy_of(a), numpy_of(b))
    with pytest.raises(ValueError, match="num_layers"):
        student_encoder(teacher.encoder, 7)
    with pytest.raises(TypeError, match="teacher"):
        student_task(teacher.encoder, 2)


def test_task_distillation_loss_is_the_soft_cross_entropy_and_falls():
    teacher = kerasbert.TextClassifier(tiny_encoder(num_layers=4), num_classes=3, dropout=0.0)
    teacher.output_dense.kernel.assign(np.random.default_rng(1).normal(0, 1, teacher.output_dense.kernel.shape))
    student = student_task(teacher, 2)
    distiller = kerasbert.Distiller(teacher, student, temperature=2.0, hard_weight=0.5)
    x = features(teacher.encoder)
    y = np.array([0, 1, 2, 1])
    out = distiller(x)
    s, t = numpy_of(out["logits"]).astype("float64"), numpy_of(out["teacher_logits"]).astype("float64")
    soft = 4.0 * -(np.exp(log_softmax(t / 2)) * log_softmax(s / 2)).sum(-1).mean()
    hard = -log_softmax(s)[np.arange(4), y].mean()
    loss = float(numpy_of(distiller.compute_loss(x, y, out)))
    assert loss == pytest.approx(soft + 0.5 * hard, rel=1e-4)
    # On the teacher's outputs alone a fresh student comes near them: the
    # soft loss falls toward its floor, the teacher's own entropy (times T^2).
    fresh = kerasbert.TextClassifier(tiny_encoder(num_layers=2), num_classes=3, dropout=0.0)
    distiller = kerasbert.Distiller(teacher, fresh, temperature=2.0)
    distiller.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = distiller.fit(x, epochs=15, batch_size=4, verbose=0).history
    assert set(history) == {"loss", "soft_loss"}
    floor = 4.0 * -(np.exp(log_softmax(t / 2)) * log_softmax(t / 2)).sum(-1).mean()
    assert history["soft_loss"][-1] - floor < 0.3 * (history["soft_loss"][0] - floor), (history["soft_loss"], floor)
    np.testing.assert_array_equal(numpy_of(out["teacher_logits"]), numpy_of(teacher(x)))  # teacher unchanged


@torch_pass_only
def test_pretraining_distillation_has_distilberts_three_losses():
    teacher = kerasbert.MaskedLM(tiny_encoder(num_layers=4, num_segments=0))
    distiller = kerasbert.Distiller(teacher, student_task(teacher, 2), soft_weight=5.0, hard_weight=2.0,
                                    hidden_weight=1.0)
    x = {**features(teacher.encoder), "mask_positions": np.array([[1, 3], [0, 2], [1, 2], [0, 1]], "int32")}
    y = np.array([[5, 6], [7, 8], [9, 10], [11, 12]])
    w = np.array([[1, 1], [1, 0], [1, 1], [1, 1]], "float32")
    out = distiller(x)
    hidden = [numpy_of(m.encoder({k: x[k] for k in m.encoder.input})["sequence_output"]) for m in
              (distiller.student, teacher)]
    cosine = (hidden[0] * hidden[1]).sum(-1) / np.linalg.norm(hidden[0], axis=-1) / np.linalg.norm(hidden[1], axis=-1)
    real = x["padding_mask"] > 0
    s, t = numpy_of(out["logits"]).astype("float64"), numpy_of(out["teacher_logits"]).astype("float64")
    np.testing.assert_allclose(s, numpy_of(distiller.student(x)), atol=1e-5)  # the MaskedLM's logits
    soft = (4.0 * -(np.exp(log_softmax(t / 2)) * log_softmax(s / 2)).sum(-1) * w).sum() / w.sum()
    hard = (-np.take_along_axis(log_softmax(s), y[..., None], -1)[..., 0] * w).sum() / w.sum()
    expected = 5 * soft + 2 * hard + (1 - cosine[real]).mean()
    assert float(numpy_of(distiller.compute_loss(x, y, out, w))) == pytest.approx(expected, rel=1e-4)
    with pytest.raises(ValueError, match="hidden_weight"):
        kerasbert.Distiller(kerasbert.TextClassifier(teacher.encoder, num_classes=2),
                            kerasbert.TextClassifier(teacher.encoder, num_classes=2), hidden_weight=1.0)


@torch_pass_only
def test_command_line_distills_a_classifier_preset(minilm_tokenizer, tmp_path):
    encoder = tiny_encoder(vocabulary_size=minilm_tokenizer.vocabulary_size(), num_layers=4, max_sequence_length=32)
    teacher = kerasbert.TextClassifier(encoder, labels=["rotten", "fresh"],
                                       preprocessor=TextPreprocessor(minilm_tokenizer, sequence_length=32))
    teacher.save_to_preset(tmp_path / "teacher")
    (tmp_path / "texts.txt").write_text("\n".join(text for text, _ in rotten_tomatoes()[:96]), encoding="utf-8")
    assert main(["distill", "--teacher", str(tmp_path / "teacher"), "--train-files", str(tmp_path / "texts.txt"),
                 "--output", str(tmp_path / "student"), "--num-layers", "2", "--epochs", "2", "--verbose", "0"]) == 0
    student = kerasbert.TextClassifier.from_preset(str(tmp_path / "student"))
    assert student.encoder.num_layers == 2 and student.labels == ["rotten", "fresh"]
    with open(os.path.join(tmp_path, "student", "history.json")) as f:
        assert len(json.load(f)["soft_loss"]) == 2
    with pytest.raises(FileExistsError, match="not empty"):
        kerasbert.distill(str(tmp_path / "teacher"), str(tmp_path / "texts.txt"), str(tmp_path / "student"), 2)
