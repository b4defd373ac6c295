"""Byte-level BPE: ids and offsets identical to transformers' fast RoBERTa tokenizer."""

import json
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
    gpt2_directory,
    kjv_lines,
    reference_tokenizer,
    rotten_tomatoes,
    tensorflow_pass_only,
    write_modernbert_tokenizer,
)

import kerasbert
from kerasbert.tokenizers import BytePairTokenizer, train_bpe

MASK_TEXTS = [
    "hi <mask> there", "hi<mask>there", "hi   <mask>  x", "hi \u00a0\t<mask>", " <mask>", "<mask>",
    "a <mask><mask> b", "x\n<mask>", "<mask> ", "\u3000<mask>\u3000", "<s>hello</s>", "hello<s>é",
    "un<mask>able", "it's <pad>'s <unk>", "<mask" + ">" * 3, "< mask >", "<MASK>", "😀<mask>😀",
]


def reference(directory, **kwargs):
    return reference_tokenizer(transformers.RobertaTokenizerFast, directory, **kwargs)


@pytest.fixture(scope="module")
def roberta_dir(tmp_path_factory):
    """GPT-2's merges saved by kerasbert in RoBERTa's layout (<mask> lstrip)."""
    tokenizer = BytePairTokenizer(
        os.path.join(gpt2_directory(), "vocab.json"), os.path.join(gpt2_directory(), "merges.txt")
    )
    directory = str(tmp_path_factory.mktemp("gpt2_roberta"))
    tokenizer.save_to_preset(directory)
    return directory


@pytest.fixture(scope="module")
def pair(roberta_dir):
    return kerasbert.Tokenizer.from_preset(roberta_dir), reference(roberta_dir)


@pytest.fixture(scope="module")
def prefix_pair(roberta_dir):
    tokenizer = BytePairTokenizer(
        os.path.join(roberta_dir, "vocab.json"), os.path.join(roberta_dir, "merges.txt"), add_prefix_space=True
    )
    return tokenizer, reference(roberta_dir, add_prefix_space=True)


@tensorflow_pass_only
def test_tokenizer_graph_holds_no_checks(pair, prefix_pair):
    for tokenizer in (pair[0], prefix_pair[0]):  # with and without the added prefix space
        assert_graph_unchecked(tokenizer._compiled_tokenize.get_concrete_function())


@tensorflow_pass_only
def test_real_review_snippets(pair):
    texts = [text for text, _ in rotten_tomatoes()]
    assert len(texts) == 12808
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_public_domain_book(pair):
    assert_same_as_reference(*pair, kjv_lines())


@tensorflow_pass_only
def test_awkward_and_long_inputs(pair):
    rng = np.random.default_rng(0)
    letters = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 100_000))
    texts = AWKWARD + MASK_TEXTS + [
        "word " * 20000, "é" * 100_000, "\x00" * 50 + "x", letters,
        "".join(kjv_lines()[:3000]).replace(" ", "")[:100_000],  # 100 KB without spaces
        "<mask> " * 500 + "\t\t \n  x  ", " " * 1000 + "a",
    ]
    assert_same_as_reference(*pair, texts, batch=8)


@tensorflow_pass_only
def test_every_code_point(pair):
    """All 1,112,064 code points, after letters, digits, spaces, punctuation,
    apostrophes and other whitespace, and doubled."""
    points = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    before = ["a", " ", "0", "!", "  ", "'", "\u00a0", "x\u3000 ", "", "\n"]
    texts = [
        "".join(before[j % len(before)] + chr(c) * (1 + j % 2) for j, c in enumerate(points[i:i + 1024], i))
        for i in range(0, len(points), 1024)
    ]
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_add_prefix_space(prefix_pair):
    texts = [text for text, _ in rotten_tomatoes()[:2000]] + AWKWARD + MASK_TEXTS + ["\u00a0hello", "é", ""]
    assert_same_as_reference(*prefix_pair, texts)


@tensorflow_pass_only
def test_mask_swallows_whitespace_on_its_left(pair):
    tokenizer, hf = pair
    assert_same_as_reference(tokenizer, hf, MASK_TEXTS)
    ids, starts, ends = tokenizer.tokenize_with_offsets("hi \t <mask> x")
    mask = tokenizer.token_to_id("<mask>")
    assert ids.numpy().tolist()[1] == mask
    assert (starts.numpy()[1], ends.numpy()[1]) == (5, 11)  # the whitespace is not part of its span


