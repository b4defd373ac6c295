"""KerasHub presets and kerasbert: the families both have, their configs and
weights as tables, and reading a KerasHub preset directory.

A KerasHub preset directory holds `config.json` (the backbone as Keras
serialises it: `{"module": "keras_hub.src.models...", "class_name":
"BertBackbone", "config": {...}}`), `model.weights.h5`, and where it has
them `tokenizer.json` (the tokenizer's config) with its vocabulary files in
`assets/tokenizer/`, `preprocessor.json`, and a task's `task.json` +
`task.weights.h5`.

Every weight is linked by name: a KerasHub variable path
(`transformer_layer_0/self_attention_layer/query/kernel`) to the Hugging
Face tensor of `kerasbert.convert.weights`'s table
(`encoder.layer.0.attention.self.query.weight`), and a layout (`_LAYOUTS`).
Reading a KerasHub preset writes it as a Hugging Face checkpoint
(`write_huggingface_checkpoint`), which every kerasbert loader reads;
`keras_hub_writer` walks the same links the other way.
"""

import os
import shutil
import warnings

import numpy as np

from kerasbert.convert.configs import CLASS_PREFIX, POOLER_NAMES
from kerasbert.convert.weights import _block_names, assign_huggingface_weights
from kerasbert.utils.checks import abbreviated
from kerasbert.utils.io import read_json, write_json

# The KerasHub backbones kerasbert reads and writes: the Hugging Face family
# each is, the values KerasHub fixes in code (activation, LayerNorm
# epsilon), its tokenizer and its tasks (KerasHub names them all after the
# family: `BertBackbone`, `BertTokenizer`, `BertTextClassifier`, `BertMaskedLM`).


def _backbone(prefix, model_type, activation, epsilon, tasks=True):
    return f"{prefix}Backbone", {
        "model_type": model_type, "activation": activation, "epsilon": epsilon, "tokenizer": f"{prefix}Tokenizer",
        "classifier": f"{prefix}TextClassifier" if tasks else None, "masked_lm": f"{prefix}MaskedLM" if tasks else None,
    }


BACKBONES = dict(_backbone(*row) for row in [
    ("Bert", "bert", "gelu_approximate", 1e-12),
    ("Albert", "albert", "gelu_approximate", 1e-12),
    ("Roberta", "roberta", "gelu", 1e-5),
    ("XLMRoberta", "xlm-roberta", "gelu", 1e-5),
    ("Electra", "electra", "gelu_approximate", 1e-12, False),  # KerasHub has no ELECTRA tasks
    ("DistilBert", "distilbert", "gelu", 1e-12),
    ("DebertaV3", "deberta-v2", "gelu", 1e-7),
])

# model_type -> KerasHub backbone class name.
BACKBONE_OF = {entry["model_type"]: name for name, entry in BACKBONES.items()}

# Families whose KerasHub position table starts at position 0 where Hugging
# Face's (and kerasbert's) reserves `position_offset` rows first.
FAIRSEQ_POSITIONS = ("roberta", "xlm-roberta")

# Families whose KerasHub backbone has token types (a segment table).
SEGMENTED = ("bert", "albert", "electra")

# The classifier heads of KerasHub's text classifiers: their layers (in the
# task) and the Hugging Face `...ForSequenceClassification` tensors they are.
# Each is the head transformers has: BERT/ALBERT the pooler and one dense
# layer; the others a dense layer (tanh, tanh, ReLU, GELU) before it.
CLASSIFIER_LAYERS = {
    "bert": {"logits": "classifier"},
    "albert": {"logits": "classifier"},
    "roberta": {"pooled_dense": "classifier.dense", "logits": "classifier.out_proj"},
    "xlm-roberta": {"pooled_dense": "classifier.dense", "logits": "classifier.out_proj"},
    "distilbert": {"pooled_dense": "pre_classifier", "logits": "classifier"},
    "deberta-v2": {"pooled_dense": "pooler.dense", "logits": "classifier"},
}

