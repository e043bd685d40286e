"""Differential test: random expression trees compiled by the LLVM backend (scalar and vector
loops) against the loop-IR interpreter (tvmpy.tir.interpreter), bit-exact.

Expressions mix integer dtypes (wrapping arithmetic, floor/trunc division by positive divisors,
shifts by in-range amounts, bitwise ops, min/max, comparisons, selects, casts) and float32 without
multiplications (so that FMA contraction cannot change rounding; division, min/max with NaN,
floor/abs and guarded float->int casts are in).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy.ir import dtype as dt
from tvmpy.tir import expr as E
from tvmpy.tir import interpreter, op
from tvmpy.tir import stmt as S

from .llvm_helpers import Lib, aligned, buf, func

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint32"]
DTYPES = INTS + ["float32"]
N = 40
LANES = 8


def _cast(x: E.PrimExpr, dtype: str) -> E.PrimExpr:
    if dt.element_of(x.dtype) == dtype:
        return x
    if dt.is_float(x.dtype) and not dt.is_float(dtype):
        # keep float->int casts defined: no NaN, |x| small
        lo = E.const(-100.0, "float32")
        hi = E.const(100.0, "float32")
        x = _select(op.isnan(x), E.const(0.0, "float32"), op.min(op.max(x, lo), hi))
    return E.cast(x, dtype)


def _select(c: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr) -> E.PrimExpr:
    lanes = max(dt.lanes_of(x.dtype) for x in (c, t, f))
    c, t, f = (E.Broadcast(x, lanes) if lanes > 1 and dt.lanes_of(x.dtype) == 1 else x
               for x in (c, t, f))
    return E.Select(c, t, f)


@st.composite
def expr(draw, dtype: str, leaves: dict, depth: int) -> E.PrimExpr:
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["load", "load", "const"]))
        if kind == "const":
            if dtype == "float32":
                return E.const(draw(st.sampled_from([0.5, -3.0, 7.25, 0.0, 1e30])), dtype)
            info = np.iinfo(dt.to_numpy(dtype))
            return E.const(draw(st.integers(int(max(info.min, -1000)), int(min(info.max, 1000)))),
                           dtype)
        src = draw(st.sampled_from(sorted(leaves)))
        return _cast(leaves[src], dtype)
    sub = lambda d=dtype: draw(expr(d, leaves, depth - 1))  # noqa: E731
    if dtype == "float32":
        k = draw(st.sampled_from(["add", "sub", "div", "min", "max", "select", "floor", "abs",
                                  "cast"]))
        if k == "add":
            return sub() + sub()
        if k == "sub":
            return sub() - sub()
        if k == "div":
            return sub() / (op.abs(sub()) + E.const(0.5, "float32"))
        if k in ("min", "max"):
            return (op.min if k == "min" else op.max)(sub(), sub())
        if k == "select":
            return _select(sub() < sub(), sub(), sub())
        if k == "floor":
            return op.floor(sub())
        if k == "abs":
            return op.abs(sub())
        return _cast(sub(draw(st.sampled_from(INTS))), dtype)
    bits = dt.bits_of(dtype)
    k = draw(st.sampled_from(["add", "sub", "mul", "floordiv", "floormod", "div", "mod", "min",
                              "max", "and", "or", "xor", "shl", "shr", "select", "cast"]))
    if k in ("add", "sub", "mul"):
        a, b = sub(), sub()
        return a + b if k == "add" else a - b if k == "sub" else a * b
    if k in ("floordiv", "floormod", "div", "mod"):
        a, b = sub(), sub()
        d = op.max(op.floormod(b, E.const(7, dtype)), E.const(1, dtype))  # in [1, 6]
        f = {"floordiv": op.floordiv, "floormod": op.floormod, "div": op.truncdiv,
             "mod": op.truncmod}[k]
        return f(a, d)
    if k in ("min", "max"):
        return (op.min if k == "min" else op.max)(sub(), sub())
    if k in ("and", "or", "xor"):
        f = {"and": op.bitwise_and, "or": op.bitwise_or, "xor": op.bitwise_xor}[k]
        return f(sub(), sub())
    if k in ("shl", "shr"):
        amount = op.floormod(sub(), E.const(bits, dtype))
        return (op.shift_left if k == "shl" else op.shift_right)(sub(), amount)
    if k == "select":
        return _select((sub() < sub()) | (sub() == sub()), sub(), sub())
    return _cast(sub(draw(st.sampled_from(DTYPES))), dtype)


def _inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    vals = {
        "i32": rng.integers(-2**31, 2**31, N, dtype=np.int64).astype("int32"),
        "i8": rng.integers(-128, 128, N).astype("int8"),
        "u32": rng.integers(0, 2**32, N, dtype=np.uint64).astype("uint32"),
        "f32": rng.uniform(-50, 50, N).astype("float32"),
    }
    vals["i32"][:4] = [0, -1, 2**31 - 1, -2**31]
    vals["f32"][:3] = [np.nan, -0.0, np.inf]
    return {k: aligned(v) for k, v in vals.items()}


IN_DTYPES = {"i32": "int32", "i8": "int8", "u32": "uint32", "f32": "float32"}


def _kernel(out_dtype: str, draw_expr, vector: bool):
    bufs = {k: buf(k, N, d) for k, d in IN_DTYPES.items()}
    out = buf("out", N, out_dtype)
    i = E.Var("i")
    idx = E.Ramp(i * LANES, 1, LANES) if vector else i
    leaves = {k: b[idx] for k, b in bufs.items()}
    value = draw_expr(leaves)
    if vector and dt.lanes_of(value.dtype) == 1:
        value = E.Broadcast(value, LANES)
    body = S.For(i, 0, N // LANES if vector else N, S.ForKind.SERIAL,
                 S.BufferStore(out, value, [idx]))
    return func("fz_vec" if vector else "fz", list(bufs.values()) + [out], body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), out_dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_expressions_match_interpreter(data, out_dtype, seed):
    exprs = {}

    def make(vector):
        def draw_expr(leaves):
            return data.draw(expr(out_dtype, leaves, 4))
        return _kernel(out_dtype, draw_expr, vector)

    funcs = [make(False), make(True)]
    lib = Lib(funcs)
    rng = np.random.default_rng(seed)
    ins = _inputs(rng)
    for f in funcs:
        args = [aligned(ins[k]) for k in IN_DTYPES]
        got = aligned(np.zeros(N, dt.to_numpy(out_dtype)))
        want = np.zeros(N, dt.to_numpy(out_dtype))
        assert lib(f.name, *args, got) == 0
        interpreter.run(f, [ins[k].copy() for k in IN_DTYPES] + [want])
        exprs[f.name] = f.body.body.value
        np.testing.assert_array_equal(got, want, err_msg=f"{f.name}: {exprs[f.name]}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lanes=st.sampled_from([2, 4, 8, 16]), load_stride=st.sampled_from([1, 2, 3, -1, 0]),
       store_stride=st.sampled_from([1, 2, -1, 5]), load_pred=st.booleans(),
       store_pred=st.booleans(), seed=st.integers(0, 2**16))
def test_random_vector_access_patterns_match_interpreter(lanes, load_stride, store_stride,
                                                         load_pred, store_pred, seed):
    """Contiguous / strided / reversed / broadcast vector loads and stores, with and without
    data-dependent predicates, against the interpreter."""
    iters = 5
    span = lambda s: (lanes - 1) * abs(s) + 1  # noqa: E731
    n_in = iters * span(load_stride) + lanes
    n_out = iters * span(store_stride) + lanes
    A, W, Out = buf("A", n_in), buf("W", iters), buf("Out", n_out)
    i = E.Var("i")

    def ramp(stride, step):
        base = i * step + ((lanes - 1) * -stride if stride < 0 else 0)
        return E.Ramp(base, stride, lanes)

    lidx = ramp(load_stride, span(load_stride))
    sidx = ramp(store_stride, span(store_stride))
    lp = (E.Ramp(i, 1, lanes) % 3 != 0) if load_pred else None
    value = E.BufferLoad(A, [lidx], predicate=lp) * E.Broadcast(W[i], lanes)
    sp = (value > E.Broadcast(E.const(0.0), lanes)) if store_pred else None
    body = S.For(i, 0, iters, S.ForKind.SERIAL, S.BufferStore(Out, value, [sidx], predicate=sp))
    f = func("access", [A, W, Out], body)
    rng = np.random.default_rng(seed)
    a = aligned(rng.standard_normal(n_in).astype("float32"))
    w = aligned(rng.standard_normal(iters).astype("float32"))
    got = aligned(np.full(n_out, 7.0, "float32"))
    want = np.full(n_out, 7.0, "float32")
    assert Lib([f])("access", a, w, got) == 0
    interpreter.run(f, [a.copy(), w.copy(), want])
    np.testing.assert_array_equal(got, want)
