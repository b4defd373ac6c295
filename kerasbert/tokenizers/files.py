"""Building a tokenizer from the files of a checkpoint or preset directory.

Accepted, in this order of preference (the first is what transformers' fast
tokenizers themselves run from):

- `tokenizer.json` (the `tokenizers` library's format);
- `vocab.json` + `merges.txt` (byte-level BPE: GPT-2, RoBERTa), with flags
  from `tokenizer_config.json`;
- `vocab.txt` (WordPiece) or a SentencePiece model (`spiece.model`: ALBERT;
  `sentencepiece.bpe.model`: XLM-RoBERTa; `spm.model`: DeBERTa-v2/v3), with
  flags from `tokenizer_config.json` or, in a kerasbert preset directory,
  from the `tokenizer` object of `preset.json`.

`special_tokens_map.json` names the special tokens where
`tokenizer_config.json` has no `added_tokens_decoder`, as in transformers.
"""

import functools
import os

from kerasbert.utils.checks import abbreviated, check_file
from kerasbert.utils.io import read_json


def _arguments(*args, **kwargs):
    return args, kwargs


def tokenizer_arguments(directory):
    """The tokenizer the files in `directory` describe, as `(class name,
    (args, kwargs))` for its constructor (`Tokenizer.from_preset` builds
    it)."""
    from kerasbert.utils.preset_files import TOKENIZER_FILES, check_preset_files

    check_preset_files(directory, TOKENIZER_FILES)  # against a kerasbert preset's records

    def path(name):
        return os.path.join(directory, name)

    config = _tokenizer_config(directory)
    if os.path.isfile(path("tokenizer.json")):
        return _from_tokenizer_json(read_json(path("tokenizer.json"), "tokenizer.json"), config)
    if os.path.isfile(path("vocab.json")) and os.path.isfile(path("merges.txt")):
        return _byte_pair(path("vocab.json"), path("merges.txt"), config)
    spec = {}
    if os.path.isfile(path("preset.json")):
        spec = read_json(path("preset.json"), "kerasbert preset file").get("tokenizer", {})
    if os.path.isfile(path("vocab.txt")):
        return _wordpiece(path("vocab.txt"), config, spec)
    for layout, entry in SENTENCEPIECE_LAYOUTS.items():
        if os.path.isfile(path(entry["file"])):
            return _sentencepiece(path(entry["file"]), layout, config, spec)
    found = sorted(os.listdir(directory))[:12]
    models = ", ".join(entry["file"] for entry in SENTENCEPIECE_LAYOUTS.values())
    raise FileNotFoundError(
        f"No tokenizer files in {directory} (found {found}); expected "
        f"tokenizer.json, vocab.txt (WordPiece), a SentencePiece model ({models}) or "
        "vocab.json + merges.txt (byte-level BPE)."
    )


def _tokenizer_config(directory):
    """tokenizer_config.json's entries; where it has no
    `added_tokens_decoder`, special_tokens_map.json's entries over them, as
    transformers reads them."""
    config = {}
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and not (name == "special_tokens_map.json" and "added_tokens_decoder" in config):
            config.update(read_json(path, name))
    return config


def _special_names(config, default):
    """The special-token constructor arguments (`cls_token`, ...,
    `unknown_token`) from tokenizer_config.json's `<kind>_token` entries."""
    names = {}
    for kind, fallback in default.items():
        value = config.get(f"{kind}_token", fallback)
        if isinstance(value, dict):  # serialised AddedToken
            value = value.get("content", fallback)
        names["unknown_token" if kind == "unk" else f"{kind}_token"] = value
    return names


def _lstrip_tokens(config, added_tokens=()):
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


def _special_entries(special):
    """A tokenizer's special tokens as tokenizer_config.json entries."""
    return {f"{kind}_token": token for kind, token in special.items()}


_BERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]", "unk": "[UNK]"}
_ROBERTA_SPECIALS = {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "mask": "<mask>", "unk": "<unk>"}


def _wordpiece(vocab_path, config, spec):
    lowercase = config.get("do_lower_case", spec.get("lowercase", True))
    strip_accents = config.get("strip_accents", spec.get("strip_accents"))
    chinese = config.get("tokenize_chinese_chars", spec.get("tokenize_chinese_chars", True))
    names = _special_names(config, _BERT_SPECIALS)
    return "WordPieceTokenizer", _arguments(
        vocab_path, lowercase=lowercase, strip_accents=strip_accents,
        tokenize_chinese_chars=chinese, **names,
    )