# The masked-LM head of KerasHub's `...MaskedLM` (`mlm_head/...`) as the
# Hugging Face `...ForMaskedLM` tensors (`kerasbert.convert.heads`).
# KerasHub's heads normalise with epsilon 1e-5 (its MaskedLMHead's default)
# and apply the activation below; kerasbert's MaskedLM head (as
# transformers') the encoder's epsilon and activation. Where both agree
# (RoBERTa, XLM-RoBERTa) the head is converted; elsewhere it is not.
MLM_HEAD_LAYER_NORM_EPSILON = 1e-5
MLM_HEAD_ACTIVATIONS = {"bert": "gelu", "albert": "gelu_approximate", "roberta": "gelu", "xlm-roberta": "gelu",
                        "distilbert": "gelu", "deberta-v2": "gelu"}


def masked_lm_difference(model_type):
    """Why KerasHub's masked-LM head of `model_type` is not kerasbert's
    (a sentence), or "" where they are the same computation."""
    name = BACKBONE_OF[model_type]
    family = BACKBONES[name]
    differences = []
    if MLM_HEAD_ACTIVATIONS.get(model_type) != family["activation"]:
        differences.append(f"it applies {MLM_HEAD_ACTIVATIONS.get(model_type)!r} where the encoder applies "
                           f"{family['activation']!r}")
    if family["epsilon"] != MLM_HEAD_LAYER_NORM_EPSILON:
        differences.append(f"its LayerNorm epsilon is {MLM_HEAD_LAYER_NORM_EPSILON}, the encoder's "
                           f"{family['epsilon']}")
    if not differences:
        return ""
    return (f"{' and '.join(differences)}, while kerasbert's MaskedLM head (as transformers') takes the "
            "encoder's; its logits would differ.")

# KerasHub's tokenizer files (in `assets/tokenizer/`) by kind, and the
# Hugging Face files they are.
TOKENIZER_ASSETS = {
    "BertTokenizer": {"vocabulary.txt": "vocab.txt"},
    "ElectraTokenizer": {"vocabulary.txt": "vocab.txt"},
    "DistilBertTokenizer": {"vocabulary.txt": "vocab.txt"},
    "RobertaTokenizer": {"vocabulary.json": "vocab.json", "merges.txt": "merges.txt"},
    "AlbertTokenizer": {"vocabulary.spm": "spiece.model"},
    "XLMRobertaTokenizer": {"vocabulary.spm": "sentencepiece.bpe.model"},
    "DebertaV3Tokenizer": {"vocabulary.spm": "spm.model"},
}


def _added_token(content):
    """A tokenizer_config.json special token that swallows the space on its
    left, as transformers' `<mask>` / `[MASK]` of these families do."""
    return {"content": content, "lstrip": True, "rstrip": False, "normalized": False, "single_word": False,
            "special": True}


# tokenizer_config.json of each family: transformers' tokenizer class and
# conventions (ALBERT lowercases and folds accents; RoBERTa, XLM-RoBERTa and
# ALBERT's mask token swallows the space before it). WordPiece's casing
# comes from the KerasHub tokenizer's config (`_wordpiece_config`).
TOKENIZER_CONFIGS = {
    "RobertaTokenizer": {"tokenizer_class": "RobertaTokenizer", "add_prefix_space": False,
                         "mask_token": _added_token("<mask>")},
    "AlbertTokenizer": {"tokenizer_class": "AlbertTokenizer", "do_lower_case": True, "keep_accents": False,
                        "mask_token": _added_token("[MASK]")},
    "XLMRobertaTokenizer": {"tokenizer_class": "XLMRobertaTokenizer", "mask_token": _added_token("<mask>")},
    "DebertaV3Tokenizer": {"tokenizer_class": "DebertaV2Tokenizer", "do_lower_case": False, "split_by_punct": False},
}

_KERAS_ONLY = ("name", "trainable", "dtype")  # Keras' own entries of a serialised config


# --------------------------------------------------------------------------
# Configs


