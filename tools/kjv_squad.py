"""A SQuAD v2.0 question-answering set from the King James Bible.

The text is public domain (`data/kjv_documents.txt`, written by
`tools/fetch_data.sh`: a verse a line, a blank line between chapters). Each
context is a run of consecutive verses of one chapter; each question asks
for a span of it by one of four relations the text states in set phrases:

    "Joshua the son of Nun"           Whose son was Joshua?         -> Nun
    "Ahab king of Israel"             Of what was Ahab king?        -> Israel
    "Enos begat Cainan"               Whom did Enos beget?          -> Cainan
    "Mahalath the daughter of Ishmael"  Whose daughter was Mahalath?  -> Ishmael

About a third of the questions cannot be answered from their context (SQuAD
v2.0's `is_impossible`): half ask about a name the context never mentions,
half ask a relation the context does not state for a name it does mention
("Whose daughter was Joshua?" beside "Joshua the son of Nun"). Chapters go
to one split only (by a hash of the book and chapter), so no context of one
split is seen in another.

Usage: python tools/kjv_squad.py data/kjv_documents.txt OUT_DIR
writes OUT_DIR/{train,validation,test}.json.
"""

import json
import os
import random
import re
import sys
import zlib

_NAME = r"([A-Z][a-z]{2,})"
# relation -> (pattern: subject, answer; the question about a subject)
RELATIONS = {
    "son": (re.compile(_NAME + r" the son of " + _NAME), "Whose son was {}?"),
    "king": (re.compile(_NAME + r" king of " + _NAME), "Of what was {} king?"),
    "begat": (re.compile(_NAME + r" begat " + _NAME), "Whom did {} beget?"),
    "daughter": (re.compile(_NAME + r" the daughter of " + _NAME), "Whose daughter was {}?"),
}
# Capitalised words that open sentences rather than name anyone.
_NOT_NAMES = {"And", "The", "Then", "But", "For", "Now", "When", "And", "Thus", "This", "That", "Also", "Lord",
              "God", "Which", "Who", "Behold", "Unto", "Upon", "After", "Moreover", "Wherefore", "Neither"}
SPLITS = {"train": (0, 70), "validation": (70, 85), "test": (85, 100)}  # percent of chapters


def read_chapters(path):
    """The chapters of a documents file: lists of verses."""
    chapters, verses = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                verses.append(line)
            elif verses:
                chapters.append(verses)
                verses = []
    if verses:
        chapters.append(verses)
    return chapters


def relations(text):
    """{(relation, subject): {answers}} of every set phrase in `text`."""
    found = {}
    for relation, (pattern, _) in RELATIONS.items():
        for match in pattern.finditer(text):
            subject, answer = match.groups()
            if subject not in _NOT_NAMES and answer not in _NOT_NAMES:
                found.setdefault((relation, subject), set()).add(answer)
    return found


def build(chapters, split, seed=0, max_verses=6, unstated_relations=True):
    """The questions of one split, as a SQuAD v2.0 dict: at most one question
    per context, a context per verse that states a relation (with up to
    `max_verses - 1` verses around it). `unstated_relations=False` leaves
    out the harder half of the unanswerable questions (a relation the
    context does not state of a name it mentions): every unanswerable
    question then names someone the context never mentions."""
    low, high = SPLITS[split]
    rng = random.Random(f"{seed}-{split}")
    every_name = sorted({subject for verses in chapters for (_, subject) in relations(" ".join(verses))})
    paragraphs = []
    for number, verses in enumerate(chapters):
        if not low <= zlib.crc32(verses[0].encode()) % 100 < high:
            continue
        for i, verse in enumerate(verses):
            if not relations(verse):
                continue
            before = rng.randint(0, max_verses - 1)
            after = rng.randint(0, max_verses - 1 - before)
            context = " ".join(verses[max(0, i - before):i + after + 1])
            stated = {key: answers for key, answers in relations(context).items() if len(answers) == 1}
            if not stated:
                continue
            named = set(re.findall(r"[A-Za-z]+", context))
            qid = f"kjv-{split}-{number}-{i}"
            draw = rng.random()
            if draw < (1 / 6 if unstated_relations else 1 / 3):  # a name the context never mentions
                subject = rng.choice([n for n in rng.sample(every_name, 20) if n not in named] or ["Zzyzx"])
                relation = rng.choice(sorted(RELATIONS))
                qa = {"id": qid, "question": RELATIONS[relation][1].format(subject), "answers": [],
                      "is_impossible": True}
            elif draw < 1 / 3:  # a relation the context does not state of a name it mentions
                subjects = sorted({subject for (_, subject) in stated})
                subject = rng.choice(subjects)
                unstated = [r for r in sorted(RELATIONS) if (r, subject) not in relations(context)]
                qa = {"id": qid, "question": RELATIONS[rng.choice(unstated)][1].format(subject), "answers": [],
                      "is_impossible": True}
            else:
                (relation, subject), answers = rng.choice(sorted(stated.items()))
                (answer,) = answers
                pattern = RELATIONS[relation][0]
                match = next(m for m in pattern.finditer(context) if m.group(1) == subject and m.group(2) == answer)
                qa = {"id": qid, "question": RELATIONS[relation][1].format(subject),
                      "answers": [{"text": answer, "answer_start": match.start(2)}], "is_impossible": False}
            paragraphs.append({"context": context, "qas": [qa]})
    return {"version": "v2.0", "data": [{"title": f"King James Bible ({split})", "paragraphs": paragraphs}]}


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split("\n\n")[-1])
    chapters = read_chapters(argv[1])
    os.makedirs(argv[2], exist_ok=True)
    for split in SPLITS:
        data = build(chapters, split)
        questions = [qa for p in data["data"][0]["paragraphs"] for qa in p["qas"]]
        path = os.path.join(argv[2], f"{split}.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(path + ".tmp", path)
        print(f"{path}: {len(questions)} questions, {sum(q['is_impossible'] for q in questions)} unanswerable")


if __name__ == "__main__":
    main(sys.argv)
