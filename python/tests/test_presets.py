"""Presets: get_default_config from the core's table (`onnxptq presets`), with Quark's names and
values; presets needing unbuilt parts raise at quantize_model naming them; the seeds' scripts,
with only their imports changed, write the bytes of `onnxptq quantize` with the same options."""

import json

import pytest

import onnxptq
from onnxptq import quark
from conftest import quantize_nodes, real_model, run_cli, run_python, write_samples
from test_quark import SEED_A8W8
from test_vai import SEED_CNNS_ON_CPU

# Quark's DefaultConfigMapping (quark/onnx/quantization/config/custom_config.py), and the four
# recommended configurations of the vai_q_onnx user guide under onnxptq's names.
SPEC_PRESETS = [
    "UINT8_DYNAMIC_QUANT", "XINT8", "XINT8_ADAROUND", "XINT8_ADAQUANT", "VINT8",
    "S8S8_AAWS", "S8S8_AAWS_ADAROUND", "S8S8_AAWS_ADAQUANT", "U8S8_AAWS", "U8S8_AAWS_ADAROUND", "U8S8_AAWS_ADAQUANT",
    "U8U8_AAWA", "S16S8_ASWS", "S16S8_ASWS_ADAROUND", "S16S8_ASWS_ADAQUANT", "A8W8", "A8W8_ADAROUND", "A8W8_ADAQUANT",
    "A16W8", "A16W8_ADAROUND", "A16W8_ADAQUANT", "U16S8_AAWS", "U16S8_AAWS_ADAROUND", "U16S8_AAWS_ADAQUANT",
    "FP16", "FP16_ADAQUANT", "BF16", "BF16_ADAQUANT", "BFP16", "BFP16_ADAQUANT", "MX4", "MX4_ADAQUANT", "MX6",
    "MX6_ADAQUANT", "MX9", "MX9_ADAQUANT", "MXFP8E5M2", "MXFP8E5M2_ADAQUANT", "MXFP8E4M3", "MXFP8E4M3_ADAQUANT",
    "MXFP6E3M2", "MXFP6E3M2_ADAQUANT", "MXFP6E2M3", "MXFP6E2M3_ADAQUANT", "MXFP4E2M1", "MXFP4E2M1_ADAQUANT",
    "MXINT8", "MXINT8_ADAQUANT", "S16S16_MIXED_S8S8", "BF16_MIXED_BFP16", "BF16_MIXED_BFP16_ADAQUANT",
    "BF16_MIXED_MXINT8", "BF16_MIXED_MXINT8_ADAQUANT", "BF16_BFP16", "BF16_MXINT8", "MX9_INT8",
    "INT8_CNN_DEFAULT", "INT16_CNN_DEFAULT", "INT8_TRANSFORMER_DEFAULT", "INT16_TRANSFORMER_DEFAULT",
    "INT8_CNN_ACCURATE", "INT16_CNN_ACCURATE", "INT8_TRANSFORMER_ACCURATE", "INT16_TRANSFORMER_ACCURATE",
    "MATMUL_NBITS",
]
SEED_PRESETS = ["VAI_CNN_NPU", "VAI_CNN_NPU_CLE", "VAI_TRANSFORMER_NPU", "VAI_CNN_CPU"]

# Quark's DEFAULT_ADAROUND_PARAMS (custom_config.py).
ADAROUND = {"DataSize": 1000, "FixedSeed": 1705472343, "BatchSize": 2, "NumIterations": 1000, "LearningRate": 0.1,
            "OptimAlgorithm": "adaround", "OptimDevice": "cpu", "InferDevice": "cpu", "EarlyStop": True}


def test_every_preset_of_the_cli_is_a_default_config():
    listed = json.loads(run_cli("presets", "--json").stdout)
    names = [p["name"] for p in listed]
    assert sorted(names) == sorted(SPEC_PRESETS + SEED_PRESETS)
    for name in names:
        assert isinstance(quark.get_default_config(name), quark.QuantizationConfig), name


