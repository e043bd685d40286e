"""Every intrinsic and operator, per dtype, on every backend, against numpy.

To keep the build count small, all the ops of one dtype are outputs of ONE function (one build
per dtype x layout x backend, cached for the module); each (op, dtype, layout, backend) is still
its own test. ``layout`` is "scalar" (plain loops) or "vector" (inner loop split by 8 with a tail
and vectorized: vector intrinsics and the scalarized/masked tail).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir

from .util import TARGETS, check, compare

N = 31  # prime: 3 full vectors of 8 and a tail of 7
LAYOUTS = ("scalar", "vector")
Op = tuple[str, Callable, Callable, float]  # name, expr(*loads), ref(*arrays), rtol (None: dtype)


# ---- input generators --------------------------------------------------------------------------
def _signed(rng, dtype):
    if dtype.startswith("float"):
        return (rng.uniform(0.25, 2.0, N) * rng.choice([-1.0, 1.0], N)).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = (max(info.min, -(2 ** 40)), min(info.max, 2 ** 40)) if info.bits > 16 else (info.min, info.max)
    if dtype == "int8":
        lo = -127  # keep INT_MIN / -1 (overflow, UB in C) out of the divisions
    a = rng.integers(lo, hi, N, endpoint=True, dtype="int64").astype(dtype)
    a[:4] = np.array([1, 2, 7, 0] if info.min == 0 else [-1, -7, 7, 0], dtype)  # small & zero
    return a


def _divisor(rng, dtype):
    if dtype.startswith("float"):
        return (rng.uniform(0.25, 2.0, N) * rng.choice([-1.0, 1.0], N)).astype(dtype)
    lo = 1 if np.iinfo(dtype).min == 0 else -9
    b = rng.integers(lo, 10, N, dtype="int64")
    b[b == 0] = 3
    b[:4] = [3, -3, 2, -1] if lo < 0 else [3, 1, 2, 7]
    return b.astype(dtype)


def _inputs(dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(hash(dtype) % 1000)
    ins = {"a": _signed(rng, dtype), "b": _divisor(rng, dtype)}
    if dtype.startswith("float"):
        ins["p"] = rng.uniform(0.25, 4.0, N).astype(dtype)
        nan = ins["a"].copy()
        nan[::3] = np.nan
        ins["n"] = nan
        # exact halves (round-half-to-even) and their neighbours
        h = rng.integers(-6, 7, N) + 0.5
        h[::4] += 0.25
        ins["h"] = h.astype(dtype)
    return ins


# ---- numpy references with the IR's integer semantics ---------------------------------------
def _trunc_divmod(a, b):
    a64, b64 = a.astype("int64"), b.astype("int64")
    if a.dtype == np.uint32:
        return (a // b), (a % b)
    q = a64 // b64
    q = q + ((a64 % b64 != 0) & ((a64 < 0) != (b64 < 0)))
    return q, a64 - q * b64


def _popcount(a):
    u = a.view(f"uint{a.dtype.itemsize * 8}")
    return np.bitwise_count(u).astype(a.dtype)


_erf = np.vectorize(math.erf)


def _f(fn):
    """Float reference computed in float64 (float16/float32 results rounded by compare's rtol)."""
    return lambda *xs: fn(*[x.astype("float64") for x in xs])


FLOAT_OPS: list[Op] = [
    ("add", lambda a, b, p, n, h: a + b, _f(lambda a, b, p, n, h: a + b), None),
    ("sub", lambda a, b, p, n, h: a - b, _f(lambda a, b, p, n, h: a - b), None),
    ("mul", lambda a, b, p, n, h: a * b, _f(lambda a, b, p, n, h: a * b), None),
    ("div", lambda a, b, p, n, h: a / b, _f(lambda a, b, p, n, h: a / b), None),
    ("neg", lambda a, b, p, n, h: -a, _f(lambda a, b, p, n, h: -a), None),
    ("exp", lambda a, b, p, n, h: te.exp(a), _f(lambda a, b, p, n, h: np.exp(a)), None),
    ("exp2", lambda a, b, p, n, h: te.exp2(a), _f(lambda a, b, p, n, h: np.exp2(a)), None),
    ("log", lambda a, b, p, n, h: te.log(p), _f(lambda a, b, p, n, h: np.log(p)), None),
    ("log2", lambda a, b, p, n, h: te.log2(p), _f(lambda a, b, p, n, h: np.log2(p)), None),
    ("sqrt", lambda a, b, p, n, h: te.sqrt(p), _f(lambda a, b, p, n, h: np.sqrt(p)), None),
    ("rsqrt", lambda a, b, p, n, h: te.rsqrt(p), _f(lambda a, b, p, n, h: 1 / np.sqrt(p)), None),
    ("tanh", lambda a, b, p, n, h: te.tanh(a), _f(lambda a, b, p, n, h: np.tanh(a)), None),
    ("sigmoid", lambda a, b, p, n, h: te.sigmoid(a),
     _f(lambda a, b, p, n, h: 1 / (1 + np.exp(-a))), None),
    ("erf", lambda a, b, p, n, h: te.erf(a), _f(lambda a, b, p, n, h: _erf(a)), None),
    ("pow", lambda a, b, p, n, h: te.pow(p, a), _f(lambda a, b, p, n, h: np.power(p, a)), None),
    ("abs", lambda a, b, p, n, h: te.abs(a), _f(lambda a, b, p, n, h: np.abs(a)), None),
    ("floor", lambda a, b, p, n, h: te.floor(a * 3.0), None, None),
    ("ceil", lambda a, b, p, n, h: te.ceil(a * 3.0), None, None),
    ("trunc", lambda a, b, p, n, h: te.trunc(a * 3.0), None, None),
    ("round", lambda a, b, p, n, h: te.round(h), None, None),
    ("fmod", lambda a, b, p, n, h: te.fmod(a * 5.0, b), None, None),
    ("isnan", lambda a, b, p, n, h: te.isnan(n), lambda a, b, p, n, h: np.isnan(n), None),
    ("min", lambda a, b, p, n, h: te.min(a, b), _f(lambda a, b, p, n, h: np.minimum(a, b)), None),
    ("max", lambda a, b, p, n, h: te.max(a, b), _f(lambda a, b, p, n, h: np.maximum(a, b)), None),
    ("min_nan_lhs", lambda a, b, p, n, h: te.min(n, b),
     _f(lambda a, b, p, n, h: np.minimum(n, b)), None),
    ("max_nan_rhs", lambda a, b, p, n, h: te.max(a, n),
     _f(lambda a, b, p, n, h: np.maximum(a, n)), None),
    ("select", lambda a, b, p, n, h: tir.Select(a > b, a, b * 2.0),
     _f(lambda a, b, p, n, h: np.where(a > b, a, b * 2)), None),
    ("if_then_else", lambda a, b, p, n, h: te.if_then_else(a < 0, -a, p),
     _f(lambda a, b, p, n, h: np.where(a < 0, -a, p)), None),
    ("lt", lambda a, b, p, n, h: a < b, lambda a, b, p, n, h: a < b, None),
    ("ge", lambda a, b, p, n, h: a >= b, lambda a, b, p, n, h: a >= b, None),
    ("eq_nan", lambda a, b, p, n, h: n == n, lambda a, b, p, n, h: n == n, None),
    ("ne_nan", lambda a, b, p, n, h: n != n, lambda a, b, p, n, h: n != n, None),
]


def _float_rounding_ref(name):
    """floor/ceil/trunc/round/fmod: computed on the dtype's own values (exact ops)."""
    def ref(a, b, p, n, h):
        x = (a * a.dtype.type(3)).astype("float64")
        if name == "floor":
            return np.floor(x)
        if name == "ceil":
            return np.ceil(x)
        if name == "trunc":
            return np.trunc(x)
        if name == "round":
            return np.rint(h)
        return np.fmod((a * a.dtype.type(5)).astype("float64"), b.astype("float64"))
    return ref


FLOAT_OPS = [(nm, e, r if r is not None else _float_rounding_ref(nm), t) for nm, e, r, t in FLOAT_OPS]


def _iops(dtype: str) -> list[Op]:
    signed = dtype.startswith("int")
    ops: list[Op] = [
        ("add", lambda a, b: a + b, lambda a, b: a + b),
        ("sub", lambda a, b: a - b, lambda a, b: a - b),
        ("mul", lambda a, b: a * b, lambda a, b: a * b),
        ("floordiv", tir.floordiv, lambda a, b: np.floor_divide(a, b)),
        ("floormod", tir.floormod, lambda a, b: np.mod(a, b)),
        ("truncdiv", tir.truncdiv, lambda a, b: _trunc_divmod(a, b)[0]),
        ("truncmod", tir.truncmod, lambda a, b: _trunc_divmod(a, b)[1]),
        ("floordiv_c3", lambda a, b: tir.floordiv(a, 3), lambda a, b: a // a.dtype.type(3)),
        ("floormod_c3", lambda a, b: tir.floormod(a, 3), lambda a, b: a % a.dtype.type(3)),
        ("truncdiv_c4", lambda a, b: tir.truncdiv(a, 4),
         lambda a, b: _trunc_divmod(a, np.full_like(a, 4))[0]),
        ("truncmod_c4", lambda a, b: tir.truncmod(a, 4),
         lambda a, b: _trunc_divmod(a, np.full_like(a, 4))[1]),
        ("min", lambda a, b: te.min(a, b), np.minimum),
        ("max", lambda a, b: te.max(a, b), np.maximum),
        ("abs", lambda a, b: te.abs(a), np.abs),
        ("popcount", lambda a, b: te.popcount(a), lambda a, b: _popcount(a)),
        ("bitand", lambda a, b: a & b, lambda a, b: a & b),
        ("bitor", lambda a, b: a | b, lambda a, b: a | b),
        ("bitxor", lambda a, b: a ^ b, lambda a, b: a ^ b),
        ("lt", lambda a, b: a < b, lambda a, b: a < b),
        ("le", lambda a, b: a <= b, lambda a, b: a <= b),
        ("gt", lambda a, b: a > b, lambda a, b: a > b),
        ("ge", lambda a, b: a >= b, lambda a, b: a >= b),
        ("eq", lambda a, b: a == b, lambda a, b: a == b),
        ("ne", lambda a, b: a != b, lambda a, b: a != b),
        ("and", lambda a, b: tir.all(a > 2, b > 2), lambda a, b: (a > 2) & (b > 2)),
        ("or", lambda a, b: tir.any(a < 3, b < 1), lambda a, b: (a < 3) | (b < 1)),
        ("not", lambda a, b: ~(a > b), lambda a, b: ~(a > b)),
        ("select", lambda a, b: tir.Select(a > b, a, b), lambda a, b: np.where(a > b, a, b)),
        ("if_then_else", lambda a, b: te.if_then_else(b > 1, a, b + 1),
         lambda a, b: np.where(b > 1, a, b + 1)),
    ]
    if signed:
        ops += [
            ("floordiv_cm3", lambda a, b: tir.floordiv(a, -3), lambda a, b: a // a.dtype.type(-3)),
            ("floormod_cm3", lambda a, b: tir.floormod(a, -3), lambda a, b: a % a.dtype.type(-3)),
            ("truncdiv_cm3", lambda a, b: tir.truncdiv(a, -3),
             lambda a, b: _trunc_divmod(a, np.full_like(a, -3))[0]),
            ("truncmod_cm3", lambda a, b: tir.truncmod(a, -3),
             lambda a, b: _trunc_divmod(a, np.full_like(a, -3))[1]),
            ("neg", lambda a, b: -a, lambda a, b: -a),
        ]
    return [(nm, e, r, 0.0) for nm, e, r in ops]


FLOAT_DTYPES = ("float32", "float64", "float16")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def _ops(dtype: str) -> list[Op]:
    return FLOAT_OPS if dtype.startswith("float") else _iops(dtype)


def _elementwise(expr, phs):
    return lambda i: expr(*[ph[i] for ph in phs])


# ---- one build per (dtype, layout, target), results cached -----------------------------------
_CACHE: dict[tuple[str, str, str], dict[str, tuple[np.ndarray, np.ndarray]]] = {}


def _run(dtype: str, layout: str, target: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    key = (dtype, layout, target)
    if key in _CACHE:
        return _CACHE[key]
    ins = _inputs(dtype)
    phs = {k: te.placeholder((N,), dtype, name=k) for k in ins}
    outs = []
    for name, expr, _, _ in _ops(dtype):
        outs.append(te.compute((N,), _elementwise(expr, list(phs.values())), name=name))
    s = te.create_schedule([o.op for o in outs])
    if layout == "vector":
        for o in outs:
            _, xi = s[o].split(o.op.axis[0], factor=8)
            s[o].vectorize(xi)
    args = [*phs.values(), *outs]
    f = tvm.build(s, args, target=target, name=f"ops_{dtype}")
    arrays = [tvm.nd.array(v.copy()) for v in ins.values()]
    arrays += [tvm.nd.array(np.full((N,), 0x55, o.dtype)) for o in outs]
    f(*arrays)
    res = {}
    with np.errstate(all="ignore"):
        for (name, _, ref, _), o, arr in zip(_ops(dtype), outs, arrays[len(ins):]):
            exp = np.asarray(ref(*[v.copy() for v in ins.values()]))
            if o.dtype.startswith("float"):
                exp = exp.astype(o.dtype)  # numpy's correctly rounded result in the dtype
            res[name] = (arr.numpy(), exp, o.dtype)
    _CACHE[key] = res
    return res


RTOL = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES)
def test_ops(dtype, target, layout):
    """Every op of ``dtype`` (see FLOAT_OPS / _iops); all wrong ops are reported together."""
    errors = []
    for name, (got, exp, odt) in _run(dtype, layout, target).items():
        rtol = RTOL.get(odt, 0.0)
        if name in ("erf", "tanh", "pow", "exp", "exp2", "sigmoid") and odt == "float32":
            rtol = 4e-6  # a few ulp between libm / vector math and numpy
        try:
            compare(got, exp, odt, rtol, rtol * 1e-2, f"{name} {dtype} {layout} {target}")
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


# ---- reductions ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_sum_max_min_over_two_axes(dtype):
    def sched():
        A = te.placeholder((7, 5, 13), dtype, name="A")
        j = te.reduce_axis((0, 5), name="j")
        k = te.reduce_axis((0, 13), name="k")
        S = te.compute((7,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="S")
        j2 = te.reduce_axis((0, 5), name="j2")
        k2 = te.reduce_axis((0, 13), name="k2")
        M = te.compute((7,), lambda i: te.max(A[i, j2, k2], axis=[j2, k2]), name="M")
        j3 = te.reduce_axis((0, 5), name="j3")
        k3 = te.reduce_axis((0, 13), name="k3")
        m = te.compute((7,), lambda i: te.min(A[i, j3, k3], axis=[k3, j3]), name="m")
        k4 = te.reduce_axis((0, 7), name="k4")
        k5 = te.reduce_axis((0, 13), name="k5")
        T = te.compute((5,), lambda jj: te.sum(A[k4, jj, k5], axis=[k4, k5],
                                               where=k5 > 2), name="T")
        s = te.create_schedule([S.op, M.op, m.op, T.op])
        return s, [A, S, M, m, T]

    def ref(a):
        acc = a.astype("float64") if dtype == "float32" else a
        return [acc.sum((1, 2)), a.max((1, 2)), a.min((1, 2)), acc[:, :, 3:].sum((0, 2))]

    check(sched, ref, rtol=1e-5 if dtype == "float32" else None,
          atol=1e-5 if dtype == "float32" else None)


def test_comm_reducer_product_and_argmin():
    def sched():
        prod = te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, t), name="prod")

        def fcombine(x, y):
            keep = x[1] <= y[1]
            return tir.Select(keep, x[0], y[0]), tir.Select(keep, x[1], y[1])

        argmin = te.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), te.max_value(t1)),
                                 name="argmin")
        A = te.placeholder((7, 13), name="A")
        k = te.reduce_axis((0, 13), name="k")
        P = te.compute((7,), lambda i: prod(A[i, k], axis=k), name="P")
        k2 = te.reduce_axis((0, 13), name="k2")
        idx, val = te.compute((7,), lambda i: argmin((k2.var, A[i, k2]), axis=k2), name="AM")
        I8 = te.placeholder((7, 13), "int8", name="I8")
        k3 = te.reduce_axis((0, 13), name="k3")
        PI = te.compute((7,), lambda i: prod(I8[i, k3], axis=k3), name="PI")  # wraps at 8 bits
        s = te.create_schedule([P.op, idx.op, PI.op])
        return s, [A, I8, P, idx, val, PI]

    def ref(a, i8):
        p = np.ones(7, "int64")
        for c in range(13):
            p = (p * i8[:, c].astype("int64"))
        return [a.astype("float64").prod(1), a.argmin(1).astype("int32"), a.min(1),
                p.astype("int8")]

    check(sched, ref, rtol=1e-5, atol=1e-6)


