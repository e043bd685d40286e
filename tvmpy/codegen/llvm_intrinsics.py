"""Lowering of tir intrinsic calls (tvmpy.tir.op) to LLVM IR for the LLVM code generator.

Float math on vectors: float32 ``exp``, ``erf`` and ``tanh`` are inline vector arithmetic
(llvm_vexp.py, llvm_verf.py, llvm_vtanh.py); the other
transcendentals call glibc's libmvec at the target's vector width (``MVEC``, x86-64 Linux).
Otherwise float math goes through LLVM intrinsics where LLVM has one (``llvm.exp``,
``llvm.tanh``, ``llvm.roundeven`` ...): the backend turns them into instructions or libm calls,
lane by lane for vectors. Functions without an intrinsic (``log1p``, ``erf``) call libm
directly, scalarized for vectors. float16 values are computed in float32 and rounded back.
``round`` is half-to-even (``llvm.roundeven``), matching numpy.rint; ``rsqrt`` is
``1/sqrt(x)``; ``sigmoid`` is ``1/(1+exp(-x))`` with exp lowered as ``exp`` is (a vector
``llvm.exp`` would be scalarized); ``fmod`` is ``frem`` (C fmod); ``pow`` is ``llvm.pow``
(libmvec's for vectors), ``x * x`` / ``x`` / ``1 / x`` for a constant exponent 2 / 1 / -1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtype as dt
from ..tir import expr as E
from . import llvm_packed as _packed
from .llvm_ir import CodegenError, Value, const_value, intrinsic_suffix, llvm_type
from .llvm_verf import erf_f32
from .llvm_vexp import exp_f32
from .llvm_vtanh import tanh_f32

if TYPE_CHECKING:
    from .llvm_codegen import CodeGenLLVM

__all__ = ["lower_call", "LLVM_UNARY", "LIBM_UNARY"]

# tir name -> llvm intrinsic base name (overloaded on the float type)
LLVM_UNARY = {
    "exp": "llvm.exp", "exp2": "llvm.exp2", "exp10": "llvm.exp10", "log": "llvm.log",
    "log2": "llvm.log2", "log10": "llvm.log10", "sqrt": "llvm.sqrt", "fabs": "llvm.fabs",
    "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc", "round": "llvm.roundeven",
    "nearbyint": "llvm.nearbyint", "sin": "llvm.sin", "cos": "llvm.cos", "tan": "llvm.tan",
    "sinh": "llvm.sinh", "cosh": "llvm.cosh", "asin": "llvm.asin", "acos": "llvm.acos",
    "atan": "llvm.atan", "tanh": "llvm.tanh",
}
LLVM_BINARY = {"pow": "llvm.pow", "atan2": "llvm.atan2"}
# tir name -> libm base name (float32 adds "f")
LIBM_UNARY = {"log1p": "log1p", "erf": "erf"}
_EXACT = {"fabs", "floor", "ceil", "trunc", "round", "nearbyint"}  # fine on half directly


def _is_half(dtype: str) -> bool:
    return dt.is_float(dtype) and dt.bits_of(dtype) == 16


def lower_call(cg: CodeGenLLVM, call: E.Call) -> Value:
    op = call.op
    fn = _HANDLERS.get(op)
    if fn is not None:
        return fn(cg, call)
    if op in LLVM_UNARY or op in LLVM_BINARY or op in LIBM_UNARY or op in ("rsqrt", "sigmoid",
                                                                             "fmod"):
        return _float_math(cg, call)
    raise CodegenError(f"LLVM codegen: intrinsic {op!r} is not supported (in `{call}`); "
                       "known: see tvmpy.tir.op.INTRINSICS")


# ---------------------------------------------------------------------------------------------
def _float_math(cg: CodeGenLLVM, call: E.Call) -> Value:
    dtype = call.dtype
    if not dt.is_float(dtype):
        raise TypeError(f"{call.op} needs float operands, got {dtype} in `{call}`")
    args = [cg.expr(a) for a in call.args]
    compute = dtype
    if _is_half(dtype) and call.op not in _EXACT:
        compute = dt.with_lanes("float32", dt.lanes_of(dtype))
        args = [cg.cast(a, a_e.dtype, compute) for a, a_e in zip(args, call.args)]
    out = _float_math_typed(cg, call.op, args, compute)
    if compute != dtype:
        out = cg.cast(out, compute, dtype)
    return out


def call_intrinsic(cg: CodeGenLLVM, base: str, args: list[Value], ret: str | None = None) -> Value:
    """Call an LLVM intrinsic overloaded on the first argument's type."""
    ty = ret or args[0].ty
    name = f"{base}.{intrinsic_suffix(args[0].ty)}"
    cg.mb.declare(name, ty, [a.ty for a in args])
    return cg.fb.value(ty, f"call {ty} @{name}({', '.join(str(a) for a in args)})", base[5:])


