"""`import onnxptq as vai_q_onnx`: the seed's script runs with only its import changed, and writes
the bytes `onnxptq quantize` writes with the same options."""

import enum
import inspect
import os

import numpy as np
import pytest

import onnxptq
import onnxptq as vai_q_onnx
from conftest import quantize_nodes, real_model, run_cli, run_python, write_samples

# The vai_q_onnx user guide, "Recommended Configurations" / "CNNs on CPU", written around a reader
# of the seeds' shape (the CalibDataReader on .npy files of Quark's A8W8/A16W8 guide). Only the
# import lines differ from the seeds.
SEED_CNNS_ON_CPU = '''
import os
import sys

import numpy as np
import onnxptq as vai_q_onnx  # the seed: import vai_q_onnx
from onnxptq import CalibrationDataReader  # the seed: from onnxruntime.quantization.calibrate import ...

model_input, model_output, calib_data_folder = sys.argv[1:4]
model_input_name = 'input'

class CalibDataReader(CalibrationDataReader):
    def __init__(self, calib_data_folder: str, model_input_name: str):
        self.input_name = model_input_name
        self.data = self._load_calibration_data(calib_data_folder)
        self.data_iter = None

    def _load_calibration_data(self, data_folder: str):
        return [np.load(os.path.join(data_folder, f)) for f in sorted(os.listdir(data_folder))]

    def get_next(self):
        if self.data_iter is None:
            self.data_iter = iter([{self.input_name: data} for data in self.data])
        return next(self.data_iter, None)

calibration_data_reader = CalibDataReader(calib_data_folder, model_input_name)

vai_q_onnx.quantize_static(
   model_input,
   model_output,
   calibration_data_reader,
   quant_format=vai_q_onnx.QuantFormat.QDQ,
   calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
   activation_type=vai_q_onnx.QuantType.QUInt8,
   weight_type=vai_q_onnx.QuantType.QInt8
)
'''


def test_seed_cnns_on_cpu_script_writes_the_cli_bytes(tmp_path):
    model = real_model("resnet18")
    calib = tmp_path / "calib"
    write_samples(calib, (1, 3, 224, 224), 3)
    proc = run_python(SEED_CNNS_ON_CPU, model, tmp_path / "py.onnx", calib)
    assert proc.returncode == 0, proc.stderr
    assert "quantized nodes by op type" in proc.stdout  # print_summary=True
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--calib-data", calib, "--quant-format", "QDQ",
            "--calibrate-method", "MinMax", "--activation-type", "QUInt8", "--weight-type", "QInt8", "--quiet")
    py_bytes = (tmp_path / "py.onnx").read_bytes()
    assert py_bytes == (tmp_path / "cli.onnx").read_bytes()
    ops = quantize_nodes(tmp_path / "py.onnx")
    assert ops.get("QuantizeLinear", 0) > 0 and ops.get("DequantizeLinear", 0) > ops["QuantizeLinear"]


# The vai_q_onnx user guide, "Quantizing Using the vai_q_onnx API": the signature and its defaults,
# with the argument list's `include_cle` for the code block's misspelt `inclue_cle`.
SEED_SIGNATURE = [
    ("model_input", inspect.Parameter.empty),
    ("model_output", inspect.Parameter.empty),
    ("calibration_data_reader", inspect.Parameter.empty),
    ("quant_format", vai_q_onnx.QuantFormat.QDQ),
    ("calibrate_method", vai_q_onnx.PowerOfTwoMethod.MinMSE),
    ("input_nodes", []),
    ("output_nodes", []),
    ("op_types_to_quantize", []),
    ("random_data_reader_input_shape", []),
    ("per_channel", False),
    ("reduce_range", False),
    ("activation_type", vai_q_onnx.QuantType.QInt8),
    ("weight_type", vai_q_onnx.QuantType.QInt8),
    ("nodes_to_quantize", None),
    ("nodes_to_exclude", None),
    ("optimize_model", True),
    ("use_external_data_format", False),
    ("execution_providers", ['CPUExecutionProvider']),
    ("enable_dpu", False),
    ("convert_fp16_to_fp32", False),
    ("convert_nchw_to_nhwc", False),
    ("include_cle", False),
    ("extra_options", {}),
]


