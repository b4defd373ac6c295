"""Models built on the encoder: pretraining and fine-tuning tasks."""

from kerasbert.tasks.distiller import Distiller, student_encoder, student_task
from kerasbert.tasks.electra import ElectraPretrainer, electra_generator
from kerasbert.tasks.fill_mask import fill_mask
from kerasbert.tasks.masked_lm import MaskedLM
from kerasbert.tasks.pretrainer import BertPretrainer
from kerasbert.tasks.question_answerer import QuestionAnswerer
from kerasbert.tasks.task import Task
from kerasbert.tasks.text_classifier import TextClassifier
from kerasbert.tasks.text_embedder import TextEmbedder
from kerasbert.tasks.token_classifier import TokenClassifier

__all__ = [
    "BertPretrainer",
    "Distiller",
    "ElectraPretrainer",
    "MaskedLM",
    "QuestionAnswerer",
    "Task",
    "TextClassifier",
    "TextEmbedder",
    "TokenClassifier",
    "electra_generator",
    "fill_mask",
    "student_encoder",
    "student_task",
]
