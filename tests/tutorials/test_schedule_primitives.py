"""The steps of TVM's tutorial "Schedule Primitives in TVM" on tvmpy: split (by factor and by
nparts), tile, fuse, reorder, bind (as GPU code), compute_at, compute_inline and compute_root.
Each step checks the loop nest tvm.lower produces (on sizes the factors divide, where the nest is
one perfect nest) and runs the schedule on awkward sizes against numpy."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

RNG = np.random.default_rng(2609)


def _opencl():
    """PoCL's OpenCL device: installed wherever the suite runs (README), so its absence fails."""
    dev = tvm.cl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return dev


def _loops(func):
    """(loop var name, extent) of every loop of a lowered function, outermost first."""
    out = []
    # pre-order: a loop before the loops inside it, siblings in program order
    tvm.tir.stmt_functor.ir_transform(
        func.body, lambda s: out.append((s.loop_var.name, str(s.extent))), None, ["tir.For"])
    return out


def _stores(func):
    """The names of the buffers written, in program order."""
    out = []
    tvm.tir.stmt_functor.post_order_visit(
        func.body, lambda s: out.append(s.buffer.name) if isinstance(s, tvm.tir.BufferStore) else None)
    return out


def _run(s, args, ref, shape, target="llvm", dev=None):
    """Build, run on random inputs of ``shape`` (all placeholders share it), compare every
    output with ``ref(*inputs)``."""
    f = tvm.build(s, args, target)
    dev = dev or tvm.cpu(0)
    n_in = sum(1 for t in args if isinstance(t.op, te.PlaceholderOp))
    ins = [RNG.uniform(-2, 2, size=shape).astype("float32") for _ in range(n_in)]
    outs = [tvm.nd.array(np.full(shape, np.nan, "float32"), dev) for _ in args[n_in:]]
    f(*[tvm.nd.array(x, dev) for x in ins], *outs)
    want = ref(*ins)
    for got, exp in zip(outs, want if isinstance(want, tuple) else (want,)):
        tvm.testing.assert_allclose(got.numpy(), exp, rtol=1e-6)


def _scale(m=None):
    m = te.var("m") if m is None else m
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] * 2, name="B")
    return A, B


def test_split_by_factor():
    A, B = _scale(64)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    assert (xo.var.name, xi.var.name) == ("i.outer", "i.inner")
    assert _loops(tvm.lower(s, [A, B], simple_mode=True)) == [("i.outer", "2"), ("i.inner", "32")]
    A, B = _scale()
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=32)
    for m in ((100,), (1,), (32,)):
        _run(s, [A, B], lambda a: a * 2, m)


def test_split_by_nparts():
    A, B = _scale(96)
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], nparts=32)
    assert _loops(tvm.lower(s, [A, B], simple_mode=True)) == [("i.outer", "32"), ("i.inner", "3")]
    A, B = _scale()
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], nparts=32)
    for m in ((101,), (5,)):  # fewer elements than parts too
        _run(s, [A, B], lambda a: a * 2, m)


def _copy2d(m, n):
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j], name="B")
    return A, B


def test_tile():
    A, B = _copy2d(40, 15)
    s = te.create_schedule(B.op)
    s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    assert _loops(tvm.lower(s, [A, B], simple_mode=True)) == [
        ("i.outer", "4"), ("j.outer", "3"), ("i.inner", "10"), ("j.inner", "5")]
    A, B = _copy2d(te.var("m"), te.var("n"))
    s = te.create_schedule(B.op)
    s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    _run(s, [A, B], lambda a: a, (23, 7))


def test_fuse():
    A, B = _copy2d(40, 15)
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    fused = s[B].fuse(xi, yi)
    assert fused.var.name == "i.inner.j.inner.fused"
    assert _loops(tvm.lower(s, [A, B], simple_mode=True)) == [
        ("i.outer", "4"), ("j.outer", "3"), ("i.inner.j.inner.fused", "50")]
    A, B = _copy2d(te.var("m"), te.var("n"))
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].fuse(xi, yi)
    _run(s, [A, B], lambda a: a, (23, 7))


def test_reorder():
    A, B = _copy2d(40, 15)
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].reorder(xi, yo, xo, yi)
    assert _loops(tvm.lower(s, [A, B], simple_mode=True)) == [
        ("i.inner", "10"), ("j.outer", "3"), ("i.outer", "4"), ("j.inner", "5")]
    A, B = _copy2d(te.var("m"), te.var("n"))
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].reorder(xi, yo, xo, yi)
    _run(s, [A, B], lambda a: a, (23, 7))


def _bound_scale():
    A, B = _scale()
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B]


def test_bind_cuda_source():
    s, args = _bound_scale()
    f = tvm.build(s, args, "cuda")
    src = f.imported_modules[0].get_source()
    assert "__launch_bounds__(64)" in src and "blockIdx.x" in src and "threadIdx.x" in src
    assert "for (" not in src  # both loops became the grid
    assert ".entry" in f.imported_modules[0].get_source("ptx")


def test_bind_runs_on_opencl():
    s, args = _bound_scale()
    for m in ((200,), (1,)):
        _run(s, args, lambda a: a * 2, m, target="opencl", dev=_opencl())


def _chain():
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    return A, B, C


def test_compute_at_and_compute_root():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    root = tvm.lower(s, [A, B, C], simple_mode=True)
    assert _loops(root) == [("i", "m"), ("i", "m")] and _stores(root) == ["B", "C"]
    s[B].compute_at(s[C], C.op.axis[0])
    at = tvm.lower(s, [A, B, C], simple_mode=True)
    assert _loops(at) == [("i", "m")] and _stores(at) == ["B", "C"]  # one loop writes both
    _run(s, [A, B, C], lambda a: (a + 1, (a + 1) * 2), (37,))
    s[B].compute_root()
    assert _loops(tvm.lower(s, [A, B, C], simple_mode=True)) == [("i", "m"), ("i", "m")]
    _run(s, [A, B, C], lambda a: (a + 1, (a + 1) * 2), (37,))


def test_compute_inline_without_the_inlined_argument():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    f = tvm.lower(s, [A, C], simple_mode=True)
    assert _loops(f) == [("i", "m")] and _stores(f) == ["C"]
    _run(s, [A, C], lambda a: (a + 1) * 2, (37,))


def test_compute_inline_as_in_tvm():
    A, B, C = _chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    f = tvm.lower(s, [A, B, C], simple_mode=True)  # TVM keeps B as an unused argument
    assert _loops(f) == [("i", "m")] and _stores(f) == ["C"]
