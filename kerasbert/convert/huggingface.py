"""Hugging Face transformers checkpoints <-> kerasbert encoders.

One table links every encoder variable to the Hugging Face tensor(s) it comes
from; loading and saving walk the same table in opposite directions, so the
two can never drift apart. The families differ only in tensor names:

- bert, roberta, electra: `encoder.layer.{i}.attention.self.query` ...
- albert: `encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.query` ...
"""

import os

import numpy as np

from kerasbert.utils.io import read_json, read_safetensors, write_json, write_safetensors

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
        name = name[len(prefix):]
        if name.endswith(".gamma"):
            name = name[: -len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        out[name] = value
    return out


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
        return read_safetensors(single)
    if os.path.isfile(index):
        shards = sorted(set(read_json(index, "safetensors index")["weight_map"].values()))
        tensors = {}
        for shard in shards:
            path = os.path.join(directory, shard)
            if os.path.dirname(os.path.normpath(shard)) or not os.path.isfile(path):
                raise ValueError(f"The safetensors index names a missing or unsafe shard {shard!r}.")
            tensors.update(read_safetensors(path))
        return tensors
    if os.path.isfile(binary):
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
        raise ValueError(
            f"{path} could not be read as a weights-only PyTorch checkpoint "
            f"({type(e).__name__}: {e}). kerasbert never unpickles arbitrary "
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
        value = link.to_keras(tensors)
        if tuple(value.shape) != tuple(link.variable.shape):
            raise ValueError(
                f"{source}: tensor(s) {link.names} have shape {value.shape}, "
                f"but {link.variable.path} needs {tuple(link.variable.shape)}; "
                "config.json does not match the weights."
            )
        link.variable.assign(value)


# --------------------------------------------------------------------------
# Writing checkpoints


def to_huggingface(encoder, directory, model_type=None):
    """Writes `encoder` as a Hugging Face checkpoint (`config.json` and
    `model.safetensors`) that `transformers.AutoModel.from_pretrained` loads.

    Args:
        encoder: a `kerasbert.Encoder`.
        directory: where to write; created if missing.
        model_type: "bert", "albert", "roberta" or "electra"; inferred from
            the encoder's configuration when omitted.

    Returns:
        The directory written.
    """
    config = huggingface_config(encoder, model_type)
    model_type = config["model_type"]
    tensors = {}
    for link in weight_links(encoder, model_type):
        value = np.asarray(link.variable.numpy(), dtype=np.float32)
        tensors.update(link.from_keras(value))
    if model_type == "albert" and encoder.embeddings_projection is None:
        # ALBERT always projects; an identity projection is exact.
        tensors["encoder.embedding_hidden_mapping_in.weight"] = np.eye(encoder.hidden_dim, dtype=np.float32)
        tensors["encoder.embedding_hidden_mapping_in.bias"] = np.zeros(encoder.hidden_dim, np.float32)
    if encoder.segment_embedding is None:
        # transformers always has a token-type table; a zero row adds nothing.
        tensors["embeddings.token_type_embeddings.weight"] = np.zeros(
            (1, encoder.token_embedding.output_dim), np.float32
        )
    os.makedirs(directory, exist_ok=True)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
    write_json(os.path.join(directory, "config.json"), config)
    return directory
