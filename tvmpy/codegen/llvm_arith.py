"""Arithmetic, comparisons and casts for the LLVM code generator (see llvm_codegen's docstring
for the semantics chosen: truncating Div/Mod, flooring FloorDiv/FloorMod, NaN-propagating float
Min/Max, wrapping integer arithmetic outside indices, float->int through a wider integer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..ir.node import structural_equal
from ..tir import expr as E
from .llvm_intrinsics import call_intrinsic, silu
from .llvm_ir import Value, const_value, llvm_type

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["binary", "cast"]

FMF = "contract"

_FCMP = {E.EQ: "oeq", E.NE: "une", E.LT: "olt", E.LE: "ole", E.GT: "ogt", E.GE: "oge"}
_ICMP_S = {E.EQ: "eq", E.NE: "ne", E.LT: "slt", E.LE: "sle", E.GT: "sgt", E.GE: "sge"}
_ICMP_U = {E.EQ: "eq", E.NE: "ne", E.LT: "ult", E.LE: "ule", E.GT: "ugt", E.GE: "uge"}


def binary(cg: CodeGenLLVM, e: E.BinaryOp) -> Value:
    if type(e) is E.Mul and dt.element_of(e.dtype) == "float32":
        x = _silu_operand(e)
        if x is not None:
            return silu(cg, cg.expr(x), e.dtype)
    a = cg.expr(e.a)
    b = cg.expr(e.b)
    d = dt.parse(e.a.dtype)
    fb = cg.fb
    cls = type(e)
    if isinstance(e, E.CmpOp):
        rty = llvm_type(e.dtype)
        if d.kind == "float":
            return fb.value(rty, f"fcmp {_FCMP[cls]} {a}, {b.ref}", "cmp")
        table = _ICMP_S if d.kind == "int" else _ICMP_U
        return fb.value(rty, f"icmp {table[cls]} {a}, {b.ref}", "cmp")
    if cls is E.And:
        return fb.value(a.ty, f"and {a}, {b.ref}", "and")
    if cls is E.Or:
        return fb.value(a.ty, f"or {a}, {b.ref}", "or")
    if d.kind == "float":
        # a nonzero constant second operand: a tie is the same bits either way, so the
        # reduction's order (its NaN test folds away: one MAXPS) is still exactly numpy's
        fast = id(e) == cg._accumulate or _nonzero_constant(e.b)
        return _float_binary(cg, cls, a, b, e.a.dtype, fast)
    if d.kind == "bool":
        if cls is E.Min:
            return fb.value(a.ty, f"and {a}, {b.ref}", "min")
        if cls is E.Max:
            return fb.value(a.ty, f"or {a}, {b.ref}", "max")
        raise TypeError(f"arithmetic {cls.__name__} on bool operands: cast to an integer first")
    if d.kind == "handle":
        raise TypeError(f"arithmetic {cls.__name__} on handles is not supported")
    return _int_binary(cg, cls, a, b, d.kind == "int", d.bits)


def _float_binary(cg: CodeGenLLVM, cls, a: Value, b: Value, dtype: str,
                  accumulate: bool = False) -> Value:
    fb = cg.fb
    simple = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul", E.Div: "fdiv"}
    if cls in simple:
        # no contraction for float16: every float16 operation rounds (numpy semantics)
        fmf = FMF if dt.bits_of(dtype) > 16 else ""
        return fb.value(a.ty, f"{simple[cls]} {fmf} {a}, {b.ref}", simple[cls])
    if cls is E.Mod:
        return fb.value(a.ty, f"frem {a}, {b.ref}", "frem")
    if cls in (E.Min, E.Max):
        if cg.x86 and X86_SELECT_MINMAX:
            return _x86_min_max(cg, cls is E.Max, a, b, accumulate)
        return call_intrinsic(cg, "llvm.maximum" if cls is E.Max else "llvm.minimum", [a, b])
    if cls in (E.FloorDiv, E.FloorMod):
        q = fb.value(a.ty, f"fdiv {FMF} {a}, {b.ref}", "fdiv")
        fq = call_intrinsic(cg, "llvm.floor", [q])
        if cls is E.FloorDiv:
            return fq
        p = fb.value(a.ty, f"fmul {fq}, {b.ref}", "fmul")
        return fb.value(a.ty, f"fsub {a}, {p.ref}", "fmod")
    raise TypeError(f"{cls.__name__} on {dtype}")  # pragma: no cover


# float Min/Max on x86 as the native max/min instruction with a NaN fix-up (3 instructions; in
# a reduction a 2-deep chain through the accumulator) instead of ``llvm.maximum`` (6, 4 deep:
# it also orders -0 below +0); False: ``llvm.maximum``/``llvm.minimum``, for comparisons
X86_SELECT_MINMAX = True


def _x86_min_max(cg: CodeGenLLVM, is_max: bool, a: Value, b: Value, accumulate: bool) -> Value:
    """NaN-propagating float max/min on x86: NaN if either operand is NaN, else the larger
    (smaller) one. ``sel(x, y) = isnan(y) ? y : (y > x ? y : x)``; the inner select is what
    MAXPS/MAXSS compute (``x`` when either is NaN: ``x``'s NaN propagates), the outer adds
    ``y``'s. On a tie (+0 vs -0) it gives ``x``.

    Elementwise, ``max(a, b) = sel(b, a)``: exactly ``numpy.maximum``, a tie giving ``b``
    (the interpreter's semantics, bit for bit). A reduction's update ``acc = max(acc, x)``
    (``accumulate``: the codegen saw the store write back over ``a``) is ``sel(acc, x)``: the
    NaN test is of ``x``, off the accumulator's chain (the other order put it on the chain,
    1.2-1.5x slower max reductions, measured); a tie keeps ``acc`` (the sign of a max
    reduction's zero depends on the order in numpy too). The ``freeze`` keeps InstCombine from
    merging the two selects into one select on an ``or`` of compares (two compares, a mask
    ``or`` and a blend, a compare on the chain). A constant ``y`` leaves one MAXPS: the caller
    passes ``accumulate`` for a nonzero constant ``b`` too (softmax's ``max(x - m, -87)``,
    ``clip``'s bounds); ``relu``'s ``max(x, 0)`` keeps 3 (``-0`` must give ``+0``)."""
    fb = cg.fb
    x, y = (a, b) if accumulate else (b, a)
    mty = _mask_type(a.ty)
    pred = "ogt" if is_max else "olt"
    name = "max" if is_max else "min"
    c = fb.value(mty, f"fcmp {pred} {y}, {x.ref}", "cmp")
    m = fb.value(a.ty, f"select {c}, {y}, {x}", name)
    m = fb.value(a.ty, f"freeze {m}", "frz")
    nan = fb.value(mty, f"fcmp uno {y}, {y.ref}", "isnan")
    return fb.value(a.ty, f"select {nan}, {y}, {m}", name)


def _silu_operand(e: E.Mul) -> E.PrimExpr | None:
    """``x`` when ``e`` is ``x * sigmoid(x)`` or ``sigmoid(x) * x`` (SiLU / swish: the fused
    epilogue of a convolution binds ``x`` to a let variable), else None."""
    for x, g in ((e.a, e.b), (e.b, e.a)):
        if (isinstance(g, E.Call) and g.op == "sigmoid" and len(g.args) == 1
                and (g.args[0] is x or structural_equal(g.args[0], x))):
            return x
    return None


def _nonzero_constant(e: E.PrimExpr) -> bool:
    """A float constant (or a broadcast of one) that is neither zero nor NaN."""
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, E.FloatImm) and e.value == e.value and e.value != 0.0


def _mask_type(ty: str) -> str:
    if ty.startswith("<"):
        return ty.split(" x ")[0] + " x i1>"
    return "i1"


def _int_binary(cg: CodeGenLLVM, cls, a: Value, b: Value, signed: bool, bits: int) -> Value:
    fb = cg.fb
    nsw = " nsw" if signed and bits >= 32 and cg.index_context else ""
    simple = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}
    if cls in simple:
        return fb.value(a.ty, f"{simple[cls]}{nsw} {a}, {b.ref}", simple[cls])
    if cls is E.Div:
        return fb.value(a.ty, f"{'s' if signed else 'u'}div {a}, {b.ref}", "div")
    if cls is E.Mod:
        return fb.value(a.ty, f"{'s' if signed else 'u'}rem {a}, {b.ref}", "rem")
    if cls is E.Min:
        return call_intrinsic(cg, "llvm.smin" if signed else "llvm.umin", [a, b])
    if cls is E.Max:
        return call_intrinsic(cg, "llvm.smax" if signed else "llvm.umax", [a, b])
    if cls in (E.FloorDiv, E.FloorMod):
        if not signed:
            inst = "udiv" if cls is E.FloorDiv else "urem"
            return fb.value(a.ty, f"{inst} {a}, {b.ref}", inst)
        return _floor_div_mod(cg, cls is E.FloorDiv, a, b)
    raise TypeError(f"{cls.__name__} on integers")  # pragma: no cover


def _floor_div_mod(cg: CodeGenLLVM, is_div: bool, a: Value, b: Value) -> Value:
    """Signed floor division / modulo from truncating sdiv/srem plus a sign fix-up."""
    fb = cg.fb
    vec = a.ty.startswith("<")
    bty = f"<{a.ty[1:].split(' x ')[0]} x i1>" if vec else "i1"
    zero = Value(a.ty, "zeroinitializer") if vec else Value(a.ty, "0")
    r = fb.value(a.ty, f"srem {a}, {b.ref}", "rem")
    nz = fb.value(bty, f"icmp ne {r}, {zero.ref}", "rnz")
    x = fb.value(a.ty, f"xor {r}, {b.ref}", "rxb")
    neg = fb.value(bty, f"icmp slt {x}, {zero.ref}", "sdiff")
    fix = fb.value(bty, f"and {Value(bty, nz.ref)}, {neg.ref}", "fix")
    if is_div:
        q = fb.value(a.ty, f"sdiv {a}, {b.ref}", "quot")
        adj = fb.value(a.ty, f"sext {Value(bty, fix.ref)} to {a.ty}", "adj")
        return fb.value(a.ty, f"add {q}, {adj.ref}", "floordiv")
    rb = fb.value(a.ty, f"add {r}, {b.ref}", "radj")
    return fb.value(a.ty, f"select {Value(bty, fix.ref)}, {rb}, {r}", "floormod")


# ---------------------------------------------------------------------------------------------
def cast(cg: CodeGenLLVM, v: Value, src: str, dst: str) -> Value:
    """Convert ``v`` of dtype ``src`` to ``dst`` (a scalar source broadcasts to vector lanes)."""
    s, d = dt.parse(src), dt.parse(dst)
    if s.lanes == 1 and d.lanes > 1:
        v = cast(cg, v, src, dt.element_of(dst))
        return cg.broadcast(v, d.lanes)
    if s.lanes != d.lanes:
        raise TypeError(f"cast from {src} to {dst}: lane counts differ")
    if src == dst:
        return v
    fb = cg.fb
    ty = llvm_type(dst)
    lanes = d.lanes

    def with_lanes(kind_bits: str) -> str:
        return kind_bits if lanes == 1 else f"<{lanes} x {kind_bits}>"

    if d.kind == "bool":
        if s.kind == "float":
            zero = const_value(0.0, src)
            return fb.value(ty, f"fcmp une {v}, {zero.ref}", "tobool")
        if s.kind == "handle":
            return fb.value(ty, f"icmp ne {v}, null", "tobool")
        zero = const_value(0, src)
        return fb.value(ty, f"icmp ne {v}, {zero.ref}", "tobool")
    if s.kind == "handle" or d.kind == "handle":
        if s.kind == d.kind:
            return v
        if d.kind == "handle":
            return fb.value(ty, f"inttoptr {v} to {ty}", "toptr")
        return fb.value(ty, f"ptrtoint {v} to {ty}", "fromptr")
    if d.kind == "float":
        if s.kind == "float":
            inst = "fpext" if d.bits > s.bits else "fptrunc"
            return fb.value(ty, f"{inst} {v} to {ty}", "fcast")
        inst = "sitofp" if s.kind == "int" else "uitofp"
        return fb.value(ty, f"{inst} {v} to {ty}", "itof")
    # integer destination
    if s.kind == "float":
        if d.kind == "uint" and d.bits == 64:
            return fb.value(ty, f"fptoui {v} to {ty}", "ftoi")
        wide = 64 if d.bits == 64 or (d.kind == "uint" and d.bits == 32) else 32
        wty = with_lanes(f"i{wide}")
        w = fb.value(wty, f"fptosi {v} to {wty}", "ftoi")
        if wide == d.bits:
            return w
        return fb.value(ty, f"trunc {w} to {ty}", "ftoi_t")
    # int/uint/bool -> int/uint
    sbits = 1 if s.kind == "bool" else s.bits
    if sbits == d.bits:
        return Value(ty, v.ref)
    if sbits > d.bits:
        return fb.value(ty, f"trunc {v} to {ty}", "trunc")
    inst = "sext" if s.kind == "int" else "zext"
    return fb.value(ty, f"{inst} {v} to {ty}", "ext")
