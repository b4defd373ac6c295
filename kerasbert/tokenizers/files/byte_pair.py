"""Byte-level BPE's files (GPT-2, RoBERTa, ModernBERT): vocab.json +
merges.txt, or tokenizer.json's BPE model."""

import os

from kerasbert.tokenizers.files.common import (
    BERT_SPECIALS,
    ROBERTA_SPECIALS,
    added_token_entry,
    component,
    constructor_arguments,
    lstripped_tokens,
    recorded,
    special_entries,
    special_names,
    template_processor,
    template_style,
)
from kerasbert.utils.checks import abbreviated


def byte_pair_arguments(vocab_path, merges_path, config):
    names = special_names(config, ROBERTA_SPECIALS)
    return "BytePairTokenizer", constructor_arguments(
        vocab_path, merges_path,
        add_prefix_space=config.get("add_prefix_space", False),
        trim_offsets=config.get("trim_offsets", True),
        mask_token_lstrip=names["mask_token"] in lstripped_tokens(config),
        **names,
    )


def _post_processors(data):
    """tokenizer.json's post-processors, a Sequence unpacked."""
    post = data.get("post_processor") or {}
    return list(post.get("processors") or ()) if post.get("type") == "Sequence" else [post] * bool(post)


def _added_token_ids(vocabulary, added_tokens):
    """{content: id} of tokenizer.json's added tokens as `tokenizers` numbers
    them: a token already numbered (added before, or in the model's
    vocabulary) keeps its id, each other takes the next id after the model's
    vocabulary and the added tokens before it."""
    ids = {}
    for token in added_tokens:
        content = token["content"]
        if content not in ids and content in vocabulary:
            ids[content] = vocabulary[content]
        elif content not in ids:
            top = max(ids.values(), default=-1)
            ids[content] = top + 1 if top >= len(vocabulary) or not vocabulary else len(vocabulary)
    return ids


def byte_pair_json_arguments(data, model, config):
    normalizer = component(data, "normalizer") or {}
    pre_tokenizer = component(data, "pre_tokenizer") or {}
    steps = _post_processors(data)
    problems = []
    if normalizer and normalizer.get("type") != "NFC":
        problems.append(f"a {normalizer.get('type')!r} normalizer (not NFC)")
    if pre_tokenizer.get("type") != "ByteLevel" or not pre_tokenizer.get("use_regex", True):
        problems.append(f"a {pre_tokenizer.get('type')!r} pre-tokenizer (not ByteLevel with GPT-2's regex)")
    for key, plain in [("dropout", None), ("continuing_subword_prefix", ""), ("end_of_word_suffix", ""),
                       ("byte_fallback", False), ("ignore_merges", False)]:
        if (model.get(key) or plain) != plain:
            problems.append(f"BPE {key}={model.get(key)!r}")
    templates = [template_style(step) for step in steps if step.get("type") == "TemplateProcessing"]
    if None in templates or any(step.get("type") not in ("TemplateProcessing", "ByteLevel", "RobertaProcessing")
                                for step in steps):
        problems.append(f"the post-processor {abbreviated(data.get('post_processor'), 200)} (kerasbert packs "
                        "`[CLS] A [SEP] B [SEP]` or `<s> A </s></s> B </s>`)")
    added = [t for t in data.get("added_tokens") or () if isinstance(t, dict) and isinstance(t.get("content"), str)]
    if problems:
        raise ValueError(
            "tokenizer.json holds a BPE model kerasbert does not reproduce: "
            + "; ".join(problems) + ". kerasbert reads byte-level BPE (GPT-2, RoBERTa, ModernBERT) files."
        )
    style, cls, sep = templates[0] if templates else ("roberta", None, None)
    defaults = BERT_SPECIALS if style == "bert" else ROBERTA_SPECIALS
    names = special_names(config, {**defaults, **({"cls": cls, "sep": sep} if cls else {})})
    if model.get("unk_token"):
        names["unknown_token"] = model["unk_token"]
    vocabulary = dict(model["vocab"])
    ids = _added_token_ids(vocabulary, added)
    vocabulary.update({content: i for content, i in ids.items() if content not in vocabulary})
    stripping = [t["content"] for t in added if t.get("rstrip") or t.get("single_word")
                 or t.get("lstrip") and t["content"] != names["mask_token"]]
    if stripping:
        raise ValueError(
            f"tokenizer.json's added tokens {abbreviated(stripping)} have rstrip, single_word or lstrip set; "
            f"kerasbert reproduces lstrip on the mask token ({names['mask_token']!r}) only."
        )
    special = set(names.values())
    extra = sorted((t for t in added if t["content"] not in special), key=lambda t: ids[t["content"]])
    normalized = [t["content"] for t in extra if t.get("normalized", not t.get("special", False))]
    trimming = [step for step in steps if step.get("type") != "TemplateProcessing"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return "BytePairTokenizer", constructor_arguments(
        vocabulary, merges,
        add_prefix_space=pre_tokenizer.get("add_prefix_space", False),
        # Only a ByteLevel or RoBERTa post-processor trims offsets.
        trim_offsets=any(step.get("trim_offsets", True) for step in trimming),
        mask_token_lstrip=names["mask_token"] in lstripped_tokens({}, added),
        added_tokens=list(dict.fromkeys(t["content"] for t in extra if t["content"] not in normalized)),
        normalized_tokens=list(dict.fromkeys(normalized)),
        normalization="NFC" if normalizer else None,
        packing_style=style,
        **names,
    )


@recorded
def write_byte_pair_files(tokenizer, directory):
    """RoBERTa's files (vocab.json + merges.txt + tokenizer_config.json) for
    a tokenizer they describe; else (NFC, added tokens, BERT's packing:
    ModernBERT) tokenizer.json + tokenizer_config.json. Both load in kerasbert
    and in transformers' `AutoTokenizer.from_pretrained`."""
    import json

    from kerasbert.utils.io import atomic_file, write_json

    special = tokenizer.special_tokens
    if (tokenizer.packing_style, tokenizer.normalization, tokenizer.added_tokens,
            tokenizer.normalized_tokens) != ("roberta", None, [], []):
        return _write_byte_pair_json(tokenizer, directory)
    with atomic_file(os.path.join(directory, "vocab.json")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump({token: i for i, token in enumerate(tokenizer.vocabulary)}, f, ensure_ascii=False)
    with atomic_file(os.path.join(directory, "merges.txt")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(merge + "\n" for merge in tokenizer.merges))
    mask = {"__type": "AddedToken", **added_token_entry(special["mask"], tokenizer.mask_token_lstrip)}
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "RobertaTokenizer",
            "add_prefix_space": tokenizer.add_prefix_space,
            "trim_offsets": tokenizer.trim_offsets,
            "clean_up_tokenization_spaces": False,
            "errors": "replace",
            "bos_token": special["cls"], "eos_token": special["sep"],
            **special_entries(special),
            "mask_token": mask,
        },
    )
    return directory


