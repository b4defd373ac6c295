"""The heads' weight table (`head_weight_links`): the heads of
`BertForPreTraining`, `AlbertForPreTraining`, the `...ForMaskedLM` models,
`ElectraForPreTraining` and the `...ForSequenceClassification`,
`...ForTokenClassification` and `...ForQuestionAnswering` models, by the
Hugging Face head a task declares (`huggingface_head`)."""

import os
import warnings

from kerasbert.convert.configs import CLASS_PREFIX, MODEL_TYPES
from kerasbert.convert.weights import WeightLink, dense_links, layer_norm_links, modern_name, read_huggingface_tensors
from kerasbert.utils.io import read_json

# The masked-LM head of each family: the transform's dense layer and
# LayerNorm, and the output bias. The decoder is the token embedding (tied),
# so its weight is never read; transformers re-ties it on load.
_MLM_HEAD_NAMES = {
    "bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias"),
    "albert": ("predictions.dense", "predictions.LayerNorm", "predictions.bias"),
    "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias"),
    "xlm-roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias"),
    "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector.bias"),
    "deberta-v2": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias"),
    "modernbert": ("head.dense", "head.norm", "decoder.bias"),
    "electra": ("generator_predictions.dense", "generator_predictions.LayerNorm", "generator_lm_head.bias"),
}


# The sentence-level head a family's pretraining model has: (task, name).
SENTENCE_HEAD_NAMES = {"bert": ("nsp", "cls.seq_relationship"), "albert": ("sop", "sop_classifier.classifier")}


_DISCRIMINATOR_NAMES = ("discriminator_predictions.dense", "discriminator_predictions.dense_prediction")


# transformers applies exact GELU in these masked-LM heads whatever the
# config's `hidden_act`; the others follow `hidden_act`, as ours do.
_FIXED_MLM_ACTIVATIONS = {"roberta": "gelu", "xlm-roberta": "gelu", "electra": "gelu"}


def _mlm_head_links(head, model_type):
    dense, layer_norm, bias = _MLM_HEAD_NAMES[model_type]
    return (dense_links(head.dense, dense) + layer_norm_links(head.layer_norm, layer_norm)
            + [WeightLink(head.bias, [bias])])


def head_weight_links(task, model_type):
    """The head variables of `task` with their Hugging Face tensor names,
    by head: `"mlm"` (`MaskedLM`, `BertPretrainer`), `"nsp"` or `"sop"`
    (`BertPretrainer`, when `model_type`'s pretraining model has that
    sentence task: bert NSP, albert SOP), `"generator"` and
    `"discriminator"` (`ElectraPretrainer`), `"classifier"`
    (`TextClassifier`, `TokenClassifier`), `"qa_outputs"`
    (`QuestionAnswerer`). Empty for tasks without such a head."""
    fine_tuning = fine_tuning_head_links(task, model_type)
    if fine_tuning is not None:
        return fine_tuning
    if task_head(task) == "electra_pretraining":
        dense, output = _DISCRIMINATOR_NAMES
        return {
            "generator": _mlm_head_links(task.generator_head, model_type),
            "discriminator": dense_links(task.get_layer("discriminator_dense"), dense)
            + dense_links(task.get_layer("discriminator_output"), output),
        }
    if task_head(task) != "masked_lm":
        return {}
    heads = {"mlm": _mlm_head_links(task.mlm_head, model_type)}
    sentence_task = getattr(task, "sentence_task", None)
    if sentence_task and SENTENCE_HEAD_NAMES.get(model_type, (None,))[0] == sentence_task:
        heads[sentence_task] = dense_links(task.sentence_head, SENTENCE_HEAD_NAMES[model_type][1])
    return heads


# The fine-tuning heads: transformers' `{Family}For{architecture}` model
# and its head's tensors. Sequence classification reads the pooler (BERT,
# ALBERT) or has a dense layer of its own (`CLASSIFIER_ACTIVATIONS`).
FINE_TUNING_ARCHITECTURES = {
    "sequence_classification": "SequenceClassification",
    "token_classification": "TokenClassification",
    "question_answering": "QuestionAnswering",
}


def task_head(model):
    """The Hugging Face head a task declares (its class's `huggingface_head`:
    "masked_lm", "electra_pretraining" or a key of
    `FINE_TUNING_ARCHITECTURES`); None for an encoder."""
    return getattr(type(model), "huggingface_head", None)


# The activation of the sequence classifier's own dense layer, by family,
# and the names of that layer and of the output layer.
CLASSIFIER_ACTIVATIONS = {"roberta": "tanh", "xlm-roberta": "tanh", "electra": "gelu", "distilbert": "relu",
                          "deberta-v2": "gelu"}
_CLASSIFIER_NAMES = {"distilbert": ("pre_classifier", "classifier"), "deberta-v2": ("pooler.dense", "classifier")}


# The families whose fine-tuning heads (all three) are a dense layer, its
# activation and a LayerNorm before the output layer (the tasks'
# `head_norm`): the names of the three.
NORMALIZED_HEADS = {"modernbert": ("head.dense", "head.norm", "classifier")}

