"""Writing an encoder or a task as a Hugging Face checkpoint
(`config.json` and `model.safetensors`)."""

import os

import keras
import numpy as np

from kerasbert.convert.configs import CHECKPOINT_PREFIX, CLASS_PREFIX, MODEL_TYPES, huggingface_config
from kerasbert.convert.heads import (
    FINE_TUNING_ARCHITECTURES,
    SENTENCE_HEAD_NAMES,
    check_fine_tuning_head,
    fine_tuning_config,
    fine_tuning_head_links,
    head_weight_links,
    mlm_heads,
    task_head,
    warn_if_activation_differs,
)
from kerasbert.convert.weights import weight_links
from kerasbert.layers.quantization import check_float
from kerasbert.utils.io import write_json, write_safetensors


def _encoder_tensors(encoder, config):
    """The encoder's tensors under their Hugging Face names (no prefix), for
    the checkpoint whose config.json is `config`."""
    model_type = config["model_type"]
    tensors = {}
    for link in weight_links(encoder, model_type):
        tensors.update(link.from_keras(_numpy(link.variable)))
    if model_type == "albert" and encoder.embeddings_projection is None:
        # ALBERT always projects; an identity projection is exact.
        tensors["encoder.embedding_hidden_mapping_in.weight"] = np.eye(encoder.hidden_dim, dtype=np.float32)
        tensors["encoder.embedding_hidden_mapping_in.bias"] = np.zeros(encoder.hidden_dim, np.float32)
    if encoder.segment_embedding is None and config.get("type_vocab_size", 0) > 0:
        # The config has a token-type table the encoder lacks; a zero row adds nothing.
        tensors["embeddings.token_type_embeddings.weight"] = np.zeros(
            (1, encoder.token_embedding.output_dim), np.float32
        )
    return tensors


def _head_tensors_of(task, model_type, heads):
    tensors = {}
    for head, links in head_weight_links(task, model_type).items():
        if head in heads:
            for link in links:
                tensors.update(link.from_keras(_numpy(link.variable)))
    return tensors


def _numpy(variable):
    # A variable, or a computed kernel (a LoRA layer's `kernel`: the adapter folded in).
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


def _write_checkpoint(directory, config, tensors):
    os.makedirs(directory, exist_ok=True)
    write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"})
    write_json(os.path.join(directory, "config.json"), config)


def _prefixed(model_type, tensors):
    prefix = CHECKPOINT_PREFIX.get(model_type, model_type)
    return {f"{prefix}.{name}": value for name, value in tensors.items()}


