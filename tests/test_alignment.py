"""Sub-word alignment for token classification: packed ids and first
sub-words identical to transformers' `is_split_into_words=True` encoding for
WordPiece, byte-level BPE and SentencePiece; labels, spans and decoding."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import transformers
from helpers import (
    gpt2_directory,
    minilm_directory,
    reference_tokenizer,
    rotten_tomatoes,
    tensorflow_pass_only,
)

import kerasbert
from kerasbert.preprocessing.alignment import TokenClassificationPreprocessor
from kerasbert.tokenizers import BytePairTokenizer, train_sentencepiece

# Plain Python and TensorFlow preprocessing: the same on every Keras backend, so
# checked once, in the tensorflow pass of the suite.
pytestmark = tensorflow_pass_only

# CoNLL-2003-like sentences: punctuation, numbers, accents, long words that
# split into many pieces, non-Latin scripts, a control character, an empty one.
SENTENCES = [
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
    ["BRUSSELS", "1996-08-22"],
    ["The", "European", "Commission", "said", "on", "Thursday", "it", "disagreed", "with", "German", "advice",
     "to", "consumers", "to", "shun", "British", "lamb", "until", "scientists", "determine", "whether", "mad",
     "cow", "disease", "can", "be", "transmitted", "to", "sheep", "."],
    ["Amélie", "Poulain", "visited", "Ångström", "café", "in", "Zürich", "(", "Switzerland", ")", "on", "3.5",
     "%", "of", "days", "--", "naïve", "!"],
    ["antidisestablishmentarianism", "supercalifragilisticexpialidocious", "Nguyễn", "O'Neill", "U.S.", "$",
     "1,000,000", "e-mail", "Dziekanowski", "Ouagadougou"],
    ["日本", "東京", "Привет", "😀", "\x00", "x", "İstanbul"],
    [],
]


def first_tokens(word_ids, num_words):
    """Per word, the position of its first token in transformers' encoding (-1: none)."""
    first = [-1] * num_words
    for position, word in enumerate(word_ids):
        if word is not None and first[word] == -1:
            first[word] = position
    return first


def assert_same_as_reference(preprocessor, hf, sentences):
    """token_ids, padding_mask and first sub-words as transformers' pre-split encoding."""
    length = preprocessor.sequence_length
    features = preprocessor(sentences)
    expected = hf(sentences, is_split_into_words=True, truncation=True, max_length=length, padding="max_length")
    assert features["token_ids"].numpy().tolist() == expected["input_ids"]
    assert features["padding_mask"].numpy().tolist() == expected["attention_mask"]
    alignment = preprocessor.word_alignment(sentences)
    starts = np.zeros((len(sentences), length), np.int32)
    for i, (words, example) in enumerate(zip(sentences, alignment)):
        first = first_tokens(expected.word_ids(i), len(words))
        assert example["first_token"].tolist() == first, f"first sub-words differ on {words}"
        starts[i, [p for p in first if p >= 0]] = 1
    np.testing.assert_array_equal(features["word_starts"].numpy(), starts)
    return features, alignment


@pytest.fixture(scope="module")
def preprocessor(minilm_tokenizer):
    return TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=64)


@pytest.fixture(scope="module")
def short(minilm_tokenizer):
    return TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=10)


@pytest.fixture(scope="module")
def wordpiece_reference():
    hf = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(minilm_directory(), "tokenizer.json"))
    hf.pad_token = "[PAD]"
    return hf


@pytest.mark.parametrize("length", [64, 12])
def test_wordpiece_matches_transformers(minilm_tokenizer, wordpiece_reference, length):
    preprocessor = TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=length)
    features, alignment = assert_same_as_reference(preprocessor, wordpiece_reference, SENTENCES)
    assert set(features) == {"token_ids", "segment_ids", "padding_mask", "word_starts"}
    assert all(v.dtype == tf.int32 and v.shape == (len(SENTENCES), length) for v in features.values())
    assert alignment[6]["first_token"][4] == -1  # "\x00" gives no token
    if length == 12:
        assert (alignment[3]["first_token"] == -1).sum() == len(SENTENCES[3]) - 10  # truncated away


@tensorflow_pass_only
def test_byte_pair_matches_transformers_whatever_the_prefix_setting():
    """Every word gets its "Ġ" form, the first too, as transformers gives with
    add_prefix_space=True (which it requires for pre-split words)."""
    tokenizer = kerasbert.Tokenizer.from_preset(gpt2_directory())
    assert tokenizer.add_prefix_space is False
    hf = reference_tokenizer(transformers.RobertaTokenizerFast, gpt2_directory(), add_prefix_space=True)
    # Also: an empty word, special tokens as or inside words.
    sentences = SENTENCES + [["", "a", "<mask>ed", "<s>", "x<mask>"]]
    preprocessor = TokenClassificationPreprocessor(tokenizer, sequence_length=48)
    features, _ = assert_same_as_reference(preprocessor, hf, sentences)
    first = features["token_ids"].numpy()[0, 1]
    assert tokenizer.id_to_token(int(first)) == "\u0120EU"
    # A tokenizer that has add_prefix_space=True is used as it is: the one
    # the preprocessor made for its words (already traced, which saves time).
    prefixed = preprocessor._word_tokenizer
    assert isinstance(prefixed, BytePairTokenizer) and prefixed.add_prefix_space is True
    assert_same_as_reference(TokenClassificationPreprocessor(prefixed, sequence_length=16), hf, sentences)


