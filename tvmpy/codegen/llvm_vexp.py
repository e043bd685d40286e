"""Inline vector ``exp`` for float32 in LLVM IR (used by exp, sigmoid, and everything built on them:
SiLU, softmax, ELU, softplus).

Why inline rather than libmvec's ``_ZGV*_expf``: a call clobbers every vector register (the
x86-64 SysV ABI has no callee-saved ones), so inside a fused conv or softmax loop each call
spills the loop's other live vectors, and LLVM can neither interleave several independent
evaluations nor run on targets without libmvec (AArch64 before glibc 2.38, wasm, macOS). The
arithmetic below is a dozen vector instructions at any width.

Method (Cephes ``expf``): ``n = roundeven(x * log2(e))``; ``r = x - n * ln2`` in two parts
(Cody-Waite: ``n * C1`` is exact, C1 has 9 significant bits); ``exp(r)`` as ``1 + r + r**2 *
p(r)`` on ``|r| <= ln2 / 2``, ``p`` a degree-4 minimax fit (Cephes' is degree 5); the result
scaled by ``2**n`` in two halves (each a normal power of two built from its exponent bits), so
that results in the subnormal range round once. ``x`` is clamped to [-104, 89] first (beyond,
the result is 0 or inf anyway); nan lanes return their input. Measured error
(tests/topi/test_vector_math.py): at most 2 ulp, as libmvec (1.23 ulp over 2M inputs with
either polynomial).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtype as dt
from .llvm_ir import Value, const_value, llvm_type

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["exp_f32"]

_LOG2E = 1.44269504088896341
_C1 = 0.693359375
_C2 = -2.12194440e-4
# p(r), highest power first: a minimax fit of exp(r)'s relative error on |r| <= ln2/2 (3.1e-9
# in float64, 1/40 ulp of float32). Cephes' degree-5 p (5e-11) is more than float32 can hold
# and one FMA more, on the multiplier pipes that bound SiLU epilogues (8% of a vector SiLU's
# time at znver4, where a 512-bit FMA takes both 256-bit units)
_POLY = (1.3814604608e-3, 8.3687109873e-3, 4.1668388993e-2, 1.6666521132e-1,
         4.9999994040e-1)
_LO, _HI = -104.0, 89.0


def exp_f32(cg: CodeGenLLVM, x: Value, dtype: str, nan_lanes: bool = True) -> Value:
    """``exp(x)`` of a float32 vector ``x`` (of type ``dtype``), as inline IR. With
    ``nan_lanes=False`` a nan lane's result is left as the clamp makes it (``exp(-104)``): for
    a caller whose result takes the nan from ``x`` anyway (SiLU's ``x / (1 + exp(-x))``), two
    vector operations fewer."""
    from .llvm_intrinsics import call_intrinsic

    fb = cg.fb
    ty = x.ty
    lanes = dt.lanes_of(dtype)
    ity = llvm_type(dt.with_lanes("int32", lanes))

    def c(v: float) -> Value:
        return const_value(v, dtype)

    def ci(v: int) -> str:
        return const_value(v, dt.with_lanes("int32", lanes)).ref

    def fma(a: Value, b: Value, d: Value) -> Value:  # a * b + d, fused where the CPU can
        return call_intrinsic(cg, "llvm.fmuladd", [a, b, d])

    xc = call_intrinsic(cg, "llvm.maxnum", [x, c(_LO)])  # nan -> _LO (no poison below)
    xc = call_intrinsic(cg, "llvm.minnum", [xc, c(_HI)])
    n = call_intrinsic(cg, "llvm.roundeven", [fb.value(ty, f"fmul {xc}, {c(_LOG2E).ref}", "t")])
    r = fma(fb.value(ty, f"fneg {n}", "nn"), c(_C1), xc)
    r = fma(fb.value(ty, f"fneg {n}", "nn"), c(_C2), r)
    p = c(_POLY[0])
    for k in _POLY[1:]:
        p = fma(p, r, c(k))
    r2 = fb.value(ty, f"fmul {r}, {r.ref}", "r2")
    y = fma(p, r2, fb.value(ty, f"fadd {r}, {c(1.0).ref}", "r1"))
    if lanes * 32 == 512 and cg.vector_bits >= 512 and cg.mb.triple.startswith("x86_64"):
        # AVX-512: y * 2**n in one vscalefps (one rounding, subnormal and overflowing results
        # included), instead of the nine integer and float operations below: SiLU epilogues
        # are bound by the number of vector operations of their exp
        name = "llvm.x86.avx512.mask.scalef.ps.512"
        cg.mb.declare(name, ty, [ty, ty, ty, "i16", "i32"])
        out = fb.value(ty, f"call {ty} @{name}({y}, {n}, {y}, i16 -1, i32 4)", "exp")
        if not nan_lanes:
            return out
        nan = fb.value(llvm_type(dt.with_lanes("bool", lanes)), f"fcmp uno {x}, {x.ref}", "nan")
        return fb.value(ty, f"select {nan}, {x}, {out}", "exp")
    # 2**n as 2**n1 * 2**n2, n1 = n >> 1: both halves are normal powers of two for n in
    # [-150, 129] (the clamp's range), and a subnormal result is rounded once
    ni = fb.value(ity, f"fptosi {n} to {ity}", "n")
    n1 = fb.value(ity, f"ashr {ni}, {ci(1)}", "n1")
    n2 = fb.value(ity, f"sub {ni}, {n1.ref}", "n2")
    out = y
    for half in (n1, n2):
        bits = fb.value(ity, f"add {half}, {ci(127)}", "e")
        bits = fb.value(ity, f"shl {bits}, {ci(23)}", "e")
        scale = fb.value(ty, f"bitcast {bits} to {ty}", "s")
        out = fb.value(ty, f"fmul {out}, {scale.ref}", "exp")
    if not nan_lanes:
        return out
    nan = fb.value(llvm_type(dt.with_lanes("bool", lanes)), f"fcmp uno {x}, {x.ref}", "nan")
    return fb.value(ty, f"select {nan}, {x}, {out}", "exp")
