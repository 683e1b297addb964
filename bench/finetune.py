#!/usr/bin/python3
"""Time and peak memory of fast finetune (`onnxptq quantize --config PRESET`) on torchvision models.

Usage: /usr/bin/python3 bench/finetune.py [--build build] [--models resnet50,mobilenet_v2]
           [--presets XINT8_ADAROUND] [--samples 32] [--threads 2]
       /usr/bin/python3 bench/finetune.py --memory [--models mobilenet_v2] [--memory-samples 100,1000]
           [--memory-iterations 20]

The speed run quantizes each model with each preset, as the preset sets fast finetune (its
DataSize, BatchSize, NumIterations, ...), on N seeded random samples (`--random N`), under
/usr/bin/time -v, and prints a markdown table: the layers trained and kept, wall-clock seconds of
the whole command and of the finetune phase (the report's seconds.finetune), and peak RSS
("Maximum resident set size").

The memory run (--memory) quantizes with MemOptLevel 2 (every sample's values in files of the
system's temp directory) and MemOptLevel 1 (in memory) for each sample count, NumIterations
lowered to --memory-iterations (the iterations do not change what is held), and prints the peak
RSS of each: with MemOptLevel 2 it should not grow with the samples.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from bench_models import ROOT, resolve_models

MODELS = {
    "resnet50": ("{models}/resnet50.onnx",),
    "mobilenet_v2": ("{models}/mobilenet_v2.onnx",),
}


def quantize(build, model, options, work):
    """Runs onnxptq quantize under /usr/bin/time -v; returns seconds, peak RSS and the report."""
    out, report = os.path.join(work, "q.onnx"), os.path.join(work, "report.json")
    command = [os.path.join(build, "onnxptq"), "quantize", model, "-o", out, "--report", report, "--quiet"] + options
    result = subprocess.run(["/usr/bin/time", "-v"] + command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)}: {result.stderr.strip()[-2000:]}")
    err = result.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", err)
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    rss_mb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) / 1024
    return seconds, rss_mb, json.load(open(report))


def speed(args, models):
    print(f"Fast finetune, {args.samples} random samples, {args.threads} threads, the presets' FastFinetune")
    print()
    print("| model | preset | layers trained | kept | seconds | finetune s | peak RSS MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, path in models:
        for preset in args.presets.split(","):
            with tempfile.TemporaryDirectory(prefix="finetune_bench_") as work:
                seconds, rss, report = quantize(args.build, path, ["--config", preset, "--random", str(args.samples),
                                                                   "--threads", str(args.threads)], work)
            layers = [l for l in report.get("fast_finetune", []) if "skipped" not in l]
            kept = sum(1 for l in layers if l["kept"])
            print(f"| {name} | {preset} | {len(layers)} | {kept} | {seconds:.0f} | "
                  f"{report['seconds'].get('finetune', 0):.0f} | {rss:.0f} |", flush=True)


def memory(args, models):
    print(f"Peak RSS of fast finetune (XINT8_ADAROUND, NumIterations {args.memory_iterations}, {args.threads} "
          "threads) by sample count and MemOptLevel")
    print()
    print("| model | samples | MemOptLevel | seconds | peak RSS MB |")
    print("| --- | --- | --- | --- | --- |")
    for name, path in models:
        for samples in [int(s) for s in args.memory_samples.split(",")]:
            for level in (1, 2):
                finetune = {"DataSize": 1000000, "FixedSeed": 1705472343, "BatchSize": 2,
                            "NumIterations": args.memory_iterations, "LearningRate": 0.1,
                            "OptimAlgorithm": "adaround", "EarlyStop": True, "MemOptLevel": level}
                with tempfile.TemporaryDirectory(prefix="finetune_bench_") as work:
                    seconds, rss, _ = quantize(args.build, path, [
                        "--config", "XINT8_ADAROUND", "--extra-option", "FastFinetune=" + json.dumps(finetune),
                        "--random", str(samples), "--threads", str(args.threads)], work)
                print(f"| {name} | {samples} | {level} | {seconds:.0f} | {rss:.0f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default="mobilenet_v2,resnet50")
    parser.add_argument("--presets", default="XINT8_ADAROUND")
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory", action="store_true", help="the MemOptLevel memory run instead")
    parser.add_argument("--memory-samples", default="100,1000")
    parser.add_argument("--memory-iterations", type=int, default=20)
    args = parser.parse_args()
    names, models_dir = resolve_models(args.models, MODELS, args.build)
    models = [(name, MODELS[name][0].format(models=models_dir)) for name in names]
    (memory if args.memory else speed)(args, models)


if __name__ == "__main__":
    main()
