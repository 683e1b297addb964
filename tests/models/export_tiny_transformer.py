"""Exports a small transformer encoder (random weights, seed 0) to ONNX with Debian's python3-torch:
usage: export_tiny_transformer.py OUT.onnx. Input "x" [1, 16, 32] (batch, tokens, features), output "y".

Two pre-norm encoder blocks written out op by op (no fused torch kernels): LayerNorm, multi-head
self-attention (Q/K/V projections, Q @ K^T and attention @ V: MatMuls whose B is not a constant,
Softmax), a residual Add, then LayerNorm, a GELU feed-forward and a residual Add. At opset 13 the
LayerNorms export as ReduceMean/Sub/Pow/Sqrt/Div, the GELU as Erf, the head split as
Reshape/Transpose with shapes computed from Shape/Gather (integer tensors).
"""
import sys

import torch


class Block(torch.nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        b, n, d = x.shape
        h = self.norm1(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        q = q.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, n, self.heads, d // self.heads).transpose(1, 2)
        attention = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        h = (attention @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(h)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


class Encoder(torch.nn.Module):
    def __init__(self, dim=32, heads=4, hidden=64, depth=2):
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block(dim, heads, hidden) for _ in range(depth)])
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.blocks(x))


def main():
    torch.manual_seed(0)
    model = Encoder().eval()
    x = torch.randn(1, 16, 32)
    with torch.no_grad():
        torch.onnx.export(model, x, sys.argv[1], input_names=["x"], output_names=["y"], opset_version=13)


if __name__ == "__main__":
    main()
