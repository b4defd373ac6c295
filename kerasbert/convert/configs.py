"""Hugging Face `config.json` <-> kerasbert `Encoder` arguments, for the
families `MODEL_TYPES`."""

MODEL_TYPES = ("bert", "albert", "roberta", "xlm-roberta", "electra", "distilbert", "deberta-v2", "modernbert")

# transformers' class names (`{prefix}Model`, `{prefix}ForMaskedLM`, ...).
CLASS_PREFIX = {"bert": "Bert", "albert": "Albert", "roberta": "Roberta", "xlm-roberta": "XLMRoberta",
                "electra": "Electra", "distilbert": "DistilBert", "deberta-v2": "DebertaV2",
                "modernbert": "ModernBert"}

# The encoder's attribute in transformers' task models: the prefix of its
# tensors in their checkpoints ("roberta.encoder.layer.0...").
CHECKPOINT_PREFIX = {"xlm-roberta": "roberta", "deberta-v2": "deberta", "modernbert": "model"}

# The pooler's tensor prefix by family (ELECTRA and DistilBERT have none).
POOLER_NAMES = {"albert": "pooler", "bert": "pooler.dense", "roberta": "pooler.dense", "xlm-roberta": "pooler.dense"}

# Families with fairseq's positions: the first token's row is `pad_token_id + 1`.
_FAIRSEQ_POSITIONS = ("roberta", "xlm-roberta")

# DistilBERT's config.json names the common values differently; its
# LayerNorm epsilon is fixed, its inputs carry no token types.
_DISTILBERT_KEYS = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                    "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
                    "attention_dropout": "attention_probs_dropout_prob"}
_DISTILBERT_LAYER_NORM_EPSILON = 1e-12

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
    if model_type == "distilbert":
        hf_config = _from_distilbert_keys(hf_config)
    if model_type == "modernbert":
        return _from_modernbert(hf_config)
    if model_type == "deberta-v2":
        hf_config = _from_deberta_keys(hf_config)
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
    if model_type in _FAIRSEQ_POSITIONS:
        # fairseq: positions start right after the padding row.
        position_offset = get("pad_token_id", 1) + 1
    embedding_dim = None
    if model_type == "albert":
        embedding_dim = get("embedding_size", 128)  # ALBERT always projects
    elif model_type == "electra" and get("embedding_size", hidden_dim) != hidden_dim:
        embedding_dim = get("embedding_size")
    pooler = model_type in POOLER_NAMES
    if pooler and weight_names is not None:
        pooler = f"{POOLER_NAMES[model_type]}.weight" in weight_names
    relative = hf_config.get("relative_attention", False)
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
    if relative:
        config.update(position_encoding="relative", relative_buckets=hf_config["position_buckets"],
                      max_relative_distance=hf_config["max_relative_positions"])
    if model_type == "albert":
        config["num_layer_groups"] = get("num_hidden_groups", 1)
        config["num_inner_layers"] = get("inner_group_num", 1)
    return config


def _modernbert_layer_interval(hf_config):
    """ModernBERT's global-attention interval from `layer_types` (or the
    older `global_attn_every_n_layers`): layer `i` is global when `i` is a
    multiple of it."""
    layers = hf_config["num_hidden_layers"]
    kinds = hf_config.get("layer_types")
    if kinds is None:
        return hf_config.get("global_attn_every_n_layers", 3)
    for every in range(1, layers + 1):
        if kinds == ["full_attention" if i % every == 0 else "sliding_attention" for i in range(layers)]:
            return every
    raise ValueError(
        f"config.json has layer_types={kinds}; kerasbert converts ModernBERT checkpoints whose layer i attends "
        "globally ('full_attention') when i is a multiple of some k and locally otherwise."
    )


