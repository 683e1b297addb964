#!/usr/bin/python3
"""Task accuracy of quantized PP-OCRv4 models: rec's character error rate, det's text-mask IoU.

Usage: /usr/bin/python3 bench/ocr_accuracy.py [--model rec|det|both] [--configs NAME,NAME | --finetune] [--json PATH]
           [--rec-calib 64] [--rec-eval 200] [--width 320] [--det-calib 16] [--det-eval 16] [--det-size 320]
           [--build build] [QUANTIZE OPTION ...]
       /usr/bin/python3 bench/ocr_accuracy.py --score-model MODEL.onnx --model rec|det [sizes as above]

rec (ch_PP-OCRv4_rec_infer.onnx): single text lines with known strings (English words, numbers,
prices, dates, punctuation, mixed case) are rendered with PIL in the DejaVu faces, preprocessed as
PaddleOCR does (height 48 keeping the aspect ratio, (x/255-0.5)/0.5, zero-padded on the right to
WIDTH), read with greedy CTC decoding; the metric is the character error rate (total Levenshtein
distance / total reference length). Calibration lines (seed 1) and evaluation lines (seed 2) are
different strings.
det (ch_PP-OCRv4_det_infer.onnx): pages rendered by tests/models/render_text_input.py (calibration
seeds 1.., evaluation seeds 1001..); the metric is the IoU of the text mask (probability > 0.3) of
the quantized model with the float model's, averaged over the evaluation pages.

Each configuration is quantized with `onnxptq quantize MODEL -o OUT --calib-data DIR` plus its
options and any QUANTIZE OPTION given here (timed), and every model runs in ONNX Runtime (npm
onnxruntime-node through tests/oracle/ort_run.js, as deployed); a model ORT refuses runs in
`onnxptq run` instead, marked in the table. Prints a markdown table; --json writes the results.
With --score-model, prints the metric of one model as the last line (rec: CER as a fraction,
lower is better; det: IoU against the float model, higher is better), for --evaluate-command.

With --target, each configuration is quantized to an accuracy target instead (`onnxptq quantize
--evaluate-command` this script's --score-model, `--max-loss` --rec-max-loss 0.015 / --det-max-loss
0.05) and the table shows the search's result: the metric of the model chosen, whether the target
is met, the share of Conv/Gemm/MatMul nodes still 8-bit, the nodes fallen back (and to what), the
trials.

The baseline run: /usr/bin/python3 bench/ocr_accuracy.py --model both --json /tmp/ocr_accuracy.json
The target run: /usr/bin/python3 bench/ocr_accuracy.py --model both --target --configs XINT8,A8W8,U8S8_AAWS
The finetune run: /usr/bin/python3 bench/ocr_accuracy.py --model both --finetune
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from bench_models import OCR, ROOT

sys.path.insert(0, os.path.join(ROOT, "tests/models"))
from render_text_input import render as render_page  # noqa: E402

REC_MODEL = os.path.join(OCR, "ch_PP-OCRv4_rec_infer.onnx")
DET_MODEL = os.path.join(OCR, "ch_PP-OCRv4_det_infer.onnx")
KEYS = os.path.join(OCR, "ppocr_keys_v1.txt")
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONTS = ["DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSansCondensed.ttf",
         "DejaVuSansMono.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerifCondensed.ttf"]
REC_HEIGHT = 48
REC_CALIB_SEED, REC_EVAL_SEED = 1, 2
DET_EVAL_FIRST_SEED = 1001
DET_THRESHOLD = 0.3  # PaddleOCR's det_db_thresh
BATCH = 50  # lines per ORT call: one process per call, the models take any batch size

WORDS = ["invoice", "total", "receipt", "address", "payment", "order", "number", "customer", "street", "date",
         "amount", "balance", "account", "delivery", "quantity", "price", "discount", "tax", "service", "station",
         "market", "coffee", "bread", "milk", "apple", "orange", "water", "ticket", "gate", "flight", "hotel",
         "room", "guest", "phone", "email", "office", "model", "engine", "report", "page", "chapter", "table",
         "figure", "summary", "notice", "warning", "open", "closed", "monday", "friday", "morning", "evening",
         "north", "south", "river", "garden", "bridge", "school", "library", "museum", "center", "special"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

# the presets whose fast-finetune variants are measured (--finetune)
FINETUNED = ["XINT8", "A8W8", "U8S8_AAWS", "S8S8_AAWS"]
# block-format presets whose AdaQuant variants can be asked for by name (--configs BFP16_ADAQUANT)
BLOCK_FINETUNED = ["BFP16", "MX9", "MX6", "MXINT8", "MXFP8E4M3"]

# name, onnxptq quantize options: the ready presets, A16W16 (no preset: A16W8 with int16 weights)
# and ORT's usual U8S8 per-channel MinMax
CONFIGS = [(name, ["--config", name]) for name in [
    "XINT8", "A8W8", "A16W8", "U8S8_AAWS", "S8S8_AAWS", "U8U8_AAWA", "S16S8_ASWS", "U16S8_AAWS",
    "INT8_CNN_DEFAULT", "INT16_CNN_DEFAULT", "INT8_TRANSFORMER_DEFAULT", "INT16_TRANSFORMER_DEFAULT",
    "VAI_CNN_CPU", "VAI_CNN_NPU", "VAI_CNN_NPU_CLE", "VAI_TRANSFORMER_NPU", "FP16", "BF16", "S16S16_MIXED_S8S8",
    # Quark's block formats (their models run in `onnxptq run`: ORT has no kernel for their ops)
    "BFP16", "MX4", "MX6", "MX9", "MXFP8E5M2", "MXFP8E4M3", "MXFP6E3M2", "MXFP6E2M3", "MXFP4E2M1", "MXINT8",
    "BF16_BFP16", "BF16_MXINT8", "MX9_INT8"]] + [
    ("A16W16", ["--config", "A16W8", "--weight-type", "QInt16"]),
] + [
    # onnxptq's MX scale of least squared error per block (docs/formats.md)
    (name + " min_error_scale", ["--config", name, "--extra-option", 'MXAttributes={"min_error_scale": 1}'])
    for name in ["MXFP8E4M3", "MXFP6E2M3", "MXFP4E2M1", "MXINT8"]
] + [
    ("U8S8 per-channel MinMax", ["--calibrate-method", "MinMax", "--activation-type", "QUInt8",
                                 "--weight-type", "QInt8", "--per-channel"]),
] + [
    # 4-bit weights on the MatMuls only, int16 activations: round to nearest, GPTQ, GPTQ in order of
    # decreasing Hessian diagonal (docs/accuracy.md, "GPTQ")
    (name, ["--op-types-to-quantize", "MatMul", "--activation-type", "QInt16", "--weight-type", "QInt4",
            "--per-channel", "--calibrate-method", "MinMax"] + gptq)
    for name, gptq in [
        ("W4A16 MatMul", []),
        ("W4A16 MatMul GPTQ", ["--extra-option", "UseGPTQ=true", "--extra-option",
                               'GPTQParams={"Bits": 4, "PerChannel": true}']),
        ("W4A16 MatMul GPTQ ActOrder", ["--extra-option", "UseGPTQ=true", "--extra-option",
                                        'GPTQParams={"Bits": 4, "PerChannel": true, "ActOrder": true}'])]
] + [(base + suffix, ["--config", base + suffix]) for base in FINETUNED for suffix in ("_ADAROUND", "_ADAQUANT")] + [
    (base + "_ADAQUANT", ["--config", base + "_ADAQUANT"]) for base in BLOCK_FINETUNED]


def run(command, ok=(0,), echo=False):
    """Runs command; returns its stdout, or raises RuntimeError with the last line of its stderr
    when its exit status is not in `ok`. With `echo`, its stderr lines are also passed on as they
    come (an accuracy-target search's trials, which take minutes each)."""
    if not echo:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr, code = result.stdout, result.stderr, result.returncode
    else:
        with tempfile.TemporaryFile("w+") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True)
            lines = []
            for line in process.stderr:
                print(line, end="", file=sys.stderr, flush=True)
                lines.append(line)
            code = process.wait()
            out.seek(0)
            stdout, stderr = out.read(), "".join(lines)
    if code not in ok:
        lines = stderr.strip().splitlines() or [f"exit status {code}"]
        raise RuntimeError(lines[-1].removeprefix("error: "))
    return stdout


