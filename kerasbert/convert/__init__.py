"""Checkpoint conversion between kerasbert and Hugging Face transformers
(encoders, pretraining tasks and fine-tuning tasks, both ways) and KerasHub
presets (backbones, text classifiers and masked LMs, both ways).

- `configs`: `config.json` <-> `Encoder` arguments;
- `weights`: the encoder's weight table, reading checkpoints;
- `heads`: the heads' weight table;
- `writer`: `to_huggingface`;
- `keras_hub`: KerasHub's families, config and weight tables, reading a
  KerasHub preset;
- `keras_hub_writer`: `to_keras_hub`.
"""

from kerasbert.convert.configs import MODEL_TYPES, encoder_config_from_huggingface, huggingface_config
from kerasbert.convert.heads import assign_head_weights
from kerasbert.convert.keras_hub_writer import to_keras_hub
from kerasbert.convert.weights import load_huggingface_encoder
from kerasbert.convert.writer import to_huggingface
from kerasbert.utils.preset_files import is_huggingface_directory

__all__ = [
    "MODEL_TYPES",
    "assign_head_weights",
    "encoder_config_from_huggingface",
    "huggingface_config",
    "is_huggingface_directory",
    "load_huggingface_encoder",
    "to_huggingface",
    "to_keras_hub",
]
