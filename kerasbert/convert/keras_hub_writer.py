"""Writing an encoder or a task as a KerasHub preset (`to_keras_hub`): the
KerasHub objects are built with the mapped config, given the weights by
the links of `kerasbert.convert.keras_hub`, and saved by KerasHub's own
`save_to_preset`, so the files are exactly those KerasHub writes."""

import os
import tempfile
import warnings

from kerasbert.convert.configs import MODEL_TYPES, _check_representable, huggingface_config, infer_model_type
from kerasbert.convert.heads import check_fine_tuning_head, mlm_heads, task_head
from kerasbert.convert.keras_hub import (
    BACKBONE_OF,
    BACKBONES,
    FAIRSEQ_POSITIONS,
    SEGMENTED,
    backbone_links,
    check_keras_hub,
    classifier_links,
    masked_lm_difference,
    mlm_links,
    to_keras_hub_layout,
)
from kerasbert.convert.writer import _encoder_tensors, _head_tensors_of
from kerasbert.layers.quantization import check_float

# The kerasbert tokenizer each family's KerasHub tokenizer is built from:
# (class name, SentencePiece layout or None).
_TOKENIZER_KINDS = {
    "bert": ("WordPieceTokenizer", None), "electra": ("WordPieceTokenizer", None),
    "distilbert": ("WordPieceTokenizer", None), "roberta": ("BytePairTokenizer", None),
    "albert": ("SentencePieceTokenizer", "albert"), "xlm-roberta": ("SentencePieceTokenizer", "xlm_roberta"),
    "deberta-v2": ("SentencePieceTokenizer", "deberta_v2"),
}


def to_keras_hub(model, directory, model_type=None, tokenizer=None, approximate_gelu=False):
    """Writes an encoder, a `TextClassifier` or a `MaskedLM` as a KerasHub
    preset directory, with KerasHub's own `save_to_preset`:

    - an `Encoder`: the family's backbone (`BertBackbone`, ...), which
      `keras_hub.models.Backbone.from_preset` loads;
    - a `TextClassifier`: the family's text classifier (`BertTextClassifier`,
      ...), its head being transformers' for the family (the heads are the
      same), with its preprocessor when the task has one;
    - a `MaskedLM` of RoBERTa or XLM-RoBERTa: `RobertaMaskedLM` /
      `XLMRobertaMaskedLM` (the other families' KerasHub masked-LM heads
      differ from kerasbert's in activation or LayerNorm epsilon, and are
      refused).

    KerasHub's backbones fix in code what kerasbert's encoder takes as
    arguments: BERT, ALBERT and ELECTRA apply the tanh approximation of GELU,
    RoBERTa, XLM-RoBERTa, DistilBERT and DeBERTa-v3 the exact one; the
    LayerNorm epsilon is 1e-12 (1e-5 RoBERTa and XLM-RoBERTa, 1e-7
    DeBERTa-v3); DeBERTa-v3's relative distance is its sequence length. An
    encoder that differs is refused with a ValueError naming what, except
    that `approximate_gelu=True` writes an exact-GELU encoder into a family
    whose KerasHub backbone applies the approximation (as KerasHub's own
    presets of the original BERT checkpoints do; outputs then differ by
    about 1e-3). ModernBERT has no KerasHub backbone.

    A token-type table of one row (RoBERTa and XLM-RoBERTa checkpoints) is
    folded into the position table, exactly; a pooler of a family whose
    KerasHub backbone has none (RoBERTa) is left out with a warning, and
    where KerasHub's backbone has one that the encoder lacks (ELECTRA, or
    BERT without a pooler) KerasHub's fresh initialisation stays.

    Args:
        model: a `kerasbert.Encoder`, `TextClassifier` or `MaskedLM`.
        directory: where to write; created if missing.
        model_type: the family (one of `kerasbert.convert.MODEL_TYPES`
            KerasHub has); by default the task's `family`, else the one
            the encoder's configuration implies.
        tokenizer: a kerasbert tokenizer to write along (a task's
            preprocessor's by default).
        approximate_gelu: accept an exact-GELU encoder for BERT, ALBERT or
            ELECTRA, whose KerasHub backbones apply the approximation.

    Returns:
        The directory written.
    """
    from kerasbert.encoder import Encoder
    from kerasbert.utils.io import check_path

    check_float(model, "a KerasHub preset", "convert the model before quantize()")
    directory = check_path("directory", directory)
    kind = "backbone" if isinstance(model, Encoder) else {
        "sequence_classification": "classifier", "masked_lm": "masked_lm"}.get(task_head(model))
    encoder = model if kind == "backbone" else getattr(model, "encoder", None)
    if kind is None or not isinstance(encoder, Encoder) or (kind == "masked_lm" and (
            set(mlm_heads(model)) != {"mlm"} or getattr(model, "sentence_task", None))):
        raise TypeError("to_keras_hub writes a kerasbert.Encoder, TextClassifier or MaskedLM; "
                        f"got {type(model).__name__}.")
    if model_type is None:
        family = getattr(model, "family", None)
        model_type = family if family in MODEL_TYPES else infer_model_type(encoder)
    if model_type not in BACKBONE_OF:
        raise ValueError(f"model_type={model_type!r} has no KerasHub backbone; KerasHub and kerasbert share "
                         f"{sorted(BACKBONE_OF)}.")
    _check_expressible(encoder, model_type, approximate_gelu)
    keras_hub = check_keras_hub()
    if tokenizer is None and kind != "backbone" and getattr(model, "preprocessor", None) is not None:
        tokenizer = model.preprocessor.tokenizer
    backbone = _backbone(keras_hub, encoder, model_type)
    hub_tokenizer = _keras_hub_tokenizer(keras_hub, tokenizer, model_type) if tokenizer is not None else None
    if kind == "backbone":
        backbone.save_to_preset(directory)
        if hub_tokenizer is not None:
            hub_tokenizer.save_to_preset(directory)
        return directory
    task = _task(keras_hub, model, kind, backbone, hub_tokenizer, model_type, directory)
    task.save_to_preset(directory)
    return directory