def test_float16_storage_arithmetic_and_reduction():
    def sched():
        A = te.placeholder((7, 13), "float16", name="A")
        B = te.placeholder((7, 13), "float16", name="B")
        C = te.compute((7, 13), lambda i, j: A[i, j] * B[i, j] + te.exp(A[i, j]), name="C")
        k = te.reduce_axis((0, 13), name="k")
        S = te.compute((7,), lambda i: te.sum(A[i, k].astype("float32"), axis=k), name="S")
        s = te.create_schedule([C.op, S.op])
        jo, ji = s[C].split(C.op.axis[1], factor=8)
        s[C].vectorize(ji)
        return s, [A, B, C, S]

    def ref(a, b):
        af, bf = a.astype("float32"), b.astype("float32")
        return [(af * bf + np.exp(af)).astype("float16"), af.astype("float64").sum(1)]

    check(sched, ref, rtol=2e-3, atol=2e-3)


def _last_argmax_reducer():
    """argmax whose ties go to the later element: the accumulator is fcombine's FIRST argument
    (as in TVM), and ``x[1] > y[1]`` keeps it only when strictly greater."""
    def fcombine(x, y):
        return tir.Select(x[1] > y[1], x[0], y[0]), tir.Select(x[1] > y[1], x[1], y[1])

    return te.comm_reducer(fcombine, lambda a, b: (tir.const(-1, a), te.min_value(b)))