@tensorflow_pass_only
def test_bare_files_load_like_transformers():
    """vocab.json + merges.txt without tokenizer_config.json: transformers v5
    gives <mask> no lstrip, and so does kerasbert."""
    tokenizer = kerasbert.Tokenizer.from_preset(gpt2_directory())
    assert isinstance(tokenizer, BytePairTokenizer) and tokenizer.mask_token_lstrip is False
    assert_same_as_reference(tokenizer, reference(gpt2_directory()), MASK_TEXTS + AWKWARD)


@tensorflow_pass_only
def test_tokenizer_json_directory(pair, tmp_path):
    _, hf = pair
    hf.save_pretrained(str(tmp_path))
    assert os.path.isfile(tmp_path / "tokenizer.json")
    for name in ("vocab.json", "merges.txt"):
        if os.path.exists(tmp_path / name):
            os.remove(tmp_path / name)
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert isinstance(tokenizer, BytePairTokenizer) and tokenizer.mask_token_lstrip is True
    assert_same_as_reference(tokenizer, reference(str(tmp_path)), MASK_TEXTS + AWKWARD)


@tensorflow_pass_only
def test_other_bpe_tokenizer_json_is_refused(pair, tmp_path):
    _, hf = pair
    hf.save_pretrained(str(tmp_path))
    data = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="Metaspace"):
        kerasbert.Tokenizer.from_preset(str(tmp_path))


@tensorflow_pass_only
def test_detokenize_matches_transformers_decode(pair):
    tokenizer, hf = pair
    texts = ["The unaffable fox, quickly!", "Amélie's café 😀 日本語", " <mask> x\t\ty ", ""]
    ids = tokenizer(texts)
    decoded = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert decoded == [hf.decode(row) for row in ids.to_list()] == texts[:2] + ["<mask> x\t\ty ", ""]
    emoji = tokenizer("😀").numpy().tolist()
    assert len(emoji) == 2  # a character split across tokens: each half is invalid UTF-8
    for part in ([emoji[0]], [emoji[1]], emoji[::-1], [0] + emoji + [2]):
        assert tokenizer.detokenize(part) == hf.decode(part)


