"""Hugging Face transformers checkpoints <-> kerasbert encoders,
pretraining tasks and fine-tuning tasks.

One table links every encoder variable to the Hugging Face tensor(s) it comes
from; loading and saving walk the same table in opposite directions, so the
two can never drift apart. The families differ only in tensor names:

- bert, roberta, electra: `encoder.layer.{i}.attention.self.query` ...
- albert: `encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.query` ...

A second table does the same for the heads of `BertForPreTraining`,
`AlbertForPreTraining`, the `...ForMaskedLM` models, `ElectraForPreTraining`
and the `...ForSequenceClassification`, `...ForTokenClassification` and
`...ForQuestionAnswering` models (`head_weight_links`).
"""

import os
import warnings

import numpy as np

from kerasbert.layers.initializers import placeholder_weights
from kerasbert.utils.integrity import check_hub_blob
from kerasbert.utils.io import (
    read_json,
    read_safetensors,
    write_json,
    write_safetensors,
)

MODEL_TYPES = ("bert", "albert", "roberta", "electra")

# Hugging Face `hidden_act` -> kerasbert `activation`.
_ACTIVATIONS_FROM_HF = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "tanh": "tanh",
}
_ACTIVATIONS_TO_HF = {
    "gelu": "gelu",
    "gelu_approximate": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "tanh": "tanh",
}
_POOLER_NAMES = {"albert": "pooler", "bert": "pooler.dense", "roberta": "pooler.dense"}


# --------------------------------------------------------------------------
# Configs


def encoder_config_from_huggingface(hf_config, weight_names=None):
    """Maps a Hugging Face `config.json` dict to `Encoder` keyword arguments.

    `weight_names` (the checkpoint's tensor names, prefix stripped) decides
    whether the pooler exists: RoBERTa and some BERT checkpoints ship none.
    """
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"config.json has model_type={model_type!r}; kerasbert converts "
            f"{list(MODEL_TYPES)}."
        )
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"config.json has position_embedding_type={position_type!r}; only "
            "'absolute' position embeddings are supported."
        )
    hidden_act = hf_config.get("hidden_act", "gelu")
    if hidden_act not in _ACTIVATIONS_FROM_HF:
        raise ValueError(
            f"config.json has hidden_act={hidden_act!r}; supported: "
            f"{sorted(_ACTIVATIONS_FROM_HF)}."
        )

    def get(key, default=None):
        if key not in hf_config and default is None:
            raise ValueError(f"config.json of a {model_type} model lacks {key!r}.")
        return hf_config.get(key, default)

    hidden_dim = get("hidden_size")
    position_offset = 0
    if model_type == "roberta":
        # fairseq: positions start right after the padding row.
        position_offset = get("pad_token_id", 1) + 1
    embedding_dim = None
    if model_type == "albert":
        embedding_dim = get("embedding_size", 128)  # ALBERT always projects
    elif model_type == "electra" and get("embedding_size", hidden_dim) != hidden_dim:
        embedding_dim = get("embedding_size")
    pooler = model_type != "electra"
    if pooler and weight_names is not None:
        pooler = f"{_POOLER_NAMES[model_type]}.weight" in weight_names
    config = {
        "vocabulary_size": get("vocab_size"),
        "num_layers": get("num_hidden_layers"),
        "num_heads": get("num_attention_heads"),
        "hidden_dim": hidden_dim,
        "intermediate_dim": get("intermediate_size"),
        "embedding_dim": embedding_dim,
        "num_segments": get("type_vocab_size", 2),
        "max_sequence_length": get("max_position_embeddings", 512) - position_offset,
        "position_offset": position_offset,
        "dropout": get("hidden_dropout_prob", 0.1),
        "attention_dropout": get("attention_probs_dropout_prob", 0.1),
        "activation": _ACTIVATIONS_FROM_HF[hidden_act],
        "layer_norm_epsilon": get("layer_norm_eps", 1e-12),
        "num_layer_groups": None,
        "num_inner_layers": 1,
        "pooler": pooler,
        "initializer_range": get("initializer_range", 0.02),
    }
    if model_type == "albert":
        config["num_layer_groups"] = get("num_hidden_groups", 1)
        config["num_inner_layers"] = get("inner_group_num", 1)
    return config