def test_quantize_static_has_the_seed_signature():
    params = list(inspect.signature(vai_q_onnx.quantize_static).parameters.values())
    positional = [p for p in params if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert [(p.name, p.default) for p in positional] == SEED_SIGNATURE
    keyword_only = {p.name: p.default for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY}
    # vai_q_onnx 1.16's own names and switches (its quantize_static, vai_q_onnx/quantize.py).
    assert keyword_only == {"inclue_cle": None, "fp16_fp32_convert": None, "debug_mode": False,
                            "print_summary": True, "extra_op_types_to_quantize": None,
                            "subgraphs_to_exclude": None, "accuracy_target": None, "progress_callback": None}


def test_enums_have_the_spec_values():
    # vai_q_onnx 1.16's enums (QuantFormat, QuantType and CalibrationMethod from ONNX Runtime)
    def members(e):
        return {m.name: m.value for m in e}
    assert members(vai_q_onnx.QuantFormat) == {"QOperator": 0, "QDQ": 1}
    assert members(vai_q_onnx.VitisQuantFormat) == {"QDQ": 2, "FixNeuron": 3, "BFPFixNeuron": 4}
    assert {"QInt8": 0, "QUInt8": 1}.items() <= members(vai_q_onnx.QuantType).items()
    assert members(vai_q_onnx.VitisQuantType) == {"QInt16": 3, "QUInt16": 4, "QInt32": 5, "QUInt32": 6,
                                                  "QFloat16": 7, "QBFloat16": 8}
    assert {"MinMax": 0, "Entropy": 1, "Percentile": 2}.items() <= members(vai_q_onnx.CalibrationMethod).items()
    assert members(vai_q_onnx.PowerOfTwoMethod) == {"NonOverflow": 0, "MinMSE": 1}
    for e in (vai_q_onnx.QuantFormat, vai_q_onnx.QuantType, vai_q_onnx.CalibrationMethod):
        assert issubclass(e, enum.Enum)


def cli_error(*args):
    proc = run_cli(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ")
    return proc.stderr[len("error: "):].strip()


@pytest.mark.parametrize("key,value,cli_value", [
    ("NoSuchOption", True, "true"),
    ("CLESteps", 1.5, "1.5"),
    ("FastFinetune", True, "true"),
    ("CalibMovingAverage", "yes", "yes"),
])
def test_extra_option_errors_are_the_cores_messages(tiny_model, tmp_path, key, value, cli_value):
    expected = cli_error("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--extra-option", f"{key}={cli_value}")
    with pytest.raises(onnxptq.Error) as error:
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "py.onnx"), None, extra_options={key: value},
                                   print_summary=False)
    assert str(error.value) == expected
    assert key in expected
    assert not (tmp_path / "py.onnx").exists()


def test_unsupported_execution_provider_is_the_cores_message(tiny_model, tmp_path):
    with pytest.raises(onnxptq.Error, match="CUDAExecutionProvider"):
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None,
                                   execution_providers=["CUDAExecutionProvider"])


def test_error_kinds_are_python_exception_classes(tiny_model, tmp_path):
    # A feature onnxptq does not have is an UnsupportedError (also a NotImplementedError and an
    # onnxptq.Error); a bad value stays a plain onnxptq.Error (a ValueError).
    with pytest.raises(onnxptq.UnsupportedError, match="HQQ") as unsupported:
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None,
                                   extra_options={"UseMatMulNBits": True,
                                                  "MatMulNBitsParams": {"Algorithm": "HQQ", "Bits": 8}})
    assert isinstance(unsupported.value, NotImplementedError) and isinstance(unsupported.value, onnxptq.Error)
    with pytest.raises(onnxptq.Error) as bad:
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None, extra_options={"CLESteps": 1.5})
    assert not isinstance(bad.value, onnxptq.UnsupportedError) and isinstance(bad.value, ValueError)