def is_keras_hub_config(config):
    """Whether a parsed `config.json` is a KerasHub object's."""
    if not isinstance(config, dict):
        return False
    module, registered = config.get("module"), config.get("registered_name")
    return (isinstance(module, str) and module.split(".")[0] in ("keras_hub", "keras_nlp")) or (
        isinstance(registered, str) and registered.split(">")[0] in ("keras_hub", "keras_nlp"))


def backbone_config(directory):
    """`(class name, constructor arguments)` of the backbone in a KerasHub
    preset directory's config.json, checked: one of `BACKBONES`, plain
    values only."""
    path = os.path.join(directory, "config.json")
    config = read_json(path, "KerasHub config.json")
    name = config.get("class_name")
    if not is_keras_hub_config(config) or name not in BACKBONES:
        raise ValueError(
            f"{path} holds a {abbreviated(name)} ({abbreviated(config.get('module'))}); kerasbert reads the "
            f"KerasHub backbones {sorted(BACKBONES)}."
        )
    return name, plain_arguments(config.get("config"), path, name)


def plain_arguments(arguments, source, what):
    """A serialised config's constructor arguments without Keras' own
    entries; a ValueError unless they are plain values (never serialised
    objects, which would name code to load)."""
    if not isinstance(arguments, dict):
        raise ValueError(f"{source}: the {what} 'config' must be a JSON object; got {abbreviated(arguments)}.")
    arguments = {k: v for k, v in arguments.items() if k not in _KERAS_ONLY}
    for name, value in arguments.items():
        if isinstance(value, (dict, list)) and "class_name" in str(value):
            raise ValueError(f"{source}: {what} argument {name}={abbreviated(value)} is not a plain value.")
    return arguments


def encoder_arguments(class_name, config):
    """`Encoder` arguments of a KerasHub backbone's config."""
    family = BACKBONES[class_name]
    model_type = family["model_type"]

    def get(key, default=None):
        if key not in config and default is None:
            raise ValueError(f"The KerasHub {class_name} config lacks {key!r}.")
        return config.get(key, default)

    hidden_dim = get("hidden_dim")
    arguments = {
        "vocabulary_size": get("vocab_size" if model_type == "electra" else "vocabulary_size"),
        "num_layers": get("num_layers"),
        "num_heads": get("num_heads"),
        "hidden_dim": hidden_dim,
        "intermediate_dim": get("intermediate_dim"),
        "embedding_dim": None,
        "num_segments": get("num_segments", 2) if model_type in SEGMENTED else 0,
        "max_sequence_length": get("max_sequence_length", 512),
        "position_offset": 2 if model_type in FAIRSEQ_POSITIONS else 0,
        "dropout": get("dropout", 0.0 if model_type == "albert" else 0.1),
        "activation": family["activation"],
        "layer_norm_epsilon": family["epsilon"],
        # ELECTRA's KerasHub pooler has no Hugging Face counterpart: it is left out.
        "pooler": model_type in ("bert", "albert"),
    }
    if model_type == "albert":
        arguments.update(embedding_dim=get("embedding_dim"), num_layer_groups=get("num_groups", 1),
                         num_inner_layers=get("num_inner_repetitions", 1))
    if model_type == "electra" and get("embedding_dim") != hidden_dim:
        arguments["embedding_dim"] = get("embedding_dim")
    if model_type == "deberta-v2":
        arguments.update(position_encoding="relative", relative_buckets=get("bucket_size", 256),
                         max_relative_distance=arguments["max_sequence_length"])
    return arguments


# --------------------------------------------------------------------------
# Weights: KerasHub variable paths <-> Hugging Face tensor names


# How a KerasHub variable is laid out against its Hugging Face tensor:
# "table" and "vector" (reshaped: attention biases are (heads, head_dim))
# as they are; "kernel" an (in, ...) kernel and "output_kernel" a
# (..., out) kernel, flattened to (in, out) and transposed (torch's
# Linear); "positions" the position table without the reserved rows.
_LAYOUTS = ("table", "vector", "kernel", "output_kernel", "positions")


def to_huggingface_layout(layout, value, offset=0):
    if layout == "kernel":
        return value.reshape(value.shape[0], -1).T
    if layout == "output_kernel":
        return value.reshape(-1, value.shape[-1]).T
    if layout == "vector":
        return value.reshape(-1)
    if layout == "positions" and offset:
        return np.concatenate([np.zeros((offset, value.shape[1]), value.dtype), value])
    return value


