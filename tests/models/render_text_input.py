#!/usr/bin/python3
"""Render lines of text into an image tensor the PP-OCR models take: a realistic input.

Usage: /usr/bin/python3 render_text_input.py HEIGHT WIDTH SEED OUT.npy

Black text in DejaVu Sans (Debian's fonts-dejavu-core) on a light, slightly noisy background,
normalised as PaddleOCR does ((x / 255 - 0.5) / 0.5), NCHW float32 [1, 3, HEIGHT, WIDTH].
The words and positions come from SEED, so the same call gives the same file.
"""
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont

WORDS = ["quantize", "model", "invoice", "total", "2026", "ONNX", "kernel", "value", "scale", "receipt",
         "address", "engine", "42.50", "calibration", "report", "page", "name", "date"]
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def render(height, width, seed):
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (width, height), tuple(int(v) for v in rng.integers(200, 256, size=3)))
    draw = ImageDraw.Draw(image)
    size = max(10, min(height * 3 // 4, 28)) if height < 64 else 24
    font = ImageFont.truetype(FONT, size)
    y = int(rng.integers(0, max(1, height // 8)))
    while y + size <= height:
        x = int(rng.integers(0, max(1, width // 10)))
        line = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 6))))
        draw.text((x, y), line, fill=tuple(int(v) for v in rng.integers(0, 60, size=3)), font=font)
        y += int(size * rng.uniform(1.6, 2.6))
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, 3, size=(height, width, 3)).astype(np.float32)
    pixels = np.clip(pixels, 0, 255)
    return ((pixels / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: render_text_input.py HEIGHT WIDTH SEED OUT.npy")
    h, w, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    np.save(sys.argv[4], render(h, w, seed))