@tensorflow_pass_only
def test_sentence_piece_matches_transformers(tmp_path):
    corpus = tmp_path / "reviews.txt"
    corpus.write_text("\n".join(text for text, _ in rotten_tomatoes()[:2000]), encoding="utf-8")
    tokenizer = train_sentencepiece(str(corpus), 600, str(tmp_path / "spiece"), max_sentences=2000)
    hf = reference_tokenizer(transformers.AlbertTokenizerFast, str(tmp_path / "spiece"))
    features, _ = assert_same_as_reference(TokenClassificationPreprocessor(tokenizer, 24), hf, SENTENCES)
    ids = features["token_ids"].numpy()
    assert all(tokenizer.id_to_token(int(i)).startswith("\u2581") for i in ids[features["word_starts"].numpy() == 1])


def test_labels_at_first_sub_words(short):
    # [CLS] thor ##b ##jo ##rn visited ou ##aga ##dou [SEP]: "." and the rest of
    # Ouagadougou are truncated away.
    words = [["Thorbjorn", "visited", "Ouagadougou", "."], ["a", "b", "c"]]
    features, labels, weights = short(words, [[3, 1, 2, 4], [5, -100, 6]])
    assert features["token_ids"].numpy()[0].tolist() == [101, 15321, 2497, 5558, 6826, 4716, 15068, 16098, 26797, 102]
    assert features["word_starts"].numpy().tolist() == [[0, 1, 0, 0, 0, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0, 0, 0, 0, 0]]
    assert labels.dtype == tf.int32 and weights.dtype == tf.float32
    assert labels.numpy().tolist() == [[0, 3, 0, 0, 0, 1, 2, 0, 0, 0], [0, 5, 0, 6, 0, 0, 0, 0, 0, 0]]
    # A negative tag (transformers' -100) marks a word without a target.
    assert weights.numpy().tolist() == [[0, 1, 0, 0, 0, 1, 1, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0, 0, 0]]
    assert short.word_alignment(words)[0]["first_token"].tolist() == [1, 5, 6, -1]


def test_sample_weights_multiply(short):
    words, tags = [["a", "b"], ["c"]], [[1, 2], [3]]
    _, _, per_example = short(words, tags, [2.0, 0.5])
    assert per_example.numpy()[:, :4].tolist() == [[0, 2, 2, 0], [0, 0.5, 0, 0]]
    _, _, per_word = short(words, tags, [[0.25, 4.0], [3.0]])
    assert per_word.numpy()[:, :4].tolist() == [[0, 0.25, 4, 0], [0, 3, 0, 0]]


def test_other_forms_of_tags(short):
    words = np.array([["a", "b"], ["c"]], dtype=object)
    expected = short([["a", "b"], ["c"]], [[1, 2], [3]])
    padded = short(words, np.array([[1, 2, -1], [3, -1, -1]]))  # dense rows: read up to the number of words
    ragged = short(words, tf.ragged.constant([[1, 2], [3]], tf.int64))
    for forms in zip(tf.nest.flatten(expected), tf.nest.flatten(padded), tf.nest.flatten(ragged)):
        assert all(np.array_equal(f.numpy(), forms[0].numpy()) for f in forms)
    features, labels, weights = short([], [])
    assert features["token_ids"].shape == labels.shape == weights.shape == (0, 10)


