"""onnxptq.quark: the seed's A8W8 script with only its imports changed, presets by Quark's
DefaultConfigMapping, and the bytes of `onnxptq quantize` with the same options."""

import dataclasses

import onnx
import pytest

import onnxptq
from onnxptq import quark
from conftest import quantize_nodes, real_model, run_cli, run_python, write_samples

# Quark's A8W8/A16W8 guide, "How to Quantize a Float Model with A8W8/A16W8 Config", with its
# imports changed and the data loading filled in (the seed leaves it to the user). PRESET is
# replaced per test.
SEED_A8W8 = '''
import os
import sys

import numpy as np
from onnxptq import CalibrationDataReader  # the seed: from onnxruntime.quantization.calibrate import ...
from onnxptq.quark import Config, get_default_config  # the seed: from quark.onnx.quantization.config import ...
from onnxptq.quark import ModelQuantizer  # the seed: from quark.onnx import ModelQuantizer

# Define model paths
float_model_path, quantized_model_path, calib_data_folder = sys.argv[1:4]
model_input_name = 'input'

# Define calibration data reader for static quantization
class CalibDataReader(CalibrationDataReader):
    def __init__(self, calib_data_folder: str, model_input_name: str):
        self.input_name = model_input_name
        self.data = self._load_calibration_data(calib_data_folder)
        self.data_iter = None

    # Customize this function to preprocess calibration datasets as needed
    def _load_calibration_data(self, data_folder: str):
        processed_data = [np.load(os.path.join(data_folder, f)) for f in sorted(os.listdir(data_folder))]
        return processed_data

    def get_next(self):
        if self.data_iter is None:
            self.data_iter = iter([{self.input_name: data} for data in self.data])
        return next(self.data_iter, None)

# Instantiate the calibration data reader
calib_data_reader = CalibDataReader(calib_data_folder, model_input_name)

# Set up quantization with a specified configuration
quant_config = get_default_config("PRESET")
quantization_config = Config(global_quant_config=quant_config )
quantizer = ModelQuantizer(quantization_config)

# Quantize the ONNX model and save to specified path
quantizer.quantize_model(float_model_path, quantized_model_path, calib_data_reader)
'''


@pytest.mark.parametrize("preset,cli_options", [
    # Quark's DefaultConfigMapping: QDQ, Percentile, u8/s8, ForceQuantizeNoInputCheck.
    ("U8S8_AAWS", ["--calibrate-method", "Percentile", "--activation-type", "QUInt8", "--weight-type", "QInt8",
                   "--extra-option", "ForceQuantizeNoInputCheck=true"]),
    # QDQ, MinMax, u8/s8, ForceQuantizeNoInputCheck.
    ("INT8_CNN_DEFAULT", ["--calibrate-method", "MinMax", "--activation-type", "QUInt8", "--weight-type", "QInt8",
                          "--extra-option", "ForceQuantizeNoInputCheck=true"]),
])
def test_seed_a8w8_script_with_a_built_preset_writes_the_cli_bytes(tmp_path, preset, cli_options):
    model = real_model("mobilenet_v2")
    write_samples(tmp_path / "calib", (1, 3, 224, 224), 2)
    proc = run_python(SEED_A8W8.replace("PRESET", preset), model, tmp_path / "py.onnx", tmp_path / "calib")
    assert proc.returncode == 0, proc.stderr
    # Quark's include_cle is True by default: --include-cle.
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib", "--quant-format", "QDQ",
            "--include-cle", *cli_options, "--quiet")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    assert quantize_nodes(tmp_path / "py.onnx").get("QuantizeLinear", 0) > 0


def test_quantization_config_defaults_are_the_specs():
    # Quark's QuantizationConfig (quark.onnx).
    c = quark.QuantizationConfig()
    assert c.calibrate_method == onnxptq.CalibrationMethod.MinMax
    assert c.quant_format == onnxptq.QuantFormat.QDQ
    assert c.activation_type == onnxptq.QuantType.QInt8 and c.weight_type == onnxptq.QuantType.QInt8
    assert c.execution_providers == ['CPUExecutionProvider']
    assert c.optimize_model is True and c.print_summary is True and c.ignore_warnings is True
    assert c.log_severity_level == 1 and c.extra_options == {} and c.algorithms is None
    for f in ("per_channel", "reduce_range", "use_dynamic_quant", "use_external_data_format", "include_sq",
              "include_fast_ft", "enable_npu_cnn", "enable_npu_transformer", "debug_mode", "crypto_mode"):
        assert getattr(c, f) is False, f
    assert [f.name for f in dataclasses.fields(quark.Config)] == ["global_quant_config"]


