"""Quark for ONNX's newer configuration API (quark.onnx: QConfig, QLayerConfig, the *Spec tensor
configs, the algorithm configs and the *_QCONFIG presets), lowered onto the legacy
QuantizationConfig as Quark's own quark/onnx/quantization/config/maps.py (_map_q_config) does:

- calibrate_method comes from the input_tensors spec: (MinMax, Float32) MinMax, Percentile,
  LayerwisePercentile, Distribution, Entropy, MinMSE PowerOfTwoMethod.MinMSE, (MinMax, PowerOf2)
  PowerOfTwoMethod.NonOverflow; activation_type and weight_type from the specs' data types;
  QuantFormat.QDQ when both are 8-bit integers, ExtendedQuantFormat.QDQ otherwise; per_channel
  when the weight spec is per channel; ActivationSymmetric and WeightSymmetric from the specs;
  EnableNPUCnn when both scale types are PowerOf2 (unless given); for a Float32 weight spec (unless
  WeightCalibrateMethod is given) WeightCalibrateMethod ExtendedCalibrationMethod.MinMSE when it
  calibrates by MinMSE, CalibrationMethod.MinMax otherwise (_map_weight_calibration_method).
- specific_layer_config and layer_type_config become TensorQuantOverrides of each matched node's
  activation inputs (those before its first initializer), weight (the first initializer), bias
  (the input after it) and outputs; MixedPrecisionTensor (with SpecificTensorPrecision) first,
  then layer types, then layers, then the user's own TensorQuantOverrides, later ones winning.
  A None key of layer_type_config excludes those op types.
- exclude: node names and patterns go to nodes_to_exclude.
- algo_config / algorithms: each writes its defaults into extra_options where the user set
  nothing and switches its algorithm on (AlgoConfig._get_config, ModelQuantizer.quantize_model).

What Quark's lowering ignores (a global bias or output spec, Group granularity) and what the core
has not built (BFP/MX types per layer) is
refused by name, never dropped. A BFP/MX global data type brings its attribute set (BFPAttributes,
MXAttributes: the presets' values for BFP16, MX4/6/9 and each OCP MX type) unless given.
"""

import copy
import enum
import re
import warnings

from . import CalibrationMethod, Error, PowerOfTwoMethod, QuantFormat, QuantType, _unbuilt
from .quark_enums import ExtendedCalibrationMethod, ExtendedQuantFormat, ExtendedQuantType, LayerWiseMethod


class CalibMethod(enum.Enum):
    MinMax = 0
    MinMSE = 1
    Percentile = 2
    Entropy = 3
    LayerwisePercentile = 4
    Distribution = 5


class ScaleType(enum.Enum):
    Float32 = 0
    PowerOf2 = 1
    Int16 = 2


class QuantGranularity(enum.Enum):
    Tensor = 0
    Channel = 1
    Group = 2


# ------------------------------------------------------------------------------------ data types
# Quark's data type classes (quark.onnx.quantization.config.data_type), used as classes (Int8Spec's
# data_type=Int8), with the legacy quant type each maps to.

class DataType:
    map_onnx_format = None


def _data_type(name, legacy):
    return type(name, (DataType,), {"map_onnx_format": legacy, "__doc__": f"Quark's {name} data type."})


Int4 = _data_type("Int4", ExtendedQuantType.QInt4)
UInt4 = _data_type("UInt4", ExtendedQuantType.QUInt4)
Int8 = _data_type("Int8", QuantType.QInt8)
UInt8 = _data_type("UInt8", QuantType.QUInt8)
Int16 = _data_type("Int16", ExtendedQuantType.QInt16)
UInt16 = _data_type("UInt16", ExtendedQuantType.QUInt16)
Int32 = _data_type("Int32", ExtendedQuantType.QInt32)
UInt32 = _data_type("UInt32", ExtendedQuantType.QUInt32)
Float16 = _data_type("Float16", ExtendedQuantType.QFloat16)
BFloat16 = _data_type("BFloat16", ExtendedQuantType.QBFloat16)
BFP16 = _data_type("BFP16", ExtendedQuantType.QBFP)
MX4 = _data_type("MX4", ExtendedQuantType.QBFP)
MX6 = _data_type("MX6", ExtendedQuantType.QBFP)
MX9 = _data_type("MX9", ExtendedQuantType.QBFP)
MXFP4E2M1 = _data_type("MXFP4E2M1", ExtendedQuantType.QMX)
MXFP6E3M2 = _data_type("MXFP6E3M2", ExtendedQuantType.QMX)
MXFP6E2M3 = _data_type("MXFP6E2M3", ExtendedQuantType.QMX)
MXFP8E5M2 = _data_type("MXFP8E5M2", ExtendedQuantType.QMX)
MXFP8E4M3 = _data_type("MXFP8E4M3", ExtendedQuantType.QMX)
MXInt8 = _data_type("MXInt8", ExtendedQuantType.QMX)

