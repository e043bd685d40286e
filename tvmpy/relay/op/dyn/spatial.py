"""Spatial operators whose output size is a run-time tensor: ``dyn.affine_grid(theta, size)``
(ONNX AffineGrid), ``dyn.col2im(data, image_shape, block_shape)`` (ONNX Col2Im) and
``dyn.max_unpool(data, indices, output_shape)`` (ONNX MaxUnpool with output_shape).

Each: a type relation with ``?`` for the sizes given by values (the rank is static), a
data-dependent shape function that checks the values (errors name the node), FNumpy as ONNX
defines the operator, pattern OPAQUE, and a compute (``topi.dyn.spatial``).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ...expr import RelayExpr, RelayTypeError
from ...ty import Any as AnyDim
from ...ty import TensorType, Type
from .._rel import tensor_arg
from ..registry import OpPattern, make_call, register_op, register_op_attr
from ..shape_func import register_shape_func
from .axes_strategy import register_axes_strategy

__all__ = ["affine_grid", "col2im", "max_unpool"]


def _ints(v: np.ndarray) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


def _where(attrs: Any, default: str) -> str:
    return attrs.node or default


def _vector_arg(t: Type, what: str) -> int:
    s = tensor_arg(t, what)
    if len(s.shape) != 1 or not isinstance(s.shape[0], int) or \
            not str(s.dtype).startswith(("int", "uint")):
        raise RelayTypeError(f"{what} must be a 1-D integer tensor of static length, got {s}")
    return s.shape[0]




def _register(name: str, rel: Any, n_in: int, schema: dict, shape: Any, fnumpy: Any,
              compute: Any, doc: str, reduces: bool = True) -> None:
    register_op(name, rel, OpPattern.OPAQUE, n_in, schema, doc)
    register_op_attr(name, "FNumpy", fnumpy)
    register_shape_func(name, shape, data_dependent=True)
    register_axes_strategy(name, compute, reduces)


# ---- affine_grid ------------------------------------------------------------------------------
def _affine_rel(arg_types: list[Type], attrs: Any) -> Type:
    theta = tensor_arg(arg_types[0], "theta")
    n = _vector_arg(arg_types[1], "the size")
    if len(theta.shape) != 3 or theta.shape[1] not in (2, 3) or \
            theta.shape[2] != theta.shape[1] + 1 or n != theta.shape[1] + 2:
        raise RelayTypeError(f"theta {theta} and size of length {n} do not make a 2-D (N, 2, 3; "
                             "4 sizes) or 3-D (N, 3, 4; 5 sizes) affine grid")
    nd = theta.shape[1]
    return TensorType([theta.shape[0]] + [AnyDim() for _ in range(nd)] + [nd], theta.dtype)


def _affine_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    theta, size = inputs
    sz = _ints(size)
    if sz[0] != theta.shape[0] or any(v < 0 for v in sz):
        raise ValueError(f"{_where(attrs, 'affine_grid')}: size {sz} does not fit theta of "
                         f"shape {tuple(theta.shape)}")
    return [(theta.shape[0], *sz[2:], theta.shape[1])]


def _affine_coords(size: int, align: bool) -> np.ndarray:
    i = np.arange(size, dtype=np.float64)
    if align:
        return -1.0 + 2.0 * i / (size - 1) if size > 1 else np.full(size, -1.0)
    return -1.0 + (2.0 * i + 1.0) / size


def _affine_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    theta, size = np.asarray(ins[0]), ins[1]
    (shape,) = _affine_shape(attrs, [theta, size])
    spatial = shape[1:-1]
    nd = len(spatial)
    axes = [_affine_coords(s, bool(attrs.align_corners)) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([mesh[nd - 1 - m] for m in range(nd)] + [np.ones(spatial)], -1)
    out = np.einsum("...m,njm->n...j", base, theta.astype(np.float64))
    return out.astype(theta.dtype)


def _affine_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.spatial import dyn_affine_grid

    return [dyn_affine_grid(inputs[0], list(out_type.shape), bool(attrs.align_corners))]


_register("dyn.affine_grid", _affine_rel, 2, {"align_corners": False, "node": ""},
          _affine_shape, _affine_numpy, _affine_compute,
          "the sampling grid of affine transforms, its size a run-time tensor", reduces=False)


def affine_grid(theta: RelayExpr, size: RelayExpr, align_corners: bool = False,
                node: str = "") -> RelayExpr:
    """ONNX AffineGrid: theta (N, 2, 3) or (N, 3, 4), size (N, C, [D,] H, W) read at run
    time."""
    return make_call("dyn.affine_grid", [theta, size],
                     {"align_corners": bool(align_corners), "node": str(node)})


# ---- col2im -----------------------------------------------------------------------------------
def _col2im_rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tensor_arg(arg_types[0], "the data")
    nd = _vector_arg(arg_types[1], "the image shape")
    if _vector_arg(arg_types[2], "the block shape") != nd or len(data.shape) != 3:
        raise RelayTypeError(f"col2im: data {data} must be (N, C * block, L) and the image and "
                             "block shapes of one length")
    return TensorType([data.shape[0]] + [AnyDim() for _ in range(nd + 1)], data.dtype)


def _col2im_geometry(attrs: Any, data_shape: tuple, image: list[int], block: list[int]
                     ) -> tuple[int, list[int]]:
    """(C, blocks per dim), checked against the data's shape."""
    nd = len(image)
    dil, pads, strides = _col2im_attrs(attrs, nd)
    where = _where(attrs, "col2im")
    K = int(np.prod(block))
    if K <= 0 or min(image, default=1) <= 0 or data_shape[1] % K:
        raise ValueError(f"{where}: {data_shape[1]} input channels do not split into blocks of "
                         f"{block} (image {image})")
    nblk = [(image[d] + pads[d] + pads[d + nd] - (dil[d] * (block[d] - 1) + 1)) // strides[d]
            + 1 for d in range(nd)]
    if min(nblk, default=1) < 1 or int(np.prod(nblk)) != data_shape[2]:
        raise ValueError(f"{where}: {data_shape[2]} blocks given, image {image} / block {block} "
                         f"make {nblk}")
    return data_shape[1] // K, nblk


