"""Building a tokenizer from the files of a checkpoint or preset directory.

Accepted, in this order of preference (the first is what transformers' fast
tokenizers themselves run from):

- `tokenizer.json` (the `tokenizers` library's format);
- `vocab.json` + `merges.txt` (byte-level BPE: GPT-2, RoBERTa), with flags
  from `tokenizer_config.json`;
- `vocab.txt` (WordPiece) or `spiece.model` (SentencePiece), with flags from
  `tokenizer_config.json` or, in a kerasbert preset directory, from the
  `tokenizer` object of `preset.json`.
"""

import functools
import os

from kerasbert.utils.checks import check_file
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

    config = read_json(path("tokenizer_config.json"), "tokenizer_config.json") if os.path.isfile(
        path("tokenizer_config.json")) else {}
    if os.path.isfile(path("tokenizer.json")):
        return _from_tokenizer_json(read_json(path("tokenizer.json"), "tokenizer.json"), config)
    if os.path.isfile(path("vocab.json")) and os.path.isfile(path("merges.txt")):
        return _byte_pair(path("vocab.json"), path("merges.txt"), config)
    spec = {}
    if os.path.isfile(path("preset.json")):
        spec = read_json(path("preset.json"), "kerasbert preset file").get("tokenizer", {})
    if os.path.isfile(path("vocab.txt")):
        return _wordpiece(path("vocab.txt"), config, spec)
    if os.path.isfile(path("spiece.model")):
        return _sentencepiece(path("spiece.model"), config, spec)
    found = sorted(os.listdir(directory))[:12]
    raise FileNotFoundError(
        f"No tokenizer files in {directory} (found {found}); expected "
        "tokenizer.json, vocab.txt (WordPiece), spiece.model (SentencePiece) or "
        "vocab.json + merges.txt (byte-level BPE)."
    )


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


def _special_entries(special):
    """A tokenizer's special tokens as tokenizer_config.json entries."""
    return {f"{kind}_token": token for kind, token in special.items()}


_BERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]", "unk": "[UNK]"}


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
        "Unigram (SentencePiece, ALBERT) and byte-level BPE (RoBERTa) tokenizer.json files."
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


# -- SentencePiece (ALBERT) ------------------------------------------------------

_ALBERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "<pad>", "mask": "[MASK]", "unk": "<unk>"}


def _lstrip_tokens(added_tokens):
    """Special tokens flagged lstrip, from tokenizer.json's `added_tokens` or
    tokenizer_config.json's `added_tokens_decoder`."""
    if isinstance(added_tokens, dict):
        added_tokens = list(added_tokens.values())
    return [t["content"] for t in added_tokens or () if isinstance(t, dict) and t.get("lstrip")]


def _sentencepiece(model_path, config, spec):
    model = read_sentencepiece_model(model_path)
    if model["byte_fallback"]:
        raise ValueError(f"{model_path} uses byte fallback, which kerasbert's SentencePiece tokenizer does not implement.")
    keep_accents = config.get("keep_accents", spec.get("keep_accents", False))
    return "SentencePieceTokenizer", _arguments(
        model["vocabulary"],
        precompiled_charsmap=model["precompiled_charsmap"],
        lowercase=config.get("do_lower_case", spec.get("lowercase", True)),
        strip_accents=not keep_accents,
        add_prefix_space=config.get("add_prefix_space", True),
        lstrip_tokens=_lstrip_tokens(config.get("added_tokens_decoder")),
        **_special_names(config, _ALBERT_SPECIALS),
    )