# The block data types' attribute sets (the presets' DEFAULT_BFP_PARAMS, DEFAULT_MICROEXPONENTS_PARAMS
# with its bit width, DEFAULT_MICROSCALING_PARAMS with its element type): the extra option and its value.
_BLOCK_ATTRIBUTES = {
    "BFP16": ("BFPAttributes", {"bfp_method": "to_bfp", "axis": 1, "bit_width": 16, "block_size": 8,
                                "rounding_mode": 2}),
    **{name: ("BFPAttributes", {"bfp_method": "to_bfp_prime", "axis": 1, "bit_width": bits, "block_size": 16,
                                "sub_block_size": 2, "sub_block_shift_bits": 1, "rounding_mode": 2})
       for name, bits in (("MX4", 11), ("MX6", 13), ("MX9", 16))},
    **{name: ("MXAttributes", {"element_dtype": dtype, "axis": 1, "block_size": 32, "rounding_mode": 2})
       for name, dtype in (("MXFP4E2M1", "fp4_e2m1"), ("MXFP6E3M2", "fp6_e3m2"), ("MXFP6E2M3", "fp6_e2m3"),
                           ("MXFP8E5M2", "fp8_e5m2"), ("MXFP8E4M3", "fp8_e4m3"), ("MXInt8", "int8"))},
}


def _data_type_class(data_type, what):
    cls = data_type if isinstance(data_type, type) else type(data_type)
    if not (isinstance(cls, type) and issubclass(cls, DataType)):
        raise TypeError(f"{what}: expected a data type (Int8, UInt8, Int16, ...), got {data_type!r}")
    return cls


def _legacy_type(data_type, what):
    """The legacy quant type of a data type class (or instance, as from_dict makes them)."""
    return _data_type_class(data_type, what).map_onnx_format


def _block_attributes(specs, extra):
    """BFPAttributes / MXAttributes in `extra` for the block data types of the global specs, unless
    given; two block types of one family with different attributes cannot share the one key."""
    chosen = {}
    for spec, part in specs:
        name = _data_type_class(spec.data_type, part).__name__
        if name not in _BLOCK_ATTRIBUTES:
            continue
        key, attributes = _BLOCK_ATTRIBUTES[name]
        if key in chosen and chosen[key][1] != attributes:
            raise Error(f"global_config: {chosen[key][0]} and {name} both need {key}, with different values "
                        "(one set holds for every node of the family)")
        chosen.setdefault(key, (name, attributes))
    for key, (name, attributes) in chosen.items():
        extra.setdefault(key, dict(attributes))


# ---------------------------------------------------------------------------------- tensor specs

class QTensorConfig:
    """How one tensor is quantized: symmetric, scale_type, calibration_method, quant_granularity,
    data_type (Quark's QTensorConfig)."""

    def __init__(self, symmetric, scale_type, calibration_method, quant_granularity, data_type):
        self.symmetric = symmetric
        self.scale_type = scale_type
        self.calibration_method = calibration_method
        self.quant_granularity = quant_granularity
        self.data_type = data_type

    def __repr__(self):
        return (f"{type(self).__name__}(symmetric={self.symmetric}, scale_type={self.scale_type}, "
                f"calibration_method={self.calibration_method}, quant_granularity={self.quant_granularity}, "
                f"data_type={getattr(self.data_type, '__name__', self.data_type)})")


def _spec(name, symmetric, scale_type, method, data_type):
    def __init__(self, symmetric=symmetric, scale_type=scale_type, calibration_method=method,
                 quant_granularity=QuantGranularity.Tensor, data_type=data_type):
        QTensorConfig.__init__(self, symmetric, scale_type, calibration_method, quant_granularity, data_type)
    return type(name, (QTensorConfig,), {"__init__": __init__, "__doc__": f"Quark's {name} and its defaults."})


# Quark's spec.py defaults: integers calibrate by Percentile on float scales, XInt8 by MinMSE on
# power-of-two scales, the float and block types by MinMax.
Int8Spec = _spec("Int8Spec", True, ScaleType.Float32, CalibMethod.Percentile, Int8)
UInt8Spec = _spec("UInt8Spec", False, ScaleType.Float32, CalibMethod.Percentile, UInt8)
XInt8Spec = type("XInt8Spec", (Int8Spec,), {"__init__": _spec("_", True, ScaleType.PowerOf2, CalibMethod.MinMSE,
                                                                 Int8).__init__, "__doc__": "Quark's XInt8Spec."})
