"""TVM (v0.6-0.8) tutorial code, spelled as in the tutorials, runs on tvmpy and matches numpy.

Each test follows one tutorial: tensor-expression get-started, GEMM optimization steps, schedule
primitives, reductions (rfactor, comm_reducer argmax), tensorize with a C micro-kernel linked by
``pragma import_c``, intrinsics, and the tir/arith helpers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te

from .util import HAVE_CC

BACKENDS = ["llvm", "c"] if HAVE_CC else ["llvm"]


def test_get_started_vector_add(tmp_path):
    tgt = tvm.target.Target("llvm")
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    assert "parallel" in str(tvm.lower(s, [A, B, C], simple_mode=True))
    fadd = tvm.build(s, [A, B, C], tgt, name="myadd")
    dev = tvm.device(tgt.kind.name, 0)
    assert tgt.kind.name == "llvm" and tgt.kind == "llvm"
    rng = np.random.default_rng(0)
    for size in (1024, 131):
        a = tvm.nd.array(rng.uniform(size=size).astype(A.dtype), dev)
        b = tvm.nd.array(rng.uniform(size=size).astype(B.dtype), dev)
        c = tvm.nd.array(np.zeros(size, dtype=C.dtype), dev)
        fadd(a, b, c)
        tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
        tvm.testing.assert_allclose(c.asnumpy(), a.asnumpy() + b.asnumpy())
    evaluator = fadd.time_evaluator(fadd.entry_name, dev, number=2)
    assert evaluator(a, b, c).mean > 0
    from tvmpy.contrib import utils

    temp = utils.tempdir(str(tmp_path))
    path = temp.relpath("myadd.so")
    fadd.export_library(path)
    assert temp.listdir() == ["myadd.so"]
    fadd1 = tvm.runtime.load_module(path)
    c2 = tvm.nd.array(np.zeros(size, dtype=C.dtype), dev)
    fadd1(a, b, c2)
    tvm.testing.assert_allclose(c2.numpy(), a.numpy() + b.numpy())
    with tvm.target.Target("llvm") as t:
        assert tvm.target.Target.current() is t
    assert str(tvm.target.create("llvm")) == "llvm"
    owned = utils.tempdir()
    assert os.path.isdir(owned.temp_dir)
    owned.remove()
    assert not owned.temp_dir
    with pytest.raises(AssertionError):
        tvm.testing.assert_allclose(c.numpy(), c.numpy() + 1)


def _gemm_schedules(M, K, N, bn=32, kfactor=4):
    """The steps of "How to optimize GEMM on CPU", each as (name, schedule, args)."""
    k = te.reduce_axis((0, K), "k")
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    out = [("baseline", te.create_schedule(C.op), [A, B, C])]

    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=kfactor)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    s[C].vectorize(yi)
    out.append(("vectorization", s, [A, B, C]))

    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=kfactor)
    s[C].reorder(xo, yo, ko, xi, ki, yi)
    s[C].vectorize(yi)
    out.append(("loop permutation", s, [A, B, C]))

    # `N / bn` is a Python float in the tutorial: a whole float is a valid size
    packedB = te.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    k = te.reduce_axis((0, K), "k")
    C = te.compute((M, N), lambda x, y: te.sum(
        A[x, k] * packedB[tvm.tir.indexdiv(y, bn), k, tvm.tir.indexmod(y, bn)], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=kfactor)
    s[CC].reorder(ko, xc, ki, yc)
    s[CC].unroll(ki)
    s[CC].vectorize(yc)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    s[C].parallel(xo)
    out.append(("packing + write cache + parallel", s, [A, B, C]))
    return out


@pytest.mark.parametrize("target", BACKENDS)
def test_opt_gemm_steps(target):
    M, K, N = 96, 72, 64
    dev = tvm.device(target, 0)
    rng = np.random.default_rng(1)
    a = tvm.nd.array(rng.random((M, K)).astype("float32"), dev)
    b = tvm.nd.array(rng.random((K, N)).astype("float32"), dev)
    answer = np.dot(a.numpy(), b.numpy())
    for name, s, args in _gemm_schedules(M, K, N):
        func = tvm.build(s, args, target=target, name="mmult")
        c = tvm.nd.array(np.zeros((M, N), dtype="float32"), dev)
        func(a, b, c)
        np.testing.assert_allclose(c.numpy(), answer, rtol=1e-5, err_msg=name)


def test_schedule_primitives_tutorial():
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    text = str(tvm.lower(s, [A, C], simple_mode=True))
    assert "B[" not in text
    # TVM keeps an inlined tensor named in args as a parameter nothing writes
    text = str(tvm.lower(s, [A, B, C], simple_mode=True))
    assert "B: Buffer" in text and "B[" not in text

    A2 = te.placeholder((m, n), name="A")
    B2 = te.compute((m, n), lambda i, j: A2[i, j], name="B")
    s = te.create_schedule(B2.op)
    xo, yo, xi, yi = s[B2].tile(B2.op.axis[0], B2.op.axis[1], x_factor=10, y_factor=5)
    s[B2].reorder(xi, yo, xo, yi)
    f = tvm.build(s, [A2, B2], "llvm")
    a = np.random.default_rng(2).random((13, 7)).astype("float32")
    b = tvm.nd.array(np.zeros((13, 7), "float32"))
    f(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), a)


def test_reduction_tutorial_rfactor_and_thread_reduce():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    a = tvm.nd.array(np.random.default_rng(3).random((37, 53)).astype("float32"))
    for factor_axis in (0, 1):
        s = te.create_schedule(B.op)
        ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
        BF = s.rfactor(B, ki, factor_axis=factor_axis)
        assert len(BF.shape) == 2
        f = tvm.build(s, [A, B], "llvm")
        b = tvm.nd.array(np.zeros(37, "float32"))
        f(a, b)
        tvm.testing.assert_allclose(b.numpy(), a.numpy().sum(1), rtol=1e-5)
    # the GPU step: a reduction axis bound to threadIdx.x (a cross-thread reduction), run by
    # the interpreter's GPU semantics
    from tvmpy.driver import lower_gpu
    from tvmpy.tir import interpreter

    s = te.create_schedule(B.op)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    s[B].set_store_predicate(tx.var.equal(0))
    mod = lower_gpu([tvm.lower(s, [A, B], target="cuda")], "cuda")
    b = np.zeros(37, "float32")
    interpreter.build(mod)["default_function"](a.numpy(), b)
    tvm.testing.assert_allclose(b, a.numpy().sum(1), rtol=1e-5)


def test_comm_reducer_argmax_tutorial():
    def fcombine(x, y):
        lhs = tvm.tir.Select((x[1] >= y[1]), x[0], y[0])
        rhs = tvm.tir.Select((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tvm.tir.const(-1, t0), tvm.te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    m, n = te.var("m"), te.var("n")
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    s = te.create_schedule(T0.op)
    f = tvm.build(s, [idx, val, T0, T1])
    vv = np.random.default_rng(4).random((6, 11)).astype("float32")
    ii = np.tile(np.arange(11, dtype="int32"), (6, 1))
    t0 = tvm.nd.array(np.zeros(6, "int32"))
    t1 = tvm.nd.array(np.zeros(6, "float32"))
    f(tvm.nd.array(ii), tvm.nd.array(vv), t0, t1)
    np.testing.assert_equal(t0.numpy(), vv.argmax(1))
    tvm.testing.assert_allclose(t1.numpy(), vv.max(1))


GEMV_CC = """
  extern "C" int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < l; ++j)
        cc[i] += aa[j] * bb[i * stride + j];
    return 0;
  }
  extern "C" int gemv_reset(float *cc, int m) {
    for (int i = 0; i < m; ++i) cc[i] = 0.0;
    return 0;
  }
