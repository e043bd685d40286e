"""``check_indices``: gather/scatter indices checked against the data at run time (the ONNX
importer puts it before every Gather, GatherElements, GatherND, ScatterElements and ScatterND
whose indices are not constants). Out of ``[-n, n)`` for a data axis of size ``n`` is an error
naming ``what`` (the ONNX node), as onnxruntime raises; the result is the indices with the
negative ones counted from the end. OPAQUE: one ``te.extern`` kernel of its own
(``topi.index_check``); the interpreter's ``FNumpy`` raises the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import TensorType, Type
from ._rel import fail, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_op, register_op_attr

__all__ = ["check_indices", "check_indices_np", "IndexOutOfRange"]


class IndexOutOfRange(RuntimeError):
    """An index outside its data axis (the interpreter's form of the kernel's failure)."""


def _check_indices_rel(arg_types: list[Type], attrs: Any) -> Type:
    idx = tensor_arg(arg_types[0], "the indices")
    data = tensor_arg(arg_types[1], "the data")
    if not idx.dtype.startswith("int"):
        fail(f"check_indices: indices must be signed integers, got {idx.dtype}")
    axes = list(attrs.axes)
    if not axes or any(not 0 <= a < len(data.shape) for a in axes):
        fail(f"check_indices: axes {axes} out of range for data of rank {len(data.shape)}")
    if len(axes) > 1 and (not idx.shape or idx.shape[-1] != len(axes)):
        fail(f"check_indices: indices of shape {tuple(idx.shape)} must have {len(axes)} entries "
             "on their last axis (one per data axis)")
    return TensorType(idx.shape, idx.dtype)


def check_indices_np(indices: np.ndarray, data_shape: Sequence[int], axes: Sequence[int],
                     what: str = "") -> np.ndarray:
    """The numpy meaning: raise ``IndexOutOfRange`` (the kernel's message) or wrap."""
    from ...topi.index_check import index_error_message

    idx = np.asarray(indices)
    sizes = np.asarray([int(data_shape[a]) for a in axes], dtype=np.int64)
    n = sizes if len(axes) > 1 else sizes[0]
    bad = (idx < -n) | (idx >= n)
    if bad.any():
        k = int(np.argwhere(bad)[0][-1]) if len(axes) > 1 else 0
        raise IndexOutOfRange(index_error_message(what, axes[k], int(sizes[k])))
    return np.where(idx < 0, idx + n, idx).astype(idx.dtype)


register_op("check_indices", _check_indices_rel, OpPattern.OPAQUE, 2,
            {"axes": REQUIRED, "what": ""})
register_op_attr("check_indices", "FNumpy", lambda attrs, ins, t: check_indices_np(
    ins[0], np.shape(ins[1]), attrs.axes, attrs.what))


def check_indices(indices: RelayExpr, data: RelayExpr, axes: Sequence[int] | int,
                  what: str = "") -> RelayExpr:
    """``indices`` (int32/int64) checked against ``data``'s axes ``axes`` (one axis for every
    index, or one per entry of the indices' last axis) and wrapped; ``what`` names the source
    in the error."""
    axes = [axes] if isinstance(axes, int) else [int(a) for a in axes]
    return make_call("check_indices", [indices, data], {"axes": tuple(axes), "what": str(what)})
