"""TIR expressions -> SPIR-V instructions (the expression half of the Vulkan code generator).

:class:`ExprEmitter` turns one scalar lane of an expression into an SSA :class:`Value`: vectors
are scalarized as in the C backend (``Ramp(b, s, n)`` at lane ``l`` is ``b + l*s``,
``Broadcast(v)`` is ``v``, a vector load is a load per lane). Integer arithmetic wraps (SPIR-V's
semantics, as the LLVM backend's); ``floordiv``/``floormod`` are built from the truncating
operations; float math goes through ``GLSL.std.450`` (``erf`` has no instruction there: an
Abramowitz-Stegun 7.1.26 polynomial, |error| < 1.5e-7). ``if_then_else`` branches (its arms may
read out of bounds when not taken); ``Select`` evaluates both arms, as TIR defines it.
The statement emitter (:mod:`.spirv_emit`) supplies variables, buffers and control flow.
"""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from .gpu_source import GPUCodegenError
from .spirv_builder import Builder, Op, Value

__all__ = ["ExprEmitter", "GLSL"]

# GLSL.std.450 extended instruction numbers
GLSL = {"round": 1, "roundeven": 2, "trunc": 3, "fabs": 4, "sabs": 5, "floor": 8, "ceil": 9,
        "sin": 13, "cos": 14, "tan": 15, "asin": 16, "acos": 17, "atan": 18, "sinh": 19,
        "cosh": 20, "tanh": 21, "atan2": 25, "pow": 26, "exp": 27, "log": 28, "exp2": 29,
        "log2": 30, "sqrt": 31, "rsqrt": 32, "fmin": 37, "umin": 38, "smin": 39, "fmax": 40,
        "umax": 41, "smax": 42, "fclamp": 43, "fma": 50, "nmin": 79, "nmax": 80}
# ops that GLSL.std.450 defines for float64 too (the others: 16/32-bit floats only)
_F64_OK = {"fabs", "floor", "ceil", "trunc", "round", "roundeven", "sqrt", "rsqrt", "fmin",
           "fmax", "fma", "fclamp", "nmin", "nmax"}
_MATH_DIRECT = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
                "rsqrt": "rsqrt", "fabs": "fabs", "floor": "floor", "ceil": "ceil",
                "round": "roundeven", "nearbyint": "roundeven", "trunc": "trunc", "sin": "sin",
                "cos": "cos", "tan": "tan", "sinh": "sinh", "cosh": "cosh",
                "atan": "atan", "pow": "pow", "atan2": "atan2"}
_INT_CMP = {E.EQ: (Op.IEqual, Op.IEqual), E.NE: (Op.INotEqual, Op.INotEqual),
            E.LT: (Op.SLessThan, Op.ULessThan), E.LE: (Op.SLessThanEqual, Op.ULessThanEqual),
            E.GT: (Op.SGreaterThan, Op.UGreaterThan),
            E.GE: (Op.SGreaterThanEqual, Op.UGreaterThanEqual)}
_FLOAT_CMP = {E.EQ: Op.FOrdEqual, E.NE: Op.FUnordNotEqual, E.LT: Op.FOrdLessThan,
              E.LE: Op.FOrdLessThanEqual, E.GT: Op.FOrdGreaterThan, E.GE: Op.FOrdGreaterThanEqual}
_ARITH = {E.Add: (Op.IAdd, Op.FAdd), E.Sub: (Op.ISub, Op.FSub), E.Mul: (Op.IMul, Op.FMul)}
_BITWISE = {"bitwise_and": Op.BitwiseAnd, "bitwise_or": Op.BitwiseOr, "bitwise_xor": Op.BitwiseXor,
            "shift_left": Op.ShiftLeftLogical}


def _short(op: Any) -> str:
    return str(op).removeprefix("tir.")


