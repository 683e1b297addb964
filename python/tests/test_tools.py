"""The model tools and dump_model from Python (onnxptq.tools, onnxptq.dump_model, and their Quark
names in onnxptq.quark): each writes a model python3-onnx loads and checks, with what the tool
promises in it; bad input raises onnxptq.Error naming what is wrong. ONNX Runtime runs what they
write in tests/e2e/model_tools_vs_ort_test.cc."""

import os
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxptq
import onnxptq.quark
from onnxptq import tools

from conftest import quantize_nodes, real_model, run_cli


def quantized(src, out, *args):
    run_cli("quantize", src, "-o", out, "--random", "2", "--calibrate-method", "MinMax", "--quiet", *args)
    return str(out)


def test_quark_names_are_the_same_functions():
    assert onnxptq.quark.tools is tools
    assert onnxptq.quark.dump_model is onnxptq.dump_model
    for name in tools.__all__:
        assert callable(getattr(onnxptq.quark.tools, name))


def test_remove_qdq_and_qdq_to_qop(tiny_model, tmp_path):
    q = quantized(tiny_model, tmp_path / "q.onnx", "--activation-type", "QUInt8")
    removed = tools.remove_qdq(q, tmp_path / "removed.onnx")
    assert removed["changed"] > 0
    counts = quantize_nodes(tmp_path / "removed.onnx")
    assert "QuantizeLinear" not in counts
    onnx.checker.check_model(str(tmp_path / "removed.onnx"), full_check=True)
    qop = tools.convert_qdq_to_qop(q, tmp_path / "qop.onnx")
    counts = quantize_nodes(tmp_path / "qop.onnx")
    assert counts.get("QLinearConv") == 1 and "Conv" not in counts
    assert qop["changed"] == sum(v for k, v in counts.items() if k.startswith("QLinear"))
    with pytest.raises(onnxptq.Error, match="the model has no QuantizeLinear or FixNeuron node"):
        tools.remove_qdq(tiny_model, tmp_path / "x.onnx")
    assert not os.path.exists(tmp_path / "x.onnx")
    with pytest.raises(onnxptq.Error, match="no such file"):
        tools.convert_qdq_to_qop(tmp_path / "missing.onnx", tmp_path / "x.onnx")
    with pytest.raises(onnxptq.Error, match="is the input model"):
        tools.remove_qdq(q, q)


def test_fix_shapes(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], "dyn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, "h", "w"])], [w])
    src = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(src))
    tools.convert_dynamic_to_fixed(src, tmp_path / "fixed.onnx", "x:[2,3,5,7]")
    m = onnx.load(str(tmp_path / "fixed.onnx"))
    dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]
    assert dims(m.graph.input[0]) == [2, 3, 5, 7]
    assert dims(m.graph.output[0]) == [2, 4, 5, 7]
    assert [dims(v) for v in m.graph.value_info if v.name == "c"] == [[2, 4, 5, 7]]
    with pytest.raises(onnxptq.Error, match=r"'x:\[2,3\]x' for 'x' is not NAME:\[d1,d2,...\]"):
        tools.fix_shapes(src, tmp_path / "bad.onnx", "x:[2,3]x")
    with pytest.raises(onnxptq.Error, match="input 'x' is float\\[n,3,h,w\\], not fixed"):
        tools.fix_shapes(src, tmp_path / "bad.onnx")
    assert not os.path.exists(tmp_path / "bad.onnx")


def test_bias_and_activation_converters(tmp_path):
    resnet = real_model("resnet18")
    npu = str(tmp_path / "npu.onnx")
    run_cli("quantize", resnet, "-o", npu, "--random", "2", "--config", "A8W8", "--extra-option", "Int32Bias=false",
            "--quiet")
    cpu = onnxptq.quark.tools.convert_a8w8_npu_to_a8w8_cpu(npu, tmp_path / "cpu.onnx")
    m = onnx.load(str(tmp_path / "cpu.onnx"))
    inits = {i.name: i for i in m.graph.initializer}
    producers = {o: n for n in m.graph.node for o in n.output}
    biases = [inits[producers[n.input[2]].input[0]] for n in m.graph.node if n.op_type == "Conv"]
    assert len(biases) == 20 and all(b.data_type == TensorProto.INT32 for b in biases)
    assert cpu["changed"] == 21  # and the classifier's Gemm
    int16 = onnxptq.quark.tools.convert_bias_int32_to_int16(tmp_path / "cpu.onnx", tmp_path / "int16.onnx")
    assert int16["changed"] == 21
    u16 = quantized(resnet, tmp_path / "u16.onnx", "--activation-type", "QUInt16", "--weight-type", "QUInt8")
    u8 = onnxptq.quark.tools.convert_u16u8_to_u8u8(u16, tmp_path / "u8.onnx")
    assert u8["changed"] > 20
    zero_points = [i for i in onnx.load(str(tmp_path / "u8.onnx")).graph.initializer if i.name.endswith("zero_point")]
    assert zero_points and all(z.data_type != TensorProto.UINT16 for z in zero_points)
    with pytest.raises(onnxptq.Error, match="no uint16 activation"):
        tools.convert_u16u8_to_u8u8(tmp_path / "u8.onnx", tmp_path / "again.onnx")


