"""ONNX: the task's Keras model on token ids, converted by Keras's own ONNX
export (tf2onnx), with the tokenizer's files beside it."""

import functools
import os
import warnings

import keras
import numpy as np

from kerasbert.layers import quantization
from kerasbert.utils.io import read_json, write_json
from kerasbert.utils.optional import tf

ONNX_FILE = "model.onnx"


def check_onnx(task, options):
    """Refuses what ONNX export does not take: serving options, quantized
    weights."""
    if options:
        raise TypeError(f"format='onnx' takes no serving options (the graph takes token ids); got "
                        f"{sorted(options)}. Serving options are for format='saved_model'.")
    quantization.check_float(task, "an ONNX export", "export before quantize, or use format='saved_model'")


def write_onnx(task, path, options=None):
    """The TensorFlow half of an ONNX export: `path/model.onnx` and the
    tokenizer's files (see the module doc)."""
    outputs = task.output if isinstance(task.output, dict) else {task.output_names[0]: task.output}
    model = keras.Model(task.input, outputs, name=task.name)  # the task's layers, its outputs by name
    specs = {name: keras.InputSpec(shape=(None,) * len(x.shape), dtype=x.dtype, name=name)
             for name, x in task.input.items()}
    _add_tf2onnx_handlers()
    logger, level = tf.get_logger(), tf.get_logger().level
    with warnings.catch_warnings():
        # Freezing the graph warns of the tokenizer's table initializer (not in the graph); Keras's patch of
        # tf2onnx for NumPy 2 warns of `np.object`.
        warnings.simplefilter("ignore", FutureWarning)
        logger.setLevel("ERROR")
        try:
            keras.Model.export(model, os.path.join(path, ONNX_FILE), format="onnx", input_signature=[specs],
                               verbose=False)
        finally:
            logger.setLevel(level)
    _name_axes(os.path.join(path, ONNX_FILE), "mask_positions" in task.input)
    preprocessor = getattr(task, "preprocessor", None)
    if preprocessor is not None:
        preprocessor.tokenizer.save_to_preset(path)
        config_file = os.path.join(path, "tokenizer_config.json")
        config = read_json(config_file, "tokenizer config") if os.path.exists(config_file) else {}
        # transformers' truncation=True then cuts where the preprocessor does.
        write_json(config_file, {**config, "model_max_length": preprocessor.sequence_length})


def _name_axes(file, masked):
    """Names the graph's dynamic axes as the model's: inputs `(batch,
    sequence)` (`mask_positions`: `(batch, masks)`), and each output's
    first two `(batch, sequence)` or, for a masked LM's, `(batch, masks)`,
    where tf2onnx names them `unk__N`."""
    import onnx

    model = onnx.load(file)
    second = "masks" if masked else "sequence"
    named = [(value, ("batch", "masks" if value.name == "mask_positions" else "sequence"))
             for value in model.graph.input]
    named += [(value, ("batch", second)) for value in model.graph.output]
    for value, names in named:
        for axis, name in zip(value.type.tensor_type.shape.dim, names):
            if axis.HasField("dim_param"):
                axis.dim_param = name
    onnx.save(model, file)


@functools.cache
def _add_tf2onnx_handlers():
    """What tf2onnx 1.17 lacks for the encoder, added through its own
    registry (`tf_op`): `Erfc` (the exact GELU), as `1 - Erf(x)`, and an
    integer `UnsortedSegmentMin` (document positions), which its converter
    fails on under NumPy 2: computed in float32, exact for token counts."""
    from onnx import TensorProto
    from tf2onnx import handler, utils
    from tf2onnx.onnx_opset.reduction import SegmentSum

    @handler.tf_op("Erfc")
    class Erfc:
        @classmethod
        def version_1(cls, ctx, node, **kwargs):
            # GELU's erfc(-x / sqrt(2)) loses at most ~1e-7 to the subtraction.
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(utils.make_name("one"), np.array(1, dtype)).output[0]
            erf = ctx.make_node("Erf", [node.input[0]]).output[0]
            name, outputs = node.name, node.output
            ctx.remove_node(name)
            ctx.make_node("Sub", [one, erf], outputs=outputs, name=name)

    @handler.tf_op("UnsortedSegmentMin")
    class UnsortedSegmentMin:
        @classmethod
        def any_version(cls, convert, ctx, node, **kwargs):
            dtype = ctx.get_dtype(node.input[0])
            if dtype in (TensorProto.INT32, TensorProto.INT64):
                ctx.insert_new_node_on_input(node, "Cast", node.input[0], to=TensorProto.FLOAT, input_index=0)
                ctx.insert_new_node_on_output("Cast", node.output[0], to=dtype)
                ctx.set_dtype(node.output[0], TensorProto.FLOAT)
            convert(ctx, node, **kwargs)

        @classmethod
        def version_11(cls, ctx, node, **kwargs):
            cls.any_version(SegmentSum.version_11, ctx, node, **kwargs)

        @classmethod
        def version_13(cls, ctx, node, **kwargs):
            cls.any_version(SegmentSum.version_13, ctx, node, **kwargs)