def test_presets_have_quarks_names_and_the_specs_values():
    e, q = quark.ExtendedQuantFormat, quark.ExtendedQuantType
    c = quark.get_default_config("XINT8")
    assert (c.quant_format, c.calibrate_method, c.activation_type, c.weight_type) == (
        onnxptq.QuantFormat.QDQ, onnxptq.PowerOfTwoMethod.MinMSE, onnxptq.QuantType.QUInt8, onnxptq.QuantType.QInt8)
    assert c.enable_npu_cnn is True and c.include_cle is True and c.include_fast_ft is False
    assert c.extra_options == {"ActivationSymmetric": True, "ForceQuantizeNoInputCheck": True}
    c = quark.get_default_config("A16W8")
    assert (c.quant_format, c.calibrate_method, c.activation_type, c.weight_type) == (
        e.QDQ, onnxptq.CalibrationMethod.MinMax, q.QInt16, onnxptq.QuantType.QInt8)
    assert c.extra_options == {"ActivationSymmetric": True, "ForceQuantizeNoInputCheck": True, "AlignSlice": False,
                               "FoldRelu": True, "AlignConcat": True, "AlignEltwiseQuantType": True}
    c = quark.get_default_config("INT16_CNN_ACCURATE")
    assert (c.quant_format, c.calibrate_method, c.activation_type, c.weight_type) == (
        e.QDQ, onnxptq.CalibrationMethod.Percentile, q.QUInt16, q.QInt16)
    assert c.include_fast_ft is True
    assert c.extra_options == {"Percentile": 99.9999, "ForceQuantizeNoInputCheck": True, "FastFinetune": ADAROUND}
    c = quark.get_default_config("A8W8_ADAQUANT")
    assert c.extra_options["FastFinetune"] == dict(ADAROUND, LearningRate=1e-5, OptimAlgorithm="adaquant")
    c = quark.get_default_config("MX6")
    assert c.activation_type == q.QBFP and c.weight_type == q.QBFP
    assert c.extra_options == {"BFPAttributes": {"bfp_method": "to_bfp_prime", "axis": 1, "bit_width": 13,
                                                 "block_size": 16, "sub_block_size": 2, "sub_block_shift_bits": 1,
                                                 "rounding_mode": 2}}
    c = quark.get_default_config("INT8_TRANSFORMER_DEFAULT")
    assert c.enable_npu_transformer is True and c.extra_options == {"CalibMovingAverage": True}
    c = quark.get_default_config("VINT8")
    assert c.optimize_model is False and c.activation_type == onnxptq.QuantType.QInt8
    # The vai_q_onnx guide, "CNNs on CPU": vai_q_onnx's include_cle default (False), not Quark's.
    c = quark.get_default_config("VAI_CNN_CPU")
    assert (c.quant_format, c.calibrate_method, c.activation_type, c.weight_type, c.include_cle) == (
        onnxptq.QuantFormat.QDQ, onnxptq.CalibrationMethod.MinMax, onnxptq.QuantType.QUInt8,
        onnxptq.QuantType.QInt8, False)
    # A new object each time.
    a, b = quark.get_default_config("XINT8"), quark.get_default_config("XINT8")
    a.extra_options["X"] = 1
    assert "X" not in b.extra_options


def test_uint8_dynamic_quant_writes_integer_ops(tiny_model, tmp_path):
    """Quark's UINT8_DYNAMIC_QUANT through ModelQuantizer and the command: no calibration data, the
    Conv and the Gemm (as a MatMul) quantized as ONNX Runtime's quantize_dynamic writes them."""
    config = quark.get_default_config("UINT8_DYNAMIC_QUANT")
    config.print_summary = False
    quark.ModelQuantizer(quark.Config(global_quant_config=config)).quantize_model(tiny_model, str(tmp_path / "q.onnx"))
    counts = quantize_nodes(tmp_path / "q.onnx")
    assert counts.get("DynamicQuantizeLinear") == 2 and counts.get("ConvInteger") == 1
    assert counts.get("MatMulInteger") == 1 and "Gemm" not in counts and "QuantizeLinear" not in counts
    proc = run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--config", "UINT8_DYNAMIC_QUANT")
    assert "warning" not in proc.stderr
    assert quantize_nodes(tmp_path / "cli.onnx") == counts


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ValueError, match="unknown preset 'NOPE' .*XINT8"):
        quark.get_default_config("NOPE")