def to_keras_hub_layout(layout, value, shape, offset=0):
    if layout in ("kernel", "output_kernel"):
        return np.ascontiguousarray(value.T).reshape(shape)
    if layout == "positions":
        return value[offset:]
    return value.reshape(shape)


def _dense(path, name):
    return [(f"{path}/kernel", f"{name}.weight", "kernel"), (f"{path}/bias", f"{name}.bias", "vector")]


def _norm(path, name):
    return [(f"{path}/gamma", f"{name}.weight", "vector"), (f"{path}/beta", f"{name}.bias", "vector")]


def _block_prefix(model_type, index, encoder):
    if model_type == "albert":
        group, inner = divmod(index, encoder.num_inner_layers)
        return f"group_{group}_inner_layer_{inner}"
    if model_type == "deberta-v2":
        return f"disentangled_attention_encoder_layer_{index}"
    return f"transformer_layer_{index}"


def _embedding_paths(model_type):
    """The token and position tables' KerasHub paths."""
    scope = {"roberta": "embeddings/", "xlm-roberta": "embeddings/",
             "distilbert": "token_and_position_embedding/"}.get(model_type, "")
    return f"{scope}token_embedding/embeddings", f"{scope}position_embedding/embeddings"


def backbone_links(model_type, encoder):
    """`[(KerasHub path, Hugging Face name, layout)]` of every weight the
    backbone of `model_type` shares with `encoder` (an `Encoder` of that
    family's shape)."""
    token, position = _embedding_paths(model_type)
    links = [(token, "embeddings.word_embeddings.weight", "table")]
    if model_type != "deberta-v2":
        links.append((position, "embeddings.position_embeddings.weight", "positions"))
    if model_type in SEGMENTED:
        links.append(("segment_embedding/embeddings", "embeddings.token_type_embeddings.weight", "table"))
    links += _norm("embeddings_layer_norm", "embeddings.LayerNorm")
    if model_type == "albert":
        links += _dense("embedding_projection", "encoder.embedding_hidden_mapping_in")
    if model_type == "electra" and encoder.embedding_dim is not None:
        links += _dense("embeddings_projection", "embeddings_project")
    if model_type == "deberta-v2":
        links.append(("rel_embedding/rel_embedding", "encoder.rel_embeddings.weight", "table"))
        links += _norm("rel_embedding/rel_embeddings_layer_norm", "encoder.LayerNorm")
    for index in range(len(encoder.transformer_blocks)):
        names = _block_names(model_type, index, encoder)
        prefix = _block_prefix(model_type, index, encoder)
        attention = f"{prefix}/self_attention_layer"
        for part, name in zip(("query", "key", "value"), names["qkv"]):
            links += _dense(f"{attention}/{part}", name)
        links += [(f"{attention}/attention_output/kernel", f"{names['attention_output']}.weight", "output_kernel"),
                  (f"{attention}/attention_output/bias", f"{names['attention_output']}.bias", "vector")]
        links += _norm(f"{prefix}/self_attention_layer_norm", names["attention_layer_norm"])
        links += _dense(f"{prefix}/feedforward_intermediate_dense", names["intermediate"])
        links += _dense(f"{prefix}/feedforward_output_dense", names["output"])
        links += _norm(f"{prefix}/feedforward_layer_norm", names["output_layer_norm"])
    if model_type in ("bert", "albert") and encoder.pooler:
        links += _dense("pooled_dense", POOLER_NAMES[model_type])
    return links


def classifier_links(model_type):
    """The classifier head's links (KerasHub layer's variable, Hugging Face
    name, layout), the layer named first."""
    links = []
    for layer, name in CLASSIFIER_LAYERS[model_type].items():
        links += _dense(layer, name)
    return links


