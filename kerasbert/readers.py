"""Readers for standard fine-tuning files: GLUE TSV, CoNLL-2003 NER and SQuAD
v1.1/v2.0 JSON."""

import collections
import csv
import dataclasses
import numbers
import os
import warnings

import numpy as np

from kerasbert.utils.io import read_json


@dataclasses.dataclass(frozen=True, eq=False)
class TextData:
    """Sentences (or sentence pairs) and their labels, as `read_glue_tsv` returns them.

    Attributes:
        x: a list of strings, or a tuple of two lists of strings for pairs.
        y: int32 class ids or float32 scores (one per example), or None.
        label_names: the class names, indexed by the ids in `y` (None for
            regression or unlabelled data).
        path: the file read, or None.
        lines: the line number of every example in `path`, or None.

    Examples:
    >>> data = TextData(["good", "bad"], np.array([1, 0], "int32"), ["neg", "pos"])
    >>> len(data), [(x.numpy(), int(y)) for x, y in data.dataset()]
    (2, [(b'good', 1), (b'bad', 0)])
    """

    x: list | tuple
    y: np.ndarray | None = None
    label_names: list | None = None
    path: str | None = None
    lines: list | None = None

    def __len__(self):
        return len(self.x[0] if isinstance(self.x, tuple) else self.x)

    def label_ids(self, label_names):
        """The labels as ids into `label_names` (a trained classifier's,
        `model.labels`): an int32 array. A label not in them is a ValueError
        naming the file and line.

        >>> TextData(["good", "bad"], np.array([1, 0], "int32"), ["neg", "pos"]).label_ids(["pos", "neg"])
        array([0, 1], dtype=int32)
        """
        if self.y is None or self.label_names is None:
            raise ValueError("this data has no class labels to map (unlabelled, or regression scores).")
        index = {name: i for i, name in enumerate(label_names)}
        ids = np.empty(len(self.y), np.int32)
        for number, label in enumerate(self.y.tolist()):
            name = self.label_names[label]
            if name not in index:
                where = f"example {number}" if self.lines is None else f"{self.path}, line {self.lines[number]}"
                raise ValueError(f"{where}: label {name!r} is not one of the given label_names {list(label_names)}.")
            ids[number] = index[name]
        return ids

    def dataset(self):
        """An unbatched `tf.data.Dataset` of `(x, y)`, or of `x` alone when
        `y` is None; `x` is a scalar string or a tuple of two."""
        import tensorflow as tf  # only here: reading files needs no TensorFlow

        if isinstance(self.x, tuple):
            x = tuple(tf.constant(column, tf.string) for column in self.x)
        else:
            x = tf.constant(self.x, tf.string)
        return tf.data.Dataset.from_tensor_slices(x if self.y is None else (x, self.y))


@dataclasses.dataclass(frozen=True, eq=False)
class TokenData:
    """Tagged sentences, as `read_conll` returns them.

    Attributes:
        words: a list of sentences, each a list of words.
        tags: a list of sentences, each a list of tags (strings), one per word.
        label_names: every tag, indexed by the ids `tag_ids` gives.
        path: the file read, or None.
        lines: the line number of every word in `path` (a list per
            sentence), or None.

    Examples:
    >>> data = TokenData([["Ada", "wrote"]], [["B-PER", "O"]], ["O", "B-PER"])
    >>> len(data), data.tag_ids()
    (1, [array([1, 0], dtype=int32)])
    >>> data.tag_ids(["O", "B-LOC", "B-PER"])  # a trained tagger's labels
    [array([2, 0], dtype=int32)]
    """

    words: list
    tags: list
    label_names: list
    path: str | None = None
    lines: list | None = None

    def __len__(self):
        return len(self.words)

    def tag_ids(self, label_names=None):
        """The tags as ids into `label_names` (by default the data's own;
        give a trained tagger's, `model.labels`, to score it): a list of
        int32 arrays. A tag not in them is a ValueError naming the file and
        line."""
        names = self.label_names if label_names is None else list(label_names)
        index = {name: i for i, name in enumerate(names)}
        ids = []
        for number, tags in enumerate(self.tags):
            unknown = next((j for j, tag in enumerate(tags) if tag not in index), None)
            if unknown is not None:
                where = f"sentence {number}, word {unknown}" if self.lines is None else \
                    f"{self.path}, line {self.lines[number][unknown]}"
                whose = "label_names" if label_names is None else "the given label_names"
                raise ValueError(f"{where}: tag {tags[unknown]!r} is not one of {whose} {names}.")
            ids.append(np.array([index[tag] for tag in tags], np.int32))
        return ids

    def dataset(self):
        """An unbatched `tf.data.Dataset` of `(words, tag_ids)`: a 1-D string
        tensor and a 1-D int32 tensor per sentence."""
        import tensorflow as tf
        from tensorflow.autograph.experimental import do_not_convert

        ids = self.tag_ids()
        words = tf.constant([word for sentence in self.words for word in sentence], tf.string)
        flat_ids = tf.constant(np.concatenate(ids) if ids else np.zeros(0, np.int32))
        ends = np.cumsum([len(sentence) for sentence in self.words], dtype=np.int64)
        starts = ends - [len(sentence) for sentence in self.words]
        # Slices of one flat tensor keep a plain TensorSpec([None]) element spec
        # (ragged slicing would give a RaggedTensorSpec that padded_batch rejects).
        return tf.data.Dataset.from_tensor_slices((starts, ends)).map(
            do_not_convert(lambda start, end: (words[start:end], flat_ids[start:end]))
        )


