"""Quark's ExtendedQuantFormat.QDQ through both Python shapes: the enum has Quark's values, the
core writes com.microsoft Q/DQ for 8-bit types (Quark's post-pass), and the Python call writes
the same file as `onnxptq quantize --quant-format ExtendedQuantFormat.QDQ`."""

import onnx
import pytest

import onnxptq as vai_q_onnx
from onnxptq import quark
from conftest import run_cli


def test_extended_quant_format_has_quarks_values():
    assert {m.name: m.value for m in quark.ExtendedQuantFormat} == {"QOperator": 0, "QDQ": 1}


@pytest.mark.parametrize("fold_relu", [False, True])
def test_quantize_static_writes_the_extended_format_like_the_cli(tiny_model, tmp_path, fold_relu):
    options = {"FoldRelu": fold_relu, "AlignConcat": True}
    out = tmp_path / "py.onnx"
    vai_q_onnx.quantize_static(tiny_model, str(out), None, quant_format=quark.ExtendedQuantFormat.QDQ,
                               calibrate_method=vai_q_onnx.CalibrationMethod.MinMax,
                               activation_type=vai_q_onnx.QuantType.QUInt8,
                               weight_type=vai_q_onnx.QuantType.QInt8, extra_options=options,
                               print_summary=False)
    cli = tmp_path / "cli.onnx"
    run_cli("quantize", tiny_model, "-o", cli, "--quiet", "--quant-format", "ExtendedQuantFormat.QDQ",
            "--calibrate-method", "MinMax", "--activation-type", "QUInt8", "--weight-type", "QInt8",
            "--extra-option", f"FoldRelu={'true' if fold_relu else 'false'}", "--extra-option", "AlignConcat=true")
    assert out.read_bytes() == cli.read_bytes()

    model = onnx.load(str(out))
    imports = {o.domain: o.version for o in model.opset_import}
    assert imports.get("com.microsoft") == 1 and imports.get("com.amd.quark") == 1
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert qdq and all(n.domain == "com.microsoft" for n in qdq)
    assert not [n for n in model.graph.node if n.domain == "com.amd.quark"]
    assert ("Relu" in {n.op_type for n in model.graph.node}) == (not fold_relu)


@pytest.mark.parametrize("preset,to", [("FP16", onnx.TensorProto.FLOAT16), ("BF16", onnx.TensorProto.BFLOAT16)])
def test_float_presets_write_cast_pairs_and_custom_ops_when_asked(tiny_model, tmp_path, preset, to):
    # Quark's FP16 / BF16 through quark.ModelQuantizer: standard Cast pairs (docs/formats.md), no
    # com.amd.quark op; FloatQDQAsCustomOps writes Quark's ExtendedQuantizeLinear instead.
    for custom in (False, True):
        config = quark.get_default_config(preset)
        config.print_summary = False
        if custom:
            config.extra_options["FloatQDQAsCustomOps"] = True
        out = tmp_path / f"{preset}_{custom}.onnx"
        quark.ModelQuantizer(quark.Config(global_quant_config=config)).quantize_model(tiny_model, str(out))
        model = onnx.load(str(out))
        onnx.checker.check_model(model, full_check=True)
        ops = [(n.domain, n.op_type) for n in model.graph.node]
        casts = [n for n in model.graph.node if n.op_type == "Cast" and n.attribute[0].i == to]
        if custom:
            assert ("com.amd.quark", "ExtendedQuantizeLinear") in ops and not casts
        else:
            assert casts and not [d for d, _ in ops if d == "com.amd.quark"]
            # Each Cast to the type is read by a Cast back to float.
            readers = {i: n for n in model.graph.node for i in n.input}
            assert all(readers[c.output[0]].op_type == "Cast" for c in casts)
            stored = [t for t in model.graph.initializer if t.data_type == to]
            assert stored, "weights are stored as 16-bit values"
