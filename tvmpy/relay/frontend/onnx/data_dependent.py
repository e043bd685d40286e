"""ONNX operators whose output size depends on the data: NonZero, Unique, NonMaxSuppression,
ImageDecoder (a host operator: Pillow decodes, see relay/op/image_decode.py)
(Compress, in ``indexing``, uses relay.compress when its condition is not a constant).

NonZero of a constant folds at import time; otherwise these map to relay's ``argwhere``,
``unique`` and ``vision.all_class_non_max_suppression``, whose types have ``Any`` for the
counts (the interpreter or a VM computes them when the model runs).
"""

from __future__ import annotations

import numpy as np

from ...expr import TupleGetItem, const
from ...op import data_dependent as dd
from ...op import image_decode, transform, vision
from .context import ImportContext, shape_of
from .registry import Attrs, Inputs, Names, Output, converter


@converter("NonZero")
def _nonzero(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if names[0] in ctx.values:
        v = np.asarray(ctx.values[names[0]])
        return const(np.array(np.nonzero(np.atleast_1d(v)) if v.ndim else np.zeros((0, int(bool(v))),
                                                                                   "int64"), "int64"))
    idx = transform.cast(dd.argwhere(inputs[0]), "int64")
    return transform.transpose(idx, (1, 0))


@converter("Unique")
def _unique(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    axis = attrs.get("axis")
    if axis is not None:
        r = len(shape_of(inputs[0]))
        if not -r <= int(axis) < r:
            raise ctx.fail(f"axis {axis} is out of range for a {r}-d input")
        axis = int(axis) % r
    call = dd.unique(inputs[0], is_sorted=bool(attrs.get("sorted", 1)), axis=axis).astuple()
    return [TupleGetItem(call, k) for k in range(4)]


@converter("NonMaxSuppression")
def _nms(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    boxes, scores = inputs[0], inputs[1]
    # an omitted input: an empty tensor (0 boxes, IoU 0, no score threshold: onnx's meaning)
    empty = {2: "int64", 3: "float32", 4: "float32"}
    args = [inputs[k] if k < len(inputs) and inputs[k] is not None else const(np.zeros(0, dt))
            for k, dt in empty.items()]
    center = int(attrs.get("center_point_box", 0))
    if center not in (0, 1):
        raise ctx.fail(f"center_point_box must be 0 or 1, got {center}")
    return vision.all_class_non_max_suppression(boxes, scores, *args, center_point_box=center)


@converter("ImageDecoder")
def _image_decoder(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fmt = attrs.get("pixel_format", "RGB")
    if fmt not in ("RGB", "BGR", "Grayscale"):
        raise ctx.fail(f"pixel_format {fmt!r}: expected RGB, BGR or Grayscale")
    return image_decode.decode(inputs[0], fmt)