def _component(data, key):
    """A normaliser / pre-tokeniser, unwrapping a one-element Sequence."""
    part = data.get(key)
    if part and part.get("type") == "Sequence":
        inner = part.get("normalizers") or part.get("pretokenizers") or []
        if len(inner) == 1:
            return inner[0]
    return part


def _from_tokenizer_json(data, config):
    model = data.get("model") or {}
    kind = model.get("type")
    if kind == "WordPiece":
        return _wordpiece_from_json(data, model, config)
    if kind == "Unigram":
        return _sentencepiece_from_json(data, model, config)
    if kind == "BPE":
        return _byte_pair_from_json(data, model, config)
    raise ValueError(
        f"tokenizer.json uses a {kind!r} model; kerasbert reads WordPiece (BERT), "
        "Unigram (SentencePiece, ALBERT) and byte-level BPE (RoBERTa, ModernBERT) tokenizer.json files."
    )


def _wordpiece_from_json(data, model, config):
    normalizer = _component(data, "normalizer") or {}
    pre_tokenizer = _component(data, "pre_tokenizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise ValueError(
            f"tokenizer.json has a {normalizer.get('type')!r} normalizer; the "
            "WordPiece tokenizer reproduces BertNormalizer."
        )
    if pre_tokenizer.get("type") != "BertPreTokenizer":
        raise ValueError(
            f"tokenizer.json has a {pre_tokenizer.get('type')!r} pre-tokenizer; "
            "the WordPiece tokenizer reproduces BertPreTokenizer."
        )
    vocab = model["vocab"]
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [i for _, i in ordered] != list(range(len(ordered))):
        raise ValueError("tokenizer.json's WordPiece vocabulary ids are not 0..n-1.")
    names = _special_names(config, _BERT_SPECIALS)
    names["unknown_token"] = model.get("unk_token", names["unknown_token"])
    return "WordPieceTokenizer", _arguments(
        [token for token, _ in ordered],
        lowercase=normalizer.get("lowercase", True),
        strip_accents=normalizer.get("strip_accents"),
        clean_text=normalizer.get("clean_text", True),
        tokenize_chinese_chars=normalizer.get("handle_chinese_chars", True),
        suffix_indicator=model.get("continuing_subword_prefix", "##"),
        max_word_length=model.get("max_input_chars_per_word", 100),
        **names,
    )


def _recorded(write):
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


@_recorded
def write_wordpiece_files(tokenizer, directory):
    """vocab.txt + tokenizer_config.json, loadable by kerasbert and by
    transformers' `AutoTokenizer.from_pretrained`."""
    from kerasbert.utils.io import atomic_file, write_json

    with atomic_file(os.path.join(directory, "vocab.txt")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokenizer.vocabulary))
    special = tokenizer.special_tokens
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": tokenizer.lowercase,
            "strip_accents": tokenizer.strip_accents,
            "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
            **_special_entries(special),
        },
    )
    return directory


# -- SentencePiece (ALBERT, XLM-RoBERTa, DeBERTa-v2/v3) ------------------------------

_ALBERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "<pad>", "mask": "[MASK]", "unk": "<unk>"}

# The SentencePiece tokenizers of transformers: the model file, the tokenizer
# class, the default special tokens and the template (`packing_style`).
SENTENCEPIECE_LAYOUTS = {
    "albert": {"file": "spiece.model", "class": "AlbertTokenizer", "specials": _ALBERT_SPECIALS, "style": "bert"},
    "xlm_roberta": {"file": "sentencepiece.bpe.model", "class": "XLMRobertaTokenizer", "specials": _ROBERTA_SPECIALS,
                    "style": "roberta"},
    "deberta_v2": {"file": "spm.model", "class": "DebertaV2Tokenizer", "specials": _BERT_SPECIALS, "style": "bert"},
}
# The order in which transformers adds the special tokens a model lacks.
_ADDED_ORDER = ("cls", "sep", "unk", "pad", "mask")
_FAIRSEQ_HEAD = ("cls", "pad", "sep", "unk")  # XLM-RoBERTa's ids 0..3


