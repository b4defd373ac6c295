"""Quantization through Keras's own quantized layers: `quantize("int8" |
"int4" | "float8")` on every task and every attention the encoder has
(the fused QKV kernel and the tied masked-LM decoder read through their
layers); all-MiniLM-L6-v2 in int8 against transformers' float embeddings;
quantized presets and `.keras` files that load back exactly; float8
training with `fit`. The SavedModel of a quantized task is checked in
test_export (`kerasbert export --quantize int8`). The quantized outputs
and float8 training run on every backend; the files, which hold the same
arrays whatever the backend, and the errors once, in the torch pass."""

import os

import keras
import numpy as np
import pytest
from helpers import encoder_inputs, minilm_directory, rotten_tomatoes, run, tiny_encoder, torch_pass_only
from test_encoder import FAMILIES

import kerasbert
from kerasbert.layers.quantization import quantized_modes
from kerasbert.tasks.task import load_task

# The largest output error of a quantized model, as a share of the float
# model's largest output: about twice the largest seen on tiny random
# models (int8 0.02; float8, whose 3-bit mantissas round the products'
# inputs, and int4 0.2). A weight read without its scale errs by 100 times.
ERROR = {"int8": 0.05, "float8": 0.4, "int4": 0.4}


def numpy(x):
    return np.asarray(keras.ops.convert_to_numpy(x))


def relative_error(quantized, reference):
    return float(np.abs(quantized - reference).max() / np.abs(reference).max())


# Each task on a tiny encoder of its own.
TASKS = {
    "classifier": lambda: kerasbert.TextClassifier(tiny_encoder(), num_classes=3),
    "tagger": lambda: kerasbert.TokenClassifier(tiny_encoder(), num_classes=4, crf=True),
    "reader": lambda: kerasbert.QuestionAnswerer(tiny_encoder()),
    "embedder": lambda: kerasbert.TextEmbedder(tiny_encoder(), normalize=False),
    "masked_lm": lambda: kerasbert.MaskedLM(tiny_encoder()),
}


def make_task(name, seed=0):
    keras.utils.set_random_seed(seed)
    return TASKS[name]()


def task_inputs(task):
    inputs = encoder_inputs(task.encoder)
    if isinstance(task, kerasbert.MaskedLM):
        inputs["mask_positions"] = np.array([[1, 4], [2, 5], [0, 0]], "int32")
    return inputs


def outputs(task, inputs):
    result = run(task, inputs)  # compiled on JAX
    return result["start_logits"] if "start_logits" in result else result["output"]


def expected_layers(task, mode):
    """The paths of the dense layers (and, but in float8, embedding tables) of `task`."""
    kinds = (keras.layers.Dense,) if mode == "float8" else (keras.layers.Dense, keras.layers.Embedding)
    return {layer.path for layer in task._flatten_layers(include_self=False) if isinstance(layer, kinds)}


@pytest.mark.parametrize("mode", sorted(ERROR))
def test_every_task_quantized_computes_what_it_did(mode):
    """Every task in int8; the classifier and the masked LM (its decoder
    reads the token table) in the other modes, which quantize the same
    layers."""
    for name in TASKS if mode == "int8" else ("classifier", "masked_lm"):
        task = make_task(name)
        inputs = task_inputs(task)
        reference = outputs(task, inputs)
        layers = expected_layers(task, mode)
        task.quantize(mode)
        assert set(quantized_modes(task)) == layers, name
        assert {m.split("/")[0] for m in quantized_modes(task).values()} == {mode}, name
        assert relative_error(outputs(task, inputs), reference) < ERROR[mode], name


@pytest.mark.parametrize("family", ["albert", "deberta", "modernbert"])
def test_every_attention_quantized(family):
    """Shared blocks, relative positions (the table goes through the
    quantized QKV too), rotary and sliding-window attention without
    biases; the last layer at chosen positions only (`outputs_at`) gives
    the full output's rows (DeBERTa's, whose positions go through the
    query rows too)."""
    encoder = tiny_encoder(**FAMILIES[family])
    inputs = encoder_inputs(encoder)
    reference = run(encoder, inputs)["sequence_output"]
    encoder.quantize("int8")
    quantized = run(encoder, inputs)["sequence_output"]
    assert relative_error(quantized, reference) < ERROR["int8"]
    if family != "deberta":
        return
    positions = np.array([[0, 3], [5, 1], [0, 0]], "int32")
    rows = numpy(encoder.outputs_at(inputs, positions)["sequence_output"])
    np.testing.assert_allclose(rows, np.take_along_axis(quantized, positions[:, :, None], axis=1), atol=1e-4)