def mlm_links(model_type):
    """The masked-LM head's links: KerasHub's `mlm_head` parts as the
    family's Hugging Face `...ForMaskedLM` head (`heads._MLM_HEAD_NAMES`)."""
    from kerasbert.convert.heads import _MLM_HEAD_NAMES

    dense, norm, bias = _MLM_HEAD_NAMES[model_type]
    return (_dense("mlm_head/intermediate_dense", dense) + _norm("mlm_head/intermediate_layer_norm", norm)
            + [("mlm_head/output_bias", bias, "vector")])


def variables_by_path(model):
    """{path: float32 array} of a Keras model's weights."""
    import keras

    return {v.path: np.asarray(keras.ops.convert_to_numpy(v), np.float32) for v in model.weights}


def check_keras_hub():
    """The `keras_hub` module, or an ImportError saying what to install."""
    try:
        import keras_hub
    except ImportError:
        raise ImportError("Reading or writing KerasHub presets needs the `keras-hub` package: "
                          "pip install keras-hub") from None
    return keras_hub


# --------------------------------------------------------------------------
# Reading a KerasHub preset directory


def write_huggingface_checkpoint(source, directory):
    """Writes the KerasHub preset directory `source` as a Hugging Face
    checkpoint in `directory`: `config.json` and `model.safetensors` (the
    backbone, and a text classifier's or masked LM's head where `source`
    is such a task's preset), and the tokenizer's files as transformers
    names them, with the family's conventions. Returns `directory`."""
    from kerasbert.convert.configs import huggingface_config
    from kerasbert.convert.writer import _encoder_tensors, _prefixed, _write_checkpoint
    from kerasbert.encoder import Encoder
    from kerasbert.layers.initializers import placeholder_weights

    keras_hub = check_keras_hub()
    class_name, arguments = backbone_config(source)
    model_type = BACKBONES[class_name]["model_type"]
    weights = os.path.join(source, "model.weights.h5")
    if not os.path.isfile(weights):
        found = sorted(os.listdir(source))[:12]
        raise FileNotFoundError(f"{source} has no model.weights.h5 (found {found}); a KerasHub preset keeps its "
                                "backbone's weights there (sharded weights are not read).")
    with placeholder_weights(True):  # every variable loaded or assigned below
        backbone = getattr(keras_hub.models, class_name)(**arguments)
        encoder = Encoder(**encoder_arguments(class_name, arguments))
    backbone.load_weights(weights)
    hub = variables_by_path(backbone)
    offset = encoder.position_offset
    assign_huggingface_weights(
        encoder, {name: to_huggingface_layout(layout, hub[path], offset)
                  for path, name, layout in backbone_links(model_type, encoder)}, model_type, source=source)
    config = huggingface_config(encoder, model_type)
    tensors = _encoder_tensors(encoder, config)
    head = _task_head(keras_hub, source, class_name, backbone, model_type)
    if head is not None:
        architecture, num_classes, head_tensors = head
        config["architectures"] = [f"{CLASS_PREFIX[model_type]}For{architecture}"]
        if num_classes is not None:
            labels = [f"LABEL_{i}" for i in range(num_classes)]
            config.update(id2label=dict(enumerate(labels)), label2id={label: i for i, label in enumerate(labels)},
                          problem_type="regression" if num_classes == 1 else "single_label_classification")
        tensors = {**_prefixed(model_type, tensors), **head_tensors}
    os.makedirs(directory, exist_ok=True)
    _write_checkpoint(directory, config, tensors)
    write_tokenizer_files(source, directory, class_name)
    return directory


def _task_spec(source, class_name):
    """`(task class name, its plain arguments)` of the preset's task.json, or
    None for a backbone preset."""
    path = os.path.join(source, "task.json")
    if not os.path.isfile(path):
        return None
    spec = read_json(path, "KerasHub task.json")
    name = spec.get("class_name")
    family = BACKBONES[class_name]
    if not is_keras_hub_config(spec) or name not in (family["classifier"], family["masked_lm"]):
        known = [n for n in (family["classifier"], family["masked_lm"]) if n]
        raise ValueError(
            f"{path} holds a {abbreviated(name)}; kerasbert reads a {class_name}'s KerasHub tasks {known} "
            "(their heads), or a backbone preset without task.json."
        )
    config = spec.get("config")
    if not isinstance(config, dict):
        raise ValueError(f"{path}: 'config' must be a JSON object.")
    return name, plain_arguments({k: v for k, v in config.items() if k not in ("backbone", "preprocessor")},
                                 path, name)


