"""Torch translations of the fuzzer's ONNX nodes: indexing operators: gathers, scatters, compress, reverse_sequence."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import torch

from ._common import (
    Fn,
    Node,
    Unsupported,
    _emit,
    _norm,
)

# ---------------------------------------------------------------------------------------------
# indexing


def _norm_index(idx: np.ndarray, d: int) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    if ((idx < -d) | (idx >= d)).any():
        raise Unsupported("index out of range")
    return np.where(idx < 0, idx + d, idx)


@_emit("Gather")
def _gather(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    out = list(n.out_shape())
    n.add_const(_norm_index(n.const(1), xs[axis]).reshape(-1))
    return lambda x, _i, idx: torch.reshape(torch.index_select(x, axis, idx), out)


@_emit("GatherElements")
def _gather_elements(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    n.add_const(_norm_index(n.const(1), xs[axis]))
    return lambda x, _i, idx: torch.gather(x, axis, idx)


@_emit("GatherND")
def _gather_nd(n: Node) -> Fn:
    xs = n.shape(0)
    bd = int(n.attr("batch_dims", 0))
    idx = np.asarray(n.const(1)).astype(np.int64)
    last = idx.shape[-1]
    cell = xs[bd:bd + last]
    idx = np.stack([_norm_index(idx[..., k], cell[k]) for k in range(last)], axis=-1)
    nb, ncell = math.prod(xs[:bd]), math.prod(cell)
    lin = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), cell) if last else \
        np.zeros(idx.shape[:-1], np.int64)
    lin = lin.reshape(nb, -1) + (np.arange(nb) * ncell)[:, None]  # rows of x's flattening
    n.add_const(lin.reshape(-1).astype(np.int64))
    flat = [nb * ncell, *xs[bd + last:]]
    out = list(n.out_shape())
    return lambda x, _i, rows: torch.reshape(torch.index_select(
        torch.reshape(x, flat), 0, rows), out)


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@_emit("ScatterElements")
def _scatter_elements(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    n.add_const(_norm_index(n.const(1), xs[axis]))
    red = n.attr("reduction", "none")
    if red == "none":
        return lambda x, _i, u, idx: torch.scatter(x, axis, idx, u)
    if red not in _SCATTER_REDUCE:
        raise n.refuse(f"reduction {red}")
    how = _SCATTER_REDUCE[red]
    return lambda x, _i, u, idx: torch.scatter_reduce(x, axis, idx, u, how, include_self=True)


@_emit("ScatterND")
def _scatter_nd(n: Node) -> Fn:
    xs = n.shape(0)
    idx = np.asarray(n.const(1)).astype(np.int64)
    last = idx.shape[-1]
    cell = xs[:last]
    idx = np.stack([_norm_index(idx[..., k], cell[k]) for k in range(last)], axis=-1)
    lin = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), cell).reshape(-1)
    n.add_const(lin.astype(np.int64))
    flat = [math.prod(cell), *xs[last:]]
    uflat = [lin.size, *xs[last:]]
    red = n.attr("reduction", "none")
    if red not in ("none", "add", "mul", "max", "min"):
        raise n.refuse(f"reduction {red}")

    def fn(x: torch.Tensor, _i: Any, u: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        xf, uf = torch.reshape(x, flat), torch.reshape(u, uflat)
        if red == "none":
            y = torch.index_copy(xf, 0, rows, uf)
        elif red == "add":
            y = torch.index_add(xf, 0, rows, uf)
        else:
            with warnings.catch_warnings():  # "index_reduce() is in beta"
                warnings.simplefilter("ignore")
                y = torch.index_reduce(xf, 0, rows, uf, _SCATTER_REDUCE[red],
                                       include_self=True)
        return torch.reshape(y, list(xs))
    return fn


@_emit("Compress")
def _compress(n: Node) -> Fn:
    xs = n.shape(0)
    cond = np.asarray(n.const(1)).astype(bool).reshape(-1)
    axis = n.attr("axis")
    d = math.prod(xs) if axis is None else xs[_norm(int(axis), len(xs))]
    n.add_const(np.nonzero(cond[:d])[0].astype(np.int64))
    if axis is None:
        return lambda x, _c, keep: torch.index_select(torch.reshape(x, [-1]), 0, keep)
    a = _norm(int(axis), len(xs))
    return lambda x, _c, keep: torch.index_select(x, a, keep)


@_emit("ReverseSequence")
def _reverse_sequence(n: Node) -> Fn:
    xs = n.shape(0)
    ba, ta = int(n.attr("batch_axis", 1)), int(n.attr("time_axis", 0))
    lens = np.asarray(n.const(1)).astype(np.int64)
    t = np.arange(xs[ta])
    src = np.where(t[None, :] < lens[:, None], lens[:, None] - 1 - t[None, :], t[None, :])
    if ba > ta:
        src = src.T  # [time, batch]
    shape = [1] * len(xs)
    shape[ba], shape[ta] = xs[ba], xs[ta]
    n.add_const(np.broadcast_to(src.reshape(shape), xs).astype(np.int64))
    return lambda x, _l, idx: torch.gather(x, ta, idx)