def _sentencepiece_from_json(data, model, config):
    """transformers' ALBERT layouts: normalizers among Replace("``"/"''" ->
    '"'), NFKD, StripAccents, Lowercase, Precompiled, Replace(" {2,}" -> " ");
    pre-tokenizer WhitespaceSplit + Metaspace (v5) or Metaspace alone (v4)."""
    if model.get("byte_fallback"):
        raise ValueError("tokenizer.json's Unigram model uses byte fallback, which kerasbert does not implement.")
    normalizer = data.get("normalizer") or {}
    steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" else [normalizer] * bool(normalizer)
    flags = {"replace_quotes": False, "strip_accents": False, "lowercase": False, "precompiled_charsmap": None}
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
        elif kind == "Precompiled":
            flags["precompiled_charsmap"] = step.get("precompiled_charsmap") or None
        else:
            raise ValueError(
                f"tokenizer.json's normalizer has a {kind} step ({step!r:.80}); the SentencePiece "
                "tokenizer reproduces ALBERT's: Replace '``'/\"''\", NFKD + StripAccents, "
                "Lowercase, Precompiled, Replace ' {2,}'."
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
    names = _special_names(config, _ALBERT_SPECIALS)
    unk_id = model.get("unk_id")
    if unk_id is not None:
        names["unknown_token"] = vocabulary[unk_id][0]
    return "SentencePieceTokenizer", _arguments(
        vocabulary,
        add_prefix_space=scheme == "always",
        whitespace_split=whitespace_split,
        split_on_metaspace=metaspace.get("split", True),
        lstrip_tokens=_lstrip_tokens(data.get("added_tokens")),
        **flags,
        **names,
    )


@_recorded
def write_sentencepiece_files(tokenizer, directory):
    """tokenizer.json (the full pipeline), spiece.model and
    tokenizer_config.json, loadable by kerasbert and by transformers."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    from kerasbert.utils.io import atomic_file, write_json

    special = tokenizer.special_tokens
    unk_id = tokenizer.token_to_id(special["unk"])
    pairs = list(zip(tokenizer.vocabulary, tokenizer.scores))
    charsmap = tokenizer.precompiled_charsmap

    steps = []
    if tokenizer.replace_quotes:
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if tokenizer.strip_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if tokenizer.lowercase:
        steps.append(normalizers.Lowercase())
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
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
        AddedToken(t, special=True, normalized=False, lstrip=t in tokenizer.lstrip_tokens)
        for t in dict.fromkeys([special["pad"], special["unk"], special["cls"], special["sep"], special["mask"]])
    ])
    cls_id, sep_id = tokenizer.token_to_id(special["cls"]), tokenizer.token_to_id(special["sep"])
    backend.post_processor = processors.TemplateProcessing(
        single=f"{special['cls']}:0 $A:0 {special['sep']}:0",
        pair=f"{special['cls']}:0 $A:0 {special['sep']}:0 $B:1 {special['sep']}:1",
        special_tokens=[(special["cls"], cls_id), (special["sep"], sep_id)],
    )
    with atomic_file(os.path.join(directory, "tokenizer.json")) as tmp:
        backend.save(tmp)

    proto = sentencepiece_model_pb2.ModelProto()
    kinds = {special["unk"]: proto.SentencePiece.UNKNOWN}
    kinds.update({special[k]: proto.SentencePiece.CONTROL for k in ("cls", "sep", "pad", "mask")})
    for piece, score in pairs:
        proto.pieces.add(piece=piece, score=score, type=kinds.get(piece, proto.SentencePiece.NORMAL))
    proto.trainer_spec.model_type = proto.trainer_spec.UNIGRAM
    proto.trainer_spec.unk_id = unk_id
    proto.trainer_spec.unk_piece = special["unk"]
    proto.normalizer_spec.name = "precompiled" if charsmap else "identity"
    if charsmap:
        proto.normalizer_spec.precompiled_charsmap = charsmap
    with atomic_file(os.path.join(directory, "spiece.model")) as tmp, open(tmp, "wb") as f:
        f.write(proto.SerializeToString())

    added = {
        str(tokenizer.token_to_id(t)): {
            "content": t, "lstrip": t in tokenizer.lstrip_tokens, "rstrip": False,
            "normalized": False, "single_word": False, "special": True,
        }
        for t in dict.fromkeys(special.values())
    }
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": "AlbertTokenizer",
            "do_lower_case": tokenizer.lowercase,
            "keep_accents": not tokenizer.strip_accents,
            "add_prefix_space": tokenizer.add_prefix_space,
            **_special_entries(special),
            "bos_token": special["cls"], "eos_token": special["sep"],
            "added_tokens_decoder": added,
        },
    )
    return directory


# -- Byte-level BPE (GPT-2, RoBERTa) ----------------------------------------------

_ROBERTA_SPECIALS = {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "mask": "<mask>", "unk": "<unk>"}


def _mask_lstrip(config, added_tokens, mask_token):
    """Whether the mask token swallows the whitespace on its left, as
    transformers v5 decides it: an AddedToken with lstrip in
    tokenizer_config.json or in tokenizer.json's added tokens; a plain
    string does not."""
    if isinstance(config.get("mask_token"), dict):
        return bool(config["mask_token"].get("lstrip", False))
    listed = list(added_tokens or ()) + list((config.get("added_tokens_decoder") or {}).values())
    return any(isinstance(t, dict) and t.get("content") == mask_token and t.get("lstrip") for t in listed)


def _byte_pair(vocab_path, merges_path, config):
    names = _special_names(config, _ROBERTA_SPECIALS)
    return "BytePairTokenizer", _arguments(
        vocab_path, merges_path,
        add_prefix_space=config.get("add_prefix_space", False),
        trim_offsets=config.get("trim_offsets", True),
        mask_token_lstrip=_mask_lstrip(config, (), names["mask_token"]),
        **names,
    )


def _byte_pair_from_json(data, model, config):
    pre_tokenizer = _component(data, "pre_tokenizer") or {}
    post_processor = data.get("post_processor") or {}
    problems = []
    if data.get("normalizer"):
        problems.append(f"a {data['normalizer'].get('type')!r} normalizer")
    if pre_tokenizer.get("type") != "ByteLevel" or not pre_tokenizer.get("use_regex", True):
        problems.append(f"a {pre_tokenizer.get('type')!r} pre-tokenizer (not ByteLevel with GPT-2's regex)")
    for key, plain in [("dropout", None), ("continuing_subword_prefix", ""), ("end_of_word_suffix", ""),
                       ("byte_fallback", False), ("ignore_merges", False)]:
        if (model.get(key) or plain) != plain:
            problems.append(f"BPE {key}={model.get(key)!r}")
    if problems:
        raise ValueError(
            "tokenizer.json holds a BPE model kerasbert does not reproduce: "
            + "; ".join(problems) + ". kerasbert reads byte-level BPE (GPT-2, RoBERTa) files."
        )
    names = _special_names(config, _ROBERTA_SPECIALS)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return "BytePairTokenizer", _arguments(
        model["vocab"], merges,
        add_prefix_space=pre_tokenizer.get("add_prefix_space", False),
        trim_offsets=post_processor.get("trim_offsets", pre_tokenizer.get("trim_offsets", True)),
        mask_token_lstrip=_mask_lstrip({}, data.get("added_tokens"), names["mask_token"]),
        **names,
    )


@_recorded
def write_byte_pair_files(tokenizer, directory):
    """vocab.json + merges.txt + tokenizer_config.json, loadable by kerasbert
    and by transformers' `AutoTokenizer.from_pretrained` (as RoBERTa)."""
    import json

    from kerasbert.utils.io import atomic_file, write_json

    with atomic_file(os.path.join(directory, "vocab.json")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump({token: i for i, token in enumerate(tokenizer.vocabulary)}, f, ensure_ascii=False)
    with atomic_file(os.path.join(directory, "merges.txt")) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(merge + "\n" for merge in tokenizer.merges))
    special = tokenizer.special_tokens
    mask = {
        "__type": "AddedToken", "content": special["mask"], "lstrip": tokenizer.mask_token_lstrip,
        "rstrip": False, "normalized": False, "single_word": False, "special": True,
    }
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


def read_sentencepiece_model(path):
    """A `spiece.model` file -> {"vocabulary": [(piece, score)],
    "precompiled_charsmap": bytes, "unk_id", "byte_fallback", ...}."""
    from google.protobuf.message import DecodeError
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    path = check_file("path", path, "a spiece.model")
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
        raise ValueError(f"{path} is a SentencePiece {kind} model; kerasbert reads unigram models (ALBERT).")
    return {
        "vocabulary": [(p.piece, p.score) for p in model.pieces],
        "precompiled_charsmap": model.normalizer_spec.precompiled_charsmap or None,
        "unk_id": model.trainer_spec.unk_id,
        "byte_fallback": model.trainer_spec.byte_fallback,
    }
