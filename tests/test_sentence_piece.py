"""SentencePiece (ALBERT; XLM-RoBERTa's and DeBERTa-v2/v3's layouts): ids
and offsets identical to transformers' fast tokenizers, on models trained
here with the reference trainer."""

import json
import os
import shutil
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf
import tokenizers
import transformers
from helpers import (
    AWKWARD,
    DATA,
    assert_graph_unchecked,
    assert_same_as_reference,
    kjv_lines,
    reference_tokenizer,
    rotten_tomatoes,
    tensorflow_pass_only,
    train_sentencepiece_model,
)

import kerasbert
from kerasbert.tokenizers import SentencePieceTokenizer, train_sentencepiece


def reference(directory, **kwargs):
    return reference_tokenizer(transformers.AlbertTokenizerFast, directory, **kwargs)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "reviews.txt"
    path.write_text("\n".join(text for text, _ in rotten_tomatoes()), encoding="utf-8")
    return [str(path), os.path.join(DATA, "kjv.txt")]


@pytest.fixture(scope="module")
def uncased(corpus, tmp_path_factory):
    """ALBERT-style: trained with kerasbert.tokenizers.train_sentencepiece."""
    directory = str(tmp_path_factory.mktemp("uncased"))
    tokenizer = train_sentencepiece(corpus, 3000, directory, max_sentences=60_000)
    return tokenizer, directory




@pytest.fixture(scope="module")
def cased(corpus, tmp_path_factory):
    """A model trained directly with sentencepiece, loaded from spiece.model
    without lowercasing."""
    directory = tmp_path_factory.mktemp("cased")
    train_sentencepiece_model(corpus, directory)
    (directory / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}), encoding="utf-8")
    return kerasbert.Tokenizer.from_preset(str(directory)), str(directory)


@pytest.fixture(scope="module", params=["uncased", "cased"])
def pair(request):
    tokenizer, directory = request.getfixturevalue(request.param)
    return tokenizer, reference(directory)


@tensorflow_pass_only
def test_tokenizer_graph_holds_no_checks(pair):
    assert_graph_unchecked(pair[0]._compiled_tokenize.get_concrete_function())


AWKWARD_PLUS = AWKWARD + [
    "``Quoted'' text, ```three''' and ''''", "a▁b ▁▁c", "000 0000 00000", "x [MASK]y [CLS][SEP] <unk>",
    "ǅ ﬁre ½ ㎏ Ⅻ ｆｕｌｌ", "\r\n\u3000\u200b\u200d\ufeff", "☃☃☃ snow☃man",
    # Characters the charsmap deletes at the start of a text (or of the
    # text after a special token), controls before combining marks.
    "\x01\x01x y\x01", "\ufeff\u0301a \u200b\u0301b", "\r\n\u0301x", "x [MASK]\x01y", "\x01\u0301",
    "trailing \u3000\u2029 \x85", "x\u00a0 [MASK]  y \t",
]


@tensorflow_pass_only
def test_awkward_inputs(pair):
    assert_same_as_reference(*pair, AWKWARD_PLUS)


@tensorflow_pass_only
def test_real_review_snippets_and_book(pair):
    texts = [text for text, _ in rotten_tomatoes()]
    texts = texts + kjv_lines()[::4] if pair[0].lowercase else texts[::3]
    assert len(texts) >= 4_000
    assert_same_as_reference(*pair, texts)


@tensorflow_pass_only
def test_long_strings(pair):
    assert_same_as_reference(*pair, ["word " * 20000, "é" * 100_000, "\x00" * 50 + "x", "ab" * 50_000])


@tensorflow_pass_only
def test_every_code_point(uncased):
    """All 1,112,064 code points, each between spaces and between letters."""
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    texts = ["a" + "a".join(points[i:i + 256]) + " " + " ".join(points[i:i + 256])
             for i in range(0, len(points), 256)]
    tokenizer, directory = uncased
    assert_same_as_reference(tokenizer, reference(directory), texts)