# float32 vector exp (and sigmoid's) as inline arithmetic (codegen/llvm_vexp.py) rather than a
# libmvec call; False: libmvec (or llvm.exp where there is none), for comparisons
INLINE_EXP = True
# float32 vector erf as inline arithmetic (llvm_verf.py) rather than a libmvec call
INLINE_ERF = True
# float32 vector tanh as inline arithmetic (llvm_vtanh.py) rather than a libmvec call
INLINE_TANH = True


def _float_math_typed(cg: CodeGenLLVM, op: str, args: list[Value], dtype: str) -> Value:
    fb = cg.fb
    ty = args[0].ty
    if (op == "exp" and INLINE_EXP and dt.lanes_of(dtype) > 1
            and dt.element_of(dtype) == "float32"):
        return exp_f32(cg, args[0], dtype)
    if (op == "erf" and INLINE_ERF and dt.lanes_of(dtype) > 1
            and dt.element_of(dtype) == "float32"):
        return erf_f32(cg, args[0], dtype)
    if (op == "tanh" and INLINE_TANH and dt.lanes_of(dtype) > 1
            and dt.element_of(dtype) == "float32"):
        return tanh_f32(cg, args[0], dtype)
    if op in MVEC and dt.lanes_of(dtype) > 1 and cg.mvec_isas:
        out = _mvec_call(cg, MVEC[op], args, dtype)
        if out is not None:
            return out
    if op in LLVM_UNARY:
        return call_intrinsic(cg, LLVM_UNARY[op], args)
    if op in LLVM_BINARY:
        return call_intrinsic(cg, LLVM_BINARY[op], args)
    if op == "fmod":
        return fb.value(ty, f"frem {args[0]}, {args[1].ref}", "fmod")
    if op == "rsqrt":
        s = call_intrinsic(cg, "llvm.sqrt", args)
        one = const_value(1.0, dtype)
        return fb.value(ty, f"fdiv contract {one}, {s.ref}", "rsqrt")
    if op == "sigmoid":
        one = const_value(1.0, dtype)
        return fb.value(ty, f"fdiv contract {one}, {_one_plus_exp_neg(cg, args[0], dtype).ref}",
                        "sigmoid")
    if op in LIBM_UNARY:
        bits = dt.bits_of(dtype)
        name = LIBM_UNARY[op] + ("f" if bits == 32 else "")
        st = llvm_type(dt.element_of(dtype))
        cg.mb.declare(name, st, [st])
        return cg.map_lanes(args[0], dtype, lambda x: fb.value(st, f"call {st} @{name}({x})", op))
    raise NotImplementedError(op)  # pragma: no cover


def _one_plus_exp_neg(cg: CodeGenLLVM, x: Value, dtype: str, nan_lanes: bool = True) -> Value:
    """``1 + exp(-x)``: sigmoid's and SiLU's denominator (``nan_lanes=False``: any value in a
    lane where ``x`` is nan, for a caller whose result is nan there anyway)."""
    fb = cg.fb
    neg = fb.value(x.ty, f"fneg {x}", "neg")
    if (not nan_lanes and INLINE_EXP and dt.lanes_of(dtype) > 1
            and dt.element_of(dtype) == "float32"):
        e = exp_f32(cg, neg, dtype, nan_lanes=False)
    else:
        # through the same lowering as exp (inline for float32 vectors), never llvm.exp
        # directly: LLVM has no vector exp, so a vector llvm.exp becomes one scalar expf call
        # per lane
        e = _float_math_typed(cg, "exp", [neg], dtype)
    return fb.value(x.ty, f"fadd contract {const_value(1.0, dtype)}, {e.ref}", "den")


