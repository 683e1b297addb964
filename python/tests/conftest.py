"""Shared pieces of the Python tests: the CLI, the real models, a tiny model made with
python3-onnx, and calibration samples on disk. Run by CTest (python/CMakeLists.txt), which sets
PYTHONPATH to the build's python/ folder and ONNXPTQ_CLI, ONNXPTQ_MODELS_DIR."""

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

CLI = os.environ.get("ONNXPTQ_CLI", "")
MODELS_DIR = os.environ.get("ONNXPTQ_MODELS_DIR", "")


def run_cli(*args, check=True):
    """`onnxptq ARGS...`; returns the CompletedProcess (text)."""
    assert CLI, "ONNXPTQ_CLI is not set (run the tests through CTest)"
    proc = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"onnxptq {' '.join(map(str, args))} failed:\n{proc.stderr}")
    return proc


def run_python(script, *args, cwd=None):
    """Runs a script with this interpreter and the same PYTHONPATH; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def real_model(name):
    path = os.path.join(MODELS_DIR, name + ".onnx")
    assert os.path.exists(path), f"{path} is missing (CTest's export_torchvision_models fixture makes it)"
    return path


def write_samples(folder, shape, count, seed=0, dtype=np.float32):
    """`count` seeded normal samples as folder/sample_<i>.npy (file-name order = sample order)."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(count):
        x = rng.standard_normal(shape).astype(dtype)
        np.save(os.path.join(folder, f"sample_{i}.npy"), x)
        samples.append(x)
    return samples


@pytest.fixture
def tiny_model(tmp_path):
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm, input 'x' [1,3,8,8] float, opset 13."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((40, 64)).astype(np.float32), "fc")
    fcb = numpy_helper.from_array(rng.standard_normal(40).astype(np.float32), "fcb")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], name="gemm", transB=1),
    ]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40])], [w, b, fc, fcb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    return str(path)


def quantize_nodes(path):
    """Op type counts of a model file (python3-onnx reads it)."""
    counts = {}
    for node in onnx.load(str(path)).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
