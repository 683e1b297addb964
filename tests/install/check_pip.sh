#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a fresh virtual environment (with Debian's site
# packages: numpy, onnx; no network), then the Quark-style example script run from outside the
# source tree with that environment's Python: it must import the installed package.
#
#   check_pip.sh BUILD_DIR SOURCE_DIR MODEL
set -euo pipefail
build=$(realpath "$1") source=$(realpath "$2") model=$(realpath "$3")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH

/usr/bin/python3 -m venv --system-site-packages "$work/venv"
ONNXPTQ_BUILD_DIR=$build "$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps -q "$source"
cd "$work"
"$work/venv/bin/python" -c 'import onnxptq, sys; assert onnxptq.__file__.startswith(sys.prefix), onnxptq.__file__'
"$work/venv/bin/python" "$source/examples/quantize.py" "$model" "$work/python.onnx" A8W8 >/dev/null
test -s "$work/python.onnx"
echo "pip installed onnxptq into a virtual environment; the example ran from $work"