def infer_model_type(encoder):
    """The Hugging Face family that represents `encoder` exactly."""
    if encoder.num_layer_groups is not None or encoder.num_inner_layers != 1:
        return "albert"
    if encoder.position_offset > 0:
        return "roberta"
    if encoder.embedding_dim is not None:
        return "albert" if encoder.pooler else "electra"
    return "bert" if encoder.pooler else "electra"


def huggingface_config(encoder, model_type=None):
    """The Hugging Face `config.json` dict for an encoder."""
    model_type = model_type or infer_model_type(encoder)
    _check_representable(encoder, model_type)
    config = {
        "model_type": model_type,
        "architectures": [f"{_CLASS_PREFIX[model_type]}Model"],
        "vocab_size": encoder.vocabulary_size,
        "hidden_size": encoder.hidden_dim,
        "num_hidden_layers": encoder.num_layers,
        "num_attention_heads": encoder.num_heads,
        "intermediate_size": encoder.intermediate_dim,
        "hidden_act": _ACTIVATIONS_TO_HF[encoder.activation],
        "hidden_dropout_prob": encoder.dropout,
        "attention_probs_dropout_prob": (
            encoder.dropout if encoder.attention_dropout is None else encoder.attention_dropout
        ),
        "max_position_embeddings": encoder.max_sequence_length + encoder.position_offset,
        "type_vocab_size": max(encoder.num_segments, 1),
        "layer_norm_eps": encoder.layer_norm_epsilon,
        "initializer_range": encoder.initializer_range,
        "position_embedding_type": "absolute",
        "pad_token_id": max(encoder.position_offset - 1, 0),
    }
    if model_type == "roberta":
        config.update(bos_token_id=0, eos_token_id=2)
    if model_type in ("albert", "electra"):
        config["embedding_size"] = encoder.embedding_dim or encoder.hidden_dim
    if model_type == "albert":
        config["num_hidden_groups"] = encoder.num_layer_groups or encoder.num_layers
        config["inner_group_num"] = encoder.num_inner_layers
    return config


_CLASS_PREFIX = {"bert": "Bert", "albert": "Albert", "roberta": "Roberta", "electra": "Electra"}


def _check_representable(encoder, model_type):
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type={model_type!r}; expected one of {list(MODEL_TYPES)}.")
    problems = []
    shared = encoder.num_layer_groups is not None or encoder.num_inner_layers != 1
    if shared and model_type != "albert":
        problems.append("cross-layer sharing (num_layer_groups) exists only in albert")
    if encoder.position_offset and model_type != "roberta":
        problems.append("position_offset > 0 exists only in roberta")
    if model_type == "roberta" and not encoder.position_offset:
        problems.append("roberta needs position_offset >= 1")
    if encoder.embedding_dim is not None and model_type in ("bert", "roberta"):
        problems.append(f"an embedding projection (embedding_dim) does not exist in {model_type}")
    if encoder.pooler and model_type == "electra":
        problems.append("electra has no pooler")
    if problems:
        raise ValueError(
            f"This encoder cannot be written as a Hugging Face {model_type!r} "
            f"model: {'; '.join(problems)}."
        )


# --------------------------------------------------------------------------
# The weight table


class _Link:
    """One encoder variable and the Hugging Face tensor(s) it is made of.

    `transpose`: torch Linear weights are (out, in), Keras kernels (in, out).
    Several names are concatenated along the last axis (the fused QKV).
    """

    def __init__(self, variable, names, transpose=False):
        self.variable, self.names, self.transpose = variable, names, transpose

    def checked_value(self, tensors, source, hint, kind="tensor(s)", owner=""):
        """`to_keras(tensors)`, or a ValueError when its shape is not the
        variable's (`owner` and `hint` complete the message)."""
        value = self.to_keras(tensors)
        if tuple(value.shape) != tuple(self.variable.shape):
            raise ValueError(
                f"{source}: {kind} {self.names} have shape {value.shape}, but "
                f"{self.variable.path}{owner} needs {tuple(self.variable.shape)}; {hint}"
            )
        return value

    def to_keras(self, tensors):
        parts = [tensors[n].T if self.transpose else tensors[n] for n in self.names]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-1)

    def from_keras(self, value):
        parts = np.split(value, len(self.names), axis=-1)
        return {
            n: np.ascontiguousarray(p.T if self.transpose else p)
            for n, p in zip(self.names, parts)
        }


def _dense(layer, name):
    return [_Link(layer.kernel, [f"{name}.weight"], True), _Link(layer.bias, [f"{name}.bias"])]


