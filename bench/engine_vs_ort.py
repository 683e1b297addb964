#!/usr/bin/python3
"""Engine speed and memory against ONNX Runtime, same inputs, same thread counts, in one script run.

Usage: /usr/bin/python3 bench/engine_vs_ort.py [--build build] [--repeat 20] [--threads 1,2] [--models a,b]
           [--busy N]

For each model and thread count it runs `onnxptq run --random 0 --repeat N --json` and
`node tests/oracle/ort_run.js --random 0 --repeat N --json` (the same seeded inputs, a warm-up run
each), alternating the two engines twice and keeping each one's better median. Prints a markdown
table: median latency of each, their ratio (onnxptq / ORT), and the peak RSS of each process
(VmHWM; ORT's includes the Node.js process, about 40-50 MB on its own).

With --busy N, N other processes compute in a loop (a core each) for the whole measurement, as a
compiler or another job would on a shared machine: both engines run in the same conditions.
"""
import argparse
import json
import os
import subprocess
import sys
from contextlib import contextmanager

from bench_models import OCR, ROOT, resolve_models

MODELS = {
    "resnet50": ("{models}/resnet50.onnx", []),
    "mobilenet_v2": ("{models}/mobilenet_v2.onnx", []),
    "ppocr_det": (OCR + "/ch_PP-OCRv4_det_infer.onnx", ["--shape", "x=1x3x640x640"]),
    "efficientnet_b0": ("{models}/efficientnet_b0.onnx", []),
    "convnext_tiny": ("{models}/convnext_tiny.onnx", []),
    "vit_b_16": ("{models}/vit_b_16.onnx", []),
}
DEFAULT_MODELS = "resnet50,mobilenet_v2,ppocr_det"


@contextmanager
def cpu_hogs(count):
    """`count` processes spinning on the CPU until the block ends."""
    hogs = [subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def run_json(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {' '.join(command)}: {result.stderr.strip()}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--busy", type=int, default=0, help="processes computing beside the measurement")
    args = parser.parse_args()
    names, models_dir = resolve_models(args.models, MODELS, args.build)
    with cpu_hogs(args.busy):
        measure(names, models_dir, args)


def measure(names, models_dir, args):
    print("| model | threads | onnxptq median ms | ORT median ms | ratio | onnxptq peak RSS MB | ORT peak RSS MB | RSS ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        template, extra = MODELS[name]
        model = template.format(models=models_dir)
        for threads in [int(t) for t in args.threads.split(",")]:
            common = [model, "--random", "0", "--repeat", str(args.repeat), "--threads", str(threads), "--json"] + extra
            ours, theirs = [], []
            for _ in range(2):
                ours.append(run_json([os.path.join(args.build, "onnxptq"), "run"] + common))
                theirs.append(run_json(["node", os.path.join(ROOT, "tests/oracle/ort_run.js")] + common))
            o = min(r["median_ms"] for r in ours)
            t = min(r["median_ms"] for r in theirs)
            o_rss = max(r["peak_rss_mb"] for r in ours)
            t_rss = max(r["peak_rss_mb"] for r in theirs)
            print(f"| {name} | {threads} | {o:.2f} | {t:.2f} | {o / t:.2f} | {o_rss:.0f} | {t_rss:.0f} | {o_rss / t_rss:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
