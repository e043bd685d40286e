"""Run-time bounds checks of gather/scatter indices (ONNX's rule, as onnxruntime applies it).

``check_indices(indices, data, axes, what)`` is one ``te.extern`` kernel: a serial pass over the
indices that compares each with the size ``n`` of the data axis it indexes and fails the call
(an ``AssertStmt``: the kernel returns -1 with the message in ``__tvmpy_last_error``, which the
executors raise naming the graph node) at the first one outside ``[-n, n)``; its output is the
indices with the negative ones counted from the end. The gather or scatter that reads it then
never sees an index out of range. One compare per index, in native code; the data is an input
only for its shape (a size known at run time, a ``relay.Any``, is read from the array).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..tir import expr as E
from ..tir import ir_builder
from ..tir import stmt as S
from ..tir.expr import IntImm, PrimExpr, const

__all__ = ["check_indices", "index_error_message"]


def index_error_message(what: str, axis: int, size: Any) -> str:
    """The error of an index out of range for ``axis`` (of ``size``, an int when known)."""
    where = f"{what}: " if what else ""
    if isinstance(size, int):
        return (f"{where}index out of range: an index of axis {axis} (size {size}) must lie in "
                f"[{-size}, {size - 1}]")
    return (f"{where}index out of range: an index of axis {axis} must lie in [-n, n-1], n the "
            "size of that axis")


def _static(d: PrimExpr) -> int | None:
    return int(d.value) if isinstance(d, IntImm) else None


def check_indices(indices: te.Tensor, data: te.Tensor, axes: Sequence[int],
                  what: str = "") -> te.Tensor:
    """``indices`` checked against ``data.shape[axes[...]]`` and wrapped (see the module doc).

    One axis: every index is checked against that axis. Several: the last axis of ``indices``
    has ``len(axes)`` entries, entry ``k`` indexes ``data`` axis ``axes[k]`` (GatherND/ScatterND).
    """
    axes = [int(a) for a in axes]
    m = len(axes)
    if m == 0:
        raise ValueError("topi.check_indices: axes must not be empty")
    for a in axes:
        if not 0 <= a < len(data.shape):
            raise ValueError(f"topi.check_indices: axis {a} out of range for data of rank "
                             f"{len(data.shape)}")
    if m > 1 and _static(indices.shape[-1]) != m:
        raise ValueError(f"topi.check_indices: the last axis of the indices has "
                         f"{indices.shape[-1]} entries for {m} data axes")
    dt = indices.dtype
    if not dt.startswith("int"):
        raise TypeError(f"topi.check_indices: indices must be signed integers, got {dt}")

    def body(ins: list, outs: list) -> S.Stmt:
        ib = ir_builder.create()
        src, dst = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        total: PrimExpr = const(1, "int64")
        for d in ins[0].shape:
            total = total * E.Cast("int64", d) if d.dtype != "int64" else total * d
        with ib.for_range(0, total // m if m > 1 else total, name="i", dtype="int64") as i:
            for k, a in enumerate(axes):
                size = ins[1].shape[a]
                n = size if size.dtype == dt else E.Cast(dt, size)
                pos = i * m + k if m > 1 else i
                v = ib.let(f"v{k}", src[pos])
                ok = E.And(v >= -n, v < n)
                msg = index_error_message(what, a, _static(size))
                ib.emit(S.AssertStmt(ok, E.StringImm(msg), S.Evaluate(0)))
                dst[pos] = E.Select(v < const(0, dt), v + n, v)
        return ib.get()

    return te.extern(indices.shape, [indices, data], body, name="check_indices", dtype=dt,
                     tag="check_indices")
