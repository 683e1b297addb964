"""onnxptq: post-training quantization of ONNX models, done by a C++ core.

The vai_q_onnx names (``import onnxptq as vai_q_onnx``): quantize_static, QuantFormat,
VitisQuantFormat, QuantType, VitisQuantType, CalibrationMethod, PowerOfTwoMethod and
CalibrationDataReader, and dump_model. The Quark names are in onnxptq.quark; the model tools
(remove_qdq, convert_qdq_to_qop, ...) in onnxptq.tools; the evaluate tool is
``python -m onnxptq.evaluate``. See docs/python.md.
"""

import abc
import enum
import json
import logging
import os
import sys
import warnings

# OpenMP threads that spin only briefly before they sleep while they wait, as the onnxptq command
# has them (a long spin takes the core a working thread needs on a busy machine, no spin at all
# slows models of many small layers; docs/cli.md, "Threads"). GNU libgomp reads this when it is
# loaded, with the core below, unless the process has it already.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "1000"

from . import _core  # noqa: E402

__version__ = "0.1.0"

# Errors of the core arrive as these, with the core's message: Error (a ValueError) for bad
# input (a model, an option, data); UnsupportedError (also a NotImplementedError) for what
# onnxptq does not do, such as an option refused by name; InternalError (also a RuntimeError)
# for a defect of onnxptq. Both are kinds of Error.
Error = _core.Error
UnsupportedError = _core.UnsupportedError
InternalError = _core.InternalError


class QuantFormat(enum.Enum):
    """ONNX Runtime's quant formats (onnxruntime.quantization.QuantFormat)."""

    QOperator = 0
    QDQ = 1


class VitisQuantFormat(enum.Enum):
    """vai_q_onnx's own formats: custom Q/DQ ops (QDQ) and FixNeuron nodes."""

    QDQ = 2
    FixNeuron = 3
    BFPFixNeuron = 4


class QuantType(enum.Enum):
    """ONNX Runtime's quant types (onnxruntime.quantization.QuantType)."""

    QInt8 = 0
    QUInt8 = 1
    QFLOAT8E4M3FN = 2
    QInt16 = 3
    QUInt16 = 4


class VitisQuantType(enum.Enum):
    """vai_q_onnx 1.16's extra types (VitisQuantFormat.QDQ)."""

    QInt16 = 3
    QUInt16 = 4
    QInt32 = 5
    QUInt32 = 6
    QFloat16 = 7
    QBFloat16 = 8


class CalibrationMethod(enum.Enum):
    """Float-scale calibration methods (onnxruntime.quantization.CalibrationMethod)."""

    MinMax = 0
    Entropy = 1
    Percentile = 2
    Distribution = 3


class PowerOfTwoMethod(enum.Enum):
    """Power-of-two scale calibration methods of vai_q_onnx."""

    NonOverflow = 0
    MinMSE = 1


class CalibrationDataReader(abc.ABC):
    """ONNX Runtime's reader protocol: get_next() returns one sample, a dict of input name to
    numpy array, or None at the end. Subclassing is optional: any object with get_next() is a
    reader. A reader with rewind() (or reset()) is asked to start over when the quantizer reads
    the data again; any other is read once and its samples are kept (the arrays, not copies)."""

    @abc.abstractmethod
    def get_next(self):
        """The next sample as {input name: numpy array}, or None at the end."""

    def __iter__(self):
        return self

    def __next__(self):
        sample = self.get_next()
        if sample is None:
            raise StopIteration
        return sample


# Enum classes whose member names the core reads, by role. Another class (onnxruntime's own
# enums, say) is read by its class name too, so that it cannot silently mean something else.
_FORMAT_CLASSES = ("QuantFormat", "VitisQuantFormat", "ExtendedQuantFormat")
_TYPE_CLASSES = ("QuantType", "VitisQuantType", "ExtendedQuantType")
_METHOD_CLASSES = ("CalibrationMethod", "PowerOfTwoMethod", "LayerWiseMethod")


