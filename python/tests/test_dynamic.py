"""quantize_dynamic (ONNX Runtime's and vai_q_onnx's signature): integer ops, no calibration data."""
import numpy as np
import onnx
from onnx import numpy_helper
import pytest

import onnxptq
from conftest import quantize_nodes


def test_quantize_dynamic_writes_integer_ops_and_int8_weights(tiny_model, tmp_path):
    out = tmp_path / "q.onnx"
    with _no_warning():
        report = onnxptq.quantize_dynamic(tiny_model, str(out))
    counts = quantize_nodes(out)
    assert counts.get("DynamicQuantizeLinear") == 2 and counts.get("MatMulInteger") == 1
    assert counts.get("ConvInteger") == 1 and "Gemm" not in counts
    assert isinstance(report, dict)
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    # weight_type QInt8 by default: symmetric, zero point 0, codes within [-127, 127].
    assert weights["fc_quantized"].dtype == np.int8 and weights["fc_zero_point"] == 0
    assert np.abs(weights["fc_quantized"]).max() == 127


def test_quantize_dynamic_options(tiny_model, tmp_path):
    out = tmp_path / "q.onnx"
    onnxptq.quantize_dynamic(tiny_model, str(out), op_types_to_quantize=["MatMul"], per_channel=True,
                             reduce_range=True, weight_type=onnxptq.QuantType.QUInt8)
    counts = quantize_nodes(out)
    assert counts.get("MatMulInteger") == 1 and counts.get("Conv") == 1 and "ConvInteger" not in counts
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(out)).graph.initializer}
    # Per channel along B's last axis (the Gemm's B transposed: [64, 40]), 7-bit uint8 codes.
    assert weights["fc_scale"].shape == (40,) and weights["fc_quantized"].dtype == np.uint8
    assert weights["fc_quantized"].max() <= 127
    onnxptq.quantize_dynamic(tiny_model, str(out), nodes_to_exclude=["conv"])
    assert "ConvInteger" not in quantize_nodes(out)
    with pytest.raises(onnxptq.UnsupportedError, match="op type Add"):
        onnxptq.quantize_dynamic(tiny_model, str(out), op_types_to_quantize=["Add"])


class _no_warning:
    """No warning (in particular no "no calibration data" warning) while quantizing."""

    def __enter__(self):
        import warnings
        self._catch = warnings.catch_warnings(record=True)
        self._list = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        assert not [str(w.message) for w in self._list]
