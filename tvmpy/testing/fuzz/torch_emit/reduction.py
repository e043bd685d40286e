"""Torch translations of the fuzzer's ONNX nodes: reductions: Reduce*, arg-reductions, TopK, CumSum, softmax family."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._common import (
    Fn,
    Node,
    _emit,
    _norm,
    _tdt,
)

# ---------------------------------------------------------------------------------------------
# reductions


def _reduce_dims(n: Node) -> list[int] | None:
    """The reduced axes (None: the node is an identity, noop_with_empty_axes)."""
    r = len(n.shape(0))
    axes = n.ints(1) if n.has(1) else n.attr("axes")
    if not axes:
        if int(n.attr("noop_with_empty_axes", 0)):
            return None
        return list(range(r))
    return sorted({_norm(int(a), r) for a in axes})


@_emit("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")
def _reduce(n: Node) -> Fn:
    dims = _reduce_dims(n)
    if dims is None:
        return lambda x, *_: x.clone()
    keep = bool(int(n.attr("keepdims", 1)))
    dt = _tdt(n.dtype(0))
    op = n.op
    if op == "ReduceProd":  # torch.prod takes one axis
        pdims, pkeep = (dims, keep) if dims else ([0], False)

        def prod(x: torch.Tensor, *_: Any) -> torch.Tensor:
            x = x if dims else torch.reshape(x, [1])
            for d in reversed(pdims):
                x = torch.prod(x, d, keepdim=pkeep, dtype=dt)
            return x
        return prod
    f = _REDUCE[op]
    if not dims:  # a rank-0 input: reduce it as one element (torch's dim=[] means all axes)
        return lambda x, *_: f(torch.reshape(x, [1]), [0], False, dt)
    return lambda x, *_: f(x, dims, keep, dt)


_REDUCE: dict[str, Callable[[torch.Tensor, list[int], bool, torch.dtype], torch.Tensor]] = {
    "ReduceSum": lambda x, d, k, dt: torch.sum(x, d, keepdim=k, dtype=dt),
    "ReduceMean": lambda x, d, k, dt: torch.mean(x, d, keepdim=k),
    "ReduceMax": lambda x, d, k, dt: torch.amax(x, d, keepdim=k),
    "ReduceMin": lambda x, d, k, dt: torch.amin(x, d, keepdim=k),
    "ReduceL1": lambda x, d, k, dt: torch.sum(torch.abs(x), d, keepdim=k),
    "ReduceL2": lambda x, d, k, dt: torch.linalg.vector_norm(x, 2, d, keepdim=k),
    "ReduceLogSumExp": lambda x, d, k, dt: torch.logsumexp(x, d, keepdim=k),
    "ReduceSumSquare": lambda x, d, k, dt: torch.sum(x * x, d, keepdim=k),
    "ReduceLogSum": lambda x, d, k, dt: torch.log(torch.sum(x, d, keepdim=k)),
}


@_emit("ArgMax", "ArgMin")
def _arg_reduce(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    keep = bool(int(n.attr("keepdims", 1)))
    f = torch.argmax if n.op == "ArgMax" else torch.argmin
    if int(n.attr("select_last_index", 0)):
        last = xs[axis] - 1
        return lambda x: last - f(torch.flip(x, [axis]), axis, keepdim=keep)
    return lambda x: f(x, axis, keepdim=keep)


@_emit("TopK")
def _topk(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    k = n.ints(1)[0]
    largest = bool(int(n.attr("largest", 1)))
    if not int(n.attr("sorted", 1)):
        raise n.refuse("sorted=0 (the order is unspecified)")
    if n.dtype(0).kind == "f":
        return lambda x, _k: tuple(torch.topk(x, k, axis, largest=largest, sorted=True))

    def fn(x: torch.Tensor, _k: Any) -> tuple[torch.Tensor, torch.Tensor]:
        # integers tie: ONNX takes the lower index first, as a stable sort does
        v, i = torch.sort(x, dim=axis, descending=largest, stable=True)
        return torch.narrow(v, axis, 0, k), torch.narrow(i, axis, 0, k)
    return fn


@_emit("CumSum")
def _cumsum(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(np.asarray(n.const(1)).reshape(-1)[0]), len(xs))
    exclusive, reverse = int(n.attr("exclusive", 0)), int(n.attr("reverse", 0))
    dt = _tdt(n.dtype(0))
    d = xs[axis]

    def fn(x: torch.Tensor, _a: Any) -> torch.Tensor:
        if reverse:
            x = torch.flip(x, [axis])
        y = torch.cumsum(x, axis, dtype=dt)
        if exclusive and d:
            y = torch.cat([torch.zeros_like(torch.narrow(y, axis, 0, 1)),
                           torch.narrow(y, axis, 0, d - 1)], axis)
        if reverse:
            y = torch.flip(y, [axis])
        return y
    return fn


@_emit("Softmax", "LogSoftmax", "Hardmax")
def _softmax(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    if n.op == "Softmax":
        return lambda x: F.softmax(x, axis)
    if n.op == "LogSoftmax":
        return lambda x: F.log_softmax(x, axis)
    where = [xs[axis] if k == axis else 1 for k in range(len(xs))]

    def hardmax(x: torch.Tensor) -> torch.Tensor:
        hot = torch.argmax(x, axis, keepdim=True) == torch.arange(xs[axis]).reshape(where)
        return hot.to(x.dtype)
    return hardmax