@dataclasses.dataclass(frozen=True)
class Answer:
    """One answer span: its text and the character offset where it starts in the context."""

    text: str
    start: int


@dataclasses.dataclass(frozen=True)
class SquadExample:
    """One SQuAD question with its context, as `read_squad` returns it.

    Attributes:
        id, title, question, context: strings from the file.
        answers: a tuple of `Answer`s (several in dev sets; none when
            `is_impossible`).
        is_impossible: True for SQuAD 2.0 questions without an answer.
    """

    id: str
    title: str
    question: str
    context: str
    answers: tuple
    is_impossible: bool = False


def _open_text(path, what):
    path = os.fspath(path)
    try:
        # utf-8-sig: some GLUE files (MRPC) start with a byte-order mark.
        return open(path, encoding="utf-8-sig", newline="")
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} not found: {path}") from None


def _read_lines(path, what, reader):
    """Runs `reader(file)` and turns undecodable bytes into a ValueError naming the file."""
    with _open_text(path, what) as f:
        try:
            return reader(f)
        except UnicodeDecodeError as e:
            raise ValueError(f"{what} {os.fspath(path)} is not UTF-8 text: {e}.") from None


def _column(name, argument, path, header, width):
    """The index of the column that `name` (a header name or an integer index) picks."""
    if isinstance(name, str):
        if header is None:
            raise ValueError(
                f"{argument}={name!r} is a column name, but header=False; pass integer column indices instead."
            )
        if name not in header:
            raise ValueError(f"{argument}={name!r} is not a column of {path}; its header has {header}.")
        return header.index(name)
    if isinstance(name, bool) or not isinstance(name, numbers.Integral):
        raise TypeError(f"{argument} must hold column names (str) or indices (int); got {name!r}.")
    if width is not None and not -width <= name < width:
        raise ValueError(f"{argument}={name} is out of range: {path} has {width} columns.")
    return int(name) % width if width else int(name)


