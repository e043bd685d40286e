"""Vectorized elementwise math on the host CPU: accuracy over wide ranges and the structure of
the generated LLVM IR.

Every transcendental is scheduled by topi.x86.schedule_injective (vectors of the target's
width) and compared with numpy in float64, in units in the last place of the float32 result
(ulp). The bounds below are the maxima measured over 60K inputs per op (glibc 2.3x libmvec,
AVX-512 variants; erf: the inline rational approximation of codegen/llvm_verf.py, 600K
inputs), rounded up: erf 5.4 near |x| = 3.9, log 3.5 near 0.89, exp 2.5, sigmoid
2.7, the others 2 or less; a result below float32's smallest normal (1.2e-38) may be flushed to 0 (e.g.
sigmoid(-100) = 3.7e-44 comes out 0, as exp(100) overflows to inf).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.tir import op as tir_op

from .topi_util import run

F32_TINY = float(np.finfo(np.float32).tiny)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1e-30, -1e-30, 1.0, -1.0]


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _wide(rng: np.random.Generator, lo: float, hi: float, n: int = 4099) -> np.ndarray:
    """``n`` values in [lo, hi]: half uniform, half log-uniform in magnitude (small |x| too)."""
    u = rng.uniform(lo, hi, n // 2)
    m = max(abs(lo), abs(hi))
    mag = np.exp(rng.uniform(math.log(1e-6), math.log(m), n - n // 2))
    s = np.where(rng.random(n - n // 2) < (0.5 if lo < 0 else 0.0), -1.0, 1.0)
    v = np.clip(mag * s, lo, hi)
    return np.concatenate([u, v, SPECIALS])


# name -> (te elementwise fn, float64 reference, input range, max ulp in float32)
OPS: dict[str, tuple[Callable, Callable, tuple[float, float], float]] = {
    "exp": (tir_op.exp, np.exp, (-110.0, 100.0), 3),
    "sigmoid": (tir_op.sigmoid, _sigmoid, (-120.0, 120.0), 4),
    "tanh": (tir_op.tanh, np.tanh, (-30.0, 30.0), 5),  # inline (llvm_vtanh.py): 4.6
    "erf": (tir_op.erf, _erf, (-10.0, 10.0), 6),
    "log": (tir_op.log, np.log, (0.0, 1e30), 4),
    "log2": (tir_op.log2, np.log2, (0.0, 1e30), 2.5),
    "log1p": (tir_op.log1p, np.log1p, (-1.0, 1e30), 2),
    "sqrt": (tir_op.sqrt, np.sqrt, (0.0, 1e30), 0.5),
    "rsqrt": (tir_op.rsqrt, lambda x: 1 / np.sqrt(x), (0.0, 1e30), 2),
    "sin": (tir_op.sin, np.sin, (-100.0, 100.0), 2.5),
    "cos": (tir_op.cos, np.cos, (-100.0, 100.0), 2.5),
    "atan": (tir_op.atan, np.arctan, (-1e6, 1e6), 2),
    "sinh": (tir_op.sinh, np.sinh, (-90.0, 90.0), 2.5),
}


def _ulp_error(got: np.ndarray, want: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """|got - want| in ulps of ``want`` rounded to ``dtype``; 0 where both are the same inf or
    both nan, and where both are below the smallest normal (flush to zero allowed)."""
    with np.errstate(over="ignore"):
        w = want.astype(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(w)).astype(np.float64)
    tiny = float(np.finfo(dtype).tiny)
    ok = (np.isnan(got) & np.isnan(w)) | (np.isinf(w) & (got == w))
    ok |= (np.abs(got.astype(np.float64)) < tiny) & (np.abs(want) < tiny)
    return np.where(ok, 0.0, err)


def _run_op(name: str, x: np.ndarray, dtype: str = "float32") -> np.ndarray:
    fn = OPS[name][0]
    A = te.placeholder(x.shape, dtype, name="A")
    B = topi.elemwise.elemwise(A, fn, name)
    with np.errstate(all="ignore"):
        (b,) = run([A], B, [x.astype(dtype)])
    return b


@pytest.mark.parametrize("name", list(OPS))
def test_float32_accuracy_wide_range(name):
    _, ref, (lo, hi), max_ulp = OPS[name]
    x = _wide(np.random.default_rng(zlib.crc32(name.encode())), lo, hi).astype("float32")
    got = _run_op(name, x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    err = _ulp_error(got, want)
    worst = int(np.nanargmax(err))
    assert err[worst] <= max_ulp, (name, x[worst], got[worst], want[worst], err[worst])
    # nan in, nan out; the ranges' ends and infinities where the op defines them
    assert np.isnan(got[np.isnan(x)]).all()


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "erf", "exp"])
def test_saturating_ends_are_exact(name):
    x = np.array([-np.inf, -1e30, -200.0, -120.0, 120.0, 200.0, 1e30, np.inf], "float32")
    got = _run_op(name, x)
    with np.errstate(over="ignore"):
        want = OPS[name][1](x.astype(np.float64)).astype("float32")
    np.testing.assert_array_equal(got, want)


def test_vector_tanh_ends_zeros_and_branch_seam():
    """float32 tanh on whole vectors (codegen/llvm_vtanh.py, a rational function of the
    clamped input): exactly +-1 from |x| = 9.02 on and at +-inf, -0 stays -0, tiny values
    are themselves, nan stays nan, and values around 0.6 (where the Cephes form it replaced
    switched branches) within 2 ulp."""
    ends = np.array([np.inf, 1e30, 120.0, 10.5, 9.02, 0.0, 1e-45, 1e-30], "float32")
    seam = np.linspace(0.6, 0.65, 2000, dtype="float32")
    x = np.concatenate([ends, -ends, [np.nan], seam, -seam]).astype("float32")
    got = _run_op("tanh", x)
    n = len(ends)
    np.testing.assert_array_equal(got[:5], 1.0)
    np.testing.assert_array_equal(got[n:n + 5], -1.0)
    assert not np.signbit(got[5]) and np.signbit(got[n + 5])
    np.testing.assert_array_equal(got[6:8], x[6:8])  # tanh(x) == x in float32 there
    assert np.isnan(got[2 * n])
    err = _ulp_error(got[2 * n + 1:], np.tanh(x[2 * n + 1:].astype(np.float64)))
    assert err.max() <= 2.0, err.max()


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "erf", "exp", "log"])
def test_float16_within_one_ulp(name):
    _, ref, (lo, hi), _ = OPS[name]
    lo, hi = max(lo, -11.0), min(hi, 11.0)
    x = np.random.default_rng(3).uniform(lo, hi, 1031).astype("float16")
    got = _run_op(name, x, "float16")
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    assert _ulp_error(got, want, "float16").max() <= 1.0


def test_fused_activations_match_numpy():
    """SiLU, erf-GELU and softplus as topi builds them (composites over the vector math)."""
    x = _wide(np.random.default_rng(5), -60.0, 60.0, 2053).astype("float32")
    x = x[np.isfinite(x)]
    A = te.placeholder(x.shape, "float32", name="A")
    silu = te.compute(A.shape, lambda i: A[i] * tir_op.sigmoid(A[i]), name="silu")
    outs = [silu, topi.gelu(A), topi.softplus(A)]
    s, g, sp = run([A], outs, [x])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(s, x64 * _sigmoid(x64), rtol=4e-7, atol=F32_TINY)
    # erf-GELU cancels in 1 + erf(x / sqrt(2)) for negative x (erf's ulp near -1 is 6e-8)
    np.testing.assert_allclose(g, _gelu(x64), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sp, np.logaddexp(x64, 0.0), rtol=4e-7, atol=F32_TINY)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=x86-64"])
def test_silu_as_one_division_matches_numpy(target):
    """``x * sigmoid(x)`` and ``sigmoid(x) * x`` (either operand order, ``x`` an expression or
    a let variable) are emitted as ``x / (1 + exp(-x))``: within 3 ulp of float64 over a wide
    range, odd lengths (vector tails), and the product's special values: +-inf, nan, -0 for a
    large negative ``x``, the subnormal results near ``x = -88``."""
    x = _wide(np.random.default_rng(11), -110.0, 110.0, 1031).astype("float32")
    x = np.concatenate([x, np.float32([-87.5, -88.7, -89.5, -103.0, -200.0, 200.0])])
    A = te.placeholder(x.shape, "float32", name="A")
    left = te.compute(A.shape, lambda i: A[i] * tir_op.sigmoid(A[i]), name="left")
    right = te.compute(A.shape, lambda i: tir_op.sigmoid(A[i] + 1.0) * (A[i] + 1.0),
                       name="right")
    outs = run([A], [left, right], [x], target=target)
    for got, xx in zip(outs, (x, x + np.float32(1.0))):
        x64 = xx.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            want = x64 * _sigmoid(x64)  # -inf * 0 = nan, as the float32 product
        err = _ulp_error(got, want)
        # exp(-x) overflows float32 below x = -88.72: there the result is -0, as the product's
        # (sigmoid(x) = 1 / inf = 0), though x * sigmoid(x) is still a normal float down to -90
        over = x64 < -88.72
        finite = np.isfinite(want) & (np.abs(want) >= F32_TINY) & ~over
        assert err[finite].max() <= 3, (xx[finite][np.argmax(err[finite])], err[finite].max())
        same = ~finite & (np.isnan(want) | np.isinf(want))
        np.testing.assert_array_equal(got[same], want[same].astype(np.float32))
        tiny = np.isfinite(want) & ((np.abs(want) < F32_TINY) | over)  # subnormal or -0
        assert np.all(np.abs(got[tiny]) < F32_TINY)
        assert np.all(np.signbit(got[over & np.isfinite(x64)]))


def test_silu_ir_has_no_product():
    """The SiLU product leaves no float multiplication by the sigmoid: one ``fdiv`` of ``x``
    (the vector multiplier is what bounds a SiLU epilogue); a product by the sigmoid of
    another value keeps its multiplication."""
    A = te.placeholder((1027,), "float32", name="A")
    B = te.placeholder((1027,), "float32", name="B")
    for fn, fused in ((lambda i: A[i] * tir_op.sigmoid(A[i]), True),
                      (lambda i: B[i] * tir_op.sigmoid(A[i]), False)):
        C = te.compute(A.shape, fn, name="C")
        with tvm.target.Target("llvm"):
            s = topi.x86.schedule_injective([C])
            ll = tvm.build(s, [A, B, C], "llvm").get_source("ll")
        divs = [ln for ln in ll.splitlines() if " fdiv " in ln]
        assert divs and all("<" in ln for ln in divs), divs
        assert (" = fdiv contract <" in ll and "fdiv contract <16 x float> <float 1.0" not in ll
                if fused else "%sigmoid" in ll), ll[-2000:]
        assert fused == all("sigmoid" not in ln for ln in ll.splitlines() if " fmul " in ln)


# ---- structure: the generated LLVM IR is vector code of the target's width ------------------

IR_TARGETS = ["llvm", "llvm -mcpu=haswell", "llvm -mcpu=x86-64", "llvm -mcpu=skylake-avx512"]
TRANSCENDENTAL = ["sigmoid", "exp", "tanh", "erf", "log", "log1p", "sin", "cos", "atan"]


def _ll(fn: Callable, target: str, shape: tuple = (4, 1027), dtype: str = "float32") -> str:
    A = te.placeholder(shape, dtype, name="A")
    B = topi.elemwise.elemwise(A, fn, "op")
    with tvm.target.Target(target):
        s = topi.x86.schedule_injective([B])
        return tvm.build(s, [A, B], target).get_source("ll")


@pytest.mark.parametrize("target", IR_TARGETS)
@pytest.mark.parametrize("name", TRANSCENDENTAL)
def test_transcendental_ir_is_vector_math_of_target_width(name, target):
    """The math takes whole vectors of the target's float32 lanes: exp and sigmoid as inline
    vector arithmetic (codegen/llvm_vexp.py), erf and tanh too (codegen/llvm_verf.py,
    codegen/llvm_vtanh.py), the others as
    libmvec calls; never a vector LLVM math intrinsic (which LLVM scalarizes into one libm
    call per lane)."""
    lanes = tvm.target.Target(target).vector_lanes("float32")
    assert lanes >= 4
    ll = _ll(getattr(tir_op, name), target)
    vec = f"<{lanes} x float>"
    calls = [ln for ln in ll.splitlines() if " call " in ln]
    if name in ("exp", "sigmoid"):
        assert f"@llvm.roundeven.v{lanes}f32(" in ll and f"fmul {vec}" in ll
        assert not any("@_ZGV" in c for c in calls), calls
    elif name == "erf":
        assert f"fdiv {vec}" in ll and f"@llvm.fmuladd.v{lanes}f32(" in ll
        assert not any("@_ZGV" in c or "@erf" in c for c in calls), calls
    elif name == "tanh":  # codegen/llvm_vtanh.py: a rational function
        assert f"fdiv {vec}" in ll and f"@llvm.fmuladd.v{lanes}f32(" in ll
        assert not any("@_ZGV" in c or "@tanh" in c for c in calls), calls
    else:
        assert any("@_ZGV" in c and f"N{lanes}v" in c and vec in c for c in calls), calls
    assert not any(f"@llvm.{n}.v" in c for c in calls for n in ("exp", "log", "sin", "cos",
                                                                   "tanh", "atan")), calls


def test_relay_sigmoid_ir_is_vectorized():
    """relay.sigmoid built at opt_level 3 for the host: its exp is vector arithmetic of the
    target's width (it was llvm.exp on vectors: one scalar expf call per lane)."""
    from tvmpy import relay

    lanes = tvm.target.Target("llvm").vector_lanes("float32")
    x = relay.var("x", shape=(1, 96, 13, 17), dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.sigmoid(x)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    ll = lib.get_lib().get_source("ll")
    assert f"@llvm.roundeven.v{lanes}f32(" in ll and f"fmul <{lanes} x float>" in ll
    assert "@llvm.exp.v" not in ll and "_expf(" not in ll


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("p", [2.0, 1.0, -1.0, 2.5, 3.0])
def test_power_by_a_constant(p, dtype):
    """relay.power(x, c) as ONNX Pow imports it: 2, 1, -1 and 3 need no pow call (multiplies,
    the value, a division; topi.power); other exponents call the vector powf."""
    from tvmpy import relay

    x = relay.var("x", shape=(3, 1031), dtype=dtype)
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.power(x, relay.const(p, dtype))))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    if dtype == "float32":  # (a float16 constant stays a parameter: pow(x, c) in float32)
        assert ("powf" in lib.get_lib().get_source("ll")) == (p not in (2.0, 1.0, -1.0, 3.0))
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    v = np.random.default_rng(1).uniform(-30, 30, (3, 1031))
    v[1] = np.abs(v[1])  # a positive row: non-integer exponents are defined there
    v[0, :8] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -1e-30, 1e30]
    with np.errstate(over="ignore"):
        a = v.astype(dtype)
    m.set_input("x", a)
    m.run()
    got = m.get_output(0).numpy()
    with np.errstate(all="ignore"):
        want = np.power(a.astype(np.float64), p)
        wz = want.astype(dtype)
    exact = p in (2.0, 1.0, -1.0) and dtype == "float32"
    # x * x * x rounds twice: within 1.5 ulp (onnxruntime's Pow(x, 3) computes the same)
    assert _ulp_error(got, want, dtype).max() <= (0.5 if exact else 1.5 if p == 3.0 else 1.0)
    zero = got == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(wz[zero]))


