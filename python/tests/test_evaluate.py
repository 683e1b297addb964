"""The evaluate tool (`onnxptq evaluate`, `python -m onnxptq.evaluate`): cosine similarity, L2
loss and PSNR per file and on average, checked against numpy."""

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from onnxptq.evaluate import evaluate
from conftest import run_cli


def metrics(a, b):
    """Quark's evaluate formulas (quark.onnx.tools.evaluate), in numpy."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    cosine = a.dot(b) / (np.linalg.norm(a) * np.linalg.norm(b))
    l2 = np.linalg.norm(a - b)
    mse = max(np.mean((a - b) ** 2), 1e-10)
    psnr = 20 * np.log10(a.max()) - 10 * np.log10(mse)
    return {"cosine": cosine, "l2": l2, "psnr": psnr}


def blocks(rng, height, width):
    """A grey image of flat 8x8 blocks: JPEG keeps only their DC terms, which decoders give back
    alike (colour conversion and chroma upsampling differ from one decoder to another)."""
    small = rng.integers(16, 240, size=(height // 8, width // 8), dtype=np.uint8)
    return np.kron(small, np.ones((8, 8), dtype=np.uint8))


@pytest.fixture
def folders(tmp_path):
    rng = np.random.default_rng(7)
    base, quant = tmp_path / "baseline", tmp_path / "quantized"
    base.mkdir()
    quant.mkdir()
    pairs = {}
    for i, shape in enumerate([(1, 1000), (2, 3, 5)]):
        a = rng.standard_normal(shape).astype(np.float32) + 0.5
        b = a + rng.normal(0, 0.05, shape).astype(np.float32)
        np.save(base / f"{i}.npy", a)
        np.save(quant / f"{i}.npy", b)
        pairs[f"{i}.npy"] = (a, b)
    a = rng.integers(0, 256, size=(12, 10, 3), dtype=np.uint8)
    b = np.clip(a.astype(np.int32) + rng.integers(-3, 4, size=a.shape), 0, 255).astype(np.uint8)
    Image.fromarray(a).save(base / "img.png")
    Image.fromarray(b).save(quant / "img.png")
    pairs["img.png"] = (a, b)
    a, b = blocks(rng, 32, 24), blocks(rng, 32, 24)
    Image.fromarray(a).save(base / "photo.jpg", quality=100)
    Image.fromarray(b).save(quant / "photo.jpg", quality=100)
    # The test's own decoder (PIL) gives the pixels the metrics are checked on.
    pairs["photo.jpg"] = (np.asarray(Image.open(base / "photo.jpg")), np.asarray(Image.open(quant / "photo.jpg")))
    (base / "notes.txt").write_text("not a result")
    return base, quant, pairs


def test_metrics_per_file_and_average_match_numpy(folders):
    base, quant, pairs = folders
    report = evaluate(base, quant)
    assert [f["file"] for f in report["files"]] == sorted(pairs)
    for f in report["files"]:
        expected = metrics(*pairs[f["file"]])
        for key in ("cosine", "l2", "psnr"):
            assert f[key] == pytest.approx(expected[key], rel=1e-9), (f["file"], key)
    for key in ("cosine", "l2", "psnr"):
        mean = np.mean([metrics(*pairs[name])[key] for name in pairs])
        assert report["average"][key] == pytest.approx(mean, rel=1e-9)
    assert report["text"].splitlines()[0].split() == ["file", "cosine", "L2", "loss", "PSNR", "(dB)"]


def test_identical_results_are_perfect(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    x = np.linspace(0.1, 2.0, 50, dtype=np.float32)
    np.save(tmp_path / "a" / "r.npy", x)
    np.save(tmp_path / "b" / "r.npy", x)
    f = evaluate(tmp_path / "a", tmp_path / "b")["files"][0]
    assert f["cosine"] == pytest.approx(1.0, abs=1e-12) and f["l2"] == 0.0
    # MSE floored at 1e-10: PSNR = 20 log10(max) + 100.
    assert f["psnr"] == pytest.approx(20 * np.log10(2.0) + 100, rel=1e-9)


def test_cli_and_python_module_print_the_same_metrics(folders):
    base, quant, _ = folders
    cli = json.loads(run_cli("evaluate", "--baseline-results", base, "--quantized-results", quant, "--json").stdout)
    proc = subprocess.run([sys.executable, "-m", "onnxptq.evaluate", "--baseline_results_folder", str(base),
                           "--quantized_results_folder", str(quant), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == cli
    text = subprocess.run([sys.executable, "-m", "onnxptq.evaluate", "--baseline_results_folder", str(base),
                           "--quantized_results_folder", str(quant)], capture_output=True, text=True).stdout
    assert text == run_cli("evaluate", "--baseline-results", base, "--quantized-results", quant).stdout


def test_mismatched_folders_are_an_error(folders):
    base, quant, _ = folders
    (quant / "img.png").unlink()
    proc = subprocess.run([sys.executable, "-m", "onnxptq.evaluate", "--baseline_results_folder", str(base),
                           "--quantized_results_folder", str(quant)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: 'img.png' is in the baseline folder")
    cli = run_cli("evaluate", "--baseline-results", base, "--quantized-results", quant, check=False)
    assert cli.returncode == 2 and cli.stderr == proc.stderr


def test_shape_mismatch_names_the_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    np.save(tmp_path / "a" / "out.npy", np.ones((2, 3), np.float32))
    np.save(tmp_path / "b" / "out.npy", np.ones((3, 2), np.float32))
    import onnxptq
    with pytest.raises(onnxptq.Error, match=r"out.npy: baseline shape \[2,3\] differs from quantized shape \[3,2\]"):
        evaluate(tmp_path / "a", tmp_path / "b")