@tensorflow_pass_only
def test_keep_accents_grapheme_clusters(corpus, tmp_path):
    """keep_accents=True: the charsmap's multi-character rules (NFC
    compositions, e + U+0301 -> é) apply to whole grapheme clusters, and a
    cluster whose first character has an entry is replaced as a whole."""
    train_sentencepiece_model(corpus, tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": False, "keep_accents": True}), encoding="utf-8"
    )
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert tokenizer.strip_accents is False and tokenizer.lowercase is False
    marks = [chr(c) for c in range(0x300, 0x370)] + ["\u200d", "\u200c", "\u0e33", "\U0001f3fb"]
    texts = AWKWARD_PLUS + [unicodedata.normalize("NFD", text) for text, _ in rotten_tomatoes()[:3000]]
    texts += ["e" + m + " \u00a0" + m + " \uff21" + m + " x" + m + m + " \r\n" for m in marks]
    assert_same_as_reference(tokenizer, reference(str(tmp_path)), texts)


@tensorflow_pass_only
@pytest.mark.parametrize("rule", ["nfkc_cf", "identity"])
def test_other_normalisation_rules(corpus, tmp_path, rule):
    """Charsmaps other than the default nmt_nfkc: case folding, none at all."""
    train_sentencepiece_model(corpus, tmp_path, rule=rule, sentences=20_000)
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert bool(tokenizer.precompiled_charsmap) == (rule != "identity")
    texts = AWKWARD_PLUS + [text for text, _ in rotten_tomatoes()[:1000]]
    assert_same_as_reference(tokenizer, reference(str(tmp_path)), texts)


@tensorflow_pass_only
def test_files_load_in_both_libraries(uncased, tmp_path):
    tokenizer, directory = uncased
    assert sorted(os.listdir(directory)) == ["spiece.model", "tokenizer.json", "tokenizer_config.json"]
    assert tokenizer.vocabulary_size() == 3000
    assert tokenizer.special_token_ids == {"cls": 2, "sep": 3, "pad": 0, "mask": 4, "unk": 1}
    texts = AWKWARD_PLUS + [text for text, _ in rotten_tomatoes()[:500]]
    auto = transformers.AutoTokenizer.from_pretrained(directory)
    assert_same_as_reference(tokenizer, auto, texts)
    # spiece.model alone (the published ALBERT layout), and transformers' own save.
    shutil.copy(os.path.join(directory, "spiece.model"), tmp_path / "spiece.model")
    assert_same_as_reference(kerasbert.Tokenizer.from_preset(str(tmp_path)), reference(str(tmp_path)), texts)
    reference(directory).save_pretrained(str(tmp_path / "saved"))
    loaded = kerasbert.Tokenizer.from_preset(str(tmp_path / "saved"))
    assert isinstance(loaded, SentencePieceTokenizer)
    assert_same_as_reference(loaded, auto, texts)


@tensorflow_pass_only
def test_older_tokenizer_json_layout(uncased, tmp_path):
    """transformers v4 wrote Metaspace alone (spaces collapsed, leading and
    trailing spaces become "▁" tokens) and a left-stripping [MASK]."""
    _, directory = uncased
    data = json.loads(reference(directory).backend_tokenizer.to_str())
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    data["normalizer"]["normalizers"].append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    for token in data["added_tokens"]:
        token["lstrip"] = token["content"] == "[MASK]"
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert tokenizer.whitespace_split is False and tokenizer.lstrip_tokens == ["[MASK]"]
    backend = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    texts = AWKWARD_PLUS + ["a  b  ", "  x", "x [MASK] y", "x\t[MASK]", "[MASK] y"] + kjv_lines()[:300]
    expected = backend.encode_batch(texts, add_special_tokens=False)
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    assert ids.to_list() == [e.ids for e in expected]
    # Offsets too, except where transformers' alignment of a left-stripped
    # special token after collapsed spaces drifts (a quirk left alone).
    simple = [i for i, t in enumerate(texts) if "[MASK]" not in t]
    assert [list(zip(starts[i].numpy(), ends[i].numpy())) for i in simple] == [expected[i].offsets for i in simple]