@pytest.mark.parametrize("name,ref,lo,hi,max_ulp", [
    ("asinh", np.arcsinh, -3e38, 3e38, 3), ("acosh", np.arccosh, 1.0, 3e38, 3),
    ("atanh", np.arctanh, -1.0, 1.0, 3)])
def test_inverse_hyperbolic_wide_range(name, ref, lo, hi, max_ulp):
    """relay's asinh/acosh/atanh (log1p forms, relay/op/strategy/generic.py) over wide ranges;
    asinh's sign is a Select over one log1p (it was a lazy if_then_else computing it twice);
    asinh(1e20) was nan, acosh(1e20) inf, atanh(-0.9987) 80 ulp off."""
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    x = _wide(np.random.default_rng(zlib.crc32(name.encode())), lo, hi).astype("float32")
    # float32's ends: the squares in the textbook forms overflow there (were nan / inf)
    ends = [3e38, -3e38, 2.0 ** 64, 2.0 ** 60, 1e19, -1e20, 0.9999999, -0.9999999, 1.0, -1.0]
    x = np.concatenate([x, np.array(ends, "float32")])
    x = x[np.isnan(x) | ((x >= lo) & (x <= hi))]
    v = relay.var("x", shape=x.shape)
    mod = tvm.IRModule.from_expr(relay.Function([v], getattr(relay, name)(v)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    m.set_input("x", x)
    m.run()
    with np.errstate(all="ignore"):
        err = _ulp_error(m.get_output(0).numpy(), ref(x.astype(np.float64)))
    assert err.max() <= max_ulp, (name, x[int(np.argmax(err))], err.max())


@pytest.mark.parametrize("target,scalef", [("llvm -mcpu=skylake-avx512", True),
                                           ("llvm -mcpu=znver4", True),
                                           ("llvm -mcpu=haswell", False),
                                           ("llvm -mcpu=x86-64", False)])
def test_exp_scaling_by_vscalef_on_avx512(target, scalef):
    """16-lane float32 exp (and sigmoid, SiLU) on AVX-512 scales by 2**n with one vscalefps
    instead of integer exponent arithmetic; other widths (and a row's tail) keep the two-half
    scaling."""
    for fn in (tir_op.exp, tir_op.sigmoid):
        ll = _ll(fn, target)
        assert ("@llvm.x86.avx512.mask.scalef.ps.512(" in ll) == scalef


def test_exp_near_the_ends_of_the_float32_range():
    """The host's exp where results become subnormal or overflow, on a dense grid: within 2.5
    ulp of numpy where the result is normal, within one subnormal step below, inf above."""
    x = np.concatenate([np.linspace(-106.0, -86.0, 4099), np.linspace(86.0, 90.0, 1031),
                        np.linspace(-1.0, 1.0, 257)]).astype("float32")
    got = _run_op("exp", x).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    tiny = float(np.finfo(np.float32).tiny)
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)
    normal = (np.abs(want) >= tiny) & np.isfinite(w32)
    ulp = np.abs(got - want) / np.spacing(w32.astype(np.float32)).astype(np.float64)
    assert ulp[normal].max() <= 2.5
    sub = want < tiny
    assert np.abs(got[sub] - want[sub]).max() <= 1.5 * 2.0 ** -149
    assert np.isinf(got[~np.isfinite(w32)]).all()
