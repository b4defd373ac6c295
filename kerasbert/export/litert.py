"""LiteRT: a WordPiece text classifier on raw strings, tokenized in the graph
by tensorflow-text's `FastBertTokenizer`, whose LiteRT kernels
tensorflow-text's registrar provides."""

import os

import numpy as np

from kerasbert.export.bert_normalizer import normalizer_model
from kerasbert.export.saved_model import SIGNATURE, check_preprocessor
from kerasbert.layers import quantization
from kerasbert.utils.optional import tf, tf_text

LITERT_FILE = "model.tflite"


def check_litert(task, options):
    """Refuses what the LiteRT export does not cover: another task than a
    classifier, serving options, a tokenizer other than BERT's WordPiece,
    quantized weights."""
    from kerasbert.tokenizers.wordpiece import WordPieceTokenizer

    kind = type(task).__name__
    if isinstance(task.output, dict) or len(task.output.shape) != 2 or getattr(task, "num_classes", None) is None:
        raise TypeError(f"format='litert' exports a TextClassifier (logits of shape (batch, classes)); got a {kind}. "
                        "Export it with format='saved_model' or format='onnx'.")
    check_preprocessor(task, "LiteRT export")
    if options:
        raise TypeError(f"format='litert' takes no serving options (it serves single texts); got {sorted(options)}. "
                        "Serving options are for format='saved_model'.")
    tokenizer = task.preprocessor.tokenizer
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise ValueError(f"format='litert' needs a WordPiece tokenizer (LiteRT has kernels for tensorflow-text's "
                         f"FastBertTokenizer); this {kind} has a {type(tokenizer).__name__}. Export it with "
                         "format='saved_model' or format='onnx'.")
    if not tokenizer.tokenize_chinese_chars:
        raise ValueError("format='litert' needs a WordPiece tokenizer with tokenize_chinese_chars=True "
                         "(FastBertTokenizer always splits CJK ideographs); this one has tokenize_chinese_chars=False.")
    quantization.check_float(task, "a LiteRT export", "export before quantize, or use format='saved_model'")


def litert_serving_function(task):
    """The LiteRT `serving_default`: `text` (batch,) strings -> the
    classifier's `logits`, `probabilities`, `label` (and `label_name`),
    each text as `predict` packs it: `[CLS] pieces [SEP]`, cut to the
    preprocessor's `sequence_length`.

    The pieces are tensorflow-text's `FastBertTokenizer`'s on the task's
    vocabulary, with a normaliser model built from kerasbert's own rules
    (`bert_normalizer`): kerasbert's WordPiece graph uses string ops that
    LiteRT has no kernels for. Its ids are kerasbert's on every code point
    but the few that tensorflow-text's newer Unicode data calls punctuation
    or CJK and BERT's does not (docs/export.md lists them with the rest).
    A batch is padded to its longest row, as in the SavedModel."""
    tokenizer, length = task.preprocessor.tokenizer, task.preprocessor.sequence_length
    special = tokenizer.special_token_ids
    fast = fast_bert_tokenizer(tokenizer)
    names = tuple(task.input)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        pieces = fast.tokenize(text)  # (batch, None) ragged
        body = pieces.to_tensor(special["pad"], shape=[None, length - 2])  # (batch, length - 2), cut
        used = tf.minimum(tf.cast(pieces.row_lengths(), tf.int32), length - 2)  # (batch,)
        width = tf.reduce_max(tf.concat([used, [0]], 0)) + 2  # the longest row, [CLS] and [SEP] included
        used = tf.expand_dims(used, 1)  # (batch, 1)
        first = tf.fill([tf.shape(body)[0], 1], special["cls"])  # (batch, 1)
        tokens = tf.concat([first, body, first], 1)[:, :width]  # (batch, width)
        position = tf.expand_dims(tf.range(width), 0)  # (1, width)
        real = position < used + 2
        tokens = tf.where(position == used + 1, special["sep"], tf.where(real, tokens, special["pad"]))
        features = {"token_ids": tokens, "segment_ids": tf.zeros_like(tokens), "padding_mask": tf.cast(real, tf.int32)}
        logits = task({name: features[name] for name in names}, training=False)
        if task.num_classes == 1:
            return {"logits": logits}
        label = tf.cast(tf.argmax(logits, axis=-1), tf.int32)
        outputs = {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "label": label}
        if task.labels is not None:
            outputs["label_name"] = tf.gather(tf.constant(task.labels), label)
        return outputs

    return serve


def fast_bert_tokenizer(tokenizer):
    """tensorflow-text's `FastBertTokenizer` for a `WordPieceTokenizer`:
    its vocabulary and word settings, and its normalisation as a
    `bert_normalizer` model; int32 ids."""
    return tf_text.FastBertTokenizer(
        vocab=tokenizer.vocabulary, suffix_indicator=tokenizer.suffix_indicator, unknown_token=tokenizer.unknown_token,
        max_bytes_per_word=tokenizer.max_word_length, token_out_type=tf.int32,
        fast_bert_normalizer_model_buffer=normalizer_model(tokenizer),
    )


def write_litert(task, path, options=None):
    """The TensorFlow half of a LiteRT export: `path/model.tflite`, loaded
    once by LiteRT's interpreter with tensorflow-text's kernels first, so a
    graph that needs any other custom op fails here, not where it is
    served."""
    from ai_edge_litert.interpreter import InterpreterWithCustomOps

    serve = litert_serving_function(task)
    holder = tf.Module()  # the weights the function reads, and not the tokenizer's tables
    holder.weights = [variable.value for variable in task.weights]
    converter = tf.lite.TFLiteConverter.from_concrete_functions([serve.get_concrete_function()], holder)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # tensorflow-text's ops; checked below
    content = converter.convert()
    interpreter = InterpreterWithCustomOps(model_content=content,
                                           custom_op_registerers=tf_text.tflite_registrar.SELECT_TFTEXT_OPS)
    interpreter.get_signature_runner(SIGNATURE)(text=np.array(["a"], object))
    with open(os.path.join(path, LITERT_FILE), "wb") as f:
        f.write(content)
