"""Hugging Face `config.json` <-> kerasbert `Encoder` arguments, for the
families `MODEL_TYPES`."""




MODEL_TYPES = ("bert", "albert", "roberta", "electra")


# The pooler's tensor prefix by family (ELECTRA has none).
POOLER_NAMES = {"albert": "pooler", "bert": "pooler.dense", "roberta": "pooler.dense"}

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
        pooler = f"{POOLER_NAMES[model_type]}.weight" in weight_names
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
        "architectures": [f"{CLASS_PREFIX[model_type]}Model"],
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


CLASS_PREFIX = {"bert": "Bert", "albert": "Albert", "roberta": "Roberta", "electra": "Electra"}


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