def _fused_dense(layer, names):
    return [
        _Link(layer.kernel, [f"{n}.weight" for n in names], True),
        _Link(layer.bias, [f"{n}.bias" for n in names]),
    ]


def _layer_norm(layer, name):
    return [_Link(layer.gamma, [f"{name}.weight"]), _Link(layer.beta, [f"{name}.bias"])]


def _block_names(model_type, index, encoder):
    """Hugging Face names of the parts of block `index` of the encoder."""
    if model_type == "albert":
        group, inner = divmod(index, encoder.num_inner_layers)
        p = f"encoder.albert_layer_groups.{group}.albert_layers.{inner}."
        return {
            "qkv": [p + "attention.query", p + "attention.key", p + "attention.value"],
            "attention_output": p + "attention.dense",
            "attention_layer_norm": p + "attention.LayerNorm",
            "intermediate": p + "ffn",
            "output": p + "ffn_output",
            "output_layer_norm": p + "full_layer_layer_norm",
        }
    p = f"encoder.layer.{index}."
    return {
        "qkv": [p + "attention.self.query", p + "attention.self.key", p + "attention.self.value"],
        "attention_output": p + "attention.output.dense",
        "attention_layer_norm": p + "attention.output.LayerNorm",
        "intermediate": p + "intermediate.dense",
        "output": p + "output.dense",
        "output_layer_norm": p + "output.LayerNorm",
    }


def weight_links(encoder, model_type):
    """Every encoder variable with its Hugging Face tensor names (no prefix)."""
    links = [
        _Link(encoder.token_embedding.embeddings, ["embeddings.word_embeddings.weight"]),
        _Link(encoder.position_embedding.embeddings, ["embeddings.position_embeddings.weight"]),
    ]
    if encoder.segment_embedding is not None:
        links.append(
            _Link(encoder.segment_embedding.embeddings, ["embeddings.token_type_embeddings.weight"])
        )
    links += _layer_norm(encoder.embeddings_layer_norm, "embeddings.LayerNorm")
    if encoder.embeddings_projection is not None:
        name = {"albert": "encoder.embedding_hidden_mapping_in"}.get(
            model_type, "embeddings_project"
        )
        links += _dense(encoder.embeddings_projection, name)
    for index, block in enumerate(encoder.transformer_blocks):
        names = _block_names(model_type, index, encoder)
        links += _fused_dense(block.attention.qkv, names["qkv"])
        links += _dense(block.attention.output_dense, names["attention_output"])
        links += _layer_norm(block.attention_layer_norm, names["attention_layer_norm"])
        links += _dense(block.intermediate_dense, names["intermediate"])
        links += _dense(block.output_dense, names["output"])
        links += _layer_norm(block.output_layer_norm, names["output_layer_norm"])
    if encoder.pooler_dense is not None:
        links += _dense(encoder.pooler_dense, _POOLER_NAMES[model_type])
    return links


# --------------------------------------------------------------------------
# Reading checkpoints


def _normalise_names(tensors):
    """Strips the task-model prefix ("bert.", "roberta.", ...) and maps the
    old TF-era LayerNorm names gamma/beta to weight/bias."""
    anchor = "embeddings.word_embeddings.weight"
    anchor = next((k for k in tensors if k.endswith(anchor)), None)
    if anchor is None:
        raise ValueError(
            "The checkpoint holds no 'embeddings.word_embeddings.weight' tensor; "
            "it is not a BERT-family encoder checkpoint."
        )
    prefix = anchor[: -len("embeddings.word_embeddings.weight")]
    out = {}
    for name, value in tensors.items():
        if not name.startswith(prefix):
            continue  # task heads (cls., generator_lm_head., ...)
        out[_modern_name(name[len(prefix):])] = value
    return out


def _modern_name(name):
    """TF-era LayerNorm names (`.gamma`, `.beta`) as today's (`.weight`, `.bias`)."""
    if name.endswith(".gamma"):
        return name[: -len("gamma")] + "weight"
    if name.endswith(".beta"):
        return name[: -len("beta")] + "bias"
    return name


