#!/usr/bin/python3
"""Calibration over MPI ranks on this machine: one process against mpirun -np 2, and what a merge exchanges.

Usage: /usr/bin/python3 bench/calibration_ranks.py [--build build] [--samples 16]
           [--methods MinMax,Percentile,MinMSE] [--models resnet50,ppocr_det]

For each model and method it runs `onnxptq calibrate MODEL --random N --method M` as one process
on 2 threads, then under `mpirun -np 2` with 1 thread a rank (the same 2 cores), checks the two
ranges files are the same bytes (or the same but for "passes": MinMSE "All" on one worker scores
its candidates in its first pass, which ranks cannot), and reads from rank 0's log the bytes of the largest rank's
statistics (what each rank sends in a merge). It also times the first and the last samples of
the one-process run apart (N/2 and N samples) to get the compute time of one sample on 2 threads.
Prints a markdown table: wall seconds of each run, their ratio (2 ranks / 1 process), seconds per
sample, statistics bytes per rank, and the number of tensors calibrated.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench_models import OCR, ROOT, resolve_models

MODELS = {
    "resnet50": ("{models}/resnet50.onnx", "input", "1x3x224x224"),
    "ppocr_det": (OCR + "/ch_PP-OCRv4_det_infer.onnx", "x", "1x3x640x640"),
}


def run_timed(command):
    """Runs a command; returns (wall seconds, stderr)."""
    start = time.perf_counter()
    p = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(command)}: {p.stderr.strip()}")
    return wall, p.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--methods", default="MinMax,Percentile,MinMSE")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    names, models_dir = resolve_models(args.models, MODELS, args.build)
    cli = os.path.join(args.build, "onnxptq")
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])

    print(f"samples: {args.samples}")
    print("| model | method | tensors | 1 process, 2 threads s | 2 ranks, 1 thread each s | ratio | identical | "
          "passes (1 process / 2 ranks) | s per sample (2 threads) | statistics bytes per rank |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            template, input_name, shape = MODELS[name]
            model = template.format(models=models_dir)
            for method in args.methods.split(","):
                def calibrate(n, out, threads):
                    return [cli, "calibrate", model, "--random", str(n), "--random-shape", f"{input_name}={shape}",
                            "--method", method, "--threads", str(threads), "-o", os.path.join(tmp, out)]
                one, _ = run_timed(calibrate(args.samples, "one.json", 2) + ["--quiet"])
                half, _ = run_timed(calibrate(args.samples // 2, "half.json", 2) + ["--quiet"])
                two, log = run_timed(mpirun + ["-np", "2"] + calibrate(args.samples, "two.json", 1))
                found = re.search(r"statistics (\d+) bytes per rank", log)
                if not found:
                    sys.exit(f"error: no statistics line in rank 0's log:\n{log}")
                with open(os.path.join(tmp, "one.json"), "rb") as a, open(os.path.join(tmp, "two.json"), "rb") as b:
                    one_bytes, two_bytes = a.read(), b.read()
                # MinMSE "All" on one worker scores its candidates in the first pass already: the
                # same ranges, but "passes" says 1 where ranks (and several workers) read twice.
                one_json, two_json = json.loads(one_bytes), json.loads(two_bytes)
                passes = f"{one_json['passes']} / {two_json['passes']}"
                same = "yes" if one_bytes == two_bytes else "ranges yes" if (
                    {k: v for k, v in one_json.items() if k != "passes"} ==
                    {k: v for k, v in two_json.items() if k != "passes"}) else "NO"
                tensors = len(one_json["tensors"])
                per_sample = (one - half) / (args.samples - args.samples // 2)
                print(f"| {name} | {method} | {tensors} | {one:.2f} | {two:.2f} | {two / one:.2f} | "
                      f"{same} | {passes} | {per_sample:.3f} | {int(found.group(1))} |", flush=True)


if __name__ == "__main__":
    main()