def infer(model, batch, build, engine="ort"):
    """Runs model on batch (N samples stacked on axis 0) with ORT or `onnxptq run`; returns its single output."""
    outputs = []
    with tempfile.TemporaryDirectory() as tmp:
        for start in range(0, len(batch), BATCH):
            inputs, out = os.path.join(tmp, f"x{start}.npy"), os.path.join(tmp, f"out{start}")
            np.save(inputs, np.ascontiguousarray(batch[start:start + BATCH]))
            if engine == "ort":
                run(["node", os.path.join(ROOT, "tests/oracle/ort_run.js"), model, "--inputs", "x=" + inputs,
                     "--threads", "2", "--outputs", out])
            else:
                run([os.path.join(build, "onnxptq"), "run", model, "--inputs", "x=" + inputs, "--threads", "2",
                     "--outputs", out])
            (produced,) = [f for f in os.listdir(out) if f.endswith(".npy")]
            outputs.append(np.load(os.path.join(out, produced)).astype(np.float32))
    return np.concatenate(outputs)


# --- rec: rendering, decoding, CER ---

def rec_text(rng):
    """A ground-truth line: words, numbers, prices, dates or codes, made of ASCII characters of the dictionary."""
    def word():
        w = str(rng.choice(WORDS))
        return [w, w.capitalize(), w.upper()][int(rng.integers(3))]
    kind = int(rng.integers(6))
    if kind == 0:
        return " ".join(word() for _ in range(int(rng.integers(1, 4))))
    if kind == 1:
        return f"{word()}: ${rng.integers(1, 2000)}.{rng.integers(100):02d}"
    if kind == 2:
        y, m, d = rng.integers(1990, 2031), rng.integers(1, 13), rng.integers(1, 29)
        return [f"{y}-{m:02d}-{d:02d}", f"{d:02d}/{m:02d}/{y}", f"{MONTHS[m - 1]} {d}, {y}",
                f"{rng.integers(24):02d}:{rng.integers(60):02d}"][int(rng.integers(4))]
    if kind == 3:
        return [f"No. {rng.integers(10, 99999)}",
                f"Tel +{rng.integers(1, 99)} {rng.integers(100, 999)}-{rng.integers(1000, 9999)}",
                f"{rng.integers(1, 100)}% off", f"x{rng.integers(2, 20)} = {rng.integers(10, 999)}"][int(rng.integers(4))]
    if kind == 4:
        code = "".join(rng.choice(list("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"), size=int(rng.integers(4, 9))))
        return f"{['ID', 'Ref', 'SN', 'Code'][int(rng.integers(4))]}#{code}"
    return f"{word()}, {word()}{str(rng.choice(list('.!?;')))} ({rng.integers(1, 500)})"


