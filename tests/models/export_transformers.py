"""Exports a BERT-style encoder and GPT-style decoders (random weights, seeded) to ONNX with Debian's
python3-torch: usage: export_transformers.py OUT_DIR [bert] [gpt] [gpt_large]  (default: bert gpt).

Both take "input_ids" int64 [batch, tokens] (both dimensions dynamic) and embed them (token and
position tables: Gather), then:
- bert.onnx: 4 post-norm encoder layers (Devlin et al. 2019), hidden 256, 4 heads, feed-forward 1024
  with GELU; attention over every token; output "hidden" [batch, tokens, 256].
- gpt.onnx: 4 pre-norm decoder layers (Radford et al. 2019), hidden 256, 4 heads, feed-forward 1024,
  causal self-attention (a lower-triangular mask sliced to the tokens), a final LayerNorm and an LM
  head over a vocabulary of 1000; output "logits" [batch, tokens, 1000].
- gpt_large.onnx: the decoder with hidden 1024, 16 heads, feed-forward 4096 (52.6M weights, 210 MB):
  the size at which a token's MatMuls are bound by reading their weights (the speed benchmark's).

Exported at opset 17: LayerNormalization is one node, GELU an Erf expression. Trained transformers
have a few hidden channels far larger than the rest in the activations that feed their MatMuls
(Dettmers et al. 2022, LLM.int8(); Bondarenko et al. 2021): here the LayerNorms that feed a
projection scale 4 channels by 12 to 24 and the projections divide their weights for those inputs
by the same, which leaves the pre-norm decoder's function as it was and puts the outliers where
SmoothQuant (Xiao et al. 2023) moves them into the weights.
"""
import os
import sys

import torch

CONFIGS = {
    "bert": dict(kind="encoder", dim=256, heads=4, hidden=1024, depth=4, vocab=1000, seed=1),
    "gpt": dict(kind="decoder", dim=256, heads=4, hidden=1024, depth=4, vocab=1000, seed=2),
    "gpt_large": dict(kind="decoder", dim=1024, heads=16, hidden=4096, depth=4, vocab=1000, seed=3),
}
MAX_TOKENS = 128
OUTLIER_CHANNELS = 4


def attention(q, k, v, heads, mask=None):
    b, n, d = q.shape
    q, k, v = (t.reshape(b, n, heads, d // heads).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) * (d // heads) ** -0.5
    if mask is not None:
        scores = scores + mask
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, n, d)


class Layer(torch.nn.Module):
    def __init__(self, dim, heads, hidden, causal):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, dim)
        self.norm1 = torch.nn.LayerNorm(dim)
        self.norm2 = torch.nn.LayerNorm(dim)

    def attend(self, h, mask):
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        return self.proj(attention(q, k, v, self.heads, mask))

    def mlp(self, h):
        return self.fc2(torch.nn.functional.gelu(self.fc1(h)))

    def forward(self, x, mask):
        if self.causal:  # pre-norm (GPT-2)
            x = x + self.attend(self.norm1(x), mask)
            return x + self.mlp(self.norm2(x))
        x = self.norm1(x + self.attend(x, None))  # post-norm (BERT)
        return self.norm2(x + self.mlp(x))


class Transformer(torch.nn.Module):
    def __init__(self, kind, dim, heads, hidden, depth, vocab, seed):
        super().__init__()
        self.causal = kind == "decoder"
        self.tokens = torch.nn.Embedding(vocab, dim)
        self.positions = torch.nn.Embedding(MAX_TOKENS, dim)
        self.embed_norm = None if self.causal else torch.nn.LayerNorm(dim)
        self.layers = torch.nn.ModuleList([Layer(dim, heads, hidden, self.causal) for _ in range(depth)])
        self.final_norm = torch.nn.LayerNorm(dim) if self.causal else None
        self.head = torch.nn.Linear(dim, vocab) if self.causal else None
        mask = torch.full((MAX_TOKENS, MAX_TOKENS), -1e4).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, input_ids):
        n = input_ids.shape[1]
        positions = torch.arange(n, device=input_ids.device).unsqueeze(0)
        x = self.tokens(input_ids) + self.positions(positions)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        mask = self.mask[:n, :n] if self.causal else None
        for layer in self.layers:
            x = layer(x, mask)
        if self.causal:
            return self.head(self.final_norm(x))
        return x


def initialise(model, generator):
    """GPT-2's initialisation (normal, 0.02; the output projections scaled by 1/sqrt(2 depth)),
    random LayerNorm gains and biases around 1 and 0, then the outlier channels."""
    depth = len(model.layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn(p.shape, generator=generator))
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=generator))
            else:
                std = 0.02 / (2 * depth) ** 0.5 if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                p.copy_(std * torch.randn(p.shape, generator=generator))
        dim = model.tokens.embedding_dim
        for i, layer in enumerate(model.layers):
            # The norms in front of a projection: norm1 -> qkv and norm2 -> fc1 (pre-norm); the
            # post-norm encoder's norm1 -> fc1 and norm2 -> the next layer's qkv.
            if model.causal:
                pairs = [(layer.norm1, [layer.qkv]), (layer.norm2, [layer.fc1])]
            else:
                pairs = [(layer.norm1, [layer.fc1])]
                if i + 1 < depth:
                    pairs.append((layer.norm2, [model.layers[i + 1].qkv]))
            for norm, linears in pairs:
                channels = torch.randperm(dim, generator=generator)[:OUTLIER_CHANNELS]
                factors = 12 + 12 * torch.rand(OUTLIER_CHANNELS, generator=generator)
                norm.weight[channels] *= factors
                norm.bias[channels] *= factors
                for linear in linears:
                    linear.weight[:, channels] /= factors


def export(name, out_dir):
    config = CONFIGS[name]
    torch.manual_seed(config["seed"])
    model = Transformer(**config).eval()
    initialise(model, torch.Generator().manual_seed(config["seed"]))
    ids = torch.randint(0, config["vocab"], (1, 16), generator=torch.Generator().manual_seed(0))
    output = "logits" if model.causal else "hidden"
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=[output], opset_version=17,
                          dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, output: {0: "batch", 1: "tokens"}})
    return path


def main():
    out_dir = sys.argv[1]
    names = sys.argv[2:] or ["bert", "gpt"]
    for name in names:
        if name not in CONFIGS:
            sys.exit(f"error: unknown model '{name}' (known: {', '.join(CONFIGS)})")
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        print(export(name, out_dir))


if __name__ == "__main__":
    main()