# The activations a normalized head's config may name (`classifier_activation`),
# which Keras names alike.
_HEAD_ACTIVATIONS = ("gelu", "relu", "silu", "tanh")


def normalized_head_arguments(head_config):
    """A task's head arguments from a fine-tuning checkpoint of a family in
    `NORMALIZED_HEADS` (`activation`, `head_norm`); {} for other families."""
    if head_config.get("model_type") not in NORMALIZED_HEADS:
        return {}
    activation = head_config.get("classifier_activation", "gelu")
    if activation not in _HEAD_ACTIVATIONS:
        raise ValueError(f"config.json has classifier_activation={activation!r}; kerasbert's heads take "
                         f"{list(_HEAD_ACTIVATIONS)}.")
    biases = {k: head_config.get(k, False) for k in ("classifier_bias", "norm_bias")}
    if len(set(biases.values())) != 1:
        raise ValueError(f"config.json has {biases}; kerasbert's normalized heads have biases where the "
                         "encoder's layers have them, so both must be equal.")
    return {"activation": activation, "head_norm": True}


def fine_tuning_head_links(task, model_type):
    """{head: links} of a fine-tuning task, or None for other tasks."""
    kind = FINE_TUNING_ARCHITECTURES.get(task_head(task))
    if kind is None:
        return None
    if model_type in NORMALIZED_HEADS:
        if task.head_norm is None:
            return {}
        dense, norm, output = NORMALIZED_HEADS[model_type]
        return {"classifier": dense_links(task.head_dense, dense) + layer_norm_links(task.head_norm, norm)
                + dense_links(task.output_dense, output)}
    if kind == "QuestionAnswering":
        return {"qa_outputs": dense_links(task.output_dense, "qa_outputs")}
    if kind == "TokenClassification":
        return {"classifier": dense_links(task.output_dense, "classifier")}
    if model_type in CLASSIFIER_ACTIVATIONS:
        if task.head_dense is None:
            return {}
        dense, output = _CLASSIFIER_NAMES.get(model_type, ("classifier.dense", "classifier.out_proj"))
        return {"classifier": dense_links(task.head_dense, dense) + dense_links(task.output_dense, output)}
    return {} if task.head_dense is not None else {"classifier": dense_links(task.output_dense, "classifier")}


def check_fine_tuning_head(task, model_type, directory):
    """The task's head must be the one transformers' model of `model_type` has."""
    kind = FINE_TUNING_ARCHITECTURES[task_head(task)]
    if model_type in NORMALIZED_HEADS:
        if task.head_norm is None:
            raise ValueError(
                f"transformers' {model_type} heads are a dense layer, its activation and a LayerNorm before the "
                f"output layer; this {type(task).__name__} has no such LayerNorm (head_norm=False), so it "
                f"cannot be written as {model_type!r}."
            )
        activation = task.get_config()["activation"]
        if activation not in _HEAD_ACTIVATIONS:
            raise ValueError(f"This {type(task).__name__}'s head applies {activation!r}; transformers' {model_type} "
                             f"heads take {list(_HEAD_ACTIVATIONS)}.")
    elif kind != "SequenceClassification" and task.head_dense is not None:
        raise ValueError(
            f"This {type(task).__name__} has a dense layer of its own (hidden_dim={task.head_dense.units}); "
            f"transformers' {model_type} {kind} head is the output layer alone, so it cannot be written as "
            f"{model_type!r}."
        )
    elif kind == "SequenceClassification":
        if task.get_config()["pooling"] != "cls":
            raise ValueError(
                f"This TextClassifier pools by {task.get_config()['pooling']!r}; transformers' sequence "
                "classifiers read the first token (pooling='cls'), so it cannot be written as one."
            )
        wants_dense = model_type in CLASSIFIER_ACTIVATIONS
        if wants_dense != (task.head_dense is not None):
            has = "a dense layer of its own" if task.head_dense is not None else "no dense layer of its own"
            raise ValueError(
                f"This TextClassifier's head has {has}, but transformers' {model_type} sequence classifier "
                f"{'has one' if wants_dense else 'reads the pooler'}; it cannot be written as {model_type!r}."
            )
        expected, activation = CLASSIFIER_ACTIVATIONS.get(model_type), task.get_config()["activation"]
        if expected and activation != expected:
            raise ValueError(
                f"transformers' {model_type} classification head applies {expected!r}; this TextClassifier's "
                f"applies {activation!r}, so their logits would differ."
            )
    if kind == "TokenClassification" and task.crf is not None:
        warnings.warn(
            f"{directory}: transformers' {CLASS_PREFIX[model_type]}ForTokenClassification has no CRF; the "
            "checkpoint holds the tag logits (emissions) but not the CRF's transition scores.",
            stacklevel=3,
        )