def _modernbert_thetas(hf_config):
    """(global, local) RoPE bases: `rope_parameters` or the older
    `global_rope_theta` / `local_rope_theta`."""
    rope = hf_config.get("rope_parameters") or {}
    for kind in rope.values():
        if (kind or {}).get("rope_type", "default") != "default":
            raise ValueError(f"config.json has rope_parameters={rope}; kerasbert converts the default RoPE only.")
    full = (rope.get("full_attention") or {}).get("rope_theta", hf_config.get("global_rope_theta", 160000.0))
    local = (rope.get("sliding_attention") or {}).get("rope_theta", hf_config.get("local_rope_theta", 10000.0))
    return float(full), float(local)


def _from_modernbert(hf_config):
    """Encoder arguments of a ModernBERT config.json."""
    biases = {k: hf_config.get(k, False) for k in ("attention_bias", "mlp_bias", "norm_bias")}
    if len(set(biases.values())) != 1:
        raise ValueError(
            f"config.json has {biases}; kerasbert converts ModernBERT checkpoints whose layers all have biases "
            "or all have none."
        )
    activation = hf_config.get("hidden_activation", "gelu")
    if activation not in _ACTIVATIONS_FROM_HF:
        raise ValueError(f"config.json has hidden_activation={activation!r}; supported: {sorted(_ACTIVATIONS_FROM_HF)}.")
    if hf_config.get("embedding_dropout", 0.0) != hf_config.get("mlp_dropout", 0.0):
        raise ValueError(
            f"config.json has embedding_dropout={hf_config.get('embedding_dropout')} and "
            f"mlp_dropout={hf_config.get('mlp_dropout')}; kerasbert's encoder has one dropout rate for both."
        )
    global_theta, local_theta = _modernbert_thetas(hf_config)
    every = _modernbert_layer_interval(hf_config)
    return {
        "vocabulary_size": hf_config["vocab_size"],
        "num_layers": hf_config["num_hidden_layers"],
        "num_heads": hf_config["num_attention_heads"],
        "hidden_dim": hf_config["hidden_size"],
        "intermediate_dim": hf_config["intermediate_size"],
        "embedding_dim": None,
        "num_segments": 0,
        "max_sequence_length": hf_config.get("max_position_embeddings", 8192),
        "position_offset": 0,
        "dropout": hf_config.get("mlp_dropout", 0.0),
        "attention_dropout": hf_config.get("attention_dropout", 0.0),
        "activation": _ACTIVATIONS_FROM_HF[activation],
        "layer_norm_epsilon": hf_config.get("norm_eps", 1e-5),
        "num_layer_groups": None,
        "num_inner_layers": 1,
        "pooler": False,
        "initializer_range": hf_config.get("initializer_range", 0.02),
        "normalization": "pre",
        "feedforward": "gated",
        "use_bias": biases["attention_bias"],
        "position_encoding": "rotary",
        "rotary_theta": global_theta,
        "local_rotary_theta": local_theta,
        "local_attention_window": hf_config.get("local_attention", 128) if every > 1 else None,
        "global_attention_every": every,
    }


# The special tokens' ids of ModernBERT's tokenizer (transformers' defaults).
_MODERNBERT_SPECIAL_IDS = {"pad_token_id": 50283, "bos_token_id": 50281, "eos_token_id": 50282,
                           "cls_token_id": 50281, "sep_token_id": 50282}