Int16Spec = _spec("Int16Spec", True, ScaleType.Float32, CalibMethod.Percentile, Int16)
UInt16Spec = _spec("UInt16Spec", False, ScaleType.Float32, CalibMethod.Percentile, UInt16)
Int32Spec = _spec("Int32Spec", True, ScaleType.Float32, CalibMethod.Percentile, Int32)
UInt32Spec = _spec("UInt32Spec", False, ScaleType.Float32, CalibMethod.Percentile, UInt32)
BFloat16Spec = _spec("BFloat16Spec", True, ScaleType.Float32, CalibMethod.MinMax, BFloat16)
BFP16Spec = _spec("BFP16Spec", True, ScaleType.Float32, CalibMethod.MinMax, BFP16)
MX4Spec = _spec("MX4Spec", True, ScaleType.Float32, CalibMethod.MinMax, MX4)
MX6Spec = _spec("MX6Spec", True, ScaleType.Float32, CalibMethod.MinMax, MX6)
MX9Spec = _spec("MX9Spec", True, ScaleType.Float32, CalibMethod.MinMax, MX9)
MXFP4E2M1Spec = _spec("MXFP4E2M1Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXFP4E2M1)
MXFP6E3M2Spec = _spec("MXFP6E3M2Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXFP6E3M2)
MXFP6E2M3Spec = _spec("MXFP6E2M3Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXFP6E2M3)
MXFP8E5M2Spec = _spec("MXFP8E5M2Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXFP8E5M2)
MXFP8E4M3Spec = _spec("MXFP8E4M3Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXFP8E4M3)
MXInt8Spec = _spec("MXInt8Spec", True, ScaleType.Float32, CalibMethod.MinMax, MXInt8)


class QLayerConfig:
    """The specs of a layer's tensors (Quark's QLayerConfig); `activation` is Quark's deprecated
    name of input_tensors."""

    def __init__(self, input_tensors=None, activation=None, weight=None, bias=None, output_tensors=None):
        self.input_tensors = input_tensors
        self.activation = activation
        self.weight = weight
        self.bias = bias
        self.output_tensors = output_tensors

    def inputs(self, what):
        """input_tensors, or the deprecated activation; Error for both."""
        if self.activation is not None and self.input_tensors is not None:
            raise Error(f"{what}: both `activation` and `input_tensors` are given; use `input_tensors`")
        return self.input_tensors if self.input_tensors is not None else self.activation


# ---------------------------------------------------------------------------- algorithm configs

class AlgoConfig:
    """An algorithm of Quark's algo_config: `_PARAMS` lists (argument, extra option, default);
    `_get_config` gives the extra options its values set where the user set nothing."""

    _PARAMS = ()
    _SECTION = None  # the extra option that holds the keys (FastFinetune, ...), or None: top level

    def __init__(self, *args, **kwargs):
        names = [p[0] for p in self._PARAMS]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments")
        values = {p[0]: p[2] for p in self._PARAMS}
        values.update(zip(names, args))
        for key, value in kwargs.items():
            if key not in values:
                raise TypeError(f"{type(self).__name__}: unexpected argument '{key}'")
            values[key] = value
        self.__dict__.update(values)

    def _values(self):
        return {key: getattr(self, name) for name, key, _ in self._PARAMS if key is not None}

    def _get_config(self, extra_options):
        given = extra_options.get(self._SECTION) or {} if self._SECTION else extra_options
        new = {k: v for k, v in self._values().items() if k not in given and v is not None}
        return {self._SECTION: new} if self._SECTION else new


class CLEConfig(AlgoConfig):
    """Cross-layer equalization (Nagel et al. 2019, arXiv:1906.04721): include_cle."""
    name = "cle"
    _PARAMS = (("cle_balance_method", "CLEBalanceMethod", "max"), ("cle_steps", "CLESteps", 1),
               ("cle_weight_threshold", "CLEWeightThreshold", 0.5),
               ("cle_scale_append_bias", "CLEScaleAppendBias", True),
               ("cle_scale_use_threshold", "CLEScaleUseThreshold", True),
               ("cle_total_layer_diff_threshold", "CLETotalLayerDiffThreshold", 1.9e-7))


_FAST_FINETUNE_PARAMS = (
    ("optim_device", "OptimDevice", "cpu"), ("infer_device", "InferDevice", "cpu"),
    ("fixed_seed", "FixedSeed", 1705472343), ("data_size", "DataSize", 1000000000), ("batch_size", "BatchSize", 1),
    ("num_batches", "NumBatches", 1), ("num_iterations", "NumIterations", 1000), ("learning_rate", "LearningRate", 0.1),
    ("early_stop", "EarlyStop", False), ("output_index", "OutputIndex", 0), ("lr_adjust", "LRAdjust", None),
    ("target_op_type", "TargetOpType",
     ["Conv", "ConvTranspose", "Gemm", "MatMul", "InstanceNormalization", "LayerNormalization"]),
    ("selective_update", "SelectiveUpdate", False), ("update_bias", "UpdateBias", False),
    ("output_qdq", "OutputQDQ", False), ("drop_ratio", "DropRatio", 1.0), ("mem_opt_level", "MemOptLevel", 1),
    ("cache_dir", "CacheDir", None), ("log_period", "LogPeriod", 100), ("ref_model_path", "RefModelPath", None),
    ("dynamic_batch", "DynamicBatch", False), ("parallel", "Parallel", False), ("reg_param", "RegParam", 0.01),
    ("beta_range", "BetaRange", (20, 2)), ("warm_start", "WarmStart", 0.2),
    ("select_max_mem_layer", "SelectMaxMemLayer", False), ("num_workers", "NumWorkers", 1),
    ("pin_memory", "PinMemory", False), ("use_gds", "UseGDS", False))


class AdaRoundConfig(AlgoConfig):
    """AdaRound (Nagel et al. 2020, arXiv:2004.10568): include_fast_ft with FastFinetune."""
    name = "adaround"
    _SECTION = "FastFinetune"
    _PARAMS = _FAST_FINETUNE_PARAMS

    def _values(self):
        return dict(super()._values(), OptimAlgorithm=self.name)


class AdaQuantConfig(AdaRoundConfig):
    """AdaQuant (Hubara et al. 2020, arXiv:2006.10518): AdaRound's keys, 3000 iterations at 1e-5."""
    name = "adaquant"
    _PARAMS = tuple((n, k, {"num_iterations": 3000, "learning_rate": 1e-5}.get(n, d))
                    for n, k, d in _FAST_FINETUNE_PARAMS)


class AutoMixprecisionConfig(AlgoConfig):
    """Quark's automatic mixed precision: include_auto_mp with AutoMixprecision. The target types
    are data types (Int16, BFloat16, ...) or quant types."""
    name = "auto_mixprecision"
    _SECTION = "AutoMixprecision"
    _PARAMS = (("data_size", "DataSize", 10000000), ("target_op_type", "TargetOpType",
                                                     ("Conv", "ConvTranspose", "Gemm", "MatMul")),
               ("target_quant_type", "TargetQuantType", None), ("act_target_quant_type", "ActTargetQuantType", None),
               ("weight_target_quant_type", "WeightTargetQuantType", None),
               ("bias_target_quant_type", "BiasTargetQuantType", None), ("dual_quant_nodes", "DualQuantNodes", False),
               ("output_index", "OutputIndex", 0), ("l2_target", "L2Target", 0.5),
               ("top1_acc_target", "Top1AccTarget", None), ("evaluate_function", "EvaluateFunction", None),
               ("num_target", "NumTarget", 0), ("target_tensors", "TargetTensors", []),
               ("target_indices", "TargetIndices", []), ("exclude_indices", "ExcludeIndices", []),
               ("no_input_qdq_shared", "NoInputQDQShared", True), ("auto_mix_use_fast_ft", "AutoMixUseFastFT", False))

    def _values(self):
        values = super()._values()
        for key in ("TargetQuantType", "ActTargetQuantType", "WeightTargetQuantType", "BiasTargetQuantType"):
            if values[key] is not None and not isinstance(values[key], enum.Enum):
                values[key] = _legacy_type(values[key], f"AutoMixprecisionConfig {key}")
        return values


class BiasCorrectionConfig(AlgoConfig):
    """Bias correction (Nagel et al. 2019, arXiv:1906.04721, section 4.2): the extra option
    BiasCorrection, the biases of the quantized Conv, ConvTranspose and Gemm nodes moved by their
    mean output error on the calibration data."""
    name = "bias_correction"
    _PARAMS = ()

    def _values(self):
        return {"BiasCorrection": True}


class SmoothQuantConfig(AlgoConfig):
    """SmoothQuant (Xiao et al. 2023, arXiv:2211.10438): include_sq with SmoothAlpha (a number, or
    "auto" for onnxptq's per-input search)."""
    name = "smooth_quant"
    _PARAMS = (("alpha", "SmoothAlpha", 0.5),)


class GPTQConfig(AlgoConfig):
    """GPTQ (Frantar et al. 2023, arXiv:2210.17323): the extra options UseGPTQ and GPTQParams.
    onnxptq rounds the MatMul weights on the quantizer's own scales, so the arguments that describe
    Quark's GPTQ quantizer (bits, group_size, per_channel, weight_symmetric, mse) are passed only
    when given, and the core refuses one that disagrees with the weights' quantization."""
    name = "gptq"
    _SECTION = "GPTQParams"
    _PARAMS = (("bits", "Bits", 8), ("block_size", "BlockSize", 128), ("group_size", "GroupSize", -1),
               ("perc_damp", "PercDamp", 0.01), ("act_order", "ActOrder", False),
               ("per_channel", "PerChannel", False), ("mse", "MSE", False), ("weight_symmetric", "WeightSymmetric", True))
    _GRID = ("bits", "group_size", "per_channel", "mse", "weight_symmetric")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._given = set([p[0] for p in self._PARAMS][:len(args)]) | set(kwargs)

    def _values(self):
        return {key: getattr(self, name) for name, key, _ in self._PARAMS
                if name not in self._GRID or name in self._given}

    def _get_config(self, extra_options):
        config = super()._get_config(extra_options)
        if "UseGPTQ" not in extra_options:
            config["UseGPTQ"] = True
        return config


class QuarotConfig(AlgoConfig):
    """QuaRot (Ashkboos et al. 2024, arXiv:2404.00456), its R1 rotation: include_rotation with
    RMatrixDim (a power of two), UseRandomHad and RConfigPath (the JSON of R1_pairs)."""
    name = "quarot"
    _PARAMS = (("r_matrix_dim", "RMatrixDim", 4096), ("use_random_had", "UseRandomHad", False),
               ("r_config_path", "RConfigPath", None))


_ALGO_FLAGS = {CLEConfig: "include_cle", AdaRoundConfig: "include_fast_ft", AutoMixprecisionConfig: "include_auto_mp",
               SmoothQuantConfig: "include_sq", QuarotConfig: "include_rotation"}


def _recursive_update(base, new):
    """quark.onnx's recursive_update: dicts merge key by key, anything else replaces."""
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _recursive_update(base[key], value)
        else:
            base[key] = value


def apply_algorithms(algorithms, extra_options, what="algorithms"):
    """Writes each algorithm's defaults into `extra_options` (not over the user's keys) and
    returns the switches they turn on, {"include_cle": True, ...}."""
    flags = {}
    algorithms = list(algorithms or [])
    finetune = [a for a in algorithms if isinstance(a, AdaRoundConfig)]
    if len(finetune) > 1:
        raise Error(f"{what}: {' and '.join(type(a).__name__ for a in finetune)} are both given; fast finetune "
                    "runs one of AdaRound and AdaQuant")
    for algo in algorithms:
        if not isinstance(algo, AlgoConfig):
            raise TypeError(f"{what}: expected algorithm configs (CLEConfig(), AdaRoundConfig(), ...), got {algo!r}")
        _recursive_update(extra_options, algo._get_config(extra_options))
        flags.update({flag: True for cls, flag in _ALGO_FLAGS.items() if isinstance(algo, cls)})
    return flags


# -------------------------------------------------------------------------------------- QConfig

class QConfig:
    """Quark's QConfig. Keyword arguments beyond the named ones are extra options (Quark's
    top-level knobs OptimizeModel, EnableNPUCnn, OpTypesToQuantize, ... among them); an
    `extra_options={...}` keyword is merged into them, as Quark does."""

    def __init__(self, global_config, specific_layer_config=None, layer_type_config=None, exclude=None,
                 algo_config=None, use_external_data_format=False, **extra_options):
        self.global_config = global_config
        self.specific_layer_config = specific_layer_config or {}
        self.layer_type_config = layer_type_config or {}
        self.exclude = exclude or []
        self.algo_config = algo_config or []
        self.use_external_data_format = use_external_data_format
        self.extra_options = extra_options

    @staticmethod
    def get_default_config(name):
        """Quark's QConfig.get_default_config: the legacy preset `name` as a Config."""
        from .quark import Config, get_default_config
        return Config(global_quant_config=get_default_config(name))


def _adaround():
    return AdaRoundConfig(learning_rate=0.1, num_iterations=1000)


def _adaquant():
    return AdaQuantConfig(learning_rate=0.00001, num_iterations=3000)


# Quark's custom_config.py presets of the new API.
_FQNIC = {"ForceQuantizeNoInputCheck": True}
_A8W8 = {"ForceQuantizeNoInputCheck": True, "AlignSlice": False, "FoldRelu": True, "AlignConcat": True}
_A16W8 = dict(_A8W8, AlignEltwiseQuantType=True)
XINT8_QCONFIG = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), extra_options=dict(_FQNIC))
XINT8_ADAROUND_QCONFIG = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), algo_config=[_adaround()],
                                 extra_options=dict(_FQNIC))
XINT8_ADAQUANT_QCONFIG = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), algo_config=[_adaquant()],
                                 extra_options=dict(_FQNIC))
