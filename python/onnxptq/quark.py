"""The Quark for ONNX names over onnxptq's core: ModelQuantizer, Config, QuantizationConfig and
get_default_config (shared/spec/quark_onnx.md §1.1, §1.2, §2.2).

A configuration whose feature the core lacks (the NPU paths, CLE, fast finetune, BFP/MX types,
...) raises onnxptq.Error naming it, when the preset is asked for or when the model is
quantized; nothing is silently left out. See docs/python.md.
"""

import copy
import dataclasses
import enum
import json
import warnings
from typing import Any, Dict, List, Optional

from . import (CalibrationDataReader, CalibrationMethod, Error, PowerOfTwoMethod, QuantFormat, QuantType,
               VitisQuantFormat, VitisQuantType, _core, _enum_name, _format_name, _json_value, _METHOD_CLASSES,
               _names, _run, _TYPE_CLASSES, _unbuilt)


class ExtendedQuantFormat(enum.Enum):
    QOperator = 0
    QDQ = 1


class ExtendedQuantType(enum.Enum):
    QInt8 = 1
    QUInt8 = 2
    QInt16 = 3
    QUInt16 = 4
    QInt4 = 5
    QUInt4 = 6
    QInt32 = 7
    QUInt32 = 8
    QFloat16 = 9
    QBFloat16 = 10
    QBFP = 11
    QMX = 12


class LayerWiseMethod(enum.Enum):
    LayerWisePercentile = 0


class Int16Method(enum.Enum):
    MinMax = 0


@dataclasses.dataclass
class QuantizationConfig:
    """Quark's legacy QuantizationConfig, fields and defaults as in quark_onnx.md §1.2."""

    calibrate_method: Any = CalibrationMethod.MinMax
    quant_format: Any = QuantFormat.QDQ
    activation_type: Any = QuantType.QInt8
    weight_type: Any = QuantType.QInt8
    algorithms: Optional[list] = None
    input_nodes: List[str] = dataclasses.field(default_factory=list)
    output_nodes: List[str] = dataclasses.field(default_factory=list)
    op_types_to_quantize: List[str] = dataclasses.field(default_factory=list)
    nodes_to_quantize: List[str] = dataclasses.field(default_factory=list)
    extra_op_types_to_quantize: List[str] = dataclasses.field(default_factory=list)
    nodes_to_exclude: List[str] = dataclasses.field(default_factory=list)
    subgraphs_to_exclude: list = dataclasses.field(default_factory=list)
    specific_tensor_precision: bool = False
    execution_providers: List[str] = dataclasses.field(default_factory=lambda: ['CPUExecutionProvider'])
    per_channel: bool = False
    reduce_range: bool = False
    optimize_model: bool = True
    use_dynamic_quant: bool = False
    use_external_data_format: bool = False
    convert_fp16_to_fp32: bool = False
    convert_nchw_to_nhwc: bool = False
    include_sq: bool = False
    include_rotation: bool = False
    include_cle: bool = True
    include_auto_mp: bool = False
    include_fast_ft: bool = False
    enable_npu_cnn: bool = False
    enable_npu_transformer: bool = False
    debug_mode: bool = False
    crypto_mode: bool = False
    print_summary: bool = True
    ignore_warnings: bool = True
    log_severity_level: int = 1
    extra_options: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Config:
    global_quant_config: QuantizationConfig


# Switches whose algorithm the core does not have yet: field -> what is missing.
_UNBUILT_FLAGS = {
    "use_dynamic_quant": "dynamic quantization (quantize_dynamic)",
    "convert_fp16_to_fp32": "float16 to float32 model conversion",
    "convert_nchw_to_nhwc": "NCHW to NHWC input conversion",
    "include_sq": "SmoothQuant",
    "include_rotation": "QuaRot rotation",
    "include_auto_mp": "automatic mixed precision",
    "include_fast_ft": "fast finetune (AdaRound, AdaQuant)",
    "enable_npu_cnn": "the NPU CNN path (XINT8 graph rewrites, DPU simulation, NPU limitation checks)",
    "enable_npu_transformer": "the NPU transformer path",
    "specific_tensor_precision": "per-tensor precision overrides (MixedPrecisionTensor)",
    "crypto_mode": "crypto mode (models kept in memory only)",
}

# Quark's names of extra_options the core knows under vai_q_onnx's names.
_RENAMED_OPTIONS = {
    "Percentile": "CalibPercentile",
    "NumBins": "CalibNumBins",
    "NumQuantizedBins": "CalibNumQuantizedBins",
    "MinMSEModePof2Scale": "MinMSEMode",
}

