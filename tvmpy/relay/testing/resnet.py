"""ResNet-18/34 (v1, torchvision's layout: conv-bn-relu, basic blocks, 1x1 projection shortcuts)."""

from __future__ import annotations

from typing import Any

from .. import op as _op
from ..expr import RelayExpr, var
from ..module import IRModule
from ..op import nn
from ._builder import Weights

_STAGES = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}


def _conv_bn(w: Weights, x: RelayExpr, name: str, cin: int, cout: int, k: int, stride: int,
             relu: bool = True) -> RelayExpr:
    weight = w.normal(f"{name}_weight", (cout, cin, k, k))
    y = nn.conv2d(x, weight, strides=stride, padding=k // 2, channels=cout, kernel_size=k)
    y = nn.batch_norm(y, *w.batch_norm_params(f"{name}_bn", cout))[0]
    return nn.relu(y) if relu else y


def _basic_block(w: Weights, x: RelayExpr, name: str, cin: int, cout: int, stride: int) -> RelayExpr:
    y = _conv_bn(w, x, f"{name}_conv1", cin, cout, 3, stride)
    y = _conv_bn(w, y, f"{name}_conv2", cout, cout, 3, 1, relu=False)
    short = x if stride == 1 and cin == cout else _conv_bn(w, x, f"{name}_sc", cin, cout, 1,
                                                           stride, relu=False)
    return nn.relu(_op.tensor.add(y, short))


def get_workload(num_layers: int = 18, batch_size: int = 1, image_shape: tuple[int, ...] = (3, 224, 224),
                 num_classes: int = 1000, dtype: str = "float32", seed: int = 0,
                 ) -> tuple[IRModule, dict[str, Any]]:
    """``(mod, params)`` of ResNet-``num_layers`` (18 or 34); input ``data``, output logits."""
    if num_layers not in _STAGES:
        raise ValueError(f"num_layers must be one of {sorted(_STAGES)}, got {num_layers}")
    w = Weights(seed, dtype)
    data = var("data", shape=(batch_size, *image_shape), dtype=dtype)
    y = _conv_bn(w, data, "stem", image_shape[0], 64, 7, 2)
    y = nn.max_pool2d(y, pool_size=3, strides=2, padding=1)
    cin = 64
    for s, (n_units, cout) in enumerate(zip(_STAGES[num_layers], (64, 128, 256, 512)), 1):
        for u in range(n_units):
            stride = 2 if (u == 0 and s > 1) else 1
            y = _basic_block(w, y, f"stage{s}_unit{u + 1}", cin, cout, stride)
            cin = cout
    y = nn.batch_flatten(nn.global_avg_pool2d(y))
    y = nn.bias_add(nn.dense(y, w.normal("fc_weight", (num_classes, cin)), units=num_classes),
                    w.uniform("fc_bias", (num_classes,), -0.1, 0.1))
    return w.module([data], y)
