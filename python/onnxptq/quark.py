"""The Quark for ONNX names over onnxptq's core: ModelQuantizer, Config, QuantizationConfig and
get_default_config (quark.onnx; DefaultConfigMapping in quantization/config/custom_config.py), and
the QConfig API of onnxptq.quark_qconfig, lowered onto QuantizationConfig.

A configuration whose feature the core lacks (dynamic quantization, SmoothQuant, ...) raises onnxptq.Error naming it when the model is quantized (get_default_config returns
every preset, as Quark does); nothing is silently left out. quark.onnx.dump_model and the tools
of quark.onnx.tools are onnxptq.quark.dump_model and onnxptq.quark.tools. See docs/python.md.
"""

import copy
import dataclasses
import json
import os
import warnings
from typing import Any, Dict, List, Optional

from . import (CalibrationDataReader, CalibrationMethod, Error, PowerOfTwoMethod, QuantFormat, QuantType,
               VitisQuantFormat, VitisQuantType, _core, _enum_name, _format_name, _json_value, _METHOD_CLASSES,
               _names, _run, _subgraphs, _TYPE_CLASSES, _unbuilt, dump_model, tools)
from .quark_enums import ExtendedCalibrationMethod, ExtendedQuantFormat, ExtendedQuantType, Int16Method, LayerWiseMethod
from .quark_qconfig import *  # noqa: F401,F403 (Quark's QConfig API: quark.onnx's names)
from .quark_qconfig import __all__ as _qconfig_names
from .quark_qconfig import QConfig, apply_algorithms, lower


@dataclasses.dataclass
class QuantizationConfig:
    """Quark's legacy QuantizationConfig, fields and defaults as in quark.onnx."""

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


# Quark's names of extra_options the core knows under vai_q_onnx's names.
_RENAMED_OPTIONS = {
    "Percentile": "CalibPercentile",
    "NumBins": "CalibNumBins",
    "NumQuantizedBins": "CalibNumQuantizedBins",
    "MinMSEModePof2Scale": "MinMSEMode",
}

# Quark's extra_options the core does not know (the core itself names the features it lacks).
_UNBUILT_OPTIONS = {
    "CalibPassthroughOpTypes": "calibration passthrough op types",
}


def _check(config, what):
    """Raises onnxptq.Error naming the first part of `config` the core lacks."""
    for key in config.extra_options:
        if key in _UNBUILT_OPTIONS:
            raise _unbuilt(f"{what}extra option {key}", _UNBUILT_OPTIONS[key])


def _crypto_mode_extra(model_input, model_output, q):
    """Quark's crypto mode: the model comes in and goes out as an onnx.ModelProto and nothing is
    written to disk. Refuses what reads or writes a model or ranges file; returns the extra
    options to run with (FastFinetune MemOptLevel 2, which keeps samples in files, back to 1 with a
    warning, as Quark does)."""
    if isinstance(model_input, (str, os.PathLike)):
        raise Error("crypto_mode: model_input must be an onnx.ModelProto, not a path (crypto mode reads and "
                    "writes no model file)")
    if q.use_external_data_format:
        raise Error("crypto_mode with use_external_data_format: external data is a file beside the model, and "
                    "crypto mode writes none")
    extra = q.extra_options
    for key in ("SaveAndRestore", "TensorsRangeFile"):
        if extra.get(key) is not None:
            raise Error(f"crypto_mode with extra option {key}: it reads or writes a ranges file, and crypto "
                        "mode writes none")
    auto_mp = extra.get("AutoMixprecision")
    if isinstance(auto_mp, dict) and "EvaluateFunction" in auto_mp:
        raise Error("crypto_mode with AutoMixprecision EvaluateFunction: the function reads each candidate model "
                    "from a file, and crypto mode writes none (the built-in L2 metric needs no file)")
    fast_ft = extra.get("FastFinetune")
    if isinstance(fast_ft, dict) and fast_ft.get("MemOptLevel") == 2:
        warnings.warn("crypto_mode: FastFinetune MemOptLevel 2 keeps the samples in files; set to 1 (in memory)")
        extra = dict(extra, FastFinetune=dict(fast_ft, MemOptLevel=1))
    if model_output is not None:
        warnings.warn(f"crypto_mode: model_output {os.fspath(model_output)} is not written; the quantized model "
                      "is returned as an onnx.ModelProto")
    return extra


def _core_config(config):
    extra = {}
    for key, value in config.extra_options.items():
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
        "subgraphs_to_exclude": _subgraphs(config.subgraphs_to_exclude),
        "extra_op_types_to_quantize": _names(config.extra_op_types_to_quantize, "extra_op_types_to_quantize"),
        "input_nodes": _names(config.input_nodes, "input_nodes"),
        "output_nodes": _names(config.output_nodes, "output_nodes"),
        "execution_providers": _names(config.execution_providers, "execution_providers"),
        "optimize_model": bool(config.optimize_model),
        "include_cle": bool(config.include_cle),
        "include_sq": bool(config.include_sq),
        "include_rotation": bool(config.include_rotation),
        "enable_dpu": bool(config.enable_npu_cnn),  # Quark's XINT8 quantizer is vai_q_onnx's dpu quantizer
        "enable_npu_transformer": bool(config.enable_npu_transformer),
        "convert_fp16_to_fp32": bool(config.convert_fp16_to_fp32),
        "convert_nchw_to_nhwc": bool(config.convert_nchw_to_nhwc),
        "specific_tensor_precision": bool(config.specific_tensor_precision),
        "include_auto_mp": bool(config.include_auto_mp),
        "include_fast_ft": bool(config.include_fast_ft),
        "use_dynamic_quant": bool(config.use_dynamic_quant),
    }, extra


