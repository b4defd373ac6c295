"""Tokenization throughput next to transformers' fast tokenizer, id parity on
real text, and the padding saved by length bucketing.

    .venv/bin/python benchmarks/tokenization.py [--json out.json]

Real text: the 12,808 Rotten Tomatoes critic snippets and the 73,812 lines of
the King James Bible (tools/fetch_data.sh). Throughput is strings per second
over the whole corpus in batches of 1,024, median of 3 runs after a warm-up;
kerasbert's tokenizer runs as a compiled TensorFlow graph, transformers' as
its Rust fast tokenizer (both on this machine's cores).
"""

import argparse
import json
import os
import statistics
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from helpers import kjv_lines, minilm_directory, rotten_tomatoes  # noqa: E402

import kerasbert  # noqa: E402
from kerasbert.preprocessing import Packer, bucket_by_length, padding_fraction  # noqa: E402


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
    args = parser.parse_args()
    import transformers

    results = {}
    snippets = [t for t, _ in rotten_tomatoes()]
    corpora = {"rotten_tomatoes": snippets, "kjv": kjv_lines()}
    for casing, lowercase in [("uncased", True), ("cased", False)]:
        ours = kerasbert.tokenizers.WordPieceTokenizer(
            os.path.join(minilm_directory(), "vocab.txt"), lowercase=lowercase
        )
        hf = transformers.BertTokenizerFast.from_pretrained(minilm_directory(), do_lower_case=lowercase)
        for name, texts in corpora.items():
            ids = ours(texts).to_list()
            expected = hf(texts, add_special_tokens=False)["input_ids"]
            same = sum(a == b for a, b in zip(ids, expected))
            row = {
                "strings": len(texts),
                "identical": same,
                "kerasbert_strings_per_s": throughput(ours, texts),
                "transformers_strings_per_s": throughput(
                    lambda x: hf(x, add_special_tokens=False), texts
                ),
            }
            row["ratio"] = row["kerasbert_strings_per_s"] / row["transformers_strings_per_s"]
            results[f"wordpiece_{casing}_{name}"] = row

    tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    fixed = Packer.from_tokenizer(tokenizer, 128)
    dynamic = Packer.from_tokenizer(tokenizer, 128, pad_to_sequence_length=False)
    texts = tf.data.Dataset.from_tensor_slices(snippets)

    def trim(features):
        return {k: v[: tf.reduce_sum(features["padding_mask"])] for k, v in features.items()}

    examples = texts.batch(1024).map(lambda x: dynamic(tokenizer(x))).unbatch().map(trim)
    results["padding_rotten_tomatoes_batch_32"] = {
        "fixed_128": padding_fraction(texts.batch(32).map(lambda x: fixed(tokenizer(x)))),
        "dynamic_per_batch": padding_fraction(texts.batch(32).map(lambda x: dynamic(tokenizer(x)))),
        "buckets_16_32_64_128": padding_fraction(bucket_by_length(examples, 32, (16, 32, 64, 128))),
    }

    for name, row in results.items():
        print(name, json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