def _check_expressible(encoder, model_type, approximate_gelu):
    """A ValueError naming what a KerasHub backbone of `model_type` cannot
    hold of `encoder`."""
    _check_representable(encoder, model_type)  # the Hugging Face family first: KerasHub's is narrower
    family = BACKBONES[BACKBONE_OF[model_type]]
    problems = []
    wanted = family["activation"]
    if encoder.activation != wanted and not (approximate_gelu and (encoder.activation, wanted) == (
            "gelu", "gelu_approximate")):
        hint = " (pass approximate_gelu=True to accept the difference)" if encoder.activation == "gelu" else ""
        problems.append(f"activation={encoder.activation!r}: KerasHub's {BACKBONE_OF[model_type]} applies "
                        f"{wanted!r}{hint}")
    if encoder.layer_norm_epsilon != family["epsilon"]:
        problems.append(f"layer_norm_epsilon={encoder.layer_norm_epsilon}: KerasHub's is {family['epsilon']}")
    if model_type not in SEGMENTED and encoder.num_segments > (0 if model_type == "deberta-v2" else 1):
        problems.append(f"num_segments={encoder.num_segments}: KerasHub's {model_type} has no token types")
    if model_type == "deberta-v2":
        if not encoder.relative_buckets:
            problems.append("relative_buckets=0: KerasHub's DeBERTa-v3 buckets relative positions")
        if encoder.max_relative_distance != encoder.max_sequence_length:
            problems.append(f"max_relative_distance={encoder.max_relative_distance}: KerasHub's DeBERTa-v3 takes "
                            f"its sequence length ({encoder.max_sequence_length})")
    if problems:
        raise ValueError(f"This encoder cannot be written as a KerasHub {BACKBONE_OF[model_type]}: "
                         f"{'; '.join(problems)}.")


def backbone_arguments(encoder, model_type):
    """The KerasHub backbone's constructor arguments for `encoder`."""
    arguments = {"num_layers": encoder.num_layers, "num_heads": encoder.num_heads, "hidden_dim": encoder.hidden_dim,
                 "intermediate_dim": encoder.intermediate_dim, "dropout": encoder.dropout,
                 "max_sequence_length": encoder.max_sequence_length}
    arguments["vocab_size" if model_type == "electra" else "vocabulary_size"] = encoder.vocabulary_size
    if model_type in SEGMENTED:
        arguments["num_segments"] = max(encoder.num_segments, 1)
    if model_type in ("albert", "electra"):
        arguments["embedding_dim"] = encoder.embedding_dim or encoder.hidden_dim
    if model_type == "albert":
        arguments["num_groups"] = encoder.num_layer_groups or encoder.num_layers
        arguments["num_inner_repetitions"] = encoder.num_inner_layers
    if model_type == "deberta-v2":
        arguments["bucket_size"] = encoder.relative_buckets
    return arguments