VINT8_QCONFIG = QConfig(QLayerConfig(activation=XInt8Spec(), weight=XInt8Spec()), extra_options={
    "OptimizeModel": False, "EnableNPUCnn": False, "UseRandomData": True, "ConvertBNToConv": True,
    "ConvertSigmoidToHardSigmoid": False, "ConvertClipToRelu": True, "ConvertSplitToSlice": True,
    "SplitLargeKernelPool": False, "ReplaceClip6Relu": True, "ConvertReduceMeanToGlobalAvgPool": False,
    "RemoveQDQConvClip": False, "RemoveQDQConvPRelu": False, "RemoveQDQConvRelu": False,
    "RemoveQDQConvLeakyRelu": False, "Int32Bias": False, "DedicatedQDQPair": True, "QuantizeAllOpTypes": True})
A8W8_QCONFIG = QConfig(QLayerConfig(activation=Int8Spec(), weight=Int8Spec()), extra_options=dict(_A8W8))
A8W8_ADAROUND_QCONFIG = QConfig(QLayerConfig(activation=Int8Spec(), weight=Int8Spec()), algo_config=[_adaround()],
                                extra_options=dict(_A8W8))
A8W8_ADAQUANT_QCONFIG = QConfig(QLayerConfig(activation=Int8Spec(), weight=Int8Spec()), algo_config=[_adaquant()],
                                extra_options=dict(_A8W8))