"""


def _intrin_gemv(m, l, with_reset):
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = tvm.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1,
                             strides=[te.var("s1"), 1])
    Cb = tvm.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def _body():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_extern("int32", "gemv_update", cc.access_ptr("w"),
                                        aa.access_ptr("r"), bb.access_ptr("r"), m, l,
                                        bb.strides[0]))
            return ib.get()

        def _reduce_reset():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            return ib.get()

        return (_body(), _reduce_reset(), _body()) if with_reset else _body()

    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


@pytest.mark.skipif(not HAVE_CC, reason="needs a C compiler")
@pytest.mark.parametrize("target", BACKENDS)
@pytest.mark.parametrize("with_reset", [False, True])
def test_tensorize_gemv_import_c(target, with_reset):
    N, M, L = 24, 48, 64
    A = te.placeholder((N, L), name="A")
    B = te.placeholder((M, L), name="B")
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    factor = 16
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    if with_reset:
        zo, zi = s[C].split(z, factor=factor)
        s[C].reorder(x, yo, zo, yi, zi)
        s[C].tensorize(yi, _intrin_gemv(factor, factor, True))
    else:
        s[C].reorder(x, yo, yi, z)
        s[C].tensorize(yi, _intrin_gemv(factor, L, False))
    s[C].pragma(x, "import_c", GEMV_CC)
    assert "gemv_update" in str(tvm.lower(s, [A, B, C], simple_mode=True))
    func = tvm.build(s, [A, B, C], target=target, name="gemv")
    rng = np.random.default_rng(5)
    a = rng.uniform(size=(N, L)).astype("float32")
    b = rng.uniform(size=(M, L)).astype("float32")
    c = tvm.nd.array(np.full((N, M), np.nan, dtype="float32"))
    if not with_reset:
        c = tvm.nd.array(np.zeros((N, M), dtype="float32"))
    func(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), np.dot(a, b.T), rtol=1e-4)


def test_ir_builder_loops_and_conditions():
    from tvmpy.tir import stmt as S

    n = te.var("n")
    ib = tvm.tir.ir_builder.create()
    with ib.for_range(0, n, name="i") as i:
        with ib.if_scope(i < 3):
            ib.emit(tvm.tir.call_extern("int32", "f", i))
        with ib.else_scope():
            ib.emit(tvm.tir.call_extern("int32", "g", i))
    body = ib.get()
    assert isinstance(body, S.For) and isinstance(body.body, S.IfThenElse)
    assert body.body.else_case is not None
    with pytest.raises(RuntimeError, match="else_scope"):
        with ib.else_scope():
            pass


@pytest.mark.parametrize("target", BACKENDS)
def test_intrin_math_tutorial(target):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    a = tvm.nd.array(np.random.default_rng(6).uniform(0.1, 1, size=17).astype("float32"))
    b = tvm.nd.array(np.zeros(17, "float32"))
    for fcompute in (lambda i: te.exp(A[i]),
                     lambda i: tvm.tir.call_pure_extern("float32", "expf", A[i]),
                     lambda i: tvm.tir.call_intrin("float32", "tir.exp", A[i])):
        B = te.compute(A.shape, fcompute, name="B")
        s = te.create_schedule(B.op)
        f = tvm.build(s, [A, B], target, name="myexp")
        f(a, b)
        tvm.testing.assert_allclose(b.numpy(), np.exp(a.numpy()), rtol=1e-5)
    B = te.compute(A.shape, lambda i: te.log(A[i]), name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), np.log(a.numpy()), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="known:"):
        tvm.tir.call_intrin("float32", "tir.no_such_op", A[0])


def test_arith_and_tir_helpers():
    ana = tvm.arith.Analyzer()
    x, y = te.var("x"), te.var("y")
    assert str(ana.simplify(x * 4 + y * 8 - x * 4)) == "y * 8"
    ana.bind(x, tvm.ir.Range(0, 8))
    assert str(ana.simplify(tvm.tir.floormod(x, 8))) == "x"
    bound = ana.const_int_bound(x * 2 + 1)
    assert (bound.min_value, bound.max_value) == (1, 15)
    assert ana.can_prove(x * 2 < 17)
    assert tvm.ir.structural_equal(ana.simplify(x + 0), x)
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] + 1, name="B")
    f = tvm.lower(te.create_schedule(B.op), [A, B], name="addone")
    seen = []
    tvm.tir.stmt_functor.post_order_visit(f.body, lambda node: seen.append(type(node).__name__))
    assert "For" in seen and "BufferStore" in seen


def test_target_kind_in_fresh_process():
    code = "import tvmpy as tvm; t = tvm.target.Target('c'); print(t.kind.name, tvm.device(t.kind.name, 0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split()[0] == "c"


def test_v06_top_level_spelling():
    """TVM v0.6 tutorials: tvm.placeholder / tvm.compute / tvm.create_schedule / tvm.context."""
    n = tvm.var("n")
    A = tvm.placeholder((n,), name="A")
    k = tvm.reduce_axis((0, n), "k")
    D = tvm.compute((1,), lambda i: tvm.sum(A[k] * tvm.const(2, "float32"), axis=k), name="D")
    s = tvm.create_schedule(D.op)
    f = tvm.build(s, [A, D], "llvm", target_host="llvm", name="dsum")
    ctx = tvm.context("llvm", 0)
    a = tvm.nd.array(np.random.default_rng(7).random(37).astype("float32"), ctx)
    d = tvm.nd.array(np.zeros(1, "float32"), ctx)
    f(a, d)
    tvm.testing.assert_allclose(d.asnumpy(), [2 * a.asnumpy().sum()], rtol=1e-5)
    assert isinstance(tvm.ir_builder.create(), tvm.tir.ir_builder.IRBuilder)
    e = tvm.nd.array(np.arange(3, dtype="float32"), ctx=tvm.cpu(0))
    assert e.device == tvm.cpu(0) and tvm.nd.empty((2,), "int8", ctx=ctx).dtype == "int8"


@pytest.mark.parametrize("target", BACKENDS)
def test_intrin_math_register_rule(target):
    from tvmpy.tir.transform.lower_intrin import RULES

    def my_exp_rule(op):
        assert isinstance(op, tvm.tir.Call)
        return tvm.tir.call_pure_extern("float32", "expf", op.args[0])

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: te.exp(A[i]), name="B")
    s = te.create_schedule(B.op)
    tvm.target.register_intrin_rule(target, "exp", my_exp_rule, override=True)
    try:
        with pytest.raises(ValueError, match="override=True"):
            tvm.target.register_intrin_rule(target, "tir.exp", my_exp_rule)
        assert "expf" in str(tvm.lower(s, [A, B], simple_mode=True, target=target))
        f = tvm.build(s, [A, B], target)
    finally:
        RULES[target].pop("exp", None)
    a = tvm.nd.array(np.random.default_rng(8).random(9).astype("float32"))
    b = tvm.nd.empty((9,))
    f(a, b)
    tvm.testing.assert_allclose(b.numpy(), np.exp(a.numpy()), rtol=1e-6)
    with pytest.raises(ValueError, match="unknown intrinsic 'mylog'.*register_op_attr"):
        tvm.target.register_intrin_rule(target, "mylog", my_exp_rule)


def test_reduction_tutorial_conv_2d_reduction():
    n = te.var("n")
    Input = te.placeholder((n, n), name="Input")
    Filter = te.placeholder((3, 3), name="Filter")
    di = te.reduce_axis((0, 3), name="di")
    dj = te.reduce_axis((0, 3), name="dj")
    Output = te.compute(
        (n - 2, n - 2),
        lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
        name="Output")
    s = te.create_schedule(Output.op)
    f = tvm.build(s, [Input, Filter, Output])
    rng = np.random.default_rng(9)
    x = rng.random((11, 11)).astype("float32")
    w = rng.random((3, 3)).astype("float32")
    o = tvm.nd.empty((9, 9))
    f(tvm.nd.array(x), tvm.nd.array(w), o)
    ref = np.array([[(x[i:i + 3, j:j + 3] * w).sum() for j in range(9)] for i in range(9)])
    tvm.testing.assert_allclose(o.numpy(), ref, rtol=1e-5)


def test_tensor_slice_indexing():
    A = te.placeholder((3, 4, 5), name="A")
    B = te.compute((3, 4, 5), lambda i, j, k: A[i][j][k] * 2 + A[i, j][k], name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B])
    a = np.random.default_rng(10).random((3, 4, 5)).astype("float32")
    b = tvm.nd.empty((3, 4, 5))
    f(tvm.nd.array(a), b)
    tvm.testing.assert_allclose(b.numpy(), a * 3, rtol=1e-6)
    with pytest.raises(IndexError, match="index all its dimensions"):
        te.compute((3,), lambda i: A[i] + 1)
    with pytest.raises(IndexError, match="3 dimensions, indexed with 4"):
        A[0][1][2, 3]


def test_low_level_custom_pass_ir_transform():
    """The "Writing a Customized Pass" tutorial, applied by hand to the schedule's loop IR."""
    from tvmpy.te.schedule_ops import schedule_to_primfunc

    n = tvm.tir.const(128, "int32")
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    sch = te.create_schedule(c.op)
    loops = []

    def find_width8(op):
        if isinstance(op, tvm.tir.For) and isinstance(op.extent, tvm.tir.IntImm):
            if op.extent.value % 8 == 0:
                loops.append(op)

    def vectorize8(op):
        if op in loops:
            lo, li = te.var(op.loop_var.name + ".outer"), te.var(op.loop_var.name + ".inner")
            body = tvm.tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
            body = tvm.tir.For(li, 0, 8, tvm.tir.ForKind.VECTORIZED, body)
            return tvm.tir.For(lo, 0, op.extent.value // 8, tvm.tir.ForKind.SERIAL, body)
        return None

    func = schedule_to_primfunc(sch, [a, b, c], "main", {})
    tvm.tir.stmt_functor.post_order_visit(func.body, find_width8)
    assert len(loops) == 1
    func = func.with_body(tvm.tir.stmt_functor.ir_transform(func.body, None, vectorize8,
                                                            ["tir.For"]))
    assert "ramp(" in str(tvm.lower(func))
    f = tvm.build(func)
    rng = np.random.default_rng(11)
    x, y = rng.random(128).astype("float32"), rng.random(128).astype("float32")
    z = tvm.nd.empty((128,))
    f(tvm.nd.array(x), tvm.nd.array(y), z)
    tvm.testing.assert_allclose(z.numpy(), x + y)
    # preorder replacing a node stops the descent; only_enable filters the node types
    seen = []
    out = tvm.tir.stmt_functor.ir_transform(
        func.body, lambda op: seen.append(type(op).__name__), None, ["BufferStore"])
    assert out is func.body and seen == ["BufferStore"]


def test_pass_context_add_lower_pass():
    n = 128
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    sch = te.create_schedule(c.op)
    calls = []

    @tvm.tir.transform.prim_func_pass(opt_level=0)
    def vectorize(f, mod, ctx):
        calls.append(ctx.opt_level)

        def vectorize8(op):
            lo, li = te.var(op.loop_var.name + ".outer"), te.var(op.loop_var.name + ".inner")
            body = tvm.tir.stmt_functor.substitute(op.body, {op.loop_var: lo * 8 + li})
            body = tvm.tir.For(li, 0, 8, tvm.tir.ForKind.VECTORIZED, body)
            return tvm.tir.For(lo, 0, op.extent.value // 8, tvm.tir.ForKind.SERIAL, body)

        return f.with_body(tvm.tir.stmt_functor.ir_transform(f.body, None, vectorize8,
                                                             ["tir.For"]))

    with tvm.transform.PassContext(opt_level=3, config={"tir.add_lower_pass": [(1, vectorize)]}):
        assert "ramp(" in str(tvm.lower(sch, [a, b, c]))
        f = tvm.build(sch, [a, b, c])
    assert calls == [3, 3]
    assert "ramp(" not in str(tvm.lower(sch, [a, b, c]))  # only inside the context
    rng = np.random.default_rng(12)
    x, y = rng.random(n).astype("float32"), rng.random(n).astype("float32")
    z = tvm.nd.empty((n,))
    f(tvm.nd.array(x), tvm.nd.array(y), z)
    tvm.testing.assert_allclose(z.numpy(), x + y)
    with pytest.raises(ValueError, match="unsupported config 'tir.disable_vectorize'"):
        tvm.transform.PassContext(config={"tir.disable_vectorize": True})
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [(4, vectorize)]}):
        with pytest.raises(ValueError, match="phase in 0..3"):
            tvm.lower(sch, [a, b, c])