def _task_head(keras_hub, source, class_name, backbone, model_type):
    """`(transformers architecture suffix, number of classes or None, head
    tensors)` of a KerasHub task preset (its task.json and
    task.weights.h5), or None for a backbone preset."""
    spec = _task_spec(source, class_name)
    if spec is None:
        return None
    name, arguments = spec
    path = os.path.join(source, "task.weights.h5")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{source} has task.json but no task.weights.h5.")
    with _placeholders():
        if name == BACKBONES[class_name]["classifier"]:
            num_classes = arguments.get("num_classes")
            hidden = arguments.get("hidden_dim")
            if hidden not in (None, backbone.hidden_dim):
                raise ValueError(
                    f"{source}/task.json has hidden_dim={hidden}; transformers' {model_type} classification head, "
                    f"which kerasbert's TextClassifier loads, is as wide as the encoder ({backbone.hidden_dim})."
                )
            if arguments.get("activation") not in (None, "linear"):
                warnings.warn(f"{source}: the KerasHub classifier applies {arguments['activation']!r} to its "
                              "logits; kerasbert's TextClassifier returns the logits.", stacklevel=4)
            options = {"hidden_dim": hidden} if hidden is not None else {}
            task = getattr(keras_hub.models, name)(backbone=backbone, num_classes=num_classes, preprocessor=None,
                                                    **options)
            links, architecture = classifier_links(model_type), "SequenceClassification"
        else:
            problem = masked_lm_difference(model_type)
            if problem:
                warnings.warn(f"{source}: KerasHub's {name} head is left out: {problem}", stacklevel=4)
                return None
            num_classes = None
            task = getattr(keras_hub.models, name)(backbone=backbone, preprocessor=None)
            links, architecture = mlm_links(model_type), "MaskedLM"
    task.load_task_weights(path)
    hub = variables_by_path(task)
    return architecture, num_classes, {name: to_huggingface_layout(layout, hub[variable])
                                       for variable, name, layout in links}


def _placeholders():
    from kerasbert.layers.initializers import placeholder_weights

    return placeholder_weights(True)


def write_tokenizer_files(source, directory, class_name):
    """The tokenizer files of a KerasHub preset (its tokenizer.json config
    and `assets/tokenizer/`) as transformers names them, in `directory`;
    nothing when the preset has no tokenizer."""
    path = os.path.join(source, "tokenizer.json")
    if not os.path.isfile(path):
        return
    spec = read_json(path, "KerasHub tokenizer.json")
    name = spec.get("class_name")
    expected = BACKBONES[class_name]["tokenizer"]
    if not is_keras_hub_config(spec) or name != expected:
        raise ValueError(f"{path} holds a {abbreviated(name)}; a {class_name}'s KerasHub tokenizer is a {expected}.")
    config = plain_arguments(spec.get("config"), path, name)
    assets = os.path.join(source, "assets", "tokenizer")
    for asset, target in TOKENIZER_ASSETS[name].items():
        if not os.path.isfile(os.path.join(assets, asset)):
            raise FileNotFoundError(f"{source}: the {name}'s assets/tokenizer/{asset} is missing.")
        shutil.copyfile(os.path.join(assets, asset), os.path.join(directory, target))
    settings = TOKENIZER_CONFIGS.get(name) or _wordpiece_config(config)
    write_json(os.path.join(directory, "tokenizer_config.json"), settings)


def _wordpiece_config(config):
    """tokenizer_config.json of a KerasHub WordPiece tokenizer: its casing;
    accents folded where it lowercases (transformers' BERT convention,
    which KerasHub's `strip_accents=False` default departs from) or where
    it says so."""
    lowercase = bool(config.get("lowercase", False))
    return {"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase,
            "strip_accents": True if config.get("strip_accents") else None}
