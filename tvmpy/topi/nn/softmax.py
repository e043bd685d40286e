"""Softmax and log-softmax along one axis, numerically stable (the row maximum is subtracted
before ``exp``). Stages: ``T_softmax_maxelem`` -> ``T_softmax_exp`` -> ``T_softmax_expsum``
-> ``T_softmax_norm``; the x86 schedule fuses them per row."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import max as te_max
from ...te import sum as te_sum
from ...tir.op import exp, log

__all__ = ["softmax", "log_softmax"]


def _axis(x: Tensor, axis: int, op: str) -> int:
    nd = len(x.shape)
    if nd == 0:
        raise ValueError(f"{op}: input must have at least one dimension")
    if not isinstance(axis, int) or not -nd <= axis < nd:
        raise ValueError(f"{op}: axis {axis!r} is out of range for a {nd}-D input")
    return axis % nd


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
        e = compute(x.shape, lambda *i: exp(x[i] - maxelem[(*i[:axis], *i[axis + 1:])]),
                    name="T_softmax_exp", tag="softmax_exp")
        expsum = compute(red_shape, lambda *i: te_sum(e[full(i, k2)], axis=k2),
                         name="T_softmax_expsum", tag="softmax_expsum")
        return e, maxelem, expsum
    expsum = compute(red_shape, lambda *i: te_sum(exp(x[full(i, k2)] - maxelem[i]), axis=k2),
                     name="T_softmax_expsum", tag="softmax_expsum")
    return None, maxelem, expsum


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis`` (tag "softmax_output")."""
    ax = _axis(x, axis, "softmax")
    e, _, expsum = _reduce_stages(x, ax, True)
    return compute(x.shape, lambda *i: e[i] / expsum[(*i[:ax], *i[ax + 1:])],
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