def test_progress_reaches_a_callback_and_the_logging_module(tiny_model, tmp_path, caplog):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 5, seed=2)

    class Folder(vai_q_onnx.CalibrationDataReader):
        def __init__(self):
            self.files = sorted((tmp_path / "calib").iterdir())

        def get_next(self):
            return {"x": np.load(self.files.pop(0))} if self.files else None

    calls = []
    with caplog.at_level("DEBUG", logger="onnxptq"):
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), Folder(), print_summary=False,
                                   calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                                   progress_callback=lambda *a: calls.append(a))
    samples = [c for c in calls if c[0] == "calibration data"]
    # The last pass over the data (an earlier one may read a sample to learn the shapes).
    assert [c[1] for c in samples][-5:] == [1, 2, 3, 4, 5] and all(c[3] == "samples" for c in samples)
    assert any("calibration data: 5 of" in r.getMessage() for r in caplog.records)


def test_enable_dpu_reaches_the_core(tiny_model, tmp_path):
    # The dpu quantizer's constraint (ActivationSymmetric) is the core's; with it the model is written.
    with pytest.raises(onnxptq.Error, match="enable_dpu: ActivationSymmetric"):
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None, enable_dpu=True)
    vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "q.onnx"), None, enable_dpu=True,
                               activation_type=vai_q_onnx.QuantType.QUInt8,
                               extra_options={"ActivationSymmetric": True}, print_summary=False)
    assert (tmp_path / "q.onnx").exists()


def test_extra_options_reach_the_core(tiny_model, tmp_path):
    # ActivationSymmetric with uint8 activations: ORT's symmetric range 0..254, zero point 127
    # (ONNX Runtime's get_qmin_qmax_for_qType, quantization/quant_utils.py), whatever the data;
    # not so without it.
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2)
    args = ["--calib-data", tmp_path / "calib", "--calibrate-method", "MinMax", "--activation-type", "QUInt8"]
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", *args, "--extra-option", "ActivationSymmetric=true",
            "--quiet")
    reader = FolderReader(tmp_path / "calib", "x")
    vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "py.onnx"), reader,
                               calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                               activation_type=vai_q_onnx.QuantType.QUInt8,
                               extra_options={"ActivationSymmetric": True}, print_summary=False)
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    import onnx
    from onnx import numpy_helper
    zero_points = [numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "py.onnx")).graph.initializer
                   if t.name.endswith("_zero_point") and t.data_type == onnx.TensorProto.UINT8]
    assert zero_points and all(int(z) == 127 for z in zero_points)


def test_random_reader_with_seed_shape_forms(tmp_path):
    import onnx
    from onnx import TensorProto, helper
    # A dynamic batch and size: the shape comes from random_data_reader_input_shape.
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 1, 1], [0.5, -1, 2, 0.25, 1, -0.5])])
    model = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(model))
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--random", "1", "--random-shape", "x=1x2x6x5",
            "--calibrate-method", "MinMax", "--quiet")
    for i, shape in enumerate(([1, 2, 6, 5], (-1, 2, 6, 5), [[1, 2, 6, 5]], {"x": [1, 2, 6, 5]})):
        out = tmp_path / f"py{i}.onnx"
        vai_q_onnx.quantize_static(str(model), str(out), None, calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                                   random_data_reader_input_shape=shape, print_summary=False)
        assert out.read_bytes() == (tmp_path / "cli.onnx").read_bytes(), shape
    with pytest.raises(onnxptq.Error, match="random_data_reader_input_shape"):
        vai_q_onnx.quantize_static(str(model), str(tmp_path / "bad.onnx"), None,
                                   random_data_reader_input_shape={"nope": [1, 2, 3, 3]})


@pytest.mark.parametrize("argument,cli_flag", [("convert_fp16_to_fp32", "--convert-fp16-to-fp32"),
                                               ("fp16_fp32_convert", "--convert-fp16-to-fp32"),
                                               ("convert_nchw_to_nhwc", "--convert-nchw-to-nhwc")])