def _to_modernbert(encoder):
    """The ModernBERT config.json of an encoder. The special tokens' ids are
    ModernBERT's where the vocabulary is large enough to hold them; else
    padding is id 0 and the others are left unset."""
    every = encoder.global_attention_every
    specials = dict(_MODERNBERT_SPECIAL_IDS)
    if encoder.vocabulary_size <= max(specials.values()):
        specials = {name: 0 if name == "pad_token_id" else None for name in specials}
    return {
        **specials,
        "model_type": "modernbert",
        "architectures": ["ModernBertModel"],
        "vocab_size": encoder.vocabulary_size,
        "hidden_size": encoder.hidden_dim,
        "intermediate_size": encoder.intermediate_dim,
        "num_hidden_layers": encoder.num_layers,
        "num_attention_heads": encoder.num_heads,
        "hidden_activation": _ACTIVATIONS_TO_HF[encoder.activation],
        "max_position_embeddings": encoder.max_sequence_length,
        "initializer_range": encoder.initializer_range,
        "norm_eps": encoder.layer_norm_epsilon,
        "norm_bias": encoder.use_bias,
        "attention_bias": encoder.use_bias,
        "mlp_bias": encoder.use_bias,
        "embedding_dropout": encoder.dropout,
        "mlp_dropout": encoder.dropout,
        "attention_dropout": encoder.dropout if encoder.attention_dropout is None else encoder.attention_dropout,
        "layer_types": ["full_attention" if i % every == 0 else "sliding_attention"
                        for i in range(encoder.num_layers)],
        # A window the size of the sequence where no layer is local: every layer is global then.
        "local_attention": encoder.local_attention_window or 2 * encoder.max_sequence_length,
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": encoder.rotary_theta},
            "sliding_attention": {"rope_type": "default",
                                  "rope_theta": encoder.local_rotary_theta or encoder.rotary_theta},
        },
    }


# DeBERTa-v2/v3 values kerasbert's encoder has (DeBERTa-v3's), and what
# each must be.
_DEBERTA_VALUES = {"relative_attention": True, "position_biased_input": False, "share_att_key": True,
                   "norm_rel_ebd": "layer_norm", "conv_kernel_size": 0}


def _from_deberta_keys(hf_config):
    """A DeBERTa-v2 config.json with its relative positions spelled out:
    `max_relative_positions` -1 means `max_position_embeddings`."""
    values = {"position_biased_input": True, "share_att_key": False, "norm_rel_ebd": "none",
              "conv_kernel_size": 0, "relative_attention": False}
    values = {k: hf_config.get(k, default) for k, default in values.items()}
    attention_types = sorted(hf_config.get("pos_att_type") or [])
    wrong = {k: v for k, v in values.items() if v != _DEBERTA_VALUES[k]}
    if wrong or attention_types != ["c2p", "p2c"]:
        raise ValueError(
            f"config.json has {wrong or {'pos_att_type': hf_config.get('pos_att_type')}}; kerasbert converts "
            f"DeBERTa-v2 checkpoints with DeBERTa-v3's attention: {_DEBERTA_VALUES} and pos_att_type "
            "['p2c', 'c2p']."
        )
    if hf_config.get("embedding_size", hf_config["hidden_size"]) != hf_config["hidden_size"]:
        raise ValueError(
            f"config.json has embedding_size={hf_config['embedding_size']} and hidden_size="
            f"{hf_config['hidden_size']}; kerasbert converts DeBERTa-v2 checkpoints whose embeddings are "
            "as wide as the model."
        )
    distance = hf_config.get("max_relative_positions", -1)
    if distance < 1:
        distance = hf_config.get("max_position_embeddings", 512)
    return {**hf_config, "max_relative_positions": distance, "position_buckets": max(hf_config.get(
        "position_buckets", -1), 0)}


def _to_deberta(encoder, config):
    """The DeBERTa-v2 entries of a config.json."""
    config = {**config, **_DEBERTA_VALUES, "pos_att_type": ["p2c", "c2p"],
              "position_buckets": encoder.relative_buckets or -1, "max_relative_positions": encoder.max_relative_distance,
              "type_vocab_size": encoder.num_segments, "pooler_hidden_act": "gelu", "pooler_dropout": 0}
    config.pop("position_embedding_type")
    return config


def _from_distilbert_keys(hf_config):
    """A DistilBERT config.json under the names the other families use."""
    if hf_config.get("sinusoidal_pos_embds"):
        raise ValueError(
            "config.json has sinusoidal_pos_embds=true; kerasbert converts DistilBERT checkpoints with a "
            "learned position table (every published one)."
        )
    renamed = {_DISTILBERT_KEYS.get(k, k): v for k, v in hf_config.items()}
    return {**renamed, "type_vocab_size": 0, "layer_norm_eps": _DISTILBERT_LAYER_NORM_EPSILON}