def _enum_name(value, argument, classes):
    if isinstance(value, str):
        return value
    cls = type(value).__name__
    name = getattr(value, "name", None)
    if name is None or cls not in classes:
        raise TypeError(f"{argument}: expected a member of {', '.join(classes)} or its name, got {value!r}")
    return name


def _format_name(value):
    if isinstance(value, str):
        return value
    # By class and member: Quark's ExtendedQuantFormat.QDQ (com.amd.quark ops) is not
    # VitisQuantFormat.QDQ (com.vai.quantize ops); the core says which ones it writes.
    return f"{type(value).__name__}.{_enum_name(value, 'quant_format', _FORMAT_CLASSES)}"


def _names(value, argument):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        return [str(v) for v in value]
    except TypeError:
        raise TypeError(f"{argument}: expected a list of strings, got {value!r}") from None


def _subgraphs(value):
    """Quark's subgraphs_to_exclude, [([start nodes], [end nodes]), ...], as JSON lists."""
    if value is None:
        return []
    pairs = []
    for pair in value:
        if isinstance(pair, str) or len(pair) != 2:
            raise TypeError(f"subgraphs_to_exclude: expected ([start nodes], [end nodes]) pairs, got {pair!r}")
        pairs.append([_names(pair[0], "subgraphs_to_exclude"), _names(pair[1], "subgraphs_to_exclude")])
    return pairs


def _json_value(value):
    """Values of extra_options as JSON: enum members by name, numpy scalars as numbers."""
    if isinstance(value, enum.Enum):
        return value.name
    if hasattr(value, "item") and callable(value.item):  # numpy scalars and 0-d arrays
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return value.tolist()
    raise TypeError(f"extra_options: cannot pass {value!r} to the quantizer")


def _unbuilt(option, part):
    return UnsupportedError(f"{option}: {part} is not built in onnxptq yet")


# Progress of the long phases goes to the standard logging module (logger "onnxptq", level
# DEBUG) and to the progress_callback a caller gives.
_logger = logging.getLogger("onnxptq")


def _progress_function(callback):
    def report(phase, unit, done, total):
        _logger.debug("%s: %d of %s %s", phase, done, total or "?", unit)
        if callback is not None:
            callback(phase, done, total, unit)
    return report


def _model_argument(model_input):
    """A file path as a str, an onnx.ModelProto as its serialized bytes (the proto is not changed)."""
    if isinstance(model_input, (str, os.PathLike)):
        return os.fspath(model_input)
    if type(model_input).__name__ == "ModelProto" and callable(getattr(model_input, "SerializeToString", None)):
        try:
            return model_input.SerializeToString()
        except ValueError as e:  # protobuf's 2 GB limit
            raise Error(f"model_input: the ModelProto cannot be serialized ({e}); save it with external data "
                        "and give its path") from None
    raise TypeError(f"model_input: expected a file path or an onnx.ModelProto, got {type(model_input).__name__}")


