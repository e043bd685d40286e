"""Hand-written parallel-loop kernels for test_parallel_pool.py (also imported by the fresh
Python processes some of those tests run)."""

from __future__ import annotations

from tvmpy.tir import expr as E
from tvmpy.tir import op
from tvmpy.tir import stmt as S
from tvmpy.tir.function import PrimFunc

from .cases import buf, func

__all__ = ["affine", "tids", "bump"]


def affine(name: str = "affine") -> PrimFunc:
    """B[i] = 2 * A[i] + i over a symbolic extent n (a parallel loop)."""
    n = E.Var("n")
    A, B = buf("A", n), buf("B", n)
    i = E.Var("i")
    return func(name, [A, B], S.For(i, 0, n, S.ForKind.PARALLEL, S.BufferStore(
        B, A[i] * 2.0 + E.cast(i, "float32"), [i])))


def tids(n: int = 256, usleep: int = 200) -> PrimFunc:
    """T[i] = the id (gettid) of the thread that ran iteration i; each iteration first sleeps
    ``usleep`` microseconds so that every thread of the team gets chunks."""
    T = buf("T", n, "int32")
    i = E.Var("i")
    return func("tids", [T], S.For(i, 0, n, S.ForKind.PARALLEL, S.seq(
        S.Evaluate(op.call_extern("int32", "usleep", usleep)),
        S.BufferStore(T, op.call_extern("int32", "gettid"), [i]))))


def bump(name: str = "bump") -> PrimFunc:
    """A[i] += 1 + (i % 7 == 0 ? a 20 us sleep : 0) over a symbolic extent n: an iteration run
    twice (or never) leaves its element off by one; the sleeps make the threads' chunks race."""
    n = E.Var("n")
    A = buf("A", n, "int32")
    i = E.Var("i")
    return func(name, [A], S.For(i, 0, n, S.ForKind.PARALLEL, S.seq(
        S.IfThenElse(E.EQ(E.FloorMod(i, 7), 0),
                     S.Evaluate(op.call_extern("int32", "usleep", 20)), None),
        S.BufferStore(A, A[i] + 1, [i]))))