def test_format_conversions_are_the_clis(tiny_model, tmp_path, argument, cli_flag):
    import onnx
    from onnx import TensorProto, numpy_helper
    model, dtype = tiny_model, np.float32
    if cli_flag == "--convert-fp16-to-fp32":  # a float16 copy of the tiny model, fed float16 samples
        m = onnx.load(tiny_model)
        for i, t in enumerate(m.graph.initializer):
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
        for v in list(m.graph.input) + list(m.graph.output):
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
        model, dtype = str(tmp_path / "fp16.onnx"), np.float16
        onnx.save(m, model)
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2, dtype=dtype)  # NCHW samples, transposed for NHWC
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", cli_flag, "--quiet")
    vai_q_onnx.quantize_static(model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"),
                               calibrate_method=vai_q_onnx.CalibrationMethod.MinMax, print_summary=False,
                               **{argument: True})
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    x = onnx.load(str(tmp_path / "py.onnx")).graph.input[0].type.tensor_type
    assert x.elem_type == TensorProto.FLOAT
    dims = [d.dim_value for d in x.shape.dim]
    assert dims == ([1, 8, 8, 3] if argument == "convert_nchw_to_nhwc" else [1, 3, 8, 8])


def test_optimize_model_false_is_the_clis_no_optimize_model(tiny_model, tmp_path):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2)
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", "--no-optimize-model", "--quiet")
    vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"),
                               calibrate_method=vai_q_onnx.CalibrationMethod.MinMax, optimize_model=False,
                               print_summary=False)
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_use_external_data_format_writes_a_data_file(tiny_model, tmp_path):
    out = tmp_path / "q.onnx"
    vai_q_onnx.quantize_static(tiny_model, str(out), None, calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                               use_external_data_format=True, print_summary=False)
    assert (tmp_path / "q.onnx.data").exists()


class FolderReader:
    """A duck-typed reader (no base class) of .npy files, with rewind()."""

    def __init__(self, folder, name):
        self.files = sorted(os.path.join(folder, f) for f in os.listdir(folder))
        self.name = name
        self.i = 0
        self.rewinds = 0

    def get_next(self):
        if self.i >= len(self.files):
            return None
        self.i += 1
        return {self.name: np.load(self.files[self.i - 1])}

    def rewind(self):
        self.i = 0
        self.rewinds += 1


@pytest.mark.parametrize("fmt,cli_name", [
    (vai_q_onnx.QuantFormat.QDQ, "QDQ"),
    (vai_q_onnx.QuantFormat.QOperator, "QOperator"),
    (vai_q_onnx.VitisQuantFormat.QDQ, "VitisQuantFormat.QDQ"),
    (vai_q_onnx.VitisQuantFormat.FixNeuron, "VitisQuantFormat.FixNeuron"),
    (vai_q_onnx.VitisQuantFormat.BFPFixNeuron, "VitisQuantFormat.BFPFixNeuron"),
])
def test_each_quant_format_is_the_clis(tiny_model, tmp_path, fmt, cli_name):
    # Whatever the core does with a format (write it, or refuse it naming it), Python does the same.
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2)
    cli = run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
                  "--quant-format", cli_name, "--calibrate-method", "NonOverflow", "--quiet", check=False)
    call = dict(quant_format=fmt, calibrate_method=vai_q_onnx.PowerOfTwoMethod.NonOverflow, print_summary=False)
    if cli.returncode == 0:
        vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"),
                                   **call)
        assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    else:
        with pytest.raises(onnxptq.Error) as error:
            vai_q_onnx.quantize_static(tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"),
                                       **call)
        assert f"error: {error.value}\n" == cli.stderr


@pytest.mark.parametrize("argument", ["include_cle", "inclue_cle"])
def test_include_cle_is_the_clis_include_cle(tmp_path, argument):
    # Cross-layer equalization changes mobilenet_v2's weights (its CLE pairs through Clip(0, 6)
    # once ReplaceClip6Relu turns them into Relu): other bytes than without it.
    model = real_model("mobilenet_v2")
    write_samples(tmp_path / "calib", (1, 3, 224, 224), 2)
    args = ["--calib-data", tmp_path / "calib", "--calibrate-method", "MinMax", "--quiet"]
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", *args, "--include-cle", "--extra-option",
            "ReplaceClip6Relu=true")
    run_cli("quantize", model, "-o", tmp_path / "plain.onnx", *args)
    vai_q_onnx.quantize_static(model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "input"),
                               calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                               extra_options={"ReplaceClip6Relu": True}, print_summary=False, **{argument: True})
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    assert (tmp_path / "plain.onnx").read_bytes() != (tmp_path / "cli.onnx").read_bytes()
