#!/usr/bin/python3
"""Time and peak memory of `onnxptq sensitivity` on torchvision models.

Usage: /usr/bin/python3 bench/sensitivity.py [--build build] [--models resnet50,mobilenet_v2]
           [--configs XINT8,default,ConvGemm] [--samples 32] [--threads 2] [--split]
           [--baseline OTHER_ONNXPTQ]

For each model and configuration it runs, under /usr/bin/time -v,
`onnxptq sensitivity MODEL [--config NAME] --random N --samples N --threads T [--split] --json FILE`
(N seeded random samples, calibrated on and measured on; "default" is the command's own
defaults: int8 activations and weights, QDQ; "ConvGemm" the defaults with only Conv and Gemm
quantized), and prints a markdown table: quantized nodes,
plans measured (a node's alone plan, with --split its weight and activation plans too, the same
plan counted once),
samples, wall-clock seconds, seconds of the measures alone (the command's "measured" line, with
where that time went), and peak RSS ("Maximum resident set size"). With --baseline, another build
of the command (e.g. one before a change) runs the same, its seconds and RSS beside, and the
largest difference between the two reports' SQNRs.
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


def run(command, json_path):
    result = subprocess.run(["/usr/bin/time", "-v"] + command + ["--json", json_path, "--top", "0"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)}: {result.stderr.strip()[-2000:]}")
    err = result.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", err)
    seconds = (int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3)))
    rss_mb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", err).group(1)) / 1024
    measured = re.search(r"measured (\d+) nodes \((\d+) plans\) from their downstream regions in ([\d.]+) s: (.*)", err)
    nodes = re.search(r"measuring (\d+) quantized nodes", err)
    return {
        "seconds": seconds,
        "rss_mb": rss_mb,
        "nodes": int(nodes.group(1)) if nodes else None,
        "plans": int(measured.group(2)) if measured else None,
        "measure_seconds": float(measured.group(3)) if measured else None,
        "where": measured.group(4) if measured else "",
    }


def largest_difference(a_path, b_path):
    a = {n["node"]: n for n in json.load(open(a_path))["nodes"]}
    b = {n["node"]: n for n in json.load(open(b_path))["nodes"]}
    worst = 0.0
    for name, node in a.items():
        for part in ("alone", "weight", "activations"):
            if node[part] is None or b[name][part] is None:
                continue
            x, y = node[part]["sqnr_db"], b[name][part]["sqnr_db"]
            if x != y:
                worst = max(worst, abs(x - y) if x is not None and y is not None else float("inf"))
    return worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--configs", default="XINT8,default,ConvGemm")
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--split", action="store_true", help="also each node's weight and activation measures")
    parser.add_argument("--baseline", help="another onnxptq command to compare with")
    args = parser.parse_args()
    names, models_dir = resolve_models(args.models, MODELS, args.build)
    onnxptq = os.path.join(args.build, "onnxptq")
    header = "| model | config | nodes | plans | samples | seconds | measures s | peak RSS MB |"
    if args.baseline:
        header += " baseline s | baseline peak RSS MB | largest SQNR difference dB |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            model = MODELS[name][0].format(models=models_dir)
            for config in args.configs.split(","):
                command = ["sensitivity", model, "--random", str(args.samples), "--samples", str(args.samples),
                           "--threads", str(args.threads)]
                if args.split:
                    command.append("--split")
                if config == "ConvGemm":
                    command += ["--op-types-to-quantize", "Conv,Gemm"]
                elif config != "default":
                    command += ["--config", config]
                ours = run([onnxptq] + command, os.path.join(tmp, "ours.json"))
                row = (f"| {name} | {config} | {ours['nodes']} | {ours['plans']} | {args.samples} | "
                       f"{ours['seconds']:.1f} | {ours['measure_seconds']} | {ours['rss_mb']:.0f} |")
                if args.baseline:
                    base = run([args.baseline] + command, os.path.join(tmp, "base.json"))
                    diff = largest_difference(os.path.join(tmp, "base.json"), os.path.join(tmp, "ours.json"))
                    row += f" {base['seconds']:.1f} | {base['rss_mb']:.0f} | {diff:.4f} |"
                print(row, flush=True)
                notes.append(f"{name} {config}: {ours['where']}")
    print()
    for note in notes:
        print("- " + note)


if __name__ == "__main__":
    main()