def sentencepiece_vocabulary(pieces, layout, special):
    """A SentencePiece model's `(piece, score)` pairs -> the tokenizer's
    pairs (id = position) and the tokens added after them, as transformers
    numbers them. "xlm_roberta" (fairseq): `<s> <pad> </s> <unk>`, then the
    model's pieces from its fourth on (its own first three are `<unk> <s>
    </s>`), then `<mask>`. Otherwise the model's own ids, followed by the
    special tokens it lacks (DeBERTa's `[MASK]`). `special`: {"cls": token,
    ...} as in `Tokenizer.special_tokens`."""
    if layout == "xlm_roberta":
        return [(special[k], 0.0) for k in _FAIRSEQ_HEAD] + list(pieces[3:]) + [(special["mask"], 0.0)], []
    present = {piece for piece, _ in pieces}
    return list(pieces), [t for t in dict.fromkeys(special[k] for k in _ADDED_ORDER) if t not in present]


def check_sentencepiece_layout(layout, pieces, special):
    """Raises a ValueError unless `pieces` (the tokenizer's, id = position)
    are numbered as `layout` numbers a model's pieces: for "xlm_roberta",
    fairseq's `<s> <pad> </s> <unk>` first and `<mask>` last."""
    if layout == "xlm_roberta":
        head = [special[k] for k in _FAIRSEQ_HEAD]
        if pieces[:len(head)] != head or len(pieces) <= len(head) or pieces[-1] != special["mask"]:
            raise ValueError(
                f"layout='xlm_roberta' numbers the pieces as fairseq does: {head} first and "
                f"{special['mask']!r} last; the vocabulary starts {abbreviated(pieces[:len(head)])} and ends "
                f"{abbreviated(pieces[-1])}. Pass layout='albert' to number them as given."
            )


def _model_pieces(tokenizer):
    """The `(piece, score)` pairs of the SentencePiece model file of
    `tokenizer` (`sentencepiece_vocabulary` undone)."""
    pairs = list(zip(tokenizer.vocabulary, tokenizer.scores))
    if tokenizer.layout == "xlm_roberta":
        special = tokenizer.special_tokens
        return [(special[k], 0.0) for k in ("unk", "cls", "sep")] + pairs[len(_FAIRSEQ_HEAD):-1]
    return pairs


def _sentencepiece_flags(layout, config, spec):
    """The normalisation flags of transformers' tokenizer of `layout`: its
    options from tokenizer_config.json (a kerasbert preset's `tokenizer`
    entry where it is silent): ALBERT's `do_lower_case` and `keep_accents`,
    DeBERTa's `do_lower_case`; XLM-RoBERTa's tokenizer has none."""
    lowercase = config.get("do_lower_case", spec.get("lowercase", layout == "albert"))
    if layout == "albert":
        keep_accents = config.get("keep_accents", spec.get("keep_accents", False))
        return {"lowercase": lowercase, "strip_accents": not keep_accents}
    plain = {"lowercase": False, "strip_accents": False, "replace_quotes": False}
    if layout == "xlm_roberta":
        return plain
    if config.get("split_by_punct", False) or not config.get("add_prefix_space", True):
        raise ValueError(
            f"tokenizer_config.json sets split_by_punct={config.get('split_by_punct')!r}, "
            f"add_prefix_space={config.get('add_prefix_space')!r}; kerasbert reproduces DeBERTa's tokenizer "
            "with split_by_punct=False and add_prefix_space=True (the published models' settings)."
        )
    return {**plain, "lowercase": lowercase, "whitespace_split": False, "strip_trailing_whitespace": True}


def _sentencepiece(model_path, layout, config, spec):
    # transformers' DeBERTa normalises differently (NFC, ...) without a charsmap.
    if layout == "deberta_v2" and not read_sentencepiece_model(model_path)["precompiled_charsmap"]:
        raise ValueError(
            f"{model_path} has no precompiled normalisation (charsmap); kerasbert reproduces DeBERTa's "
            "tokenizer for models that have one (nmt_nfkc, as the published models)."
        )
    names = _special_names(config, SENTENCEPIECE_LAYOUTS[layout]["specials"])
    return "SentencePieceTokenizer", _arguments(
        model_path,
        add_prefix_space=config.get("add_prefix_space", True),
        lstrip_tokens=_lstrip_tokens(config),
        layout=layout,
        **_sentencepiece_flags(layout, config, spec),
        **names,
    )


def _template_style(post_processor):
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


def _template_processor(style, tokenizer):
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


def _sentencepiece_layout(data, config, strips):
    """The layout of a SentencePiece tokenizer.json: the one whose class
    tokenizer_config.json names, else XLM-RoBERTa for a RoBERTa pair
    template (`<s> A </s> </s> B </s>`), DeBERTa for a Strip normaliser
    (`strips`), ALBERT otherwise."""
    named = str(config.get("tokenizer_class") or "").removesuffix("Fast")
    for layout, entry in SENTENCEPIECE_LAYOUTS.items():
        if entry["class"] == named:
            return layout
    post = data.get("post_processor") or {}
    if post.get("type") == "RobertaProcessing" or (_template_style(post) or ("",))[0] == "roberta":
        return "xlm_roberta"
    return "deberta_v2" if strips else "albert"


