"""Softmax and log-softmax along one axis, numerically stable (the row maximum is subtracted
before ``exp``). Stages: ``T_softmax_maxelem`` -> ``T_softmax_exp`` -> ``T_softmax_expsum``
-> ``T_softmax_norm``; the x86 schedule fuses them per row."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...te import Tensor, compute, reduce_axis
from ...te import max as te_max
from ...te import sum as te_sum
from ...tir.expr import Select, const
from ...tir.op import exp, log
from ...tir.op import max as tir_max

__all__ = ["softmax", "softmax_by_reciprocal", "log_softmax", "log_softmax_by_row"]


def _axis(x: Tensor, axis: int, op: str) -> int:
    nd = len(x.shape)
    if nd == 0:
        raise ValueError(f"{op}: input must have at least one dimension")
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise ValueError(f"{op}: axis {axis!r} is out of range for a {nd}-D input")
    return axis % nd


def _exp_nonpositive(d: Any) -> Any:
    """``exp(d)`` for ``d = x - max <= 0``, with the results near or below the smallest normal
    number (``d < ceil(log(tiny))``, -87 in float32: masked scores, -1e4 or the dtype's
    lowest) flushed to 0 and ``exp`` evaluated on ``max(d, -87)``: vector ``exp`` (glibc's libmvec) takes a scalar path
    for every lane outside its range, 18 ns per element at -1e4 against 0.3 in range (x86,
    one thread), which made a masked softmax 3.5x slower than an unmasked one. The values
    changed are below 1.7e-38 (float32) in absolute terms."""
    if d.dtype not in ("float32", "float64"):
        return exp(d)
    # ceil: log(tiny) rounded to float32 (-87.33655) is already past libmvec's fast range
    low = const(float(np.ceil(np.log(np.finfo(d.dtype).tiny))), d.dtype)
    return Select(d < low, const(0, d.dtype), exp(tir_max(d, low)))


def _reduce_stages(x: Tensor, axis: int, shift: bool) -> tuple[Any, Tensor, Tensor]:
    """(reduced-index helper, max over ``axis``, sum of exp(x - max) over ``axis``)."""
    k = reduce_axis((0, x.shape[axis]), name="k")
    red_shape = tuple(s for i, s in enumerate(x.shape) if i != axis)

    def full(idx: Any, v: Any) -> tuple:
        return (*idx[:axis], v, *idx[axis:])

    maxelem = compute(red_shape, lambda *i: te_max(x[full(i, k)], axis=k),
                      name="T_softmax_maxelem", tag="softmax_maxelem")
    k2 = reduce_axis((0, x.shape[axis]), name="k")
    if shift:
        e = compute(x.shape,
                    lambda *i: _exp_nonpositive(x[i] - maxelem[(*i[:axis], *i[axis + 1:])]),
                    name="T_softmax_exp", tag="softmax_exp")
        expsum = compute(red_shape, lambda *i: te_sum(e[full(i, k2)], axis=k2),
                         name="T_softmax_expsum", tag="softmax_expsum")
        return e, maxelem, expsum
    expsum = compute(red_shape, lambda *i: te_sum(_exp_nonpositive(x[full(i, k2)] - maxelem[i]),
                                                  axis=k2),
                     name="T_softmax_expsum", tag="softmax_expsum")
    return None, maxelem, expsum


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (tag "softmax_output")."""
    ax = _axis(x, axis, "softmax")
    e, _, expsum = _reduce_stages(x, ax, True)
    return compute(x.shape, lambda *i: e[i] / expsum[(*i[:ax], *i[ax + 1:])],
                   name="T_softmax_norm", tag="softmax_output", attrs={"axis": ax})


def softmax_by_reciprocal(x: Tensor, axis: int = -1) -> Tensor:
    """``softmax`` normalized by a multiply with the row's ``1 / sum`` (stage
    ``T_softmax_inv``, one division per row) rather than a division per element, as
    onnxruntime's CPU kernel does: a vector divide costs several multiplies (x86, 6 x 1500 x
    1500 at one thread: 1.40 -> 1.02 ns per element); results within an ulp or two."""
    ax = _axis(x, axis, "softmax")
    e, _, expsum = _reduce_stages(x, ax, True)
    inv = compute(expsum.shape, lambda *i: const(1, x.dtype) / expsum[i], name="T_softmax_inv",
                  tag="softmax_inv")
    return compute(x.shape, lambda *i: e[i] * inv[(*i[:ax], *i[ax + 1:])],
                   name="T_softmax_norm", tag="softmax_output", attrs={"axis": ax})


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis`` (tag "log_softmax_output")."""
    ax = _axis(x, axis, "log_softmax")
    _, maxelem, expsum = _reduce_stages(x, ax, False)

    def f(*i: Any) -> Any:
        r = (*i[:ax], *i[ax + 1:])
        return x[i] - maxelem[r] - log(expsum[r])

    return compute(x.shape, f, name="T_log_softmax", tag="log_softmax_output",
                   attrs={"axis": ax})


def log_softmax_by_row(x: Tensor, axis: int = -1) -> Tensor:
    """``log_softmax`` with ``max + log(sum)`` computed once per row (stage
    ``T_log_softmax_shift``) rather than inside the output's element loop, where ``log`` of
    the loop-invariant sum stayed a scalar libm call per vector (x86: 3.5 ns per element)."""
    ax = _axis(x, axis, "log_softmax")
    _, maxelem, expsum = _reduce_stages(x, ax, False)
    shift = compute(expsum.shape, lambda *i: maxelem[i] + log(expsum[i]),
                    name="T_log_softmax_shift", tag="softmax_shift")
    return compute(x.shape, lambda *i: x[i] - shift[(*i[:ax], *i[ax + 1:])],
                   name="T_log_softmax", tag="log_softmax_output", attrs={"axis": ax})
