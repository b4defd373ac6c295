"""benchmarks/report.py on the results checked in: a table row per result,
and each plot panel titled with the machine its file records."""

import json
import os
import sys
from unittest import mock

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)  # the scripts import `common` as their sibling
import common  # noqa: E402
import report  # noqa: E402

# The latest run of each workload, and a folder per machine of earlier sets
# (benchmarks/results/intel_xeon/; docs/performance.md).
_TOP = os.path.join(BENCHMARKS, "results")
RESULTS = [_TOP] + sorted(entry.path for entry in os.scandir(_TOP) if entry.is_dir())


def test_tables_have_a_row_per_result():
    for results in RESULTS:
        found = 0
        for name, table in report.TABLES.items():
            data = report.load(results, name)
            if data is None:
                continue
            found += 1
            lines = table(data).splitlines()
            body = [line for line in lines[2:] if line.startswith("| ")]
            if "results" not in data:  # finetuning_recipe.json: a row per setting
                assert len(body) == len(data["settings"]), name
                continue
            assert len(body) == len(report.rows(data)), name
            for row, line in zip(report.rows(data), body):
                assert line.split(" | ")[1] == row["backend"], (name, line)
        assert found, f"no results files under {results}"


def test_panels_name_the_machine_their_file_records():
    stamp = common.run_stamp()
    assert stamp["machine"].startswith(f"{os.cpu_count()} × ")
    assert stamp["versions"]["keras"] == __import__("keras").__version__ and stamp["commit"]
    assert len(stamp["date"]) == 10 and stamp["date"][4] == "-"
    data = {**stamp, "results": [{"system": "kerasbert", "backend": "jax", "seq_per_s": 3.0}]}
    axis = mock.MagicMock()
    report.bars(axis, json.loads(json.dumps(data)), [("seq_per_s", "")], "sequences/s", "MLM training")
    assert axis.set_title.call_args[0][0] == f"MLM training\n{stamp['machine']}, {stamp['date']}"
    del data["machine"]
    report.bars(axis, data, [("seq_per_s", "")], "sequences/s", "MLM training")
    assert axis.set_title.call_args[0][0] == "MLM training\n(machine not recorded)"
    report.bars(axis, None, [("seq_per_s", "")], "sequences/s", "MLM training")
    assert axis.set_title.call_args[0][0] == "MLM training"
    axis.text.assert_called_once()  # "not measured"


def test_checked_in_results_record_their_machine():
    """The files the plot reads come from scripts that stamp them
    (`common.run_stamp`): a file without a stamp would plot as "machine not
    recorded"."""
    for results in RESULTS:
        for name in report.TABLES:
            data = report.load(results, name)
            if data is not None:
                assert {"machine", "date"} <= set(data), f"{results}/{name} records no machine and date"


def test_published_tables_are_those_the_results_files_give():
    """README.md's and docs/performance.md's tables are `report.py --docs`'s
    output for the files checked in: a figure edited by hand, or a results
    file changed without rerunning `--docs`, fails here."""
    assert report.stale_documents(_TOP) == [], "run: .venv/bin/python benchmarks/report.py --docs"


def test_no_measured_ratio_is_written_outside_a_generated_table():
    for name in report.DOCUMENTS:
        with open(os.path.join(os.path.dirname(BENCHMARKS), name), encoding="utf-8") as f:
            text = f.read()
        assert report.ungenerated_ratios(text) == [], name
    # What counts: a measured ratio in prose does, a target does not, nor
    # one inside a generated block.
    block = "<!-- report.py: summary -->\n| a | 1.40× |\n<!-- end report.py -->"
    assert report.ungenerated_ratios(f"ran 1.51× as fast; target ≥ 1.25× or ≥1.5×\n{block}") == ["1.51×"]


def test_rendering_fills_each_block_from_its_file(tmp_path):
    data = {**common.run_stamp(), "results": [
        {"system": "kerasbert", "backend": "torch", "first_load_s": 0.5, "second_load_s": 0.25, "peak_rss_mb": 9.0}]}
    (tmp_path / "loading.json").write_text(json.dumps(data))
    text = "before\n<!-- report.py: loading.json -->\nstale\n<!-- end report.py -->\nafter\n"
    rendered = report.render(text, str(tmp_path))
    assert rendered.startswith("before\n<!-- report.py: loading.json -->\n| system |")
    assert "| kerasbert | torch | 0.50 | 0.25 | 9 |" in rendered and "stale" not in rendered
    assert rendered.endswith("<!-- end report.py -->\nafter\n")
    assert report.render(rendered, str(tmp_path)) == rendered
    assert "*crf.json is missing.*" in report.render("<!-- report.py: crf.json -->\n<!-- end report.py -->",
                                                     str(tmp_path))
    with pytest.raises(ValueError, match="unknown report block 'nothing.json'"):
        report.render("<!-- report.py: nothing.json -->\n<!-- end report.py -->", str(tmp_path))


