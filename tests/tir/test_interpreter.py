"""The loop-IR interpreter against numpy, on hand-built PrimFuncs in both IR forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tir_pass_helpers import func, loop

from tvmpy import tir
from tvmpy.tir import interpreter as interp
from tvmpy.tir.stmt import ForKind

RNG = np.random.default_rng(0)


def rand(shape, dtype="float32"):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)


# ---------------------------------------------------------------------------------------------
# form 1: multi-dimensional buffers
def _matmul(n, m, k_, order):
    A = tir.decl_buffer((n, k_), "float32", "A")
    B = tir.decl_buffer((k_, m), "float32", "B")
    C = tir.decl_buffer((n, m), "float32", "C")
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    init = tir.BufferStore(C, tir.const(0.0), [i, j])
    upd = tir.BufferStore(C, C[i, j] + A[i, k] * B[k, j], [i, j])
    if order == "ijk":
        body = loop(i, n, loop(j, m, tir.seq(init, loop(k, k_, upd))))
    else:
        body = loop(i, n, tir.seq(loop(j, m, init), loop(k, k_, loop(j, m, upd))))
    return func([A, B, C], body)


@pytest.mark.parametrize("order", ["ijk", "ikj"])
def test_matmul_64(order):
    a, b = rand((64, 64)), rand((64, 64))
    c = np.zeros((64, 64), "float32")
    interp.run(_matmul(64, 64, 64, order), [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["ijk", "ikj"])
def test_matmul_prime_sizes_exact_float32_rounding(order):
    n, m, k_ = 7, 13, 11
    a, b = rand((n, k_)), rand((k_, m))
    c = np.zeros((n, m), "float32")
    interp.run(_matmul(n, m, k_, order), [a, b, c])
    ref = np.zeros((n, m), "float32")
    for i in range(n):
        for j in range(m):
            acc = np.float32(0)
            for k in range(k_):
                acc = np.float32(acc + np.float32(a[i, k] * b[k, j]))
            ref[i, j] = acc
    np.testing.assert_array_equal(c, ref)  # sequential float32, bit for bit


def test_symbolic_shapes_bound_from_arrays():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    i = tir.Var("i")
    f = func([A, B], loop(i, n, tir.BufferStore(B, A[i] * 2.0 + 1.0, [i])))
    for size in (1, 17, 100):
        a = rand(size)
        b = np.zeros(size, "float32")
        interp.run(f, [a, b])
        np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))


def test_shape_mismatch_dtype_and_count_errors():
    n = tir.Var("n")
    A = tir.decl_buffer((n, 4), "float32", "A")
    B = tir.decl_buffer((n, 4), "float32", "B")
    i = tir.Var("i")
    f = func([A, B], loop(i, n, tir.BufferStore(B, A[i, 0], [i, 0])))
    with pytest.raises(ValueError, match="argument B"):
        interp.run(f, [np.zeros((3, 4), "float32"), np.zeros((2, 4), "float32")])
    with pytest.raises(ValueError, match="argument A"):
        interp.run(f, [np.zeros((3, 5), "float32"), np.zeros((3, 5), "float32")])
    with pytest.raises(TypeError, match="argument A: expected dtype float32, got float64"):
        interp.run(f, [np.zeros((3, 4)), np.zeros((3, 4), "float32")])
    with pytest.raises(TypeError, match="takes 2 arguments"):
        interp.run(f, [np.zeros((3, 4), "float32")])


def test_scalar_params():
    A = tir.decl_buffer((8,), "int32", "A")
    s, i = tir.Var("s", "int32"), tir.Var("i")
    f = func([A, s], loop(i, 8, tir.BufferStore(A, A[i] * s, [i])))
    a = rand(8, "int32")
    ref = a * 3
    interp.run(f, [a, 3])
    np.testing.assert_array_equal(a, ref)
    with pytest.raises(TypeError, match="argument s"):
        interp.run(f, [a, 1.5])
    with pytest.raises(OverflowError):
        interp.run(f, [a, 2**40])


def test_allocate_poison_and_intermediate():
    A = tir.decl_buffer((16,), "float32", "A")
    B = tir.decl_buffer((16,), "float32", "B")
    T = tir.decl_buffer((16,), "float32", "T", scope="local")
    i = tir.Var("i")
    body = tir.Allocate(T, tir.seq(loop(i, 16, tir.BufferStore(T, A[i] + 1.0, [i])),
                                   loop(i, 16, tir.BufferStore(B, T[i] * 2.0, [i]))))
    a, b = rand(16), np.zeros(16, "float32")
    interp.run(func([A, B], body), [a, b])
    np.testing.assert_array_equal(b, (a + np.float32(1)) * np.float32(2))
    # reading uninitialised memory shows up as NaN / the 0xA5 pattern
    body = tir.Allocate(T, loop(i, 16, tir.BufferStore(B, T[i], [i])))
    interp.run(func([A, B], body), [a, b])
    assert np.isnan(b).all()
    Ti = tir.decl_buffer((4,), "int32", "Ti")
    Bi = tir.decl_buffer((4,), "int32", "Bi")
    body = tir.Allocate(Ti, loop(i, 4, tir.BufferStore(Bi, Ti[i], [i])))
    bi = np.zeros(4, "int32")
    interp.run(func([Bi], body), [bi])
    assert (bi.view("uint32") == 0xA5A5A5A5).all()


def test_out_of_bounds_raises():
    A = tir.decl_buffer((8,), "float32", "A")
    i = tir.Var("i")
    f = func([A], loop(i, 9, tir.BufferStore(A, tir.const(1.0), [i])))
    with pytest.raises(IndexError, match="index 8 out of range"):
        interp.run(f, [np.zeros(8, "float32")])
    A2 = tir.decl_buffer((4, 4), "float32", "A2")
    f = func([A2], loop(i, 4, tir.BufferStore(A2, tir.const(1.0), [0, i + 1])))
    with pytest.raises(IndexError, match="dimension 1"):
        interp.run(f, [np.zeros((4, 4), "float32")])


def test_select_evaluates_both_if_then_else_lazily():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((10,), "float32", "B")
    i = tir.Var("i")
    a = rand(8)
    lazy = func([A, B], loop(i, 10, tir.BufferStore(
        B, tir.if_then_else(i < 8, A[tir.min(i, 9)], tir.const(-1.0)), [i])))
    b = np.zeros(10, "float32")
    interp.run(lazy, [a, b])
    np.testing.assert_array_equal(b, np.concatenate([a, [-1, -1]]).astype("float32"))
    eager = func([A, B], loop(i, 10, tir.BufferStore(
        B, tir.Select(i < 8, A[i], tir.const(-1.0)), [i])))
    with pytest.raises(IndexError):
        interp.run(eager, [a, b])


def test_guarded_store_nondivisible_split():
    n = 37
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    xo, xi = tir.Var("xo"), tir.Var("xi")
    idx = xo * 8 + xi
    body = loop(xo, 5, loop(xi, 8, tir.IfThenElse(
        tir.likely(idx < n), tir.BufferStore(B, tir.exp(A[idx]), [idx]))))
    a, b = rand(n), np.zeros(n, "float32")
    interp.run(func([A, B], body), [a, b])
    np.testing.assert_allclose(b, np.exp(a), rtol=1e-6)


def test_loop_carried_dependence_runs_serially():
    A = tir.decl_buffer((50,), "int32", "A")
    i = tir.Var("i")
    f = func([A], loop(i, 49, tir.BufferStore(A, A[i] + A[i + 1], [i + 1])))
    a = rand(50, "int32")
    ref = np.cumsum(a).astype("int32")
    interp.run(f, [a])
    np.testing.assert_array_equal(a, ref)
    # a reversed dependence (reads a location a later iteration writes)
    B = tir.decl_buffer((50,), "int32", "B")
    f = func([B], loop(i, 49, tir.BufferStore(B, B[i + 1] * 2, [i])))
    b = rand(50, "int32")
    ref = b.copy()
    for k in range(49):
        ref[k] = ref[k + 1] * 2
    interp.run(f, [b])
    np.testing.assert_array_equal(b, ref)


def test_thread_extent_and_virtual_thread_run_as_loops():
    A = tir.decl_buffer((4, 8), "float32", "A")
    B = tir.decl_buffer((4, 8), "float32", "B")
    bx = tir.IterVar(None, tir.Var("blockIdx.x"), tir.IterVar.ThreadIndex, "blockIdx.x")
    tx = tir.IterVar(None, tir.Var("threadIdx.x"), tir.IterVar.ThreadIndex, "threadIdx.x")
    store = tir.BufferStore(B, A[bx.var, tx.var] + 1.0, [bx.var, tx.var])
    body = tir.AttrStmt(bx, "thread_extent", 4, tir.AttrStmt(tx, "virtual_thread", 8, store))
    a, b = rand((4, 8)), np.zeros((4, 8), "float32")
    interp.run(func([A, B], body), [a, b])
    np.testing.assert_array_equal(b, a + np.float32(1))


@pytest.mark.parametrize("kind", list(ForKind))
def test_every_for_kind_runs(kind):
    A = tir.decl_buffer((12,), "float32", "A")
    i = tir.Var("i")
    f = func([A], loop(i, 10, tir.BufferStore(A, A[i] * 3.0, [i]), kind, lo=2))
    a = rand(12)
    ref = a.copy()
    ref[2:] *= np.float32(3)
    interp.run(f, [a])
    np.testing.assert_array_equal(a, ref)


def test_assert_raises_with_message():
    A = tir.decl_buffer((4,), "float32", "A")
    n = tir.Var("n")
    f = func([A, n], tir.AssertStmt(n < 4, "n must be below 4",
                                    tir.BufferStore(A, tir.const(1.0), [n])))
    a = np.zeros(4, "float32")
    interp.run(f, [a, 2])
    assert a[2] == 1
    with pytest.raises(RuntimeError, match="n must be below 4"):
        interp.run(f, [a, 5])


def test_let_and_letstmt():
    A = tir.decl_buffer((6,), "int32", "A")
    i, x, y = tir.Var("i"), tir.Var("x"), tir.Var("y")
    body = loop(i, 6, tir.LetStmt(x, i * 3, tir.BufferStore(A, tir.Let(y, x + 1, y * y), [i])))
    a = np.zeros(6, "int32")
    interp.run(func([A], body), [a])
    np.testing.assert_array_equal(a, (np.arange(6) * 3 + 1) ** 2)


# ---------------------------------------------------------------------------------------------
# dtype semantics
def _binop_func(op, dtype, n):
    A = tir.decl_buffer((n,), dtype, "A")
    B = tir.decl_buffer((n,), dtype, "B")
    C = tir.decl_buffer((n,), dtype, "C")
    i = tir.Var("i")
    return func([A, B, C], loop(i, n, tir.BufferStore(C, op(A[i], B[i]), [i])))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_division_flavours(dtype):
    a = np.array([7, -7, 7, -7, 0, 5, -1, -128 if dtype == "int8" else -100], dtype)
    b = np.array([2, 2, -2, -2, 3, 7, 3, 3], dtype)
    cases = {
        tir.floordiv: a // b,
        tir.floormod: a % b,
        tir.truncdiv: np.trunc(a / b).astype(dtype),
        tir.truncmod: np.fmod(a, b),
    }
    for op, ref in cases.items():
        c = np.zeros_like(a)
        interp.run(_binop_func(op, dtype, len(a)), [a, b, c])
        np.testing.assert_array_equal(c, ref, err_msg=op.__name__)


def test_integer_division_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        interp.run(_binop_func(tir.floordiv, "int32", 3),
                   [np.ones(3, "int32"), np.array([1, 0, 1], "int32"), np.zeros(3, "int32")])


def test_int8_and_uint8_wraparound():
    a = np.array([100, 127, -128, 50], "int8")
    b = np.array([100, 1, -1, -100], "int8")
    c = np.zeros(4, "int8")
    interp.run(_binop_func(lambda x, y: x + y, "int8", 4), [a, b, c])
    np.testing.assert_array_equal(c, np.array([-56, -128, 127, -50], "int8"))
    interp.run(_binop_func(lambda x, y: x * y, "int8", 4), [a, b, c])
    np.testing.assert_array_equal(c, (a.astype(int) * b.astype(int)).astype("int8"))
    ua, ub, uc = np.array([250, 3], "uint8"), np.array([10, 5], "uint8"), np.zeros(2, "uint8")
    interp.run(_binop_func(lambda x, y: x - y, "uint8", 2), [ua, ub, uc])
    np.testing.assert_array_equal(uc, np.array([240, 254], "uint8"))


def test_float32_arithmetic_stays_float32():
    a = np.array([1.0, 16777216.0], "float32")
    b = np.array([1e-8, 1.0], "float32")
    c = np.zeros(2, "float32")
    interp.run(_binop_func(lambda x, y: x + y, "float32", 2), [a, b, c])
    # in float64 these would differ from a; in float32 the small addend is lost
    np.testing.assert_array_equal(c, a)


def test_float16_storage_and_arithmetic():
    a = rand(32, "float16")
    b = rand(32, "float16")
    c = np.zeros(32, "float16")
    interp.run(_binop_func(lambda x, y: x * y + x, "float16", 32), [a, b, c])
    np.testing.assert_array_equal(c, a * b + a)


def test_min_max_propagate_nan():
    a = np.array([1.0, np.nan, 3.0, -np.inf], "float32")
    b = np.array([np.nan, 2.0, 1.0, 0.0], "float32")
    c = np.zeros(4, "float32")
    interp.run(_binop_func(tir.min, "float32", 4), [a, b, c])
    np.testing.assert_array_equal(c, np.minimum(a, b))
    interp.run(_binop_func(tir.max, "float32", 4), [a, b, c])
    np.testing.assert_array_equal(c, np.maximum(a, b))


def test_casts_truncate_toward_zero_and_wrap():
    A = tir.decl_buffer((6,), "float32", "A")
    B = tir.decl_buffer((6,), "int32", "B")
    C = tir.decl_buffer((6,), "int8", "C")
    D = tir.decl_buffer((6,), "float16", "D")
    i = tir.Var("i")
    body = loop(i, 6, tir.seq(
        tir.BufferStore(B, tir.Cast("int32", A[i]), [i]),
        tir.BufferStore(C, tir.Cast("int8", B[i] * 100), [i]),
        tir.BufferStore(D, tir.Cast("float16", A[i]), [i])))
    a = np.array([1.7, -1.7, 2.5, -0.5, 100.9, -3.0], "float32")
    b, c, d = np.zeros(6, "int32"), np.zeros(6, "int8"), np.zeros(6, "float16")
    interp.run(func([A, B, C, D], body), [a, b, c, d])
    np.testing.assert_array_equal(b, [1, -1, 2, 0, 100, -3])
    np.testing.assert_array_equal(c, (np.array([1, -1, 2, 0, 100, -3]) * 100).astype("int8"))
    np.testing.assert_array_equal(d, a.astype("float16"))


_UNARY_REF = {
    "exp": np.exp, "exp2": np.exp2, "log": lambda x: np.log(np.abs(x) + 1),
    "log2": lambda x: np.log2(np.abs(x) + 1), "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 1), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": np.vectorize(math.erf),
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "abs": np.abs,
}


@pytest.mark.parametrize("name", sorted(_UNARY_REF))
def test_float_intrinsics(name):
    A = tir.decl_buffer((64,), "float32", "A")
    B = tir.decl_buffer((64,), "float32", "B")
    i = tir.Var("i")
    x = A[i]
    if name in ("log", "log2"):
        x = tir.abs(x) + 1.0
    elif name == "sqrt":
        x = tir.abs(x)
    elif name == "rsqrt":
        x = tir.abs(x) + 1.0
    fn = tir.abs if name == "abs" else getattr(tir, name)
    f = func([A, B], loop(i, 64, tir.BufferStore(B, fn(x), [i])))
    a = (rand(64) * 3).astype("float32")
    a[:4] = [0.5, 1.5, 2.5, -2.5]  # round half to even
    b = np.zeros(64, "float32")
    interp.run(f, [a, b])
    ref = _UNARY_REF[name](a).astype("float32")
    np.testing.assert_allclose(b, ref, rtol=2e-6, atol=1e-7)
    if name == "round":
        np.testing.assert_array_equal(b[:4], [0, 2, 2, -2])


def test_pow_fmod_isnan_popcount_bitwise():
    A = tir.decl_buffer((5,), "float32", "A")
    B = tir.decl_buffer((5,), "float32", "B")
    M = tir.decl_buffer((5,), "bool", "M")
    P = tir.decl_buffer((5,), "int32", "P")
    Q = tir.decl_buffer((5,), "int32", "Q")
    i = tir.Var("i")
    body = loop(i, 5, tir.seq(
        tir.BufferStore(B, tir.pow(tir.abs(A[i]), tir.const(1.5)) + tir.fmod(A[i], 0.75), [i]),
        tir.BufferStore(M, tir.isnan(A[i]), [i]),
        tir.BufferStore(Q, tir.popcount(P[i]) + ((P[i] & 12) | (P[i] >> 1)) ^ (P[i] << 2), [i])))
    a = np.array([1.5, -2.25, np.nan, 0.0, 7.0], "float32")
    p = np.array([0, -1, 7, 255, -100], "int32")
    b, m, q = np.zeros(5, "float32"), np.zeros(5, bool), np.zeros(5, "int32")
    interp.run(func([A, B, M, P, Q], body), [a, b, m, p, q])
    ref_b = np.power(np.abs(a), np.float32(1.5)) + np.fmod(a, np.float32(0.75))
    np.testing.assert_allclose(b, ref_b, rtol=1e-6)
    np.testing.assert_array_equal(m, np.isnan(a))
    pc = np.array([bin(int(x) & 0xFFFFFFFF).count("1") for x in p], "int32")
    np.testing.assert_array_equal(q, pc + ((p & 12) | (p >> 1)) ^ (p << 2))


def test_comparisons_logic_select():
    A = tir.decl_buffer((20,), "int32", "A")
    B = tir.decl_buffer((20,), "int32", "B")
    i = tir.Var("i")
    cond = tir.Or(tir.And(A[i] > 0, A[i] % 2 == 0), tir.Not(A[i] >= -5))
    f = func([A, B], loop(i, 20, tir.BufferStore(B, tir.Select(cond, A[i], -A[i]), [i])))
    a, b = rand(20, "int32"), np.zeros(20, "int32")
    a[:3] = [-6, 4, 3]
    interp.run(f, [a, b])
    c = ((a > 0) & (a % 2 == 0)) | ~(a >= -5)
    np.testing.assert_array_equal(b, np.where(c, a, -a))


# ---------------------------------------------------------------------------------------------
# form 2: flat buffers, vectors, predicates
def test_form2_vector_matmul():
    n = 32
    A = tir.decl_buffer((n * n,), "float32", "A")
    B = tir.decl_buffer((n * n,), "float32", "B")
    C = tir.decl_buffer((n * n,), "float32", "C")
    i, jo, k = tir.Var("i"), tir.Var("jo"), tir.Var("k")
    cidx = tir.Ramp(i * n + jo * 8, 1, 8)
    body = loop(i, n, loop(jo, n // 8, tir.seq(
        tir.BufferStore(C, tir.Broadcast(tir.const(0.0), 8), [cidx]),
        loop(k, n, tir.BufferStore(
            C, C[cidx] + tir.Broadcast(A[i * n + k], 8) * B[tir.Ramp(k * n + jo * 8, 1, 8)],
            [cidx])))))
    a, b = rand((n, n)), rand((n, n))
    c = np.zeros((n, n), "float32")
    interp.run(func([A, B, C], body), [a.ravel(), b.ravel(), c.reshape(-1)])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_form2_predicated_tail_and_vector_ops():
    n = 21
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    xo = tir.Var("xo")
    lanes = tir.Ramp(xo * 8, 1, 8)
    pred = lanes < tir.Broadcast(tir.const(n), 8)
    val = tir.Select(A[lanes] > tir.Broadcast(tir.const(0.0), 8), tir.exp(A[lanes]),
                     tir.Broadcast(tir.const(0.0), 8))
    body = loop(xo, 3, tir.BufferStore(B, val, [lanes], pred))
    # the unpredicated load of A would run out of bounds: give it the predicate too
    val = tir.Select(tir.BufferLoad(A, [lanes], pred) > tir.Broadcast(tir.const(0.0), 8),
                     tir.exp(tir.BufferLoad(A, [lanes], pred)), tir.Broadcast(tir.const(0.0), 8))
    body_ok = loop(xo, 3, tir.BufferStore(B, val, [lanes], pred))
    a, b = rand(n), np.full(n, 7.0, "float32")
    with pytest.raises(IndexError):
        interp.run(func([A, B], body), [a, b])
    interp.run(func([A, B], body_ok), [a, b])
    np.testing.assert_allclose(b, np.where(a > 0, np.exp(a), 0), rtol=1e-6)


def test_form2_shuffle_broadcast_cast_vectors():
    A = tir.decl_buffer((8,), "int32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    lo, hi = A[tir.Ramp(0, 1, 4)], A[tir.Ramp(4, 1, 4)]
    rev = tir.Shuffle([lo, hi], [7, 6, 5, 4, 3, 2, 1, 0])
    body = tir.BufferStore(B, tir.Cast("float32x8", rev) * tir.Broadcast(tir.const(0.5), 8),
                           [tir.Ramp(0, 1, 8)])
    a, b = rand(8, "int32"), np.zeros(8, "float32")
    interp.run(func([A, B], body), [a, b])
    np.testing.assert_array_equal(b, a[::-1].astype("float32") * np.float32(0.5))


def test_form2_vector_if_then_else_masks_loads():
    A = tir.decl_buffer((10,), "float32", "A")
    B = tir.decl_buffer((12,), "float32", "B")
    idx = tir.Ramp(8, 1, 4)  # lanes 8..11; A has 10 elements
    cond = idx < tir.Broadcast(tir.const(10), 4)
    body = tir.BufferStore(B, tir.if_then_else(cond, A[idx], tir.Broadcast(tir.const(-1.0), 4)),
                           [idx])
    a, b = rand(10), np.zeros(12, "float32")
    interp.run(func([A, B], body), [a, b])
    np.testing.assert_array_equal(b[8:], [a[8], a[9], -1, -1])


def test_form2_reduction_over_vectors_with_strided_outer_loop():
    n = 40
    A = tir.decl_buffer((n * 16,), "float32", "A")
    S_ = tir.decl_buffer((16,), "float32", "S")
    k = tir.Var("k")
    lanes = tir.Ramp(0, 1, 16)
    body = tir.seq(tir.BufferStore(S_, tir.Broadcast(tir.const(-np.inf), 16), [lanes]),
                   loop(k, n, tir.BufferStore(S_, tir.max(S_[lanes], A[tir.Ramp(k * 16, 1, 16)]),
                                              [lanes])))
    a, s = rand((n, 16)), np.zeros(16, "float32")
    a[5, 3] = np.nan
    interp.run(func([A, S_], body), [a.ravel(), s])
    np.testing.assert_array_equal(s, np.maximum.reduce(a, axis=0))


# ---------------------------------------------------------------------------------------------
# externs, modules, argument objects
def test_call_extern_gets_views():
    A = tir.decl_buffer((4, 8), "float32", "A")
    B = tir.decl_buffer((4, 8), "float32", "B")
    i = tir.Var("i")
    seen = []

    def scale_row(dst, src, count, factor):
        seen.append((dst.shape, count))
        dst[:count] = src[:count] * np.float32(factor)
        return 0

    interp.register_extern("test_scale_row", scale_row)
    call = tir.call_extern("int32", "test_scale_row", B.access_ptr("w", offset=i * 8),
                           A.access_ptr("r", offset=i * 8), 8, tir.const(2.0))
    f = func([A, B], loop(i, 4, tir.Evaluate(call)))
    a, b = rand((4, 8)), np.zeros((4, 8), "float32")
    interp.run(f, [a, b])
    np.testing.assert_array_equal(b, a * np.float32(2))
    assert seen[0] == ((32,), 8) and seen[3] == ((8,), 8)
    interp.unregister_extern("test_scale_row")
    with pytest.raises(RuntimeError, match="register_extern"):
        interp.run(f, [a, b])


def test_build_module_interface_and_write_back():
    A = tir.decl_buffer((5,), "float32", "A")
    B = tir.decl_buffer((5,), "float32", "B")
    i = tir.Var("i")
    f = func([A, B], loop(i, 5, tir.BufferStore(B, A[i] + 1.0, [i])), name="add_one")
    m = interp.build([f], "interp")
    assert m.entry_name == "add_one"
    a = rand(5)

    class Holder:  # a runtime-NDArray-like object: .numpy() copies, copyfrom writes
        def __init__(self, x):
            self.x = x

        def numpy(self):
            return self.x.copy()

        def copyfrom(self, x):
            self.x[...] = x

    b = Holder(np.zeros(5, "float32"))
    m(a, b)
    np.testing.assert_array_equal(b.x, a + np.float32(1))
    b2 = np.zeros(5, "float32")
    m.get_function("add_one")(a, b2)
    m["add_one"](a, b2)
    np.testing.assert_array_equal(b2, a + np.float32(1))
    with pytest.raises(AttributeError, match="add_one"):
        m.get_function("nope")
    # a non-contiguous numpy argument is written back too
    big = np.zeros(10, "float32")
    m(a, big[::2])
    np.testing.assert_array_equal(big[::2], a + np.float32(1))


def test_tvm_build_interp_target():
    pytest.importorskip("tvmpy.tir.pipeline")
    import tvmpy as tvm

    A = tir.decl_buffer((6, 7), "float32", "A")
    B = tir.decl_buffer((6, 7), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    f = func([A, B], loop(i, 6, loop(j, 7, tir.BufferStore(B, A[i, j] * A[i, j], [i, j]))),
             name="sq")
    m = tvm.build(f, target="interp")
    a, b = rand((6, 7)), np.zeros((6, 7), "float32")
    m(a, b)
    np.testing.assert_array_equal(b, a * a)


def test_unknown_node_is_a_clear_error():
    A = tir.decl_buffer((2,), "float32", "A")
    f = func([A], tir.Evaluate(tir.Call("float32", "no_such_intrinsic", [1.0])))
    with pytest.raises(NotImplementedError, match="no_such_intrinsic"):
        interp.run(f, [np.zeros(2, "float32")])


# ---------------------------------------------------------------------------------------------
# the whole-loop fast paths must agree with the serial loop on every access pattern


# starts >= 22: with n <= 12 and strides >= -2 every index stays inside B (64 elements)
@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), cs=st.integers(-2, 2), ds=st.integers(22, 30),
       cl=st.integers(-2, 2), dl=st.integers(22, 30), op=st.sampled_from(["add", "max", "sub"]),
       guard=st.booleans(), dtype=st.sampled_from(["int8", "int32", "float32"]))
def test_fast_paths_match_serial_semantics(n, cs, ds, cl, dl, op, guard, dtype):
    B = tir.decl_buffer((64,), dtype, "B")
    A = tir.decl_buffer((16,), dtype, "A")
    i = tir.Var("i")
    load = B[i * cl + dl]
    val = {"add": lambda x, y: x + y, "max": tir.max, "sub": lambda x, y: x - y}[op](load, A[i])
    store = tir.BufferStore(B, val, [i * cs + ds])
    if guard:
        store = tir.IfThenElse(tir.floormod(i, 3) != 1, store)
    f = func([A, B], loop(i, n, store))
    a, b = rand(16, dtype), rand(64, dtype)
    ref = b.copy()
    pyop = {"add": np.add, "max": np.maximum, "sub": np.subtract}[op]
    with np.errstate(all="ignore"):
        for k in range(n):
            if not guard or k % 3 != 1:
                ref[k * cs + ds] = pyop(ref[k * cl + dl], a[k])
    interp.run(f, [a, b])
    np.testing.assert_array_equal(b, ref)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), init=st.integers(-128, 127))
def test_reduction_fast_path_wraps_like_int8(n, init):
    A = tir.decl_buffer((40,), "int8", "A")
    S_ = tir.decl_buffer((1,), "int8", "S")
    i = tir.Var("i")
    f = func([A, S_], loop(i, n, tir.BufferStore(S_, S_[0] + A[i] * A[i], [0])))
    a = rand(40, "int8")
    s = np.array([init], "int8")
    ref = np.int8(init)
    with np.errstate(all="ignore"):
        for k in range(n):
            ref = np.int8(ref + np.int8(a[k] * a[k]))
    interp.run(f, [a, s])
    assert s[0] == ref


def test_runtime_ndarray_and_torch_arguments():
    import tvmpy as tvm

    A = tir.decl_buffer((6,), "float32", "A")
    B = tir.decl_buffer((6,), "float32", "B")
    i = tir.Var("i")
    m = interp.build([func([A, B], loop(i, 6, tir.BufferStore(B, A[i] * A[i], [i])), "sq")])
    a = rand(6)
    out = tvm.nd.empty((6,), "float32")
    m(tvm.nd.array(a), out)
    np.testing.assert_array_equal(out.numpy(), a * a)
    torch = pytest.importorskip("torch")
    t = torch.zeros(6)
    m(a, t)
    np.testing.assert_array_equal(t.numpy(), a * a)


def test_shape_var_only_inside_an_expression():
    n = tir.Var("n")
    A = tir.decl_buffer((n * 2,), "float32", "A")
    i = tir.Var("i")
    body = loop(i, n, tir.BufferStore(A, tir.const(1.0), [i * 2]))
    with pytest.raises(ValueError, match="explicit scalar argument"):
        interp.run(func([A], body), [np.zeros(4, "float32")])
    a = np.zeros(4, "float32")
    interp.run(func([A, n], body), [a, 2])
    np.testing.assert_array_equal(a, [1, 0, 1, 0])
    with pytest.raises(ValueError, match="dim 0 = 6"):
        interp.run(func([A, n], body), [a, 3])


def test_thread_bound_schedule_in_both_forms():
    # GPU-style bindings have no CPU code generator yet; the interpreter runs them as loops
    import tvmpy as tvm
    from tvmpy import te
    from tvmpy.te.schedule_ops import schedule_to_primfunc

    n = 32
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(yo, te.thread_axis("vthread"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    a, b = rand((n, n)), rand((n, n))
    for f in (schedule_to_primfunc(s, [A, B, C], "f"), tvm.lower(s, [A, B, C], name="f")["f"]):
        c = np.zeros((n, n), "float32")
        interp.run(f, [a, b, c])
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