def read_huggingface_tensors(directory):
    """All tensors of a Hugging Face checkpoint directory as numpy arrays.

    Reads `model.safetensors` (or a sharded index); falls back to
    `pytorch_model.bin` through `torch.load(weights_only=True)`, which refuses
    to run pickled code. Never plain unpickling.
    """
    single = os.path.join(directory, "model.safetensors")
    index = os.path.join(directory, "model.safetensors.index.json")
    binary = os.path.join(directory, "pytorch_model.bin")
    if os.path.isfile(single):
        check_hub_blob(single)
        return read_safetensors(single)
    if os.path.isfile(index):
        weight_map = read_json(index, "safetensors index").get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(s, str) for s in weight_map.values()):
            raise ValueError(f"{index}: 'weight_map' must map tensor names to shard file names.")
        tensors = {}
        for shard in sorted(set(weight_map.values())):
            path = os.path.join(directory, shard)
            if os.path.dirname(os.path.normpath(shard)) or not os.path.isfile(path):
                raise ValueError(f"The safetensors index names a missing or unsafe shard {shard!r}.")
            check_hub_blob(path)
            tensors.update(read_safetensors(path))
        return tensors
    if os.path.isfile(binary):
        check_hub_blob(binary)
        return _read_torch_binary(binary)
    raise FileNotFoundError(
        f"No weights in {directory}: expected model.safetensors, "
        "model.safetensors.index.json or pytorch_model.bin."
    )


def _read_torch_binary(path):
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path} is a PyTorch checkpoint; reading it needs `torch` "
            "(safely, with weights_only=True). Install torch or provide "
            "model.safetensors instead."
        ) from None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for bad files
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        reason = next((line for line in lines if "Unsupported global" in line), lines[0] if lines else "")
        raise ValueError(
            f"{path} could not be read as a weights-only PyTorch checkpoint "
            f"({type(e).__name__}: {reason}). kerasbert never unpickles arbitrary "
            "objects; convert the file to safetensors."
        ) from None
    return {k: v.to(torch.float32).numpy() if v.is_floating_point() else v.numpy()
            for k, v in state.items()}


def is_huggingface_directory(directory):
    return os.path.isfile(os.path.join(directory, "config.json"))


def load_huggingface_encoder(directory, load_weights=True, dtype=None):
    """Builds an `Encoder` from a Hugging Face checkpoint directory."""
    from kerasbert.encoder import Encoder

    hf_config = read_json(os.path.join(directory, "config.json"), "Hugging Face config.json")
    config = encoder_config_from_huggingface(hf_config)  # validate before reading weights
    tensors = None
    if load_weights:
        tensors = _normalise_names(read_huggingface_tensors(directory))
        config = encoder_config_from_huggingface(hf_config, weight_names=tensors)
    with placeholder_weights(load_weights):  # `weight_links` covers every variable
        encoder = Encoder(**config, dtype=dtype)
    if load_weights:
        assign_huggingface_weights(encoder, tensors, hf_config["model_type"], source=directory)
    return encoder


def assign_huggingface_weights(encoder, tensors, model_type, source="checkpoint"):
    links = weight_links(encoder, model_type)
    missing = [n for link in links for n in link.names if n not in tensors]
    if missing:
        raise ValueError(
            f"{source} lacks {len(missing)} tensor(s) the encoder needs, e.g. "
            f"{missing[:3]}; is the config.json from the same checkpoint?"
        )
    for link in links:
        link.variable.assign(
            link.checked_value(tensors, source, "config.json does not match the weights.")
        )


# --------------------------------------------------------------------------
# Pretraining heads

# The masked-LM head of each family: the transform's dense layer and
# LayerNorm, and the output bias. The decoder is the token embedding (tied),
# so its weight is never read; transformers re-ties it on load.
_MLM_HEAD_NAMES = {
    "bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias"),
    "albert": ("predictions.dense", "predictions.LayerNorm", "predictions.bias"),
    "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias"),
    "electra": ("generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head.bias"),
}
# The sentence-level head a family's pretraining model has: (task, name).
_SENTENCE_HEAD_NAMES = {"bert": ("nsp", "cls.seq_relationship"), "albert": ("sop", "sop_classifier.classifier")}
_DISCRIMINATOR_NAMES = ("discriminator_predictions.dense", "discriminator_predictions.dense_prediction")
# transformers applies exact GELU in these masked-LM heads whatever the
# config's `hidden_act`; BERT's and ALBERT's follow `hidden_act`, as ours do.
_FIXED_MLM_ACTIVATIONS = {"roberta": "gelu", "electra": "gelu"}


def _mlm_head_links(head, model_type):
    dense, layer_norm, bias = _MLM_HEAD_NAMES[model_type]
    return _dense(head.dense, dense) + _layer_norm(head.layer_norm, layer_norm) + [_Link(head.bias, [bias])]