def read_glue_tsv(path, text_columns, label_column=None, *, header=True, label_names=None, regression=False):
    r"""Reads a GLUE-style tab-separated file of sentences or sentence pairs.

    Fields are split on tabs only: quotes are ordinary characters (GLUE files
    hold unbalanced quotes). Blank lines are skipped.

    Args:
        path: the .tsv file.
        text_columns: one column, or a list of two for sentence pairs; each a
            header name (when `header`) or an integer index.
        label_column: the label's column (name or index), or None for
            unlabelled files such as GLUE test sets.
        header: whether the first line names the columns.
        label_names: for classification, the labels as written in the file;
            a label's id is its position here. By default the sorted distinct
            labels of the file ("0", "1" -> 0, 1).
        regression: read labels as float32 scores (STS-B) instead of classes.

    Returns:
        A `TextData`.

    Examples:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.tsv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("sentence\tlabel\ngreat fun\t1\nso dull\t0\n")
    >>> data = read_glue_tsv(path, "sentence", "label")
    >>> data.x, data.y.tolist(), data.label_names
    (['great fun', 'so dull'], [1, 0], ['0', '1'])
    """
    path = os.fspath(path)
    if isinstance(text_columns, (str, numbers.Integral)):
        text_columns = [text_columns]
    text_columns = list(text_columns)
    if len(text_columns) not in (1, 2):
        raise ValueError(f"text_columns must name one column or two (a pair); got {text_columns!r}.")
    if regression and label_names is not None:
        raise ValueError(f"label_names is for classification; got label_names={label_names!r} with regression=True.")
    if label_names is not None:
        label_names = list(label_names)
        if not all(isinstance(name, str) for name in label_names) or len(set(label_names)) != len(label_names):
            raise ValueError(f"label_names must be distinct strings as written in the file; got {label_names!r}.")

    def read(f):
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        return [(reader.line_num, row) for row in reader if row]

    rows = _read_lines(path, "TSV file", read)
    names = None
    if header:
        if not rows:
            raise ValueError(f"{path} is empty; expected a header line (or pass header=False).")
        names = rows.pop(0)[1]
    width = len(names) if header else (len(rows[0][1]) if rows else None)
    for line, row in rows:
        if len(row) != width:
            raise ValueError(
                f"{path}, line {line}: expected {width} tab-separated fields"
                f" (like the {'header' if header else 'first line'}), found {len(row)}."
            )
    text_index = [_column(c, "text_columns", path, names, width) for c in text_columns]
    columns = [[row[i] for _, row in rows] for i in text_index]
    x = columns[0] if len(columns) == 1 else tuple(columns)
    lines = [line for line, _ in rows]
    if label_column is None:
        return TextData(x, None, label_names, path, lines)

    label_index = _column(label_column, "label_column", path, names, width)
    labels = [(line, row[label_index]) for line, row in rows]
    if regression:
        scores = []
        for line, label in labels:
            try:
                scores.append(float(label))
            except ValueError:
                raise ValueError(f"{path}, line {line}: label {label!r} is not a number (regression=True).") from None
        return TextData(x, np.array(scores, np.float32), None, path, lines)
    if label_names is None:
        label_names = sorted({label for _, label in labels})
    index = {name: i for i, name in enumerate(label_names)}
    for line, label in labels:
        if label not in index:
            raise ValueError(f"{path}, line {line}: label {label!r} is not one of label_names {label_names}.")
    return TextData(x, np.array([index[label] for _, label in labels], np.int32), label_names, path, lines)


def read_conll(path, *, tag_column=-1, label_names=None):
    """Reads a CoNLL-style tagging file: one word per line with its
    space-separated columns (`word POS chunk NER` in CoNLL-2003, or just
    `word tag`), a blank line after each sentence. `-DOCSTART-` lines are
    skipped.

    Args:
        path: the file.
        tag_column: the index of the column that holds the tags (the last by
            default: NER in CoNLL-2003).
        label_names: every tag that may occur; a tag's id is its position
            here. By default the file's distinct tags, sorted, with "O" first.

    Returns:
        A `TokenData`.

    Examples:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("-DOCSTART- O\\n\\nAda B-PER\\nwrote O\\n\\nParis B-LOC\\n")
    >>> data = read_conll(path)
    >>> data.words, data.tags, data.label_names
    ([['Ada', 'wrote'], ['Paris']], [['B-PER', 'O'], ['B-LOC']], ['O', 'B-LOC', 'B-PER'])
    """
    path = os.fspath(path)
    if isinstance(tag_column, bool) or not isinstance(tag_column, numbers.Integral):
        raise TypeError(f"tag_column must be an integer column index; got {tag_column!r}.")
    known = None if label_names is None else set(label_names)

    def read(f):
        sentences, width, first = [[]], None, None
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if sentences[-1]:
                    sentences.append([])
                continue
            if width is None:
                width, first = len(fields), number
                if width < 2:
                    raise ValueError(f"{path}, line {number}: expected a word and a tag, found {line.strip()!r}.")
                if not -width <= tag_column < width or tag_column % width == 0:
                    raise ValueError(
                        f"tag_column={tag_column} does not pick a tag column in {path}, whose lines have {width}"
                        f" columns (the word is column 0; tags may be in columns 1 to {width - 1}, or -1)."
                    )
            if len(fields) != width:
                raise ValueError(
                    f"{path}, line {number}: expected {width} space-separated fields (like line {first}),"
                    f" found {len(fields)}: {line.strip()!r}."
                )
            tag = fields[tag_column]
            if known is not None and tag not in known:
                raise ValueError(f"{path}, line {number}: tag {tag!r} is not one of label_names {list(label_names)}.")
            sentences[-1].append((fields[0], tag, number))
        return [s for s in sentences if s]

    sentences = _read_lines(path, "CoNLL file", read)
    words = [[word for word, _, _ in s] for s in sentences]
    tags = [[tag for _, tag, _ in s] for s in sentences]
    lines = [[line for _, _, line in s] for s in sentences]
    if label_names is None:
        label_names = sorted({tag for s in tags for tag in s}, key=lambda tag: (tag != "O", tag))
        _warn_of_typos(path, tags, lines)
    return TokenData(words, tags, list(label_names), path, lines)


