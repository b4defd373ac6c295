"""data/kjv.txt (the `bible` program's output) -> BERT's pretraining format.

The input has a chapter header ("Genesis 1", "1 Samuel 3", "Song of Solomon
2") between blank lines, then the chapter's verses: each starts indented
with its number ("  1 In the beginning ...") and wraps over unindented
lines. The output has one verse per line (unwrapped, without its number)
and a blank line between chapters: one chapter is one document, as
`kerasbert.preprocessing.read_documents` reads them.

Usage: python tools/kjv_to_documents.py data/kjv.txt data/kjv_documents.txt
"""

import re
import sys

HEADER = re.compile(r"^(?:[1-3] )?[A-Z][A-Za-z ]* \d+$")
VERSE = re.compile(r"^\s+(\d+) +(.*)$")


def chapters(lines):
    """Yields (header, [verse, ...]) for each chapter of the text's lines."""
    header, verses, previous_blank = None, [], True
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n").rstrip()
        if not line:
            previous_blank = True
            continue
        verse = VERSE.match(line)
        if verse:
            if header is None:
                raise ValueError(f"line {number}: a verse before any chapter header: {line!r}")
            expected = len(verses) + 1
            if int(verse.group(1)) != expected:
                raise ValueError(f"line {number}: verse {verse.group(1)} of {header}; expected {expected}")
            verses.append(verse.group(2).strip())
        elif previous_blank and HEADER.match(line):
            if header is not None:
                yield header, verses
            header, verses = line, []
        elif verses:
            verses[-1] += " " + line.strip()  # a wrapped verse goes on
        else:
            raise ValueError(f"line {number}: neither a chapter header nor a verse: {line!r}")
        previous_blank = False
    if header is not None:
        yield header, verses


def main(source, destination):
    with open(source, encoding="utf-8") as f:
        found = list(chapters(f))
    with open(destination, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(verses) for _, verses in found if verses) + "\n")
    print(f"{destination}: {len(found)} chapters, {sum(len(v) for _, v in found)} verses")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1], sys.argv[2])
