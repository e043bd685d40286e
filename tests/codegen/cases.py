"""Backend-independent cases for the CPU code generators (C and LLVM): hand-built IR-form-2
PrimFuncs, their arguments on random data and the numpy result expected.

A backend test needs only a ``make_lib(funcs, extra_c) -> lib`` where ``lib(name, *args)`` calls
a compiled function with numpy arrays / Python scalars (ABI of tvmpy/codegen/abi.py) and returns
its int32 result, and ``lib.last_error()`` reads ``__tvmpy_last_error``. :class:`CtypesLib` is
such a lib for any object code; then, at module level::

    all_cases, batch_lib, test_case, test_batch_builds = cases.backend_suite(make_lib, "C source")

``extra_c``: C source of external functions a case calls (tensorize-style micro-kernels); the
backend compiles it with the system compiler and links it into the same library.
"""

from __future__ import annotations

import ctypes
import math
import os
import tempfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmpy.codegen import abi
from tvmpy.ir import dtype as dt
from tvmpy.tir import expr as E
from tvmpy.tir import op
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import Buffer, decl_buffer
from tvmpy.tir.function import PrimFunc

__all__ = ["Case", "CASE_NAMES", "make_case", "run_case", "CtypesLib", "aligned", "buf", "func",
           "compile_extra_c"]


# ---------------------------------------------------------------------------------------------
# running
_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
           "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64, "float32": ctypes.c_float,
           "float64": ctypes.c_double, "bool": ctypes.c_bool}


def compile_extra_c(source: str) -> bytes:
    """Object code of helper C source (external functions called by a case)."""
    from tvmpy.runtime.linker import compile_c

    return compile_c(source, ("-O2", "-std=gnu11", "-fPIC"), name="extern")


class CtypesLib:
    """Objects linked into a temporary shared library, called through ctypes."""

    def __init__(self, funcs: Sequence[PrimFunc], objects: Sequence[bytes],
                 link_libs: Sequence[str] = (), cpu: dict | None = None):
        from tvmpy.runtime.host_cpu import unsupported
        from tvmpy.runtime.linker import link_shared

        # code for a CPU with features this one lacks is never run (it would die of SIGILL)
        refused = unsupported({"cpu": cpu}) if cpu else None
        if refused:
            raise RuntimeError(f"test library not loaded: {refused}")
        self.funcs = {f.name: f for f in funcs}
        tmp = tempfile.mkdtemp(prefix="tvmpy_codegen_case_")
        path = os.path.join(tmp, "lib.so")
        link_shared(list(objects), abi.module_metadata(list(funcs)), path, list(link_libs))
        self.lib = ctypes.CDLL(path)
        os.unlink(path)
        os.rmdir(tmp)

    def last_error(self) -> str:
        p = ctypes.c_char_p.in_dll(self.lib, abi.ERROR_SYMBOL)
        return p.value.decode() if p.value else ""

    def __call__(self, name: str, *args: Any) -> int:
        sig = abi.signature(self.funcs[name])
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int32
        if len(args) != len(sig.params):
            raise TypeError(f"{name} takes {len(sig.params)} arguments, got {len(args)}")
        cargs: list[Any] = []
        for p, a in zip(sig.params, args):
            if p.kind == "buffer":
                assert isinstance(a, np.ndarray) and a.flags.c_contiguous
                assert a.ctypes.data % 64 == 0, "the ABI promises 64-byte aligned buffers"
                cargs.append(ctypes.c_void_p(a.ctypes.data))
            else:
                cargs.append(_CTYPES[p.dtype](a))
        for sv in sig.shape_vars:
            cargs.append(_CTYPES[sv.dtype](args[sv.arg_index].shape[sv.dim]))
        return fn(*cargs)


@dataclass
class Case:
    """One compiled function, its arguments (in parameter order) and what must come out."""

    name: str
    func: PrimFunc
    args: list[Any]
    expected: dict[int, np.ndarray]  # argument index -> its contents after the call
    rtol: float = 1e-5
    atol: float = 1e-6
    ret: int = 0
    error: str = ""  # a substring of __tvmpy_last_error when ret == -1
    extra_c: str = ""
    extra_funcs: list[PrimFunc] = field(default_factory=list)


