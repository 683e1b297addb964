#!/usr/bin/python3
"""Calibration speed and memory, against plain float inference with ONNX Runtime, in one script run.

Usage: /usr/bin/python3 bench/calibration.py [--build build] [--samples 10,100,1000]
           [--methods MinMax,NonOverflow,...] [--models resnet50,ppocr_det] [--threads 2]

For each model, method and sample count N it runs `onnxptq calibrate MODEL --random N --method M`
(seeded random samples of the model's input shape; the tensors `onnxptq quantize` would calibrate
with that method: its plan's, plus one run of the first sample to learn the value types) and, for
the same N, `node tests/oracle/ort_run.js MODEL --random 0 --repeat N` (N plain float inferences
on ONNX Runtime's CPU provider, one warm-up run). Both are whole processes: model loading and
session creation count on both sides. Prints a markdown table: wall seconds of each, their ratio
(calibration / ORT inference), the number of passes over the data, and the peak RSS of the
calibration process (ru_maxrss), with its ratio to the 10-sample run of the same method (a run of
its own, not printed, when 10 is not the first sample count asked for).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_models import OCR, ROOT, resolve_models

MODELS = {
    "resnet50": ("{models}/resnet50.onnx", "input", "1x3x224x224"),
    "ppocr_det": (OCR + "/ch_PP-OCRv4_det_infer.onnx", "x", "1x3x640x640"),
}
METHODS = ["MinMax", "NonOverflow", "MinMSE", "Entropy", "Percentile", "Distribution", "LayerWisePercentile"]


def run_measured(command):
    """Runs a command; returns (wall seconds, peak RSS MB of that process, stdout)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
        out = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)  # reaped here, so its own rusage is known
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            err.seek(0)
            sys.exit(f"error: {' '.join(command)}: {err.read().strip()}")
    return wall, usage.ru_maxrss / 1024, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--samples", default="10,100,1000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    names, models_dir = resolve_models(args.models, MODELS, args.build)

    print(f"threads: {args.threads}")
    print("| model | method | samples | passes | onnxptq calibrate s | ORT inference s | ratio | peak RSS MB | RSS vs 10 samples |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        template, input_name, shape = MODELS[name]
        model = template.format(models=models_dir)
        counts = [int(s) for s in args.samples.split(",")]
        ort_seconds = {}
        for n in counts:
            wall, _, _ = run_measured(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--random", "0",
                                    "--shape", f"{input_name}={shape}", "--repeat", str(n), "--warmup", "1",
                                    "--threads", str(args.threads), "--json"])
            ort_seconds[n] = wall
        for method in args.methods.split(","):
            def calibrate(n):
                return run_measured([os.path.join(args.build, "onnxptq"), "calibrate", model, "--random", str(n),
                                     "--random-shape", f"{input_name}={shape}", "--method", method,
                                     "--threads", str(args.threads), "--quiet"])
            # The memory column is against a 10-sample run: a separate one (not printed) unless it
            # comes first.
            base_rss = None if counts[0] == 10 else calibrate(10)[1]
            for n in counts:
                wall, rss, out = calibrate(n)
                result = json.loads(out)
                base_rss = base_rss or rss
                print(f"| {name} | {method} | {n} | {result['passes']} | {wall:.2f} | {ort_seconds[n]:.2f} | "
                      f"{wall / ort_seconds[n]:.2f} | {rss:.0f} | {rss / base_rss:.2f} |", flush=True)


if __name__ == "__main__":
    main()
