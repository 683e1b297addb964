#!/usr/bin/python3
"""Exports a small model with a loop (random weights, seed 0) to ONNX with Debian's python3-torch:
usage: export_loop.py OUT.onnx

  input "x" [batch 2, features 16], input "steps" (int64 scalar): a torch.jit.script function runs
  a recurrent cell `steps` times (h = tanh(h W + x U + b), h starting at x), collecting each step's
  h, and the model returns "y" (the last h through a linear layer, [2, 8]) and "trace" (every
  step's h stacked, [steps, 2, 16]).

Opset 14, TorchScript exporter: the scripted `for` loop is exported as an ONNX Loop whose body
holds the cell, with h loop-carried and the steps' h as a scan output.
"""
import sys

import torch


class LoopCell(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(16, 16)
        self.u = torch.nn.Linear(16, 16, bias=False)
        self.head = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor, steps: torch.Tensor):
        h = x
        hs = []
        for _ in range(int(steps)):
            h = torch.tanh(self.w(h) + self.u(x))
            hs.append(h)
        return self.head(h), torch.stack(hs)


def main():
    if len(sys.argv) != 2:
        print("usage: export_loop.py OUT.onnx", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(0)
    model = torch.jit.script(LoopCell().eval())
    x = torch.randn(2, 16)
    steps = torch.tensor(5)
    with torch.no_grad():
        torch.onnx.export(model, (x, steps), sys.argv[1], input_names=["x", "steps"], output_names=["y", "trace"],
                          opset_version=14)


if __name__ == "__main__":
    main()
