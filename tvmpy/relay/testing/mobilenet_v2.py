"""MobileNetV2 (torchvision's layout): inverted residual blocks with depthwise 3x3 convolutions and
ReLU6 (``clip(0, 6)``)."""

from __future__ import annotations

from typing import Any

from .. import op as _op
from ..expr import RelayExpr, var
from ..module import IRModule
from ..op import nn
from ._builder import Weights

# expansion t, output channels c, repeats n, first stride s
_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1))


def _conv_bn(w: Weights, x: RelayExpr, name: str, cin: int, cout: int, k: int, stride: int,
             groups: int = 1, relu6: bool = True) -> RelayExpr:
    weight = w.normal(f"{name}_weight", (cout, cin // groups, k, k))
    y = nn.conv2d(x, weight, strides=stride, padding=k // 2, groups=groups, channels=cout,
                  kernel_size=k)
    y = nn.batch_norm(y, *w.batch_norm_params(f"{name}_bn", cout))[0]
    return _op.tensor.clip(y, 0.0, 6.0) if relu6 else y


def _make_divisible(v: float, divisor: int = 8) -> int:
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def get_workload(batch_size: int = 1, image_shape: tuple[int, ...] = (3, 224, 224),
                 num_classes: int = 1000, width_mult: float = 1.0, dtype: str = "float32",
                 seed: int = 0) -> tuple[IRModule, dict[str, Any]]:
    """``(mod, params)`` of MobileNetV2; input ``data``, output logits."""
    w = Weights(seed, dtype)
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    cin = _make_divisible(32 * width_mult)
    y = _conv_bn(w, data, "stem", image_shape[0], cin, 3, 2)
    for b, (t, c, n, s) in enumerate(_SETTINGS):
        cout = _make_divisible(c * width_mult)
        for i in range(n):
            name = f"block{b}_{i}"
            stride = s if i == 0 else 1
            hidden = cin * t
            h = y if t == 1 else _conv_bn(w, y, f"{name}_expand", cin, hidden, 1, 1)
            h = _conv_bn(w, h, f"{name}_dw", hidden, hidden, 3, stride, groups=hidden)
            h = _conv_bn(w, h, f"{name}_project", hidden, cout, 1, 1, relu6=False)
            y = _op.tensor.add(h, y) if stride == 1 and cin == cout else h
            cin = cout
    last = _make_divisible(1280 * max(1.0, width_mult))
    y = _conv_bn(w, y, "head", cin, last, 1, 1)
    y = nn.batch_flatten(nn.global_avg_pool2d(y))
    y = nn.bias_add(nn.dense(y, w.normal("fc_weight", (num_classes, last)), units=num_classes),
                    w.uniform("fc_bias", (num_classes,), -0.1, 0.1))
    return w.module([data], y)
