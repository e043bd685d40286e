"""``relay.vision``: ``all_class_non_max_suppression`` in ONNX's form (NonMaxSuppression).

``selected = all_class_non_max_suppression(boxes (B, N, 4), scores (B, C, N),
max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box=0)``: for every
batch and class, boxes whose score is above ``score_threshold`` are taken by decreasing score
(ties: the lower box index first) and kept unless their IoU with a box already kept is above
``iou_threshold``, at most ``max_output_boxes_per_class`` of them; the result is the
``(count, 3)`` int64 rows ``[batch, class, box]``. The three scalars are tensors (1 element, or
empty: then 0, 0 and no score threshold, as onnx's reference). Arithmetic in the boxes' dtype,
as the reference computes. The row count depends on the values: the type has ``Any`` there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import Any as AnyDim
from ..ty import TensorType, Type
from ._rel import fail, tensor_arg
from .registry import OpPattern, make_call, register_op, register_op_attr
from .shape_func import register_shape_func

__all__ = ["all_class_non_max_suppression", "non_max_suppression_np"]


def _nms_rel(arg_types: list[Type], attrs: Any) -> Type:
    boxes = tensor_arg(arg_types[0], "the boxes")
    scores = tensor_arg(arg_types[1], "the scores")
    if len(boxes.shape) != 3 or (isinstance(boxes.shape[2], int) and boxes.shape[2] != 4):
        fail(f"non_max_suppression: boxes must be (batch, boxes, 4), got {tuple(boxes.shape)}")
    if len(scores.shape) != 3:
        fail(f"non_max_suppression: scores must be (batch, classes, boxes), got "
             f"{tuple(scores.shape)}")
    for k, (a, b) in enumerate(((boxes.shape[0], scores.shape[0]), (boxes.shape[1], scores.shape[2]))):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            what = "batch" if k == 0 else "box count"
            fail(f"non_max_suppression: boxes {tuple(boxes.shape)} and scores {tuple(scores.shape)} "
                 f"disagree on the {what}")
    for i, what in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"), (4, "score_threshold")):
        t = tensor_arg(arg_types[i], what)
        if len(t.shape) > 1 or (len(t.shape) == 1 and isinstance(t.shape[0], int) and t.shape[0] > 1):
            fail(f"non_max_suppression: {what} must be a scalar or a 1-element tensor, got shape "
                 f"{tuple(t.shape)}")
    return TensorType([AnyDim(), 3], "int64")


def _first(v: Any) -> Any:
    a = np.asarray(v).reshape(-1)
    return a[0] if a.size else None


def _suppress(b1: np.ndarray, b2: np.ndarray, center: bool, iou: Any) -> bool:
    """onnx's rule (its operation order and dtype): IoU strictly above the threshold."""
    if center:
        x1_min, x1_max = b1[0] - b1[2] / 2, b1[0] + b1[2] / 2
        x2_min, x2_max = b2[0] - b2[2] / 2, b2[0] + b2[2] / 2
        y1_min, y1_max = b1[1] - b1[3] / 2, b1[1] + b1[3] / 2
        y2_min, y2_max = b2[1] - b2[3] / 2, b2[1] + b2[3] / 2
    else:
        x1_min, x1_max = min(b1[1], b1[3]), max(b1[1], b1[3])
        x2_min, x2_max = min(b2[1], b2[3]), max(b2[1], b2[3])
        y1_min, y1_max = min(b1[0], b1[2]), max(b1[0], b1[2])
        y2_min, y2_max = min(b2[0], b2[2]), max(b2[0], b2[2])
    ix_min, ix_max = max(x1_min, x2_min), min(x1_max, x2_max)
    if ix_max <= ix_min:
        return False
    iy_min, iy_max = max(y1_min, y2_min), min(y1_max, y2_max)
    if iy_max <= iy_min:
        return False
    inter = (ix_max - ix_min) * (iy_max - iy_min)
    if inter <= 0:
        return False
    a1 = (x1_max - x1_min) * (y1_max - y1_min)
    a2 = (x2_max - x2_min) * (y2_max - y2_min)
    union = a1 + a2 - inter
    if a1 <= 0 or a2 <= 0 or union <= 0:
        return False
    return bool(inter / union > iou)


def non_max_suppression_np(boxes: np.ndarray, scores: np.ndarray, max_out: Any = None,
                           iou: Any = None, score: Any = None, center_point_box: int = 0
                           ) -> np.ndarray:
    """The reference: ``(count, 3)`` int64 rows [batch, class, box]."""
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or boxes.shape[0] != scores.shape[0] or boxes.shape[1] != scores.shape[2]:
        raise ValueError(f"non_max_suppression: boxes {boxes.shape} must be (batch, boxes, 4) and "
                         f"scores {scores.shape} (batch, classes, boxes)")
    m = _first(max_out) if max_out is not None else None
    limit = max(int(m), 0) if m is not None else 0
    iou_t = _first(iou) if iou is not None else None
    iou_t = iou_t if iou_t is not None else boxes.dtype.type(0)
    s_t = _first(score) if score is not None else None
    rows = []
    nb, nc, n = scores.shape
    for b in range(nb):
        for c in range(nc):
            sc = scores[b, c]
            cand = [i for i in range(n) if s_t is None or sc[i] > s_t]
            cand.sort(key=lambda i: (-sc[i], i))
            kept: list[int] = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if not any(_suppress(boxes[b, i], boxes[b, j], bool(center_point_box), iou_t)
                           for j in kept):
                    kept.append(i)
                    rows.append((b, c, i))
    return np.array(rows, "int64").reshape(-1, 3)


def _nms_np(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    return non_max_suppression_np(*ins, center_point_box=attrs.center_point_box)


def _nms_shape(attrs: Any, ins: list[np.ndarray]) -> list[tuple[int, ...]]:
    return [non_max_suppression_np(*ins, center_point_box=attrs.center_point_box).shape]


_NAME = "vision.all_class_non_max_suppression"
register_op(_NAME, _nms_rel, OpPattern.OPAQUE, 5, {"center_point_box": 0, "output_format": "onnx"})
register_op_attr(_NAME, "FNumpy", _nms_np)
register_shape_func(_NAME, _nms_shape, data_dependent=True)


def all_class_non_max_suppression(boxes: RelayExpr, scores: RelayExpr,
                                  max_output_boxes_per_class: RelayExpr,
                                  iou_threshold: RelayExpr, score_threshold: RelayExpr,
                                  center_point_box: int = 0, output_format: str = "onnx"
                                  ) -> RelayExpr:
    """ONNX NonMaxSuppression (see the module docstring); ``output_format`` must be "onnx"."""
    if output_format != "onnx":
        raise ValueError(f"all_class_non_max_suppression: only output_format='onnx' is supported, "
                         f"got {output_format!r}")
    if center_point_box not in (0, 1):
        raise ValueError(f"all_class_non_max_suppression: center_point_box must be 0 or 1, got "
                         f"{center_point_box!r}")
    return make_call(_NAME, [boxes, scores, max_output_boxes_per_class, iou_threshold,
                             score_threshold],
                     {"center_point_box": int(center_point_box), "output_format": output_format})
