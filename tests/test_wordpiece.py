"""WordPiece: ids and offsets identical to transformers' fast BERT tokenizer."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import transformers
from helpers import (
    AWKWARD,
    assert_graph_unchecked,
    assert_same_as_reference,
    kjv_lines,
    minilm_directory,
    reference_tokenizer,
    rotten_tomatoes,
    tensorflow_pass_only,
)

import kerasbert
from kerasbert.tokenizers import WordPieceTokenizer, train_wordpiece


def reference(directory, **kwargs):
    return reference_tokenizer(transformers.BertTokenizerFast, directory, **kwargs)


@pytest.fixture
def minilm(minilm_tokenizer):
    return minilm_tokenizer


@pytest.fixture(scope="module", params=["uncased", "cased"])
def pair(request):
    lowercase = request.param == "uncased"
    vocab = os.path.join(minilm_directory(), "vocab.txt")
    return WordPieceTokenizer(vocab, lowercase=lowercase), reference(minilm_directory(), do_lower_case=lowercase)


@tensorflow_pass_only
def test_tokenizer_graph_holds_no_checks(pair):
    # Special tokens in text take the graph's longest path (split, look-up, merge).
    assert_graph_unchecked(pair[0]._compiled_tokenize.get_concrete_function())


@tensorflow_pass_only
def test_real_review_snippets(pair):
    texts = [text for text, _ in rotten_tomatoes()]
    assert len(texts) == 12808
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_public_domain_book(pair):
    assert_same_as_reference(*pair, kjv_lines())


@tensorflow_pass_only
def test_awkward_inputs(pair):
    texts = AWKWARD + ["word " * 20000, "é" * 100_000, "\x00" * 50 + "x"]
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_every_code_point(pair):
    """All 1,112,064 code points, each alone and inside a word."""
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = [
        "".join(("a" if j % 2 else " ") + chr(c) for j, c in enumerate(points[i:i + 512]))
        for i in range(0, len(points), 512)
    ]
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_trained_vocabulary_loads_in_both_libraries(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(kjv_lines()[:20000]), encoding="utf-8")
    tokenizer = train_wordpiece(str(corpus), vocabulary_size=2000, output_dir=str(tmp_path / "tok"))
    assert tokenizer.vocabulary_size() == 2000
    hf = reference(str(tmp_path / "tok"))
    assert len(hf) == 2000
    texts = [text for text, _ in rotten_tomatoes()[:3000]] + AWKWARD
    assert_same_as_reference(tokenizer, hf, texts)
    loaded = kerasbert.Tokenizer.from_preset(str(tmp_path / "tok"))
    assert loaded.get_vocabulary() == tokenizer.get_vocabulary()


@tensorflow_pass_only
def test_cased_trained_vocabulary(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(t for t, _ in rotten_tomatoes()[:4000]), encoding="utf-8")
    tokenizer = train_wordpiece(
        [str(corpus)], vocabulary_size=1500, output_dir=str(tmp_path / "tok"), lowercase=False
    )
    loaded = kerasbert.Tokenizer.from_preset(str(tmp_path / "tok"))
    assert loaded.lowercase is False
    hf = reference(str(tmp_path / "tok"))
    assert_same_as_reference(loaded, hf, kjv_lines()[:5000] + AWKWARD)
    assert tokenizer(["Amélie"]).to_list() == loaded(["Amélie"]).to_list()


def test_from_preset_reads_tokenizer_json_and_settings(minilm):
    tokenizer = minilm
    assert isinstance(tokenizer, WordPieceTokenizer)
    assert tokenizer.lowercase is True and tokenizer.vocabulary_size() == 30522
    assert tokenizer.special_token_ids == {"cls": 101, "sep": 102, "pad": 0, "mask": 103, "unk": 100}
    hf = reference(minilm_directory())
    assert_same_as_reference(tokenizer, hf, AWKWARD)
    assert WordPieceTokenizer.from_preset(minilm_directory()).vocabulary_size() == 30522


@tensorflow_pass_only
def test_from_preset_with_vocab_txt_only(tmp_path, minilm):
    (tmp_path / "vocab.txt").write_text(open(os.path.join(minilm_directory(), "vocab.txt")).read())
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert tokenizer.lowercase is False
    assert minilm(["Hello"]).to_list() == [[7592]]
    assert tokenizer(["Hello"]).to_list() != [[7592]]
    assert_same_as_reference(tokenizer, reference(str(tmp_path)), AWKWARD + ["Hello World"])


def test_single_string_and_tensor_inputs(minilm):
    tokenizer = minilm
    single = tokenizer("Hello, world!")
    assert isinstance(single, tf.Tensor) and single.shape.rank == 1
    assert single.numpy().tolist() == [7592, 1010, 2088, 999]
    batch = tokenizer(tf.constant(["Hello, world!", "Bye."]))
    assert isinstance(batch, tf.RaggedTensor)
    assert batch.to_list() == [[7592, 1010, 2088, 999], [9061, 1012]]
    assert tokenizer(np.array(["Hello, world!"])).to_list() == [[7592, 1010, 2088, 999]]
    assert tokenizer([]).to_list() == []


def test_runs_inside_tf_data_on_every_backend(minilm):
    tokenizer = minilm
    texts = [text for text, _ in rotten_tomatoes()[:64]]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer)
    from_pipeline = [row for batch in dataset for row in batch.to_list()]
    assert from_pipeline == tokenizer(texts).to_list()
    assert keras.backend.backend() in ("tensorflow", "jax", "torch")


@tensorflow_pass_only
def test_detokenize_matches_transformers_decode(minilm):
    tokenizer = minilm
    hf = reference(minilm_directory())
    texts = ["The unaffable fox, quickly!", "Amélie's café"]
    ids = tokenizer(texts)
    decoded = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert decoded == [hf.decode(row, clean_up_tokenization_spaces=False) for row in ids.to_list()]
    assert tokenizer.detokenize(ids[0].numpy().tolist()) == decoded[0]


@tensorflow_pass_only
def test_invalid_utf8_becomes_replacement_character(minilm):
    tokenizer = minilm
    ids, starts, ends = tokenizer.tokenize_with_offsets([b"caf\xe9 ok", b"\xff\xfe"])
    # U+FFFD is dropped by BERT's cleaning: same as the valid text without it.
    assert ids.to_list()[0] == tokenizer(["caf ok"]).to_list()[0]
    assert ids.to_list()[1] == []


@pytest.mark.parametrize("bad, words", [
    (None, ["NoneType"]),
    (42, ["int"]),
    ([b"ok", 3.5], ["float", "numbers are not text"]),
    (["ok", None], ["None"]),
    (np.array([1, 2]), ["numpy array"]),
    (tf.constant([1, 2]), ["int32 tensor"]),
])
def test_bad_inputs_get_type_errors(bad, words, minilm):
    tokenizer = minilm
    with pytest.raises(TypeError) as info:
        tokenizer(bad)
    assert all(w in str(info.value) for w in words)


def test_vocabulary_without_special_tokens_is_refused():
    with pytest.raises(ValueError, match=r"\[CLS\]"):
        WordPieceTokenizer(["[UNK]", "a", "b"])


def test_config_round_trip():
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"], lowercase=False)
    clone = WordPieceTokenizer.from_config(tokenizer.get_config())
    assert clone(["ab A"]).to_list() == tokenizer(["ab A"]).to_list() == [[5, 6, 1]]


@tensorflow_pass_only
def test_unsupported_tokenizer_files_are_named(tmp_path):
    (tmp_path / "spiece.model").write_bytes(b"\x00")
    with pytest.raises(ValueError, match="SentencePiece"):
        kerasbert.Tokenizer.from_preset(str(tmp_path))
    (tmp_path / "spiece.model").unlink()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="No tokenizer files"):
        kerasbert.Tokenizer.from_preset(str(tmp_path / "empty"))
