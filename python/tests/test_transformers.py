"""The BERT-style encoder and the GPT-style decoder of tests/models/export_transformers.py (CTest's
export fixture writes them to ONNXPTQ_MODELS_DIR) quantized by the command as a user runs it, in the
transformer configurations: every written model runs in ONNX Runtime (npm onnxruntime-node,
tests/oracle/ort_run.js), with outputs close to the float model's there on token ids the
calibration did not see. The bounds are loose (the figures are in docs/benchmarks.md); they catch a
model that runs but computes something else."""

import os
import subprocess

import numpy as np
import pytest

from conftest import quantize_nodes, real_model, run_cli

SOURCE = os.environ.get("ONNXPTQ_SOURCE_DIR", "")
TOKENS = 16


def ort_output(model, ids, out):
    assert SOURCE, "ONNXPTQ_SOURCE_DIR is not set (run the tests through CTest)"
    np.save(out + ".npy", ids)
    subprocess.run(["node", os.path.join(SOURCE, "tests/oracle/ort_run.js"), model, "--inputs",
                    f"input_ids={out}.npy", "--threads", "2", "--outputs", out], check=True, capture_output=True)
    (name,) = [f for f in os.listdir(out) if f.endswith(".npy")]
    return np.load(os.path.join(out, name)).astype(np.float64)


def cosine(a, b):
    a, b = a.ravel(), b.ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


NBITS = ["--extra-option", "UseMatMulNBits=true", "--extra-option"]
CONFIGS = {
    "dynamic": (["--dynamic"], 0.98, "DynamicQuantizeLinear"),
    "A8W8 MatMuls SmoothQuant": (["--config", "A8W8", "--op-types-to-quantize", "MatMul", "--include-sq"], 0.995,
                                 "QuantizeLinear"),
    "W4A16 GPTQ": (["--config", "A16W8", "--quant-format", "QDQ", "--weight-type", "QInt4", "--per-channel",
                    "--op-types-to-quantize", "MatMul",
                    "--extra-option", "UseGPTQ=true"], 0.9, "QuantizeLinear"),
    "MatMulNBits HQQ": (NBITS + ['MatMulNBitsParams={"Algorithm": "HQQ", "GroupSize": 32}'], 0.97, "MatMulNBits"),
    "MatMulNBits GPTQ": (NBITS + ['MatMulNBitsParams={"Algorithm": "GPTQ", "GroupSize": 32}'], 0.97, "MatMulNBits"),
}


@pytest.mark.parametrize("name", ["bert", "gpt"])
def test_transformer_configurations_run_in_ort(tmp_path, name):
    model = real_model(name)
    rng = np.random.default_rng(1)
    calib = tmp_path / "calib"
    calib.mkdir()
    for i in range(4):
        np.savez(calib / f"{i}.npz", input_ids=rng.integers(0, 1000, (1, TOKENS)).astype(np.int64))
    ids = np.random.default_rng(2).integers(0, 1000, (2, TOKENS)).astype(np.int64)
    reference = ort_output(model, ids, str(tmp_path / "float"))
    failures = []
    for config, (options, bound, op) in CONFIGS.items():
        out = str(tmp_path / (config.replace(" ", "_") + ".onnx"))
        run_cli("quantize", model, "-o", out, "--calib-data", calib, "--quiet", *options)
        ops = quantize_nodes(out)
        if ops.get(op, 0) == 0:
            failures.append(f"{config}: no {op} written ({ops})")
        y = ort_output(out, ids, out + "_out")
        c = cosine(y, reference)
        print(f"{name} {config}: cosine {c:.5f}")
        if c < bound:
            failures.append(f"{config}: cosine {c:.5f} < {bound}")
    assert not failures, failures
