"""The model tools of vai_q_onnx and Quark (vai_q_onnx.tools, quark.onnx.tools), done by the C++
core as `onnxptq remove-qdq`, `qdq-to-qop`, `fix-shapes`, ... (docs/cli.md) do them. Each reads
the model file `input_model_path` and writes `output_model_path` (never over the input); it
returns {"changed": N, "log": [lines]}, and its warnings go to the warnings module. Errors of the
core arrive as onnxptq.Error (onnxptq.UnsupportedError for what is refused by name). See
docs/python.md.
"""

import os
import warnings

from . import _core


def _convert(tool, input_model_path, output_model_path, save_as_external_data=False, **options):
    for name, path in (("input_model_path", input_model_path), ("output_model_path", output_model_path)):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{name}: expected a file path, got {type(path).__name__}")
    result = _core.convert(tool, os.fspath(input_model_path), os.fspath(output_model_path), options,
                           bool(save_as_external_data))
    for line in result["log"]:
        if line.startswith("warning: "):
            warnings.warn(line[len("warning: "):], stacklevel=3)
    return result


def remove_qdq(input_model_path, output_model_path, save_as_external_data=False):
    """vai_q_onnx's remove_qdq: every QuantizeLinear -> DequantizeLinear pair whose quantized value
    only that DequantizeLinear reads is removed, and every FixNeuron; stored (integer) weights keep
    their DequantizeLinear. "changed": the pairs removed."""
    return _convert("remove_qdq", input_model_path, output_model_path, save_as_external_data)


def convert_qdq_to_qop(input_model_path, output_model_path, save_as_external_data=False):
    """vai_q_onnx's convert_qdq_to_qop: the QDQ model in QOperator form (QLinearConv,
    QLinearMatMul, com.microsoft QLinearAdd, ...), computing what the QDQ model does. "changed":
    the QLinear nodes written."""
    return _convert("qdq_to_qop", input_model_path, output_model_path, save_as_external_data)


def fix_shapes(input_model_path, output_model_path, fix_shapes=None, save_as_external_data=False):
    """Quark's fix_shapes: the inputs and outputs named in `fix_shapes`
    ("input_1:[1,224,224,3];output_1:[1,1000]") take those shapes, then every tensor's shape is
    stored in the model. Without `fix_shapes` every input must already be fixed."""
    return _convert("fix_shapes", input_model_path, output_model_path, save_as_external_data, fix_shapes=fix_shapes)


def convert_dynamic_to_fixed(input_model_path, output_model_path, fix_shapes, save_as_external_data=False):
    """Quark's convert_dynamic_to_fixed: fix_shapes with the shapes required."""
    if not fix_shapes:
        raise TypeError("fix_shapes: give the shapes, e.g. 'input:[1,3,224,224]'")
    return _convert("fix_shapes", input_model_path, output_model_path, save_as_external_data, fix_shapes=fix_shapes)


def convert_a8w8_npu_to_a8w8_cpu(input_model_path, output_model_path, save_as_external_data=False):
    """Quark's convert_a8w8_npu_to_a8w8_cpu: the 8-bit biases of an A8W8 NPU model made int32 in
    units of s_x * s_w, as ONNX Runtime's CPU kernels take them. "changed": the biases."""
    return _convert("a8w8_npu_to_cpu", input_model_path, output_model_path, save_as_external_data)


def convert_u16u8_to_u8u8(input_model_path, output_model_path, save_as_external_data=False):
    """Quark's convert_u16u8_to_u8u8: uint16 activations made uint8 with the same ranges (scale x
    257), no calibration; their biases quantized again. "changed": the activations."""
    return _convert("u16u8_to_u8u8", input_model_path, output_model_path, save_as_external_data)


def convert_block_to_standard_ops(input_model_path, output_model_path, save_as_external_data=False):
    """Every com.amd.quark BFPQuantizeDequantize / MXQuantizeDequantize node (Quark's BFP and MX
    formats) written as standard ONNX ops computing the same values bit for bit, so that
    onnxruntime runs the model without Quark's custom-op library. "changed": the nodes."""
    return _convert("block_to_standard_ops", input_model_path, output_model_path, save_as_external_data)


def convert_bias_int32_to_int16(input_model_path, output_model_path, save_as_external_data=False):
    """Quark's convert_bias_int32_to_int16: int32 biases stored as int16 (clipped, with a warning).
    "changed": the biases."""
    return _convert("bias_int32_to_int16", input_model_path, output_model_path, save_as_external_data)


def convert_lstm_to_customlstm(model):
    """Quark's convert_lstm_to_customlstm(model): each LSTM of `model` (an onnx.ModelProto, not
    changed), quantized with uint16 X, W, R, B and Y between Q/DQ nodes, becomes Quark's
    com.amd.quark ExtendedLSTM; returns the converted onnx.ModelProto. Errors name the LSTM that is
    not so quantized or that the op cannot compute (docs/formats.md)."""
    import tempfile

    import onnx

    if type(model).__name__ != "ModelProto" or not callable(getattr(model, "SerializeToString", None)):
        raise TypeError(f"model: expected an onnx.ModelProto, got {type(model).__name__}")
    with tempfile.TemporaryDirectory(prefix="onnxptq-lstm-") as folder:
        source, target = os.path.join(folder, "in.onnx"), os.path.join(folder, "out.onnx")
        with open(source, "wb") as f:
            f.write(model.SerializeToString())
        _convert("lstm_to_customlstm", source, target)
        return onnx.load(target)


def convert_fp32_to_fp16(input_model_path, output_model_path, keep_io_types=False, op_block_list=None,
                         node_block_list=None, save_as_external_data=False):
    """Quark's convert_fp32_to_fp16: float32 tensors and values made float16; ops of
    `op_block_list` (default: Quark's list) and nodes of `node_block_list` stay float32 between
    Casts; with keep_io_types the inputs and outputs stay float32."""
    return _convert("fp32_to_fp16", input_model_path, output_model_path, save_as_external_data,
                    keep_io_types=bool(keep_io_types), op_block_list=op_block_list, node_block_list=node_block_list)


def convert_fp32_to_bf16(input_model_path, output_model_path, format="with_cast", save_as_external_data=False):
    """Quark's convert_fp32_to_bf16: the model quantized with the BF16 preset, written as Cast
    pairs ("with_cast"), com.amd.quark custom ops ("customqdq") or weights rounded to bfloat16
    ("simulate_bf16"); "bf16" raises onnxptq.UnsupportedError."""
    return _convert("fp32_to_bf16", input_model_path, output_model_path, save_as_external_data, format=format)


def convert_fp16_to_bf16(input_model_path, output_model_path, format="with_cast", save_as_external_data=False):
    """Quark's convert_fp16_to_bf16: as convert_fp32_to_bf16 for a float16 model, its float16
    inputs and outputs kept by Casts at the edges."""
    return _convert("fp16_to_bf16", input_model_path, output_model_path, save_as_external_data, format=format)


__all__ = [
    "convert_a8w8_npu_to_a8w8_cpu", "convert_bias_int32_to_int16", "convert_block_to_standard_ops",
    "convert_dynamic_to_fixed",
    "convert_fp16_to_bf16", "convert_fp32_to_bf16", "convert_fp32_to_fp16", "convert_lstm_to_customlstm",
    "convert_qdq_to_qop",
    "convert_u16u8_to_u8u8", "fix_shapes", "remove_qdq",
]
