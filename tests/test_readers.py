"""Readers on the sample files in tests/data (real GLUE, CoNLL-2003 and SQuAD
layouts), checked against plain parses of the same files, and their errors."""

import json
import pathlib
import warnings

import numpy as np
import pytest
from helpers import tensorflow_pass_only
from seqeval.metrics.sequence_labeling import get_entities

from kerasbert.readers import Answer, TextData, TokenData, read_conll, read_glue_tsv, read_squad

# Plain Python and TensorFlow preprocessing: the same on every Keras backend, so
# checked once, in the tensorflow pass of the suite.
pytestmark = tensorflow_pass_only

DATA = pathlib.Path(__file__).parent / "data"


def split_tsv(path):
    """The format's definition: tab-separated fields, no quoting."""
    lines = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def write(tmp_path, text, name="file.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- GLUE ------------------------------------------------------------------

def test_sst2_single_sentences():
    data = read_glue_tsv(DATA / "glue_sst2.tsv", "sentence", "label")
    _, rows = split_tsv(DATA / "glue_sst2.tsv")
    assert len(data) == len(rows) == 12
    assert data.x == [row[0] for row in rows]  # trailing spaces kept, as in SST-2
    assert data.y.dtype == np.int32 and data.y.tolist() == [int(row[1]) for row in rows]
    assert data.label_names == ["0", "1"]
    assert any('"twist' in sentence for sentence in data.x)  # an unbalanced quote, read verbatim


def test_mrpc_pairs_by_name_or_index():
    path = DATA / "glue_mrpc.tsv"
    header, rows = split_tsv(path)
    assert header == ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    by_name = read_glue_tsv(path, ["#1 String", "#2 String"], "Quality")
    by_index = read_glue_tsv(path, (3, -1), 0)
    for data in (by_name, by_index):
        assert data.x == ([row[3] for row in rows], [row[4] for row in rows])
        assert data.y.tolist() == [int(row[0]) for row in rows]
    assert len(by_name) == 10
    assert by_name.x[0][2].startswith('"We are')  # a field that opens with a quote is not a quoted field


def test_stsb_regression():
    path = DATA / "glue_stsb.tsv"
    _, rows = split_tsv(path)
    data = read_glue_tsv(path, ["sentence1", "sentence2"], "score", regression=True)
    assert data.y.dtype == np.float32 and data.label_names is None
    np.testing.assert_allclose(data.y, [float(row[-1]) for row in rows])
    assert data.x[1][0] == rows[0][8]


def test_unlabelled_file_and_datasets():
    data = read_glue_tsv(DATA / "glue_mrpc.tsv", ["#1 String", "#2 String"])
    assert data.y is None
    (first, second), *_ = data.dataset().take(1)
    assert first.numpy().decode() == data.x[0][0] and second.numpy().decode() == data.x[1][0]
    labelled = read_glue_tsv(DATA / "glue_sst2.tsv", "sentence", "label").dataset()
    assert labelled.element_spec[0].shape == () and labelled.element_spec[1].dtype.name == "int32"
    assert [int(y) for _, y in labelled.take(3)] == [1, 0, 1]
    assert len(list(TextData([], np.zeros(0, np.int32)).dataset())) == 0


def test_label_names_give_the_ids():
    data = read_glue_tsv(DATA / "glue_sst2.tsv", 0, 1, label_names=["1", "0"])
    assert data.y.tolist()[:3] == [0, 1, 0] and data.label_names == ["1", "0"]
    with pytest.raises(ValueError, match=r"glue_sst2.tsv, line 2: label '1' is not one of label_names \['0'\]"):
        read_glue_tsv(DATA / "glue_sst2.tsv", 0, 1, label_names=["0"])


def test_headerless_file_and_byte_order_mark(tmp_path):
    path = write(tmp_path, "x\ty\t1\nz\tw\t0\n")
    data = read_glue_tsv(path, [0, 1], 2, header=False)
    assert data.x == (["x", "z"], ["y", "w"]) and data.y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="text_columns='sentence' is a column name, but header=False"):
        read_glue_tsv(path, "sentence", header=False)
    # MRPC's original files start with a UTF-8 byte-order mark.
    path = write(tmp_path, "\ufeffsentence\tlabel\nfine\t1\n", "bom.tsv")
    assert read_glue_tsv(path, "sentence", "label").x == ["fine"]