def silu(cg: CodeGenLLVM, x: Value, dtype: str) -> Value:
    """``x * sigmoid(x)`` as ``x / (1 + exp(-x))``: one division where the product takes a
    division and a multiplication (one operation fewer on the vector multiplier, which bounds
    SiLU epilogues), and one rounding instead of two. Same special values: +-inf, nan and
    large negative ``x`` (-0 once ``exp(-x)`` overflows) give what the product gives; a nan
    ``x`` is the numerator, so the exp needs no nan fix-up of its own (two operations fewer)."""
    den = _one_plus_exp_neg(cg, x, dtype, nan_lanes=False)
    return cg.fb.value(x.ty, f"fdiv contract {x}, {den.ref}", "silu")


# ---------------------------------------------------------------------------------------------
# vector math through glibc's libmvec (x86-64): _ZGV<isa>N<lanes><v|vv>_<name>[f]
MVEC = {"exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2",
        "log10": "log10", "log1p": "log1p", "tanh": "tanh", "erf": "erf", "sin": "sin",
        "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh", "asin": "asin",
        "acos": "acos", "atan": "atan", "pow": "pow", "atan2": "atan2"}


def _shuffle(cg: CodeGenLLVM, a: Value, b: Value | None, idx: list[int | None], ety: str) -> Value:
    n = len(idx)
    mask = ", ".join("i32 poison" if i is None else f"i32 {i}" for i in idx)
    other = str(b) if b is not None else f"{a.ty} poison"
    return cg.fb.value(f"<{n} x {ety}>", f"shufflevector {a}, {other}, <{n} x i32> <{mask}>",
                       "mv")