class ExprEmitter:
    """Expression half of the SPIR-V kernel emitter (see :mod:`.spirv_emit` for the rest)."""

    b: Builder
    name: str  # the kernel's name, for messages
    vals: dict[int, Any]  # var id -> Value, or a list of Values (a vector let)

    # provided by the statement emitter
    def load(self, e: E.BufferLoad, index: Value) -> Value:
        raise NotImplementedError

    def branch_value(self, cond: Value, then: Any, other: Any, dtype: str) -> Value:
        raise NotImplementedError

    def error(self, what: str) -> GPUCodegenError:
        return GPUCodegenError(f"{self.name}: the Vulkan (SPIR-V) back end cannot compile {what}")

    # ---- helpers -----------------------------------------------------------------------------
    def t(self, dtype: str) -> int:
        return self.b.t_scalar(dt.element_of(dtype))

    def const(self, dtype: str, value: Any) -> Value:
        elem = dt.element_of(dtype)
        return Value(self.b.const(elem, value), elem)

    def op(self, opcode: int, dtype: str, *args: Value | int) -> Value:
        ids = [a.id if isinstance(a, Value) else a for a in args]
        return Value(self.b.op(opcode, self.t(dtype), *ids), dt.element_of(dtype))

    def ext(self, name: str, dtype: str, *args: Value) -> Value:
        elem = dt.element_of(dtype)
        if elem == "float64" and name not in _F64_OK:
            raise self.error(f"{name} on float64 (GLSL.std.450 defines it for 16/32-bit floats "
                             "only); compute in float32")
        return Value(self.b.ext(self.t(elem), GLSL[name], *(a.id for a in args)), elem)

    def convert(self, v: Value, dst: str) -> Value:
        """``v`` cast to ``dst`` with C's semantics (float -> int truncates)."""
        src, dst = v.dtype, dt.element_of(dst)
        if src == dst:
            return v
        if dst == "bool":
            if dt.is_float(src):
                return self.op(Op.FUnordNotEqual, "bool", v, self.const(src, 0.0))
            return self.op(Op.INotEqual, "bool", v, self.const(src, 0))
        if src == "bool":
            one, zero = (1.0, 0.0) if dt.is_float(dst) else (1, 0)
            return self.op(Op.Select, dst, v, self.const(dst, one), self.const(dst, zero))
        if dt.is_float(src) and dt.is_float(dst):
            return self.op(Op.FConvert, dst, v)
        if dt.is_float(src):
            return self.op(Op.ConvertFToU if dt.is_uint(dst) else Op.ConvertFToS, dst, v)
        if dt.is_float(dst):
            return self.op(Op.ConvertUToF if dt.is_uint(src) else Op.ConvertSToF, dst, v)
        # integer -> integer: change the width in the source's signedness, then reinterpret
        sbits, dbits = dt.bits_of(src), dt.bits_of(dst)
        if sbits != dbits:
            mid = ("uint" if dt.is_uint(src) else "int") + str(dbits)
            v = self.op(Op.UConvert if dt.is_uint(src) else Op.SConvert, mid, v)
        return v if v.dtype == dst else self.op(Op.Bitcast, dst, v)

    # ---- entry -------------------------------------------------------------------------------
    def expr(self, e: E.PrimExpr, lane: int = 0) -> Value:
        fn = getattr(self, "_e_" + type(e).__name__, None)
        if fn is None:
            for cls in type(e).__mro__[1:]:
                fn = getattr(self, "_e_" + cls.__name__, None)
                if fn is not None:
                    break
        if fn is None:
            raise self.error(f"the expression {e} ({type(e).__name__})")
        return fn(e, lane)

    def _e_IntImm(self, e: E.IntImm, lane: int) -> Value:
        return self.const(e.dtype, bool(e.value) if dt.is_bool(e.dtype) else int(e.value))

    def _e_FloatImm(self, e: E.FloatImm, lane: int) -> Value:
        return self.const(e.dtype, float(e.value))

    def _e_StringImm(self, e: E.StringImm, lane: int) -> Value:
        raise self.error(f"the string {e.value!r} in a kernel")

    def _e_Var(self, e: E.Var, lane: int) -> Value:
        v = self.vals.get(id(e))
        if v is None:
            raise self.error(f"the variable {e.name}, which no parameter, loop or let defines "
                             "inside the kernel")
        return v[lane] if isinstance(v, list) else v

    def _e_Cast(self, e: E.Cast, lane: int) -> Value:
        return self.convert(self.expr(e.value, lane), e.dtype)

    def _e_Ramp(self, e: E.Ramp, lane: int) -> Value:
        base = self.expr(e.base)
        if lane == 0:
            return base
        step = self.expr(E.Mul(e.stride, E.const(lane, dt.element_of(e.stride.dtype))))
        return self.op(Op.IAdd, base.dtype, base, step)

    def _e_Broadcast(self, e: E.Broadcast, lane: int) -> Value:
        return self.expr(e.value)

    def _e_Let(self, e: E.Let, lane: int) -> Value:
        lanes = dt.lanes_of(e.var.dtype)
        old = self.vals.get(id(e.var))
        self.vals[id(e.var)] = ([self.expr(e.value, k) for k in range(lanes)] if lanes > 1
                                else self.expr(e.value, lane))
        try:
            return self.expr(e.body, lane)
        finally:
            if old is None:
                self.vals.pop(id(e.var), None)
            else:
                self.vals[id(e.var)] = old

    def _e_Shuffle(self, e: E.Shuffle, lane: int) -> Value:
        idx = e.indices[lane] if hasattr(e, "indices") else None
        if idx is None or not E.is_const_int(idx):
            raise self.error(f"the shuffle {e}")
        k = int(E.const_value(idx))  # type: ignore[arg-type]
        for vec in e.vectors:
            n = dt.lanes_of(vec.dtype)
            if k < n:
                return self.expr(vec, k)
            k -= n
        raise self.error(f"the shuffle {e} (lane out of range)")

    # ---- arithmetic --------------------------------------------------------------------------
    def _binary(self, e: Any, lane: int) -> tuple[Value, Value, str]:
        a, b = self.expr(e.a, lane), self.expr(e.b, lane)
        return a, b, dt.element_of(e.a.dtype)

    def _e_Add(self, e: Any, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        iop, fop = _ARITH[type(e)]
        return self.op(fop if dt.is_float(elem) else iop, elem, a, b)

    _e_Sub = _e_Mul = _e_Add

    def _e_Div(self, e: E.Div, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        if dt.is_float(elem):
            return self.op(Op.FDiv, elem, a, b)
        return self.op(Op.UDiv if dt.is_uint(elem) else Op.SDiv, elem, a, b)

    def _e_Mod(self, e: E.Mod, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        if dt.is_float(elem):
            return self.fmod(a, b)
        return self.op(Op.UMod if dt.is_uint(elem) else Op.SRem, elem, a, b)

    def _e_FloorDiv(self, e: E.FloorDiv, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        if dt.is_float(elem):
            return self.ext("floor", elem, self.op(Op.FDiv, elem, a, b))
        if dt.is_uint(elem):
            return self.op(Op.UDiv, elem, a, b)
        q = self.op(Op.SDiv, elem, a, b)
        r = self.op(Op.SRem, elem, a, b)
        zero = self.const(elem, 0)
        # q - 1 when the remainder is non-zero and its sign differs from the divisor's
        adjust = self.op(Op.LogicalAnd, "bool", self.op(Op.INotEqual, "bool", r, zero),
                         self.op(Op.LogicalNotEqual, "bool", self.op(Op.SLessThan, "bool", r, zero),
                                 self.op(Op.SLessThan, "bool", b, zero)))
        return self.op(Op.Select, elem, adjust, self.op(Op.ISub, elem, q, self.const(elem, 1)), q)

    def _e_FloorMod(self, e: E.FloorMod, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        if dt.is_float(elem):
            q = self.ext("floor", elem, self.op(Op.FDiv, elem, a, b))
            return self.op(Op.FSub, elem, a, self.op(Op.FMul, elem, q, b))
        if dt.is_uint(elem):
            return self.op(Op.UMod, elem, a, b)
        # r + b when the remainder is non-zero and its sign differs from the divisor's (not
        # OpSMod: lavapipe's gives the truncated remainder's sign)
        r = self.op(Op.SRem, elem, a, b)
        zero = self.const(elem, 0)
        adjust = self.op(Op.LogicalAnd, "bool", self.op(Op.INotEqual, "bool", r, zero),
                         self.op(Op.LogicalNotEqual, "bool", self.op(Op.SLessThan, "bool", r, zero),
                                 self.op(Op.SLessThan, "bool", b, zero)))
        return self.op(Op.Select, elem, adjust, self.op(Op.IAdd, elem, r, b), r)

    def _e_Min(self, e: Any, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        lo = isinstance(e, E.Min)
        if elem == "bool":
            return self.op(Op.LogicalAnd if lo else Op.LogicalOr, "bool", a, b)
        kind = "f" if dt.is_float(elem) else ("u" if dt.is_uint(elem) else "s")
        m = self.ext(kind + ("min" if lo else "max"), elem, a, b)
        if not dt.is_float(elem):
            return m
        # NaN on either side gives NaN (numpy's minimum/maximum, the LLVM backend's)
        nan = self.op(Op.LogicalOr, "bool", self.op(Op.IsNan, "bool", a), self.op(Op.IsNan, "bool", b))
        return self.op(Op.Select, elem, nan, self.op(Op.FAdd, elem, a, b), m)

    _e_Max = _e_Min

    def _e_CmpOp(self, e: Any, lane: int) -> Value:
        a, b, elem = self._binary(e, lane)
        if elem == "bool":
            opcode = {E.EQ: Op.LogicalEqual, E.NE: Op.LogicalNotEqual}.get(type(e))
            if opcode is None:  # ordered comparisons of bools: as 0/1 integers
                a, b, elem = self.convert(a, "int32"), self.convert(b, "int32"), "int32"
            else:
                return self.op(opcode, "bool", a, b)
        if dt.is_float(elem):
            return self.op(_FLOAT_CMP[type(e)], "bool", a, b)
        signed, unsigned = _INT_CMP[type(e)]
        return self.op(unsigned if dt.is_uint(elem) else signed, "bool", a, b)

    def _e_And(self, e: E.And, lane: int) -> Value:
        a, b = self.expr(e.a, lane), self.expr(e.b, lane)
        return self.op(Op.LogicalAnd, "bool", a, b)

    def _e_Or(self, e: E.Or, lane: int) -> Value:
        a, b = self.expr(e.a, lane), self.expr(e.b, lane)
        return self.op(Op.LogicalOr, "bool", a, b)

    def _e_Not(self, e: E.Not, lane: int) -> Value:
        return self.op(Op.LogicalNot, "bool", self.expr(e.a, lane))

    def _e_Select(self, e: E.Select, lane: int) -> Value:
        c = self.expr(e.condition, lane)
        t, f = self.expr(e.true_value, lane), self.expr(e.false_value, lane)
        return self.op(Op.Select, e.dtype, c, t, f)

    # ---- memory ------------------------------------------------------------------------------
    def _e_BufferLoad(self, e: E.BufferLoad, lane: int) -> Value:
        if len(e.indices) != 1:
            raise self.error(f"the load {e} with {len(e.indices)} indices (lower it first)")
        if dt.lanes_of(e.buffer.dtype) != 1:
            raise self.error(f"the vector-typed buffer {e.buffer.name} ({e.buffer.dtype})")
        index = self.expr(e.indices[0], lane)
        if e.predicate is None:
            return self.load(e, index)
        pred = self.expr(e.predicate, lane)
        zero = 0.0 if dt.is_float(e.dtype) else 0
        return self.branch_value(pred, lambda: self.load(e, index),
                                 lambda: self.const(e.dtype, zero), e.dtype)

    # ---- calls -------------------------------------------------------------------------------
    def _e_Call(self, e: E.Call, lane: int) -> Value:
        op = _short(e.op)
        elem = dt.element_of(e.dtype)
        args = list(e.args)
        if op == "likely":
            return self.expr(args[0], lane)
        if op == "if_then_else":
            c = self.expr(args[0], lane)
            return self.branch_value(c, lambda: self.expr(args[1], lane),
                                     lambda: self.expr(args[2], lane), elem)
        if op in _MATH_DIRECT or op in ("asin", "acos", "exp10", "log10", "log1p", "tanh", "erf", "sigmoid",
                                        "fmod", "isnan", "isinf", "isfinite"):
            return self._math(op, elem, [self.expr(a, lane) for a in args], args)
        if op == "abs":
            x = self.expr(args[0], lane)
            if dt.is_float(x.dtype):
                return self.ext("fabs", elem, x)
            return x if dt.is_uint(x.dtype) or x.dtype == "bool" else self.ext("sabs", elem, x)
        if op in _BITWISE or op == "shift_right":
            a, b = self.expr(args[0], lane), self.expr(args[1], lane)
            if op == "shift_right":
                code = Op.ShiftRightLogical if dt.is_uint(a.dtype) else Op.ShiftRightArithmetic
            else:
                code = _BITWISE[op]
            return self.op(code, elem, a, b)
        if op == "bitwise_not":
            return self.op(Op.Not, elem, self.expr(args[0], lane))
        if op == "popcount":
            x = self.expr(args[0], lane)
            bits = dt.bits_of(x.dtype)
            if bits < 32:  # the value's own bits, zero-extended
                x = self.convert(self.convert(x, f"uint{bits}"), "uint32")
            if bits == 64:  # Vulkan's BitCount takes 32-bit operands: the two halves
                u = self.convert(x, "uint64")
                lo = self.op(Op.UConvert, "uint32", u)
                hi = self.op(Op.UConvert, "uint32", self.op(Op.ShiftRightLogical, "uint64", u,
                                                            self.const("uint64", 32)))
                total = self.op(Op.IAdd, "int32", self.op(Op.BitCount, "int32", lo),
                                self.op(Op.BitCount, "int32", hi))
                return self.convert(total, elem)
            return self.convert(self.op(Op.BitCount, "int32", x), elem)
        if op == "reinterpret":
            x = self.expr(args[0], lane)
            if dt.bits_of(x.dtype) != dt.bits_of(elem):
                raise self.error(f"reinterpret {x.dtype} -> {elem} (the sizes differ)")
            return self.op(Op.Bitcast, elem, x)
        raise self.error(f"the intrinsic {op!r} ({e})")

    def exact(self, opcode: int, dtype: str, *args: Value) -> Value:
        """An arithmetic instruction the driver must not fuse with another (NoContraction)."""
        v = self.op(opcode, dtype, *args)
        self.b.decorate(v.id, 42)  # NoContraction
        return v

    def fmod(self, x: Value, y: Value) -> Value:
        """C's fmod (the dividend's sign): x - q*y for q = trunc(x/y), with q*y as an exact
        two-term product (Dekker's split; OpFRem and Fma are not exact on lavapipe), then one
        correction when x/y rounded across an integer."""
        elem = x.dtype
        mul, add, sub = (lambda a, b, o=o: self.exact(o, elem, a, b)
                         for o in (Op.FMul, Op.FAdd, Op.FSub))
        q = self.ext("trunc", elem, self.op(Op.FDiv, elem, x, y))
        split = self.const(elem, {"float16": 65.0, "float32": 4097.0}.get(elem, 134217729.0))

        def halves(a: Value) -> tuple[Value, Value]:
            c = mul(split, a)
            hi = sub(c, sub(c, a))
            return hi, sub(a, hi)

        (qh, ql), (yh, yl) = halves(q), halves(y)
        p = mul(q, y)
        err = add(add(add(sub(mul(qh, yh), p), mul(qh, yl)), mul(ql, yh)), mul(ql, yl))
        r = sub(sub(x, p), err)
        zero = self.const(elem, 0.0)
        flipped = self.op(Op.LogicalAnd, "bool", self.op(Op.FOrdNotEqual, "bool", r, zero),
                          self.op(Op.LogicalNotEqual, "bool",
                                  self.op(Op.FOrdLessThan, "bool", r, zero),
                                  self.op(Op.FOrdLessThan, "bool", x, zero)))
        ay = self.ext("fabs", elem, y)
        step = self.op(Op.Select, elem, self.op(Op.FOrdLessThan, "bool", x, zero),
                       self.op(Op.FNegate, elem, ay), ay)
        return self.op(Op.Select, elem, flipped, self.op(Op.FAdd, elem, r, step), r)

    def _math(self, op: str, elem: str, xs: list[Value], args: list[Any]) -> Value:
        if op in ("isnan", "isinf", "isfinite"):
            x = xs[0]
            if not dt.is_float(x.dtype):
                return self.const("bool", op == "isfinite")
            if op == "isfinite":
                bad = self.op(Op.LogicalOr, "bool", self.op(Op.IsNan, "bool", x),
                              self.op(Op.IsInf, "bool", x))
                return self.op(Op.LogicalNot, "bool", bad)
            return self.op(Op.IsNan if op == "isnan" else Op.IsInf, "bool", x)
        if not dt.is_float(elem):
            raise self.error(f"{op} of {elem} (float math needs float arguments)")
        if op in ("round", "nearbyint") and elem == "float64":
            return self._round_even_f64(xs[0])
        if op in _MATH_DIRECT:
            return self.ext(_MATH_DIRECT[op], elem, *xs)
        x = xs[0]
        if op == "fmod":
            return self.fmod(x, xs[1])
        if op in ("asin", "acos"):  # through atan2: lavapipe's asin is off by ~3e-4
            one = self.const(elem, 1.0)
            root = self.ext("sqrt", elem, self.op(Op.FMul, elem, self.op(Op.FSub, elem, one, x),
                                                  self.op(Op.FAdd, elem, one, x)))
            return self.ext("atan2", elem, *((x, root) if op == "asin" else (root, x)))
        if op == "exp10":
            return self.ext("exp2", elem, self.op(Op.FMul, elem, x, self.const(elem, 3.321928094887362)))
        if op == "log10":
            return self.op(Op.FMul, elem, self.ext("log2", elem, x), self.const(elem, 0.30102999566398120))
        if op == "log1p":
            return self.ext("log", elem, self.op(Op.FAdd, elem, x, self.const(elem, 1.0)))
        if op == "sigmoid":
            e_neg = self.ext("exp", elem, self.op(Op.FNegate, elem, x))
            return self.op(Op.FDiv, elem, self.const(elem, 1.0),
                           self.op(Op.FAdd, elem, self.const(elem, 1.0), e_neg))
        if op == "tanh":  # clamped: some drivers' tanh overflows to NaN for large |x|
            c = self.ext("fclamp", elem, x, self.const(elem, -15.0), self.const(elem, 15.0))
            return self.ext("tanh", elem, c)
        if op == "erf":
            return self._erf(x, elem)
        raise self.error(f"the math function {op}")

    def _round_even_f64(self, x: Value) -> Value:
        """Round half to even of a float64 from floor: lavapipe's float64 RoundEven rounded
        ties toward zero on an AVX2 host (1.5 -> 1). ``x - floor(x)`` is exact; NaN and inf
        pass through the final select unchanged."""
        e = "float64"
        c = lambda v: self.const(e, v)  # noqa: E731
        r = self.ext("floor", e, x)
        d = self.op(Op.FSub, e, x, r)
        half = self.ext("floor", e, self.op(Op.FMul, e, r, c(0.5)))
        odd = self.op(Op.FOrdNotEqual, "bool", self.op(Op.FMul, e, half, c(2.0)), r)
        up = self.op(Op.LogicalOr, "bool", self.op(Op.FOrdGreaterThan, "bool", d, c(0.5)),
                     self.op(Op.LogicalAnd, "bool", self.op(Op.FOrdEqual, "bool", d, c(0.5)), odd))
        rounded = self.op(Op.Select, e, up, self.op(Op.FAdd, e, r, c(1.0)), r)
        finite = self.op(Op.FOrdLessThan, "bool", self.ext("fabs", e, x), c(4503599627370496.0))
        return self.op(Op.Select, e, finite, rounded, x)  # beyond 2**52 every float is whole

    def _erf(self, x: Value, elem: str) -> Value:
        """Abramowitz & Stegun 7.1.26: erf(|x|) = 1 - (a1 t + ... + a5 t^5) exp(-x^2)."""
        c = lambda v: self.const(elem, v)  # noqa: E731
        ax = self.ext("fabs", elem, x)
        t = self.op(Op.FDiv, elem, c(1.0), self.op(Op.FAdd, elem, c(1.0),
                                                   self.op(Op.FMul, elem, c(0.3275911), ax)))
        poly = c(1.061405429)
        for a in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly = self.op(Op.FAdd, elem, self.op(Op.FMul, elem, poly, t), c(a))
        poly = self.op(Op.FMul, elem, poly, t)
        e = self.ext("exp", elem, self.op(Op.FNegate, elem, self.op(Op.FMul, elem, ax, ax)))
        y = self.op(Op.FSub, elem, c(1.0), self.op(Op.FMul, elem, poly, e))
        neg = self.op(Op.FOrdLessThan, "bool", x, c(0.0))
        return self.op(Op.Select, elem, neg, self.op(Op.FNegate, elem, y), y)
