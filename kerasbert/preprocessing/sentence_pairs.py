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

import random

TASKS = ("nsp", "sop")


def read_documents(paths):
    """Plain-text files in BERT's format (one sentence per line, a blank line
    between documents) -> a list of documents, each a list of sentences."""
    if isinstance(paths, str):
        paths = [paths]
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
    if task not in TASKS:
        raise ValueError(f"task={task!r}; expected one of {TASKS}.")
    budget = sequence_length - num_special_tokens
    if budget < 2:
        raise ValueError(
            f"sequence_length={sequence_length} leaves no room for two segments "
            f"after {num_special_tokens} special tokens."
        )
    if not 0.0 <= short_sequence_probability <= 1.0:
        raise ValueError(f"short_sequence_probability must be in [0, 1]; got {short_sequence_probability}.")
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
