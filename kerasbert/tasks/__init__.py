"""Models built on the encoder: pretraining tasks (and, later, fine-tuning ones)."""

from kerasbert.tasks.electra import ElectraPretrainer, electra_generator
from kerasbert.tasks.fill_mask import fill_mask
from kerasbert.tasks.masked_lm import MaskedLM
from kerasbert.tasks.pretrainer import BertPretrainer
from kerasbert.tasks.task import Task

__all__ = ["BertPretrainer", "ElectraPretrainer", "MaskedLM", "Task", "electra_generator", "fill_mask"]