def test_profile_predict_attributes_compiled_ops_to_the_model_part(tmp_path):
    import profile_predict

    # Lines in the form XLA's optimised HLO dump writes them.
    (tmp_path / "module_0034.jit_predict_step.cpu_after_optimizations.txt").write_text(
        '  %ynn_fusion.70 = f32[2048,1536]{1,0} fusion(%a, %b), kind=kCustom, calls=%c, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/intermediate_dense/dot_general" stack_frame_id=1}\n'
        '  %multiply_bitcast_fusion.6 = f32[2048,1536]{1,0} fusion(%d), kind=kLoop, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/intermediate_dense/mul" stack_frame_id=2}\n'
        '  %ynn_fusion.69 = f32[2048,384]{1,0} fusion(%e), kind=kCustom, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/output_dense/dot_general" stack_frame_id=3}\n'
        '  %ynn_fusion.73 = f32[2048,384]{1,0} fusion(%f), kind=kCustom, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/attention/output_dense/dot_general" stack_frame_id=4}\n'
        '  %ynn_fusion.76 = f32[32,12,96,96]{3,2,1,0} fusion(%g), kind=kCustom, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/attention/vmap(BTNH,BSNH->BNTS)/dot_general"}\n'
        '  %wrapped_slice.2 = f32[384,384]{1,0} fusion(%h), kind=kLoop, metadata={op_name='
        '"jit(predict_step)/encoder/transformer_block_0/attention/split" stack_frame_id=5}\n')
    names = profile_predict.op_names(str(tmp_path))
    assert len(names) == 6
    part = lambda op: profile_predict.part_of(op, names)  # noqa: E731
    assert part("ynn_fusion.70") == "FFN: first product and bias"
    assert part("multiply_bitcast_fusion.6") == "FFN: GELU"
    assert part("ynn_fusion.69") == "FFN: second product"
    assert part("ynn_fusion.73") == "attention: output product"
    assert part("ynn_fusion.76") == "attention: scores, softmax, context"
    assert part("wrapped_slice.2") == "attention: q/k/v kernel slices"
    assert part("copy.9") == "other: copy"  # not in the dump


def test_profile_predict_tells_attention_products_from_projections(tmp_path):
    # On JAX's CPU attention's two batched products and the q/k/v
    # projections share the source name `attention/dot_general`; the rank of
    # the result tells them apart.
    import profile_predict

    source = '"jit(predict_step)/encoder/transformer_block_0/attention/dot_general" stack_frame_id=1}\n'
    (tmp_path / "module_0034.jit_predict_step.cpu_after_optimizations.txt").write_text(
        '  %ynn_fusion.79 = f32[2048,384]{1,0} fusion(%a, %b), kind=kCustom, metadata={op_name=' + source +
        '  %ynn_fusion.77 = f32[32,12,64,64]{3,2,1,0} fusion(%c, %d), kind=kCustom, metadata={op_name=' + source +
        '  ROOT %dot_general.25 = f32[32,12,64,32]{3,2,1,0} dot(%e, %f), lhs_batch_dims={0,1}, '
        'metadata={op_name=' + source)
    names = profile_predict.op_names(str(tmp_path))
    part = lambda op: profile_predict.part_of(op, names)  # noqa: E731
    assert part("ynn_fusion.79") == "attention: q/k/v products"
    assert part("ynn_fusion.77") == "attention: scores, softmax, context"
    assert part("dot_general.25") == "attention: scores, softmax, context"


def test_matmul_benchmark_times_the_right_product_on_this_backend():
    import keras
    import matmul
    import pytest

    engine = keras.backend.backend()
    rows = matmul.measure(engine, [(24, 16, 8), (8, 32, 16)], ["float32", "bfloat16"], calls=2, rounds=2)
    assert [(r["engine"], r["dtype"], r["shape"]) for r in rows] == [
        (engine, dtype, shape) for dtype in ("float32", "bfloat16") for shape in ("24x16x8", "8x32x16")]
    assert all(r["gflops"] > 0 and len(r["rounds_gflops"]) == 2 for r in rows)
    to_engine, multiply, to_numpy = matmul.product(engine, "float32")
    with mock.patch.object(matmul, "product", lambda e, d: (to_engine, lambda a, b: multiply(a, b) + 1, to_numpy)):
        with pytest.raises(AssertionError, match="differs from NumPy's"):
            matmul.measure(engine, [(4, 4, 4)], ["float32"], calls=1, rounds=1)
    assert matmul.parse_shape("2048x384x1536") == (2048, 384, 1536)
    for bad in ("2048x384", "0x1x2", "axbxc"):
        with pytest.raises(Exception, match="MxKxN"):
            matmul.parse_shape(bad)


def test_roofline_counts_the_products_torch_counts():
    """benchmarks/roofline.py's useful work of MiniLM on examples of a few
    lengths is what torch's FLOP counter counts for transformers' BertModel
    of that config: the forward, and the backward twice it."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import roofline
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.BertConfig(vocab_size=100, hidden_size=roofline.HIDDEN, num_hidden_layers=roofline.LAYERS,
                                     num_attention_heads=12, intermediate_size=roofline.INTERMEDIATE)
    model = transformers.BertModel(config, add_pooling_layer=False)
    for length in (1, 7, 50):
        ids = torch.ones((1, length), dtype=torch.long)
        with FlopCounterMode(display=False) as forward:
            output = model(input_ids=ids).last_hidden_state
        with FlopCounterMode(display=False) as backward:
            output.sum().backward()
        assert forward.get_total_flops() == roofline.forward_flops([length])
        assert backward.get_total_flops() == 2 * roofline.forward_flops([length])