def _run(model_input, model_output, reader, config, extra_options, random_shape, use_external_data_format,
         print_summary, log_progress, target=None, progress_callback=None, calibration_data_path=None):
    """Calls the core; `config` holds the arguments in the JSON form of `onnxptq quantize --config`.
    `model_input` is a path or an onnx.ModelProto; with `model_output` None the quantized model
    comes back in the result's "model" as an onnx.ModelProto. Returns the core's result dict."""
    model_argument = _model_argument(model_input)
    if model_output is not None and not isinstance(model_output, (str, os.PathLike)):
        raise TypeError(f"model_output: expected a file path, got {type(model_output).__name__}")
    if model_output is not None and os.fspath(model_output) == "":
        raise Error("model_output: an empty path")
    make_reader = None
    if calibration_data_path is not None:
        if reader is not None:
            raise Error("give calibration_data_reader or calibration_data_path, not both")
        if not isinstance(calibration_data_path, (str, os.PathLike)):
            raise TypeError(f"calibration_data_path: expected a folder path, got {type(calibration_data_path).__name__}")
        from ._path_reader import PathDataReader
        folder = os.fspath(calibration_data_path)
        make_reader = lambda inputs: PathDataReader(folder, inputs)  # noqa: E731 (the model's inputs come from the core)
    extra = dict(extra_options or {})
    # The value ranges of the random reader calibration_data_reader=None stands for (the core reads
    # them too, for UseRandomData).
    ranges = extra.get("RandomDataReaderInputDataRange")
    # AutoMixprecision's EvaluateFunction is a Python function: passed beside the JSON config.
    auto_mp_evaluate = None
    if isinstance(extra.get("AutoMixprecision"), dict) and "EvaluateFunction" in extra["AutoMixprecision"]:
        extra["AutoMixprecision"] = dict(extra["AutoMixprecision"])
        auto_mp_evaluate = extra["AutoMixprecision"].pop("EvaluateFunction")
    config = dict(config, extra_options=extra)
    text = json.dumps(config, default=_json_value, allow_nan=False)
    output = "" if model_output is None else os.fspath(model_output)
    result = _core.quantize_static(model_argument, output, reader, text, random_shape, ranges,
                                   bool(use_external_data_format), bool(log_progress), target, auto_mp_evaluate,
                                   _progress_function(progress_callback), make_reader)
    for warning in result["warnings"]:
        warnings.warn(warning, stacklevel=3)
    if print_summary:
        print(result["summary"], end="")
        sys.stdout.flush()
    if result["model"] is not None:
        import onnx  # only for a model returned in memory
        result["model"] = onnx.load_from_string(result["model"])
    return result