def _to_distilbert_keys(config):
    """The common config.json entries under DistilBERT's names."""
    names = {v: k for k, v in _DISTILBERT_KEYS.items()}
    dropped = ("type_vocab_size", "layer_norm_eps", "position_embedding_type")
    config = {names.get(k, k): v for k, v in config.items() if k not in dropped}
    return {**config, "sinusoidal_pos_embds": False}


def infer_model_type(encoder):
    """The Hugging Face family that represents `encoder` exactly."""
    if encoder.normalization == "pre" or encoder.position_encoding == "rotary":
        return "modernbert"
    if encoder.position_encoding == "relative":
        return "deberta-v2"
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
    if model_type == "modernbert":
        return _to_modernbert(encoder)
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
    if model_type in _FAIRSEQ_POSITIONS:
        config.update(bos_token_id=0, eos_token_id=2)
    if model_type in ("albert", "electra"):
        config["embedding_size"] = encoder.embedding_dim or encoder.hidden_dim
    if model_type == "albert":
        config["num_hidden_groups"] = encoder.num_layer_groups or encoder.num_layers
        config["inner_group_num"] = encoder.num_inner_layers
    if model_type == "distilbert":
        config = _to_distilbert_keys(config)
    if model_type == "deberta-v2":
        config = _to_deberta(encoder, config)
    return config


def _check_representable(encoder, model_type):
    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type={model_type!r}; expected one of {list(MODEL_TYPES)}.")
    problems = []
    modern = {"normalization": "pre", "feedforward": "gated", "position_encoding": "rotary"}
    if model_type == "modernbert":
        problems += [f"{k}={getattr(encoder, k)!r} (modernbert has {v!r})" for k, v in modern.items()
                     if getattr(encoder, k) != v]
        if encoder.num_segments:
            problems.append("modernbert has no token types (num_segments must be 0)")
    else:
        classic = {"normalization": "post", "feedforward": "plain", "use_bias": True, "local_attention_window": None}
        problems += [f"{k}={getattr(encoder, k)!r} (only modernbert has it)" for k, v in classic.items()
                     if getattr(encoder, k) != v]
        position = "relative" if model_type == "deberta-v2" else "learned"
        if encoder.position_encoding != position:
            problems.append(f"{model_type} has position_encoding={position!r}, not {encoder.position_encoding!r}")
    shared = encoder.num_layer_groups is not None or encoder.num_inner_layers != 1
    if shared and model_type != "albert":
        problems.append("cross-layer sharing (num_layer_groups) exists only in albert")
    if encoder.position_offset and model_type not in _FAIRSEQ_POSITIONS:
        problems.append(f"position_offset > 0 exists only in {' and '.join(_FAIRSEQ_POSITIONS)}")
    if model_type in _FAIRSEQ_POSITIONS and not encoder.position_offset:
        problems.append(f"{model_type} needs position_offset >= 1")
    if encoder.embedding_dim is not None and model_type not in ("albert", "electra"):
        problems.append(f"an embedding projection (embedding_dim) does not exist in {model_type}")
    if encoder.pooler and model_type not in POOLER_NAMES:
        problems.append(f"{model_type} has no pooler")
    if model_type == "distilbert":
        if encoder.num_segments:
            problems.append("distilbert has no token types (num_segments must be 0)")
        if encoder.layer_norm_epsilon != _DISTILBERT_LAYER_NORM_EPSILON:
            problems.append(f"distilbert's LayerNorm epsilon is {_DISTILBERT_LAYER_NORM_EPSILON}")
    if problems:
        raise ValueError(
            f"This encoder cannot be written as a Hugging Face {model_type!r} "
            f"model: {'; '.join(problems)}."
        )
