"""What document ids in the padding mask cost the Encoder on ordinary 0/1
masks: its forward time against the same graph with the 0/1-only rules it
had before (a `(batch, 1, 1, seq)` attention mask and positions `arange` /
`cumsum`), side by side in one process.

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/encoder_forward.py [--rounds 20]

Both encoders get the same weights; calls alternate (before, after, before,
...) so that load from other work on the machine falls on both. Each side
runs `encoder(inputs, training=False)` (eager) and a `jit_compile=True`
`predict_on_batch` (XLA; TensorFlow and JAX only) on 32 right-padded rows of
128 positions (random lengths 8-128), for randomly initialised bert_tiny
(2 layers, hidden 128) and bert_mini (4 layers, hidden 256) configurations.
Prints the median time per call of each and the ratio after / before.
"""

import argparse
import statistics
import time

import kerasbert

kerasbert.prefer_onednn()  # before Keras imports TensorFlow: its oneDNN kernels on x86
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import kerasbert.encoder  # noqa: E402
from kerasbert.layers import PositionEmbedding  # noqa: E402

CONFIGS = {
    "bert_tiny": {"num_layers": 2, "num_heads": 2, "hidden_dim": 128, "intermediate_dim": 512},
    "bert_mini": {"num_layers": 4, "num_heads": 4, "hidden_dim": 256, "intermediate_dim": 1024},
}


class ZeroOnePositionEmbedding(PositionEmbedding):
    """The position rule before document ids: index in the row, or fairseq's
    cumulative count of real tokens."""

    def call(self, padding_mask):
        batch, seq = ops.shape(padding_mask)[0], ops.shape(padding_mask)[1]
        if self.position_offset == 0:
            positions = ops.arange(seq, dtype="int32")[None, :]  # (1, seq)
        else:
            real = ops.cast(ops.not_equal(padding_mask, 0), "int32")
            positions = ops.cumsum(real, axis=1) * real + (self.position_offset - 1)
        vectors = ops.take(self.embeddings, positions, axis=0)
        return ops.broadcast_to(vectors, (batch, seq, self.output_dim))


def zero_one_attention_mask(padding_mask):
    return ops.not_equal(padding_mask, 0)[:, None, None, :]  # (batch, 1, 1, seq)


def build(config, before):
    keras.utils.set_random_seed(0)  # the same weights on both sides
    module = kerasbert.encoder
    saved = module.PositionEmbedding, module.document_attention_mask
    if before:
        module.PositionEmbedding, module.document_attention_mask = (
            ZeroOnePositionEmbedding, zero_one_attention_mask,
        )
    try:
        return kerasbert.Encoder(vocabulary_size=30522, **config)
    finally:
        module.PositionEmbedding, module.document_attention_mask = saved


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batch, seq = 32, 128
    padding_mask = (np.arange(seq)[None, :] < rng.integers(8, seq + 1, (batch, 1))).astype("int32")
    inputs = {
        "token_ids": (rng.integers(1, 30522, (batch, seq)) * padding_mask).astype("int32"),
        "segment_ids": np.zeros((batch, seq), "int32"),
        "padding_mask": padding_mask,
    }
    backend = keras.backend.backend()
    modes = ["eager"] + (["xla"] if backend in ("tensorflow", "jax") else [])
    for name, config in CONFIGS.items():
        encoders = {side: build(config, side == "before") for side in ("before", "after")}
        for mode in modes:
            calls = {}
            for side, encoder in encoders.items():
                if mode == "eager":
                    calls[side] = lambda e=encoder: ops.convert_to_numpy(
                        e(inputs, training=False)["sequence_output"]
                    )
                else:
                    encoder.compile(jit_compile=True)
                    calls[side] = lambda e=encoder: e.predict_on_batch(inputs)["sequence_output"]
            outputs = {side: np.asarray(call()) for side, call in calls.items()}  # warm up
            # Eager: bit-for-bit; under XLA, fusion may reorder float sums.
            np.testing.assert_allclose(outputs["after"], outputs["before"], atol=1e-5, rtol=0)
            difference = float(np.abs(outputs["after"] - outputs["before"]).max())
            times = {side: [] for side in calls}
            for _ in range(args.rounds):
                for side, call in calls.items():
                    start = time.perf_counter()
                    call()
                    times[side].append(time.perf_counter() - start)
            before, after = (statistics.median(times[s]) for s in ("before", "after"))
            print(f"{backend} {name} {mode}: before {before * 1e3:.1f} ms, "
                  f"after {after * 1e3:.1f} ms, ratio {after / before:.3f} (outputs differ by {difference:.1e})")


if __name__ == "__main__":
    main()
