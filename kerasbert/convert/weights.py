"""The weight table: every encoder variable and the Hugging Face tensor(s)
it comes from (`weight_links`); loading and saving walk the same table in
opposite directions, so the two can never drift apart. The families differ
only in tensor names:

- bert, roberta, xlm-roberta, electra: `encoder.layer.{i}.attention.self.query` ...
- albert: `encoder.albert_layer_groups.{g}.albert_layers.{j}.attention.query` ...
- distilbert: `transformer.layer.{i}.attention.q_lin` ...
- deberta-v2: `encoder.layer.{i}.attention.self.query_proj` ..., `encoder.rel_embeddings`
- modernbert: `layers.{i}.attn.Wqkv` (fused), `embeddings.tok_embeddings`, `final_norm`

Also reading a checkpoint's tensors (safetensors, sharded or not, or a
PyTorch binary) and loading a Hugging Face directory as an `Encoder`.
"""

import os

import numpy as np

from kerasbert.convert.configs import POOLER_NAMES, encoder_config_from_huggingface
from kerasbert.layers.initializers import placeholder_weights
from kerasbert.utils.integrity import check_hub_blob
from kerasbert.utils.io import read_json, read_safetensors


class WeightLink:
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


def dense_links(layer, name):
    return fused_dense_links(layer, [name])


def fused_dense_links(layer, names):
    """A dense layer whose kernel (and bias, if it has one) joins the
    tensors `names` along the output axis."""
    links = [WeightLink(layer.kernel, [f"{n}.weight" for n in names], True)]
    if layer.use_bias:
        links.append(WeightLink(layer.bias, [f"{n}.bias" for n in names]))
    return links


def layer_norm_links(layer, name):
    links = [WeightLink(layer.gamma, [f"{name}.weight"])]
    if layer.center:
        links.append(WeightLink(layer.beta, [f"{name}.bias"]))
    return links


# The tensor names of a block's parts after the block's prefix, by family
# (the families not listed have BERT's).
_BLOCK_PARTS = {
    "bert": {
        "qkv": ("attention.self.query", "attention.self.key", "attention.self.value"),
        "attention_output": "attention.output.dense", "attention_layer_norm": "attention.output.LayerNorm",
        "intermediate": "intermediate.dense", "output": "output.dense", "output_layer_norm": "output.LayerNorm",
    },
    "albert": {
        "qkv": ("attention.query", "attention.key", "attention.value"),
        "attention_output": "attention.dense", "attention_layer_norm": "attention.LayerNorm",
        "intermediate": "ffn", "output": "ffn_output", "output_layer_norm": "full_layer_layer_norm",
    },
    "distilbert": {
        "qkv": ("attention.q_lin", "attention.k_lin", "attention.v_lin"),
        "attention_output": "attention.out_lin", "attention_layer_norm": "sa_layer_norm",
        "intermediate": "ffn.lin1", "output": "ffn.lin2", "output_layer_norm": "output_layer_norm",
    },
    "deberta-v2": {
        "qkv": ("attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj"),
        "attention_output": "attention.output.dense", "attention_layer_norm": "attention.output.LayerNorm",
        "intermediate": "intermediate.dense", "output": "output.dense", "output_layer_norm": "output.LayerNorm",
    },
    "modernbert": {
        "qkv": ("attn.Wqkv",), "attention_output": "attn.Wo", "attention_layer_norm": "attn_norm",
        "intermediate": "mlp.Wi", "output": "mlp.Wo", "output_layer_norm": "mlp_norm",
    },
}


def _block_names(model_type, index, encoder):
    """Hugging Face names of the parts of block `index` of the encoder."""
    if model_type == "albert":
        group, inner = divmod(index, encoder.num_inner_layers)
        prefix = f"encoder.albert_layer_groups.{group}.albert_layers.{inner}."
    else:
        prefix = {"distilbert": "transformer.layer.{}.", "modernbert": "layers.{}."}.get(
            model_type, "encoder.layer.{}.").format(index)
    parts = _BLOCK_PARTS.get(model_type, _BLOCK_PARTS["bert"])
    return {part: [prefix + n for n in name] if isinstance(name, tuple) else prefix + name
            for part, name in parts.items()}


# The embeddings' tensor names (no ".weight"): every family but ModernBERT
# has BERT's.
EMBEDDING_NAMES = {
    "bert": {"token": "embeddings.word_embeddings", "position": "embeddings.position_embeddings",
             "segment": "embeddings.token_type_embeddings", "layer_norm": "embeddings.LayerNorm"},
    "modernbert": {"token": "embeddings.tok_embeddings", "layer_norm": "embeddings.norm"},
}


def weight_links(encoder, model_type):
    """Every encoder variable with its Hugging Face tensor names (no prefix)."""
    names = EMBEDDING_NAMES.get(model_type, EMBEDDING_NAMES["bert"])
    links = [WeightLink(encoder.token_embedding.embeddings, [f"{names['token']}.weight"])]
    if encoder.position_embedding is not None:
        links.append(WeightLink(encoder.position_embedding.embeddings, [f"{names['position']}.weight"]))
    if encoder.segment_embedding is not None:
        links.append(WeightLink(encoder.segment_embedding.embeddings, [f"{names['segment']}.weight"]))
    links += layer_norm_links(encoder.embeddings_layer_norm, names["layer_norm"])
    if encoder.embeddings_projection is not None:
        name = {"albert": "encoder.embedding_hidden_mapping_in"}.get(
            model_type, "embeddings_project"
        )
        links += dense_links(encoder.embeddings_projection, name)
    for index, block in enumerate(encoder.transformer_blocks):
        names = _block_names(model_type, index, encoder)
        links += fused_dense_links(block.attention.qkv, names["qkv"])
        links += dense_links(block.attention.output_dense, names["attention_output"])
        if block.attention_layer_norm is not None:
            links += layer_norm_links(block.attention_layer_norm, names["attention_layer_norm"])
        links += dense_links(block.intermediate_dense, names["intermediate"])
        links += dense_links(block.output_dense, names["output"])
        links += layer_norm_links(block.output_layer_norm, names["output_layer_norm"])
    if encoder.relative_positions is not None:
        links.append(WeightLink(encoder.relative_positions.embeddings, ["encoder.rel_embeddings.weight"]))
        links += layer_norm_links(encoder.relative_positions.layer_norm, "encoder.LayerNorm")
    if encoder.final_layer_norm is not None:
        links += layer_norm_links(encoder.final_layer_norm, "final_norm")
    if encoder.pooler_dense is not None:
        links += dense_links(encoder.pooler_dense, POOLER_NAMES[model_type])
    return links


def _normalise_names(tensors):
    """Strips the task-model prefix ("bert.", "roberta.", ...) and maps the
    old TF-era LayerNorm names gamma/beta to weight/bias."""
    tables = [f"{names['token']}.weight" for names in EMBEDDING_NAMES.values()]
    found = next(((k, t) for k in tensors for t in tables if k.endswith(t)), None)
    if found is None:
        raise ValueError(
            f"The checkpoint holds no token embedding table ({' or '.join(map(repr, tables))}); "
            "it is not a BERT-family encoder checkpoint."
        )
    prefix = found[0][: -len(found[1])]
    out = {}
    for name, value in tensors.items():
        if not name.startswith(prefix):
            continue  # task heads (cls., generator_lm_head., ...)
        out[modern_name(name[len(prefix):])] = value
    return out


def modern_name(name):
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