def quantize_static(model_input,
                    model_output,
                    calibration_data_reader,
                    quant_format=QuantFormat.QDQ,
                    calibrate_method=PowerOfTwoMethod.MinMSE,
                    input_nodes=[],
                    output_nodes=[],
                    op_types_to_quantize=[],
                    random_data_reader_input_shape=[],
                    per_channel=False,
                    reduce_range=False,
                    activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8,
                    nodes_to_quantize=None,
                    nodes_to_exclude=None,
                    optimize_model=True,
                    use_external_data_format=False,
                    execution_providers=['CPUExecutionProvider'],
                    enable_dpu=False,
                    convert_fp16_to_fp32=False,
                    convert_nchw_to_nhwc=False,
                    include_cle=False,
                    extra_options={},
                    *,
                    inclue_cle=None,
                    fp16_fp32_convert=None,
                    debug_mode=False,
                    print_summary=True,
                    extra_op_types_to_quantize=None,
                    subgraphs_to_exclude=None,
                    accuracy_target=None,
                    progress_callback=None):
    """vai_q_onnx.quantize_static: quantizes the model file `model_input` (or an onnx.ModelProto,
    beyond vai_q_onnx 1.16, whose model_input is a path) with samples from `calibration_data_reader` (None:
    one random sample) and writes `model_output`.

    The signature and defaults are those of the vai_q_onnx user guide ("Vitis AI Quantizer for
    ONNX"); `inclue_cle` (the guide's spelling) and `fp16_fp32_convert` (vai_q_onnx 1.16's name) are
    accepted as the same arguments as `include_cle` and `convert_fp16_to_fp32`. An argument
    whose feature the core lacks raises onnxptq.Error naming it; errors of the core arrive as
    onnxptq.Error with the core's message. `debug_mode` prints the core's progress lines on
    stderr; `print_summary` prints the quantized nodes by op type and the time per phase.
    Returns the report of `onnxptq quantize --report` as a dict.

    `extra_op_types_to_quantize` and `subgraphs_to_exclude` (keyword only) are Quark's arguments of
    its quantize_static: op types quantized besides the others, and [([start nodes], [end nodes])]
    pairs whose nodes from start to end stay float. `nodes_to_exclude` takes Quark's patterns
    (names starting with ^ and containing .*) too.

    `accuracy_target` (beyond vai_q_onnx; docs/accuracy.md) searches for the cheapest model that
    keeps a metric: a dict with `evaluate_function` (model path -> float; higher is better unless
    `lower_is_better`) and `max_loss` or `max_relative_loss`, or with `min_sqnr` (dB, the built-in
    output SQNR on held-out calibration samples); optional `max_trials`, `time_limit`,
    `stop_at_first_pass`, `held_out`, `output_index`, `fallback_order` ("left-float", "alone"),
    `fallback_type` ("float", "int16", "bfloat16"; default int16 with enable_dpu, else float).
    The report then has "accuracy_target".

    `progress_callback(phase, done, total, unit)` (beyond vai_q_onnx) is called as the long phases
    go: ("calibration data", 3, 100, "samples"), ("fast finetune", 12, 53, "layers"),
    ("accuracy search", 4, 100, "trials"); total 0 when not known. The same goes to the logging
    module's "onnxptq" logger at DEBUG level.
    """
    if inclue_cle is not None:
        include_cle = include_cle or inclue_cle
    if fp16_fp32_convert is not None:
        convert_fp16_to_fp32 = convert_fp16_to_fp32 or fp16_fp32_convert
    config = {
        "quant_format": _format_name(quant_format),
        "calibrate_method": _enum_name(calibrate_method, "calibrate_method", _METHOD_CLASSES),
        "activation_type": _enum_name(activation_type, "activation_type", _TYPE_CLASSES),
        "weight_type": _enum_name(weight_type, "weight_type", _TYPE_CLASSES),
        "per_channel": bool(per_channel),
        "reduce_range": bool(reduce_range),
        "op_types_to_quantize": _names(op_types_to_quantize, "op_types_to_quantize"),
        "nodes_to_quantize": _names(nodes_to_quantize, "nodes_to_quantize"),
        "nodes_to_exclude": _names(nodes_to_exclude, "nodes_to_exclude"),
        "subgraphs_to_exclude": _subgraphs(subgraphs_to_exclude),
        "extra_op_types_to_quantize": _names(extra_op_types_to_quantize, "extra_op_types_to_quantize"),
        "input_nodes": _names(input_nodes, "input_nodes"),
        "output_nodes": _names(output_nodes, "output_nodes"),
        "execution_providers": _names(execution_providers, "execution_providers"),
        "optimize_model": bool(optimize_model),
        "include_cle": bool(include_cle),
        "enable_dpu": bool(enable_dpu),
        "convert_fp16_to_fp32": bool(convert_fp16_to_fp32),
        "convert_nchw_to_nhwc": bool(convert_nchw_to_nhwc),
    }
    if model_output is None:
        raise TypeError("model_output: expected a file path (vai_q_onnx's quantize_static writes the model)")
    return _run(model_input, model_output, calibration_data_reader, config, extra_options,
                random_data_reader_input_shape, use_external_data_format, print_summary, debug_mode,
                target=accuracy_target, progress_callback=progress_callback)["report"]


def quantize_dynamic(model_input,
                     model_output,
                     op_types_to_quantize=None,
                     per_channel=False,
                     reduce_range=False,
                     weight_type=QuantType.QInt8,
                     nodes_to_quantize=None,
                     nodes_to_exclude=None,
                     use_external_data_format=False,
                     extra_options=None,
                     *,
                     print_summary=False,
                     debug_mode=False):
    """quantize_dynamic of ONNX Runtime and vai_q_onnx (same signature and defaults): MatMul, Gemm
    and Conv of `model_input` (a path or an onnx.ModelProto) written as MatMulInteger / ConvInteger
    whose activations DynamicQuantizeLinear quantizes at run time (uint8), weights quantized now
    (`weight_type` QInt8, symmetric, or QUInt8, asymmetric; `per_channel` for MatMul weights along
    their last axis; `reduce_range` 7-bit). No calibration data. `op_types_to_quantize` (None: MatMul,
    Gemm, Conv), `nodes_to_quantize` and `nodes_to_exclude` choose the nodes; `extra_options` takes
    MatMulConstBOnly (default True) and WeightSymmetric. docs/formats.md shows what is written.
    Returns the report of `onnxptq quantize --report` as a dict."""
    config = {
        "use_dynamic_quant": True,
        "weight_type": _enum_name(weight_type, "weight_type", _TYPE_CLASSES),
        "per_channel": bool(per_channel),
        "reduce_range": bool(reduce_range),
        "op_types_to_quantize": _names(op_types_to_quantize or [], "op_types_to_quantize"),
        "nodes_to_quantize": _names(nodes_to_quantize, "nodes_to_quantize"),
        "nodes_to_exclude": _names(nodes_to_exclude, "nodes_to_exclude"),
    }
    if model_output is None:
        raise TypeError("model_output: expected a file path (quantize_dynamic writes the model)")
    return _run(model_input, model_output, None, config, extra_options, [], use_external_data_format,
                print_summary, debug_mode)["report"]


