"""Generative, segmentation and detection models (torch.nn / torchvision definitions).

``dcgan``: the DCGAN generator (ConvTranspose2d k4 s2 + BatchNorm + ReLU, Tanh out). ``unet``:
U-Net (double 3x3 conv blocks, max-pool down, ConvTranspose2d up, skip concatenations).
``deeplabv3``: torchvision's DeepLabV3 over a dilated MobileNetV3-Large backbone (atrous ASPP,
bilinear upsampling to the input size). ``ssdlite``: an SSD-lite head (depthwise-separable
box / class predictors on two feature maps, anchors decoded to corner boxes); its non-maximum
suppression is added by the exporters (``detection_nms``): ONNX NonMaxSuppression, which runs
on the Relay VM, or a greedy NMS written in torch ops for torch.export.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import finish, first_output, image, seeded
from ._shim import torchvision
from .spec import Input, Spec


def dcgan(size: str) -> Spec:
    import torch.nn as nn

    seeded(50)
    nz, ngf, n_up = (100, 64, 4) if size == "real" else (16, 8, 3)
    layers: list[Any] = [nn.ConvTranspose2d(nz, ngf * 2 ** n_up, 4, 1, 0, bias=False),
                         nn.BatchNorm2d(ngf * 2 ** n_up), nn.ReLU(True)]
    for k in range(n_up, 1, -1):
        layers += [nn.ConvTranspose2d(ngf * 2 ** k, ngf * 2 ** (k - 1), 4, 2, 1, bias=False),
                   nn.BatchNorm2d(ngf * 2 ** (k - 1)), nn.ReLU(True)]
    layers += [nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return finish(nn.Sequential(*layers), [Input("input", ("batch", nz, 1, 1))])


def unet(size: str) -> Spec:
    import torch
    import torch.nn as nn

    def block(cin: int, cout: int) -> Any:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(True), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(True))

    class UNet(nn.Module):
        def __init__(self, base: int, depth: int, classes: int) -> None:
            super().__init__()
            ch = [base * 2 ** k for k in range(depth + 1)]
            self.down = nn.ModuleList([block(3, ch[0])] + [block(ch[k], ch[k + 1])
                                                          for k in range(depth)])
            self.up = nn.ModuleList([nn.ConvTranspose2d(ch[k + 1], ch[k], 2, stride=2)
                                     for k in reversed(range(depth))])
            self.dec = nn.ModuleList([block(2 * ch[k], ch[k]) for k in reversed(range(depth))])
            self.head = nn.Conv2d(ch[0], classes, 1)

        def forward(self, x: Any) -> Any:
            skips = []
            for k, d in enumerate(self.down):
                x = d(x if k == 0 else torch.max_pool2d(x, 2))
                skips.append(x)
            for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
                x = dec(torch.cat([skip, up(x)], dim=1))
            return self.head(x)

    seeded(51)
    if size == "real":
        return finish(UNet(64, 4, 2), image(128))
    return finish(UNet(8, 2, 2), image(24))


def deeplabv3(size: str) -> Spec:
    m = torchvision().models
    seg = m.segmentation
    seeded(52)
    if size == "real":
        net = seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                               num_classes=21)
        return finish(first_output(net, "out"), image(224))
    import torch.nn as nn

    setting, last = m.mobilenetv3._mobilenet_v3_conf("mobilenet_v3_large", width_mult=0.25,
                                                     dilated=True)
    backbone = m.mobilenetv3.MobileNetV3(setting, last)
    net = seg.deeplabv3._deeplabv3_mobilenetv3(backbone, num_classes=5, aux=False)
    # DeepLabHead's layers with 32 instead of 256 channels: ASPP (1x1, three atrous 3x3 at
    # rates 12/24/36, image pooling + bilinear upsampling, projection), 3x3 conv, classifier
    cin = net.classifier[0].convs[0][0].in_channels
    net.classifier = nn.Sequential(seg.deeplabv3.ASPP(cin, [12, 24, 36], out_channels=32),
                                   nn.Conv2d(32, 32, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 5, 1))
    return finish(first_output(net, "out"), image(48))


# ---- detection -----------------------------------------------------------------------------
def _anchors(maps: list[tuple[int, int]], scales: list[float]) -> np.ndarray:
    """Centre-form anchors (cx, cy, w, h) in [0, 1]: 2 aspect ratios per cell per map."""
    out = []
    for (h, w), s in zip(maps, scales):
        for i in range(h):
            for j in range(w):
                for ar in (1.0, 2.0):
                    out.append(((j + 0.5) / w, (i + 0.5) / h, s * np.sqrt(ar), s / np.sqrt(ar)))
    return np.asarray(out, np.float32)


def ssdlite(size: str) -> Spec:
    import torch
    import torch.nn as nn

    def sep(cin: int, cout: int, stride: int) -> Any:
        return nn.Sequential(nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False),
                             nn.BatchNorm2d(cin), nn.ReLU6(True),
                             nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU6(True))

    class SSDLite(nn.Module):
        """Returns (boxes [B, A, 4] as (y1, x1, y2, x2), scores [B, classes, A])."""

        def __init__(self, img: int, width: int, classes: int) -> None:
            super().__init__()
            self.classes = classes
            self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(width), nn.ReLU6(True),
                                      sep(width, 2 * width, 2), sep(2 * width, 2 * width, 2))
            self.extra = sep(2 * width, 4 * width, 2)
            chans = [2 * width, 4 * width]
            self.box = nn.ModuleList([nn.Conv2d(c, 2 * 4, 3, padding=1) for c in chans])
            self.cls = nn.ModuleList([nn.Conv2d(c, 2 * classes, 3, padding=1) for c in chans])
            maps = [(img // 8, img // 8), (img // 16, img // 16)]
            self.register_buffer("anchors", torch.from_numpy(_anchors(maps, [0.2, 0.45])))

        def _flat(self, t: Any, k: int) -> Any:
            b = t.shape[0]
            return t.permute(0, 2, 3, 1).reshape(b, -1, k)

        def forward(self, x: Any) -> Any:
            f1 = self.stem(x)
            f2 = self.extra(f1)
            loc = torch.cat([self._flat(h(f), 4) for h, f in zip(self.box, (f1, f2))], 1)
            conf = torch.cat([self._flat(h(f), self.classes) for h, f in zip(self.cls, (f1, f2))],
                             1)
            a: Any = self.anchors
            cxy = a[:, :2] + 0.1 * loc[..., :2] * a[:, 2:]
            wh = a[:, 2:] * torch.exp(0.2 * loc[..., 2:].clamp(max=4.0))
            boxes = torch.cat([cxy[..., 1:2] - wh[..., 1:2] / 2, cxy[..., 0:1] - wh[..., 0:1] / 2,
                               cxy[..., 1:2] + wh[..., 1:2] / 2, cxy[..., 0:1] + wh[..., 0:1] / 2],
                              -1)
            scores = torch.softmax(conf, -1)[..., 1:].transpose(1, 2)  # class 0: background
            return boxes, scores

    seeded(53)
    img, width, classes = (320, 32, 91) if size == "real" else (64, 8, 4)
    return finish(SSDLite(img, width, classes), image(img))


NMS = {"max_per_class": 20, "iou": 0.5, "score": 0.3}


def greedy_nms(boxes: Any, scores: Any, max_out: int, iou: float, score: float) -> Any:
    """Class-agnostic greedy NMS in torch ops over a fixed number of steps (static shapes):
    (indices [B, max_out] int64, kept [B, max_out] bool). Each step takes the best remaining
    box (score of its best class) and suppresses the boxes overlapping it by more than ``iou``;
    a step whose best score is <= ``score`` keeps nothing."""
    import torch

    best = scores.amax(1)  # [B, A]
    y1, x1, y2, x2 = boxes.unbind(-1)
    area = (y2 - y1).clamp(min=0) * (x2 - x1).clamp(min=0)
    idx, kept = [], []
    for _ in range(max_out):
        s, i = best.max(1)  # [B]
        sel = torch.gather(boxes, 1, i[:, None, None].expand(-1, 1, 4))[:, 0]  # [B, 4]
        yy1, xx1 = torch.maximum(y1, sel[:, None, 0]), torch.maximum(x1, sel[:, None, 1])
        yy2, xx2 = torch.minimum(y2, sel[:, None, 2]), torch.minimum(x2, sel[:, None, 3])
        inter = (yy2 - yy1).clamp(min=0) * (xx2 - xx1).clamp(min=0)
        sel_area = torch.gather(area, 1, i[:, None])
        overlap = inter / (area + sel_area - inter + 1e-9)
        best = torch.where(overlap > iou, torch.full_like(best, -1.0), best)
        best = best.scatter(1, i[:, None], -1.0)
        idx.append(i)
        kept.append(s > score)
    return torch.stack(idx, 1), torch.stack(kept, 1)


def with_greedy_nms(module: Any, max_out: int = 10) -> Any:
    """The detector followed by ``greedy_nms``: what the torch.export path compiles."""
    import torch.nn as nn

    class Detect(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.det = module

        def forward(self, x: Any) -> Any:
            boxes, scores = self.det(x)
            idx, kept = greedy_nms(boxes, scores, max_out, NMS["iou"], NMS["score"])
            return boxes, scores, idx, kept

    return Detect().eval()


def append_onnx_nms(model: Any) -> Any:
    """The exported detector (outputs ``boxes``, ``scores``) with an ONNX NonMaxSuppression
    node appended: a third output ``selected`` (int64 [N, 3]: batch, class, box) whose length
    depends on the data."""
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    outs = [o.name for o in g.output]
    consts: dict[str, np.ndarray] = {"nms_max": np.array([NMS["max_per_class"]], np.int64),
              "nms_iou": np.array([NMS["iou"]], np.float32),
              "nms_score": np.array([NMS["score"]], np.float32)}
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    g.node.append(helper.make_node("NonMaxSuppression", [outs[0], outs[1], *consts], ["selected"],
                                   name="nms", center_point_box=0))
    g.output.append(helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3]))
    return model