def test_presets_follow_the_spec_table():
    c = quark.get_default_config("U8S8_AAWS")
    assert (c.quant_format, c.calibrate_method, c.activation_type, c.weight_type) == (
        onnxptq.QuantFormat.QDQ, onnxptq.CalibrationMethod.Percentile, onnxptq.QuantType.QUInt8,
        onnxptq.QuantType.QInt8)
    assert c.extra_options == {"ForceQuantizeNoInputCheck": True}
    c = quark.get_default_config("S8S8_AAWS")
    assert c.extra_options == {"Percentile": 99.9999, "ForceQuantizeNoInputCheck": True}
    c = quark.get_default_config("U8U8_AAWA")
    assert c.extra_options == {"ActivationSymmetric": False, "WeightSymmetric": False,
                               "ForceQuantizeNoInputCheck": True}
    assert c.weight_type == onnxptq.QuantType.QUInt8
    # Each call gives a new object.
    a, b = quark.get_default_config("U8S8_AAWS"), quark.get_default_config("U8S8_AAWS")
    a.extra_options["X"] = 1
    assert "X" not in b.extra_options


def test_unknown_preset_is_a_value_error():
    with pytest.raises(ValueError, match="unknown preset 'NOPE'"):
        quark.get_default_config("NOPE")


def test_unbuilt_fields_and_options_raise_at_quantize(tiny_model, tmp_path):
    for change in (dict(extra_options={"CalibPassthroughOpTypes": ["Reshape"]}),
                   dict(extra_options={"UseMatMulNBits": True, "MatMulNBitsParams": {"Algorithm": "HQQ", "Bits": 8}})):
        q = dataclasses.replace(quark.QuantizationConfig(), **change)
        with pytest.raises(onnxptq.Error, match="not built|4 bits only"):
            quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(tiny_model,
                                                                                    str(tmp_path / "q.onnx"))


def test_crypto_mode_returns_the_model_and_writes_nothing(tiny_model, tmp_path, monkeypatch):
    # Quark's crypto mode: a ModelProto in, a ModelProto out, no file written (model_output
    # included), not even a temporary folder: TMPDIR names no folder, which making one would need.
    temp = tmp_path / "absent"
    monkeypatch.setenv("TMPDIR", str(temp))
    proto = onnx.load(tiny_model)
    plain = dataclasses.replace(quark.QuantizationConfig(), print_summary=False)
    want = quark.ModelQuantizer(quark.Config(global_quant_config=plain)).quantize_model(proto, None)
    crypto = dataclasses.replace(plain, crypto_mode=True, ignore_warnings=False)
    with pytest.warns(UserWarning, match="model_output .*q.onnx is not written"):
        got = quark.ModelQuantizer(quark.Config(global_quant_config=crypto)).quantize_model(proto, tmp_path / "q.onnx")
    assert isinstance(got, onnx.ModelProto)
    assert got.SerializeToString() == want.SerializeToString()
    auto_mp = dataclasses.replace(crypto, include_auto_mp=True, ignore_warnings=True, extra_options={"AutoMixprecision": {
        "ActTargetQuantType": "QUInt8", "WeightTargetQuantType": "QInt8", "L2Target": 10.0}})
    assert isinstance(quark.ModelQuantizer(quark.Config(global_quant_config=auto_mp)).quantize_model(proto), onnx.ModelProto)
    assert not (tmp_path / "q.onnx").exists() and not temp.exists()
    # What would read or write a file is refused by name.
    for change, error in ((dict(), "model_input must be an onnx.ModelProto"),
                          (dict(use_external_data_format=True), "use_external_data_format"),
                          (dict(extra_options={"SaveAndRestore": str(tmp_path / "r.json")}), "SaveAndRestore"),
                          (dict(include_auto_mp=True, extra_options={"AutoMixprecision": {
                              "Top1AccTarget": 0.1, "EvaluateFunction": lambda path: 1.0}}), "EvaluateFunction")):
        q = dataclasses.replace(crypto, **change)
        model = tiny_model if not change else proto
        with pytest.raises(onnxptq.Error, match=error):
            quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(model)
    assert not temp.exists() and not (tmp_path / "r.json").exists()