def _write_byte_pair_json(tokenizer, directory):
    """tokenizer.json (the whole pipeline) + tokenizer_config.json. The BPE
    model's vocabulary is the tokens before the added ones that end the
    vocabulary; the added tokens follow in id order, so that `tokenizers`
    gives them the same ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    from kerasbert.utils.io import atomic_file, write_json

    special = tokenizer.special_tokens
    normalized = set(tokenizer.normalized_tokens)
    added = sorted({*special.values(), *tokenizer.added_tokens, *normalized}, key=tokenizer.token_to_id)
    size = len(tokenizer.vocabulary)
    while size and tokenizer.vocabulary[size - 1] in added:
        size -= 1
    backend = Tokenizer(models.BPE(
        {token: i for i, token in enumerate(tokenizer.vocabulary[:size])},
        [tuple(merge.split(" ")) for merge in tokenizer.merges],
        continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False, byte_fallback=False,
    ))
    if tokenizer.normalization == "NFC":
        backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=tokenizer.add_prefix_space, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    lstrip = {special["mask"]} if tokenizer.mask_token_lstrip else set()
    for token in added:
        entry = AddedToken(token, lstrip=token in lstrip, normalized=token in normalized, special=token not in normalized)
        (backend.add_tokens if token in normalized else backend.add_special_tokens)([entry])
    template = template_processor(tokenizer.packing_style, tokenizer)
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=tokenizer.add_prefix_space, trim_offsets=True, use_regex=True), template,
    ]) if tokenizer.trim_offsets else template
    with atomic_file(os.path.join(directory, "tokenizer.json")) as tmp:
        backend.save(tmp)
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "clean_up_tokenization_spaces": False,
            **special_entries(special),
            "added_tokens_decoder": {
                str(tokenizer.token_to_id(t)): added_token_entry(t, t in lstrip, t in normalized) for t in added
            },
        },
    )
    return directory
