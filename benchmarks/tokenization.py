"""Tokenization throughput next to transformers' fast tokenizer, id parity on
real text, and the padding saved by length bucketing and document packing.

    .venv/bin/python benchmarks/tokenization.py [--json out.json] [--padding-only]
        [--tokenizers wordpiece,bpe,sentencepiece]

Padding: the Rotten Tomatoes snippets, tokenized by the all_minilm_l6_v2
tokenizer as [CLS] snippet [SEP], in rows of at most 128 and batches of 32:
everything padded to 128, each batch padded to its longest row, length
buckets of 16/32/64/128, and snippets packed several to a row of 128
(`pack_documents`; the few longer than 126 tokens truncated, as the packer
does). `--padding-only` skips the throughput and parity part.

Real text: the 12,808 Rotten Tomatoes critic snippets and the 73,812 lines of
the King James Bible (tools/fetch_data.sh). Cold start (`<tokenizer>_cold_start`):
the first call of a tokenizer just built, on one string (tracing its graph
and TensorFlow's first run of it), then the median latency of 50 calls on
one snippet each, next to transformers'. Throughput is strings per second
over the whole corpus in batches of 1,024, median of 3 runs after a warm-up;
kerasbert's tokenizer runs as a compiled TensorFlow graph, transformers' as
its Rust fast tokenizer (both on this machine's cores). Tokenizers: WordPiece
(all-MiniLM-L6-v2's vocabulary, uncased and cased), byte-level BPE (GPT-2's
merges, data/gpt2) and SentencePiece (an ALBERT-style unigram model of 8,000
pieces trained here on both corpora with train_sentencepiece).
"""

import argparse
import json
import os
import statistics
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from common import latency
from helpers import DATA, gpt2_directory, kjv_lines, minilm_directory, rotten_tomatoes

import kerasbert
from kerasbert.preprocessing import (
    Packer,
    bucket_by_length,
    pack_documents,
    padding_fraction,
)


def throughput(fn, texts, batch=1024, runs=3):
    fn(texts[:batch])
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            fn(texts[i:i + batch])
        times.append(time.perf_counter() - start)
    return len(texts) / statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    parser.add_argument("--padding-only", action="store_true")
    parser.add_argument("--tokenizers", default="wordpiece,bpe,sentencepiece",
                        help="comma-separated: wordpiece, bpe, sentencepiece")
    args = parser.parse_args()

    results = {}
    snippets = [t for t, _ in rotten_tomatoes()]
    if not args.padding_only:
        results.update(tokenizer_results(snippets, args.tokenizers.split(",")))
    results.update(padding_results(snippets))

    for name, row in results.items():
        print(name, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def compare(ours, hf, texts):
    """Id parity and throughput of one tokenizer pair on one corpus."""
    ids = ours(texts).to_list()
    expected = hf(texts, add_special_tokens=False)["input_ids"]
    row = {
        "strings": len(texts),
        "identical": sum(a == b for a, b in zip(ids, expected)),
        "kerasbert_strings_per_s": throughput(ours, texts),
        "transformers_strings_per_s": throughput(lambda x: hf(x, add_special_tokens=False), texts),
    }
    row["ratio"] = row["kerasbert_strings_per_s"] / row["transformers_strings_per_s"]
    return row


def cold_start(ours, hf, texts, calls=50):
    """The first call of a tokenizer just built (its graph traced and
    instantiated), then the median latency of single-string calls, next to
    transformers' fast tokenizer on the same strings."""
    start = time.perf_counter()
    ours(texts[:1])
    first = time.perf_counter() - start

    return {
        "kerasbert_first_call_s": first,
        "kerasbert_one_string_ms": latency(lambda t: ours([t]), texts, calls)[0],
        "transformers_one_string_ms": latency(lambda t: hf([t], add_special_tokens=False), texts, calls)[0],
    }


def tokenizer_results(snippets, kinds):
    import tempfile

    import transformers

    corpora = {"rotten_tomatoes": snippets, "kjv": kjv_lines()}
    pairs = {}
    if "wordpiece" in kinds:
        for casing, lowercase in [("uncased", True), ("cased", False)]:
            pairs[f"wordpiece_{casing}"] = (
                kerasbert.tokenizers.WordPieceTokenizer(
                    os.path.join(minilm_directory(), "vocab.txt"), lowercase=lowercase
                ),
                transformers.BertTokenizerFast.from_pretrained(minilm_directory(), do_lower_case=lowercase),
            )
    if "bpe" in kinds:  # RoBERTa's tokenizer with GPT-2's 50,000 merges
        pairs["byte_pair_gpt2"] = (
            kerasbert.Tokenizer.from_preset(gpt2_directory()),
            transformers.RobertaTokenizerFast.from_pretrained(gpt2_directory()),
        )
    if "sentencepiece" in kinds:  # an ALBERT-style unigram model of 8,000 pieces trained on both corpora
        work = tempfile.mkdtemp()
        corpus = os.path.join(work, "reviews.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("\n".join(snippets))
        directory = os.path.join(work, "albert")
        kerasbert.tokenizers.train_sentencepiece([corpus, os.path.join(DATA, "kjv.txt")], 8000, directory)
        pairs["sentencepiece_8k"] = (
            kerasbert.Tokenizer.from_preset(directory),
            transformers.AlbertTokenizerFast.from_pretrained(directory),
        )
    results = {}
    for kind, (ours, hf) in pairs.items():
        results[f"{kind}_cold_start"] = cold_start(ours, hf, snippets)
        for name, texts in corpora.items():
            results[f"{kind}_{name}"] = compare(ours, hf, texts)
    return results


def padding_results(snippets, sequence_length=128, batch_size=32):
    tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    fixed = Packer.from_tokenizer(tokenizer, sequence_length)
    dynamic = Packer.from_tokenizer(tokenizer, sequence_length, pad_to_sequence_length=False)
    texts = tf.data.Dataset.from_tensor_slices(snippets)

    def trim(features):
        return {k: v[: tf.reduce_sum(features["padding_mask"])] for k, v in features.items()}

    examples = texts.batch(1024).map(lambda x: dynamic(tokenizer(x))).unbatch().map(trim)
    ids = tokenizer.special_token_ids
    documents = texts.batch(1024).map(tokenizer).unbatch()  # one snippet's ids each, no specials
    packed = pack_documents(
        documents, sequence_length, start_id=ids["cls"], end_id=ids["sep"], pad_id=ids["pad"],
        long_documents="truncate",
    ).batch(batch_size)
    fractions = {
        "fixed_128": padding_fraction(texts.batch(batch_size).map(lambda x: fixed(tokenizer(x)))),
        "dynamic_per_batch": padding_fraction(texts.batch(batch_size).map(lambda x: dynamic(tokenizer(x)))),
        "buckets_16_32_64_128": padding_fraction(bucket_by_length(examples, batch_size, (16, 32, 64, 128))),
        "packed_128": padding_fraction(packed),
    }
    rows = sum(int(batch["token_ids"].shape[0]) for batch in packed)
    fractions["packed_rows"] = rows
    fractions["snippets"] = len(snippets)
    fractions["positions_fixed_over_packed"] = len(snippets) / rows
    return {f"padding_rotten_tomatoes_batch_{batch_size}": fractions}


if __name__ == "__main__":
    main()
