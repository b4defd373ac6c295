"""What both runs write into their output directory as they go: `run.json`
(the run's settings) and `history.json` (one list per logged value, one
entry per step of the record: `log_every` steps of `pretrain`, an epoch of
`finetune`), each replaced whole at every write."""

import os

from kerasbert.utils.io import write_json

RUN_FILE = "run.json"
HISTORY_FILE = "history.json"


def start_run(output, settings):
    """Creates the run directory `output` and writes its settings."""
    os.makedirs(output, exist_ok=True)
    write_json(os.path.join(output, RUN_FILE), settings)


def extend_history(output, history, entry):
    """Appends `entry` (name -> value) to `history` (name -> list of
    values) and writes it to `output`'s history file (unless `output` is
    None)."""
    for key, value in entry.items():
        history.setdefault(key, []).append(value)
    if output is not None:
        write_json(os.path.join(output, HISTORY_FILE), history)