def head_weight_links(task, model_type):
    """The head variables of `task` with their Hugging Face tensor names,
    by head: `"mlm"` (`MaskedLM`, `BertPretrainer`), `"nsp"` or `"sop"`
    (`BertPretrainer`, when `model_type`'s pretraining model has that
    sentence task: bert NSP, albert SOP), `"generator"` and
    `"discriminator"` (`ElectraPretrainer`), `"classifier"`
    (`TextClassifier`, `TokenClassifier`), `"qa_outputs"`
    (`QuestionAnswerer`). Empty for tasks without such a head."""
    fine_tuning = _fine_tuning_head_links(task, model_type)
    if fine_tuning is not None:
        return fine_tuning
    if _head(task) == "electra_pretraining":
        dense, output = _DISCRIMINATOR_NAMES
        return {
            "generator": _mlm_head_links(task.generator_head, model_type),
            "discriminator": _dense(task.get_layer("discriminator_dense"), dense)
            + _dense(task.get_layer("discriminator_output"), output),
        }
    if _head(task) != "masked_lm":
        return {}
    heads = {"mlm": _mlm_head_links(task.mlm_head, model_type)}
    sentence_task = getattr(task, "sentence_task", None)
    if sentence_task and _SENTENCE_HEAD_NAMES.get(model_type, (None,))[0] == sentence_task:
        heads[sentence_task] = _dense(task.sentence_head, _SENTENCE_HEAD_NAMES[model_type][1])
    return heads


# The fine-tuning heads: transformers' `{Family}For{architecture}` model
# and its head's tensors. Sequence classification reads the pooler (BERT,
# ALBERT) or has a dense layer of its own (RoBERTa: tanh, ELECTRA: GELU).
_FINE_TUNING_ARCHITECTURES = {
    "sequence_classification": "SequenceClassification",
    "token_classification": "TokenClassification",
    "question_answering": "QuestionAnswering",
}


def _head(model):
    """The Hugging Face head a task declares (its class's `huggingface_head`:
    "masked_lm", "electra_pretraining" or a key of
    `_FINE_TUNING_ARCHITECTURES`); None for an encoder."""
    return getattr(type(model), "huggingface_head", None)
_CLASSIFIER_ACTIVATIONS = {"roberta": "tanh", "electra": "gelu"}


def _fine_tuning_head_links(task, model_type):
    """{head: links} of a fine-tuning task, or None for other tasks."""
    kind = _FINE_TUNING_ARCHITECTURES.get(_head(task))
    if kind is None:
        return None
    if kind == "QuestionAnswering":
        return {"qa_outputs": _dense(task.output_dense, "qa_outputs")}
    if kind == "TokenClassification":
        return {"classifier": _dense(task.output_dense, "classifier")}
    if model_type in _CLASSIFIER_ACTIVATIONS:
        if task.head_dense is None:
            return {}
        dense, output = _dense(task.head_dense, "classifier.dense"), _dense(task.output_dense, "classifier.out_proj")
        return {"classifier": dense + output}
    return {} if task.head_dense is not None else {"classifier": _dense(task.output_dense, "classifier")}


def _check_fine_tuning_head(task, model_type, directory):
    """The task's head must be the one transformers' model of `model_type` has."""
    kind = _FINE_TUNING_ARCHITECTURES[_head(task)]
    if kind == "SequenceClassification":
        if task.get_config()["pooling"] != "cls":
            raise ValueError(
                f"This TextClassifier pools by {task.get_config()['pooling']!r}; transformers' sequence "
                "classifiers read the first token (pooling='cls'), so it cannot be written as one."
            )
        wants_dense = model_type in _CLASSIFIER_ACTIVATIONS
        if wants_dense != (task.head_dense is not None):
            has = "a dense layer of its own" if task.head_dense is not None else "no dense layer of its own"
            raise ValueError(
                f"This TextClassifier's head has {has}, but transformers' {model_type} sequence classifier "
                f"{'has one' if wants_dense else 'reads the pooler'}; it cannot be written as {model_type!r}."
            )
        expected, activation = _CLASSIFIER_ACTIVATIONS.get(model_type), task.get_config()["activation"]
        if expected and activation != expected:
            raise ValueError(
                f"transformers' {model_type} classification head applies {expected!r}; this TextClassifier's "
                f"applies {activation!r}, so their logits would differ."
            )
    if kind == "TokenClassification" and task.crf is not None:
        warnings.warn(
            f"{directory}: transformers' {_CLASS_PREFIX[model_type]}ForTokenClassification has no CRF; the "
            "checkpoint holds the tag logits (emissions) but not the CRF's transition scores.",
            stacklevel=3,
        )