@torch_pass_only
def test_int8_minilm_embeds_like_transformers_in_a_quarter_of_the_bytes(tmp_path):
    """Sentence embeddings of real snippets stay those of the float model in
    transformers (cosine), from a preset that stores the weights in int8.
    In the torch pass only: the tiny models above check Keras's quantized
    layers on every backend."""
    import torch
    import transformers

    texts = [text for text, _ in rotten_tomatoes()[:24]]
    embedder = kerasbert.TextEmbedder.from_preset("all_minilm_l6_v2", normalize=True)
    embedder.save_to_preset(tmp_path / "float")
    embedder.quantize("int8")
    embedder.save_to_preset(tmp_path / "int8")
    quantized = numpy(kerasbert.TextEmbedder.from_preset(tmp_path / "int8").predict(texts, verbose=0))

    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_directory())
    model = transformers.AutoModel.from_pretrained(minilm_directory()).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    reference = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
    cosine = (quantized * reference).sum(-1)
    assert cosine.min() > 0.99, cosine.min()

    def size(name):
        return os.path.getsize(tmp_path / name / "encoder.safetensors")

    assert size("float") / size("int8") >= 3.5


@torch_pass_only
def test_quantized_presets_and_keras_files_load_back_exactly(tmp_path):
    """An int4 task (two weights a byte, scales per block of rows) and an
    int8 encoder alone."""
    task = make_task("classifier")
    inputs = task_inputs(task)
    task.quantize("int4")
    expected = outputs(task, inputs)
    task.save_to_preset(tmp_path / "task")
    task.save(tmp_path / "task.keras")
    for loaded in (load_task(tmp_path / "task"), keras.saving.load_model(tmp_path / "task.keras")):
        assert quantized_modes(loaded) == quantized_modes(task)
        np.testing.assert_array_equal(outputs(loaded, inputs), expected)
    stored = kerasbert.utils.io.read_safetensors(tmp_path / "task" / "encoder.safetensors")
    assert stored["transformer_block_0/attention/qkv/kernel"].dtype == np.int8  # packed pairs
    unloaded = kerasbert.TextClassifier.from_preset(tmp_path / "task", load_weights=False)
    assert quantized_modes(unloaded) == quantized_modes(task)

    encoder = tiny_encoder()
    encoder.quantize("int8")
    encoder.save_to_preset(tmp_path / "encoder")
    loaded = kerasbert.from_preset(str(tmp_path / "encoder"))
    assert set(quantized_modes(loaded).values()) == {"int8"}
    np.testing.assert_array_equal(run(loaded, inputs)["sequence_output"], run(encoder, inputs)["sequence_output"])


def test_float8_trains_with_fit():
    """float8 dense layers (Keras's scaled E4M3/E5M2 products) train: the
    loss falls, the kernels move and the scales follow the activations."""
    keras.utils.set_random_seed(0)
    task = kerasbert.TextClassifier(tiny_encoder(), num_classes=2)
    inputs = encoder_inputs(task.encoder, lengths=[9, 7, 5, 8] * 8, seed=1)
    labels = (inputs["token_ids"][:, 0] > 26).astype("int32")
    task.quantize("float8")
    task.compile(optimizer=keras.optimizers.Adam(1e-2),
                 loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    layer = task.encoder.transformer_blocks[0].output_dense
    kernel = numpy(layer.kernel)
    history = task.fit(inputs, labels, batch_size=8, epochs=4, verbose=0).history["loss"]
    assert history[-1] < history[0]
    assert np.abs(numpy(layer.kernel) - kernel).max() > 0
    assert numpy(layer.inputs_amax_history).max() > 0


@torch_pass_only
def test_quantize_errors():
    task = make_task("classifier")
    for mode in ("int3", None, 8):
        with pytest.raises(ValueError, match=r"mode must be one of \['int8', 'int4', 'float8'\]"):
            task.quantize(mode)
    with pytest.raises(TypeError, match="config must be a keras.quantizers.QuantizationConfig"):
        task.quantize("int8", config={"block_size": 8})
    task.enable_lora(2)
    with pytest.raises(ValueError, match=r"LoRA adapter on; call merge_lora\(\) before quantize\(\)"):
        task.quantize("int8")
    task.merge_lora()
    task.quantize("int8")
    with pytest.raises(ValueError, match=r"quantized already \(\['int8'\]\)"):
        task.quantize("int4")
    with pytest.raises(ValueError, match=r"is quantized \(int8\); enable LoRA before quantize\(\)"):
        task.enable_lora(2)
    with pytest.raises(ValueError, match=r"quantized \(\['int8'\]\); a Hugging Face checkpoint holds float"):
        kerasbert.convert.to_huggingface(task, "unused")
    with pytest.raises(TypeError, match="ElectraPretrainer trains a generator"):
        kerasbert.ElectraPretrainer(None, tiny_encoder()).quantize("int8")


@torch_pass_only
def test_a_preset_that_names_unknown_layers_is_refused(tmp_path):
    encoder = tiny_encoder()
    encoder.quantize("int8")
    encoder.save_to_preset(tmp_path / "p")
    spec = kerasbert.utils.io.read_json(tmp_path / "p" / "preset.json", "preset")
    for record, message in [({"pooler": "int8"}, "names layers"), ({"pooler_dense": "int2"}, "quantization modes")]:
        kerasbert.utils.io.write_json(tmp_path / "p" / "preset.json", {**spec, "quantization": record}, seal=True)
        with pytest.raises(ValueError, match=message):
            kerasbert.from_preset(str(tmp_path / "p"))
