"""SentencePiece's files (ALBERT, XLM-RoBERTa, DeBERTa-v2/v3): the model file
of each layout, or tokenizer.json's Unigram model, and the vocabulary as
transformers numbers it."""

import base64
import math
import os

from kerasbert.tokenizers.files.common import (
    BERT_SPECIALS,
    ROBERTA_SPECIALS,
    added_token_entry,
    constructor_arguments,
    lstripped_tokens,
    recorded,
    special_entries,
    special_names,
    template_processor,
    template_style,
)
from kerasbert.utils.checks import abbreviated, check_file, check_number, check_string

_ALBERT_SPECIALS = {"cls": "[CLS]", "sep": "[SEP]", "pad": "<pad>", "mask": "[MASK]", "unk": "<unk>"}


# The SentencePiece tokenizers of transformers: the model file, the tokenizer
# class, the default special tokens and the template (`packing_style`).
SENTENCEPIECE_LAYOUTS = {
    "albert": {"file": "spiece.model", "class": "AlbertTokenizer", "specials": _ALBERT_SPECIALS, "style": "bert"},
    "xlm_roberta": {"file": "sentencepiece.bpe.model", "class": "XLMRobertaTokenizer", "specials": ROBERTA_SPECIALS,
                    "style": "roberta"},
    "deberta_v2": {"file": "spm.model", "class": "DebertaV2Tokenizer", "specials": BERT_SPECIALS, "style": "bert"},
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


def read_vocabulary(vocabulary, layout, special, added_tokens=None, precompiled_charsmap=None):
    """`SentencePieceTokenizer`'s vocabulary arguments, checked -> (pieces,
    scores, added tokens, charsmap bytes or None). `vocabulary` is a model
    file (numbered as `layout` numbers it: `sentencepiece_vocabulary`; its
    charsmap and the special tokens it lacks taken where not given) or
    `(piece, score)` pairs already so numbered."""
    if isinstance(vocabulary, (str, os.PathLike)):
        model = read_sentencepiece_model(check_file("vocabulary", vocabulary, "a SentencePiece model"))
        vocabulary, missing = sentencepiece_vocabulary(model["vocabulary"], layout, special)
        added_tokens = missing if added_tokens is None else added_tokens
        if precompiled_charsmap is None:
            precompiled_charsmap = model["precompiled_charsmap"]
    pieces, scores = _read_pieces(vocabulary)
    check_sentencepiece_layout(layout, pieces, special)
    added_tokens = _read_added_tokens([] if added_tokens is None else added_tokens, pieces)
    return pieces, scores, added_tokens, _decode_charsmap(precompiled_charsmap)


def _read_pieces(vocabulary):
    """(piece, score) pairs -> (pieces, scores)."""
    if isinstance(vocabulary, (bytes, bytearray)) or not isinstance(vocabulary, (list, tuple)):
        raise TypeError(
            "vocabulary must be a SentencePiece model path or a list of (piece, score) pairs; "
            f"got {abbreviated(vocabulary)}."
        )
    pieces, scores = [], []
    for i, entry in enumerate(vocabulary):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str)):
            raise TypeError(
                f"vocabulary must be a SentencePiece model path or a list of (piece, score) pairs; "
                f"vocabulary[{i}] is {abbreviated(entry, 60)}."
            )
        pieces.append(entry[0])
        scores.append(check_number(f"the score of vocabulary[{i}] ({entry[0]!r})", entry[1], -math.inf, math.inf))
    if not pieces:
        raise ValueError("vocabulary is empty; give at least the special tokens' pieces.")
    return pieces, scores


def _read_added_tokens(added_tokens, pieces):
    """Tokens numbered after the pieces: a list of strings, none a piece."""
    if isinstance(added_tokens, str) or not isinstance(added_tokens, (list, tuple)):
        raise TypeError(f"added_tokens must be a list of token strings; got {abbreviated(added_tokens)}.")
    known = set(pieces)
    for i, token in enumerate(added_tokens):
        if check_string(f"added_tokens[{i}]", token) in known:
            raise ValueError(
                f"added_tokens[{i}]={token!r} is a piece of the vocabulary already; added tokens are "
                "the special tokens outside the model's pieces (DeBERTa's [MASK])."
            )
    return list(added_tokens)


def _decode_charsmap(charsmap):
    if charsmap is None or isinstance(charsmap, bytes):
        return charsmap
    if isinstance(charsmap, str):
        try:
            return base64.b64decode(charsmap, validate=True)
        except ValueError:
            raise ValueError(f"precompiled_charsmap={abbreviated(charsmap)} is not valid base64.") from None
    raise TypeError(f"precompiled_charsmap must be bytes, a base64 string or None; got {abbreviated(charsmap)}.")


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


def sentencepiece_arguments(model_path, layout, config, spec):
    # transformers' DeBERTa normalises differently (NFC, ...) without a charsmap.
    if layout == "deberta_v2" and not read_sentencepiece_model(model_path)["precompiled_charsmap"]:
        raise ValueError(
            f"{model_path} has no precompiled normalisation (charsmap); kerasbert reproduces DeBERTa's "
            "tokenizer for models that have one (nmt_nfkc, as the published models)."
        )
    names = special_names(config, SENTENCEPIECE_LAYOUTS[layout]["specials"])
    return "SentencePieceTokenizer", constructor_arguments(
        model_path,
        add_prefix_space=config.get("add_prefix_space", True),
        lstrip_tokens=lstripped_tokens(config),
        layout=layout,
        **_sentencepiece_flags(layout, config, spec),
        **names,
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
    if post.get("type") == "RobertaProcessing" or (template_style(post) or ("",))[0] == "roberta":
        return "xlm_roberta"
    return "deberta_v2" if strips else "albert"


def sentencepiece_json_arguments(data, model, config):
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
    names = special_names(config, SENTENCEPIECE_LAYOUTS[layout]["specials"])
    unk_id = model.get("unk_id")
    if unk_id is not None:
        names["unknown_token"] = vocabulary[unk_id][0]
    return "SentencePieceTokenizer", constructor_arguments(
        vocabulary,
        add_prefix_space=scheme == "always",
        whitespace_split=whitespace_split,
        split_on_metaspace=metaspace.get("split", True),
        lstrip_tokens=lstripped_tokens({}, data.get("added_tokens")),
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


@recorded
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
    backend.post_processor = template_processor(layout["style"], tokenizer)
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

    decoder = {str(tokenizer.token_to_id(t)): added_token_entry(t, t in tokenizer.lstrip_tokens) for t in added}
    write_json(
        os.path.join(directory, "tokenizer_config.json"),
        {
            "tokenizer_class": layout["class"],
            **_sentencepiece_config(tokenizer),
            "add_prefix_space": tokenizer.add_prefix_space,
            **special_entries(special),
            "bos_token": special["cls"], "eos_token": special["sep"],
            "added_tokens_decoder": decoder,
        },
    )
    return directory