def _three_reductions(d, argmax):
    """sum (fp16 accumulated in fp32), max and argmax of a (11, 13) ``d`` tensor over axis 0."""
    A = te.placeholder((11, 13), d, name=f"A_{d}")
    k = te.reduce_axis((0, 11), name="k")
    acc = "float32" if d == "float16" else d
    S = te.compute((13,), lambda j: te.sum(A[k, j].astype(acc), axis=k), name=f"S_{d}")
    k2 = te.reduce_axis((0, 11), name="k2")
    M = te.compute((13,), lambda j: te.max(A[k2, j], axis=k2), name=f"M_{d}")
    k3 = te.reduce_axis((0, 11), name="k3")
    idx, val = te.compute((13,), lambda j: argmax((k3.var, A[k3, j]), axis=k3), name=f"AM_{d}")
    return A, [S, M, idx, val], [(S, k), (M, k2), (idx, k3)]


def test_vectorized_parallel_reductions_every_dtype():
    """sum / max / argmax (with ties) over the outer axis, spatial axis vectorized + parallel."""
    dtypes = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float64")

    def sched():
        argmax = _last_argmax_reducer()
        args, outs, s_ops = [], [], []
        for d in dtypes:
            A, stage_outs, stage_axes = _three_reductions(d, argmax)
            args.append(A)
            outs += stage_outs
            s_ops += stage_axes
        s = te.create_schedule([t.op for t, _ in s_ops])
        for t, kk in s_ops:
            jo, ji = s[t].split(t.op.axis[0], 8)
            s[t].reorder(jo, kk, ji)
            s[t].vectorize(ji)
            s[t].parallel(jo)
        return s, args + outs

    def small(rng, shape, dtype):  # few distinct values: many ties
        if dtype.startswith("float"):
            return rng.integers(-8, 8, shape).astype(dtype) * 0.5
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -20), min(info.max, 20), shape).astype(dtype)

    def ref(*arrays):
        out = []
        for a in arrays:
            s = a.astype("float32").sum(0) if a.dtype == np.float16 else a.sum(0).astype(a.dtype)
            last = (a.shape[0] - 1 - a[::-1].argmax(0)).astype("int32")
            out += [s, a.max(0), last, a.max(0)]
        return out

    check(sched, ref, gens={f"A_{d}": small for d in dtypes}, rtol=0.0, atol=0.0)
