"""Writes vocab.json + merges.txt (the GPT-2 / RoBERTa file layout) from a
tiktoken rank file such as whisper's `gpt2.tiktoken`.

    .venv/bin/python tools/tiktoken_to_bpe_files.py gpt2.tiktoken data/gpt2

A tiktoken file lists every token (base64 bytes) with its rank; the merges are
implied: the merge that creates a token is the split that byte-level BPE,
restricted to the ranks below the token's own, reaches on the token's bytes.
Token ids are the ranks shifted by 5, after RoBERTa's special tokens
<s>, <pad>, </s>, <unk>, <mask> (ids 0..4), so the files load as a RoBERTa
tokenizer (the ids are not RoBERTa's own).
"""

import base64
import json
import os
import sys

from kerasbert.tokenizers.byte_pair import bytes_to_unicode

SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def read_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def split_of(token, ranks):
    """The two parts BPE joins to make `token`, using only lower ranks."""
    limit = ranks[token]
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < limit and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            raise ValueError(f"token {token!r} cannot be built from lower ranks")
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def convert(tiktoken_path, output_dir):
    ranks = read_ranks(tiktoken_path)
    chars = bytes_to_unicode()

    def text(token):
        return "".join(chars[b] for b in token)

    ordered = sorted(ranks, key=ranks.get)
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for token in ordered:
        vocab[text(token)] = len(vocab)
    merges = []
    for token in ordered:
        if len(token) > 1:
            left, right = split_of(token, ranks)
            merges.append(f"{text(left)} {text(right)}")
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(output_dir, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in merges))
    return len(vocab), len(merges)


if __name__ == "__main__":
    size, count = convert(sys.argv[1], sys.argv[2])
    print(f"wrote {sys.argv[2]}/vocab.json ({size:,} tokens) and merges.txt ({count:,} merges)")