def _col2im_attrs(attrs: Any, nd: int) -> tuple[list[int], list[int], list[int]]:
    dil = list(attrs.dilations) if attrs.dilations else [1] * nd
    pads = list(attrs.pads) if attrs.pads else [0] * (2 * nd)
    strides = list(attrs.strides) if attrs.strides else [1] * nd
    if len(dil) != nd or len(pads) != 2 * nd or len(strides) != nd:
        raise ValueError(f"{_where(attrs, 'col2im')}: dilations {dil}, pads {pads}, strides "
                         f"{strides} do not fit {nd} spatial dims")
    return dil, pads, strides


def _col2im_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    data, image, block = inputs
    C, _ = _col2im_geometry(attrs, data.shape, _ints(image), _ints(block))
    return [(data.shape[0], C, *_ints(image))]


def _col2im_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    x = np.asarray(ins[0])
    image, block = _ints(ins[1]), _ints(ins[2])
    nd = len(image)
    C, nblk = _col2im_geometry(attrs, x.shape, image, block)
    dil, pads, strides = _col2im_attrs(attrs, nd)
    K = int(np.prod(block))
    out = np.zeros((x.shape[0], C, *image), dtype=x.dtype)
    cols = x.reshape(x.shape[0], C, K, x.shape[2])
    for k, koff in enumerate(itertools.product(*[range(b) for b in block])):
        for li, lpos in enumerate(itertools.product(*[range(b) for b in nblk])):
            pix = tuple(lpos[d] * strides[d] - pads[d] + koff[d] * dil[d] for d in range(nd))
            if all(0 <= p < image[d] for d, p in enumerate(pix)):
                out[(slice(None), slice(None), *pix)] += cols[:, :, k, li]
    return out