# Quark's A8W8 preset as `onnxptq quantize` flags, and Quark's include_cle default.
A8W8_FLAGS = ["--quant-format", "ExtendedQuantFormat.QDQ", "--calibrate-method", "MinMax", "--activation-type",
              "QInt8", "--weight-type", "QInt8", "--include-cle", "--extra-option", "ActivationSymmetric=true",
              "--extra-option", "ForceQuantizeNoInputCheck=true", "--extra-option", "AlignSlice=false",
              "--extra-option", "FoldRelu=true", "--extra-option", "AlignConcat=true"]


# The A8W8 script of Quark's A8W8/A16W8 guide. (Written as a strict xfail while
# ExtendedQuantFormat.QDQ, FoldRelu and AlignConcat were not in the core; it passed once they
# landed, so the mark is gone.)
def test_seed_a8w8_script_writes_the_cli_bytes(tmp_path):
    model = real_model("mobilenet_v2")
    write_samples(tmp_path / "calib", (1, 3, 224, 224), 2)
    proc = run_python(SEED_A8W8.replace("PRESET", "A8W8"), model, tmp_path / "py.onnx", tmp_path / "calib")
    assert proc.returncode == 0, proc.stderr
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib", *A8W8_FLAGS,
            "--quiet")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    run_cli("quantize", model, "-o", tmp_path / "preset.onnx", "--calib-data", tmp_path / "calib", "--config", "A8W8",
            "--quiet")
    assert (tmp_path / "preset.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_seed_cnns_on_cpu_script_writes_the_vai_cnn_cpu_preset(tmp_path):
    model = real_model("mobilenet_v2")
    calib = tmp_path / "calib"
    write_samples(calib, (1, 3, 224, 224), 2)
    proc = run_python(SEED_CNNS_ON_CPU, model, tmp_path / "py.onnx", calib)
    assert proc.returncode == 0, proc.stderr
    run_cli("quantize", model, "-o", tmp_path / "cli.onnx", "--calib-data", calib, "--config", "VAI_CNN_CPU",
            "--quiet")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    assert quantize_nodes(tmp_path / "py.onnx").get("QuantizeLinear", 0) > 0


@pytest.fixture(scope="module")
def cli_presets():
    return {p["name"]: p for p in json.loads(run_cli("presets", "--json").stdout)}


@pytest.mark.parametrize("preset", SPEC_PRESETS + SEED_PRESETS)
def test_each_preset_in_python_is_the_clis(tiny_model, tmp_path, cli_presets, preset):
    # get_default_config's Quark names, turned back into the core's by ModelQuantizer, are the
    # settings of `--config NAME`: the same bytes, or both refuse.
    from test_vai import FolderReader
    write_samples(tmp_path / "calib", (1, 3, 8, 8), 2, seed=3)
    cli = run_cli("quantize", tiny_model, "-o", tmp_path / "cli.onnx", "--calib-data", tmp_path / "calib",
                  "--config", preset, "--quiet", check=False)
    config = quark.get_default_config(preset)
    config.print_summary = False
    quantizer = quark.ModelQuantizer(quark.Config(global_quant_config=config))
    if not cli_presets[preset]["ready"]:
        # A setting refused names the preset: features not built, unsupported (exit 3,
        # UnsupportedError).
        assert cli.returncode == 3, cli.stderr
        assert f"preset {preset}: " in cli.stderr
        with pytest.raises(onnxptq.UnsupportedError, match="not built"):
            quantizer.quantize_model(tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"))
        return
    assert cli.returncode == 0, cli.stderr
    quantizer.quantize_model(tiny_model, str(tmp_path / "py.onnx"), FolderReader(tmp_path / "calib", "x"))
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