# The presets are the core's table (src/quant/presets.h, `onnxptq presets`), written in the core's
# JSON config; these turn it back into Quark's names.
_QUARK_OPTION_NAMES = {core: quark for quark, core in _RENAMED_OPTIONS.items()}
_QUARK_FIELDS = {"enable_dpu": "enable_npu_cnn"}
_METHODS = {m.name: m for cls in (CalibrationMethod, PowerOfTwoMethod, LayerWiseMethod) for m in cls}
_FORMAT_ENUMS = {"QuantFormat": QuantFormat, "VitisQuantFormat": VitisQuantFormat,
                 "ExtendedQuantFormat": ExtendedQuantFormat}
_TYPE_ENUMS = {"QuantType": QuantType, "VitisQuantType": VitisQuantType, "ExtendedQuantType": ExtendedQuantType}


def _member(text, enums, default_class):
    """"ExtendedQuantType.QInt16" -> ExtendedQuantType.QInt16; a bare name is a member of default_class."""
    cls, _, name = text.rpartition(".")
    return getattr(enums[cls or default_class], name)


def _quark_config(core_config):
    fields = {}
    for key, value in core_config.items():
        if key == "quant_format":
            fields[key] = _member(value, _FORMAT_ENUMS, "QuantFormat")
        elif key == "calibrate_method":
            fields[key] = _METHODS[value]
        elif key in ("activation_type", "weight_type"):
            fields[key] = _member(value, _TYPE_ENUMS, "QuantType")
        elif key == "extra_options":
            fields[key] = {_QUARK_OPTION_NAMES.get(k, k): v for k, v in value.items()}
        else:
            fields[_QUARK_FIELDS.get(key, key)] = value
    return QuantizationConfig(**fields)


def get_default_config(name):
    """The preset `name` as a new QuantizationConfig, with Quark's field and extra option names:
    Quark's DefaultConfigMapping (custom_config.py) and the vai_q_onnx guide's recommended
    configurations (VAI_CNN_NPU, VAI_CNN_NPU_CLE, VAI_TRANSFORMER_NPU, VAI_CNN_CPU), from the core's
    table (`onnxptq presets`). ValueError for an unknown name. A preset that needs a part onnxptq
    does not have yet is returned all the same, as Quark returns it, so that a script may change
    it (the Vitis AI model-quantization page does so with XINT8); ModelQuantizer.quantize_model
    raises onnxptq.Error naming the missing part."""
    table = {p["name"]: p for p in _core.presets()}
    if name not in table:
        raise ValueError(f"unknown preset '{name}' (presets: {', '.join(table)})")
    return _quark_config(json.loads(table[name]["config"]))


class ModelQuantizer:
    """quark.onnx.ModelQuantizer over onnxptq's core, with a legacy Config or a QConfig."""

    def __init__(self, config):
        if not isinstance(config, (Config, QConfig)):
            raise TypeError(f"ModelQuantizer: expected a Config or a QConfig, got {type(config).__name__}")
        self.config = config

    def quantize_model(self, model_input, model_output=None, calibration_data_reader=None,
                       calibration_data_path=None, algorithms=None):
        """Quantizes `model_input` (a path or an onnx.ModelProto, which is not changed) into the
        file `model_output` with samples from `calibration_data_reader` or the .npy folder
        `calibration_data_path` (neither: one random sample). Returns the report as a dict; with
        `model_output=None`, or with the config's crypto_mode (model_input then an onnx.ModelProto),
        the quantized model as an onnx.ModelProto instead (nothing written). `algorithms` (Quark's
        deprecated argument, legacy Config only) are algorithm configs (CLEConfig(),
        AdaRoundConfig(), ...), as QConfig's algo_config."""
        if isinstance(self.config, QConfig):
            if algorithms:
                raise Error("algorithms: with a QConfig the algorithms are QConfig(algo_config=[...])")
            fields, algorithms = lower(self.config, model_input)
            q = QuantizationConfig(**fields)
        else:
            q = dataclasses.replace(self.config.global_quant_config)
            q.extra_options = copy.deepcopy(q.extra_options)  # the algorithms write into it
            algorithms = list(q.algorithms or []) + list(algorithms or [])
        _check(q, "")
        for flag, value in apply_algorithms(algorithms, q.extra_options).items():
            setattr(q, flag, getattr(q, flag) or value)
        verbose = q.debug_mode or q.log_severity_level <= 0
        with warnings.catch_warnings():
            if q.ignore_warnings:
                warnings.simplefilter("ignore")
            if q.crypto_mode:
                q.extra_options = _crypto_mode_extra(model_input, model_output, q)
                model_output = None
            config, extra = _core_config(q)
            # Crypto mode prints no summary of the model, as Quark prints no quantized-model details then.
            result = _run(model_input, model_output, calibration_data_reader, config, extra,
                          q.extra_options.get("RandomDataReaderInputShape"), q.use_external_data_format,
                          q.print_summary and not q.crypto_mode, verbose, calibration_data_path=calibration_data_path)
        return result["model"] if model_output is None else result["report"]


__all__ = [
    "CalibrationDataReader", "CalibrationMethod", "Config", "Error", "ExtendedCalibrationMethod",
    "ExtendedQuantFormat", "ExtendedQuantType", "Int16Method", "LayerWiseMethod", "ModelQuantizer", "PowerOfTwoMethod", "QuantFormat", "QuantType",
    "QuantizationConfig", "VitisQuantFormat", "VitisQuantType", "get_default_config",
] + _qconfig_names
