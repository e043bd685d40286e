"""Kernels of spatial operators whose output size is a run-time tensor (the kernels of
``relay.op.dyn.affine_grid``, ``dyn.col2im``, ``dyn.max_unpool``).

The output extents are the output buffer's (symbolic) shape, computed beforehand by the
operators' data-dependent shape functions; the kernels read the remaining run-time values (block
shape, ...) inside the compute, and take no loop extent from a tensor: a reduction runs over an
extent computed from shapes only, and loads that could leave the data are guarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...tir import op as tir_op
from ...tir.expr import Select, cast, const
from .. import tag

__all__ = ["dyn_affine_grid", "dyn_col2im", "dyn_max_unpool"]


def _f64(v: Any) -> Any:
    return cast(v, "float64")


def dyn_affine_grid(theta: te.Tensor, out_shape: Sequence[Any], align_corners: bool
                    ) -> te.Tensor:
    """ONNX AffineGrid: ``out[n, s..., j] = sum_m theta[n, j, m] * base_m(s)`` with base the
    normalized coordinates (x: the last spatial axis first) and a 1; out_shape is
    ``(N, spatial..., nd)``."""
    nd = len(out_shape) - 2
    spatial = list(out_shape[1:-1])

    def coord(i: Any, size: Any) -> Any:
        if align_corners:
            return Select(size > 1, const(-1.0, "float64") + const(2.0, "float64") * _f64(i)
                          / _f64(tir_op.max(size - 1, 1)), const(-1.0, "float64"))
        return const(-1.0, "float64") + (const(2.0, "float64") * _f64(i) + 1.0) / _f64(size)

    def f(*i: Any) -> Any:
        n, s, j = i[0], i[1:-1], i[-1]
        acc = _f64(theta[n, j, nd])
        for m in range(nd):
            k = nd - 1 - m  # base_0 is x: the last spatial axis
            acc = acc + _f64(theta[n, j, m]) * coord(s[k], spatial[k])
        return cast(acc, theta.dtype)

    return te.compute(list(out_shape), f, name="dyn_affine_grid", tag=tag.INJECTIVE)


def _unravel(flat: Any, dims: Sequence[Any]) -> list[Any]:
    out = []
    for d in reversed(dims):
        out.append(tir_op.floormod(flat, d))
        flat = tir_op.floordiv(flat, d)
    return out[::-1]


def dyn_col2im(data: te.Tensor, block_shape: te.Tensor, out_shape: Sequence[Any],
               dilations: Sequence[int], pads: Sequence[int], strides: Sequence[int]
               ) -> te.Tensor:
    """ONNX Col2Im: data (N, C * prod(block), L) summed into out_shape (N, C, image...); the
    block shape is read at run time, the image size is the output's."""
    nd = len(out_shape) - 2
    image = list(out_shape[2:])
    C = out_shape[1]
    K = tir_op.floordiv(data.shape[1], tir_op.max(C, 1))
    kk = te.reduce_axis((0, K), name="kk")
    block = [cast(block_shape[d], "int32") for d in range(nd)]
    nblk = [tir_op.floordiv(image[d] + pads[d] + pads[d + nd] - (dilations[d] * (block[d] - 1)
                                                                   + 1), strides[d]) + 1
            for d in range(nd)]
    zero = const(0, data.dtype)

    def f(*i: Any) -> Any:
        n, c, p = i[0], i[1], i[2:]
        koff = _unravel(kk, block)
        ok = []
        lpos = []
        for d in range(nd):
            q = p[d] + pads[d] - koff[d] * dilations[d]
            ok += [q >= 0, tir_op.floormod(q, strides[d]) == 0,
                   tir_op.floordiv(q, strides[d]) < nblk[d]]
            lpos.append(tir_op.floordiv(q, strides[d]))
        lin: Any = const(0, "int32")
        for d in range(nd):
            lin = lin * nblk[d] + lpos[d]
        v = tir_op.if_then_else(tir_op.all(*ok), data[n, c * K + kk, lin], zero)
        return te.sum(v, axis=kk)

    return te.compute(list(out_shape), f, name="dyn_col2im", tag=tag.COMM_REDUCE)


def dyn_max_unpool(data: te.Tensor, indices: te.Tensor, out_shape: Sequence[Any],
                   default_shape: Sequence[Any]) -> te.Tensor:
    """ONNX MaxUnpool with an output_shape given at run time: each value goes to the output
    position with the coordinates its flat index has in ``default_shape`` (the unpooled shape
    the indices address). A masked sum over the input (quadratic, like the static form)."""
    raxes = [te.reduce_axis((0, d), name=f"q{k}") for k, d in enumerate(data.shape)]
    zero = const(0, data.dtype)

    def f(*o: Any) -> Any:
        q = tuple(raxes)
        coords = _unravel(cast(indices[q], "int64"), [cast(d, "int64") for d in default_shape])
        hit = tir_op.all(*[coords[k] == cast(o[k], "int64") for k in range(len(o))])
        return te.sum(Select(hit, data[q], zero), axis=raxes)

    return te.compute(list(out_shape), f, name="dyn_max_unpool", tag=tag.COMM_REDUCE)
