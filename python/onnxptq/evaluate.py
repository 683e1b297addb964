"""Compares the results of a float model and of its quantized version, file by file: cosine
similarity, L2 loss and PSNR, for .npy, .png and .jpg results (the evaluate tool of the seeds,
computed by the C++ core, the same as `onnxptq evaluate`).

    python -m onnxptq.evaluate --baseline_results_folder DIR --quantized_results_folder DIR
"""

import argparse
import json
import os
import sys

from . import Error, _core


def evaluate(baseline_results_folder, quantized_results_folder):
    """{"files": [{"file", "cosine", "l2", "psnr"}, ...], "average": {...}, "text": table};
    NaN and infinite metrics are None. onnxptq.Error for missing or mismatched files."""
    return _core.evaluate(os.fspath(baseline_results_folder), os.fspath(quantized_results_folder))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m onnxptq.evaluate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline_results_folder", required=True, help="results of the float model")
    parser.add_argument("--quantized_results_folder", required=True, help="results of the quantized model")
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    args = parser.parse_args(argv)
    try:
        report = evaluate(args.baseline_results_folder, args.quantized_results_folder)
    except Error as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"files": report["files"], "average": report["average"]}, indent=2))
    else:
        print(report["text"], end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