def _fine_tuning_config(task, config):
    """The task-specific entries of a fine-tuning checkpoint's config.json."""
    kind = _FINE_TUNING_ARCHITECTURES[_head(task)]
    config["architectures"] = [f"{_CLASS_PREFIX[config['model_type']]}For{kind}"]
    if kind == "QuestionAnswering":
        return config
    labels = getattr(task, "labels", None) or [f"LABEL_{i}" for i in range(task.num_classes)]
    config["id2label"] = {str(i): label for i, label in enumerate(labels)}
    config["label2id"] = {label: i for i, label in enumerate(labels)}
    if kind == "SequenceClassification":
        config["problem_type"] = "regression" if task.num_classes == 1 else "single_label_classification"
    return config


def _mlm_heads(task):
    """{head name: MaskedLMHead} of the heads that predict tokens."""
    for name, attribute in (("generator", "generator_head"), ("mlm", "mlm_head")):
        if getattr(task, attribute, None) is not None:
            return {name: getattr(task, attribute)}
    return {}


def _warn_if_activation_differs(task, model_type, heads, source):
    expected = _FIXED_MLM_ACTIVATIONS.get(model_type)
    for name, head in _mlm_heads(task).items():
        if name in heads and expected and head.activation != expected:
            warnings.warn(
                f"{source}: transformers' {model_type} masked-LM head applies {expected!r} "
                f"whatever the config's hidden_act, but this task's {name} head applies "
                f"{head.activation!r} (the encoder's activation); their logits will differ.",
                stacklevel=3,
            )


def _head_tensors(tensors):
    """The checkpoint's tensors under today's names: LayerNorm gamma/beta as
    weight/bias, and a masked-LM output bias stored only as the decoder's
    (`cls.predictions.decoder.bias`) also under its own name."""
    out = {_modern_name(name): value for name, value in tensors.items()}
    for name in list(out):
        if name.endswith(".decoder.bias"):
            out.setdefault(name[: -len("decoder.bias")] + "bias", out[name])
    return out


def _checked_head_values(groups, tensors, source):
    """[(head, link, value)] for every head the checkpoint holds completely; a
    head it lacks is skipped, a partial or misshapen one is an error."""
    values = []
    for head, links in groups.items():
        names = [n for link in links for n in link.names]
        missing = [n for n in names if n not in tensors]
        if len(missing) == len(names):
            continue  # no such head in the checkpoint: keep the fresh one
        if missing:
            raise ValueError(f"{source} holds part of the {head} head but lacks {missing}.")
        for link in links:
            value = link.checked_value(
                tensors, source, "the checkpoint's head does not fit this task's encoder.",
                kind="head tensor(s)", owner=f" of the {head} head",
            )
            values.append((head, link, value))
    return values


def assign_head_weights(task, directory, generator_directory=None):
    """Assigns the pretraining heads a Hugging Face checkpoint holds to
    `task`'s heads: the masked-LM head and the NSP (bert) or SOP (albert)
    head of `BertForPreTraining`, `AlbertForPreTraining` and the
    `...ForMaskedLM` models to a `MaskedLM` or `BertPretrainer`; for an
    `ElectraPretrainer`, the discriminator head of `ElectraForPreTraining`
    from `directory` and the generator head of `ElectraForMaskedLM` from
    `generator_directory`. Heads a checkpoint lacks (a plain `BertModel`
    has none) keep their fresh weights.

    Args:
        task: a task built on the checkpoint's encoder(s).
        directory: a Hugging Face checkpoint directory, or None (nothing
            to read but the generator's).
        generator_directory: the generator's checkpoint directory
            (`ElectraPretrainer` only).

    Returns:
        The names of the heads assigned, e.g. `["mlm", "nsp"]`.

    Raises:
        ValueError: a head is in the checkpoint but incomplete or of a
            shape the task's head does not have.
    """
    electra = _head(task) == "electra_pretraining"
    if generator_directory is not None and not electra:
        raise ValueError(
            f"generator_directory is for an ElectraPretrainer; got a {type(task).__name__}."
        )
    sources = [(directory, lambda head: not electra or head != "generator"),
               (generator_directory, lambda head: head == "generator")]
    values = []
    for source, wanted in sources:
        if source is None:
            continue
        hf_config = read_json(os.path.join(source, "config.json"), "Hugging Face config.json")
        model_type = hf_config.get("model_type")
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"{source}/config.json has model_type={model_type!r}; kerasbert converts {list(MODEL_TYPES)}."
            )
        groups = {h: links for h, links in head_weight_links(task, model_type).items() if wanted(h)}
        if not groups:
            continue
        found = _checked_head_values(groups, _head_tensors(read_huggingface_tensors(source)), source)
        _warn_if_activation_differs(task, model_type, {head for head, _, _ in found}, source)
        values += found
    for _, link, value in values:  # all checked first: an error leaves the task as it was
        link.variable.assign(value)
    return list(dict.fromkeys(head for head, _, _ in values))