# Quark's extra_options of features the core does not have yet (the core names the others).
_UNBUILT_OPTIONS = {
    "FoldRelu": "folding Relu/Clip into the quantized producer (FoldRelu)",
    "AlignEltwiseQuantType": "activation types for elementwise weights (AlignEltwiseQuantType)",
    "AlignSlice": "scale alignment (AlignSlice)",
    "AlignConcat": "scale alignment (AlignConcat)",
    "QuantizeAllOpTypes": "quantizing every op type (QuantizeAllOpTypes)",
    "Int32Bias": "the Int32Bias switch",
    "Int16Bias": "int16 biases (Int16Bias)",
    "DedicateDQNode": "one DequantizeLinear per consumer (DedicateDQNode)",
    "BFPAttributes": "BFP data types",
    "MXAttributes": "MX data types",
    "UseMatMulNBits": "MatMulNBits weight-only quantization",
    "FastFinetune": "fast finetune (AdaRound, AdaQuant)",
    "AutoMixprecision": "automatic mixed precision",
    "UseRandomData": "the UseRandomData switch (pass no calibration_data_reader instead)",
    "TensorQuantOverrides": "per-tensor quantization overrides (TensorQuantOverrides)",
    "CalibPassthroughOpTypes": "calibration passthrough op types",
}


def _check(config, what):
    """Raises onnxptq.Error naming the first part of `config` the core lacks."""
    for field, part in _UNBUILT_FLAGS.items():
        if getattr(config, field):
            raise _unbuilt(f"{what}{field}=True", part)
    if config.algorithms:
        raise _unbuilt(f"{what}algorithms", "the algorithm configs (CLE, AdaRound, AdaQuant, GPTQ, ...)")
    if config.extra_op_types_to_quantize:
        raise _unbuilt(f"{what}extra_op_types_to_quantize", "adding op types to the default set")
    if config.subgraphs_to_exclude:
        raise _unbuilt(f"{what}subgraphs_to_exclude", "excluding subgraphs")
    for key in config.extra_options:
        if key in _UNBUILT_OPTIONS and not (key == "AlignSlice" and config.extra_options[key] is False):
            raise _unbuilt(f"{what}extra option {key}", _UNBUILT_OPTIONS[key])


def _core_config(config):
    extra = {}
    for key, value in config.extra_options.items():
        if key == "AlignSlice" and value is False:
            continue  # switching off an alignment the core never does
        if key in ("CalibDataSize", "RandomDataReaderInputShape"):
            continue  # arguments of the readers, not extra options of the core
        extra[_RENAMED_OPTIONS.get(key, key)] = value
    return {
        "quant_format": _format_name(config.quant_format),
        "calibrate_method": _enum_name(config.calibrate_method, "calibrate_method", _METHOD_CLASSES),
        "activation_type": _enum_name(config.activation_type, "activation_type", _TYPE_CLASSES),
        "weight_type": _enum_name(config.weight_type, "weight_type", _TYPE_CLASSES),
        "per_channel": bool(config.per_channel),
        "reduce_range": bool(config.reduce_range),
        "op_types_to_quantize": _names(config.op_types_to_quantize, "op_types_to_quantize"),
        "nodes_to_quantize": _names(config.nodes_to_quantize, "nodes_to_quantize"),
        "nodes_to_exclude": _names(config.nodes_to_exclude, "nodes_to_exclude"),
        "input_nodes": _names(config.input_nodes, "input_nodes"),
        "output_nodes": _names(config.output_nodes, "output_nodes"),
        "execution_providers": _names(config.execution_providers, "execution_providers"),
        "optimize_model": bool(config.optimize_model),
        "include_cle": bool(config.include_cle),
    }, extra


_FQNIC = {"ForceQuantizeNoInputCheck": True}
_A8W8_EXTRA = {"ActivationSymmetric": True, **_FQNIC, "AlignSlice": False, "FoldRelu": True, "AlignConcat": True}
_ADAROUND = {"DataSize": 1000, "FixedSeed": 1705472343, "BatchSize": 2, "NumIterations": 1000, "LearningRate": 0.1,
             "OptimAlgorithm": "adaround", "OptimDevice": "cpu", "InferDevice": "cpu", "EarlyStop": True}
_ADAQUANT = dict(_ADAROUND, LearningRate=1e-5, OptimAlgorithm="adaquant")


def _preset(fmt, method, act, wgt, extra, **fields):
    return dict(quant_format=fmt, calibrate_method=method, activation_type=act, weight_type=wgt, extra_options=extra,
                **fields)