@tensorflow_pass_only
def test_left_stripping_mask_token(uncased, tmp_path):
    _, directory = uncased
    with open(os.path.join(directory, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["added_tokens_decoder"]["4"]["lstrip"] = True
    shutil.copy(os.path.join(directory, "spiece.model"), tmp_path / "spiece.model")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    tokenizer = kerasbert.Tokenizer.from_preset(str(tmp_path))
    assert tokenizer.lstrip_tokens == ["[MASK]"]
    hf = reference(str(tmp_path))
    texts = ["x [MASK] y", "x  \t[MASK]y", " [MASK]", "[MASK][MASK] [MASK]"]
    assert_same_as_reference(tokenizer, hf, texts)
    assert tokenizer(["x [MASK]"]).to_list()[0][-1] == 4


@tensorflow_pass_only
def test_detokenize_matches_transformers_decode(uncased):
    tokenizer, directory = uncased
    hf = reference(directory)
    texts = ["Hello, world! It's ``fine'' . ok [MASK] x", "Amélie's café ☃"]
    ids = tokenizer(texts)
    decoded = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert decoded == [hf.decode(row) for row in ids.to_list()]
    assert tokenizer.detokenize(ids[0].numpy().tolist()) == decoded[0]


@tensorflow_pass_only
def test_pair_packing_matches_transformers(uncased):
    tokenizer, directory = uncased
    hf = reference(directory)
    first = [text for text, _ in rotten_tomatoes()[:40]]
    second = [text for text, _ in rotten_tomatoes()[40:80]]
    packer = kerasbert.preprocessing.Packer.from_tokenizer(tokenizer, sequence_length=32)
    packed = packer(tokenizer(first), tokenizer(second))
    expected = hf(first, second, truncation="longest_first", max_length=32, padding="max_length",
                  return_token_type_ids=True)
    assert np.asarray(packed["token_ids"]).tolist() == expected["input_ids"]
    assert np.asarray(packed["segment_ids"]).tolist() == expected["token_type_ids"]
    assert np.asarray(packed["padding_mask"]).tolist() == expected["attention_mask"]


@tensorflow_pass_only  # a TensorFlow graph and Keras serialization: the same on every backend
def test_runs_inside_tf_data_and_round_trips_config(uncased):
    tokenizer, _ = uncased
    texts = [text for text, _ in rotten_tomatoes()[:48]]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(16).map(tokenizer)
    assert [row for batch in dataset for row in batch.to_list()] == tokenizer(texts).to_list()
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(tokenizer))
    assert isinstance(clone, SentencePieceTokenizer)
    assert clone(texts).to_list() == tokenizer(texts).to_list()
    single = tokenizer("Hello there")
    assert isinstance(single, tf.Tensor) and single.numpy().tolist() == tokenizer(["Hello there"]).to_list()[0]


@tensorflow_pass_only
def test_continuation_ids_mark_word_inner_pieces(uncased):
    tokenizer, _ = uncased
    inner = set(tokenizer.continuation_ids())
    tokens = tokenizer.vocabulary
    assert all(not tokens[i].startswith("\u2581") for i in inner)
    assert tokenizer.token_to_id("[MASK]") not in inner
    assert any(t.startswith("\u2581") for t in tokens) and len(inner) > 100


@tensorflow_pass_only
def test_invalid_utf8_and_bad_inputs(uncased):
    tokenizer, _ = uncased
    ids = tokenizer([b"caf\xe9 ok"]).to_list()[0]
    assert ids == tokenizer(["caf\ufffd ok"]).to_list()[0]
    for bad, word in [(None, "NoneType"), (7, "int"), (["ok", 1.5], "float")]:
        with pytest.raises(TypeError, match=word):
            tokenizer(bad)


@tensorflow_pass_only
def test_unsupported_files_are_refused_clearly(uncased, tmp_path):
    _, directory = uncased
    (tmp_path / "spiece.model").write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="SentencePiece model"):
        kerasbert.Tokenizer.from_preset(str(tmp_path))
    with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
        data = json.load(f)
    data["normalizer"]["normalizers"].append({"type": "NFKC"})
    (tmp_path / "spiece.model").unlink()
    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="NFKC"):
        kerasbert.Tokenizer.from_preset(str(tmp_path))
    with pytest.raises(ValueError, match=r"lacks the special token"):
        SentencePieceTokenizer([("<unk>", 0.0), ("a", -1.0)])
    with pytest.raises(TypeError, match="piece, score"):
        SentencePieceTokenizer(["a", "b"])