def test_tsv_errors_name_file_line_and_value(tmp_path):
    path = write(tmp_path, "sentence\tlabel\ngood\t1\nbad\t0\textra\n")
    with pytest.raises(ValueError, match=r"file.txt, line 3: expected 2 tab-separated fields .*found 3"):
        read_glue_tsv(path, "sentence", "label")
    with pytest.raises(ValueError, match=r"'text' is not a column of .*\['sentence', 'label'\]"):
        read_glue_tsv(DATA / "glue_sst2.tsv", "text", "label")
    with pytest.raises(ValueError, match="label_column=5 is out of range"):
        read_glue_tsv(DATA / "glue_sst2.tsv", "sentence", 5)
    with pytest.raises(ValueError, match="one column or two"):
        read_glue_tsv(DATA / "glue_mrpc.tsv", [0, 1, 2])
    with pytest.raises(TypeError, match="column names .* or indices"):
        read_glue_tsv(DATA / "glue_sst2.tsv", [1.5])
    with pytest.raises(ValueError, match=r"line 2: label 'high' is not a number"):
        read_glue_tsv(write(tmp_path, "s\tscore\nfine\thigh\n"), "s", "score", regression=True)
    with pytest.raises(ValueError, match="label_names is for classification"):
        read_glue_tsv(DATA / "glue_stsb.tsv", "sentence1", "score", regression=True, label_names=["0"])
    with pytest.raises(FileNotFoundError, match="TSV file not found: .*missing.tsv"):
        read_glue_tsv(tmp_path / "missing.tsv", "sentence")
    with pytest.raises(ValueError, match="empty; expected a header"):
        read_glue_tsv(write(tmp_path, ""), "sentence")


# --- CoNLL -----------------------------------------------------------------

def test_conll2003_sample():
    data = read_conll(DATA / "conll2003_sample.txt")
    assert len(data) == 13 and not any("-DOCSTART-" in words for words in data.words)
    assert data.words[0][:3] == ["Dutch", "brewer", "Heineken"] and data.tags[0][:3] == ["B-MISC", "O", "B-ORG"]
    assert data.label_names == ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]
    assert all(len(w) == len(t) for w, t in zip(data.words, data.tags))
    # Valid IOB2 (every I-X follows B-X or I-X), with four entity types.
    for tags in data.tags:
        for previous, tag in zip(["O", *tags], tags):
            assert not tag.startswith("I-") or previous[2:] == tag[2:], tags
    counts = {}
    for tags in data.tags:
        for type_, _, _ in get_entities(tags):
            counts[type_] = counts.get(type_, 0) + 1
    assert counts == {"ORG": 7, "LOC": 7, "MISC": 6, "PER": 4}
    assert read_conll(DATA / "conll2003_sample.txt", tag_column=1).tags[0][:3] == ["JJ", "NN", "NNP"]
    assert read_conll(DATA / "conll2003_sample.txt", tag_column=2).tags[0][:3] == ["B-NP", "I-NP", "I-NP"]


def test_conll_tag_ids_and_dataset():
    data = read_conll(DATA / "conll2003_sample.txt")
    ids = data.tag_ids()
    assert [data.label_names[i] for i in ids[1]] == data.tags[1] and ids[1].dtype == np.int32
    dataset = data.dataset()
    assert dataset.element_spec[0].shape.as_list() == [None] and dataset.element_spec[1].dtype.name == "int32"
    elements = list(dataset)
    assert len(elements) == 13
    for (words, tag_ids), expected_words, expected_ids in zip(elements, data.words, ids):
        assert [w.decode() for w in words.numpy()] == expected_words
        np.testing.assert_array_equal(tag_ids.numpy(), expected_ids)
    with pytest.raises(ValueError, match=r"sentence 0, word 0: tag 'B-PER' is not one of label_names \['O'\]"):
        TokenData([["Ada"]], [["B-PER"]], ["O"]).tag_ids()
    # A trained tagger's labels: its ids, and the file and line of a tag it does not know.
    task_labels = data.label_names[::-1]
    assert [[task_labels[i] for i in row] for row in data.tag_ids(task_labels)] == data.tags
    without_misc = [label for label in task_labels if not label.endswith("MISC")]
    line = next(n for row, numbers in zip(data.tags, data.lines) for tag, n in zip(row, numbers) if "MISC" in tag)
    with open(DATA / "conll2003_sample.txt") as f:
        assert f.read().splitlines()[line - 1].split()[-1] == "B-MISC"
    with pytest.raises(ValueError, match=rf"conll2003_sample.txt, line {line}: tag 'B-MISC' is not one of the given"):
        data.tag_ids(without_misc)


