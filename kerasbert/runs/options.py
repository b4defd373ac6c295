"""The choices of the runs' settings, as data: the command line builds its
parser from them without importing a framework."""

# pretrain
OBJECTIVES = ("mlm", "mlm+nsp", "mlm+sop", "electra", "modernbert", "deberta-v3")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
OPTIMIZERS = ("adamw", "lamb")

# finetune
TASKS = ("classification", "ner", "squad")
# Validation metrics each task can select the best epoch by; the first is
# the default. Those in MINIMIZED are better when lower.
CLASSIFICATION_METRICS = ("accuracy", "f1", "matthews_correlation", "loss")
REGRESSION_METRICS = ("pearson", "spearman", "mean_squared_error")
NER_METRICS = ("f1", "precision", "recall")
SQUAD_METRICS = ("f1", "exact_match", "HasAns_f1", "HasAns_exact_match", "NoAns_f1", "NoAns_exact_match")
MINIMIZED = ("loss", "mean_squared_error")
# The presets a fine-tuning run writes: the best epoch's and the last one's.
BEST, FINAL = "best", "final"