def to_huggingface(model, directory, model_type=None, generator_directory=None):
    """Writes an encoder or a pretraining task as a Hugging Face checkpoint
    (`config.json` and `model.safetensors`).

    - an `Encoder`: the base model (`BertModel`, ...), which
      `transformers.AutoModel.from_pretrained` loads;
    - a `MaskedLM`, or a `BertPretrainer` with `sentence_task=None`: the
      family's `...ForMaskedLM`;
    - a `BertPretrainer` with its family's sentence task: `BertForPreTraining`
      (NSP) or `AlbertForPreTraining` (SOP);
    - an `ElectraPretrainer`: `ElectraForPreTraining` (the discriminator) in
      `directory` and `ElectraForMaskedLM` (the generator, with the
      discriminator's embeddings, which it reads) in `generator_directory`;
    - a `TextClassifier`, `TokenClassifier` or `QuestionAnswerer`:
      `...ForSequenceClassification` (with `num_labels`, `problem_type`
      "regression" for `num_classes=1`), `...ForTokenClassification` (with
      the task's `labels` as `id2label`; a CRF's transition scores have no
      place there and are left out, with a warning) or
      `...ForQuestionAnswering`.

    A task is written as the family of the preset it came from
    (`task.family`), an encoder as the family its configuration implies
    (`model_type` overrides both). A classifier head that is not the
    family's (BERT/ALBERT: the pooler and one dense layer; RoBERTa,
    XLM-RoBERTa, ELECTRA, DistilBERT, DeBERTa-v2: a dense layer with tanh,
    tanh, GELU, ReLU, GELU, then the output layer) is refused.

    Task checkpoints load with `transformers.AutoModelForPreTraining` /
    `AutoModelForMaskedLM` and give the task's logits. The tied decoder
    weight is not written: transformers ties it to the token embeddings on
    load, as in the checkpoints it saves itself.

    Args:
        model: a `kerasbert.Encoder`, a pretraining task or a fine-tuning
            task.
        directory: where to write; created if missing.
        model_type: one of `kerasbert.convert.MODEL_TYPES`; inferred from
            the encoder's configuration when omitted.
        generator_directory: where an `ElectraPretrainer`'s generator goes;
            `directory/generator` when omitted.

    Returns:
        The directory written.
    """
    from kerasbert.encoder import Encoder
    from kerasbert.utils.io import check_path

    check_float(model, "a Hugging Face checkpoint", "convert the model before quantize()")
    directory = check_path("directory", directory)
    if task_head(model) == "electra_pretraining":
        _write_electra_pretrainer(model, directory, model_type, generator_directory)
        return directory
    if generator_directory is not None:
        raise ValueError(f"generator_directory is for an ElectraPretrainer; got a {type(model).__name__}.")
    if model_type is None and getattr(model, "family", None) in MODEL_TYPES:
        model_type = model.family  # a task's checkpoint family, not a look-alike
    if isinstance(model, Encoder):
        config = huggingface_config(model, model_type)
        _write_checkpoint(directory, config, _encoder_tensors(model, config))
        return directory
    encoder = getattr(model, "encoder", None)
    if isinstance(encoder, Encoder) and task_head(model) in FINE_TUNING_ARCHITECTURES:
        config = huggingface_config(encoder, model_type)
        model_type = config["model_type"]
        check_fine_tuning_head(model, model_type, directory)
        tensors = _prefixed(model_type, _encoder_tensors(encoder, config))
        tensors.update(_head_tensors_of(model, model_type, set(fine_tuning_head_links(model, model_type))))
        _write_checkpoint(directory, fine_tuning_config(model, config), tensors)
        return directory
    if not isinstance(encoder, Encoder) or not mlm_heads(model):
        raise TypeError(
            "to_huggingface writes a kerasbert.Encoder, MaskedLM, BertPretrainer or "
            f"ElectraPretrainer; got {type(model).__name__}."
        )
    config = huggingface_config(encoder, model_type)
    model_type = config["model_type"]
    sentence_task = getattr(model, "sentence_task", None)
    heads = {"mlm"}
    architecture = f"{CLASS_PREFIX[model_type]}ForMaskedLM"
    if sentence_task:
        family_task = SENTENCE_HEAD_NAMES.get(model_type, (None,))[0]
        if family_task != sentence_task:
            has = f"a {family_task!r} head" if family_task else "no sentence-level head"
            raise ValueError(
                f"A BertPretrainer with sentence_task={sentence_task!r} cannot be written as a "
                f"Hugging Face {model_type!r} model: its pretraining model has {has}. Write "
                "model.encoder, or a BertPretrainer with the family's sentence task "
                "(bert: 'nsp', albert: 'sop') or None."
            )
        heads.add(sentence_task)
        architecture = f"{CLASS_PREFIX[model_type]}ForPreTraining"
    warn_if_activation_differs(model, model_type, heads, directory)
    config["architectures"] = [architecture]
    tensors = _prefixed(model_type, _encoder_tensors(encoder, config))
    tensors.update(_head_tensors_of(model, model_type, heads))
    _write_checkpoint(directory, config, tensors)
    return directory


def _write_electra_pretrainer(pretrainer, directory, model_type, generator_directory):
    if pretrainer.embedding_sharing != "shared":
        raise ValueError(
            f"This ElectraPretrainer shares embeddings {pretrainer.embedding_sharing!r} (DeBERTa-v3), which "
            "transformers' ElectraForPreTraining does not hold; write pretrainer.discriminator (its table merged "
            "by fit, or merge_embedding_residual()) and pretrainer.generator as encoders."
        )
    if model_type not in (None, "electra"):
        raise ValueError(
            f"An ElectraPretrainer is written as Hugging Face 'electra' models; got model_type={model_type!r}."
        )
    discriminator, generator = pretrainer.discriminator, pretrainer.generator
    disc_config = huggingface_config(discriminator, "electra")
    gen_config = huggingface_config(generator, "electra")
    disc_config["architectures"] = ["ElectraForPreTraining"]
    gen_config["architectures"] = ["ElectraForMaskedLM"]
    disc_tensors = _encoder_tensors(discriminator, disc_config)
    # The generator reads the discriminator's embeddings (its own are unused).
    gen_tensors = _encoder_tensors(generator, gen_config)
    gen_tensors.update({n: v for n, v in disc_tensors.items() if n.startswith("embeddings.")})
    warn_if_activation_differs(pretrainer, "electra", {"generator"}, directory)
    disc_tensors = _prefixed("electra", disc_tensors)
    disc_tensors.update(_head_tensors_of(pretrainer, "electra", {"discriminator"}))
    gen_tensors = _prefixed("electra", gen_tensors)
    gen_tensors.update(_head_tensors_of(pretrainer, "electra", {"generator"}))
    _write_checkpoint(directory, disc_config, disc_tensors)
    _write_checkpoint(generator_directory or os.path.join(directory, "generator"), gen_config, gen_tensors)