def test_a_tag_like_a_typo_of_another_is_warned_of(tmp_path):
    path = write(tmp_path, "Ada B-PER\nin O\nParis B-LOC\n\n" + "Rome B-LOC\n\n" * 9 + "Oslo B-LCO\n")
    with pytest.warns(UserWarning, match=r"file.txt, line 23: tag 'B-LCO' looks like a typo of the 'LOC' tags"):
        read_conll(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_conll(DATA / "conll2003_sample.txt")
        read_conll(path, label_names=["O", "B-PER", "B-LOC", "B-LCO"])  # named on purpose


def test_two_column_file_and_label_names(tmp_path):
    path = write(tmp_path, "Ada B-PER\nLovelace I-PER\n\n\nwrote O\n")
    data = read_conll(path, label_names=["O", "B-PER", "I-PER", "B-LOC"])
    assert data.words == [["Ada", "Lovelace"], ["wrote"]]
    assert data.label_names == ["O", "B-PER", "I-PER", "B-LOC"]
    assert [ids.tolist() for ids in data.tag_ids()] == [[1, 2], [0]]
    with pytest.raises(ValueError, match=r"file.txt, line 2: tag 'I-PER' is not one of label_names"):
        read_conll(path, label_names=["O", "B-PER"])


def test_conll_errors(tmp_path):
    with pytest.raises(ValueError, match=r"file.txt, line 3: expected 4 space-separated fields \(like line 1\)"):
        read_conll(write(tmp_path, "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-MISC\n"))
    with pytest.raises(ValueError, match="tag_column=0 does not pick a tag column"):
        read_conll(DATA / "conll2003_sample.txt", tag_column=0)
    with pytest.raises(ValueError, match="tag_column=4 does not pick"):
        read_conll(DATA / "conll2003_sample.txt", tag_column=4)
    with pytest.raises(ValueError, match="line 1: expected a word and a tag"):
        read_conll(write(tmp_path, "lonely\n"))
    with pytest.raises(FileNotFoundError, match="CoNLL file not found"):
        read_conll(tmp_path / "nothing.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("Zürich B-LOC\n".encode("latin-1"))
    with pytest.raises(ValueError, match="latin1.txt is not UTF-8 text"):
        read_conll(bad)


# --- SQuAD -----------------------------------------------------------------

def raw_questions(path):
    data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    return [(p["context"], qa) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]


def test_squad_v1_sample():
    examples = read_squad(DATA / "squad_v1_sample.json")
    raw = raw_questions(DATA / "squad_v1_sample.json")
    assert len(examples) == len(raw) == 11
    assert [e.title for e in examples[::5]] == ["Glacier", "Glacier", "Honey_bee"]
    for example, (context, qa) in zip(examples, raw):
        assert (example.id, example.question, example.context) == (qa["id"], qa["question"], context)
        assert example.answers == tuple(Answer(a["text"], a["answer_start"]) for a in qa["answers"])
        assert not example.is_impossible
        for answer in example.answers:  # character offsets, not bytes: the context has "Isbræ"
            assert context[answer.start:answer.start + len(answer.text)] == answer.text
    # One context needs several windows at sequence length 128, one is ~250 words.
    lengths = sorted({len(e.context.split()) for e in examples})
    assert lengths[-1] > 400 and 200 < lengths[1] < 300
    assert any(a.start > 2500 for e in examples for a in e.answers)  # answers late in the long context


def test_squad_v2_sample():
    examples = read_squad(DATA / "squad_v2_sample.json")
    impossible = [e for e in examples if e.is_impossible]
    assert len(examples) == 13 and len(impossible) == 5
    assert all(e.answers == () and e.id.startswith("5a") for e in impossible)
    v1_ids = {e.id for e in read_squad(DATA / "squad_v1_sample.json")}
    assert {e.id for e in examples if not e.is_impossible} <= v1_ids


def squad_file(tmp_path, qa, context="Gutenberg worked in Mainz."):
    data = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qa}]}]}
    return write(tmp_path, json.dumps(data), "squad.json")


def test_squad_errors(tmp_path):
    good = {"id": "q1", "question": "Where?", "answers": [{"text": "Mainz", "answer_start": 20}]}
    assert read_squad(squad_file(tmp_path, [good]))[0].answers == (Answer("Mainz", 20),)
    shifted = {**good, "answers": [{"text": "Mainz", "answer_start": 19}]}
    with pytest.raises(ValueError, match=r"question 'q1': answer 'Mainz' is not at answer_start=19 .*' Main'"):
        read_squad(squad_file(tmp_path, [shifted]))
    with pytest.raises(ValueError, match="'q1' is marked is_impossible but has answers"):
        read_squad(squad_file(tmp_path, [{**good, "is_impossible": True}]))
    with pytest.raises(ValueError, match="'q1' has no answers and is not marked is_impossible"):
        read_squad(squad_file(tmp_path, [{**good, "answers": []}]))
    with pytest.raises(ValueError, match="'q1' appears twice"):
        read_squad(squad_file(tmp_path, [good, good]))
    with pytest.raises(ValueError, match="question 'q1' needs a 'question' field of type str"):
        read_squad(squad_file(tmp_path, [{"id": "q1", "answers": []}]))
    with pytest.raises(ValueError, match="'q1' needs a 'is_impossible' field of type bool; got 'yes'"):
        read_squad(squad_file(tmp_path, [{**good, "is_impossible": "yes"}]))
    with pytest.raises(ValueError, match="the top level needs a 'data' field of type list"):
        read_squad(write(tmp_path, '{"version": "1.1"}', "bad.json"))
    with pytest.raises(ValueError, match=r"SQuAD file .*broken.json is not valid JSON"):
        read_squad(write(tmp_path, '{"data": [', "broken.json"))
    with pytest.raises(FileNotFoundError, match="SQuAD file not found: .*absent.json"):
        read_squad(tmp_path / "absent.json")
