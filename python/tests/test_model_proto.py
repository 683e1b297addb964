"""Quark's quantize_model with an onnx.ModelProto in and out, and calibration_data_path (Quark's
PathDataReader folder layout); vai_q_onnx's quantize_static with a ModelProto."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxptq
from onnxptq import quark
from conftest import real_model


class ListReader:
    """The given samples, once each."""

    def __init__(self, samples):
        self.samples = list(samples)

    def get_next(self):
        return self.samples.pop(0) if self.samples else None


def quantizer(preset="INT8_CNN_DEFAULT", **changes):
    config = quark.get_default_config(preset)
    config.print_summary = False
    for key, value in changes.items():
        setattr(config, key, value)
    return quark.ModelQuantizer(quark.Config(global_quant_config=config))


def test_model_proto_in_and_out_is_the_path_result(tmp_path):
    path = real_model("mobilenet_v2")
    rng = np.random.default_rng(3)
    samples = [{"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(3)]
    out = tmp_path / "by_path.onnx"
    quantizer().quantize_model(path, str(out), ListReader(samples))

    proto = onnx.load(path)
    before = proto.SerializeToString()
    files = sorted(os.listdir(tmp_path))
    result = quantizer().quantize_model(proto, None, ListReader(samples))
    assert isinstance(result, onnx.ModelProto)
    assert result.SerializeToString() == onnx.load(str(out)).SerializeToString()
    assert proto.SerializeToString() == before  # the input is not changed
    assert sorted(os.listdir(tmp_path)) == files  # nothing written


def test_model_proto_to_a_file_and_path_to_a_model_proto(tiny_model, tmp_path):
    samples = [{"x": np.full((1, 3, 8, 8), v, np.float32)} for v in (-1.0, 2.0)]
    out = tmp_path / "q.onnx"
    report = quantizer().quantize_model(onnx.load(tiny_model), str(out), ListReader(samples))
    assert "quantized_nodes_by_op_type" in report  # the report, as with a path
    returned = quantizer().quantize_model(tiny_model, calibration_data_reader=ListReader(samples))
    assert returned.SerializeToString() == onnx.load(str(out)).SerializeToString()


def test_vai_quantize_static_takes_a_model_proto(tiny_model, tmp_path):
    samples = [{"x": np.full((1, 3, 8, 8), v, np.float32)} for v in (-1.0, 2.0)]
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnxptq.quantize_static(tiny_model, str(a), ListReader(samples), print_summary=False)
    onnxptq.quantize_static(onnx.load(tiny_model), str(b), ListReader(samples), print_summary=False)
    assert a.read_bytes() == b.read_bytes()
    with pytest.raises(TypeError, match="model_output: expected a file path"):
        onnxptq.quantize_static(tiny_model, None, ListReader(samples))


def test_model_proto_with_external_data_left_out_is_refused(tiny_model, tmp_path):
    model = onnx.load(tiny_model)
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.data",
              size_threshold=0)
    proto = onnx.load(str(path), load_external_data=False)
    with pytest.raises(onnxptq.Error) as e:
        quantizer().quantize_model(proto, None, None)
    message = str(e.value)
    assert "\n" not in message and "stores its data in the external file 'ext.data'" in message


def test_model_proto_of_a_corrupt_model_is_one_line(tmp_path):
    proto = onnx.ModelProto()
    proto.graph.node.add(op_type="Relu", input=["nothing"], output=["y"])
    with pytest.raises(onnxptq.Error) as e:
        quantizer().quantize_model(proto, None, None)
    assert "\n" not in str(e.value) and str(e.value).startswith("model_input (ModelProto)")


def two_input_model(path):
    """y = Conv(a) + Conv(b): inputs 'a' [1,2,4,4] and 'b' [1,2,4,4], float."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((2, 2, 1, 1)).astype(np.float32), n) for n in ("wa", "wb")]
    nodes = [helper.make_node("Conv", ["a", "wa"], ["ca"], name="conv_a"),
             helper.make_node("Conv", ["b", "wb"], ["cb"], name="conv_b"),
             helper.make_node("Add", ["ca", "cb"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 4])
                                             for n in ("a", "b")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_calibration_data_path_single_input_is_the_readers_result(tiny_model, tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    rng = np.random.default_rng(7)
    samples = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) * (i + 1) for i in range(4)]
    for i, x in enumerate(samples):
        # Without the batch dimension and as float64, as PathDataReader takes them.
        np.save(folder / f"calib_{i + 1:06d}.npy", x[0].astype(np.float64))
    by_reader = quantizer().quantize_model(tiny_model, None, ListReader([{"x": x} for x in samples]))
    by_path = quantizer().quantize_model(tiny_model, None, calibration_data_path=str(folder))
    assert by_path.SerializeToString() == by_reader.SerializeToString()
    # The samples matter: the first one alone gives other ranges.
    by_one = quantizer().quantize_model(tiny_model, None, ListReader([{"x": samples[0]}]))
    assert by_one.SerializeToString() != by_path.SerializeToString()


def test_calibration_data_path_multi_input_reads_one_folder_per_input(tmp_path):
    model = two_input_model(tmp_path / "two.onnx")
    rng = np.random.default_rng(9)
    samples = [{n: rng.standard_normal((1, 2, 4, 4)).astype(np.float32) * s for n, s in (("a", 1), ("b", 5))}
               for _ in range(3)]
    for name in ("a", "b"):
        (tmp_path / "calib" / name).mkdir(parents=True)
        for i, sample in enumerate(samples):
            np.save(tmp_path / "calib" / name / f"calib_{i + 1:06d}.npy", sample[name])
    by_reader = quantizer().quantize_model(model, None, ListReader(samples))
    by_path = quantizer().quantize_model(model, None, calibration_data_path=str(tmp_path / "calib"))
    assert by_path.SerializeToString() == by_reader.SerializeToString()

    os.remove(tmp_path / "calib" / "b" / "calib_000002.npy")
    with pytest.raises(onnxptq.Error, match="'calib_000002.npy' is in the folder of input 'a' but not in that "
                                            "of input 'b'"):
        quantizer().quantize_model(model, None, calibration_data_path=str(tmp_path / "calib"))


@pytest.mark.parametrize("layout,message", [
    ("empty", "no .npy files in it or in its sub-folder 'x'"),
    ("missing", "no such folder"),
    ("shape", r"array of shape \[2, 8, 8\] for input 'x' of shape \[1, 3, 8, 8\]"),
    ("dtype", "array of complex64 for input 'x' of float32"),
])
def test_calibration_data_path_errors_name_the_file(tiny_model, tmp_path, layout, message):
    folder = tmp_path / "calib"
    if layout != "missing":
        folder.mkdir()
    if layout == "shape":
        np.save(folder / "calib_000001.npy", np.zeros((2, 8, 8), np.float32))
    if layout == "dtype":
        np.save(folder / "calib_000001.npy", np.zeros((1, 3, 8, 8), np.complex64))
    with pytest.raises(onnxptq.Error, match=message) as e:
        quantizer().quantize_model(tiny_model, None, calibration_data_path=str(folder))
    assert "\n" not in str(e.value)


def test_calibration_data_path_and_a_reader_contradict(tiny_model, tmp_path):
    with pytest.raises(onnxptq.Error, match="give calibration_data_reader or calibration_data_path, not both"):
        quantizer().quantize_model(tiny_model, None, ListReader([]), calibration_data_path=str(tmp_path))