# --------------------------------------------------------------------------
# Writing checkpoints


def _encoder_tensors(encoder, model_type):
    """The encoder's tensors under their Hugging Face names (no prefix)."""
    tensors = {}
    for link in weight_links(encoder, model_type):
        tensors.update(link.from_keras(_numpy(link.variable)))
    if model_type == "albert" and encoder.embeddings_projection is None:
        # ALBERT always projects; an identity projection is exact.
        tensors["encoder.embedding_hidden_mapping_in.weight"] = np.eye(encoder.hidden_dim, dtype=np.float32)
        tensors["encoder.embedding_hidden_mapping_in.bias"] = np.zeros(encoder.hidden_dim, np.float32)
    if encoder.segment_embedding is None:
        # transformers always has a token-type table; a zero row adds nothing.
        tensors["embeddings.token_type_embeddings.weight"] = np.zeros(
            (1, encoder.token_embedding.output_dim), np.float32
        )
    return tensors


def _head_tensors_of(task, model_type, heads):
    tensors = {}
    for head, links in head_weight_links(task, model_type).items():
        if head in heads:
            for link in links:
                tensors.update(link.from_keras(_numpy(link.variable)))
    return tensors


def _numpy(variable):
    return np.asarray(variable.numpy(), dtype=np.float32)


def _write_checkpoint(directory, config, tensors):
    os.makedirs(directory, exist_ok=True)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
    write_json(os.path.join(directory, "config.json"), config)


def _prefixed(model_type, tensors):
    return {f"{model_type}.{name}": value for name, value in tensors.items()}


