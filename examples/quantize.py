"""Quantizes an ONNX model with a Quark preset, written as AMD Quark for ONNX's own examples are:
only the import lines differ (``from quark.onnx import ModelQuantizer`` and
``from quark.onnx.quantization.config import Config, get_default_config`` there).

    python3 examples/quantize.py MODEL OUTPUT [PRESET]

It calibrates on 8 seeded random samples: a smoke test, not accuracy (give real samples).
"""
import sys

import numpy as np
import onnx

from onnxptq import CalibrationDataReader
from onnxptq.quark import Config, ModelQuantizer, get_default_config


class RandomDataReader(CalibrationDataReader):
    """Seeded random samples for the model's first input, its unknown dimensions set to 1, or 3
    and 32 for an image's channels and sides."""

    def __init__(self, model_path, count=8):
        first = onnx.load(model_path, load_external_data=False).graph.input[0]
        dims = [d.dim_value if d.dim_value > 0 else (3 if i == 1 else 32 if i > 1 else 1)
                for i, d in enumerate(first.type.tensor_type.shape.dim)]
        self.samples = iter([{first.name: np.random.default_rng(seed).random(dims, dtype=np.float32)}
                             for seed in range(count)])

    def get_next(self):
        return next(self.samples, None)


def main():
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} MODEL OUTPUT [PRESET]")
    model, output = sys.argv[1], sys.argv[2]
    quant_config = get_default_config(sys.argv[3] if len(sys.argv) > 3 else "XINT8")
    quantizer = ModelQuantizer(Config(global_quant_config=quant_config))
    quantizer.quantize_model(model, output, RandomDataReader(model))
    print(f"quantized model written to {output}")


if __name__ == "__main__":
    main()