def test_quark_option_names_reach_the_core(tiny_model, tmp_path):
    # Quark's "Percentile" is vai_q_onnx's CalibPercentile: a different percentile, other bytes.
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 3)
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "Percentile", "--extra-option", "CalibPercentile=99.0", "--include-cle", "--quiet")
    from test_vai import FolderReader
    q = quark.QuantizationConfig(calibrate_method=onnxptq.CalibrationMethod.Percentile,
                                 print_summary=False, extra_options={"Percentile": 99.0})
    quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(
        tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"))
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_calib_data_size_is_the_clis_calib_size(tiny_model, tmp_path):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 4, seed=9)
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", "--calib-size", "2", "--include-cle", "--quiet")
    from test_vai import FolderReader
    q = quark.QuantizationConfig(print_summary=False, extra_options={"CalibDataSize": 2})
    quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(
        tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"))
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    run_cli("quantize", tiny_model, "-o", tmp_path / "all.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", "--include-cle", "--quiet")
    assert (tmp_path / "all.onnx").read_bytes() != (tmp_path / "cli.onnx").read_bytes()


def test_use_random_data_calibrates_on_the_random_sample_and_says_the_reader_is_unread(tiny_model, tmp_path):
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 3)
    from test_vai import FolderReader
    extra = {"UseRandomData": True, "RandomDataReaderInputDataRange": {"x": [-1.0, 1.0]}}
    q = quark.QuantizationConfig(print_summary=False, ignore_warnings=False,
                                 calibrate_method=onnxptq.CalibrationMethod.MinMax, extra_options=extra)
    quantizer = quark.ModelQuantizer(quark.Config(global_quant_config=q))
    with pytest.warns(UserWarning, match="UseRandomData: .* calibration_data_reader is not read"):
        quantizer.quantize_model(tiny_model, str(tmp_path / "reader.onnx"), FolderReader(tmp_path / "calib", "x"))
    quantizer.quantize_model(tiny_model, str(tmp_path / "none.onnx"))
    assert (tmp_path / "reader.onnx").read_bytes() == (tmp_path / "none.onnx").read_bytes()
    # The CLI's random sample with the same range: the same model.
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--random", "1", "--random-range", "x=-1:1",
            "--calibrate-method", "MinMax", "--include-cle", "--quiet")
    assert (tmp_path / "cli.onnx").read_bytes() == (tmp_path / "none.onnx").read_bytes()


def test_mixed_precision_from_quark_and_the_cli_write_the_same_bytes(tiny_model, tmp_path):
    # Quark's MixedPrecisionTensor (with specific_tensor_precision) and TensorQuantOverrides, with
    # QuantType members as values, against the CLI's --node-precision and --extra-option.
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 3)
    run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
            "--calibrate-method", "MinMax", "--node-precision", "gemm=int16,int8", "--no-include-cle",
            "--extra-option", 'TensorQuantOverrides={"x": [{"quant_type": "QUInt8"}]}', "--quiet")
    from test_vai import FolderReader
    q = quark.QuantizationConfig(calibrate_method=onnxptq.CalibrationMethod.MinMax, include_cle=False,
                                 print_summary=False, specific_tensor_precision=True,
                                 extra_options={"NodePrecision": {"gemm": {"activation": "int16", "weight": "int8"}},
                                                "TensorQuantOverrides": {"x": [{"quant_type": onnxptq.QuantType.QUInt8}]}})
    quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(
        tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"))
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    zero_points = {i.name: i.data_type for i in onnx.load(str(tmp_path / "py.onnx")).graph.initializer
                   if i.name.endswith("_zero_point")}
    assert zero_points["x_zero_point"] == onnx.TensorProto.UINT8
    assert zero_points["f_zero_point"] == onnx.TensorProto.INT16  # the Gemm's input, raised to int16
    with pytest.raises(onnxptq.Error, match="MixedPrecisionTensor needs specific_tensor_precision"):
        q = dataclasses.replace(q, specific_tensor_precision=False, extra_options={"MixedPrecisionTensor": {"QInt16": ["c"]}})
        quark.ModelQuantizer(quark.Config(global_quant_config=q)).quantize_model(tiny_model, str(tmp_path / "x.onnx"))


def test_auto_mixprecision_preset_with_an_evaluate_function(tiny_model, tmp_path):
    # S16S16_MIXED_S8S8: int16 everywhere, nodes converted to int8 while the user's metric (here
    # 1.0 for the float model, minus 0.1 per node whose weight is int8) loses at most Top1AccTarget.
    def accuracy(path):
        model = onnx.load(path)
        int8 = [i for i in model.graph.initializer if i.name in ("w_zero_point", "fc_zero_point")
                and i.data_type == onnx.TensorProto.INT8]
        return 1.0 - 0.1 * len(int8)

    from test_vai import FolderReader
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 3)
    config = quark.get_default_config("S16S16_MIXED_S8S8")
    config.print_summary = False
    config.extra_options["AutoMixprecision"] = dict(config.extra_options["AutoMixprecision"],
                                                    Top1AccTarget=0.15, EvaluateFunction=accuracy)
    report = quark.ModelQuantizer(quark.Config(global_quant_config=config)).quantize_model(
        tiny_model, str(tmp_path / "q.onnx"), FolderReader(tmp_path / "calib", "x"))
    mixed = report["auto_mixprecision"]
    assert mixed["metric"] == "top1 loss" and mixed["target"] == 0.15
    assert [c["converted"] for c in mixed["candidates"]] == [True, False]  # the second would lose 0.2
    assert mixed["loss"] == pytest.approx(0.1)
    assert accuracy(str(tmp_path / "q.onnx")) == pytest.approx(0.9)
