"""Casts between every pair of the issue's dtypes, on every backend, against numpy's astype.

All 121 casts are outputs of ONE function (one build per layout x backend). Data stays where the
cast is defined in C: float -> int only for values inside the target's range (truncation toward
zero), float -> unsigned from non-negative values; int -> int narrowing wraps (two's complement,
as numpy); anything -> bool is ``x != 0`` (NaN is true).
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir

from .util import TARGETS, check, compare

DTYPES = ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32")
N = 29


def _data(src: str, dst: str, rng: np.random.Generator) -> np.ndarray:
    if src == "bool":
        return rng.integers(0, 2, N).astype(bool)
    if src.startswith("float"):
        if dst == "bool":
            x = rng.uniform(-3, 3, N)
            x[:4] = [0.0, -0.0, np.nan, np.inf]
        elif dst.startswith("float"):
            x = rng.uniform(-70000, 70000, N) * rng.choice([1, 1e-3, 1e-6], N)
            x[:3] = [0.0, -0.0, np.nan]
            if dst == "float16" or src == "float16":
                x = np.clip(x, -60000, 60000)
        else:
            info = np.iinfo(dst)
            hi = min(info.max, 2000 if src == "float16" else 1e6)
            lo = 0 if info.min == 0 else -hi
            x = rng.uniform(lo, hi, N)
            x[:4] = [0.0, 0.75, max(lo + 0.5, -0.75), hi - 1]  # fractions truncate toward zero
        return x.astype(src)
    info = np.iinfo(src)
    x = rng.integers(info.min, info.max, N, endpoint=True, dtype="int64" if src != "uint32" else "uint64")
    x[:3] = [0, 1, info.max]
    return x.astype(src)


def _ref(x: np.ndarray, dst: str) -> np.ndarray:
    if x.dtype.kind in "iu" and dst == "float16":
        with np.errstate(over="ignore"):  # int32/int64 beyond 65504 -> inf, as intended
            return x.astype("float64").astype(dst)  # one correct rounding
    return x.astype(dst)


_CACHE: dict[tuple[str, str], dict] = {}


def _run(layout: str, target: str) -> dict:
    key = (layout, target)
    if key in _CACHE:
        return _CACHE[key]
    rng = np.random.default_rng(2)
    ins, outs, data = [], [], []
    for src in DTYPES:
        for dst in DTYPES:
            x = _data(src, dst, rng)
            ph = te.placeholder((N,), src, name=f"x_{src}_{dst}")
            ins.append(ph)
            data.append(x)
            outs.append(te.compute((N,), _cast(ph, dst), name=f"{src}_to_{dst}"))
    s = te.create_schedule([o.op for o in outs])
    if layout == "vector":
        for o in outs:
            _, xi = s[o].split(o.op.axis[0], factor=8)
            s[o].vectorize(xi)
    f = tvm.build(s, [*ins, *outs], target=target, name="casts")
    arrays = [tvm.nd.array(x.copy()) for x in data]
    arrays += [tvm.nd.array(np.zeros(N, o.dtype)) for o in outs]
    f(*arrays)
    res = {}
    for k, (src, dst) in enumerate((s_, d_) for s_ in DTYPES for d_ in DTYPES):
        res[(src, dst)] = (arrays[len(ins) + k].numpy(), _ref(data[k], dst))
    _CACHE[key] = res
    return res


def _cast(ph, dst):
    return lambda i: ph[i].astype(dst)


@pytest.mark.parametrize("layout", ["scalar", "vector"])
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("src", DTYPES)
def test_cast(src, target, layout):
    """``src`` to every dtype; all wrong destinations are reported together."""
    res = _run(layout, target)
    errors = []
    for dst in DTYPES:
        got, exp = res[(src, dst)]
        try:
            # float -> float narrowing must round correctly (no double rounding): exact
            compare(got, exp, dst, 0.0, 0.0, f"cast {src} -> {dst} ({layout}, {target})")
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "\n".join(errors)


# ---- mixed dtypes in expressions, symbolic sizes ------------------------------------------------
def test_mixed_dtype_expression_symbolic():
    def sched():
        n = te.var("n")
        A = te.placeholder((n,), "int8", name="A")
        B = te.placeholder((n,), "float16", name="B")
        C = te.placeholder((n,), "uint16", name="C")
        D = te.compute((n,), lambda i: (A[i].astype("float32") * B[i].astype("float32")
                                        + C[i].astype("float32")).astype("float64"), name="D")
        E_ = te.compute((n,), lambda i: A[i].astype("int32") * C[i].astype("int32"), name="E")
        s = te.create_schedule([D.op, E_.op])
        xo, xi = s[D].split(D.op.axis[0], factor=4)
        s[D].vectorize(xi)
        return s, [A, B, C, D, E_]

    def ref(a, b, c, **_):
        d = (a.astype("float32") * b.astype("float32") + c.astype("float32")).astype("float64")
        return [d, a.astype("int32") * c.astype("int32")]

    check(sched, ref, [{"n": 1}, {"n": 13}, {"n": 31}], rtol=1e-6, atol=1e-6)


def test_bool_tensors():
    def sched():
        A = te.placeholder((13,), "bool", name="A")
        B = te.placeholder((13,), "float32", name="B")
        C = te.compute((13,), lambda i: te.if_then_else(A[i], B[i], -B[i]), name="C")
        D = te.compute((13,), lambda i: ~A[i] | (B[i] > 0), name="D")
        s = te.create_schedule([C.op, D.op])
        s[C].vectorize(C.op.axis[0])
        return s, [A, B, C, D]

    check(sched, lambda a, b: [np.where(a, b, -b), ~a | (b > 0)])


# ---- constants at the edges of each dtype -------------------------------------------------------
def _const_kernel(dtype, exprs, ref, gen=None, rtol=0.0):
    def sched():
        A = te.placeholder((17,), dtype, name="A")
        outs = [te.compute((17,), _apply(e, A), name=f"o{k}") for k, e in enumerate(exprs)]
        return te.create_schedule([o.op for o in outs]), [A, *outs]

    check(sched, ref, rtol=rtol, atol=0.0, gens={"A": gen} if gen else None)


def _apply(e, A):
    return lambda i: e(A[i])


def _full_range(rng, shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True,
                        dtype="uint64" if dtype == "uint32" else "int64").astype(dtype)


def test_int64_extreme_constants():
    m = np.int64(-(2 ** 63))
    with np.errstate(over="ignore"):
        _const_kernel("int64", [lambda x: x + (2 ** 40), lambda x: x * (2 ** 33 + 1),
                                lambda x: x & 0x7FFFFFFF00000000, lambda x: x - (-(2 ** 63)),
                                lambda x: x * (-(2 ** 63))],
                      lambda a: [a + 2 ** 40, a * (2 ** 33 + 1), a & 0x7FFFFFFF00000000, a - m, a * m],
                      _full_range)


def test_uint32_int8_uint16_edge_constants():
    _const_kernel("uint32", [lambda x: x + 4000000000, lambda x: x & 0xF0000000,
                             lambda x: tir.floordiv(x, 3000000000), lambda x: x * 4294967295],
                  lambda a: [a + np.uint32(4000000000), a & np.uint32(0xF0000000),
                             a // np.uint32(3000000000), a * np.uint32(4294967295)], _full_range)
    _const_kernel("int8", [lambda x: x + (-128), lambda x: te.max(x, tir.const(-128, "int8")),
                           lambda x: x * tir.const(127, "int8"), lambda x: x - (-128)],
                  lambda a: [a + np.int8(-128), a, a * np.int8(127), a - np.int8(-128)], _full_range)
    _const_kernel("uint16", [lambda x: x + 65535, lambda x: x * 257],
                  lambda a: [a + np.uint16(65535), a * np.uint16(257)], _full_range)


def test_float_constants_exact():
    _const_kernel("float64", [lambda x: x * 0.1, lambda x: x / 3.0, lambda x: x + 1e-300],
                  lambda a: [a * 0.1, a / 3.0, a + 1e-300])
    _const_kernel("float32", [lambda x: x / 3.0, lambda x: x / 0.1, lambda x: x * 1e-45,
                              lambda x: te.max(x, float("-inf")),
                              lambda x: tir.Select(x > 0, float("nan"), x)],
                  lambda a: [a / np.float32(3), a / np.float32(0.1), a * np.float32(1e-45), a,
                             np.where(a > 0, np.float32(np.nan), a)])