def _sentencepiece_from_json(data, model, config):
    """transformers' SentencePiece layouts: normalizers among Replace("``"/"''"
    -> '"'), NFKD, StripAccents, Lowercase, Precompiled, Strip (right, after
    Precompiled), Replace(" {2,}" -> " "); pre-tokenizer WhitespaceSplit +
    Metaspace (v5 ALBERT, XLM-RoBERTa) or Metaspace alone (v4 ALBERT,
    DeBERTa)."""
    if model.get("byte_fallback"):
        raise ValueError("tokenizer.json's Unigram model uses byte fallback, which kerasbert does not implement.")
    normalizer = data.get("normalizer") or {}
    steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer] * bool(normalizer)
    flags = {"replace_quotes": False, "strip_accents": False, "lowercase": False, "precompiled_charsmap": None,
             "strip_trailing_whitespace": False}
    collapse_spaces, decomposed = False, False
    for step in steps:
        kind, pattern = step.get("type"), step.get("pattern") or {}
        if kind == "Replace" and pattern.get("String") in ("``", "''") and step.get("content") == '"':
            flags["replace_quotes"] = True
        elif kind == "Replace" and pattern.get("Regex") == " {2,}" and step.get("content") == " ":
            collapse_spaces = True
        elif kind == "NFKD":
            decomposed = True
        elif kind == "StripAccents" and decomposed:
            flags["strip_accents"] = True
        elif kind == "Lowercase":
            flags["lowercase"] = True
        elif kind == "Precompiled" and not flags["strip_trailing_whitespace"]:
            flags["precompiled_charsmap"] = step.get("precompiled_charsmap") or None
        elif kind == "Strip" and not step.get("strip_left") and step.get("strip_right"):
            flags["strip_trailing_whitespace"] = True
        else:
            raise ValueError(
                f"tokenizer.json's normalizer has a {kind} step ({step!r:.80}) kerasbert does not reproduce "
                "there; the SentencePiece tokenizer reproduces, in this order: Replace '``'/\"''\", NFKD + "
                "StripAccents, Lowercase, Precompiled, Strip (right only), Replace ' {2,}'."
            )
    if decomposed != flags["strip_accents"]:
        raise ValueError("tokenizer.json applies NFKD without StripAccents (or the reverse); kerasbert supports them together.")
    pre = data.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre]
    kinds = [p.get("type") for p in parts]
    if kinds not in (["WhitespaceSplit", "Metaspace"], ["Metaspace"]):
        raise ValueError(
            f"tokenizer.json's pre-tokenizer is {kinds}; the SentencePiece tokenizer reproduces "
            "['WhitespaceSplit', 'Metaspace'] and ['Metaspace']."
        )
    metaspace = parts[-1]
    scheme = metaspace.get("prepend_scheme", "always" if metaspace.get("add_prefix_space", True) else "never")
    if metaspace.get("replacement", "\u2581") != "\u2581" or scheme not in ("always", "never"):
        raise ValueError(f"tokenizer.json's Metaspace {metaspace!r} is not supported (replacement '\u2581', prepend 'always' or 'never').")
    whitespace_split = kinds[0] == "WhitespaceSplit"
    if not whitespace_split and not collapse_spaces:
        raise ValueError("tokenizer.json's Metaspace-only pre-tokenizer without the ' {2,}' normalizer is not supported.")
    vocabulary = [(piece, score) for piece, score in model["vocab"]]
    layout = _sentencepiece_layout(data, config, flags["strip_trailing_whitespace"])
    names = _special_names(config, SENTENCEPIECE_LAYOUTS[layout]["specials"])
    unk_id = model.get("unk_id")
    if unk_id is not None:
        names["unknown_token"] = vocabulary[unk_id][0]
    return "SentencePieceTokenizer", _arguments(
        vocabulary,
        add_prefix_space=scheme == "always",
        whitespace_split=whitespace_split,
        split_on_metaspace=metaspace.get("split", True),
        lstrip_tokens=_lstrip_tokens({}, data.get("added_tokens")),
        added_tokens=_tokens_after(data.get("added_tokens"), len(vocabulary)),
        layout=layout,
        **flags,
        **names,
    )


