"""The runs: `pretrain` and `finetune`, each from files to a run directory
of checkpoints, history and presets. `options` holds the choices both
offer (the command line reads it without importing Keras)."""