def run_case(case: Case, make_lib: Callable[[list[PrimFunc], str], Any]) -> None:
    lib = make_lib([case.func, *case.extra_funcs], case.extra_c)
    args = [aligned(a) if isinstance(a, np.ndarray) else a for a in case.args]
    ret = lib(case.func.name, *args)
    if case.ret == 0 and ret != 0:
        raise AssertionError(f"{case.name}: returned {ret}, error {lib.last_error()!r}")
    assert ret == case.ret, f"{case.name}: returned {ret}, expected {case.ret}"
    if case.error:
        assert case.error in lib.last_error(), f"{case.name}: error {lib.last_error()!r}"
    for idx, want in case.expected.items():
        got = args[idx]
        assert got.dtype == want.dtype, f"{case.name}: arg {idx} dtype {got.dtype} vs {want.dtype}"
        if dt.is_float(str(want.dtype)):
            np.testing.assert_allclose(got.astype("float64"), want.astype("float64"),
                                       rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=f"{case.name}: argument {idx}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"{case.name}: argument {idx}")


# ---------------------------------------------------------------------------------------------
# building blocks
def aligned(a: np.ndarray) -> np.ndarray:
    """A 64-byte aligned copy of ``a`` (the ABI promises aligned buffers)."""
    a = np.ascontiguousarray(a)
    raw = np.empty(a.nbytes + 64, dtype=np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def buf(name: str, n: Any, dtype: str = "float32", scope: str = "global") -> Buffer:
    return decl_buffer((n,), dtype, name, scope=scope)


def func(name: str, params: Sequence[Any], body: S.Stmt) -> PrimFunc:
    """A lowered PrimFunc with ``params`` (Buffers or scalar Vars) and ``body``."""
    ps, bmap = [], {}
    for p in params:
        if isinstance(p, E.Var):
            ps.append(p)
        else:
            ps.append(p.data)
            bmap[p.data] = p
    return PrimFunc(ps, body, bmap, {"global_symbol": name, "tir.lowered": True})


def loop(var: E.Var, extent: Any, body: S.Stmt, kind: S.ForKind = S.ForKind.SERIAL,
         start: Any = 0) -> S.For:
    return S.For(var, E.const(start, var.dtype) if isinstance(start, int) else start,
                 E.const(extent, var.dtype) if isinstance(extent, int) else extent, kind, body)


def rand(rng: np.random.Generator, n: int, dtype: str, lo: float = -10, hi: float = 10,
         full_range: bool = False) -> np.ndarray:
    npd = dt.to_numpy(dtype)
    if dt.is_float(dtype):
        return rng.uniform(lo, hi, n).astype(npd)
    if dt.is_bool(dtype):
        return rng.integers(0, 2, n).astype(bool)
    info = np.iinfo(npd)
    if full_range:
        return rng.integers(info.min, info.max, n, dtype=npd, endpoint=True)
    return rng.integers(max(info.min, lo), min(info.max, hi) + 1, n).astype(npd)


def _elementwise(name: str, n: int, in_dtypes: Sequence[str], out_dtype: str,
                 fn: Callable[..., E.PrimExpr], inputs: Sequence[np.ndarray], want: np.ndarray,
                 **kw: Any) -> Case:
    """``out[i] = fn(in0[i], in1[i], ...)`` over a symbolic extent."""
    size = E.Var("n")
    ins = [buf(f"A{k}", size, d) for k, d in enumerate(in_dtypes)]
    out = buf("B", size, out_dtype)
    i = E.Var("i")
    body = loop(i, size, S.BufferStore(out, fn(*[b[i] for b in ins]), [i]))
    f = func(name, [*ins, out], body)
    garbage = np.zeros(n, dt.to_numpy(out_dtype))
    return Case(name, f, [*inputs, garbage], {len(ins): want}, **kw)


_REGISTRY: dict[str, Callable[[np.random.Generator], Case]] = {}


def case(name: str) -> Callable:
    def deco(fn: Callable[[np.random.Generator], Case]) -> Callable:
        assert name not in _REGISTRY, name
        _REGISTRY[name] = fn
        return fn
    return deco


def make_case(name: str, seed: int = 0) -> Case:
    rng = np.random.default_rng(zlib.crc32(name.encode()) + seed)
    return _REGISTRY[name](rng)


INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
ALL = ["bool", *INTS, *FLOATS]
N = 37  # a prime: no vector width divides it


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {}


# ---------------------------------------------------------------------------------------------
# arithmetic per dtype (integers over their full range: wrap-around must match numpy)
def _arith(dtype: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        a = rand(rng, N, dtype, full_range=True)
        b = rand(rng, N, dtype, full_range=True)
        with np.errstate(all="ignore"):
            want = (a * b + a - b).astype(a.dtype)
        return _elementwise(f"arith_{dtype}", N, [dtype, dtype], dtype,
                            lambda x, y: x * y + x - y, [a, b], want, **_tol(dtype))
    return make


for _d in [*INTS, *FLOATS]:
    case(f"arith_{_d}")(_arith(_d))


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    q = np.floor_divide(a, b)
    fix = (np.mod(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(a.dtype)


def _divmod(dtype: str, kind: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        a = rand(rng, N, dtype, -100, 100)
        b = rand(rng, N, dtype, -9, 9)
        if dt.is_float(dtype):
            b = np.where(np.abs(b) < 0.5, np.asarray(1.5, b.dtype), b).astype(b.dtype)
        else:
            b = np.where(b == 0, 3, b).astype(b.dtype)
        a[:4] = np.array([-7, 7, -8, 0], a.dtype) if not dt.is_uint(dtype) else [7, 8, 0, 9]
        b[:4] = np.array([2, -2, 4, -3], b.dtype) if not dt.is_uint(dtype) else [2, 4, 3, 9]
        with np.errstate(all="ignore"):
            if kind == "floordiv":
                want = np.floor_divide(a, b) if not dt.is_float(dtype) else np.floor(a / b)
                fn = op.floordiv
            elif kind == "floormod":
                want = np.mod(a, b) if not dt.is_float(dtype) else a - np.floor(a / b) * b
                fn = op.floormod
            elif kind == "truncdiv":
                want = _trunc_div(a, b) if not dt.is_float(dtype) else a / b
                fn = op.truncdiv if not dt.is_float(dtype) else op.div
            else:
                want = a - _trunc_div(a, b) * b if not dt.is_float(dtype) else np.fmod(a, b)
                fn = op.truncmod
        want = want.astype(a.dtype)
        return _elementwise(f"{kind}_{dtype}", N, [dtype, dtype], dtype, fn, [a, b], want,
                            **_tol(dtype))
    return make


for _d in [*INTS, "float32", "float64", "float16"]:
    for _k in ("floordiv", "floormod", "truncdiv", "truncmod"):
        case(f"{_k}_{_d}")(_divmod(_d, _k))


def _minmax(dtype: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        a = rand(rng, N, dtype, full_range=True)
        b = rand(rng, N, dtype, full_range=True)
        if dt.is_float(dtype):  # NaN on either side propagates (numpy.minimum / maximum)
            a[0], b[1], a[2], b[2] = np.nan, np.nan, np.nan, np.nan
            a[3], b[3] = np.inf, -np.inf
        out = buf("C", N, dtype)
        want_min, want_max = np.minimum(a, b), np.maximum(a, b)
        size = E.Var("n")
        A, B, Mn, Mx = (buf(x, size, dtype) for x in ("A", "B", "Mn", "Mx"))
        i = E.Var("i")
        body = loop(i, size, S.seq(S.BufferStore(Mn, op.min(A[i], B[i]), [i]),
                                   S.BufferStore(Mx, op.max(A[i], B[i]), [i])))
        del out
        z = np.zeros(N, a.dtype)
        return Case(f"minmax_{dtype}", func(f"minmax_{dtype}", [A, B, Mn, Mx], body),
                    [a, b, z, z.copy()], {2: want_min, 3: want_max})
    return make


for _d in [*INTS, *FLOATS]:
    case(f"minmax_{_d}")(_minmax(_d))


# ---------------------------------------------------------------------------------------------
# float intrinsics (float16 computes in float32 and rounds)
def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, float]] = {
    "exp": (np.exp, -5, 5), "exp2": (np.exp2, -5, 5), "exp10": (lambda x: 10.0 ** x, -3, 3),
    "log": (np.log, 0.01, 10), "log2": (np.log2, 0.01, 10), "log10": (np.log10, 0.01, 10),
    "log1p": (np.log1p, -0.5, 10), "sqrt": (np.sqrt, 0, 10),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.1, 10), "tanh": (np.tanh, -4, 4),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -8, 8), "erf": (_erf, -3, 3),
    "fabs": (np.abs, -5, 5), "floor": (np.floor, -5, 5), "ceil": (np.ceil, -5, 5),
    "round": (np.rint, -5, 5), "nearbyint": (np.rint, -5, 5), "trunc": (np.trunc, -5, 5),
    "sin": (np.sin, -3, 3), "cos": (np.cos, -3, 3), "tan": (np.tan, -1, 1),
    "sinh": (np.sinh, -2, 2), "cosh": (np.cosh, -2, 2), "asin": (np.arcsin, -0.99, 0.99),
    "acos": (np.arccos, -0.99, 0.99), "atan": (np.arctan, -4, 4),
}
_BINARY = {"pow": (np.power, 0.1, 3), "fmod": (np.fmod, -5, 5), "atan2": (np.arctan2, -3, 3)}


def _unary(name: str, dtype: str) -> Callable[[np.random.Generator], Case]:
    ref, lo, hi = _UNARY[name]

    def make(rng: np.random.Generator) -> Case:
        x = rand(rng, N, dtype, lo, hi)
        if name in ("round", "nearbyint", "floor", "ceil", "trunc"):
            x[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]  # ties round to even
        want = ref(x.astype("float64" if dtype == "float64" else "float32")).astype(x.dtype)
        fn = getattr(op, name)
        return _elementwise(f"{name}_{dtype}", N, [dtype], dtype, fn, [x], want, **_tol(dtype))
    return make


def _fbinary(name: str, dtype: str) -> Callable[[np.random.Generator], Case]:
    ref, lo, hi = _BINARY[name]

    def make(rng: np.random.Generator) -> Case:
        x, y = rand(rng, N, dtype, lo, hi), rand(rng, N, dtype, lo, hi)
        if name == "fmod":
            y = np.where(np.abs(y) < 0.5, np.asarray(2.5, y.dtype), y).astype(y.dtype)
        wide = "float64" if dtype == "float64" else "float32"
        want = ref(x.astype(wide), y.astype(wide)).astype(x.dtype)
        fn = getattr(op, name)
        return _elementwise(f"{name}_{dtype}", N, [dtype, dtype], dtype, fn, [x, y], want,
                            **_tol(dtype))
    return make


for _d in FLOATS:
    for _n in _UNARY:
        case(f"{_n}_{_d}")(_unary(_n, _d))
    for _n in _BINARY:
        case(f"{_n}_{_d}")(_fbinary(_n, _d))


def _predicate(name: str, dtype: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        x = rand(rng, N, dtype)
        x[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
        want = getattr(np, name)(x)
        return _elementwise(f"{name}_{dtype}", N, [dtype], "bool", getattr(op, name), [x], want)
    return make


for _d in FLOATS:
    for _n in ("isnan", "isinf", "isfinite"):
        case(f"{_n}_{_d}")(_predicate(_n, _d))


# ---------------------------------------------------------------------------------------------
# integer intrinsics
def _popcount_ref(a: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(a.view(np.uint8).reshape(len(a), -1), axis=1)
    return bits.sum(axis=1).astype(a.dtype)


def _bitwise(dtype: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        a = rand(rng, N, dtype, full_range=True)
        b = rand(rng, N, dtype, full_range=True)
        sh = rand(rng, N, dtype, 0, dt.bits_of(dtype) - 1)
        size = E.Var("n")
        A, B, SH = buf("A", size, dtype), buf("B", size, dtype), buf("SH", size, dtype)
        outs = [buf(f"O{k}", size, dtype) for k in range(7)]
        i = E.Var("i")
        exprs = [A[i] & B[i], A[i] | B[i], A[i] ^ B[i], ~A[i], A[i] << SH[i], A[i] >> SH[i],
                 op.popcount(A[i])]
        body = loop(i, size, S.seq(*[S.BufferStore(o, x, [i]) for o, x in zip(outs, exprs)]))
        with np.errstate(all="ignore"):
            wants = [a & b, a | b, a ^ b, ~a, np.left_shift(a, sh).astype(a.dtype),
                     np.right_shift(a, sh), _popcount_ref(a)]
        args = [a, b, sh] + [np.zeros(N, a.dtype) for _ in outs]
        return Case(f"bitwise_{dtype}", func(f"bitwise_{dtype}", [A, B, SH, *outs], body), args,
                    {3 + k: w for k, w in enumerate(wants)})
    return make


for _d in INTS:
    case(f"bitwise_{_d}")(_bitwise(_d))


# ---------------------------------------------------------------------------------------------
# casts between every pair of dtypes, on values the destination can represent (floats -> ints
# in range; ints -> narrower ints wrap, as numpy's astype)
def _cast_values(rng: np.random.Generator, src: str, dst: str) -> np.ndarray:
    if dt.is_float(src):
        lo, hi = (-100.0, 100.0) if dt.is_int(dst) else (0.0, 200.0)
        if dst in ("int8",):
            lo, hi = -100.0, 100.0
        if dst in ("uint8",):
            lo, hi = 0.0, 200.0
        if dt.is_float(dst) or dt.is_bool(dst):
            lo, hi = -1000.0, 1000.0
        x = rand(rng, N, src, lo, hi)
        if dt.is_bool(dst):
            x[:3] = [0.0, -0.0, np.nan]
        return x
    return rand(rng, N, src, full_range=True)


def _cast(src: str, dst: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        x = _cast_values(rng, src, dst)
        with np.errstate(all="ignore"):
            if dt.is_float(src) and dt.is_integer(dst) and not dt.is_bool(dst):
                want = np.trunc(x).astype(dt.to_numpy(dst))
            else:
                want = x.astype(dt.to_numpy(dst))
        return _elementwise(f"cast_{src}_{dst}", N, [src], dst, lambda v: E.cast(v, dst), [x],
                            want, rtol=1e-6 if dst != "float16" else 1e-3, atol=0)
    return make


for _s in ALL:
    for _t in ALL:
        if _s != _t:
            case(f"cast_{_s}_{_t}")(_cast(_s, _t))


@case("float16_chain")
def _float16_chain(rng: np.random.Generator) -> Case:
    """Each float16 operation rounds to half, exactly as numpy's float16 arithmetic."""
    a, b = rand(rng, N, "float16", -4, 4), rand(rng, N, "float16", 0.5, 4)
    want = ((a * b + a) / b - a * a).astype("float16")
    return _elementwise("float16_chain", N, ["float16", "float16"], "float16",
                        lambda x, y: (x * y + x) / y - x * x, [a, b], want, rtol=0, atol=0)


@case("compare_logical")
def _compare_logical(rng: np.random.Generator) -> Case:
    size = E.Var("n")
    A, B = buf("A", size, "int32"), buf("B", size, "int32")
    P, Q = buf("P", size, "bool"), buf("Q", size, "bool")
    outs = [buf(f"O{k}", size, "bool") for k in range(9)]
    i = E.Var("i")
    exprs = [A[i] < B[i], A[i] <= B[i], A[i] > B[i], A[i] >= B[i], A[i] == B[i], A[i] != B[i],
             E.And(P[i], Q[i]), E.Or(P[i], E.Not(Q[i])),
             E.Or(E.And(A[i] < 0, P[i]), E.And(Q[i], E.Not(P[i])))]
    body = loop(i, size, S.seq(*[S.BufferStore(o, x, [i]) for o, x in zip(outs, exprs)]))
    a, b = rand(rng, N, "int32", -3, 3), rand(rng, N, "int32", -3, 3)
    p, q = rand(rng, N, "bool"), rand(rng, N, "bool")
    wants = [a < b, a <= b, a > b, a >= b, a == b, a != b, p & q, p | ~q, ((a < 0) & p) | (q & ~p)]
    args = [a, b, p, q] + [np.zeros(N, bool) for _ in outs]
    return Case("compare_logical", func("compare_logical", [A, B, P, Q, *outs], body), args,
                {4 + k: w for k, w in enumerate(wants)})


# ---------------------------------------------------------------------------------------------
# control flow and expressions
@case("select_if_then_else")
def _select(rng: np.random.Generator) -> Case:
    """Select on values; if_then_else guarding a load that would be out of bounds."""
    size = E.Var("n")
    A, B, C, D = (buf(x, size) for x in "ABCD")
    i = E.Var("i")
    body = loop(i, size, S.seq(
        S.BufferStore(C, E.Select(A[i] > B[i], A[i] - B[i], B[i] * 2.0), [i]),
        S.BufferStore(D, op.if_then_else(i < size - 1, A[i + 1], E.const(-1.0)), [i])))
    a, b = rand(rng, N, "float32"), rand(rng, N, "float32")
    want_c = np.where(a > b, a - b, b * 2).astype("float32")
    want_d = np.append(a[1:], -1).astype("float32")
    z = np.zeros(N, "float32")
    return Case("select_if_then_else", func("select_if_then_else", [A, B, C, D], body),
                [a, b, z, z.copy()], {2: want_c, 3: want_d})


@case("let_expr_and_stmt")
def _let(rng: np.random.Generator) -> Case:
    size = E.Var("n")
    A, B = buf("A", size), buf("B", size)
    i = E.Var("i")
    x, y = E.Var("x", "float32"), E.Var("t", "int32")
    value = E.Let(x, A[i] * 2.0, x * x + x)
    body = loop(i, size, S.LetStmt(y, i * 3 - 1, S.BufferStore(B, value + E.cast(y, "float32"),
                                                               [i])))
    a = rand(rng, N, "float32")
    want = ((a * 2) ** 2 + a * 2 + np.arange(N) * 3 - 1).astype("float32")
    return Case("let_expr_and_stmt", func("let_expr_and_stmt", [A, B], body),
                [a, np.zeros(N, "float32")], {1: want})


@case("if_else_chain")
def _if_chain(rng: np.random.Generator) -> Case:
    size = E.Var("n")
    A, B = buf("A", size, "int32"), buf("B", size, "int32")
    i = E.Var("i")
    st = S.IfThenElse(A[i] < -3, S.BufferStore(B, E.const(-1), [i]),
                      S.IfThenElse(A[i] < 3, S.BufferStore(B, A[i] * 10, [i]),
                                   S.BufferStore(B, E.const(1), [i])))
    a = rand(rng, N, "int32", -10, 10)
    want = np.where(a < -3, -1, np.where(a < 3, a * 10, 1)).astype("int32")
    return Case("if_else_chain", func("if_else_chain", [A, B], loop(i, size, st)),
                [a, np.zeros(N, "int32")], {1: want})


@case("scalar_params")
def _scalar_params(rng: np.random.Generator) -> Case:
    size = E.Var("n")
    A, B = buf("A", size), buf("B", size)
    alpha, k = E.Var("alpha", "float32"), E.Var("k", "int64")
    i = E.Var("i")
    body = loop(i, size, S.BufferStore(B, A[i] * alpha + E.cast(k, "float32"), [i]))
    a = rand(rng, N, "float32")
    return Case("scalar_params", func("scalar_params", [A, alpha, k, B], body),
                [a, 1.5, -7, np.zeros(N, "float32")], {3: (a * 1.5 - 7).astype("float32")})


@case("int64_indices")
def _int64(rng: np.random.Generator) -> Case:
    size = E.Var("n", "int64")
    A, B = buf("A", size), buf("B", size)
    i = E.Var("i", "int64")
    body = loop(i, size, S.BufferStore(B, A[size - 1 - i] + E.cast(i, "float32"), [i]))
    a = rand(rng, N, "float32")
    return Case("int64_indices", func("int64_indices", [A, B], body),
                [a, np.zeros(N, "float32")], {1: (a[::-1] + np.arange(N)).astype("float32")})


@case("unrolled_loop")
def _unrolled(rng: np.random.Generator) -> Case:
    A, B = buf("A", 8 * N), buf("B", N)
    i, j = E.Var("i"), E.Var("j")
    body = loop(i, N, S.seq(
        S.BufferStore(B, E.const(0.0), [i]),
        loop(j, 8, S.BufferStore(B, B[i] + A[i * 8 + j] * E.cast(j + 1, "float32"), [i]),
             S.ForKind.UNROLLED)))
    a = rand(rng, 8 * N, "float32")
    want = (a.reshape(N, 8) * np.arange(1, 9)).sum(axis=1).astype("float32")
    return Case("unrolled_loop", func("unrolled_loop", [A, B], body),
                [a, np.zeros(N, "float32")], {1: want})


@case("reinterpret_bits")
def _reinterpret(rng: np.random.Generator) -> Case:
    a = rand(rng, N, "float32")
    return _elementwise("reinterpret_bits", N, ["float32"], "int32",
                        lambda x: op.reinterpret("int32", x), [a], a.view("int32"))


# ---------------------------------------------------------------------------------------------
# vectors
def _ramp(base: E.PrimExpr, lanes: int, stride: int = 1) -> E.Ramp:
    return E.Ramp(base, E.const(stride, base.dtype), lanes)


@case("vector_add")
def _vector_add(rng: np.random.Generator) -> Case:
    """C[i*16 : i*16+16] = A[...] * B[...] + x, for a lane count wider than some registers."""
    m = 5
    A, B, C = (buf(x, 16 * m) for x in "ABC")
    x = E.Var("x", "float32")
    i = E.Var("i")
    r = _ramp(i * 16, 16)
    body = loop(i, m, S.BufferStore(C, A[r] * B[r] + E.Broadcast(x, 16), [r]))
    a, b = rand(rng, 16 * m, "float32"), rand(rng, 16 * m, "float32")
    return Case("vector_add", func("vector_add", [A, B, x, C], body),
                [a, b, 0.25, np.zeros(16 * m, "float32")], {3: (a * b + 0.25).astype("float32")})


@case("vector_strided_gather")
def _vector_gather(rng: np.random.Generator) -> Case:
    m = 6
    A, C = buf("A", 8 * m), buf("C", 4 * m)
    i = E.Var("i")
    body = loop(i, m, S.BufferStore(C, A[_ramp(i * 8 + 1, 4, 2)], [_ramp(i * 4, 4)]))
    a = rand(rng, 8 * m, "float32")
    return Case("vector_strided_gather", func("vector_strided_gather", [A, C], body),
                [a, np.zeros(4 * m, "float32")], {1: a[1::2].copy()})


@case("vector_ops")
def _vector_ops(rng: np.random.Generator) -> Case:
    """Vector compare, Select, cast, intrinsic, min and floordiv by lanes."""
    m, L = 4, 8
    A = buf("A", L * m)
    Bi, C, D = buf("Bi", L * m, "int32"), buf("C", L * m), buf("D", L * m, "int32")
    i = E.Var("i")
    r = _ramp(i * L, L)
    v = A[r]
    sel = E.Select(v > E.Broadcast(E.const(0.0), L), op.exp(v * 0.5), op.min(v, v * v))
    idx = E.Ramp(i * L, E.const(1), L)
    body = loop(i, m, S.seq(
        S.BufferStore(C, sel, [r]),
        S.BufferStore(D, E.cast(v * 3.0, "int32x8") + op.floordiv(idx - 13, Bi[r]), [r])))
    a = rand(rng, L * m, "float32", -2, 2)
    b = rand(rng, L * m, "int32", 1, 5)
    want_c = np.where(a > 0, np.exp(a * 0.5), np.minimum(a, a * a)).astype("float32")
    want_d = (np.trunc(a * 3).astype("int32") + np.floor_divide(np.arange(L * m) - 13, b))
    return Case("vector_ops", func("vector_ops", [A, Bi, C, D], body),
                [a, b, np.zeros(L * m, "float32"), np.zeros(L * m, "int32")],
                {2: want_c, 3: want_d.astype("int32")})


@case("vector_shuffle")
def _vector_shuffle(rng: np.random.Generator) -> Case:
    """Reverse each group of 4 and interleave two vectors."""
    m = 3
    A, B, C, D = buf("A", 4 * m), buf("B", 4 * m), buf("C", 4 * m), buf("D", 8 * m)
    i = E.Var("i")
    r = _ramp(i * 4, 4)
    rev = E.Shuffle([A[r]], [3, 2, 1, 0])
    inter = E.Shuffle([A[r], B[r]], [0, 4, 1, 5, 2, 6, 3, 7])
    body = loop(i, m, S.seq(S.BufferStore(C, rev, [r]),
                            S.BufferStore(D, inter, [_ramp(i * 8, 8)])))
    a, b = rand(rng, 4 * m, "float32"), rand(rng, 4 * m, "float32")
    want_c = a.reshape(m, 4)[:, ::-1].reshape(-1)
    want_d = np.stack([a.reshape(m, 4), b.reshape(m, 4)], axis=2).reshape(-1)
    return Case("vector_shuffle", func("vector_shuffle", [A, B, C, D], body),
                [a, b, np.zeros(4 * m, "float32"), np.zeros(8 * m, "float32")],
                {2: want_c, 3: want_d})


@case("shuffle_extract_lane")
def _shuffle_extract(rng: np.random.Generator) -> Case:
    """A one-lane Shuffle (a scalar) of a vector let, read in a parallel loop body."""
    n = 12
    A, B = buf("A", n), buf("B", n)
    i = E.Var("i")
    v = E.Var("v", "float32x4")
    body = S.LetStmt(v, A[_ramp(E.const(0), 4)], loop(i, n, S.BufferStore(
        B, A[i] * E.Shuffle([v], [E.const(2)]), [i]), S.ForKind.PARALLEL))
    a = rand(rng, n, "float32")
    return Case("shuffle_extract_lane", func("shuffle_extract_lane", [A, B], body),
                [a, np.zeros(n, "float32")], {1: a * a[2]})


@case("vector_overlap")
def _vector_overlap(rng: np.random.Generator) -> Case:
    """A[1:9] = A[0:8] + 1 as one vector statement: every lane reads the old values."""
    A = buf("A", 9)
    body = S.BufferStore(A, A[_ramp(E.const(0), 8)] + E.Broadcast(E.const(1.0), 8),
                         [_ramp(E.const(1), 8)])
    a = rand(rng, 9, "float32")
    want = a.copy()
    want[1:9] = a[0:8] + 1
    return Case("vector_overlap", func("vector_overlap", [A], body), [a], {0: want})


@case("vector_same_address")
def _vector_same_address(rng: np.random.Generator) -> Case:
    """A[x] = A[x] + v with x broadcast to every lane: each lane reads the old A[x] (all loads
    happen before the store), so the last lane's sum wins."""
    A, V = buf("A", 3), buf("V", 4)
    idx = E.Broadcast(E.const(1), 4)
    body = S.BufferStore(A, A[idx] + V[_ramp(E.const(0), 4)], [idx])
    a, v = rand(rng, 3, "float32"), rand(rng, 4, "float32")
    want = a.copy()
    want[1] = a[1] + v[3]
    return Case("vector_same_address", func("vector_same_address", [A, V], body), [a, v],
                {0: want})


@case("vector_let_and_predicate")
def _vector_let(rng: np.random.Generator) -> Case:
    """A vector LetStmt, a vector Let expression, a predicated vector load and store."""
    m, L = 5, 4
    A, C = buf("A", L * m), buf("C", L * m)
    i = E.Var("i")
    r = _ramp(i * L, L)
    v = E.Var("v", "float32x4")
    w = E.Var("w", "float32x4")
    pred = E.Ramp(i * L, E.const(1), L) < E.Broadcast(E.const(L * m - 3), L)
    value = E.Let(w, E.Broadcast(E.const(2.0), L), v * w)
    body = loop(i, m, S.LetStmt(v, E.BufferLoad(A, [r], pred),
                                S.BufferStore(C, value, [r], pred)))
    a = rand(rng, L * m, "float32")
    c = rand(rng, L * m, "float32")
    want = c.copy()
    want[: L * m - 3] = a[: L * m - 3] * 2
    return Case("vector_let_and_predicate", func("vector_let_and_predicate", [A, C], body),
                [a, c], {1: want})


@case("vector_float16")
def _vector_f16(rng: np.random.Generator) -> Case:
    m, L = 3, 8
    A, B, C = buf("A", L * m, "float16"), buf("B", L * m, "float16"), buf("C", L * m, "float32")
    i = E.Var("i")
    r = _ramp(i * L, L)
    body = loop(i, m, S.seq(S.BufferStore(B, A[r] * A[r] + A[r], [r]),
                            S.BufferStore(C, E.cast(B[r], "float32x8") * 0.5, [r])))
    a = rand(rng, L * m, "float16", -3, 3)
    want_b = (a * a + a).astype("float16")
    return Case("vector_float16", func("vector_float16", [A, B, C], body),
                [a, np.zeros(L * m, "float16"), np.zeros(L * m, "float32")],
                {1: want_b, 2: want_b.astype("float32") * 0.5}, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# parallel loops and memory
@case("parallel_rows")
def _parallel_rows(rng: np.random.Generator) -> Case:
    """Row sums in a parallel loop, each row accumulated in a local (stack) buffer."""
    rows, cols = E.Var("rows"), E.Var("cols")
    A = decl_buffer((rows, cols), "float32", "A")
    flat = buf("A", rows * cols)
    flat = flat.replace(data=A.data)
    B = buf("B", rows)
    acc = buf("acc", 1, scope="local")
    i, j = E.Var("i"), E.Var("j")
    body = loop(i, rows, S.Allocate(acc, S.seq(
        S.BufferStore(acc, E.const(0.0), [0]),
        loop(j, cols, S.BufferStore(acc, acc[0] + flat[i * cols + j], [0])),
        S.BufferStore(B, acc[0], [i]))), S.ForKind.PARALLEL)
    f = PrimFunc([A.data, B.data], body, {A.data: A, B.data: B},
                 {"global_symbol": "parallel_rows", "tir.lowered": True})
    a = rng.uniform(-1, 1, (23, 17)).astype("float32")
    return Case("parallel_rows", f, [a, np.zeros(23, "float32")],
                {1: a.sum(axis=1).astype("float32")}, rtol=1e-5, atol=1e-5)


@case("nested_parallel")
def _nested_parallel(rng: np.random.Generator) -> Case:
    A, B = buf("A", 7 * 11), buf("B", 7 * 11)
    i, j = E.Var("i"), E.Var("j")
    body = loop(i, 7, loop(j, 11, S.BufferStore(B, A[i * 11 + j] * 2.0 + E.cast(i, "float32"),
                                                [i * 11 + j]), S.ForKind.PARALLEL),
                S.ForKind.PARALLEL)
    a = rand(rng, 77, "float32")
    want = (a.reshape(7, 11) * 2 + np.arange(7)[:, None]).reshape(-1).astype("float32")
    return Case("nested_parallel", func("nested_parallel", [A, B], body),
                [a, np.zeros(77, "float32")], {1: want})


@case("parallel_inside_serial")
def _parallel_inside_serial(rng: np.random.Generator) -> Case:
    """A parallel loop (int64 counter, nonzero start) inside a serial loop: its body reads the
    outer loop variable, a scalar let and an allocation made outside, allocates its own heap
    buffer and asserts; a nested parallel loop runs serially."""
    rows, cols = 6, 40
    size = E.Var("n")
    A, B = buf("A", size), buf("B", size)
    tmp, inner = buf("tmp", size), buf("inner", 20000)
    i, j, k = E.Var("i"), E.Var("j", "int64"), E.Var("k")
    s_ = E.Var("s", "float32")
    idx = E.cast(i, "int64") * cols + j
    body_j = S.Allocate(inner, S.seq(
        loop(k, 2, S.BufferStore(inner, E.cast(k, "float32"), [k]), S.ForKind.PARALLEL),
        S.AssertStmt(A[idx] > -100.0, E.StringImm("too small"), S.BufferStore(
            tmp, A[idx] * s_ + E.cast(i, "float32") * 0.5 + inner[1], [idx]))))
    body = loop(i, rows, S.LetStmt(s_, E.cast(i, "float32") + 1.0, S.seq(
        loop(j, cols - 1, body_j, S.ForKind.PARALLEL, start=E.const(1, "int64")),
        S.BufferStore(tmp, E.const(0.0), [E.cast(i * cols, "int64")]))))
    body = S.Allocate(tmp, S.seq(body, loop(i, size, S.BufferStore(B, tmp[i], [i]))))
    a = rand(rng, rows * cols, "float32")
    ii = np.repeat(np.arange(rows), cols).astype("float32")
    want = (a * (ii + 1) + 0.5 * ii + 1).astype("float32")
    want[::cols] = 0
    return Case("parallel_inside_serial", func("parallel_inside_serial", [A, B], body),
                [a, np.zeros(rows * cols, "float32")], {1: want})


@case("allocate_heap_and_stack")
def _allocate(rng: np.random.Generator) -> Case:
    """A large global temporary (heap), a symbolic-size one (heap), a small local (stack)."""
    size = E.Var("n")
    A, B = buf("A", size), buf("B", size)
    big = buf("big", 70000)
    sym = buf("sym", size)
    small = buf("small", 4, scope="local")
    i = E.Var("i")
    body = S.Allocate(big, S.Allocate(sym, S.Allocate(small, S.seq(
        loop(i, 4, S.BufferStore(small, E.cast(i, "float32"), [i])),
        loop(i, size, S.BufferStore(sym, A[i] + small[op.floormod(i, 4)], [i])),
        loop(i, size, S.BufferStore(big, sym[i] * 2.0, [i * 1000])),
        loop(i, size, S.BufferStore(B, big[i * 1000], [i]))))))
    a = rand(rng, 61, "float32")
    want = ((a + np.arange(61) % 4) * 2).astype("float32")
    return Case("allocate_heap_and_stack", func("allocate_heap_and_stack", [A, B], body),
                [a, np.zeros(61, "float32")], {1: want})


def _assert_case(name: str, fail: bool, where: str) -> Callable[[np.random.Generator], Case]:
    def make(rng: np.random.Generator) -> Case:
        size = E.Var("n")
        A, B = buf("A", size), buf("B", size)
        tmp = buf("tmp", size)
        i = E.Var("i")
        store = S.BufferStore(B, A[i] + 1.0, [i])
        if where == "top":
            body = S.AssertStmt(size > 3, E.StringImm("n must be > 3"),
                                loop(i, size, store))
        elif where == "parallel":
            check = S.AssertStmt(A[i] >= 0.0, E.StringImm("negative input"), store)
            body = S.Allocate(tmp, loop(i, size, S.Allocate(
                buf("row", 20000), S.seq(S.BufferStore(tmp, A[i], [i]), check)),
                S.ForKind.PARALLEL))
        else:  # inside heap allocations, in a serial loop
            check = S.AssertStmt(A[i] >= 0.0, E.StringImm("negative input"), store)
            body = S.Allocate(tmp, loop(i, size, S.seq(S.BufferStore(tmp, A[i], [i]), check)))
        n = 2 if fail and where == "top" else 29
        a = rand(rng, n, "float32", 0, 5)
        if fail and where != "top":
            a[17] = -1
        want = (a + 1).astype("float32")
        expected = {} if fail else {1: want}
        return Case(name, func(name, [A, B], body), [a, np.zeros(n, "float32")], expected,
                    ret=-1 if fail else 0,
                    error=("n must be > 3" if where == "top" else "negative input") if fail else "")
    return make


for _w in ("top", "parallel", "heap"):
    case(f"assert_pass_{_w}")(_assert_case(f"assert_pass_{_w}", False, _w))
    case(f"assert_fail_{_w}")(_assert_case(f"assert_fail_{_w}", True, _w))


@case("call_extern")
def _call_extern(rng: np.random.Generator) -> Case:
    """libm through call_pure_extern, and a micro-kernel from another object through
    tvm_access_ptr (tensorize style)."""
    m = 6
    A, B, C = buf("A", 4 * m), buf("B", 4 * m), buf("C", 4 * m)
    i = E.Var("i")
    kernel = E.Call("int32", "call_extern", [
        "tvmpy_test_axpy4", C.access_ptr("w", offset=i * 4), A.access_ptr("r", offset=i * 4),
        E.const(3.0)])
    body = loop(i, m, S.seq(
        S.Evaluate(kernel),
        S.BufferStore(B, E.Call("float32", "call_pure_extern", ["erfcf", A[i]]), [i])))
    extra = ("#include <stdint.h>\n"
             "int32_t tvmpy_test_axpy4(float* c, const float* a, float s) {\n"
             "  for (int k = 0; k < 4; ++k) c[k] += s * a[k];\n"
             "  return 0;\n"
             "}\n")
    a, c = rand(rng, 4 * m, "float32", -2, 2), rand(rng, 4 * m, "float32")
    want_b = np.zeros(4 * m, "float32")
    want_b[:m] = np.vectorize(math.erfc)(a[:m])
    return Case("call_extern", func("call_extern", [A, B, C], body),
                [a, np.zeros(4 * m, "float32"), c],
                {1: want_b, 2: (c + 3 * a).astype("float32")}, extra_c=extra)


@case("reserved_names")
def _reserved_names(rng: np.random.Generator) -> Case:
    """IR names that are C keywords, math functions or clash with each other."""
    A = buf("int", N)
    B = buf("B.local", N)
    i, j = E.Var("for"), E.Var("y0")
    e = E.Var("exp", "float32")
    body = loop(i, N, S.LetStmt(j, i, S.LetStmt(e, A[j], S.BufferStore(B, op.exp(e) + e, [i]))))
    a = rand(rng, N, "float32", -2, 2)
    return Case("reserved_names", func("reserved_names", [A, B], body),
                [a, np.zeros(N, "float32")], {1: (np.exp(a) + a).astype("float32")})


@case("pointers_likely_pragma")
def _pointers(rng: np.random.Generator) -> Case:
    """address_of and a handle LetStmt passed to an external function, a likely() condition,
    a pragma attribute (a hint) and an external call as a statement."""
    m = 5
    A, B = buf("A", 4 * m), buf("B", 4 * m)
    i = E.Var("i")
    p = E.Var("p", "handle")
    addr = E.Call("handle", "address_of", [A[i * 4]])
    call = E.Call("int32", "call_extern", ["tvmpy_test_scale4", p, B.access_ptr("w", offset=i * 4),
                                           E.const(2.0)])
    body = loop(i, m, S.AttrStmt(i, "pragma_unroll_explicit", 1, S.LetStmt(p, addr, S.IfThenElse(
        op.likely(i < m), S.Evaluate(call)))))
    extra = ("#include <stdint.h>\n"
             "int32_t tvmpy_test_scale4(const float* a, float* b, float s) {\n"
             "  for (int k = 0; k < 4; ++k) b[k] = s * a[k];\n"
             "  return 0;\n"
             "}\n")
    a = rand(rng, 4 * m, "float32")
    return Case("pointers_likely_pragma", func("pointers_likely_pragma", [A, B], body),
                [a, np.zeros(4 * m, "float32")], {1: a * 2}, extra_c=extra)


# ---------------------------------------------------------------------------------------------
# index patterns of fused elementwise loops: broadcasting along a middle axis, transposes,
# nearest upsampling. ``out[f] = src[g(f)]`` for the fused index f = o * 16 + i (the x86
# injective schedule: everything fused, split by the vector width). These are what LLVM 22's
# loop vectorizer miscompiled (o // 5 * 8 + i % 8 widened as 16 consecutive elements); each
# pattern is compiled as scalar loops, as the simplified scalar loops, and vectorized by
# vectorize_loop_func (window loads + shuffles, or gathers).
_INDEX_PATTERNS: dict[str, tuple[int, int, Callable[[Any], Any]]] = {
    # name: (output elements, source elements, f -> source index)
    "bcast_mid": (320, 32, lambda f: f // 80 * 8 + f % 8),  # [1,4,10,8] from [1,4,1,8]
    "bcast_mid6": (288, 18, lambda f: f // 48 % 3 * 6 + f % 6),  # [2,3,8,6] from [1,3,1,6]
    "bcast_col": (112, 8, lambda f: f // 14),  # [8,14] from [8,1]
    "transpose": (144, 144, lambda f: f % 24 * 6 + f // 24),  # [6,24] = [24,6]^T
    "upsample2": (96, 48, lambda f: f // 2),  # nearest x2 along the last axis
    "bcast_4of8": (256, 64, lambda f: f // 32 * 8 + f % 8 // 2 * 2 + f % 2),
}
_INDEX_LANES = 16


def _index_pattern(name: str, form: str) -> Callable[[np.random.Generator], Case]:
    n_out, n_src, g = _INDEX_PATTERNS[name]

    def make(rng: np.random.Generator) -> Case:
        from tvmpy.tir.transform import simplify_func, vectorize_loop_func

        src, add, out = buf("S", n_src), buf("A", n_out), buf("B", n_out)
        o, i = E.Var("o"), E.Var("i")
        f = o * _INDEX_LANES + i
        kind = S.ForKind.VECTORIZED if form == "vector" else S.ForKind.SERIAL
        body = loop(o, n_out // _INDEX_LANES, loop(i, _INDEX_LANES, S.BufferStore(
            out, add[f] + src[g(f)], [f]), kind))
        fn = func(f"index_{name}_{form}", [src, add, out], body)
        if form != "scalar":
            fn = simplify_func(fn)
        if form == "vector":
            fn = vectorize_loop_func(fn)
        s, a = rand(rng, n_src, "float32"), rand(rng, n_out, "float32")
        want = a + s[g(np.arange(n_out))]
        return Case(fn.name, fn, [s, a, np.zeros(n_out, "float32")], {2: want})
    return make


for _p in _INDEX_PATTERNS:
    for _form in ("scalar", "simplified", "vector"):
        case(f"index_{_p}_{_form}")(_index_pattern(_p, _form))


CASE_NAMES = sorted(_REGISTRY)


def backend_suite(make_lib: Callable[[list[PrimFunc], str], Any], unit: str) -> tuple:
    """The pytest fixtures and tests that run every case on one backend, for a test module to
    bind at module level (``all_cases, batch_lib, test_case, test_batch_builds = ...``): all
    cases are built as one ``unit`` (one compiler run instead of hundreds); when that fails,
    each case builds alone, to point at the one that breaks."""
    import pytest

    @pytest.fixture(scope="module")
    def all_cases() -> dict[str, Case]:
        return {name: make_case(name) for name in CASE_NAMES}

    @pytest.fixture(scope="module")
    def batch_lib(all_cases: dict[str, Case]) -> Any:
        funcs = [f for c in all_cases.values() for f in (c.func, *c.extra_funcs)]
        extra = "\n".join(dict.fromkeys(c.extra_c for c in all_cases.values() if c.extra_c))
        try:
            return make_lib(funcs, extra)
        except Exception:  # noqa: BLE001 - reported by the per-case builds
            return None

    @pytest.mark.parametrize("name", CASE_NAMES)
    def test_case(name: str, all_cases: dict[str, Case], batch_lib: Any) -> None:
        lib = batch_lib
        run_case(all_cases[name], (lambda funcs, extra: lib) if lib is not None else make_lib)

    def test_batch_builds(batch_lib: Any) -> None:
        assert batch_lib is not None, f"the {unit} of all cases together did not build"

    return all_cases, batch_lib, test_case, test_batch_builds