A16W8_QCONFIG = QConfig(QLayerConfig(activation=Int16Spec(), weight=Int8Spec()), extra_options=dict(_A16W8))
A16W8_ADAROUND_QCONFIG = QConfig(QLayerConfig(activation=Int16Spec(), weight=Int8Spec()), algo_config=[_adaround()],
                                 extra_options=dict(_A16W8))
A16W8_ADAQUANT_QCONFIG = QConfig(QLayerConfig(activation=Int16Spec(), weight=Int8Spec()), algo_config=[_adaquant()],
                                 extra_options=dict(_A16W8))
BF16_QCONFIG = QConfig(QLayerConfig(activation=BFloat16Spec(), weight=BFloat16Spec()), extra_options=dict(_FQNIC))
BFP16_QCONFIG = QConfig(QLayerConfig(activation=BFP16Spec(), weight=BFP16Spec()))


# ------------------------------------------------------------------------------------- lowering

# Quark's top-level knobs of QConfig, kwargs of the legacy class: QuantizationConfig field and
# default.
_FIELD_OPTIONS = {
    "InputNodes": ("input_nodes", []), "OutputNodes": ("output_nodes", []),
    "OpTypesToQuantize": ("op_types_to_quantize", []), "NodesToQuantize": ("nodes_to_quantize", []),
    "ExtraOpTypesToQuantize": ("extra_op_types_to_quantize", []),
    "ExecutionProviders": ("execution_providers", ["CPUExecutionProvider"]),
    "OptimizeModel": ("optimize_model", True), "ConvertFP16ToFP32": ("convert_fp16_to_fp32", False),
    "ConvertNCHWToNHWC": ("convert_nchw_to_nhwc", False), "DebugMode": ("debug_mode", False),
    "CryptoMode": ("crypto_mode", False), "PrintSummary": ("print_summary", True),
    "IgnoreWarnings": ("ignore_warnings", True),
}