# -- XLM-RoBERTa (fairseq's ids) and DeBERTa-v2/v3 (the model's ids, [MASK] after them)

# Per layout: transformers' tokenizer, the model file's name and the special
# pieces of the published models' files: XLM-RoBERTa's holds <unk> <s> </s>
# (fairseq adds <pad> and <mask>), DeBERTa-v3's [PAD] [CLS] [SEP] [UNK]
# ([MASK] comes after the model).
LAYOUTS = {
    "xlm_roberta": (transformers.XLMRobertaTokenizerFast, "sentencepiece.bpe",
                    dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1)),
    "deberta_v2": (transformers.DebertaV2TokenizerFast, "spm",
                   dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
                        eos_piece="[SEP]", unk_piece="[UNK]")),
}
LAYOUT_TEXTS = AWKWARD_PLUS + [
    "x <mask>y <s></s> <pad> <unk>", "x  <mask> [MASK]", "<mask>", "[MASK]", "  lead and trail  ",
]


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout(request, corpus, tmp_path_factory):
    """(layout, directory holding only its model file, kerasbert's tokenizer
    and transformers' built from it)."""
    name = request.param
    directory = tmp_path_factory.mktemp(name)
    train_sentencepiece_model(corpus, directory, sentences=20_000, name=LAYOUTS[name][1], pieces=LAYOUTS[name][2])
    return name, str(directory), kerasbert.Tokenizer.from_preset(str(directory)), layout_reference(name, str(directory))


def layout_reference(layout, directory):
    return reference_tokenizer(LAYOUTS[layout][0], directory)


def config(tokenizer):
    """The tokenizer's constructor arguments: tokenizers with equal ones
    tokenize alike."""
    return {k: v for k, v in tokenizer.get_config().items() if k != "name"}


@tensorflow_pass_only
def test_layout_model_file_tokenizes_as_transformers(layout):
    name, _, tokenizer, hf = layout
    assert tokenizer.layout == name and tokenizer.vocabulary_size() == len(hf) == 2502 - (name == "deberta_v2")
    assert tokenizer.special_token_ids == {
        kind: hf.convert_tokens_to_ids(getattr(hf, f"{kind}_token")) for kind in ("cls", "sep", "pad", "mask", "unk")
    }
    if name == "xlm_roberta":  # fairseq: the model's pieces from its fourth on, one id up; <mask> last
        assert tokenizer.special_token_ids == {"cls": 0, "pad": 1, "sep": 2, "unk": 3, "mask": 2501}
        assert tokenizer.packing_style == "roberta"
    else:  # the model's ids; [MASK] after them
        assert tokenizer.special_token_ids == {"pad": 0, "cls": 1, "sep": 2, "unk": 3, "mask": 2500}
        assert tokenizer.added_tokens == ["[MASK]"] and tokenizer.packing_style == "bert"
    texts = LAYOUT_TEXTS + [text for text, _ in rotten_tomatoes()[::3]] + kjv_lines()[::40]
    assert len(texts) >= 4_000
    assert_same_as_reference(tokenizer, hf, texts)
    assert_graph_unchecked(tokenizer._compiled_tokenize.get_concrete_function())