def _near(a, b):
    """Whether two different strings are one edit apart: a letter changed,
    added, dropped, or two neighbours swapped ("LCO", "LOC")."""
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _warn_of_typos(path, tags, lines):
    """Warns of an IOB tag whose entity type is one edit from a type at least
    ten times as common (`B-LCO` beside `B-LOC`): a typo makes a label of
    its own. (Rarer neighbours, such as CoNLL's chunk types ADJP and ADVP,
    are real types.)"""
    counts, first = collections.Counter(), {}
    for row, numbers_ in zip(tags, lines):
        for tag, line in zip(row, numbers_):
            if tag[:2] not in ("B-", "I-", "E-", "S-"):  # entity tags only: "O", or parts of speech
                continue
            kind = tag[2:]
            counts[kind] += 1
            first.setdefault(kind, (tag, line))
    for rare in counts:
        common = [kind for kind in counts if counts[kind] >= 10 * counts[rare] and _near(kind, rare)]
        if common:
            tag, line = first[rare]
            warnings.warn(f"{path}, line {line}: tag {tag!r} looks like a typo of the {common[0]!r} tags "
                          f"({counts[rare]} against {counts[common[0]]}); it becomes a label of its own.",
                          stacklevel=3)


def read_squad(path):
    """Reads a SQuAD v1.1 or v2.0 JSON file.

    Every answer must appear at its `answer_start` in the context exactly
    (no whitespace tolerance): a mismatch raises ValueError naming the
    question. Questions marked `is_impossible` (v2.0) must have no answers,
    and all others at least one.

    Args:
        path: the JSON file (`{"version", "data": [{"title", "paragraphs":
            [{"context", "qas": [...]}]}]}`).

    Returns:
        A list of `SquadExample`, in file order.
    """
    path = os.fspath(path)
    data = read_json(path, what="SQuAD file")

    def field(obj, key, kind, where, default=None):
        value = obj.get(key, default) if isinstance(obj, dict) else None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(
                f"SQuAD file {path}: {where} needs a {key!r} field of type {kind.__name__}; got {value!r}."
            )
        return value

    examples, seen = [], set()
    for i, article in enumerate(field(data, "data", list, "the top level")):
        title = article.get("title", "") if isinstance(article, dict) else ""
        for j, paragraph in enumerate(field(article, "paragraphs", list, f"article {i}")):
            context = field(paragraph, "context", str, f"article {i}, paragraph {j}")
            for qa in field(paragraph, "qas", list, f"article {i}, paragraph {j}"):
                qid = field(qa, "id", str, f"a question in article {i}, paragraph {j}")
                where = f"question {qid!r}"
                if qid in seen:
                    raise ValueError(f"SQuAD file {path}: {where} appears twice; question ids must be unique.")
                seen.add(qid)
                question = field(qa, "question", str, where)
                impossible = field(qa, "is_impossible", bool, where, default=False)
                answers = tuple(
                    Answer(field(a, "text", str, where), field(a, "answer_start", int, where))
                    for a in field(qa, "answers", list, where)
                )
                if impossible and answers:
                    raise ValueError(f"SQuAD file {path}: {where} is marked is_impossible but has answers.")
                if not impossible and not answers:
                    raise ValueError(f"SQuAD file {path}: {where} has no answers and is not marked is_impossible.")
                for answer in answers:
                    found = context[answer.start:answer.start + len(answer.text)]
                    if answer.start < 0 or found != answer.text:
                        raise ValueError(
                            f"SQuAD file {path}: {where}: answer {answer.text!r} is not at answer_start="
                            f"{answer.start} of its context, which reads {found!r} there."
                        )
                examples.append(SquadExample(qid, title, question, context, answers, impossible))
    return examples
