"""`onnxptq compare`: per-tensor error between a float model and its quantized version, worst
first, as a table, JSON and CSV; the input's error checked against numpy's quantize-dequantize."""

import csv
import json

import numpy as np
import onnx
from onnx import numpy_helper

from conftest import run_cli, write_samples


def test_compare_reports_each_quantized_activation(tiny_model, tmp_path):
    samples = write_samples(tmp_path / "calib", (1, 3, 8, 8), 2, seed=5)
    run_cli("quantize", tiny_model, "-o", tmp_path / "q.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", "--activation-type", "QUInt8", "--quiet")
    proc = run_cli("compare", tiny_model, tmp_path / "q.onnx", "--calib-data", tmp_path / "calib",
                   "--json", tmp_path / "e.json", "--csv", tmp_path / "e.csv")
    errors = json.loads((tmp_path / "e.json").read_text())
    rows = list(csv.DictReader(open(tmp_path / "e.csv")))
    assert [r["tensor"] for r in rows] == [e["tensor"] for e in errors]
    assert proc.stdout.splitlines()[0].split()[:3] == ["tensor", "op", "type"]
    sqnr = [e["sqnr"] for e in errors]
    assert sqnr == sorted(sqnr)  # worst first

    # The graph input 'x' is quantized: its error is numpy's quantize-dequantize of the samples
    # with the scale and zero point the quantized model holds.
    model = onnx.load(str(tmp_path / "q.onnx"))
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    scale, zero = float(init[q.input[1]]), int(init[q.input[2]])
    a = np.concatenate([s.ravel() for s in samples]).astype(np.float64)
    b = (np.clip(np.rint(a.astype(np.float32) / np.float32(scale)) + zero, 0, 255) - zero) * np.float32(scale)
    b = b.astype(np.float32).astype(np.float64)
    x = next(e for e in errors if e["tensor"] == "x")
    assert x["elements"] == a.size
    assert np.isclose(x["sqnr"], 10 * np.log10(np.sum(a * a) / np.sum((a - b) ** 2)), rtol=1e-9)
    assert np.isclose(x["cosine"], a.dot(b) / (np.linalg.norm(a) * np.linalg.norm(b)), rtol=1e-12)
    assert np.isclose(x["max_error"], np.max(np.abs(a - b)), rtol=1e-6)
    assert {e["tensor"] for e in errors} >= {"x", "c"} or {e["tensor"] for e in errors} >= {"x", "r"}


def test_compare_of_a_float_model_is_an_error(tiny_model, tmp_path):
    proc = run_cli("compare", tiny_model, tiny_model, "--random", "1", check=False)
    assert proc.returncode == 2
    assert "no QuantizeLinear/DequantizeLinear pair" in proc.stderr