def _calibrate_method(spec):
    method, scale = spec.calibration_method, spec.scale_type
    if method == CalibMethod.MinMax and scale in (ScaleType.Float32, ScaleType.Int16):  # Int16Scale: MinMax
        return CalibrationMethod.MinMax
    if method == CalibMethod.MinMax and scale == ScaleType.PowerOf2:
        return PowerOfTwoMethod.NonOverflow
    table = {CalibMethod.Percentile: CalibrationMethod.Percentile, CalibMethod.Entropy: CalibrationMethod.Entropy,
             CalibMethod.Distribution: CalibrationMethod.Distribution, CalibMethod.MinMSE: PowerOfTwoMethod.MinMSE,
             CalibMethod.LayerwisePercentile: LayerWiseMethod.LayerWisePercentile}
    if method not in table:
        raise Error(f"input_tensors: calibration_method {method} with scale_type {scale} has no calibration method")
    return table[method]


def _check_spec(spec, what):
    if not isinstance(spec, QTensorConfig):
        raise TypeError(f"{what}: expected a tensor spec (Int8Spec(), ...), got {spec!r}")
    if spec.quant_granularity == QuantGranularity.Group:
        raise _unbuilt(f"{what}: QuantGranularity.Group", "group-wise quantization")
    return _legacy_type(spec.data_type, f"{what} data_type")


def _model_graph(model_input):
    import onnx  # only for per-layer and per-type configs, which name the model's nodes
    if type(model_input).__name__ == "ModelProto":
        return model_input.graph
    return onnx.load(model_input, load_external_data=False).graph


