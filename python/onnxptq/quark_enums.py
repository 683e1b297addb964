"""Quark for ONNX's own enums (quark.onnx.quantization.quant_utils and quark.onnx.calibration),
shared by the legacy configuration (onnxptq.quark) and the QConfig one (onnxptq.quark_qconfig)."""

import enum


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


class ExtendedCalibrationMethod(enum.Enum):
    """Weight calibration of float scales (extra option WeightCalibrateMethod): MinMSE's range search."""

    MinMSE = 0
