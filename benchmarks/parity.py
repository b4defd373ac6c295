"""Largest absolute difference from transformers, per family, on this backend.

    KERAS_BACKEND=jax python benchmarks/parity.py [--json out.json]

Each family gets a randomly initialised transformers model (every tensor
random) of a configuration unlike the test suite's, saved and loaded with
`kerasbert.from_preset`; inputs are right-padded batches with random segment
ids. Differences are over every position, padding included, but for
DeBERTa (real tokens only) and ModernBERT (padding farther than the window
from every real token left out; see `compared_positions` in
tests/helpers.py). The real all-MiniLM-L6-v2 checkpoint is compared too.
"""

import argparse
import json
import os
import sys
import tempfile

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from common import run_stamp  # noqa: E402
from helpers import compared_positions, encoder_inputs, hf_outputs, make_hf_checkpoint, minilm_directory, run

BASE = dict(vocab_size=1000, hidden_size=96, num_hidden_layers=4, num_attention_heads=6,
            intermediate_size=200, max_position_embeddings=128,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
FAMILIES = {
    "bert": ("bert", dict(BASE, type_vocab_size=2)),
    "albert (2 groups, emb 32)": ("albert", dict(BASE, num_hidden_groups=2, embedding_size=32,
                                                   hidden_act="gelu_new")),
    "roberta (padded)": ("roberta", dict(BASE, type_vocab_size=1, pad_token_id=1,
                                         layer_norm_eps=1e-5, max_position_embeddings=130)),
    "electra (emb 48 != hidden 96)": ("electra", dict(BASE, embedding_size=48)),
    "xlm-roberta (padded)": ("xlm-roberta", dict(BASE, type_vocab_size=1, pad_token_id=1,
                                                 layer_norm_eps=1e-5, max_position_embeddings=130)),
    "distilbert": ("distilbert", dict(vocab_size=1000, dim=96, n_layers=4, n_heads=6, hidden_dim=200,
                                      max_position_embeddings=128, dropout=0.0, attention_dropout=0.0)),
    "deberta-v3 (32 buckets to 64)": ("deberta-v2", dict(
        BASE, type_vocab_size=0, layer_norm_eps=1e-7, relative_attention=True, position_buckets=32,
        max_relative_positions=64, pos_att_type=["p2c", "c2p"], position_biased_input=False, share_att_key=True,
        norm_rel_ebd="layer_norm")),
    "modernbert (window 32, global every 3)": ("modernbert", dict(
        vocab_size=1000, hidden_size=96, num_hidden_layers=4, num_attention_heads=6, intermediate_size=200,
        max_position_embeddings=128, local_attention=32, global_attn_every_n_layers=3, pad_token_id=0,
        bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3)),
}


def max_differences(encoder, reference, pad_id=0):
    worst = {}
    for seed in range(3):
        inputs = encoder_inputs(encoder, lengths=(120, 77, 31, 5, 1), seed=seed, pad_id=pad_id)
        expected, actual = hf_outputs(reference, inputs), run(encoder, inputs)
        compared = compared_positions(encoder, inputs["padding_mask"])
        expected["sequence_output"] = expected["sequence_output"][compared]
        actual["sequence_output"] = actual["sequence_output"][compared]
        for key in expected:
            diff = float(np.abs(actual[key] - expected[key]).max())
            worst[key] = max(worst.get(key, 0.0), diff)
    return worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    import transformers

    results = {}
    for name, (model_type, config) in FAMILIES.items():
        with tempfile.TemporaryDirectory() as directory:
            reference = make_hf_checkpoint(directory, model_type, seed=11, **config)
            encoder = kerasbert.from_preset(directory)
            results[name] = max_differences(encoder, reference, config.get("pad_token_id", 0))
    reference = transformers.AutoModel.from_pretrained(minilm_directory()).eval()
    results["all-MiniLM-L6-v2 (real)"] = max_differences(kerasbert.from_preset(minilm_directory()), reference)

    print(f"backend: {keras.backend.backend()}")
    print(f"{'family':34s} {'sequence_output':>16s} {'pooled_output':>14s}")
    for name, diffs in results.items():
        pooled = f"{diffs['pooled_output']:.1e}" if "pooled_output" in diffs else "(no pooler)"
        print(f"{name:34s} {diffs['sequence_output']:16.1e} {pooled:>14s}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**run_stamp(), "backend": keras.backend.backend(), "max_abs_diff": results}, f, indent=2)


if __name__ == "__main__":
    main()