def _target_nodes(graph, names, what):
    """quark.onnx's get_all_target_nodes: names, and patterns that start with ^ and hold .*."""
    nodes = {n.name for n in graph.node}
    found = set()
    for item in names:
        if isinstance(item, tuple):
            raise _unbuilt(f"{what}: subgraph {item!r}", "selecting subgraphs")
        if not isinstance(item, str):
            raise TypeError(f"{what}: expected node names or patterns, got {item!r}")
        if item.startswith("^"):
            if ".*" not in item:
                raise Error(f"{what}: pattern '{item}' has no .* (Quark reads patterns that start with ^ and hold .*)")
            matched = {n for n in nodes if re.search(item, n)}
            if not matched:
                raise Error(f"{what}: pattern '{item}' matches no node")
            found |= matched
        elif item in nodes:
            found.add(item)
        else:
            raise Error(f"{what}: no node named '{item}' in the model")
    return found


def _overrides(graph, node, layer, what, into):
    """maps.py's _update_tensor_quant_config_dict: the node's tensors with the layer's specs."""
    initializers = {t.name for t in graph.initializer}
    entry = lambda spec, part: [{"quant_type": _check_spec(spec, f"{what} {part}"),  # noqa: E731
                                 "symmetric": bool(spec.symmetric)}]
    inputs = layer.inputs(what)
    if layer.activation is not None and layer.input_tensors is None:
        raise Error(f"{what}: `activation` is Quark's old name; give `input_tensors`")
    i = 0
    while i < len(node.input) and node.input[i] not in initializers:
        if inputs is not None:
            into[node.input[i]] = entry(inputs, "input_tensors")
        i += 1
    if i < len(node.input) and layer.weight is not None:
        into[node.input[i]] = entry(layer.weight, "weight")
    if i + 1 < len(node.input) and layer.bias is not None:
        into[node.input[i + 1]] = entry(layer.bias, "bias")
    if layer.output_tensors is not None:
        for output in node.output:
            into[output] = entry(layer.output_tensors, "output_tensors")