def _col2im_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.spatial import dyn_col2im

    shape = list(out_type.shape)
    dil, pads, strides = _col2im_attrs(attrs, len(shape) - 2)
    return [dyn_col2im(inputs[0], inputs[2], shape, dil, pads, strides)]


_register("dyn.col2im", _col2im_rel, 3,
          {"dilations": None, "pads": None, "strides": None, "node": ""},
          _col2im_shape, _col2im_numpy, _col2im_compute,
          "column blocks summed into an image whose and whose blocks' shapes are run-time")


def col2im(data: RelayExpr, image_shape: RelayExpr, block_shape: RelayExpr,
           dilations: Any = None, pads: Any = None, strides: Any = None,
           node: str = "") -> RelayExpr:
    """ONNX Col2Im with the image and block shapes as run-time tensors."""
    def t(v: Any) -> Any:
        return None if v is None else tuple(int(x) for x in v)
    return make_call("dyn.col2im", [data, image_shape, block_shape], {
        "dilations": t(dilations), "pads": t(pads), "strides": t(strides), "node": str(node)})


# ---- max_unpool -------------------------------------------------------------------------------
def _unpool_rel(arg_types: list[Type], attrs: Any) -> Type:
    data = tensor_arg(arg_types[0], "the data")
    tensor_arg(arg_types[1], "the indices")
    n = _vector_arg(arg_types[2], "the output shape")
    if n != len(data.shape) or n < 3:
        raise RelayTypeError(f"max_unpool: output shape of length {n} for data {data}")
    return TensorType(list(data.shape[:2]) + [AnyDim() for _ in range(n - 2)], data.dtype)


def _unpool_shape(attrs: Any, inputs: list[np.ndarray]) -> list[tuple[int, ...]]:
    data, _, out = inputs
    o = _ints(out)
    if tuple(o[:2]) != tuple(data.shape[:2]) or min(o) < 0:
        raise ValueError(f"{_where(attrs, 'max_unpool')}: output_shape {o} does not fit data "
                         f"of shape {tuple(data.shape)}")
    return [tuple(o)]


def _unpool_numpy(attrs: Any, ins: list[np.ndarray], t: Any) -> np.ndarray:
    x, idx = np.asarray(ins[0]), np.asarray(ins[1]).astype(np.int64)
    (o,) = _unpool_shape(attrs, [x, idx, ins[2]])
    default = tuple(int(v) for v in attrs.default_shape)
    coords = np.unravel_index(idx.reshape(-1), default)
    inside = np.all([c < s for c, s in zip(coords, o)], axis=0)
    out = np.zeros(int(np.prod(o)), dtype=x.dtype)
    flat = np.ravel_multi_index(tuple(c[inside] for c in coords), o)
    np.add.at(out, flat, x.reshape(-1)[inside])  # (a position hit twice: the sum, as compiled)
    return out.reshape(o)


def _unpool_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi.dyn.spatial import dyn_max_unpool

    return [dyn_max_unpool(inputs[0], inputs[1], list(out_type.shape),
                           [int(v) for v in attrs.default_shape])]


_register("dyn.max_unpool", _unpool_rel, 3, {"default_shape": (), "node": ""},
          _unpool_shape, _unpool_numpy, _unpool_compute,
          "max unpooling into an output shape given at run time")


def max_unpool(data: RelayExpr, indices: RelayExpr, output_shape: RelayExpr,
               default_shape: Any, node: str = "") -> RelayExpr:
    """ONNX MaxUnpool with ``output_shape`` a run-time tensor; ``default_shape``: the shape the
    indices address (from the kernel, strides and pads)."""
    return make_call("dyn.max_unpool", [data, indices, output_shape], {
        "default_shape": tuple(int(v) for v in default_shape), "node": str(node)})
