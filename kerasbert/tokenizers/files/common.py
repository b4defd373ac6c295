"""What the readers and writers of the three tokenizer kinds share: the
special tokens of tokenizer_config.json, tokenizer.json's components and
templates, and the writer that records a preset directory's files."""

import functools


def constructor_arguments(*args, **kwargs):
    return args, kwargs


def special_names(config, default):
    """The special-token constructor arguments (`cls_token`, ...,
    `unknown_token`) from tokenizer_config.json's `<kind>_token` entries."""
    names = {}
    for kind, fallback in default.items():
        value = config.get(f"{kind}_token", fallback)
        if isinstance(value, dict):  # serialised AddedToken
            value = value.get("content", fallback)
        names["unknown_token" if kind == "unk" else f"{kind}_token"] = value
    return names


def lstripped_tokens(config, added_tokens=()):
    """Special tokens that swallow the whitespace on their left, as
    transformers v5 decides it: a `<kind>_token` entry of `config` written as
    an AddedToken gives its own lstrip; otherwise a token flagged lstrip in
    `added_tokens` (tokenizer.json's) or in `config`'s `added_tokens_decoder`.
    A plain string does not."""
    listed = list(added_tokens or ()) + list((config.get("added_tokens_decoder") or {}).values())
    tokens = {t["content"] for t in listed if isinstance(t, dict) and t.get("lstrip") and "content" in t}
    for key, entry in config.items():
        if key.endswith("_token") and isinstance(entry, dict) and "content" in entry:
            (tokens.add if entry.get("lstrip") else tokens.discard)(entry["content"])
    return sorted(tokens)


def special_entries(special):
    """A tokenizer's special tokens as tokenizer_config.json entries."""
    return {f"{kind}_token": token for kind, token in special.items()}


BERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]", "unk": "[UNK]"}
ROBERTA_SPECIALS = {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "mask": "<mask>", "unk": "<unk>"}


def component(data, key):
    """A normaliser / pre-tokeniser, unwrapping a one-element Sequence."""
    part = data.get(key)
    if part and part.get("type") == "Sequence":
        inner = part.get("normalizers") or part.get("pretokenizers") or []
        if len(inner) == 1:
            return inner[0]
    return part


def template_style(post_processor):
    """The packing style of a TemplateProcessing post-processor's pair
    template with its special tokens: ("roberta", cls, sep) for `cls A sep
    sep B sep`, ("bert", cls, sep) for `cls A sep B sep`; None for other
    templates."""
    items = [next(iter(item.items())) for item in (post_processor or {}).get("pair") or ()
             if isinstance(item, dict) and len(item) == 1]
    kinds = [kind if kind == "SpecialToken" else (value or {}).get("id") for kind, value in items]
    specials = [(value or {}).get("id") for kind, value in items if kind == "SpecialToken"]
    shapes = {"roberta": ["SpecialToken", "A", "SpecialToken", "SpecialToken", "B", "SpecialToken"],
              "bert": ["SpecialToken", "A", "SpecialToken", "B", "SpecialToken"]}
    for style, shape in shapes.items():
        if kinds == shape and len(set(specials[1:])) == 1:
            return style, specials[0], specials[1]
    return None


def template_processor(style, tokenizer):
    """A `tokenizers` TemplateProcessing adding the tokenizer's special tokens
    in `style` ("roberta": `<s> A </s> </s> B </s>`, all type 0; "bert":
    `[CLS] A [SEP] B [SEP]`, B's part of type 1)."""
    from tokenizers import processors

    cls, sep = tokenizer.special_tokens["cls"], tokenizer.special_tokens["sep"]
    if style == "roberta":
        single, pair = f"{cls} $A {sep}", f"{cls} $A {sep} {sep} $B {sep}"
    else:
        single, pair = f"{cls}:0 $A:0 {sep}:0", f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1"
    return processors.TemplateProcessing(
        single=single, pair=pair,
        special_tokens=[(cls, tokenizer.token_to_id(cls)), (sep, tokenizer.token_to_id(sep))],
    )


def added_token_entry(content, lstrip=False, normalized=False):
    """A tokenizer_config.json `added_tokens_decoder` entry."""
    return {"content": content, "lstrip": lstrip, "rstrip": False, "normalized": normalized,
            "single_word": False, "special": not normalized}


def recorded(write):
    """A tokenizer writer that replaces `directory` as a whole, keeping
    other files, and refreshes the file records of a kerasbert preset
    directory it writes into."""

    @functools.wraps(write)
    def write_and_record(tokenizer, directory):
        from kerasbert.utils.io import updating_directory
        from kerasbert.utils.preset_files import record_preset_files

        with updating_directory(directory) as staged:
            write(tokenizer, staged)
            record_preset_files(staged)
        return directory

    return write_and_record