def test_raw_strings_equal_pre_split_words(preprocessor):
    texts = [
        "  EU rejects\tGerman call\u00a0to  boycott\u3000British lamb . ", "Amélie\n\nPoulain 1996-08-22", "", " \t ",
    ]
    words = [t.split() for t in texts]
    tags = [list(range(1, len(w) + 1)) for w in words]
    raw = preprocessor(texts, tags)
    split = preprocessor(words, tf.ragged.constant(tags))
    for a, b in zip(tf.nest.flatten(raw), tf.nest.flatten(split)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    alignment = preprocessor.word_alignment(texts)
    assert [a["words"] for a in alignment] == words


def test_word_spans_index_the_text(preprocessor):
    texts = ["Ångström  visited\t\tZürich,  naïve 😀 café\u2003日本語 x", "\tone", "two   ", ""]
    for text, example in zip(texts, preprocessor.word_alignment(texts)):
        assert example["text"] == text and example["words"] == text.split()
        assert [text[s:e] for s, e in example["word_spans"]] == example["words"]
    words = [["Ångström", "😀", "a b", ""], ["x"]]
    for row, example in zip(words, preprocessor.word_alignment(tf.ragged.constant(words))):
        text = " ".join(row)
        assert example["text"] == text and example["words"] == row
        assert [text[s:e] for s, e in example["word_spans"]] == row


def test_word_predictions(short):
    x = [["Thorbjorn", "visited", "Ouagadougou", "."], ["a"], []]
    positions = np.tile(np.arange(10, dtype=np.int32), (3, 1))  # predicted "tag" = the position
    tags = short.word_predictions(x, positions)
    assert [t.tolist() for t in tags] == [[1, 5, 6, -1], [1], []]
    scores = keras.ops.convert_to_tensor(np.random.default_rng(0).random((3, 10, 5)).astype("float32"))
    per_word = short.word_predictions(x, scores)
    assert per_word[0].shape == (4, 5) and (per_word[0][3] == -1).all()
    np.testing.assert_allclose(per_word[0][:3], keras.ops.convert_to_numpy(scores)[0, [1, 5, 6]])
    with pytest.raises(ValueError, match="token_predictions"):
        short.word_predictions(x, positions[:2])
    with pytest.raises(ValueError, match="positions"):
        short.word_predictions(x, positions[:, :4])


def test_runs_inside_tf_data(preprocessor):
    words = SENTENCES[:6]
    tags = [[i % 5 for i in range(len(w))] for w in words]
    eager = preprocessor(words, tags)
    # The last batch has a tag too many: an error when the pipeline reaches it.
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant(words + [["a", "b"]]), tf.ragged.constant(tags + [[1, 2, 3]]))
    )
    batches = iter(dataset.ragged_batch(3).map(preprocessor))
    first, second = next(batches), next(batches)
    for i, piece in enumerate(tf.nest.flatten(eager)):
        together = np.concatenate([tf.nest.flatten(first)[i].numpy(), tf.nest.flatten(second)[i].numpy()])
        np.testing.assert_array_equal(together, piece.numpy())
    with pytest.raises(tf.errors.InvalidArgumentError, match="one value per word"):
        next(batches)


@tensorflow_pass_only
def test_raw_strings_inside_tf_data(preprocessor):
    texts = [" \t".join(words) for words in SENTENCES]
    features = next(iter(tf.data.Dataset.from_tensor_slices(texts).batch(8).map(preprocessor)))
    for key, value in preprocessor(SENTENCES).items():
        np.testing.assert_array_equal(features[key].numpy(), value.numpy())


def test_dynamic_padding(minilm_tokenizer):
    preprocessor = TokenClassificationPreprocessor(minilm_tokenizer, 64, pad_to_sequence_length=False)
    features, labels, _ = preprocessor([["Thorbjorn"], ["a"]], [[1], [2]])
    assert features["word_starts"].shape == labels.shape == (2, 6)


def test_serialization_round_trip(short):
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(short))
    assert isinstance(restored, TokenClassificationPreprocessor)
    assert restored.get_config() == short.get_config()
    x, y = [["Thorbjorn", "visited", "Ouagadougou"]], [[1, 2, 3]]
    for a, b in zip(tf.nest.flatten(restored(x, y)), tf.nest.flatten(short(x, y))):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("x, y, error, words", [
    ([["a", "b"]], [[1, 2], [3]], ValueError, ["y has 2 rows", "1 examples"]),
    ([["a", "b"], ["c"]], [[1, 2], [3, 4]], ValueError, ["y[1] has 2 values", "1 words"]),
    ([["a"]], [[1.5]], TypeError, ["y[0][0]", "float"]),
    ([["a"]], [["B-PER"]], TypeError, ["map tag names to ids"]),
    ([["a"]], tf.constant([[0.5]]), TypeError, ["float"]),
    ([["a"]], [1], TypeError, ["y must be a batch"]),
    ([["a"]], tf.constant([1]), ValueError, ["(batch, words)"]),
    (["a b"], tf.constant([[1]]), ValueError, ["1 columns", "2 words"]),
    (["a", "b"], tf.constant([[1]]), ValueError, ["y has 1 rows", "2 examples"]),
    ("a b", None, TypeError, ["single string", "[x]"]),
    (42, None, TypeError, ["int"]),
    ([["a", 3]], None, TypeError, ["x[0][1]", "int"]),
    (["a", ["b"]], None, TypeError, ["mixes strings and word lists"]),
    ([None], None, TypeError, ["x[0]", "None"]),
    (tf.constant([1, 2]), None, TypeError, ["int32 tensor"]),
    (tf.constant([[["a"]]]), None, ValueError, ["rank 2"]),
])
def test_bad_inputs_are_named(short, x, y, error, words):
    with pytest.raises(error) as info:
        short(x, y)
    assert all(w in str(info.value) for w in words), str(info.value)


def test_bad_arguments_are_named(short, minilm_tokenizer):
    with pytest.raises(ValueError, match="sample_weight was given without y"):
        short([["a"]], None, [1.0])
    with pytest.raises(ValueError, match="sample_weight has 3 values"):
        short([["a"]], [[1]], [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="kerasbert Tokenizer"):
        TokenClassificationPreprocessor("all_minilm_l6_v2")
    with pytest.raises(ValueError, match="sequence_length"):
        TokenClassificationPreprocessor(minilm_tokenizer, sequence_length=1)
