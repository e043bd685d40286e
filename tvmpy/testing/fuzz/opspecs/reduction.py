"""Fuzzer operator specs: reductions: Reduce*, arg-reductions, TopK, CumSum, softmax family."""

from __future__ import annotations

import numpy as np

from ._common import (
    F32,
    FLOAT,
    NUM,
    Builder,
    Plan,
    _axes,
    _axis,
    _domain_operand,
    _gaps,
    _i64,
    _positive,
    spec,
)

_REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"]


@spec(*_REDUCE)
def reduce(b: Builder, op: str) -> Plan | None:
    dts = NUM if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd") else FLOAT
    if op == "ReduceLogSum":
        x = _domain_operand(b, F32, _positive, 0.2, 3.0)
    elif op == "ReduceProd":
        x = b.pick(dts, pred=lambda v: v.size <= 256 and (v.dtype.kind != "f" or
                                                           float(np.abs(v).max()) < 3))
    else:
        x = b.pick(dts, min_rank=1)
    if x is None:
        return None
    r = len(b.shape(x))
    ins = [x]
    if r and b.chance(0.85):
        ins.append(b.const(_i64(_axes(b, r))))
    attrs = {"keepdims": int(b.chance(0.5))}
    if op == "ReduceProd" and b.dtype(x).kind in "iu":
        return None if np.abs(b.val(x)).max(initial=0) > 3 or b.val(x).size > 16 else \
            Plan(op, ins, attrs)
    return Plan(op, ins, attrs)


@spec("ArgMax", "ArgMin")
def arg_reduce(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    r = len(b.shape(x))
    axis = _axis(b, r)
    last = int(b.chance(0.3))
    v = b.val(x)

    def chk(i, o):
        data = np.asarray(i[0]) if op == "ArgMax" else -np.asarray(i[0])
        if data.dtype.kind != "f":  # ints: ties are exact (select_last_index decides)
            return True
        return _gaps(data, axis, k=1)
    del v
    return Plan(op, [x], {"axis": axis, "keepdims": int(b.chance(0.5)),
                          "select_last_index": last}, check=chk)


@spec("TopK")
def topk(b: Builder, op: str) -> Plan | None:
    x = b.pick(("float32", "int64", "int32"), min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    k = int(b.rng.integers(1, shape[axis] + 1)) if shape[axis] else 0
    largest = int(b.chance(0.7))

    def chk(i, o):
        data = np.asarray(i[0])
        if data.dtype.kind != "f":
            # integer ties: the order of equal values is defined (lower index first)
            return True
        return _gaps(data if largest else -data, axis, k)
    return Plan(op, [x, b.const(_i64([k]))], {"axis": axis, "largest": largest, "sorted": 1},
                n_out=2, check=chk)


@spec("CumSum")
def cumsum(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    axis = _axis(b, len(b.shape(x)))
    return Plan(op, [x, b.const(np.asarray(axis, b.choose(("int64", "int32"))))],
                {"exclusive": int(b.chance(0.3)), "reverse": int(b.chance(0.3))})


@spec("Softmax", "LogSoftmax", "Hardmax")
def softmax(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT if op == "Softmax" else F32, min_rank=1)
    if x is None:
        return None
    axis = _axis(b, len(b.shape(x)))
    chk = (lambda i, o: _gaps(np.asarray(i[0]), axis, k=1)) if op == "Hardmax" else None
    return Plan(op, [x], {"axis": axis}, check=chk)