def fine_tuning_config(task, config):
    """The task-specific entries of a fine-tuning checkpoint's config.json."""
    kind = FINE_TUNING_ARCHITECTURES[task_head(task)]
    config["architectures"] = [f"{CLASS_PREFIX[config['model_type']]}For{kind}"]
    if config["model_type"] in NORMALIZED_HEADS:
        config.update(classifier_activation=task.get_config()["activation"], classifier_bias=task.head_dense.use_bias,
                      classifier_dropout=task.get_config().get("dropout", 0.0))
        if kind == "SequenceClassification":
            config["classifier_pooling"] = task.get_config()["pooling"]
    if kind == "QuestionAnswering":
        return config
    labels = getattr(task, "labels", None) or [f"LABEL_{i}" for i in range(task.num_classes)]
    config["id2label"] = {str(i): label for i, label in enumerate(labels)}
    config["label2id"] = {label: i for i, label in enumerate(labels)}
    if kind == "SequenceClassification":
        config["problem_type"] = "regression" if task.num_classes == 1 else "single_label_classification"
    return config


def mlm_heads(task):
    """{head name: MaskedLMHead} of the heads that predict tokens."""
    for name, attribute in (("generator", "generator_head"), ("mlm", "mlm_head")):
        if getattr(task, attribute, None) is not None:
            return {name: getattr(task, attribute)}
    return {}


def warn_if_activation_differs(task, model_type, heads, source):
    expected = _FIXED_MLM_ACTIVATIONS.get(model_type)
    for name, head in mlm_heads(task).items():
        if name in heads and expected and head.activation != expected:
            warnings.warn(
                f"{source}: transformers' {model_type} masked-LM head applies {expected!r} "
                f"whatever the config's hidden_act, but this task's {name} head applies "
                f"{head.activation!r} (the encoder's activation); their logits will differ.",
                stacklevel=3,
            )


def _head_tensors(tensors):
    """The checkpoint's tensors under today's names: LayerNorm gamma/beta as
    weight/bias, and a masked-LM output bias stored only as the decoder's
    (`cls.predictions.decoder.bias`) also under its own name."""
    out = {modern_name(name): value for name, value in tensors.items()}
    for name in list(out):
        if name.endswith(".decoder.bias"):
            out.setdefault(name[: -len("decoder.bias")] + "bias", out[name])
    return out


def _checked_head_values(groups, tensors, source):
    """[(head, link, value)] for every head the checkpoint holds completely; a
    head it lacks is skipped, a partial or misshapen one is an error."""
    values = []
    for head, links in groups.items():
        names = [n for link in links for n in link.names]
        missing = [n for n in names if n not in tensors]
        if len(missing) == len(names):
            continue  # no such head in the checkpoint: keep the fresh one
        if missing:
            raise ValueError(f"{source} holds part of the {head} head but lacks {missing}.")
        for link in links:
            value = link.checked_value(
                tensors, source, "the checkpoint's head does not fit this task's encoder.",
                kind="head tensor(s)", owner=f" of the {head} head",
            )
            values.append((head, link, value))
    return values


def assign_head_weights(task, directory, generator_directory=None):
    """Assigns the pretraining heads a Hugging Face checkpoint holds to
    `task`'s heads: the masked-LM head and the NSP (bert) or SOP (albert)
    head of `BertForPreTraining`, `AlbertForPreTraining` and the
    `...ForMaskedLM` models to a `MaskedLM` or `BertPretrainer`; for an
    `ElectraPretrainer`, the discriminator head of `ElectraForPreTraining`
    from `directory` and the generator head of `ElectraForMaskedLM` from
    `generator_directory`. Heads a checkpoint lacks (a plain `BertModel`
    has none) keep their fresh weights.

    Args:
        task: a task built on the checkpoint's encoder(s).
        directory: a Hugging Face checkpoint directory, or None (nothing
            to read but the generator's).
        generator_directory: the generator's checkpoint directory
            (`ElectraPretrainer` only).

    Returns:
        The names of the heads assigned, e.g. `["mlm", "nsp"]`.

    Raises:
        ValueError: a head is in the checkpoint but incomplete or of a
            shape the task's head does not have.
    """
    electra = task_head(task) == "electra_pretraining"
    if generator_directory is not None and not electra:
        raise ValueError(
            f"generator_directory is for an ElectraPretrainer; got a {type(task).__name__}."
        )
    sources = [(directory, lambda head: not electra or head != "generator"),
               (generator_directory, lambda head: head == "generator")]
    values = []
    for source, wanted in sources:
        if source is None:
            continue
        hf_config = read_json(os.path.join(source, "config.json"), "Hugging Face config.json")
        model_type = hf_config.get("model_type")
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"{source}/config.json has model_type={model_type!r}; kerasbert converts {list(MODEL_TYPES)}."
            )
        groups = {h: links for h, links in head_weight_links(task, model_type).items() if wanted(h)}
        if not groups:
            continue
        found = _checked_head_values(groups, _head_tensors(read_huggingface_tensors(source)), source)
        warn_if_activation_differs(task, model_type, {head for head, _, _ in found}, source)
        values += found
    for _, link, value in values:  # all checked first: an error leaves the task as it was
        link.variable.assign(value)
    return list(dict.fromkeys(head for head, _, _ in values))