def sensitivity(model_input, calibration_data_reader=None, config=None, *, extra_options=None, samples=8,
                output_index=0, split=False, left_float=False, html_path=None, progress_callback=None):
    """How much each quantized node costs the model's output (`onnxptq sensitivity`; docs/cli.md):
    the model file quantized with `config` (a preset's name, or a dict of quantize_static's
    arguments by name, as a JSON config file of `onnxptq quantize --config`; `extra_options` added
    to it; None: quantize_static's defaults) and simulated with each node alone (with `split`,
    also its weight alone and its activations alone; with `left_float`, every node but it), on
    the first `samples` samples of the reader (None: one random sample). Returns {"whole_model",
    "nodes": [...], ...}, worst node first; `html_path` gets the page with the chart.
    `progress_callback(phase, done, total, unit)` is called as calibration samples are read and
    nodes measured, as quantize_static's is."""
    if not isinstance(model_input, (str, os.PathLike)):
        raise TypeError(f"model_input: expected a file path, got {type(model_input).__name__}")
    if isinstance(config, str) and extra_options is None:
        text = config
    else:
        if isinstance(config, str):
            raise TypeError("extra_options go with a config dict, not a preset name")
        config = dict(config or {})
        if extra_options:
            config["extra_options"] = dict(config.get("extra_options", {}), **extra_options)
        text = json.dumps(config, default=_json_value, allow_nan=False)
    return _core.sensitivity(os.fspath(model_input), calibration_data_reader, text, int(samples), int(output_index),
                             bool(split), bool(left_float), os.fspath(html_path) if html_path else "",
                             _progress_function(progress_callback))


def dump_model(model_input, dump_data_reader=None, random_data_reader_input_shape={}, dump_float=False,
               output_dir="./dump_results"):
    """vai_q_onnx's and Quark's dump_model: runs the quantized model file on the first sample of
    `dump_data_reader` (None: one random sample, shaped by random_data_reader_input_shape as
    quantize_static's is) and writes into `output_dir`, for each quantized tensor, its integers as
    <name>.bin (raw) and <name>.txt (one a line): the integers each DequantizeLinear reads (any Q/DQ
    format) and, for FixNeuron, round(x * 2^pos) in int8 as the seeds do; with dump_float every
    float node output as <name>_float.bin and .txt. '/' in names becomes '_'. Returns
    {"quantized", "float_tensors", "warnings"}; onnxptq.Error for a model with nothing quantized
    (unless dump_float)."""
    if not isinstance(model_input, (str, os.PathLike)):
        raise TypeError(f"model_input: expected a file path, got {type(model_input).__name__}")
    result = _core.dump_model(os.fspath(model_input), dump_data_reader, random_data_reader_input_shape,
                              bool(dump_float), os.fspath(output_dir))
    for warning in result["warnings"]:
        warnings.warn(warning, stacklevel=2)
    return result


from . import tools  # noqa: E402  (the model tools, over _core)

__all__ = [
    "CalibrationDataReader", "CalibrationMethod", "Error", "InternalError", "PowerOfTwoMethod", "QuantFormat",
    "QuantType", "UnsupportedError",
    "VitisQuantFormat", "VitisQuantType", "dump_model", "quantize_dynamic", "quantize_static", "sensitivity",
    "tools",
]
