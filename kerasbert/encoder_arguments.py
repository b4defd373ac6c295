"""The checks of `Encoder`'s constructor arguments."""

from kerasbert.layers.activations import ACTIVATIONS
from kerasbert.layers.transformer_block import FEEDFORWARDS, NORMALIZATIONS
from kerasbert.utils.checks import check_bool, check_choice, check_int, check_number

POSITION_ENCODINGS = ("learned", "rotary", "relative")


def check_encoder_arguments(c):
    """Checks the `Encoder` constructor's arguments `c` (a dict), each and
    together: a ValueError or TypeError naming the argument."""
    for name in ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                 "intermediate_dim", "max_sequence_length", "num_inner_layers"):
        check_int(name, c[name], 1)
    for name in ("num_segments", "position_offset"):
        check_int(name, c[name], 0)
    check_int("embedding_dim", c["embedding_dim"], 1, allow_none=True)
    if check_int("num_layer_groups", c["num_layer_groups"], 1, allow_none=True) is not None:
        if c["num_layer_groups"] > c["num_layers"]:
            raise ValueError(
                f"num_layer_groups={c['num_layer_groups']} cannot exceed "
                f"num_layers={c['num_layers']}: each group must serve at "
                "least one layer."
            )
    if c["hidden_dim"] % c["num_heads"]:
        raise ValueError(
            f"hidden_dim={c['hidden_dim']} must be divisible by "
            f"num_heads={c['num_heads']} (each head gets hidden_dim / "
            "num_heads dimensions)."
        )
    check_number("dropout", c["dropout"], 0, 1, high_open=True)
    check_number("attention_dropout", c["attention_dropout"], 0, 1, high_open=True, allow_none=True)
    check_choice("activation", c["activation"], sorted(ACTIVATIONS))
    check_number("layer_norm_epsilon", c["layer_norm_epsilon"], 0, low_open=True)
    check_bool("pooler", c["pooler"])
    check_choice("normalization", c["normalization"], NORMALIZATIONS)
    check_choice("feedforward", c["feedforward"], FEEDFORWARDS)
    check_bool("use_bias", c["use_bias"])
    check_choice("position_encoding", c["position_encoding"], POSITION_ENCODINGS)
    check_number("rotary_theta", c["rotary_theta"], 0, low_open=True)
    check_number("local_rotary_theta", c["local_rotary_theta"], 0, low_open=True, allow_none=True)
    check_int("local_attention_window", c["local_attention_window"], 2, allow_none=True)
    check_int("global_attention_every", c["global_attention_every"], 1)
    check_int("relative_buckets", c["relative_buckets"], 0)
    check_int("max_relative_distance", c["max_relative_distance"], 2)
    if c["relative_buckets"] and c["relative_buckets"] >= c["max_relative_distance"]:
        raise ValueError(
            f"relative_buckets={c['relative_buckets']} must be below max_relative_distance="
            f"{c['max_relative_distance']}: the buckets beyond the first half grow up to that distance."
        )
    if c["global_attention_every"] > 1 and c["local_attention_window"] is None:
        raise ValueError(
            f"global_attention_every={c['global_attention_every']} makes the other layers local, but "
            "local_attention_window is None; give the local layers' window (e.g. 128)."
        )
    if c["position_encoding"] == "rotary" and (c["hidden_dim"] // c["num_heads"]) % 2:
        raise ValueError(
            f"position_encoding='rotary' turns pairs of head dimensions; hidden_dim / num_heads = "
            f"{c['hidden_dim'] // c['num_heads']} must be even."
        )
    if c["position_encoding"] != "learned" and c["position_offset"]:
        raise ValueError(
            f"position_offset={c['position_offset']} reserves rows of a learned position table; "
            f"position_encoding={c['position_encoding']!r} has none (use 0)."
        )
    if c["normalization"] == "pre" and (c["num_layer_groups"] is not None or c["num_inner_layers"] != 1):
        raise ValueError(
            "normalization='pre' leaves the first block's attention input to the embeddings' LayerNorm, "
            "so that block cannot be shared across layers: use num_layer_groups=None and num_inner_layers=1."
        )