def render_rec_line(text, rng):
    """text drawn in a random DejaVu face and size, dark on light random colours, a few px margin, slight noise."""
    font = ImageFont.truetype(os.path.join(FONT_DIR, str(rng.choice(FONTS))), int(rng.integers(28, 41)))
    left, _, right, _ = font.getbbox(text)
    ascent, descent = font.getmetrics()
    mx, my = int(rng.integers(2, 9)), int(rng.integers(2, 7))
    size = (right - left + 2 * mx, ascent + descent + 2 * my)
    image = Image.new("RGB", size, tuple(int(v) for v in rng.integers(170, 256, size=3)))
    ImageDraw.Draw(image).text((mx - left, my), text, fill=tuple(int(v) for v in rng.integers(0, 90, size=3)), font=font)
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, 4, size=(size[1], size[0], 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def preprocess_rec(image, width):
    """PaddleOCR's resize_norm_img: height 48 keeping the aspect ratio (at most width), normalised, zero-padded right."""
    resized_w = min(width, math.ceil(REC_HEIGHT * image.width / image.height))
    pixels = np.asarray(image.resize((resized_w, REC_HEIGHT), Image.BILINEAR), dtype=np.float32)
    out = np.zeros((3, REC_HEIGHT, width), np.float32)
    out[:, :, :resized_w] = ((pixels / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def rec_set(count, seed, width, exclude=()):
    """count (texts, [count, 3, 48, width] batch) from seed; texts that would be squeezed or are in exclude are skipped."""
    rng = np.random.default_rng(seed)
    texts, samples = [], []
    while len(texts) < count:
        text = rec_text(rng)
        image = render_rec_line(text, rng)
        if text in exclude or text in texts or REC_HEIGHT * image.width / image.height > width:
            continue
        texts.append(text)
        samples.append(preprocess_rec(image, width))
    return texts, np.stack(samples)


def load_keys():
    """Class index -> character: 0 is CTC blank, then the dictionary's lines, then " " (use_space_char)."""
    with open(KEYS, encoding="utf-8") as f:
        return [""] + f.read().splitlines() + [" "]


def ctc_greedy_decode(probs, keys):
    """Best class per time step, repeats collapsed, blanks (0) dropped."""
    best = probs.argmax(axis=-1)
    return "".join(keys[c] for i, c in enumerate(best) if c != 0 and (i == 0 or c != best[i - 1]))


def levenshtein(a, b):
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ca != cb))
    return row[-1]


def cer(references, predictions):
    return sum(levenshtein(r, p) for r, p in zip(references, predictions)) / sum(len(r) for r in references)


def evaluate_rec(model_path, eval_count=200, calib_count=64, width=320, build=os.path.join(ROOT, "build"),
                 engine="ort", return_predictions=False):
    """CER of model_path on the evaluation lines (strings disjoint from the calibration lines'); with
    return_predictions, (CER, [(reference, prediction)])."""
    calib_texts, _ = rec_set(calib_count, REC_CALIB_SEED, width)
    texts, batch = rec_set(eval_count, REC_EVAL_SEED, width, exclude=set(calib_texts))
    keys = load_keys()
    predictions = [ctc_greedy_decode(p, keys) for p in infer(model_path, batch, build, engine)]
    return (cer(texts, predictions), list(zip(texts, predictions))) if return_predictions else cer(texts, predictions)


def write_rec_calibration(folder, count, width):
    os.makedirs(folder, exist_ok=True)
    for i, sample in enumerate(rec_set(count, REC_CALIB_SEED, width)[1]):
        np.save(os.path.join(folder, f"{i:04d}.npy"), sample[None])


# --- det: text-mask IoU against the float model ---

def det_pages(first_seed, count, size):
    return np.concatenate([render_page(size, size, seed) for seed in range(first_seed, first_seed + count)])


def evaluate_det(model_path, eval_count=16, size=320, build=os.path.join(ROOT, "build"), engine="ort",
                 reference=None):
    """Mean IoU of model_path's text mask with the float model's (reference: the float masks, if already known)."""
    pages = det_pages(DET_EVAL_FIRST_SEED, eval_count, size)
    if reference is None:
        reference = infer(DET_MODEL, pages, build) > DET_THRESHOLD
    masks = infer(model_path, pages, build, engine) > DET_THRESHOLD
    ious = [(a & b).sum() / max(1, (a | b).sum()) for a, b in zip(masks, reference)]
    return float(np.mean(ious))


def write_det_calibration(folder, count, size):
    os.makedirs(folder, exist_ok=True)
    for seed in range(1, count + 1):
        np.save(os.path.join(folder, f"{seed:04d}.npy"), render_page(size, size, seed))


# --- the benchmark ---

def score_any(score, path):
    """(score(path, engine), engine): ORT, or `onnxptq run` for a model ORT cannot load (Quark's custom ops)."""
    try:
        return score(path, "ort"), "ort"
    except RuntimeError as error:
        print(f"{path}: ORT failed ({error}); running it with onnxptq run", file=sys.stderr)
        return score(path, "onnxptq"), "onnxptq run"


def bench(kind, args, extra, work):
    """Quantizes the model in each configuration and scores it; returns the rows of the table."""
    calib = os.path.join(work, kind + "_calib")
    if kind == "rec":
        model, metric = REC_MODEL, "CER"
        write_rec_calibration(calib, args.rec_calib, args.width)
        score = lambda path, engine: evaluate_rec(path, args.rec_eval, args.rec_calib, args.width, args.build, engine)
        baseline = score(model, "ort")
    else:
        model, metric = DET_MODEL, "IoU"
        write_det_calibration(calib, args.det_calib, args.det_size)
        pages = det_pages(DET_EVAL_FIRST_SEED, args.det_eval, args.det_size)
        reference = infer(DET_MODEL, pages, args.build) > DET_THRESHOLD
        score = lambda path, engine: evaluate_det(path, args.det_eval, args.det_size, args.build, engine, reference)
        baseline = 1.0  # the float model's mask against itself
    rows = [{"model": kind, "config": "float", "metric": metric, "value": baseline, "delta": 0.0,
             "quantize_s": None, "engine": "ort", "error": None}]
    print(f"{kind}: float {metric} {baseline:.4f}", file=sys.stderr)
    for name, options in args.configs:
        row = {"model": kind, "config": name, "metric": metric, "value": None, "delta": None,
               "quantize_s": None, "engine": None, "error": None}
        out = os.path.join(work, f"{kind}_{len(rows)}.onnx")
        report = out + ".json"
        start = time.monotonic()
        try:
            # A search prints a line per trial: passed on, and without --quiet.
            run([os.path.join(args.build, "onnxptq"), "quantize", model, "-o", out, "--calib-data", calib]
                + ([] if args.target else ["--quiet"])
                + options + (target_options(kind, args, report) if args.target else []) + extra,
                ok=(0, 1) if args.target else (0,), echo=args.target)  # 1: the search missed its target, and says by how much
            row["quantize_s"] = time.monotonic() - start
            if args.target:  # the search scored its model with this script's own metric
                search = json.load(open(report))["accuracy_target"]
                best = search["trials"][search["best_trial"] - 1]
                row["value"], row["engine"] = best["metric"], "ort"
                row["target"] = {"met": search["met"], "trials": len(search["trials"]),
                                 "fallback": len(best["fallback"]), "fallback_type": best["fallback_type"] or "",
                                 "weighted_nodes": search["weighted_nodes"],
                                 "best": f"{best['phase']}: {best['change']}",
                                 # every trial, for --json: which recipes were kept, what fell back
                                 "trials_run": [{k: t[k] for k in ("index", "phase", "change", "metric", "meets",
                                                                   "fallback")} for t in search["trials"]]}
            else:
                row["value"], row["engine"] = score_any(score, out)
            row["delta"] = row["value"] - baseline
        except RuntimeError as error:
            row["error"] = str(error)
        print(f"{kind} {name}: {row['value'] if row['error'] is None else row['error']}", file=sys.stderr)
        rows.append(row)
        for path in (out, report):
            if os.path.exists(path):
                os.remove(path)
    return rows


def target_options(kind, args, report):
    """`onnxptq quantize` options of the accuracy-target mode: this script's metric as the
    evaluate command, the allowed loss, the report to read the search from."""
    score = [sys.executable, os.path.abspath(__file__), "--score-model", "{model}", "--model", kind,
             "--build", args.build]
    if kind == "rec":
        score += ["--rec-eval", str(args.rec_eval), "--rec-calib", str(args.rec_calib), "--width", str(args.width)]
        loss = ["--lower-is-better", "--max-loss", str(args.rec_max_loss)]
    else:
        score += ["--det-eval", str(args.det_eval), "--det-size", str(args.det_size)]
        loss = ["--max-loss", str(args.det_max_loss)]
    return ["--evaluate-command", " ".join(score), "--report", report] + loss


def table(rows):
    if any("target" in r for r in rows):
        return target_table(rows)
    lines = ["| model | configuration | metric | value | delta vs float | quantize s | runtime |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        seconds = "" if r["quantize_s"] is None else f"{r['quantize_s']:.1f}"
        if r["error"]:
            lines.append(f"| {r['model']} | {r['config']} | {r['metric']} | failed: {r['error']} | | {seconds} | |")
        else:
            lines.append(f"| {r['model']} | {r['config']} | {r['metric']} | {r['value']:.4f} | {r['delta']:+.4f} | "
                         f"{seconds} | {r['engine']} |")
    return "\n".join(lines)


def target_table(rows):
    lines = ["| model | configuration | metric | value | delta vs float | target met | Conv/Gemm/MatMul 8-bit | "
             "nodes fallen back | trials | chosen | search s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['model']} | {r['config']} | {r['metric']} | failed: {r['error']} | | | | | | | |")
        elif "target" not in r:
            lines.append(f"| {r['model']} | {r['config']} | {r['metric']} | {r['value']:.4f} | | | | | | | |")
        else:
            t = r["target"]
            w = t["weighted_nodes"]
            lines.append(f"| {r['model']} | {r['config']} | {r['metric']} | {r['value']:.4f} | {r['delta']:+.4f} | "
                         f"{'yes' if t['met'] else 'no'} | {w['eight_bit']}/{w['total']} "
                         f"({100 * w['eight_bit'] / max(1, w['total']):.0f} %) | {t['fallback']} {t['fallback_type']} | "
                         f"{t['trials']} | "
                         f"{t['best']} | {r['quantize_s']:.0f} |")
    return "\n".join(lines)


def recovery_table(rows):
    """For each preset measured plain and finetuned: the share of the metric the plain preset
    loses that each finetuned variant wins back (100 % = the float model's, negative = worse)."""
    by = {(r["model"], r["config"]): r for r in rows if not r["error"]}
    lines = ["| model | preset | plain | _ADAROUND | won back | _ADAROUND s | _ADAQUANT | won back | _ADAQUANT s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (model, config), plain in by.items():
        variants = [by.get((model, config + suffix)) for suffix in ("_ADAROUND", "_ADAQUANT")]
        if config not in FINETUNED or not any(variants):
            continue
        cells = [f"{plain['value']:.4f}"]
        for v in variants:
            if v is None:
                cells += ["", "", ""]
                continue
            won = (plain["delta"] - v["delta"]) / plain["delta"] if plain["delta"] else float("nan")
            cells += [f"{v['value']:.4f}", f"{100 * won:.0f} %", f"{v['quantize_s']:.0f}"]
        lines.append(f"| {model} | {config} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if len(lines) > 2 else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Other options are passed to every `onnxptq quantize`.")
    parser.add_argument("--model", choices=["rec", "det", "both"], default="both")
    parser.add_argument("--configs", help="comma-separated configuration names (default: all): "
                        + ", ".join(name for name, _ in CONFIGS))
    parser.add_argument("--finetune", action="store_true",
                        help="the presets " + ", ".join(FINETUNED) + " plain and with _ADAROUND and _ADAQUANT "
                             "(instead of --configs), and how much of the loss each variant wins back")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--score-model", help="print only this model's metric (last line)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--rec-calib", type=int, default=64)
    parser.add_argument("--rec-eval", type=int, default=200)
    parser.add_argument("--width", type=int, default=320, help="rec input width")
    parser.add_argument("--det-calib", type=int, default=16)
    parser.add_argument("--det-eval", type=int, default=16)
    parser.add_argument("--det-size", type=int, default=320)
    parser.add_argument("--target", action="store_true",
                        help="quantize to an accuracy target (onnxptq quantize --evaluate-command this script's "
                             "metric, --max-loss): the table shows what the search found")
    parser.add_argument("--rec-max-loss", type=float, default=0.015, help="--target: CER the rec model may lose")
    parser.add_argument("--det-max-loss", type=float, default=0.05, help="--target: IoU the det model may lose")
    args, extra = parser.parse_known_args()

    if args.score_model:
        if args.model == "rec":
            score = lambda path, engine: evaluate_rec(path, args.rec_eval, args.rec_calib, args.width, args.build, engine)
        elif args.model == "det":
            score = lambda path, engine: evaluate_det(path, args.det_eval, args.det_size, args.build, engine)
        else:
            sys.exit("error: --score-model needs --model rec or --model det")
        try:
            print(score_any(score, args.score_model)[0])
        except RuntimeError as error:
            sys.exit(f"error: {error}")
        return

    known = dict(CONFIGS)
    if args.finetune:
        names = [base + suffix for base in FINETUNED for suffix in ("", "_ADAROUND", "_ADAQUANT")]
    else:
        names = args.configs.split(",") if args.configs else [n for n in known if not n.endswith(("_ADAROUND",
                                                                                                   "_ADAQUANT"))]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"error: unknown configuration(s) {', '.join(unknown)} (known: {', '.join(known)})")
    args.configs = [(n, known[n]) for n in names]
    rows = []
    with tempfile.TemporaryDirectory(prefix="ocr_accuracy_") as work:
        for kind in (["rec", "det"] if args.model == "both" else [args.model]):
            rows += bench(kind, args, extra, work)
    if args.model != "det":
        print(f"PP-OCRv4 rec: CER on {args.rec_eval} rendered lines 48x{args.width} (calibration: {args.rec_calib} "
              "other lines)")
    if args.model != "rec":
        print(f"PP-OCRv4 det: text-mask (p > {DET_THRESHOLD}) IoU with the float model on {args.det_eval} rendered "
              f"pages {args.det_size}x{args.det_size} (calibration: {args.det_calib} other pages)")
    print()
    print(table(rows))
    recovered = recovery_table(rows)
    if recovered:
        print()
        print(recovered)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "configs"} | {"configs": names,
                       "quantize_options": extra}, "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
