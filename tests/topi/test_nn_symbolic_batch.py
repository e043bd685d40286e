"""The nn computes and x86 schedules with a symbolic batch size (``te.var``): one build, run
at two batch sizes, against the numpy references."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi import nn, testing


def _run(inputs, out, schedule, ref, shapes_for, batches=(1, 3)):
    f = tvm.build(schedule([out]), [*inputs, out], "llvm")
    rng = np.random.default_rng(0)
    for b in batches:
        arrays = [rng.uniform(-1, 1, s).astype("float32") for s in shapes_for(b)]
        expected = ref(*arrays)
        res = tvm.nd.array(np.full(expected.shape, np.nan, "float32"))
        f(*[tvm.nd.array(a) for a in arrays], res)
        np.testing.assert_allclose(res.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_symbolic_batch():
    n = te.var("n")
    A = te.placeholder((n, 3, 7, 9), name="A")
    W = te.placeholder((5, 3, 3, 3), name="W")
    _run([A, W], topi.relu(nn.conv2d_nchw(A, W, 2, 1, 1)), topi.x86.schedule_conv2d_nchw,
         lambda a, w: np.maximum(testing.conv2d_nchw_python(a, w, 2, 1, 1), 0),
         lambda b: [(b, 3, 7, 9), (5, 3, 3, 3)])
    Ab = te.placeholder((n, 2, 5, 6, 4), name="A")
    Wb = te.placeholder((2, 2, 3, 3, 4, 4), name="W")
    _run([Ab, Wb], nn.conv2d_NCHWc(Ab, Wb, 1, 1, 1), topi.x86.schedule_conv2d_NCHWc,
         lambda a, w: testing.conv2d_NCHWc_python(a, w, 1, 1),
         lambda b: [(b, 2, 5, 6, 4), (2, 2, 3, 3, 4, 4)])
    Wd = te.placeholder((3, 1, 3, 3), name="W")
    _run([A, Wd], nn.depthwise_conv2d_nchw(A, Wd, 1, 1), topi.x86.schedule_depthwise_conv2d_nchw,
         lambda a, w: testing.depthwise_conv2d_nchw_python(a, w, 1, 1),
         lambda b: [(b, 3, 7, 9), (3, 1, 3, 3)])
    _run([A], nn.pool2d(A, 3, 2, 1, 1, "avg", True, count_include_pad=False),
         topi.x86.schedule_pool,
         lambda a: testing.pool2d_python(a, 3, 2, 1, 1, "avg", True, False),
         lambda b: [(b, 3, 7, 9)])
    _run([A], nn.global_pool(A, "avg"), topi.x86.schedule_global_pool,
         lambda a: testing.global_pool_python(a, "avg"), lambda b: [(b, 3, 7, 9)])
    X = te.placeholder((n, 32), name="X")
    V = te.placeholder((6, 32), name="V")
    _run([X, V], nn.dense(X, V), topi.x86.schedule_dense, testing.dense_python,
         lambda b: [(b, 32), (6, 32)])
    _run([X, V], topi.x86.dense_pack(X, V), topi.x86.schedule_dense, testing.dense_python,
         lambda b: [(b, 32), (6, 32)])
    _run([X], nn.softmax(X), topi.x86.schedule_softmax, testing.softmax_python,
         lambda b: [(b, 32)])
    G = te.placeholder((32,), name="g")
    _run([X, G], nn.layer_norm(X, G, None, -1), topi.x86.schedule_layer_norm,
         lambda x, g: testing.layer_norm_python(x, g, None, -1), lambda b: [(b, 32), (32,)])
    P = te.placeholder((n, 5, 8), name="P")
    Q = te.placeholder((n, 7, 8), name="Q")
    _run([P, Q], nn.batch_matmul(P, Q), topi.x86.schedule_batch_matmul,
         testing.batch_matmul_python, lambda b: [(b, 5, 8), (b, 7, 8)])
    _run([P, Q], topi.x86.batch_matmul_pack(P, Q), topi.x86.schedule_batch_matmul,
         testing.batch_matmul_python, lambda b: [(b, 5, 8), (b, 7, 8)])


def test_softmax_over_a_symbolic_row():
    """x86 softmax with a symbolic row length (a relay.Any sequence): split by 16 with the
    guarded tail peeled; lengths around the vector width."""
    n = te.var("n")
    x = te.placeholder((2, 3, n), name="x")
    _run([x], topi.nn.softmax(x, axis=-1), topi.x86.schedule_softmax, testing.softmax_python,
         lambda b: [(2, 3, b)], batches=(1, 7, 16, 37))


def test_softmax_over_symbolic_rows_and_row_length():
    """Attention scores (1, heads, S, S) with a symbolic S (a size var, as relay.Any): four
    rows per parallel task with the last task's missing rows guarded; S not a multiple of 4
    or 16, and S = 1."""
    s = te.size_var("S")
    x = te.placeholder((1, 3, s, s), name="x")
    _run([x], topi.nn.softmax(x, axis=-1), topi.x86.schedule_softmax, testing.softmax_python,
         lambda b: [(1, 3, b, b)], batches=(1, 2, 5, 17, 38))


def test_batch_matmul_with_a_symbolic_n():
    """x86 matmul schedule with a symbolic column count (attention scores over a symbolic
    sequence): a guarded last register tile."""
    s = te.var("s")
    a = te.placeholder((4, s, 8), name="a")
    b = te.placeholder((4, 8, s), name="b")
    out = nn.batch_matmul(a, b, None, "float32", transpose_a=False, transpose_b=False)
    _run([a, b], out, topi.x86.schedule_batch_matmul, lambda x, y: x @ y,
         lambda n: [(4, n, 8), (4, 8, n)], batches=(1, 5, 17, 40))


def test_batch_matmul_pack_with_symbolic_m_and_n():
    """The packed batch_matmul over a symbolic sequence (both M and N): zero-padded panels of
    16, the product cropped."""
    from tvmpy.topi import x86

    s = te.var("s")
    a = te.placeholder((4, s, 8), name="a")
    b = te.placeholder((4, 8, s), name="b")
    out = x86.batch_matmul_pack(a, b, "float32", transpose_b=False)
    _run([a, b], out, topi.x86.schedule_batch_matmul, lambda x, y: x @ y,
         lambda n: [(4, n, 8), (4, 8, n)], batches=(1, 5, 17, 40))



def test_reduction_extents_that_only_run_time_can_compare():
    """A's reduction extent ``s`` against B's ``r``, two size variables nothing proves equal
    at compile time (in relay: ``max(any, seq)`` from a broadcast against another Any, T5's
    relative-position attention): the kernel asserts them equal before computing (it raised
    'reduction extents differ' at build time). Equal at run time the product is right,
    unequal the call fails naming the op; for batch_matmul (generic and x86-packed, whose K
    must be A's constant), matmul and dense."""
    import pytest

    from tvmpy.topi import x86

    s, r = te.var("s"), te.var("r")
    cases = [  # name, make, A's shape at K, B's shape at K, reference
        ("batch_matmul", lambda a, b: nn.batch_matmul(a, b, transpose_b=False),
         lambda k: (3, 5, k), lambda k: (3, k, 4), lambda x, y: x @ y, True),
        ("batch_matmul", lambda a, b: x86.batch_matmul_pack(a, b, "float32", 16, False),
         lambda k: (3, 5, 8), lambda k: (3, k, 4), lambda x, y: x @ y, False),
        ("matmul", nn.matmul, lambda k: (5, k), lambda k: (k, 4), lambda x, y: x @ y, True),
        ("dense", nn.dense, lambda k: (5, k), lambda k: (4, k), lambda x, y: x @ y.T, True),
    ]
    rng = np.random.default_rng(3)
    for name, make, sa, sb, ref, a_symbolic in cases:
        a = te.placeholder(sa(s) if a_symbolic else sa(8), name="a")
        b = te.placeholder(sb(r), name="b")
        out = make(a, b)
        f = tvm.build(te.create_schedule(out.op), [a, b, out], "llvm")
        for ka, kb in ((1, 1), (7, 7), (8, 8), (6, 5), (8, 3)):
            if not a_symbolic and ka != 8:
                continue
            x = rng.uniform(-1, 1, sa(ka)).astype("float32")
            y = rng.uniform(-1, 1, sb(kb)).astype("float32")
            n_out = (*x.shape[:-1], y.shape[-2] if name == "dense" else y.shape[-1])
            res = tvm.nd.array(np.zeros(n_out, "float32"))
            if ka == kb:
                f(tvm.nd.array(x), tvm.nd.array(y), res)
                np.testing.assert_allclose(res.numpy(), ref(x, y), rtol=1e-5, atol=1e-5)
            else:
                with pytest.raises(Exception, match=f"{name}: the reduction extents differ"):
                    f(tvm.nd.array(x), tvm.nd.array(y), res)