def lower(qconfig, model_input):
    """The QuantizationConfig fields (a dict) and the algorithms of `qconfig`, for `model_input`
    (a path or an onnx.ModelProto, read only for per-layer and per-type configs)."""
    extra = copy.deepcopy(qconfig.extra_options)  # the algorithms write into it
    nested = extra.pop("extra_options", None)
    if nested is not None and not isinstance(nested, dict):
        raise TypeError(f"QConfig extra_options: expected a dict, got {nested!r}")
    extra.update(nested or {})
    layer = qconfig.global_config
    if not isinstance(layer, QLayerConfig):
        raise TypeError(f"QConfig global_config: expected a QLayerConfig, got {layer!r}")
    inputs = layer.inputs("global_config")
    if inputs is None:
        raise Error("global_config: input_tensors is required")
    if layer.weight is None:
        raise Error("global_config: weight is required")
    for part in ("bias", "output_tensors"):
        if getattr(layer, part) is not None:
            raise Error(f"global_config {part}: Quark's lowering reads only input_tensors and weight of the global "
                        "config; give it in specific_layer_config or layer_type_config")
    if inputs.quant_granularity != QuantGranularity.Tensor:
        raise Error(f"global_config input_tensors: {inputs.quant_granularity}: activations are quantized per tensor")
    activation_type = _check_spec(inputs, "global_config input_tensors")
    weight_type = _check_spec(layer.weight, "global_config weight")
    _block_attributes(((inputs, "global_config input_tensors"), (layer.weight, "global_config weight")), extra)
    fields = {"calibrate_method": _calibrate_method(inputs), "activation_type": activation_type,
              "weight_type": weight_type, "per_channel": layer.weight.quant_granularity == QuantGranularity.Channel,
              "use_external_data_format": bool(qconfig.use_external_data_format),
              "include_cle": False}  # QConfig runs CLE only with a CLEConfig
    eight_bit = (QuantType.QInt8, QuantType.QUInt8)
    fields["quant_format"] = (QuantFormat.QDQ if activation_type in eight_bit and weight_type in eight_bit
                              else ExtendedQuantFormat.QDQ)
    for spec, part in ((inputs, "input_tensors"), (layer.weight, "weight")):
        if spec.scale_type == ScaleType.Float32 and spec.calibration_method == CalibMethod.MinMSE:
            warnings.warn(f"global_config {part}: MinMSE with ScaleType.Float32 (Quark: deployment cannot proceed)")
        if spec.scale_type == ScaleType.PowerOf2 and spec.calibration_method not in (CalibMethod.MinMSE,
                                                                                     CalibMethod.MinMax):
            warnings.warn(f"global_config {part}: ScaleType.PowerOf2 wants MinMSE or MinMax (Quark: deployment "
                          "cannot proceed)")
    if layer.weight.scale_type != ScaleType.Float32:
        if extra.pop("WeightCalibrateMethod", None) is not None:
            warnings.warn("WeightCalibrateMethod applies to Float32 weight scales only; dropped, as Quark does")
    elif "WeightCalibrateMethod" not in extra:  # float-scale weights: MinMSE's range search, else min/max
        extra["WeightCalibrateMethod"] = (ExtendedCalibrationMethod.MinMSE
                                          if layer.weight.calibration_method == CalibMethod.MinMSE
                                          else CalibrationMethod.MinMax)
    int16_scales = {spec.scale_type == ScaleType.Int16 for spec in (inputs, layer.weight)}
    if len(int16_scales) > 1:
        raise Error("global_config: ScaleType.Int16 on input_tensors or weight alone (Int16Scale sets every scale)")
    if True in int16_scales:
        extra["Int16Scale"] = True
    extra["ActivationSymmetric"] = bool(inputs.symmetric)
    extra["WeightSymmetric"] = bool(layer.weight.symmetric)
    both_pof2 = inputs.scale_type == ScaleType.PowerOf2 and layer.weight.scale_type == ScaleType.PowerOf2
    fields["enable_npu_cnn"] = bool(extra.pop("EnableNPUCnn", both_pof2))
    for key, (field, default) in _FIELD_OPTIONS.items():
        fields[field] = extra.pop(key, default)
    if "PreprocessYAML" in extra:
        raise _unbuilt("PreprocessYAML", "Quark's graph-rewrite pipeline (shapeshifter)")

    # TensorQuantOverrides: MixedPrecisionTensor, then layer types, layers, the user's own.
    overrides = {}
    if extra.pop("SpecificTensorPrecision", False) and "MixedPrecisionTensor" in extra:
        for quant_type, tensors in extra.pop("MixedPrecisionTensor").items():
            for tensor in tensors:
                overrides[tensor] = [{"quant_type": quant_type}]
    excluded = []
    if qconfig.layer_type_config or qconfig.specific_layer_config:
        graph = _model_graph(model_input)
        by_type, by_name = {}, {}
        for key, op_types in qconfig.layer_type_config.items():
            for node in graph.node:
                if node.op_type in op_types:
                    if key is None:
                        excluded.append(node.name)
                    else:
                        _overrides(graph, node, key, f"layer_type_config {node.op_type}", by_type)
        for key, names in qconfig.specific_layer_config.items():
            targets = _target_nodes(graph, names, "specific_layer_config")
            for node in graph.node:
                if node.name in targets:
                    _overrides(graph, node, key, f"specific_layer_config '{node.name}'", by_name)
        _recursive_update(overrides, by_type)
        _recursive_update(overrides, by_name)
    _recursive_update(overrides, extra.pop("TensorQuantOverrides", {}))
    if overrides:
        extra["TensorQuantOverrides"] = overrides

    fields["nodes_to_exclude"] = []
    fields["subgraphs_to_exclude"] = []
    for item in qconfig.exclude:
        (fields["subgraphs_to_exclude"] if isinstance(item, tuple) else fields["nodes_to_exclude"]).append(item)
    fields["nodes_to_exclude"] += excluded
    fields["extra_options"] = extra
    return fields, list(qconfig.algo_config)


__all__ = [
    "A16W8_ADAQUANT_QCONFIG", "A16W8_ADAROUND_QCONFIG", "A16W8_QCONFIG", "A8W8_ADAQUANT_QCONFIG",
    "A8W8_ADAROUND_QCONFIG", "A8W8_QCONFIG", "AdaQuantConfig", "AdaRoundConfig", "AlgoConfig", "AutoMixprecisionConfig",
    "BF16_QCONFIG", "BFP16", "BFP16Spec", "BFP16_QCONFIG", "BFloat16", "BFloat16Spec", "BiasCorrectionConfig",
    "CLEConfig", "CalibMethod", "DataType", "Float16", "GPTQConfig", "Int16", "Int16Spec", "Int32", "Int32Spec", "Int4",
    "Int8", "Int8Spec", "MX4", "MX4Spec", "MX6", "MX6Spec", "MX9", "MX9Spec", "MXFP4E2M1", "MXFP4E2M1Spec",
    "MXFP6E2M3", "MXFP6E2M3Spec", "MXFP6E3M2", "MXFP6E3M2Spec", "MXFP8E4M3", "MXFP8E4M3Spec", "MXFP8E5M2",
    "MXFP8E5M2Spec", "MXInt8", "MXInt8Spec", "QConfig", "QLayerConfig", "QTensorConfig", "QuantGranularity",
    "QuarotConfig", "ScaleType", "SmoothQuantConfig", "UInt16", "UInt16Spec", "UInt32", "UInt32Spec", "UInt4", "UInt8",
    "UInt8Spec", "VINT8_QCONFIG", "XINT8_ADAQUANT_QCONFIG", "XINT8_ADAROUND_QCONFIG", "XINT8_QCONFIG", "XInt8Spec",
]
