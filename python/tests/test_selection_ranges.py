"""Quark's node selection (nodes_to_exclude patterns, subgraphs_to_exclude,
extra_op_types_to_quantize) and its SaveAndRestore extra option, through both Python shapes."""

import json

import pytest

import onnxptq
from onnxptq import quark
from conftest import run_cli, write_samples
from test_vai import FolderReader


def quark_report(model, out, reader=None, **fields):
    q = quark.QuantizationConfig(print_summary=False, **fields)
    return quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(model, str(out), reader)


def excluded(report):
    return sorted(name for name, why in report["float_nodes"].items() if why == "excluded")


def test_quark_selection_fields_reach_the_core(tiny_model, tmp_path):
    out = tmp_path / "q.onnx"
    assert excluded(quark_report(tiny_model, out)) == []
    assert excluded(quark_report(tiny_model, out, nodes_to_exclude=["^g.*", "^po.*"])) == ["gemm", "pool"]
    report = quark_report(tiny_model, out, subgraphs_to_exclude=[(["relu"], ["flatten"])])
    assert excluded(report) == ["pool", "relu"]  # Flatten is in no registry: not quantized anyway
    assert report["float_nodes"]["flatten"] == "op type Flatten is not quantized"
    report = quark_report(tiny_model, out, extra_op_types_to_quantize=["Flatten"])
    assert report["quantized_nodes_by_op_type"]["Flatten"] == 1
    with pytest.raises(onnxptq.Error, match=r"subgraphs_to_exclude\[0\]: start node 'gemm' leads to none"):
        quark_report(tiny_model, out, subgraphs_to_exclude=[(["relu", "gemm"], ["pool"])])
    with pytest.raises(onnxptq.Error, match="no node name matches the regular expression '\\^nope.\\*'"):
        quark_report(tiny_model, out, nodes_to_exclude=["^nope.*"])


def test_quantize_static_takes_quarks_arguments(tiny_model, tmp_path):
    report = onnxptq.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None, print_summary=False,
                                     nodes_to_exclude=["^co.*"], subgraphs_to_exclude=[(["flatten"], ["gemm"])],
                                     extra_op_types_to_quantize=["Flatten"])
    assert excluded(report) == ["conv", "flatten", "gemm"]
    with pytest.raises(TypeError, match="subgraphs_to_exclude: expected"):
        onnxptq.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None, subgraphs_to_exclude=["relu"])


def test_save_and_restore_calibrates_once(tiny_model, tmp_path):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 3)
    write_samples(tmp_path / "other", (1, 3, 8, 8), 3, seed=7)
    ranges = tmp_path / "ranges.json"
    args = dict(calibrate_method=onnxptq.CalibrationMethod.MinMax, print_summary=False,
                extra_options={"SaveAndRestore": str(ranges)})
    onnxptq.quantize_static(tiny_model, str(tmp_path / "first.onnx"), FolderReader(tmp_path / "calib", "x"), **args)
    saved = json.loads(ranges.read_text())
    assert saved["method"] == "MinMax" and saved["activation_type"] == "QInt8" and saved["tensors"]
    # Restored: other samples, the same model, and the file as it was.
    onnxptq.quantize_static(tiny_model, str(tmp_path / "second.onnx"), FolderReader(tmp_path / "other", "x"), **args)
    assert (tmp_path / "second.onnx").read_bytes() == (tmp_path / "first.onnx").read_bytes()
    assert json.loads(ranges.read_text()) == saved
    # Calibrated on the other samples instead, the model differs.
    onnxptq.quantize_static(tiny_model, str(tmp_path / "third.onnx"), FolderReader(tmp_path / "other", "x"),
                            calibrate_method=onnxptq.CalibrationMethod.MinMax, print_summary=False)
    assert (tmp_path / "third.onnx").read_bytes() != (tmp_path / "first.onnx").read_bytes()
    # The command line reads the same file with --ranges, and writes the same model.
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--ranges", ranges, "--calibrate-method", "MinMax",
            "--quiet")
    assert (tmp_path / "cli.onnx").read_bytes() == (tmp_path / "first.onnx").read_bytes()


def test_quarks_tensors_range_file_name_and_its_errors(tiny_model, tmp_path):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2)
    ranges = tmp_path / "r.json"
    quark_report(tiny_model, tmp_path / "a.onnx", FolderReader(tmp_path / "calib", "x"),
                 extra_options={"TensorsRangeFile": str(ranges)})
    assert json.loads(ranges.read_text())["method"] == "MinMax"  # Quark's default method
    # Another method than the file's.
    with pytest.raises(onnxptq.Error, match="ranges calibrated with MinMax, but the config's calibrate_method is "
                                            "Percentile"):
        quark_report(tiny_model, tmp_path / "b.onnx", calibrate_method=onnxptq.CalibrationMethod.Percentile,
                     extra_options={"SaveAndRestore": str(ranges)})
    # Quark's own file.
    ranges.write_text(json.dumps({"quark_version": "0.10", "tensors_range": {"x": [[0.0], [1.0]]}}))
    with pytest.raises(onnxptq.Error, match="Quark's SaveAndRestore file"):
        quark_report(tiny_model, tmp_path / "c.onnx", extra_options={"SaveAndRestore": str(ranges)})
    assert not (tmp_path / "b.onnx").exists() and not (tmp_path / "c.onnx").exists()
