#!/usr/bin/python3
"""MatMulNBits speed: a GPT-style decoder with 4-bit MatMulNBits weights against its float model, both in
ONNX Runtime, in the same run.

Usage: /usr/bin/python3 bench/nbits_speed.py [--model gpt_large] [--tokens 1,8] [--threads 1,2]
           [--repeat 20] [--variants NAME,NAME] [--json PATH] [--build build]

The model is tests/models/export_transformers.py's gpt_large (hidden 1024, 4 layers, feed-forward
4096: 52.6M float weights, 210 MB), made in BUILD/models when missing; at one token a run reads every
weight once, so a MatMul's time is that of reading its weights, which 4 bits make 8 times smaller.
Each variant is written by `onnxptq quantize --random 1 --extra-option UseMatMulNBits=true` with
its MatMulNBitsParams, and timed with tests/oracle/ort_run.js (npm onnxruntime-node: --repeat runs
after one warm-up, the median) on seeded token ids [1, TOKENS], alternating with the float model
at each setting. Printed: median ms, the float model's median over the variant's (above 1: the
variant is faster), and the variant's logits' cosine with the float model's on those inputs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from bench_models import ROOT

# name -> MatMulNBitsParams
VARIANTS = {
    "DEFAULT b32 level 0": {"GroupSize": 32},
    "DEFAULT b32 level 1": {"GroupSize": 32, "AccuracyLevel": 1},
    "DEFAULT b32 level 4": {"GroupSize": 32, "AccuracyLevel": 4},
    "DEFAULT b128 level 0": {"GroupSize": 128},
    "DEFAULT b128 level 4": {"GroupSize": 128, "AccuracyLevel": 4},
    "DEFAULT asym b32 level 4": {"GroupSize": 32, "Symmetric": False, "AccuracyLevel": 4},
    "HQQ b32": {"Algorithm": "HQQ", "GroupSize": 32},
}


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit status {result.returncode}"]
        raise RuntimeError(lines[-1].removeprefix("error: "))
    return result.stdout


def ort_time(model, inputs, threads, repeat):
    out = run(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--inputs", f"input_ids={inputs}",
               "--threads", str(threads), "--repeat", str(repeat), "--json"])
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def ort_logits(model, inputs, work):
    out = os.path.join(work, "out")
    run(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--inputs", f"input_ids={inputs}",
         "--outputs", out])
    return np.load(os.path.join(out, "logits.npy")).astype(np.float64).ravel()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt_large")
    parser.add_argument("--tokens", default="1,8")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--variants", help="comma-separated (default: all): " + ", ".join(VARIANTS))
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    names = args.variants.split(",") if args.variants else list(VARIANTS)
    for name in names:
        if name not in VARIANTS:
            sys.exit(f"error: unknown variant '{name}' (known: {', '.join(VARIANTS)})")
    model = os.path.join(args.build, "models", args.model + ".onnx")
    if not os.path.exists(model):
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/models/export_transformers.py"),
                        os.path.dirname(model), args.model], check=True, stdout=subprocess.DEVNULL)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        inputs = {}
        for tokens in map(int, args.tokens.split(",")):
            inputs[tokens] = os.path.join(work, f"ids{tokens}.npy")
            np.save(inputs[tokens], np.random.default_rng(tokens).integers(0, 1000, (1, tokens)).astype(np.int64))
        float_logits = {t: ort_logits(model, path, work) for t, path in inputs.items()}
        for name in names:
            written = os.path.join(work, "q.onnx")
            run([os.path.join(args.build, "onnxptq"), "quantize", model, "-o", written, "--random", "1", "--quiet",
                 "--extra-option", "UseMatMulNBits=true", "--extra-option",
                 "MatMulNBitsParams=" + json.dumps(VARIANTS[name])])
            size = os.path.getsize(written) / 2 ** 20
            for tokens, path in inputs.items():
                y, x = ort_logits(written, path, work), float_logits[tokens]
                cosine = float(y @ x / (np.linalg.norm(y) * np.linalg.norm(x)))
                for threads in map(int, args.threads.split(",")):
                    float_ms = ort_time(model, path, threads, args.repeat)
                    ms = ort_time(written, path, threads, args.repeat)
                    row = {"variant": name, "tokens": tokens, "threads": threads, "float_ms": float_ms, "ms": ms,
                           "speedup": float_ms / ms, "cosine": cosine, "mb": size}
                    print(json.dumps(row), file=sys.stderr)
                    rows.append(row)
    print(f"| variant | MB | tokens | threads | float ms | MatMulNBits ms | float / MatMulNBits | cosine |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['variant']} | {r['mb']:.0f} | {r['tokens']} | {r['threads']} | {r['float_ms']:.1f} | "
              f"{r['ms']:.1f} | {r['speedup']:.2f} | {r['cosine']:.4f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
