#!/usr/bin/python3
"""Exports a tiny single-stage detector with NonMaxSuppression inside (random weights, seed 0) to
ONNX with Debian's python3-torch and python3-torchvision: usage: export_detector.py OUT.onnx

  input "image" [1, 3, 64, 64]: three Conv layers with ReLU (strides 2, 2, 1: a 16 x 16 feature
  map), then two 1x1 Conv heads, as in torchvision's RetinaNet: box regression (4 deltas for each
  of 3 anchors per cell) and classification (3 classes per anchor). The 768 anchors (squares of
  16, 24 and 32 pixels centred on each cell) are decoded as torchvision's BoxCoder does (weights
  10, 10, 5, 5, the size deltas clamped at log(1000 / 16)) and clipped to the image
  (torchvision.ops.clip_boxes_to_image); each is scored by its best class (sigmoid, then max), the
  160 best are kept (topk), and torchvision.ops.batched_nms (IoU 0.5; classes kept apart by
  offsetting their boxes) selects among them; the first 100 it keeps are the detections. Outputs
  "boxes" [N, 4] (x1, y1, x2, y2), "scores" [N], "labels" [N] and "anchors" [N] (int64: the
  index of the anchor each detection came from), N at most 100.

Weights: He initialisation, so that the heads' deltas and logits spread as a trained detector's
do (PyTorch's default initialisation leaves every score near 0.5 and every box its anchor).

Opset 14, TorchScript exporter: torchvision exports nms as ONNX NonMaxSuppression (its boxes
unsqueezed to a batch of 1, its scores to one class, max_output_boxes_per_class INT64_MAX, no
score threshold) followed by a Gather of the selected indices' third column. The script checks,
on the input torch.randn(1, 3, 64, 64) of seed 1, that NMS keeps between a quarter and nine
tenths of the 160 boxes (about 100 today), so that the model exercises the selection.
"""
import math
import os
import sys

import torch
import torchvision

SIZE, STRIDE, ANCHORS, CLASSES = 64, 4, (16.0, 24.0, 32.0), 3
PRE_NMS, DETECTIONS, IOU = 160, 100, 0.5


class TinyDetector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        conv = torch.nn.Conv2d
        self.backbone = torch.nn.Sequential(
            conv(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            conv(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            conv(32, 32, 3, padding=1), torch.nn.ReLU())
        self.box_head = conv(32, 4 * len(ANCHORS), 1)
        self.cls_head = conv(32, CLASSES * len(ANCHORS), 1)
        # He initialisation (fan in): activations keep their scale through the layers.
        for m in self.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                torch.nn.init.uniform_(m.bias, -0.1, 0.1)
        cells = SIZE // STRIDE
        centres = (torch.arange(cells, dtype=torch.float32) + 0.5) * STRIDE
        cy, cx = torch.meshgrid(centres, centres, indexing="ij")
        # [cells * cells * anchors, 4] as (cx, cy, w, h), cell-major like the heads' channels.
        anchors = [torch.stack([cx, cy, torch.full_like(cx, s), torch.full_like(cx, s)], dim=-1)
                   for s in ANCHORS]
        self.register_buffer("anchors", torch.stack(anchors, dim=2).reshape(-1, 4))

    def candidates(self, image):
        """The PRE_NMS best boxes, their scores and labels, and their anchors' indices."""
        features = self.backbone(image)
        deltas = self.box_head(features).permute(0, 2, 3, 1).reshape(-1, 4)
        logits = self.cls_head(features).permute(0, 2, 3, 1).reshape(-1, CLASSES)
        # torchvision.models.detection._utils.BoxCoder.decode_single, weights (10, 10, 5, 5).
        a = self.anchors
        dx, dy = deltas[:, 0] / 10, deltas[:, 1] / 10
        dw = torch.clamp(deltas[:, 2] / 5, max=math.log(1000.0 / 16))
        dh = torch.clamp(deltas[:, 3] / 5, max=math.log(1000.0 / 16))
        cx, cy = a[:, 0] + dx * a[:, 2], a[:, 1] + dy * a[:, 3]
        w, h = a[:, 2] * torch.exp(dw), a[:, 3] * torch.exp(dh)
        boxes = torch.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], dim=1)
        boxes = torchvision.ops.clip_boxes_to_image(boxes, (SIZE, SIZE))
        scores, labels = torch.sigmoid(logits).max(dim=1)
        top_scores, top = scores.topk(PRE_NMS)
        return boxes[top], top_scores, labels[top], top

    def forward(self, image):
        boxes, scores, labels, anchors = self.candidates(image)
        keep = torchvision.ops.batched_nms(boxes, scores, labels, IOU)[:DETECTIONS]
        return boxes[keep], scores[keep], labels[keep], anchors[keep]


def main():
    if len(sys.argv) != 2:
        print("usage: export_detector.py OUT.onnx", file=sys.stderr)
        sys.exit(2)
    torch.manual_seed(0)
    model = TinyDetector().eval()
    torch.manual_seed(1)
    image = torch.randn(1, 3, SIZE, SIZE)
    with torch.no_grad():
        boxes, scores, labels, _ = model.candidates(image)
        kept = torchvision.ops.batched_nms(boxes, scores, labels, IOU).numel()
    if not PRE_NMS // 4 <= kept <= PRE_NMS * 9 // 10:
        print(f"error: NMS kept {kept} of {PRE_NMS} boxes: the selection would not be exercised",
              file=sys.stderr)
        sys.exit(2)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with torch.no_grad():  # written beside the target, then renamed: never a half-written model
        torch.onnx.export(model, image, out + ".tmp", input_names=["image"],
                          output_names=["boxes", "scores", "labels", "anchors"], opset_version=14)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    main()
