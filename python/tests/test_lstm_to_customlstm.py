"""Quark's convert_lstm_to_customlstm from Python (onnxptq.quark.tools): an ONNX LSTM between
uint16 Q/DQ nodes, made here with python3-onnx, comes back as Quark's com.amd.quark ExtendedLSTM
with the Q/DQ parameters as its attributes (the ones Quark's tool copies), the model given left
unchanged; the CLI command writes the same node; bad input raises onnxptq.Error naming the LSTM."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxptq
import onnxptq.quark

from conftest import run_cli

SEQ, INPUT, HIDDEN = 5, 3, 4


def u16(name, value):
    return numpy_helper.from_array(np.array(value, np.uint16), name)


def f32(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def lstm_model(direction="bidirectional", y_zero_point=32768):
    rng = np.random.default_rng(0)
    dirs = 2 if direction == "bidirectional" else 1
    inits = []
    nodes = []
    params = {"X": (1e-4, 32000), "W": (1e-5, 32768), "R": (2e-5, 33000), "B": (3e-5, 32768),
              "Y": (3e-5, y_zero_point)}
    for name, (scale, zp) in params.items():
        inits += [f32(name + "_scale", scale), u16(name + "_zp", zp)]
    shapes = {"W": (dirs, 4 * HIDDEN, INPUT), "R": (dirs, 4 * HIDDEN, HIDDEN), "B": (dirs, 8 * HIDDEN)}
    for name, shape in shapes.items():
        inits.append(u16(name + "_q", rng.integers(32000, 33500, shape)))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_scale", name + "_zp"], [name]))
    nodes += [
        helper.make_node("QuantizeLinear", ["x", "X_scale", "X_zp"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "X_scale", "X_zp"], ["X"]),
        helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h"], name="lstm", direction=direction,
                         hidden_size=HIDDEN),
        helper.make_node("QuantizeLinear", ["Y", "Y_scale", "Y_zp"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "Y_scale", "Y_zp"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [SEQ, 1, INPUT])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SEQ, dirs, 1, HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_lstm_becomes_extended_lstm_with_the_qdq_parameters():
    model = lstm_model(y_zero_point=30000)
    before = model.SerializeToString()
    converted = onnxptq.quark.tools.convert_lstm_to_customlstm(model)
    assert model.SerializeToString() == before
    assert isinstance(converted, onnx.ModelProto)
    ops = [n.op_type for n in converted.graph.node]
    assert "LSTM" not in ops and ops.count("ExtendedLSTM") == 1
    node = next(n for n in converted.graph.node if n.op_type == "ExtendedLSTM")
    assert node.domain == "com.amd.quark" and node.name == "lstm"
    assert list(node.input) == ["X", "W", "R", "B"] and list(node.output) == ["Y"]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["x_zero_point"] == 32000 and attrs["r_zero_point"] == 33000 and attrs["y_zero_point"] == 30000
    assert attrs["x_scale"] == pytest.approx(1e-4, rel=1e-7) and attrs["y_scale"] == pytest.approx(3e-5, rel=1e-7)
    assert attrs["direction"] == b"bidirectional" and attrs["hidden_size"] == HIDDEN and attrs["layout"] == 0
    assert {o.domain: o.version for o in converted.opset_import}.get("com.amd.quark") == 1
    # The Q/DQ nodes stay, as Quark leaves them.
    assert ops.count("DequantizeLinear") == 5 and ops.count("QuantizeLinear") == 2


def test_the_command_writes_the_same(tmp_path):
    src, out = tmp_path / "lstm.onnx", tmp_path / "custom.onnx"
    onnx.save(lstm_model(), str(src))
    run_cli("lstm-to-customlstm", src, "-o", out)
    written = onnx.load(str(out))
    same = onnxptq.quark.tools.convert_lstm_to_customlstm(lstm_model())
    assert [n.op_type for n in written.graph.node] == [n.op_type for n in same.graph.node]
    a = next(n for n in written.graph.node if n.op_type == "ExtendedLSTM")
    b = next(n for n in same.graph.node if n.op_type == "ExtendedLSTM")
    assert a.SerializeToString() == b.SerializeToString()


def test_the_command_refuses_in_one_line(tmp_path):
    src = tmp_path / "forward.onnx"
    onnx.save(lstm_model(direction="forward"), str(src))
    proc = run_cli("lstm-to-customlstm", src, "-o", tmp_path / "out.onnx", check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"error: {src}: LSTM 'lstm' has direction forward")
    assert not (tmp_path / "out.onnx").exists()


def test_refusals_name_the_lstm():
    with pytest.raises(onnxptq.Error, match="LSTM 'lstm' has direction forward: Quark's ExtendedLSTM computes "
                                            "bidirectional only"):
        onnxptq.quark.tools.convert_lstm_to_customlstm(lstm_model(direction="forward"))
    with pytest.raises(TypeError, match="expected an onnx.ModelProto"):
        onnxptq.quark.tools.convert_lstm_to_customlstm("model.onnx")
    plain = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]), opset_imports=[helper.make_opsetid("", 14)])
    with pytest.raises(onnxptq.Error, match="the model has no LSTM node"):
        onnxptq.quark.tools.convert_lstm_to_customlstm(plain)


def float_lstm_model():
    rng = np.random.default_rng(1)
    inits = [f32("W", rng.uniform(-0.5, 0.5, (2, 4 * HIDDEN, INPUT))),
             f32("R", rng.uniform(-0.5, 0.5, (2, 4 * HIDDEN, HIDDEN))),
             f32("B", rng.uniform(-0.1, 0.1, (2, 8 * HIDDEN)))]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y"], name="lstm", direction="bidirectional",
                              hidden_size=HIDDEN),
             helper.make_node("Relu", ["Y"], ["y"])]
    graph = helper.make_graph(
        nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [SEQ, 1, INPUT])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SEQ, 2, 1, HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_quantize_static_with_convert_lstm_to_custom_lstm(tmp_path):
    """onnxptq's own extra option: the quantizer writes the LSTM as ExtendedLSTM, uint16, Y over
    h's bound [-1, 1]; power-of-two scales are refused by name."""
    src, out = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(float_lstm_model(), str(src))
    onnxptq.quantize_static(str(src), str(out), None, calibrate_method=onnxptq.CalibrationMethod.MinMax,
                            extra_options={"ConvertLSTMToCustomLSTM": True}, print_summary=False)
    q = onnx.load(str(out))
    ops = [n.op_type for n in q.graph.node]
    assert "LSTM" not in ops and ops.count("ExtendedLSTM") == 1
    node = next(n for n in q.graph.node if n.op_type == "ExtendedLSTM")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["y_scale"] == pytest.approx(2 / 65535, rel=1e-6)
    assert attrs["y_zero_point"] in (32767, 32768)
    for name in ("x", "w", "r", "b"):
        assert 0 <= attrs[name + "_zero_point"] <= 65535 and attrs[name + "_scale"] > 0
    # W's DequantizeLinear reads uint16 codes with the node's parameters.
    inits = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
    dq = next(n for n in q.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == node.input[1])
    assert inits[dq.input[0]].dtype == np.uint16
    assert float(inits[dq.input[1]]) == pytest.approx(attrs["w_scale"], rel=1e-7)
    assert int(inits[dq.input[2]]) == attrs["w_zero_point"]
    with pytest.raises(onnxptq.Error, match="ConvertLSTMToCustomLSTM with power-of-two scales"):
        onnxptq.quantize_static(str(src), str(tmp_path / "p.onnx"), None,
                                extra_options={"ConvertLSTMToCustomLSTM": True}, print_summary=False)