def to_huggingface(model, directory, model_type=None, generator_directory=None):
    """Writes an encoder or a pretraining task as a Hugging Face checkpoint
    (`config.json` and `model.safetensors`).

    - an `Encoder`: the base model (`BertModel`, ...), which
      `transformers.AutoModel.from_pretrained` loads;
    - a `MaskedLM`, or a `BertPretrainer` with `sentence_task=None`:
      `BertForMaskedLM`, `AlbertForMaskedLM`, `RobertaForMaskedLM` or
      `ElectraForMaskedLM`;
    - a `BertPretrainer` with its family's sentence task: `BertForPreTraining`
      (NSP) or `AlbertForPreTraining` (SOP);
    - an `ElectraPretrainer`: `ElectraForPreTraining` (the discriminator) in
      `directory` and `ElectraForMaskedLM` (the generator, with the
      discriminator's embeddings, which it reads) in `generator_directory`;
    - a `TextClassifier`, `TokenClassifier` or `QuestionAnswerer`:
      `...ForSequenceClassification` (with `num_labels`, `problem_type`
      "regression" for `num_classes=1`), `...ForTokenClassification` (with
      the task's `labels` as `id2label`; a CRF's transition scores have no
      place there and are left out, with a warning) or
      `...ForQuestionAnswering`. The family is the one the task's preset
      came from (`task.family`), else inferred; a classifier head that is
      not the family's (BERT/ALBERT: the pooler and one dense layer;
      RoBERTa/ELECTRA: a dense layer with tanh/GELU, then the output
      layer) is refused.

    Task checkpoints load with `transformers.AutoModelForPreTraining` /
    `AutoModelForMaskedLM` and give the task's logits. The tied decoder
    weight is not written: transformers ties it to the token embeddings on
    load, as in the checkpoints it saves itself.

    Args:
        model: a `kerasbert.Encoder`, a pretraining task or a fine-tuning
            task.
        directory: where to write; created if missing.
        model_type: "bert", "albert", "roberta" or "electra"; inferred from
            the encoder's configuration when omitted.
        generator_directory: where an `ElectraPretrainer`'s generator goes;
            `directory/generator` when omitted.

    Returns:
        The directory written.
    """
    from kerasbert.encoder import Encoder
    from kerasbert.utils.io import check_path

    directory = check_path("directory", directory)
    if _head(model) == "electra_pretraining":
        _write_electra_pretrainer(model, directory, model_type, generator_directory)
        return directory
    if generator_directory is not None:
        raise ValueError(f"generator_directory is for an ElectraPretrainer; got a {type(model).__name__}.")
    if isinstance(model, Encoder):
        config = huggingface_config(model, model_type)
        _write_checkpoint(directory, config, _encoder_tensors(model, config["model_type"]))
        return directory
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, Encoder) and _head(model) in _FINE_TUNING_ARCHITECTURES:
        if model_type is None and getattr(model, "family", None) in MODEL_TYPES:
            model_type = model.family  # the checkpoint's family, not a look-alike
        config = huggingface_config(encoder, model_type)
        model_type = config["model_type"]
        _check_fine_tuning_head(model, model_type, directory)
        tensors = _prefixed(model_type, _encoder_tensors(encoder, model_type))
        tensors.update(_head_tensors_of(model, model_type, set(_fine_tuning_head_links(model, model_type))))
        _write_checkpoint(directory, _fine_tuning_config(model, config), tensors)
        return directory
    if not isinstance(encoder, Encoder) or not _mlm_heads(model):
        raise TypeError(
            "to_huggingface writes a kerasbert.Encoder, MaskedLM, BertPretrainer or "
            f"ElectraPretrainer; got {type(model).__name__}."
        )
    config = huggingface_config(encoder, model_type)
    model_type = config["model_type"]
    sentence_task = getattr(model, "sentence_task", None)
    heads = {"mlm"}
    architecture = f"{_CLASS_PREFIX[model_type]}ForMaskedLM"
    if sentence_task:
        family_task = _SENTENCE_HEAD_NAMES.get(model_type, (None,))[0]
        if family_task != sentence_task:
            has = f"a {family_task!r} head" if family_task else "no sentence-level head"
            raise ValueError(
                f"A BertPretrainer with sentence_task={sentence_task!r} cannot be written as a "
                f"Hugging Face {model_type!r} model: its pretraining model has {has}. Write "
                "model.encoder, or a BertPretrainer with the family's sentence task "
                "(bert: 'nsp', albert: 'sop') or None."
            )
        heads.add(sentence_task)
        architecture = f"{_CLASS_PREFIX[model_type]}ForPreTraining"
    _warn_if_activation_differs(model, model_type, heads, directory)
    config["architectures"] = [architecture]
    tensors = _prefixed(model_type, _encoder_tensors(encoder, model_type))
    tensors.update(_head_tensors_of(model, model_type, heads))
    _write_checkpoint(directory, config, tensors)
    return directory


def _write_electra_pretrainer(pretrainer, directory, model_type, generator_directory):
    if model_type not in (None, "electra"):
        raise ValueError(
            f"An ElectraPretrainer is written as Hugging Face 'electra' models; got model_type={model_type!r}."
        )
    discriminator, generator = pretrainer.discriminator, pretrainer.generator
    disc_config = huggingface_config(discriminator, "electra")
    gen_config = huggingface_config(generator, "electra")
    disc_config["architectures"] = ["ElectraForPreTraining"]
    gen_config["architectures"] = ["ElectraForMaskedLM"]
    disc_tensors = _encoder_tensors(discriminator, "electra")
    # The generator reads the discriminator's embeddings (its own are unused).
    gen_tensors = _encoder_tensors(generator, "electra")
    gen_tensors.update({n: v for n, v in disc_tensors.items() if n.startswith("embeddings.")})
    _warn_if_activation_differs(pretrainer, "electra", {"generator"}, directory)
    disc_tensors = _prefixed("electra", disc_tensors)
    disc_tensors.update(_head_tensors_of(pretrainer, "electra", {"discriminator"}))
    gen_tensors = _prefixed("electra", gen_tensors)
    gen_tensors.update(_head_tensors_of(pretrainer, "electra", {"generator"}))
    _write_checkpoint(directory, disc_config, disc_tensors)
    _write_checkpoint(generator_directory or os.path.join(directory, "generator"), gen_config, gen_tensors)
