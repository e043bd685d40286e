"""Inline vector ``tanh`` for float32 in LLVM IR (tanh-GELU: GPT-2's and T5's feed-forward
epilogues, as ONNX exports them: ``0.5 * x * (1 + tanh(c * (x + 0.044715 * x**3)))``).

Why inline rather than libmvec's ``_ZGV*_tanhf``: as for ``exp`` (``llvm_vexp.py``), a call
clobbers every vector register, so inside a fused matmul epilogue each call spills the loop's
live vectors. Measured on Zen 4 at 1 thread: a 128 x 2048 tanh-GELU epilogue cost 0.6 ms over
the plain matmul with the libmvec call (2.3 ns per element).

Method (Eigen's ``generic_fast_tanh_float``, also MLAS's ``MlasComputeTanh``, so onnxruntime's
Tanh and tanh-GELU compute the same rational function): ``x`` clamped to +-7.9988 (beyond,
tanh is +-1 in float32); ``tanh(x) = x * P(x^2) / Q(x^2)`` with P of degree 6 and Q of degree 3
in ``x^2``, by FMAs; ``x`` itself for ``|x| < 0.0004`` (so ``-0`` stays ``-0``). 12 FMAs and a
division at any width; Cephes' form (a polynomial below |x| = 0.625, ``1 - 2 / (exp(2|x|) +
1)`` above) was 1.35 ulp but twice the operations, and slower than the libmvec call on Zen 4.
nan lanes return their input. Measured error (7M inputs over [-10, 10], small and subnormal
magnitudes): at most 4.6 ulp with FMA (AVX2, AVX-512), 6.4 ulp without (SSE2), largest near
|x| ~ 4.8 where tanh is within 1e-4 of +-1 (libmvec: 2 ulp).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtype as dt
from .llvm_ir import Value, const_value, llvm_type
from .llvm_verf import odd_rational_f32

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["tanh_f32"]

# numerator (odd: x * P(x^2)) and denominator (Q(x^2)) coefficients, highest degree first
_R_CLAMP = 7.99881172180175781
_ALPHA = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
          5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
          4.89352455891786e-03)
_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
         4.89352518554385e-03)


def tanh_f32(cg: CodeGenLLVM, x: Value, dtype: str) -> Value:
    """``tanh(x)`` of a float32 vector ``x`` (of type ``dtype``), as inline IR."""
    from .llvm_intrinsics import call_intrinsic

    fb = cg.fb
    ty = x.ty
    bty = llvm_type(dt.with_lanes("bool", dt.lanes_of(dtype)))
    out = odd_rational_f32(cg, x, dtype, _R_CLAMP, _ALPHA, _BETA, "tanh")
    ax = call_intrinsic(cg, "llvm.fabs", [x])
    tiny = fb.value(bty, f"fcmp olt {ax}, {const_value(0.0004, dtype).ref}", "tiny")
    out = fb.value(ty, f"select {tiny}, {x}, {out}", "tanh")
    nan = fb.value(bty, f"fcmp uno {x}, {x.ref}", "nan")
    return fb.value(ty, f"select {nan}, {x}, {out}", "tanh")
