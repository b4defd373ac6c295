"""Sentence pairs for next-sentence and sentence-order prediction.

Follows the original BERT data generator (`create_pretraining_data.py`):
documents are lists of sentences; sentences are accumulated into a chunk
until it reaches a target length (usually the full length, with probability
`short_sequence_probability` a random shorter one); the chunk is split at a
random sentence boundary into segment A and segment B, and the pair is
truncated to fit by trimming the longer segment, from the front or the back
at random.

- NSP (BERT): half of the time B is the actual continuation (label 0);
  otherwise B is taken from a random other document (label 1), and the
  sentences of the chunk that B did not use are returned to the stream.
- SOP (ALBERT): B is always the actual continuation; half of the time the
  two segments are swapped (label 1).

Labels follow transformers' convention (`next_sentence_label`,
`sentence_order_label`): 0 = the natural order.
"""

import os
import random

from kerasbert.utils.checks import abbreviated, check_choice, check_file, check_int, check_number

TASKS = ("nsp", "sop")


def read_documents(paths):
    """Plain-text files in BERT's format (one sentence per line, a blank line
    between documents) -> a list of documents, each a list of sentences."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a text file's path or a list of them; got {abbreviated(paths)}.")
    paths = [check_file(f"paths[{i}]", path, "a text file") for i, path in enumerate(paths)]
    documents = [[]]
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if line:
                    documents[-1].append(line)
                elif documents[-1]:
                    documents.append([])
        if documents[-1]:
            documents.append([])
    return [d for d in documents if d]


def check_documents(documents, text=False):
    """Documents as lists of sentences: sentence strings (`text=True`) or
    sequences of token ids. Raises a TypeError naming the first that is not."""
    kind = "sentence strings" if text else "sentences, each a list of token ids"
    if isinstance(documents, (str, bytes)) or not isinstance(documents, (list, tuple)):
        raise TypeError(f"documents must be a list of documents, each a list of {kind}; got {abbreviated(documents)}.")
    for i, document in enumerate(documents):
        if isinstance(document, (str, bytes)) or not isinstance(document, (list, tuple)):
            raise TypeError(
                f"documents[{i}] must be a list of {kind} (a document); got {abbreviated(document, 60)}. "
                "Wrap a flat list of sentences as [sentences] for one document."
            )
        for j, sentence in enumerate(document):
            if text and not isinstance(sentence, str):
                raise TypeError(f"documents[{i}][{j}] must be a sentence string; got {abbreviated(sentence, 60)}.")
            if not text and (isinstance(sentence, (str, bytes)) or not hasattr(sentence, "__len__")):
                hint = ", not text: tokenize it first" if isinstance(sentence, (str, bytes)) else ""
                raise TypeError(
                    f"documents[{i}][{j}] must be a sentence, a list of token ids{hint}; got {abbreviated(sentence, 60)}."
                )


def _truncate_pair(first, second, budget, rng):
    while len(first) + len(second) > budget:
        longer = first if len(first) > len(second) else second
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def make_sentence_pairs(
    documents,
    sequence_length,
    task="nsp",
    short_sequence_probability=0.1,
    num_special_tokens=3,
    seed=None,
):
    """Builds (first, second, label) examples from tokenized documents.

    Args:
        documents: a list of documents, each a list of sentences, each a list
            of token ids (or any sequence: tokens are not inspected).
        sequence_length: the packed length, special tokens included.
        task: "nsp" (next-sentence prediction) or "sop" (sentence order).
        short_sequence_probability: how often a chunk targets a random
            shorter length, so that the model also sees short inputs.
        num_special_tokens: special tokens the packer adds to a pair (3 for
            BERT's `[CLS] A [SEP] B [SEP]`, 4 for RoBERTa's layout).
        seed: seed of the random choices.

    Returns:
        A list of `(first, second, label)` with `first`, `second` lists of
        ids whose total length fits `sequence_length - num_special_tokens`.
    """
    check_choice("task", task, TASKS)
    check_int("num_special_tokens", num_special_tokens, 0)
    budget = check_int("sequence_length", sequence_length) - num_special_tokens
    if budget < 2:
        raise ValueError(
            f"sequence_length={sequence_length} leaves no room for two segments "
            f"after {num_special_tokens} special tokens."
        )
    check_number("short_sequence_probability", short_sequence_probability, 0.0, 1.0)
    check_int("seed", seed, allow_none=True)
    check_documents(documents)
    documents = [[list(s) for s in doc if len(s)] for doc in documents]
    documents = [doc for doc in documents if doc]
    if task == "nsp" and len(documents) < 2:
        raise ValueError("next-sentence prediction needs at least two non-empty documents.")
    rng = random.Random(seed)
    examples = []
    for index, document in enumerate(documents):
        examples += _pairs_from_document(documents, index, budget, task, short_sequence_probability, rng)
    rng.shuffle(examples)
    return examples


def _pairs_from_document(documents, index, budget, task, short_probability, rng):
    document = documents[index]
    target = budget if rng.random() >= short_probability else rng.randint(2, budget)
    examples, chunk, length, i = [], [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk:
                split = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                first = [t for s in chunk[:split] for t in s]
                label = 0
                if task == "nsp" and (len(chunk) == 1 or rng.random() < 0.5):
                    label = 1
                    second = _random_segment(documents, index, target - len(first), rng)
                    i -= len(chunk) - split  # the unused sentences go back
                else:
                    second = [t for s in chunk[split:] for t in s]
                    if task == "sop" and rng.random() < 0.5:
                        first, second, label = second, first, 1
                if first and second:
                    _truncate_pair(first, second, budget, rng)
                    examples.append((first, second, label))
            chunk, length = [], 0
            target = budget if rng.random() >= short_probability else rng.randint(2, budget)
        i += 1
    return examples


def _random_segment(documents, index, target, rng):
    for _ in range(10):
        other = rng.randrange(len(documents))
        if other != index:
            break
    document = documents[other]
    start = rng.randrange(len(document))
    segment = []
    for sentence in document[start:]:
        segment += sentence
        if len(segment) >= target:
            break
    return segment
