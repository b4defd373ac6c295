"""Filling in masked tokens with a pretrained masked-LM head: what a
pretraining run has learnt, in words."""


import numpy as np
from keras import ops

from kerasbert.preprocessing.packer import Packer
from kerasbert.tokenizers.base import Tokenizer
from kerasbert.utils.checks import abbreviated, check_int
from kerasbert.utils.examples import check_examples


def fill_mask(model, tokenizer, texts, top_k=5, sequence_length=128):
    """The `top_k` most likely tokens at every mask token of each text.

    Args:
        model: a `MaskedLM`, a `BertPretrainer` or an `ElectraPretrainer`
            (its generator fills the masks).
        tokenizer: the model's tokenizer; texts mark the masked places with
            its mask token (`[MASK]`, or `<mask>` for RoBERTa).
        texts: a list of strings.
        top_k: how many candidates per mask.
        sequence_length: texts are truncated to this many tokens.

    Returns:
        For each text, a list with one entry per mask token: a list of
        `(token, probability)`, most likely first.

    Examples:
    >>> import kerasbert
    >>> tokenizer = kerasbert.Tokenizer.from_preset("all_minilm_l6_v2")
    >>> encoder = kerasbert.Encoder(vocabulary_size=tokenizer.vocabulary_size(),
    ...     num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    >>> guesses = fill_mask(kerasbert.MaskedLM(encoder), tokenizer,
    ...                     ["In the beginning God created the [MASK]."], top_k=3)
    >>> len(guesses[0]), len(guesses[0][0])
    (1, 3)
    """
    encoder = getattr(model, "encoder", None) or getattr(model, "discriminator", None)
    if encoder is None or "mask_positions" not in getattr(model, "input", {}):
        raise TypeError("model must be a MaskedLM, a BertPretrainer or an ElectraPretrainer (a model with a "
                        f"masked-LM head); got {type(model).__name__}.")
    if not isinstance(tokenizer, Tokenizer):
        raise TypeError(f"tokenizer must be a kerasbert Tokenizer (the model's); got {type(tokenizer).__name__}.")
    check_examples(texts, "texts", pairs=False, datasets=False)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise TypeError(f"texts must be a list of strings; texts[{bad}] is {type(texts[bad]).__name__} "
                        f"{abbreviated(texts[bad])}.")
    for name, value, low, high in (("top_k", top_k, 1, encoder.vocabulary_size),
                                   ("sequence_length", sequence_length, 3, encoder.max_sequence_length)):
        check_int(name, value, low, high)
    mask_id = tokenizer.special_token_ids["mask"]
    inputs = {k: np.asarray(v) for k, v in Packer.from_tokenizer(tokenizer, sequence_length)(tokenizer(texts)).items()}
    is_mask = inputs["token_ids"] == mask_id  # (batch, seq)
    if not is_mask.any(axis=1).all():
        missing = [i for i, m in enumerate(is_mask.any(axis=1)) if not m]
        mask = tokenizer.id_to_token(mask_id)
        raise ValueError(f"every text needs a {mask} token within its first sequence_length={sequence_length} "
                         f"tokens; texts[{missing[0]}] = {abbreviated(texts[missing[0]])} has none"
                         + (f" (nor have {len(missing) - 1} more)" if len(missing) > 1 else "") + ".")
    slots = int(is_mask.sum(axis=1).max())
    positions = np.zeros((len(texts), slots), "int32")
    weights = np.zeros((len(texts), slots), "float32")
    for row, found in enumerate(is_mask):
        where = np.flatnonzero(found)
        positions[row, : len(where)] = where
        weights[row, : len(where)] = 1.0
    features = {k: v for k, v in inputs.items() if k != "segment_ids" or encoder.num_segments}
    features["mask_positions"] = positions
    if "mask_weights" in model.input:
        features["mask_weights"] = weights
    outputs = model(features, training=False)
    if isinstance(outputs, dict):
        outputs = outputs["generator_logits"] if "generator_logits" in outputs else outputs["mlm"]
    logits = ops.convert_to_numpy(outputs).astype("float64")  # (batch, slots, vocab)
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    results = []
    for row in range(len(texts)):
        masks = []
        for slot in range(int(weights[row].sum())):
            best = np.argsort(-probabilities[row, slot])[:top_k]
            masks.append([(tokenizer.id_to_token(int(i)), float(probabilities[row, slot, i])) for i in best])
        results.append(masks)
    return results