@tensorflow_pass_only
def test_layout_pairs_and_truncation_match_transformers(layout):
    _, _, tokenizer, hf = layout
    reviews = [text for text, _ in rotten_tomatoes()[:80]]
    packer = kerasbert.preprocessing.Packer.from_tokenizer(tokenizer, sequence_length=32)
    for pair in [(reviews[:40], reviews[40:]), (reviews[:40],)]:
        packed = packer(*(tokenizer(texts) for texts in pair))
        expected = hf(*pair, truncation="longest_first", max_length=32, padding="max_length",
                      return_token_type_ids=True)
        assert np.asarray(packed["token_ids"]).tolist() == expected["input_ids"]
        assert np.asarray(packed["segment_ids"]).tolist() == expected["token_type_ids"]
        assert np.asarray(packed["padding_mask"]).tolist() == expected["attention_mask"]


@tensorflow_pass_only
def test_layout_tokenizer_json_and_written_files_load_in_both_libraries(layout, tmp_path):
    name, _, tokenizer, hf = layout
    model_file = LAYOUTS[name][1] + ".model"
    # transformers' own save (tokenizer.json + tokenizer_config.json), and its tokenizer.json alone.
    hf.save_pretrained(str(tmp_path / "saved"))
    os.makedirs(tmp_path / "json")
    shutil.copy(tmp_path / "saved" / "tokenizer.json", tmp_path / "json")
    for folder in ("saved", "json"):
        assert config(kerasbert.Tokenizer.from_preset(str(tmp_path / folder))) == config(tokenizer)
    # kerasbert's files, read back by kerasbert and by transformers (the model file alone too).
    tokenizer.save_to_preset(str(tmp_path / "written"))
    assert sorted(os.listdir(tmp_path / "written")) == sorted([model_file, "tokenizer.json", "tokenizer_config.json"])
    assert config(kerasbert.Tokenizer.from_preset(str(tmp_path / "written"))) == config(tokenizer)
    os.makedirs(tmp_path / "model")
    shutil.copy(tmp_path / "written" / model_file, tmp_path / "model")
    texts = LAYOUT_TEXTS + [text for text, _ in rotten_tomatoes()[:300]]
    for folder in ("written", "model"):
        assert_same_as_reference(tokenizer, layout_reference(name, str(tmp_path / folder)), texts)


@tensorflow_pass_only
def test_layout_special_tokens_map_sets_the_mask_token_lstrip(layout, tmp_path):
    """special_tokens_map.json (as published XLM-RoBERTa checkpoints carry)
    makes the mask token swallow the whitespace on its left, in both
    libraries."""
    name, directory, tokenizer, _ = layout
    mask = tokenizer.special_tokens["mask"]
    shutil.copy(os.path.join(directory, LAYOUTS[name][1] + ".model"), tmp_path)
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"mask_token": {
        "content": mask, "lstrip": True, "rstrip": False, "normalized": False, "single_word": False,
    }}), encoding="utf-8")
    assert config(kerasbert.Tokenizer.from_preset(str(tmp_path))) == {**config(tokenizer), "lstrip_tokens": [mask]}
    hf = layout_reference(name, str(tmp_path))
    assert hf.added_tokens_decoder[hf.convert_tokens_to_ids(mask)].lstrip


@tensorflow_pass_only
@pytest.mark.parametrize("layout", ["deberta_v2"], indirect=True)
def test_deberta_split_by_punct_is_refused(layout, tmp_path):
    _, directory, _, _ = layout
    shutil.copy(os.path.join(directory, "spm.model"), tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"split_by_punct": True}), encoding="utf-8")
    with pytest.raises(ValueError, match="split_by_punct=True"):
        kerasbert.Tokenizer.from_preset(str(tmp_path))