@tensorflow_pass_only
def test_save_and_load_round_trip(pair, tmp_path):
    tokenizer, _ = pair
    tokenizer.save_to_preset(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["merges.txt", "tokenizer_config.json", "vocab.json"]
    loaded = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert loaded.get_vocabulary() == tokenizer.get_vocabulary() and loaded.merges == tokenizer.merges
    assert_same_as_reference(loaded, reference(str(tmp_path)), AWKWARD + MASK_TEXTS)
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert auto("a <mask>", add_special_tokens=False)["input_ids"] == loaded("a <mask>").numpy().tolist()


@tensorflow_pass_only
def test_trained_vocabulary_loads_in_both_libraries(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(kjv_lines()[:20000]), encoding="utf-8")
    tokenizer = train_bpe(str(corpus), vocabulary_size=2000, output_dir=str(tmp_path / "tok"))
    assert tokenizer.vocabulary_size() == 2000
    assert tokenizer.get_vocabulary()[:5] == ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    hf = reference(str(tmp_path / "tok"))
    assert len(hf) == 2000
    texts = [text for text, _ in rotten_tomatoes()[:3000]] + AWKWARD + MASK_TEXTS
    assert_same_as_reference(tokenizer, hf, texts)
    assert kerasbert.Tokenizer.from_preset(str(tmp_path / "tok")).merges == tokenizer.merges


# --- ModernBERT's layout: tokenizer.json with NFC, added tokens, [CLS] A [SEP] --------

MODERN_TEXTS = [t.replace("<mask>", "[MASK]") for t in MASK_TEXTS] + [
    "a  b", "a" + " " * 7 + "[MASK]", "x" + " " * 30 + "y", " " * 25, "def f():\n        return  x  ",
    "mail |||EMAIL_ADDRESS||| or |||PHONE_NUMBER|||, ip |||IP_ADDRESS|||x", "<|padding|><|endoftext|>[unused0] [unused82]",
    "[CLS] a [SEP] b [PAD] [UNK]", "|||IP_ADDRESS|||\u0301", "  \u0301", "[MASK]\u0301 [MASK]  \u0301",
    "e\u0301 cafe\u0301 n\u0303 a\u0323\u0302 a\u0302\u0323 \u1100\u1161\u11a8 \u212b \u0958 A\u030a\u0301",
    "\u0301\u0301a \u0345\u0314\u03b1\u0301 \u0b47\u0b3e \u0b47\u0301\u0b3e \u1100\u1161\u0301\u11a8",
]


@pytest.fixture(scope="module")
def modern_dir(tmp_path_factory):
    return write_modernbert_tokenizer(tmp_path_factory.mktemp("modernbert"))


@pytest.fixture(scope="module")
def modern(modern_dir):
    return kerasbert.Tokenizer.from_preset(modern_dir), reference_tokenizer(
        transformers.PreTrainedTokenizerFast, modern_dir
    )


@tensorflow_pass_only
def test_modernbert_tokenizer_json_gives_its_settings(modern):
    tokenizer, hf = modern
    assert isinstance(tokenizer, BytePairTokenizer) and tokenizer.vocabulary_size() == len(hf) == 3114
    assert (tokenizer.packing_style, tokenizer.normalization, tokenizer.trim_offsets) == ("bert", "NFC", False)
    assert tokenizer.mask_token_lstrip and tokenizer.added_tokens[:2] == ["<|padding|>", "<|endoftext|>"]
    assert tokenizer.normalized_tokens == ["|||IP_ADDRESS|||"] + [" " * n for n in range(24, 1, -1)] + [
        "|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||"]
    assert tokenizer.special_token_ids == {
        kind: getattr(hf, f"{kind}_token_id") for kind in ("cls", "sep", "pad", "mask", "unk")
    } == {"cls": 3027, "sep": 3028, "pad": 3029, "mask": 3030, "unk": 3026}
    clone = BytePairTokenizer.from_config(tokenizer.get_config())
    assert clone.get_config() == tokenizer.get_config()


@tensorflow_pass_only
def test_modernbert_layout_matches_transformers(modern):
    texts = [text for text, _ in rotten_tomatoes()] + kjv_lines()[::10] + AWKWARD + MODERN_TEXTS
    assert_same_as_reference(*modern, texts)
    assert_graph_unchecked(modern[0]._compiled_tokenize.get_concrete_function())


@tensorflow_pass_only
def test_modernbert_nfc_matches_transformers(modern):
    """Every code point NFC decomposes, reorders or composes, after and
    before marks, jamo, vowel signs and letters, and random runs of them."""
    from kerasbert.tokenizers.nfc import _tables

    t = _tables()
    points = sorted({*t["decomposition_keys"].tolist(), *t["class_keys"].tolist(),
                     *t["composition_first"].tolist(), *t["composition_second"].tolist()})
    around = ["a", "\u0301", "\u0316", "\u1100", "\u1161", " ", "\u0b47", "e\u0323", "\u0345", ""]
    texts = ["".join(around[j % len(around)] + chr(c) * (1 + j % 2) + around[(j // 3) % len(around)]
                     for j, c in enumerate(points[i:i + 512], i)) for i in range(0, len(points), 512)]
    rng = np.random.default_rng(0)
    pool = ["a", "e", "o", "A", "\u0301", "\u0302", "\u0323", "\u0316", "\u0308", "\u0345", "\u0334",
            "\u1100", "\u1161", "\u11a8", "\uac00", "\u0b47", "\u0b3e", "\u0b57", "\u3099", "\u304b", " "]
    texts += ["".join(rng.choice(pool, 40)) for _ in range(300)]
    assert_same_as_reference(*modern, texts)


@tensorflow_pass_only
def test_modernbert_pairs_and_truncation_match_transformers(modern):
    tokenizer, hf = modern
    reviews = [text for text, _ in rotten_tomatoes()[:80]] + MODERN_TEXTS[-6:]
    first, second = reviews[:43], reviews[43:86]
    packer = kerasbert.preprocessing.Packer.from_tokenizer(tokenizer, sequence_length=32)
    for pair in [(first, second), (first,)]:
        packed = packer(*(tokenizer(texts) for texts in pair))
        expected = hf(*pair, truncation="longest_first", max_length=32, padding="max_length",
                      return_token_type_ids=True, return_offsets_mapping=True)
        assert np.asarray(packed["token_ids"]).tolist() == expected["input_ids"]
        assert np.asarray(packed["segment_ids"]).tolist() == expected["token_type_ids"]
        assert np.asarray(packed["padding_mask"]).tolist() == expected["attention_mask"]
        # Offsets: each text's own, cut where the packer cut it.
        spans = [tokenizer.tokenize_with_offsets(texts) for texts in pair]
        segments, mask = np.asarray(packed["segment_ids"]), np.asarray(packed["padding_mask"])
        for row in range(len(pair[0])):
            # [CLS] A [SEP] in segment 0, B [SEP] in segment 1
            kept = [int(np.sum((segments[row] == 0) & (mask[row] == 1))) - 2, int(np.sum(segments[row] == 1)) - 1]
            offsets = [(0, 0)]
            for (_, starts, ends), k in zip(spans, kept):
                offsets += list(zip(starts[row].numpy().tolist(), ends[row].numpy().tolist()))[:k] + [(0, 0)]
            assert offsets + [(0, 0)] * (32 - len(offsets)) == [tuple(o) for o in expected["offset_mapping"][row]]


@tensorflow_pass_only
def test_modernbert_written_files_load_in_both_libraries(modern, tmp_path):
    tokenizer, hf = modern
    tokenizer.save_to_preset(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.json", "tokenizer_config.json"]
    loaded = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert {**loaded.get_config(), "name": ""} == {**tokenizer.get_config(), "name": ""}
    texts = AWKWARD + MODERN_TEXTS + [text for text, _ in rotten_tomatoes()[:500]]
    for written in (transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path)),
                    transformers.AutoTokenizer.from_pretrained(str(tmp_path))):
        assert_same_as_reference(loaded, written, texts)
        assert written(texts[:50], texts[50:100])["input_ids"] == hf(texts[:50], texts[50:100])["input_ids"]
        assert written.all_special_ids == hf.all_special_ids


def test_special_token_ids_and_packing(pair):
    tokenizer, _ = pair
    assert tokenizer.special_token_ids == {"cls": 0, "sep": 2, "pad": 1, "mask": 4, "unk": 3}
    assert tokenizer.packing_style == "roberta"
    continuation = set(tokenizer.continuation_ids())
    ids = tokenizer("Hello unbelievable world").numpy().tolist()
    assert [i in continuation for i in ids] == [
        not tokenizer.id_to_token(i).startswith("\u0120") for i in ids
    ]
    assert not continuation & set(tokenizer.special_token_ids.values())
    packer = kerasbert.preprocessing.Packer.from_tokenizer(tokenizer, 16)
    masker = kerasbert.preprocessing.MaskedLMMasker.from_tokenizer(
        tokenizer, whole_word=True, mask_rate=0.5, max_predictions=8, seed=0
    )
    out = masker(packer(tokenizer(["Hello unbelievable world", "a b"])))
    assert tuple(out["mask_positions"].shape) == (2, 8)


def test_single_string_and_tensor_inputs(pair):
    tokenizer, hf = pair
    expected = hf("Hello, world!", add_special_tokens=False)["input_ids"]
    single = tokenizer("Hello, world!")
    assert isinstance(single, tf.Tensor) and single.numpy().tolist() == expected
    batch = tokenizer(tf.constant(["Hello, world!", "Bye."]))
    assert isinstance(batch, tf.RaggedTensor) and batch.to_list()[0] == expected
    assert tokenizer(np.array(["Hello, world!"])).to_list() == [expected]
    assert tokenizer([]).to_list() == []


def test_runs_inside_tf_data_on_every_backend(pair):
    tokenizer, _ = pair
    texts = [text for text, _ in rotten_tomatoes()[:64]]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer)
    from_pipeline = [row for batch in dataset for row in batch.to_list()]
    assert from_pipeline == tokenizer(texts).to_list()
    assert keras.backend.backend() in ("tensorflow", "jax", "torch")


def test_invalid_utf8_becomes_replacement_character(pair):
    tokenizer, _ = pair
    ids = tokenizer([b"caf\xe9 ok", b"\xff"]).to_list()
    assert ids == tokenizer(["caf\ufffd ok", "\ufffd"]).to_list()


@pytest.mark.parametrize("bad, words", [
    (None, ["NoneType"]),
    (42, ["int"]),
    ([b"ok", 3.5], ["float", "numbers are not text"]),
    (["ok", None], ["None"]),
    (tf.constant([1, 2]), ["int32 tensor"]),
])
def test_bad_inputs_get_type_errors(bad, words, pair):
    tokenizer, _ = pair
    with pytest.raises(TypeError) as info:
        tokenizer(bad)
    assert all(w in str(info.value) for w in words)


TOY_VOCAB = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4, "a": 5, "b": 6, "\u0120": 7,
             "ab": 8, "\u0120ab": 9, "aa": 10}


def test_config_round_trip():
    tokenizer = BytePairTokenizer(TOY_VOCAB, ["a b", "\u0120 ab", "a a"], add_prefix_space=True)
    clone = BytePairTokenizer.from_config(tokenizer.get_config())
    assert clone(["ab aaa"]).to_list() == tokenizer(["ab aaa"]).to_list() == [[9, 7, 10, 5]]
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tokenizer))
    assert restored.get_config() == tokenizer.get_config()


def test_bad_files_are_named():
    with pytest.raises(ValueError, match="<mask>"):
        BytePairTokenizer({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4}, [])
    with pytest.raises(ValueError, match=r"merges\[0\]"):
        BytePairTokenizer(TOY_VOCAB, ["a b c"])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        BytePairTokenizer(TOY_VOCAB, ["b a"])
    with pytest.raises(TypeError, match="vocabulary"):
        BytePairTokenizer(["a", "b"], [])
