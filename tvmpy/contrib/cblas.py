"""External BLAS matrix products as tensor-expression stages (TVM's ``tvm.contrib.cblas``).

``matmul(A, B, transa=False, transb=False)`` and ``batch_matmul(A, B, transa, transb,
iterative=False)`` are ``te.extern`` stages whose body is one ``tir.call_packed`` of
``tvm.contrib.cblas.matmul`` / ``batch_matmul``: C functions of the runtime (runtime/blas.py,
a shim over the process's CBLAS) called directly from the generated code. The stage's output
is a tensor like any other (``te.compute`` stages may read it, e.g. a bias add).
"""

from __future__ import annotations

from typing import Any

from .. import te
from ..runtime.packed_func import get_global_func
from ..tir import expr as E
from ..tir import op as tir_op
from ..tir.packed import call_packed

__all__ = ["matmul", "batch_matmul"]


def _check(fn: str, lhs: Any, rhs: Any, ndim: int) -> None:
    for name, t in (("lhs", lhs), ("rhs", rhs)):
        if not isinstance(t, te.Tensor):
            raise TypeError(f"cblas.{fn}: {name} must be a te.Tensor, got {type(t).__name__}")
        if len(t.shape) != ndim:
            raise ValueError(f"cblas.{fn}: {name} must have {ndim} dimensions, got shape "
                             f"{tuple(t.shape)}")
        if t.dtype not in ("float32", "float64"):
            raise TypeError(f"cblas.{fn}: BLAS computes float32 or float64, {name} is {t.dtype}")
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"cblas.{fn}: lhs is {lhs.dtype} but rhs is {rhs.dtype}")
    # the C function must exist where the stage is built (a clear error now, not at run time)
    get_global_func(f"tvm.contrib.cblas.{fn}")


def _check_k(fn: str, k1: Any, k2: Any) -> None:
    a, b = E.const_value(k1), E.const_value(k2)
    if a is not None and b is not None and a != b:
        raise ValueError(f"cblas.{fn}: the reduction extents differ ({a} vs {b}); check "
                         "transa/transb")


def matmul(lhs: te.Tensor, rhs: te.Tensor, transa: bool = False, transb: bool = False,
           **kwargs: Any) -> te.Tensor:
    """``lhs @ rhs`` (each transposed first when ``transa`` / ``transb``), by BLAS gemm."""
    _check("matmul", lhs, rhs, 2)
    n, k1 = (lhs.shape[1], lhs.shape[0]) if transa else (lhs.shape[0], lhs.shape[1])
    k2, m = (rhs.shape[1], rhs.shape[0]) if transb else (rhs.shape[0], rhs.shape[1])
    _check_k("matmul", k1, k2)
    out = te.extern((n, m), [lhs, rhs],
                    lambda ins, outs: call_packed("tvm.contrib.cblas.matmul", ins[0], ins[1],
                                                  outs[0], bool(transa), bool(transb)),
                    name="C", **kwargs)
    assert isinstance(out, te.Tensor)
    return out


def batch_matmul(lhs: te.Tensor, rhs: te.Tensor, transa: bool = False, transb: bool = False,
                 iterative: bool = False, **kwargs: Any) -> te.Tensor:
    """Batched ``lhs @ rhs`` (3-D; a batch of 1 on either side broadcasts)."""
    _check("batch_matmul", lhs, rhs, 3)
    ba, bb = E.const_value(lhs.shape[0]), E.const_value(rhs.shape[0])
    if ba is not None and bb is not None:
        if ba != bb and 1 not in (ba, bb):
            raise ValueError(f"cblas.batch_matmul: batch sizes {ba} and {bb} do not broadcast")
        batch: Any = max(ba, bb)
    else:
        batch = tir_op.max(lhs.shape[0], rhs.shape[0])
    n, k1 = (lhs.shape[2], lhs.shape[1]) if transa else (lhs.shape[1], lhs.shape[2])
    k2, m = (rhs.shape[2], rhs.shape[1]) if transb else (rhs.shape[1], rhs.shape[2])
    _check_k("batch_matmul", k1, k2)
    name = "tvm.contrib.cblas.batch_matmul" + ("_iterative" if iterative else "")
    out = te.extern((batch, n, m), [lhs, rhs],
                    lambda ins, outs: call_packed(name, ins[0], ins[1], outs[0], bool(transa),
                                                  bool(transb)),
                    name="C", **kwargs)
    assert isinstance(out, te.Tensor)
    return out