_EQDQ = ExtendedQuantFormat.QDQ
_MINMAX = CalibrationMethod.MinMax
_PERCENTILE = CalibrationMethod.Percentile
_U8, _S8 = QuantType.QUInt8, QuantType.QInt8
_U16, _S16 = ExtendedQuantType.QUInt16, ExtendedQuantType.QInt16

# DefaultConfigMapping (quark_onnx.md §2.2).
_PRESETS = {
    "XINT8": _preset(QuantFormat.QDQ, PowerOfTwoMethod.MinMSE, _U8, _S8, {"ActivationSymmetric": True, **_FQNIC},
                     enable_npu_cnn=True),
    "S8S8_AAWS": _preset(QuantFormat.QDQ, _PERCENTILE, _S8, _S8, {"Percentile": 99.9999, **_FQNIC}),
    "U8S8_AAWS": _preset(QuantFormat.QDQ, _PERCENTILE, _U8, _S8, dict(_FQNIC)),
    "U8U8_AAWA": _preset(QuantFormat.QDQ, _PERCENTILE, _U8, _U8,
                         {"ActivationSymmetric": False, "WeightSymmetric": False, **_FQNIC}),
    "S16S8_ASWS": _preset(_EQDQ, _PERCENTILE, _S16, _S8, {"ActivationSymmetric": True, **_FQNIC}),
    "U16S8_AAWS": _preset(_EQDQ, _PERCENTILE, _U16, _S8, dict(_FQNIC)),
    "A8W8": _preset(_EQDQ, _MINMAX, _S8, _S8, dict(_A8W8_EXTRA)),
    "A16W8": _preset(_EQDQ, _MINMAX, _S16, _S8, dict(_A8W8_EXTRA, AlignEltwiseQuantType=True)),
    "FP16": _preset(_EQDQ, _MINMAX, ExtendedQuantType.QFloat16, ExtendedQuantType.QFloat16, dict(_FQNIC)),
    "BF16": _preset(_EQDQ, _MINMAX, ExtendedQuantType.QBFloat16, ExtendedQuantType.QBFloat16,
                    {"QuantizeAllOpTypes": True, **_FQNIC}),
    "INT8_CNN_DEFAULT": _preset(QuantFormat.QDQ, _MINMAX, _U8, _S8, dict(_FQNIC)),
    "INT16_CNN_DEFAULT": _preset(_EQDQ, _MINMAX, _U16, _S16, dict(_FQNIC)),
    "INT8_TRANSFORMER_DEFAULT": _preset(QuantFormat.QDQ, _MINMAX, _U8, _S8, {"CalibMovingAverage": True},
                                        enable_npu_transformer=True),
    "INT16_TRANSFORMER_DEFAULT": _preset(_EQDQ, _MINMAX, _U16, _S16, {"CalibMovingAverage": True},
                                         enable_npu_transformer=True),
    "INT8_CNN_ACCURATE": _preset(QuantFormat.QDQ, _PERCENTILE, _U8, _S8,
                                 {"Percentile": 99.9999, **_FQNIC, "FastFinetune": _ADAROUND}, include_fast_ft=True),
    "INT16_CNN_ACCURATE": _preset(_EQDQ, _PERCENTILE, _U16, _S16,
                                  {"Percentile": 99.9999, **_FQNIC, "FastFinetune": _ADAROUND}, include_fast_ft=True),
    "INT8_TRANSFORMER_ACCURATE": _preset(QuantFormat.QDQ, _PERCENTILE, _U8, _S8,
                                         {"Percentile": 99.9999, "FastFinetune": _ADAROUND},
                                         include_fast_ft=True, enable_npu_transformer=True),
    "INT16_TRANSFORMER_ACCURATE": _preset(_EQDQ, _PERCENTILE, _U16, _S16,
                                          {"Percentile": 99.9999, "FastFinetune": _ADAROUND},
                                          include_fast_ft=True, enable_npu_transformer=True),
    "UINT8_DYNAMIC_QUANT": _preset(QuantFormat.QDQ, _MINMAX, _U8, _U8, {}, use_dynamic_quant=True),
}
for _name in ("XINT8", "S8S8_AAWS", "U8S8_AAWS", "S16S8_ASWS", "A8W8", "A16W8", "U16S8_AAWS"):
    for _suffix, _params in (("_ADAROUND", _ADAROUND), ("_ADAQUANT", _ADAQUANT)):
        _p = copy.deepcopy(_PRESETS[_name])
        _p["extra_options"]["FastFinetune"] = dict(_params)
        _p["include_fast_ft"] = True
        _PRESETS[_name + _suffix] = _p