def test_buffer_vload_vstore_vectors_in_a_tensor_intrinsic():
    """Buffer.vload(begin, "float32x16") / vstore(begin, vector) move 16 consecutive elements
    (vload used to ignore its dtype and load one element)."""
    from tvmpy import tir

    a = te.placeholder((16,), name="a")
    b = te.placeholder((16,), name="b")
    c = te.compute((16,), lambda i: a[i] + b[i], name="c")
    binds = {t: tir.decl_buffer(t.shape, t.dtype, name=t.name + "_b", offset_factor=1)
             for t in (a, b, c)}

    def intrin(ins, outs):
        ib = tvm.tir.ir_builder.create()
        ib.emit(outs[0].vstore([0], ins[0].vload([0], "float32x16")
                               + ins[1].vload([0], "float32x16")))
        return ib.get()

    vadd = te.decl_tensor_intrin(c.op, intrin, binds=binds)
    n = 80
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, vadd)
    assert "ramp(" in str(tvm.lower(s, [A, B, C]))
    f = tvm.build(s, [A, B, C], "llvm")
    av, bv = np.random.rand(n).astype("float32"), np.random.rand(n).astype("float32")
    cv = tvm.nd.empty((n,))
    f(tvm.nd.array(av), tvm.nd.array(bv), cv)
    np.testing.assert_allclose(cv.numpy(), av + bv)
    buf = binds[a]
    with pytest.raises(ValueError, match="cannot load int32x16"):
        buf.vload([0], "int32x16")
    with pytest.raises(ValueError, match="cannot store"):
        buf.vstore([0], tvm.tir.const(1, "int32") + tvm.tir.Ramp(0, 1, 4))