def _tokens_after(added_tokens, size):
    """tokenizer.json's added tokens with ids from `size` on (outside the
    model's vocabulary), in id order; they must be special and numbered
    `size, size + 1, ...`."""
    extra = sorted((t for t in added_tokens or () if t.get("id", -1) >= size), key=lambda t: t["id"])
    if [t["id"] for t in extra] != list(range(size, size + len(extra))) or not all(t.get("special") for t in extra):
        raise ValueError(
            f"tokenizer.json's added tokens beyond the model's {size} pieces are "
            f"{abbreviated([(t.get('id'), t.get('content'), t.get('special')) for t in extra])}; kerasbert reads "
            f"special tokens numbered {size}, {size + 1}, ... there."
        )
    return [t["content"] for t in extra]


def _sentencepiece_config(tokenizer):
    """tokenizer_config.json's flags for transformers' tokenizer of the
    tokenizer's layout (`_sentencepiece_flags` undone)."""
    if tokenizer.layout == "albert":
        return {"do_lower_case": tokenizer.lowercase, "keep_accents": not tokenizer.strip_accents}
    if tokenizer.layout == "deberta_v2":
        return {"do_lower_case": tokenizer.lowercase, "split_by_punct": False}
    return {}


@_recorded
def write_sentencepiece_files(tokenizer, directory):
    """tokenizer.json (the full pipeline), the layout's SentencePiece model
    (`spiece.model`, `sentencepiece.bpe.model` or `spm.model`) and
    tokenizer_config.json, loadable by kerasbert and by transformers.

    transformers builds the pipeline of its tokenizer class from
    tokenizer_config.json's flags, so it reproduces the tokenizer where its
    flags are those the layout's files give (`tokenizer_arguments`)."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    from kerasbert.utils.io import atomic_file, write_json

    layout = SENTENCEPIECE_LAYOUTS[tokenizer.layout]
    special = tokenizer.special_tokens
    unk_id = tokenizer.token_to_id(special["unk"])
    pairs = list(zip(tokenizer.vocabulary, tokenizer.scores))
    charsmap = tokenizer.precompiled_charsmap
    # Special and added tokens in id order: those the model lacks take the ids after it.
    added = sorted(dict.fromkeys([*special.values(), *tokenizer.added_tokens]), key=tokenizer.token_to_id)

    steps = []
    if tokenizer.replace_quotes:
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if tokenizer.strip_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if tokenizer.lowercase:
        steps.append(normalizers.Lowercase())
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    if tokenizer.strip_trailing_whitespace:
        steps.append(normalizers.Strip(left=False, right=True))
    scheme = "always" if tokenizer.add_prefix_space else "never"
    metaspace = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=tokenizer.split_on_metaspace)
    if tokenizer.whitespace_split:
        pre = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace])
    else:
        steps.append(normalizers.Replace(Regex(" {2,}"), " "))
        pre = metaspace
    backend = Tokenizer(models.Unigram(pairs, unk_id=unk_id, byte_fallback=False))
    backend.normalizer = normalizers.Sequence(steps)
    backend.pre_tokenizer = pre
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=scheme)
    backend.add_special_tokens([
        AddedToken(t, special=True, normalized=False, lstrip=t in tokenizer.lstrip_tokens) for t in added
    ])
    backend.post_processor = _template_processor(layout["style"], tokenizer)
    with atomic_file(os.path.join(directory, "tokenizer.json")) as tmp:
        backend.save(tmp)

    proto = sentencepiece_model_pb2.ModelProto()
    kinds = {special["unk"]: proto.SentencePiece.UNKNOWN}
    kinds.update({special[k]: proto.SentencePiece.CONTROL for k in ("cls", "sep", "pad", "mask")})
    pieces = _model_pieces(tokenizer)
    for piece, score in pieces:
        proto.pieces.add(piece=piece, score=score, type=kinds.get(piece, proto.SentencePiece.NORMAL))
    proto.trainer_spec.model_type = proto.trainer_spec.UNIGRAM
    proto.trainer_spec.unk_id = [piece for piece, _ in pieces].index(special["unk"])
    proto.trainer_spec.unk_piece = special["unk"]
    proto.normalizer_spec.name = "precompiled" if charsmap else "identity"
    if charsmap:
        proto.normalizer_spec.precompiled_charsmap = charsmap
    with atomic_file(os.path.join(directory, layout["file"])) as tmp, open(tmp, "wb") as f:
        f.write(proto.SerializeToString())

    decoder = {str(tokenizer.token_to_id(t)): _added_token_entry(t, t in tokenizer.lstrip_tokens) for t in added}
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": layout["class"],
            **_sentencepiece_config(tokenizer),
            "add_prefix_space": tokenizer.add_prefix_space,
            **_special_entries(special),
            "bos_token": special["cls"], "eos_token": special["sep"],
            "added_tokens_decoder": decoder,
        },
    )
    return directory


# -- Byte-level BPE (GPT-2, RoBERTa) ----------------------------------------------


def _byte_pair(vocab_path, merges_path, config):
    names = _special_names(config, _ROBERTA_SPECIALS)
    return "BytePairTokenizer", _arguments(
        vocab_path, merges_path,
        add_prefix_space=config.get("add_prefix_space", False),
        trim_offsets=config.get("trim_offsets", True),
        mask_token_lstrip=names["mask_token"] in _lstrip_tokens(config),
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


def _byte_pair_from_json(data, model, config):
    normalizer = _component(data, "normalizer") or {}
    pre_tokenizer = _component(data, "pre_tokenizer") or {}
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
    templates = [_template_style(step) for step in steps if step.get("type") == "TemplateProcessing"]
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
    defaults = _BERT_SPECIALS if style == "bert" else _ROBERTA_SPECIALS
    names = _special_names(config, {**defaults, **({"cls": cls, "sep": sep} if cls else {})})
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
    return "BytePairTokenizer", _arguments(
        vocabulary, merges,
        add_prefix_space=pre_tokenizer.get("add_prefix_space", False),
        # Only a ByteLevel or RoBERTa post-processor trims offsets.
        trim_offsets=any(step.get("trim_offsets", True) for step in trimming),
        mask_token_lstrip=names["mask_token"] in _lstrip_tokens({}, added),
        added_tokens=list(dict.fromkeys(t["content"] for t in extra if t["content"] not in normalized)),
        normalized_tokens=list(dict.fromkeys(normalized)),
        normalization="NFC" if normalizer else None,
        packing_style=style,
        **names,
    )


def _added_token_entry(content, lstrip=False, normalized=False):
    """A tokenizer_config.json `added_tokens_decoder` entry."""
    return {"content": content, "lstrip": lstrip, "rstrip": False, "normalized": normalized,
            "single_word": False, "special": not normalized}


@_recorded
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
    mask = {"__type": "AddedToken", **_added_token_entry(special["mask"], tokenizer.mask_token_lstrip)}
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "RobertaTokenizer",
            "add_prefix_space": tokenizer.add_prefix_space,
            "trim_offsets": tokenizer.trim_offsets,
            "clean_up_tokenization_spaces": False,
            "errors": "replace",
            "bos_token": special["cls"], "eos_token": special["sep"],
            **_special_entries(special),
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
    template = _template_processor(tokenizer.packing_style, tokenizer)
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
            **_special_entries(special),
            "added_tokens_decoder": {
                str(tokenizer.token_to_id(t)): _added_token_entry(t, t in lstrip, t in normalized) for t in added
            },
        },
    )
    return directory


def read_sentencepiece_model(path):
    """A SentencePiece unigram model file (`spiece.model`, ...) ->
    {"vocabulary": [(piece, score)], "precompiled_charsmap": bytes or None,
    "unk_id"}. Models with byte fallback are refused."""
    from google.protobuf.message import DecodeError
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    path = check_file("path", path, "a SentencePiece model")
    with open(path, "rb") as f:
        data = f.read()
    try:
        model.ParseFromString(data)
    except DecodeError as error:
        raise ValueError(f"{path} is not a SentencePiece model file ({error}).") from None
    if not model.pieces:
        raise ValueError(f"{path} is not a SentencePiece model file (no pieces).")
    if model.trainer_spec.model_type not in (0, 1):  # UNIGRAM (0 = unset)
        kind = sentencepiece_model_pb2.TrainerSpec.ModelType.Name(model.trainer_spec.model_type)
        raise ValueError(
            f"{path} is a SentencePiece {kind} model; kerasbert reads unigram models (ALBERT, XLM-RoBERTa, DeBERTa)."
        )
    if model.trainer_spec.byte_fallback:
        raise ValueError(f"{path} uses byte fallback, which kerasbert's SentencePiece tokenizer does not implement.")
    return {
        "vocabulary": [(p.piece, p.score) for p in model.pieces],
        "precompiled_charsmap": model.normalizer_spec.precompiled_charsmap or None,
        "unk_id": model.trainer_spec.unk_id,
    }