def _mvec_call(cg: CodeGenLLVM, base: str, args: list[Value], dtype: str) -> Value | None:
    """Call libmvec on chunks of the native vector widths; None when no variant applies."""
    bits = dt.bits_of(dtype)
    if bits not in (32, 64):
        return None
    ety = "float" if bits == 32 else "double"
    suffix = "f" if bits == 32 else ""
    lanes = dt.lanes_of(dtype)
    widths = [(isa, vbits // bits) for isa, vbits in cg.mvec_isas]
    vs = "v" * len(args)
    pieces: list[tuple[int, int, Value]] = []  # (start, valid lanes, result chunk)
    start = 0
    while start < lanes:
        left = lanes - start
        fit = [(isa, w) for isa, w in widths if w <= left]
        isa, w = fit[0] if fit else widths[-1]
        idx = [start + j if start + j < lanes else lanes for j in range(w)]
        chunk_args = []
        for a in args:
            if w == lanes:
                chunk_args.append(a)
            else:  # lanes past the end read lane 0 of a zero vector
                chunk_args.append(_shuffle(cg, a, Value(a.ty, "zeroinitializer"), idx, ety))
        vty = f"<{w} x {ety}>"
        name = f"_ZGV{isa}N{w}{vs}_{base}{suffix}"
        # libmvec's functions are pure (no errno): LLVM may merge, hoist and drop their calls
        cg.mb.declare(name, vty, [vty] * len(args), "nounwind willreturn memory(none)")
        cg.uses_mvec = True
        r = cg.fb.value(vty, f"call {vty} @{name}({', '.join(map(str, chunk_args))})", base)
        pieces.append((start, min(w, left), r))
        start += w
    if len(pieces) == 1 and pieces[0][1] == lanes and pieces[0][2].ty == args[0].ty:
        return pieces[0][2]
    out: Value | None = None
    for start, valid, r in pieces:
        w = int(r.ty[1:].split(" x ")[0])
        wide = _shuffle(cg, r, None, [j - start if start <= j < start + valid else None
                                      for j in range(lanes)], ety)
        if w == lanes and start == 0:
            wide = r
        if out is None:
            out = wide
        else:
            out = _shuffle(cg, out, wide, [lanes + j if start <= j < start + valid else j
                                           for j in range(lanes)], ety)
    return out


# ---------------------------------------------------------------------------------------------
def _fpred(cg: CodeGenLLVM, call: E.Call) -> Value:
    (x_e,) = call.args
    x = cg.expr(x_e)
    bty = llvm_type(call.dtype)
    if not dt.is_float(x_e.dtype):
        return const_value(call.op == "isfinite", call.dtype)
    if call.op == "isnan":
        return cg.fb.value(bty, f"fcmp uno {x}, {x.ref}", "isnan")
    a = call_intrinsic(cg, "llvm.fabs", [x])
    inf = const_value(float("inf"), x_e.dtype)
    pred = "oeq" if call.op == "isinf" else "olt"
    return cg.fb.value(bty, f"fcmp {pred} {a}, {inf.ref}", call.op)


def _popcount(cg: CodeGenLLVM, call: E.Call) -> Value:
    x = cg.expr(call.args[0])
    if x.ty.endswith("i1") or x.ty.endswith("i1>"):
        return x
    return call_intrinsic(cg, "llvm.ctpop", [x])


def _bitwise(cg: CodeGenLLVM, call: E.Call) -> Value:
    a_e, b_e = call.args
    if not dt.is_integer(a_e.dtype):
        raise TypeError(f"{call.op} needs integer operands, got {a_e.dtype}")
    a, b = cg.expr(a_e), cg.expr(b_e)
    if call.op == "shift_right":
        inst = "lshr" if dt.parse(a_e.dtype).kind in ("uint", "bool") else "ashr"
    else:
        inst = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
                "shift_left": "shl"}[call.op]
    return cg.fb.value(a.ty, f"{inst} {a}, {b.ref}", call.op)


def _bitwise_not(cg: CodeGenLLVM, call: E.Call) -> Value:
    a = cg.expr(call.args[0])
    ones = const_value(-1 if not dt.is_bool(call.dtype) else 1, call.dtype)
    return cg.fb.value(a.ty, f"xor {a}, {ones.ref}", "not")


def _abs(cg: CodeGenLLVM, call: E.Call) -> Value:
    (x_e,) = call.args
    x = cg.expr(x_e)
    if dt.is_float(x_e.dtype):
        return call_intrinsic(cg, "llvm.fabs", [x])
    if dt.is_int(x_e.dtype):
        return call_intrinsic(cg, "llvm.abs", [x, Value("i1", "false")])
    return x


def _reinterpret(cg: CodeGenLLVM, call: E.Call) -> Value:
    (x_e,) = call.args
    if dt.bits_of(x_e.dtype) * dt.lanes_of(x_e.dtype) != dt.bits_of(call.dtype) * dt.lanes_of(call.dtype):
        raise TypeError(f"reinterpret from {x_e.dtype} to {call.dtype}: sizes differ")
    x = cg.expr(x_e)
    ty = llvm_type(call.dtype)
    if x.ty == ty:
        return x
    if dt.is_handle(call.dtype) or dt.is_handle(x_e.dtype):
        inst = "inttoptr" if dt.is_handle(call.dtype) else "ptrtoint"
        return cg.fb.value(ty, f"{inst} {x} to {ty}", "reinterpret")
    return cg.fb.value(ty, f"bitcast {x} to {ty}", "reinterpret")


def _likely(cg: CodeGenLLVM, call: E.Call) -> Value:
    return cg.expr(call.args[0])


def _if_then_else(cg: CodeGenLLVM, call: E.Call) -> Value:
    return cg.if_then_else(*call.args, call.dtype)


def _extern(cg: CodeGenLLVM, call: E.Call) -> Value:
    name_e = call.args[0]
    if not isinstance(name_e, E.StringImm):
        raise TypeError(f"{call.op}: the first argument must be the function name, got {name_e}")
    name = name_e.value
    arg_es = call.args[1:]
    lanes = dt.lanes_of(call.dtype)
    if call.op == "call_pure_extern" and lanes > 1:
        # a scalar C function applied lane-wise
        args = [cg.expr(a) for a in arg_es]
        st = llvm_type(dt.element_of(call.dtype))
        arg_tys = [llvm_type(dt.element_of(a.dtype)) for a in arg_es]
        cg.mb.declare(name, st, arg_tys)
        fb = cg.fb
        out = Value(llvm_type(call.dtype), "poison")
        for i in range(lanes):
            lane_args = []
            for a, a_e in zip(args, arg_es):
                if dt.lanes_of(a_e.dtype) > 1:
                    lane_args.append(fb.value(llvm_type(dt.element_of(a_e.dtype)),
                                              f"extractelement {a}, i32 {i}", "lane"))
                else:
                    lane_args.append(a)
            r = fb.value(st, f"call {st} @{name}({', '.join(map(str, lane_args))})", "ext")
            out = fb.value(out.ty, f"insertelement {out}, {r}, i32 {i}", "vec")
        return out
    args = [cg.expr(a) for a in arg_es]
    ret = llvm_type(call.dtype)
    cg.mb.declare(name, ret, [a.ty for a in args])
    return cg.fb.value(ret, f"call {ret} @{name}({', '.join(map(str, args))})", "call")


def _llvm_intrin(cg: CodeGenLLVM, call: E.Call) -> Value:
    """``call_llvm_[pure_]intrin(dtype, "llvm.x86...", args...)``: a direct call of the named LLVM
    intrinsic, declared with the argument and result types (vectors as they are)."""
    name_e = call.args[0]
    if not isinstance(name_e, E.StringImm) or not name_e.value.startswith("llvm."):
        raise TypeError(f"{call.op}: the first argument must be an LLVM intrinsic name, got {name_e}")
    if name_e.value.startswith("llvm.prefetch"):  # (void: a call for its effect only)
        _emit_prefetch(cg, name_e.value, call.args[1], call.args[2:])
        return Value("i32", "0")
    args = [cg.expr(a) for a in call.args[1:]]
    ret = llvm_type(call.dtype)
    cg.mb.declare(name_e.value, ret, [a.ty for a in args])
    return cg.fb.value(ret, f"call {ret} @{name_e.value}({', '.join(map(str, args))})", "intrin")


def _access_ptr(cg: CodeGenLLVM, call: E.Call) -> Value:
    ann, data, offset = call.args[0], call.args[1], call.args[2]
    if isinstance(ann, E.Call) and ann.op == "type_annotation":
        elem = ann.args[0].dtype if ann.args else ann.dtype
    else:
        elem = ann.dtype
    base = cg.expr(data)
    off = cg.expr(offset)
    ety = llvm_type(elem, memory=True)
    return cg.fb.value("ptr", f"getelementptr inbounds {ety}, {base}, {off}", "aptr")


def _address_of(cg: CodeGenLLVM, call: E.Call) -> Value:
    (load,) = call.args
    if not isinstance(load, E.BufferLoad):
        raise TypeError(f"address_of needs a buffer load, got {load}")
    return cg.element_ptr(load.buffer, load.indices)


def _prefetch(cg: CodeGenLLVM, call: E.Call) -> Value:
    """``prefetch(address_of(buf[i]), rw, locality, cache_type)`` (TVM's ``tir.prefetch``): a
    ``llvm.prefetch`` of that element's address; the call's value is 0."""
    _emit_prefetch(cg, "llvm.prefetch.p0", call.args[0], call.args[1:])
    return Value("i32", "0")


def _emit_prefetch(cg: CodeGenLLVM, intrinsic: str, addr: E.PrimExpr, flags: list) -> None:
    """A call of ``intrinsic`` (``llvm.prefetch.p0``) on ``addr`` with the integer ``flags``.
    An ``address_of(buf[i])`` address may lie past its buffer (prefetches run ahead of a
    stream, and never fault): it is computed without ``inbounds``, which would make it
    poison."""
    if isinstance(addr, E.Call) and addr.op == "address_of" and isinstance(addr.args[0], E.BufferLoad):
        load = addr.args[0]
        ptr = cg.element_ptr(load.buffer, load.indices, inbounds=False)
    else:
        ptr = cg.expr(addr)
    ints = ", ".join(f"i32 {int(getattr(f, 'value', f))}" for f in flags)
    cg.mb.declare(intrinsic, "void", ["ptr", "i32", "i32", "i32"])
    cg.fb.emit(f"call void @{intrinsic}({ptr}, {ints})")


def _type_annotation(cg: CodeGenLLVM, call: E.Call) -> Value:
    raise TypeError("type_annotation is only valid as the first argument of tvm_access_ptr")


_HANDLERS = {
    "isnan": _fpred, "isinf": _fpred, "isfinite": _fpred, "popcount": _popcount,
    "bitwise_and": _bitwise, "bitwise_or": _bitwise, "bitwise_xor": _bitwise,
    "shift_left": _bitwise, "shift_right": _bitwise, "bitwise_not": _bitwise_not,
    "abs": _abs, "reinterpret": _reinterpret, "likely": _likely, "if_then_else": _if_then_else,
    "call_extern": _extern, "call_pure_extern": _extern, "tvm_access_ptr": _access_ptr,
    "address_of": _address_of, "type_annotation": _type_annotation, "prefetch": _prefetch,
    "call_llvm_intrin": _llvm_intrin, "call_llvm_pure_intrin": _llvm_intrin,
}
_HANDLERS.update({"tvm_call_packed": _packed.call_packed,
                  "tvm_stack_make_array": _packed.not_in_call,
                  "tvm_stack_make_shape": _packed.not_in_call})
