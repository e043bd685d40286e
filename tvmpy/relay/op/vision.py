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


def _extents(b: np.ndarray, center: bool) -> tuple[np.ndarray, ...]:
    """(x_min, x_max, y_min, y_max) of boxes ``b`` (..., 4), computed as onnx's reference does
    (in the boxes' dtype): corners [y1, x1, y2, x2] in either order, or [x, y, w, h]."""
    if center:
        return (b[..., 0] - b[..., 2] / 2, b[..., 0] + b[..., 2] / 2,
                b[..., 1] - b[..., 3] / 2, b[..., 1] + b[..., 3] / 2)
    return (np.minimum(b[..., 1], b[..., 3]), np.maximum(b[..., 1], b[..., 3]),
            np.minimum(b[..., 0], b[..., 2]), np.maximum(b[..., 0], b[..., 2]))


def _suppressed(top: np.ndarray, rest: np.ndarray, center: bool, iou: Any) -> np.ndarray:
    """Which of the boxes ``rest`` the kept box ``top`` suppresses: onnx's rule (IoU strictly
    above the threshold, every area positive), vectorized. The rule is symmetric in its two
    boxes (min/max and a sum of two areas commute exactly), so suppressing the remaining
    candidates by each kept box in turn gives the reference's greedy result."""
    x1, X1, y1, Y1 = _extents(top, center)
    x2, X2, y2, Y2 = _extents(rest, center)
    ix0, ix1 = np.maximum(x1, x2), np.minimum(X1, X2)
    iy0, iy1 = np.maximum(y1, y2), np.minimum(Y1, Y2)
    with np.errstate(all="ignore"):
        inter = (ix1 - ix0) * (iy1 - iy0)
        a1 = (X1 - x1) * (Y1 - y1)
        a2 = (X2 - x2) * (Y2 - y2)
        union = a1 + a2 - inter
        return ((ix1 > ix0) & (iy1 > iy0) & (inter > 0) & (a1 > 0) & (a2 > 0) & (union > 0)
                & (inter / union > iou))


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
    center = bool(center_point_box)
    nb, nc, n = scores.shape
    out = []
    for b in range(nb):
        # every class at once: each step keeps the best live candidate of every class still
        # going, and kills the live candidates it suppresses (classes are independent)
        sc = scores[b]
        live = np.ones((nc, n), bool) if s_t is None else sc > s_t
        key = np.where(live, -sc, np.inf)  # candidates by decreasing score, then box index
        order = np.argsort(key, axis=1, kind="stable")
        live = np.take_along_axis(live, order, axis=1)
        sboxes = boxes[b][order]  # (classes, boxes, 4) in each class's order
        picks: list[list[int]] = [[] for _ in range(nc)]
        rows_c = np.arange(nc)
        width = order.shape[1]
        for _ in range(min(limit, n)):
            most = int(live.sum(axis=1).max()) if nc else 0
            if most == 0:
                break
            if most <= width // 2:  # keep only the live candidates (in order) of each class
                keep = np.argsort(~live, axis=1, kind="stable")[:, :most]
                order = np.take_along_axis(order, keep, axis=1)
                sboxes = np.take_along_axis(sboxes, keep[..., None], axis=1)
                live = np.take_along_axis(live, keep, axis=1)
                width = most
            going = live.any(axis=1)
            pos = np.argmax(live, axis=1)
            top = sboxes[rows_c, pos]
            for c in np.nonzero(going)[0]:
                picks[c].append(int(order[c, pos[c]]))
            live[rows_c, pos] = False
            live &= ~(_suppressed(top[:, None, :], sboxes, center, iou_t) & going[:, None])
        out.extend((b, c, i) for c in range(nc) for i in picks[c])
    return np.array(out, "int64").reshape(-1, 3)


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