for _name in ("FP16", "BF16"):
    _p = copy.deepcopy(_PRESETS[_name])
    _p["extra_options"]["FastFinetune"] = dict(_ADAQUANT)
    _p["include_fast_ft"] = True
    _PRESETS[_name + "_ADAQUANT"] = _p

# Presets of data types and algorithms the core has no part of yet: name -> what is missing.
_UNBUILT_PRESETS = {name: "BFP and MX data types" for name in (
    "BFP16", "MX4", "MX6", "MX9", "MXFP8E5M2", "MXFP8E4M3", "MXFP6E3M2", "MXFP6E2M3", "MXFP4E2M1", "MXINT8",
    "BF16_BFP16", "BF16_MXINT8", "MX9_INT8")}
_UNBUILT_PRESETS.update({name + "_ADAQUANT": "BFP and MX data types" for name in list(_UNBUILT_PRESETS)})
_UNBUILT_PRESETS.update({
    "VINT8": "the VAIML compiler's graph rewrites (ConvertBNToConv, ConvertClipToRelu, ...)",
    "S16S16_MIXED_S8S8": "automatic mixed precision",
    "BF16_MIXED_BFP16": "automatic mixed precision and BFP data types",
    "BF16_MIXED_BFP16_ADAQUANT": "automatic mixed precision and BFP data types",
    "BF16_MIXED_MXINT8": "automatic mixed precision and MX data types",
    "BF16_MIXED_MXINT8_ADAQUANT": "automatic mixed precision and MX data types",
    "MATMUL_NBITS": "MatMulNBits weight-only quantization",
})


def get_default_config(name):
    """The preset `name` as a new QuantizationConfig. ValueError for an unknown name;
    onnxptq.Error naming the missing part for a preset the core cannot run yet."""
    if name in _UNBUILT_PRESETS:
        raise _unbuilt(f"preset {name}", _UNBUILT_PRESETS[name])
    if name not in _PRESETS:
        raise ValueError(f"unknown preset '{name}' (known: {', '.join(sorted(_PRESETS))})")
    config = QuantizationConfig(**copy.deepcopy(_PRESETS[name]))
    _check(config, f"preset {name}: ")
    core, extra = _core_config(config)
    try:
        _core.check_config(json.dumps(dict(core, extra_options=extra), default=_json_value))
    except Error as e:
        raise Error(f"preset {name}: {e}") from None
    return config


class ModelQuantizer:
    """quark.onnx.ModelQuantizer over onnxptq's core."""

    def __init__(self, config):
        if not isinstance(config, Config):
            raise TypeError(f"ModelQuantizer: expected a Config, got {type(config).__name__}")
        self.config = config

    def quantize_model(self, model_input, model_output=None, calibration_data_reader=None,
                       calibration_data_path=None, algorithms=None):
        """Quantizes the model file `model_input` into `model_output` with samples from
        `calibration_data_reader` (None: one random sample). Returns the report as a dict."""
        q = self.config.global_quant_config
        _check(q, "")
        if algorithms:
            raise _unbuilt("algorithms", "the algorithm configs (CLE, AdaRound, AdaQuant, GPTQ, ...)")
        if model_output is None:
            raise _unbuilt("model_output=None", "returning the model in memory (onnx.ModelProto)")
        if calibration_data_path is not None:
            if calibration_data_reader is not None:
                raise Error("give calibration_data_reader or calibration_data_path, not both")
            raise _unbuilt("calibration_data_path", "Quark's folder layout of .npy files (use onnxptq quantize "
                           "--calib-data, or a reader)")
        config, extra = _core_config(q)
        calib_size = int(q.extra_options.get("CalibDataSize", 0))
        verbose = q.debug_mode or q.log_severity_level <= 0
        with warnings.catch_warnings():
            if q.ignore_warnings:
                warnings.simplefilter("ignore")
            return _run(model_input, model_output, calibration_data_reader, config, extra,
                        q.extra_options.get("RandomDataReaderInputShape"), q.use_external_data_format,
                        q.print_summary, verbose, calib_size)


__all__ = [
    "CalibrationDataReader", "CalibrationMethod", "Config", "Error", "ExtendedQuantFormat", "ExtendedQuantType",
    "Int16Method", "LayerWiseMethod", "ModelQuantizer", "PowerOfTwoMethod", "QuantFormat", "QuantType",
    "QuantizationConfig", "VitisQuantFormat", "VitisQuantType", "get_default_config",
]
