"""A cross-thread reduction over a producer computed into shared memory at the block
(``B = 2A`` ``compute_at`` the reduction's row axis, the reduction axis split by the group size
and its inner part on threadIdx.x, the group not dividing the row: masked lanes).

B is written by thread 0 and read by every thread, so a barrier must sit between. For a tuple
combiner (topi argmax/argmin) LowerThreadAllreduce binds each thread's combine step in
``LetStmt``s whose values read B; ThreadSync used to look only at a LetStmt's body, so the
barrier was missing and threads other than 0 read B before it was written (found by the GPU
schedule fuzz test: the interpreter runs the threads in reverse order to expose such races).
Checked against numpy in the interpreter (both thread orders, CUDA and OpenCL lowering) and as
real code: OpenCL on PoCL and the CUDA source compiled by NVRTC, run host-emulated."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.driver import lower_gpu
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels
from tvmpy.tir import interpreter
from tvmpy.tir.interpreter_gpu import thread_order

RNG = np.random.default_rng(26)
ROWS = 3

REFS = {"argmax": lambda b: np.argmax(b, axis=1).astype("int32"),
        "argmin": lambda b: np.argmin(b, axis=1).astype("int32"),
        "sum": lambda b: b.sum(axis=1, dtype="float32")}


def schedule(fn: str, m: int, group: int):
    """``fn`` over the rows of ``B = 2A`` (A: ROWS x m), B computed at the reduction's block."""
    A = te.placeholder((ROWS, m), name="A")
    B = te.compute((ROWS, m), lambda i, j: A[i, j] * 2.0, name="B")
    if fn == "sum":
        k = te.reduce_axis((0, m), name="k")
        out = te.compute((ROWS,), lambda i: te.sum(B[i, k], axis=k), name="R")
        red = out
    else:
        out = getattr(topi, fn)(B, axis=1)
        red = out.op.input_tensors[0]
    s = te.create_schedule(out.op)
    s[red].bind(red.op.axis[0], te.thread_axis("blockIdx.x"))
    _, ki = s[red].split(red.op.reduce_axis[0], factor=group)
    s[red].bind(ki, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[red], red.op.axis[0])
    if out is not red:
        s[out].bind(out.op.axis[0], te.thread_axis("blockIdx.x"))
    return s, [A, out]


def inputs(m: int) -> list[np.ndarray]:
    ties = RNG.integers(-2, 2, (ROWS, m)).astype("float32")  # equal values: the first index wins
    extreme = ties.copy()  # rows of the argmax / argmin identity's value (masked lanes hold it)
    extreme[0], extreme[1] = -np.inf, np.inf
    return [RNG.uniform(-1, 1, (ROWS, m)).astype("float32"), ties, extreme]


def check(fn: str, out: np.ndarray, a: np.ndarray) -> None:
    want = REFS[fn](a * 2)
    if fn == "sum":
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(out, want)


def empty(fn: str) -> np.ndarray:
    return np.full(ROWS, np.nan, "float32") if fn == "sum" else np.full(ROWS, -7, "int32")


CASES = [(fn, m, g) for fn in ("argmax", "argmin", "sum")
         for m, g in ((3, 2), (7, 3), (1, 2), (11, 5), (37, 32))]


@pytest.mark.parametrize("target", ["cuda", "opencl"])
@pytest.mark.parametrize("fn,m,group", CASES)
def test_interpreted_in_both_thread_orders(fn, m, group, target):
    s, args = schedule(fn, m, group)
    mod = lower_gpu([tvm.lower(s, args, target=target)], target)
    run = interpreter.build(mod)["default_function"]
    for a in inputs(m):
        for order in ("forward", "reverse"):
            out = empty(fn)
            with thread_order(order):
                run(a, out)
            check(fn, out, a)


@pytest.mark.parametrize("fn,m,group", [("argmax", 7, 3), ("argmin", 37, 32), ("sum", 11, 5)])
def test_opencl_on_pocl(fn, m, group):
    s, args = schedule(fn, m, group)
    f = tvm.build(s, args, target="opencl")
    dev = tvm.opencl(0)
    for a in inputs(m):
        o = tvm.nd.array(empty(fn), dev)
        f(tvm.nd.array(a, dev), o)
        check(fn, o.numpy(), a)


@pytest.mark.parametrize("fn,m,group", [("argmax", 3, 2), ("argmin", 11, 5), ("sum", 37, 32)])
def test_cuda_source_host_emulated(fn, m, group, tmp_path):
    s, args = schedule(fn, m, group)
    f = tvm.build(s, args, target="cuda")
    dm = f.imported_modules[0]
    src = dm.get_source()
    assert "__syncthreads()" in src  # B (shared) is written by thread 0, read by all
    assert "bar.sync" in dm.get_source("ptx")  # NVRTC compiles it, the barrier kept
    host = HostKernels(src, f.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        for a in inputs(m):
            out = empty(fn)
            f(a, out)
            check(fn, out, a)
    finally:
        cuda_module.set_driver(prev)



def _thread_sync_heads(make_rest):
    """A kernel whose every thread writes ``sh[tx]``, then runs ``make_rest(sh, out, tx)``;
    the first line of each top-level statement after ThreadSync."""
    from tvmpy.tir import expr as E
    from tvmpy.tir import stmt as S
    from tvmpy.tir.transform import thread_sync_func

    sh = tvm.tir.decl_buffer((8,), "float32", name="sh", scope="shared")
    out = tvm.tir.decl_buffer((8,), "float32", name="out")
    tx = te.thread_axis("threadIdx.x")
    body = S.seq(S.BufferStore(sh, E.const(1.0, "float32"), [tx.var]), make_rest(sh, out, tx))
    f = tvm.tir.PrimFunc([out.data], S.AttrStmt(tx, "thread_extent", 8, S.Allocate(sh, body)),
                         {out.data: out})
    seq = thread_sync_func(f).body.body.body
    return [str(s).strip().splitlines()[0] for s in seq.seq]


def test_thread_sync_sees_a_let_value_reading_shared_memory():
    from tvmpy.tir import expr as E
    from tvmpy.tir import stmt as S

    x = E.Var("x", "float32")
    # the value reads what another thread wrote: a barrier before the LetStmt
    heads = _thread_sync_heads(lambda sh, out, tx: S.LetStmt(
        x, E.BufferLoad(sh, [7 - tx.var]), S.BufferStore(out, x, [tx.var])))
    assert len(heads) == 3 and "tvm_storage_sync" in heads[1] and heads[2].startswith("x")
    # a tree step of the shared-memory allreduce with a tuple combiner (OpenCL): the let reads
    # sh[t] and sh[t + 4], its body writes sh[t], under a thread-dependent branch. One step as
    # ``sh[t] = sh[t] + sh[t + 4]`` is: the barrier goes before the branch, none inside.
    heads = _thread_sync_heads(lambda sh, out, tx: S.IfThenElse(tx.var < 4, S.LetStmt(
        x, E.BufferLoad(sh, [tx.var]) + E.BufferLoad(sh, [tx.var + 4]),
        S.BufferStore(sh, x, [tx.var]))))
    assert len(heads) == 3 and "tvm_storage_sync" in heads[1] and heads[2].startswith("if")