def _backbone(keras_hub, encoder, model_type):
    """The KerasHub backbone of `encoder`, holding its weights."""
    config = huggingface_config(encoder, model_type)
    tensors = _encoder_tensors(encoder, config)
    offset = encoder.position_offset
    types = tensors.get("embeddings.token_type_embeddings.weight")
    if model_type not in SEGMENTED and types is not None:
        # One token type, added to every token: part of every position's row.
        positions = tensors["embeddings.position_embeddings.weight"].copy()
        positions[offset:] += types[0]
        tensors["embeddings.position_embeddings.weight"] = positions
    if model_type in FAIRSEQ_POSITIONS and encoder.pooler:
        warnings.warn(f"KerasHub's {BACKBONE_OF[model_type]} has no pooler; the encoder's is left out.", stacklevel=3)
    backbone = getattr(keras_hub.models, BACKBONE_OF[model_type])(**backbone_arguments(encoder, model_type))
    variables = {v.path: v for v in backbone.weights}
    for path, name, layout in backbone_links(model_type, encoder):
        variable = variables[path]
        variable.assign(to_keras_hub_layout(layout, tensors[name], tuple(variable.shape), offset))
    return backbone


def _keras_hub_tokenizer(keras_hub, tokenizer, model_type):
    """The family's KerasHub tokenizer on the vocabulary of a kerasbert
    tokenizer (written as transformers' files, which KerasHub reads)."""
    expected, layout = _TOKENIZER_KINDS[model_type]
    if type(tokenizer).__name__ != expected or getattr(tokenizer, "layout", None) != layout:
        has = type(tokenizer).__name__ + (f" (layout={tokenizer.layout!r})" if getattr(tokenizer, "layout", None)
                                          else "")
        wants = expected + (f" with layout={layout!r}" if layout else "")
        raise ValueError(f"tokenizer is a {has}; KerasHub's {model_type} tokenizer is built from a {wants}.")
    name = BACKBONES[BACKBONE_OF[model_type]]["tokenizer"]
    cls = getattr(keras_hub.models, name)
    with tempfile.TemporaryDirectory(prefix="kerasbert-keras-hub-") as files:
        tokenizer.save_to_preset(files)

        def path(file):
            return os.path.join(files, file)

        if expected == "WordPieceTokenizer":
            strip = tokenizer.lowercase if tokenizer.strip_accents is None else tokenizer.strip_accents
            return cls(vocabulary=path("vocab.txt"), lowercase=tokenizer.lowercase, strip_accents=bool(strip))
        if expected == "BytePairTokenizer":
            return cls(vocabulary=path("vocab.json"), merges=path("merges.txt"))
        model_file = {"albert": "spiece.model", "xlm_roberta": "sentencepiece.bpe.model",
                      "deberta_v2": "spm.model"}[layout]
        return cls(proto=path(model_file))


def _task(keras_hub, model, kind, backbone, hub_tokenizer, model_type, directory):
    """The KerasHub task of a TextClassifier or MaskedLM, holding its head's
    weights."""
    family = BACKBONES[BACKBONE_OF[model_type]]
    name = family["classifier" if kind == "classifier" else "masked_lm"]
    if name is None:
        raise ValueError(f"KerasHub has no {model_type} {'text classifier' if kind == 'classifier' else 'masked LM'}; "
                         "write the encoder (model.encoder).")
    preprocessor = None
    if hub_tokenizer is not None:
        preprocessor_class = getattr(keras_hub.models, f"{name}Preprocessor")
        length = getattr(getattr(model, "preprocessor", None), "sequence_length", None)
        preprocessor = preprocessor_class(hub_tokenizer, **({"sequence_length": length} if length else {}))
    if kind == "classifier":
        check_fine_tuning_head(model, model_type, directory)
        task = getattr(keras_hub.models, name)(backbone=backbone, num_classes=model.num_classes,
                                                preprocessor=preprocessor)
        links, tensors = classifier_links(model_type), _head_tensors_of(model, model_type, {"classifier"})
    else:
        problem = masked_lm_difference(model_type)
        if problem:
            raise ValueError(f"KerasHub's {name} head is not kerasbert's MaskedLM head: {problem} Write the "
                             "encoder (model.encoder) instead.")
        task = getattr(keras_hub.models, name)(backbone=backbone, preprocessor=preprocessor)
        links, tensors = mlm_links(model_type), _head_tensors_of(model, model_type, {"mlm"})
    variables = {v.path: v for v in task.weights}
    for path, hf_name, layout in links:
        variable = variables[path]
        variable.assign(to_keras_hub_layout(layout, tensors[hf_name], tuple(variable.shape)))
    return task