def test_float_converters(tiny_model, tmp_path):
    r = tools.convert_fp32_to_fp16(tiny_model, tmp_path / "fp16.onnx", keep_io_types=True)
    m = onnx.load(str(tmp_path / "fp16.onnx"))
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert all(i.data_type == TensorProto.FLOAT16 for i in m.graph.initializer)
    assert r["changed"] > 0
    tools.convert_fp32_to_fp16(tiny_model, tmp_path / "fp16io.onnx")
    assert onnx.load(str(tmp_path / "fp16io.onnx")).graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    tools.convert_fp32_to_bf16(tiny_model, tmp_path / "bf16.onnx")
    counts = quantize_nodes(tmp_path / "bf16.onnx")
    assert counts.get("Cast", 0) > 0 and "ExtendedQuantizeLinear" not in counts
    tools.convert_fp16_to_bf16(tmp_path / "fp16io.onnx", tmp_path / "bf16from16.onnx")
    m = onnx.load(str(tmp_path / "bf16from16.onnx"))
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    assert m.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    with pytest.raises(onnxptq.UnsupportedError, match="format 'bf16'"):
        tools.convert_fp32_to_bf16(tiny_model, tmp_path / "x.onnx", format="bf16")
    with pytest.raises(onnxptq.Error, match="format 'bf' is not one of"):
        tools.convert_fp32_to_bf16(tiny_model, tmp_path / "x.onnx", format="bf")


class OneSample(onnxptq.CalibrationDataReader):
    def __init__(self, x):
        self.samples = [{"x": x}]

    def get_next(self):
        return self.samples.pop() if self.samples else None


def test_dump_model(tiny_model, tmp_path):
    q = quantized(tiny_model, tmp_path / "q.onnx", "--activation-type", "QUInt8")
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    out = tmp_path / "dump"
    r = onnxptq.quark.dump_model(q, OneSample(x), dump_float=True, output_dir=out)
    assert r["quantized"] > 0 and r["float_tensors"] > 0
    # The graph input quantized: QuantizeLinear's formula on the sample, computed here.
    m = onnx.load(q)
    qnode = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    scale, zp = inits[qnode.input[1]], inits[qnode.input[2]]
    want = np.clip(np.rint(x / scale) + zp.astype(np.int32), 0, 255).astype(np.uint8).ravel()
    dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == qnode.output[0])
    got = np.fromfile(out / (dq.output[0] + ".bin"), dtype=np.uint8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.loadtxt(out / (dq.output[0] + ".txt"), dtype=np.int64), want)
    floats = np.fromfile(out / "y_float.bin", dtype=np.float32) if os.path.exists(out / "y_float.bin") else None
    assert floats is not None and floats.size == 40
    with pytest.raises(onnxptq.Error, match="no DequantizeLinear or FixNeuron node"):
        onnxptq.dump_model(tiny_model, output_dir=tmp_path / "none")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = onnxptq.dump_model(tiny_model, dump_float=True, output_dir=tmp_path / "floats")
    assert r["quantized"] == 0 and r["float_tensors"] == 5
    assert any("only the float values are written" in str(w.message) for w in caught)


def test_block_to_standard_ops(tiny_model, tmp_path):
    q = str(tmp_path / "mx.onnx")
    run_cli("quantize", tiny_model, "-o", q, "--random", "1", "--config", "MXINT8", "--quiet")
    r = tools.convert_block_to_standard_ops(q, tmp_path / "standard.onnx")
    assert r["changed"] > 0
    m = onnx.load(str(tmp_path / "standard.onnx"))
    assert not [n for n in m.graph.node if n.domain == "com.amd.quark"]
    assert any(n.op_type == "ReduceMax" for n in m.graph.node)
    onnx.checker.check_model(m, full_check=True)
    with pytest.raises(onnxptq.Error, match="no com.amd.quark BFPQuantizeDequantize or MXQuantizeDequantize node"):
        tools.convert_block_to_standard_ops(tiny_model, tmp_path / "none.onnx")
