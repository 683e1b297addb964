#!/usr/bin/python3
"""Accuracy of quantized PP-OCRv4 det on rendered text: cosine similarity and PSNR against the float model.

Usage: /usr/bin/python3 bench/accuracy.py [--build build] [--calib 16] [--eval 8] [--size 320]

Renders CALIB calibration images (seeds 1..CALIB) and EVAL evaluation images (seeds 1001..), a
disjoint set, with tests/models/render_text_input.py; quantizes the model with `onnxptq quantize`
in each configuration below, calibrated on the first set; runs the float and each quantized model
with ONNX Runtime (npm onnxruntime-node, its default optimizations, as deployed) on the second set;
and compares each quantized output map with the float one using `onnxptq evaluate` (cosine
similarity and PSNR per image, averaged). Prints a markdown table.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

from bench_models import OCR, ROOT

MODEL = os.path.join(OCR, "ch_PP-OCRv4_det_infer.onnx")
# name, onnxptq quantize options, what the configuration is
CONFIGS = [
    ("U8S8 MinMax", ["--calibrate-method", "MinMax", "--activation-type", "QUInt8", "--weight-type", "QInt8"],
     "QDQ, uint8 activations (asymmetric), int8 weights, MinMax: ORT's U8S8"),
    ("CNN on CPU (seed)", ["--config", "VAI_CNN_CPU"],
     "the seed's recommended CPU configuration (preset VAI_CNN_CPU: U8S8 MinMax, QDQ)"),
    ("A8W8", ["--config", "A8W8"],
     "Quark's A8W8 preset: int8 symmetric activations and weights, MinMax, ExtendedQuantFormat.QDQ, CLE"),
    ("A8W8 without CLE", ["--config", "A8W8", "--no-include-cle"], "the same without cross-layer equalization"),
    ("A16W8", ["--config", "A16W8"],
     "Quark's A16W8 preset: int16 symmetric activations, int8 weights, MinMax, CLE"),
    ("A16W8 without CLE", ["--config", "A16W8", "--no-include-cle"], "the same without cross-layer equalization"),
    ("A16W8 per channel", ["--calibrate-method", "MinMax", "--activation-type", "QInt16", "--weight-type", "QInt8",
                           "--extra-option", "ActivationSymmetric=true", "--per-channel"],
     "A16W8 with per-channel weights: how much of A16W8's error is the int8 per-tensor weights"),
    ("XINT8 (vai_q_onnx defaults)", [],
     "power-of-two scales, MinMSE, int8, no enable_dpu (vai_q_onnx's defaults)"),
    ("XINT8", ["--config", "XINT8"],
     "Quark's XINT8 preset: power-of-two, MinMSE, uint8 symmetric activations, enable_dpu, CLE"),
    ("XINT8 without CLE", ["--config", "XINT8", "--no-include-cle"],
     "the same without cross-layer equalization"),
    ("CNN on NPU (seed)", ["--config", "VAI_CNN_NPU"],
     "the seed's recommended NPU configuration (preset VAI_CNN_NPU: XINT8 without CLE)"),
    ("CNN on NPU with CLE (seed)", ["--config", "VAI_CNN_NPU_CLE"],
     "the seed's CLE recipe (preset VAI_CNN_NPU_CLE: ReplaceClip6Relu, CLESteps 1, CLEScaleAppendBias)"),
]


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)}: {result.stderr.strip()}")
    return result.stdout


def ort_outputs(model, inputs, out_dir, literal=False):
    """Runs `model` on each input file with ONNX Runtime; writes out_dir/<input file name>."""
    os.makedirs(out_dir)
    for name in sorted(os.listdir(inputs)):
        with tempfile.TemporaryDirectory() as tmp:
            run(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--inputs",
                 "x=" + os.path.join(inputs, name), "--threads", "2", "--outputs", tmp] + (["--literal"] if literal else []))
            produced = [f for f in os.listdir(tmp) if f.endswith(".npy")]
            if len(produced) != 1:
                sys.exit(f"error: expected one output of {model}, got {produced}")
            shutil.move(os.path.join(tmp, produced[0]), os.path.join(out_dir, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--calib", type=int, default=16)
    parser.add_argument("--eval", type=int, default=8)
    parser.add_argument("--size", type=int, default=320)
    args = parser.parse_args()
    onnxptq = os.path.join(args.build, "onnxptq")
    render = os.path.join(ROOT, "tests/models/render_text_input.py")

    with tempfile.TemporaryDirectory() as work:
        calib, evaluation = os.path.join(work, "calib"), os.path.join(work, "eval")
        os.makedirs(calib)
        os.makedirs(evaluation)
        for i in range(1, args.calib + 1):
            run(["/usr/bin/python3", render, str(args.size), str(args.size), str(i), os.path.join(calib, f"{i:04d}.npy")])
        for i in range(1001, 1001 + args.eval):
            run(["/usr/bin/python3", render, str(args.size), str(args.size), str(i),
                 os.path.join(evaluation, f"{i:04d}.npy")])
        baseline = os.path.join(work, "float")
        ort_outputs(MODEL, evaluation, baseline)

        print(f"PP-OCRv4 det, {args.size}x{args.size} rendered text: {args.calib} calibration images, "
              f"{args.eval} evaluation images (disjoint seeds)")
        print("| configuration | cosine (ORT) | PSNR dB (ORT) | cosine (ORT, no graph optimizations) | "
              "PSNR dB (ORT, no graph optimizations) | what it is |")
        print("| --- | --- | --- | --- | --- | --- |")
        for i, (name, options, what) in enumerate(CONFIGS):
            quantized_model = os.path.join(work, f"q{i}.onnx")
            run([onnxptq, "quantize", MODEL, "-o", quantized_model, "--calib-data", calib, "--quiet"] + options)
            cells = []
            for literal in (False, True):
                results = os.path.join(work, f"q{i}{'_literal' if literal else ''}")
                ort_outputs(quantized_model, evaluation, results, literal)
                report = json.loads(run([onnxptq, "evaluate", "--baseline-results", baseline, "--quantized-results",
                                         results, "--json"]))
                cells += [f"{report['average']['cosine']:.5f}", f"{report['average']['psnr']:.2f}"]
            print(f"| {name} | {' | '.join(cells)} | {what} |")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
