"""The steps of TVM's tutorial "Compute and Reduce with Tuple Inputs" on tvmpy: one compute
producing several outputs of the same shape, an argmax written as a commutative reducer over
(index, value) tuples, and scheduling an operation with several outputs (compute_at of one
output moves the whole operation). Checked against numpy."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

RNG = np.random.default_rng(2611)


def _stores(func):
    out = []
    tvm.tir.stmt_functor.post_order_visit(
        func.body, lambda s: out.append(s.buffer.name) if isinstance(s, tvm.tir.BufferStore) else None)
    return out


def _loop_count(func):
    out = []
    tvm.tir.stmt_functor.post_order_visit(
        func.body, lambda s: out.append(s) if isinstance(s, tvm.tir.For) else None)
    return len(out)


def test_multiple_outputs_of_one_compute():
    m, n = te.var("m"), te.var("n")
    A0 = te.placeholder((m, n), name="A0")
    A1 = te.placeholder((m, n), name="A1")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A1[i, j] * 3), name="B")
    assert B0.op.same_as(B1.op) and (B0.value_index, B1.value_index) == (0, 1)
    s = te.create_schedule(B0.op)
    f = tvm.lower(s, [A0, A1, B0, B1], simple_mode=True)
    assert _loop_count(f) == 2  # one loop nest writes both outputs
    assert _stores(f) == ["B.v0", "B.v1"]  # TVM's names of the outputs of operation B
    mod = tvm.build(s, [A0, A1, B0, B1], "llvm")
    for shape in ((5, 7), (1, 13)):
        a0, a1 = (RNG.uniform(-1, 1, shape).astype("float32") for _ in range(2))
        b0, b1 = (tvm.nd.array(np.full(shape, np.nan, "float32")) for _ in range(2))
        mod(tvm.nd.array(a0), tvm.nd.array(a1), b0, b1)
        tvm.testing.assert_allclose(b0.numpy(), a0 + 2, rtol=1e-6)
        tvm.testing.assert_allclose(b1.numpy(), a1 * 3, rtol=1e-6)


def _argmax_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tvm.tir.Select(keep, x[0], y[0]), tvm.tir.Select(keep, x[1], y[1])

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def test_argmax_over_tuples():
    argmax = _argmax_reducer()
    m, n = te.var("m"), te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="int32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    f = tvm.build(s, [idx, val, T0, T1], "llvm")
    for rows, cols in ((6, 11), (1, 1), (3, 40)):
        v = RNG.integers(-50, 50, (rows, cols)).astype("int32")  # with ties: the first wins
        ix = np.broadcast_to(np.arange(cols, dtype="int32"), (rows, cols)).copy()
        t0, t1 = tvm.nd.array(np.full(rows, -7, "int32")), tvm.nd.array(np.full(rows, -7, "int32"))
        f(tvm.nd.array(ix), tvm.nd.array(v), t0, t1)
        np.testing.assert_array_equal(t0.numpy(), np.argmax(v, axis=1))
        np.testing.assert_array_equal(t1.numpy(), np.max(v, axis=1))
    # an empty row gives the identity: index -1, the smallest int32
    t0, t1 = tvm.nd.array(np.zeros(2, "int32")), tvm.nd.array(np.zeros(2, "int32"))
    f(tvm.nd.array(np.zeros((2, 0), "int32")), tvm.nd.array(np.zeros((2, 0), "int32")), t0, t1)
    np.testing.assert_array_equal(t0.numpy(), [-1, -1])
    np.testing.assert_array_equal(t1.numpy(), [np.iinfo("int32").min] * 2)


def test_schedule_operation_with_multiple_outputs():
    m, n = te.var("m"), te.var("n")
    A0 = te.placeholder((m, n), name="A0")
    B0, B1 = te.compute((m, n), lambda i, j: (A0[i, j] + 2, A0[i, j] * 3), name="B")
    A1 = te.placeholder((m, n), name="A1")
    C = te.compute((m, n), lambda i, j: A1[i, j] + B0[i, j], name="C")
    s = te.create_schedule(C.op)
    root = tvm.lower(s, [A0, A1, C], simple_mode=True)
    s[B0].compute_at(s[C], C.op.axis[0])
    at = tvm.lower(s, [A0, A1, C], simple_mode=True)
    # the B operation moved under C's row loop: 3 loops (i; B's j; C's j) instead of 4
    assert _loop_count(root) == 4 and _loop_count(at) == 3
    f = tvm.build(s, [A0, A1, C], "llvm")
    for shape in ((4, 9), (1, 1)):
        a0, a1 = (RNG.uniform(-1, 1, shape).astype("float32") for _ in range(2))
        c = tvm.nd.array(np.full(shape, np.nan, "float32"))
        f(tvm.nd.array(a0), tvm.nd.array(a1), c)
        tvm.testing.assert_allclose(c.numpy(), a1 + a0 + 2, rtol=1e-6)
