#!/usr/bin/python3
"""Exports small recurrent models (random weights, seed 0) to ONNX with Debian's python3-torch:
usage: export_recurrent.py NAME OUT.onnx, NAME one of

  lstm_tagger  input "x" [seq 24, batch 3, features 20]: a bidirectional 2-layer nn.LSTM (hidden 32)
               and a linear tagger head over its [24, 3, 64] outputs to 9 tags, output "y".
  lstm_tagger_b1  the same with batch 1 (Quark's ExtendedLSTM computes batch 1 only).
  gru_speech   input "x" [batch 2, 40 mel bands, 60 frames]: a Conv1d front-end (kernel 5,
               stride 2) with ReLU, then a 1-layer nn.GRU (hidden 48, batch_first) and a linear
               layer to 29 characters per frame, output "y" [2, 28, 29].

Opset 14, TorchScript exporter. torch exports nn.LSTM and nn.GRU as ONNX LSTM and GRU nodes
(layout 0; batch_first as Transposes around them), the initial states as zeros Expanded to the
batch size, and the bidirectional layers' outputs rejoined by Transpose and Reshape.
"""
import sys

import torch


class LstmTagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(20, 32, num_layers=2, bidirectional=True)
        self.head = torch.nn.Linear(64, 9)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y)


class GruSpeech(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(40, 64, kernel_size=5, stride=2)
        self.gru = torch.nn.GRU(64, 48, batch_first=True)
        self.head = torch.nn.Linear(48, 29)

    def forward(self, x):
        h = torch.relu(self.conv(x)).transpose(1, 2)  # [batch, frames, channels]
        y, _ = self.gru(h)
        return self.head(y)


MODELS = {"lstm_tagger": (LstmTagger, (24, 3, 20)), "lstm_tagger_b1": (LstmTagger, (24, 1, 20)),
          "gru_speech": (GruSpeech, (2, 40, 60))}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in MODELS:
        print(f"usage: export_recurrent.py {{{','.join(MODELS)}}} OUT.onnx", file=sys.stderr)
        sys.exit(2)
    make, shape = MODELS[sys.argv[1]]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        torch.onnx.export(model, x, sys.argv[2], input_names=["x"], output_names=["y"], opset_version=14)


if __name__ == "__main__":
    main()
