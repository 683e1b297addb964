#!/usr/bin/python3
"""Export torchvision models with random (seeded) weights to ONNX test models.

Usage: /usr/bin/python3 export_torchvision.py [--keep-bn] OUT_DIR [NAMES...]

Writes OUT_DIR/<name>.onnx (or OUT_DIR/<name>_bn.onnx with --keep-bn) for each
requested model (default: all). Needs Debian's python3-torch, python3-torchvision
and python3-onnx; nothing is downloaded (weights=None).

Export settings: torch.manual_seed(0) before each model is built, eval mode,
fixed input 1x3x224x224 named "input", output named "output", opset 13,
TorchScript exporter, constant folding on. In the default export torch fuses
every Conv+BatchNormalization pair into one Conv (the "eval peephole" pass runs
whenever training=EVAL, whatever do_constant_folding says). --keep-bn exports
with training=PRESERVE instead: the model is still in eval mode, so every op is
exported in inference form, but torch skips the eval peephole and the
BatchNormalization nodes stay in the graph (useful for testing BN folding).
Note that freshly initialised BN layers hold gamma=1, beta=0, mean=0, var=1,
so folding them only scales weights by 1/sqrt(1+eps).

The graphs contain Identity nodes: torch 1.13 deduplicates equal initializers
(e.g. the all-zero Conv biases left by BN fusion) and reads the copies through
Identity. resnet50: 169 nodes = 53 Conv + 47 Identity + 69 others.
"""

import os
import sys
import tempfile
import time
import warnings

import onnx
import torch
import torchvision

OPSET = 13
INPUT_SHAPE = (1, 3, 224, 224)

# Names accepted on the command line, in the default export order.
MODELS = [
    "resnet18",
    "resnet50",
    "mobilenet_v2",
    "mobilenet_v3_large",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
]


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def is_fresh(path):
    """True if path exists and is newer than this script (build-dir cache)."""
    try:
        return os.path.getmtime(path) > os.path.getmtime(os.path.abspath(__file__))
    except OSError:
        return False


def check_onnx(path):
    """Validate the exported file; return (nodes, Conv nodes, BatchNormalization nodes).

    Fails if any node is outside the default ONNX domain (e.g. an ATen fallback):
    the quantizer and the oracle must both be able to run these models.
    """
    model = onnx.load(path)
    onnx.checker.check_model(model)
    nodes = model.graph.node
    foreign = sorted({f"{n.domain}::{n.op_type}" for n in nodes if n.domain not in ("", "ai.onnx")})
    if foreign:
        raise RuntimeError(f"{path}: non-default-domain ops: {', '.join(foreign)}")
    n_conv = sum(1 for n in nodes if n.op_type == "Conv")
    n_bn = sum(1 for n in nodes if n.op_type == "BatchNormalization")
    return len(nodes), n_conv, n_bn


def export_one(name, out_path, keep_bn):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    model.eval()
    # Input values do not affect the traced graph; seed them anyway so the run is
    # fully reproducible.
    dummy = torch.rand(INPUT_SHAPE, generator=torch.Generator().manual_seed(0))

    # PRESERVE with an eval-mode model = inference export without the Conv+BN
    # fusion pass. torch warns that constant folding and training-amenable
    # export don't mix; that warning is about models in train mode, not ours.
    training = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL

    # Temp file in the same dir so the final rename is atomic.
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(out_path)}.", suffix=".tmp",
                               dir=os.path.dirname(out_path))
    os.close(fd)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*constant folding be turned off.*")
            # vit_b_16 asserts on the input shape; the tracer warns that the check
            # becomes a constant, which is what we want with fixed shapes.
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            # Keep grad enabled: in eval mode with grad disabled, nn.MultiheadAttention
            # (vit_b_16) takes its fused fast path, aten::_native_multi_head_attention,
            # which has no ONNX symbolic.
            with torch.enable_grad():
                torch.onnx.export(
                    model,
                    (dummy,),
                    tmp,
                    export_params=True,
                    opset_version=OPSET,
                    do_constant_folding=True,
                    training=training,
                    input_names=["input"],
                    output_names=["output"],
                    # Default ONNX export type: an op without an ONNX symbolic is an
                    # error rather than an ATen fallback node.
                    operator_export_type=torch.onnx.OperatorExportTypes.ONNX,
                )
        counts = check_onnx(tmp)
        # mkstemp creates the file 0600; give it the usual umask-based mode.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return counts


def main(argv):
    args = argv[1:]
    keep_bn = "--keep-bn" in args
    args = [a for a in args if a != "--keep-bn"]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if not args or args[0].startswith("-"):
        fail(f"expected OUT_DIR; {__doc__.strip().splitlines()[2].strip()}")
    out_dir, names = args[0], args[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        fail(f"unknown model '{unknown[0]}' (known: {', '.join(MODELS)})")
    os.makedirs(out_dir, exist_ok=True)

    for name in names:
        out_path = os.path.join(out_dir, f"{name}_bn.onnx" if keep_bn else f"{name}.onnx")
        t0 = time.monotonic()
        if is_fresh(out_path):
            n_nodes, n_conv, n_bn = check_onnx(out_path)
            what = "cached"
        else:
            try:
                n_nodes, n_conv, n_bn = export_one(name, out_path, keep_bn)
            except Exception as e:  # one line, then stop: a broken export is a bug
                fail(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
            what = "exported"
        dt = time.monotonic() - t0
        print(f"{os.path.basename(out_path)}: {what} in {dt:.1f}s, "
              f"{n_nodes} nodes, {n_conv} Conv, {n_bn} BatchNormalization", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
