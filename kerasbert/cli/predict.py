"""`kerasbert predict`: a fine-tuned task's predictions, one JSON line per text."""

import json

from kerasbert.cli.common import (
    FINETUNE_TASKS,
    add_answer_flags,
    check_file,
    check_output,
    command_parser,
    load_task,
    only_for,
    positive_int,
    read_lines,
    read_texts,
    run_settings,
    step,
    write_json_lines,
)


def run(args):
    check_output(args.output)
    if args.file is not None:
        check_file("--file", args.file)
    task = load_task(args.preset)
    kind = type(task).__name__
    if kind == "TextEmbedder":
        raise ValueError(
            f"{args.preset} holds a TextEmbedder: `kerasbert embed {args.preset} --file PATH --output "
            "vectors.npy` writes its embeddings."
        )
    if kind not in FINETUNE_TASKS:
        raise TypeError(
            f"{args.preset} holds a {kind}; kerasbert predict runs TextClassifier, TokenClassifier and "
            "QuestionAnswerer presets."
        )
    if args.pairs and kind != "TextClassifier":
        raise ValueError(f"--pairs is for TextClassifier presets; {args.preset} holds a {kind}.")
    only_for(kind, "QuestionAnswerer", args, ("null_score_threshold", "max_answer_length"))
    run = run_settings(args.preset, task)
    if kind == "QuestionAnswerer":
        records = _predict_answers(args, task)
    else:
        texts = read_texts(args, pairs=args.pairs)
        count = len(texts[0]) if args.pairs else len(texts)
        step(f"predicting {count} example(s) with the {kind} ...")
        if kind == "TextClassifier":
            records = _classify(task, texts, args.batch_size, run)
        else:
            records = _tag(task, texts, args.batch_size)
    write_json_lines(records, args.output)
    return 0


def _classify(task, texts, batch_size, run):
    import numpy as np

    from kerasbert.runs.scores import log_softmax

    logits = np.asarray(task.predict(texts, batch_size=batch_size))  # (n, num_classes)
    pairs = isinstance(texts, tuple)
    firsts = texts[0] if pairs else texts
    if task.num_classes == 1:
        scores = logits[:, 0].tolist()
        return [{"text": t, **({"text_pair": texts[1][i]} if pairs else {}), "score": scores[i]}
                for i, t in enumerate(firsts)]
    labels = getattr(task, "labels", None) or run.get("labels")
    if labels is not None and len(labels) != task.num_classes:
        labels = None
    probabilities = np.exp(log_softmax(logits))
    records = []
    for i, text in enumerate(firsts):
        label = int(probabilities[i].argmax())
        record = {"text": text, **({"text_pair": texts[1][i]} if pairs else {}), "label": label}
        if labels is not None:
            record["label_name"] = labels[label]
        record["probabilities"] = probabilities[i].tolist()
        records.append(record)
    return records


def _tag(task, texts, batch_size):
    if task.labels is None:  # no tag names: word-level tag ids
        return [{"text": t, "tags": tags.tolist()} for t, tags in zip(texts, task.predict_tags(texts, batch_size))]
    return [{"text": t, "entities": [{**e, "words": list(e["words"])} for e in entities]}
            for t, entities in zip(texts, task.predict_entities(texts, batch_size=batch_size))]


def _predict_answers(args, task):
    if args.texts or args.file is None:
        raise ValueError(
            "question answering reads --file: JSON lines {\"question\": ..., \"context\": ...} or a SQuAD JSON file."
        )
    examples = _read_questions(args.file)
    step(f"answering {len(examples)} question(s) ...")
    questions = [e["question"] for e in examples]
    # The task's decoding settings (those of its run), under the flags.
    predictions = task.predict_answers((questions, [e["context"] for e in examples]), batch_size=args.batch_size,
                                       max_answer_length=args.max_answer_length,
                                       null_score_threshold=args.null_score_threshold)
    return [{**({"id": e["id"]} if "id" in e else {}), "question": e["question"], "answer": p.text,
             "start": int(p.start), "end": int(p.end), "score": float(p.score)}
            for e, p in zip(examples, predictions)]


def _read_questions(path):
    """[{"question", "context"(, "id")}] from a SQuAD JSON file or JSON lines."""
    from kerasbert.readers import read_squad

    rows = read_lines("--file", path)
    try:
        whole = json.loads("\n".join(line for _, line in rows))
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "data" in whole:
        return [{"id": e.id, "question": e.question, "context": e.context} for e in read_squad(path)]
    examples = []
    for number, line in rows:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"--file {path!r}, line {number}: not JSON ({e}).") from None
        if not (isinstance(row, dict) and isinstance(row.get("question"), str) and isinstance(row.get("context"), str)):
            raise ValueError(
                f"--file {path!r}, line {number}: expected an object with string fields \"question\" and "
                "\"context\" (or a SQuAD JSON file)."
            )
        examples.append(row)
    if not examples:
        raise ValueError(f"--file {path!r} holds no questions.")
    return examples


def add_parser(commands):
    parser = command_parser(
        commands,
        "predict",
        help="run a task preset on texts and print one JSON line per input",
        description="Runs a task preset on texts given as arguments or in --file, and prints one JSON "
        "line per input: TextClassifier {text, label, label_name (when the class names are known), "
        "probabilities} or, for a regressor, {text, score} (with text_pair for --pairs); TokenClassifier "
        "{text, entities: [{type, start, end, text, words}]} (or {text, tags} of tag ids when the task "
        "has no tag names); QuestionAnswerer {question, answer, start, end, score} (and id) for "
        "questions in --file. A TextEmbedder's vectors come from `kerasbert embed`.",
        examples=(
            'kerasbert predict runs/sst2/best "A gem of a film." "Dull and far too long."',
            "kerasbert predict runs/mrpc/best --pairs --file pairs.tsv --output predictions.jsonl",
            "kerasbert predict runs/squad/best --file questions.jsonl",
        ),
    )
    add = parser.add_argument
    add("preset", metavar="PRESET", help="a task preset directory (one with task.json)")
    add("texts", nargs="*", metavar="TEXT",
        help="texts to classify or tag (with --pairs: first second first second ...)")
    add("--file", metavar="PATH",
        help="inputs instead of TEXT: one text per line (blank lines skipped), a tab between the two texts "
        "with --pairs; question answering: JSON lines {\"question\", \"context\"} or a SQuAD JSON file")
    add("--pairs", action="store_true", help="text classifiers: the inputs are sentence pairs")
    add_answer_flags(add)
    add("--batch-size", type=positive_int, default=32, metavar="N", help="inputs per prediction batch (default 32)")
    add("--output", metavar="PATH", help="write the JSON lines to this file (replaced atomically) instead of stdout")
    parser.set_defaults(run=run)
