"""Expressions of IR form 2 printed as C (see :mod:`tvmpy.codegen.c_prelude` for the conventions).

Vectors are scalarized: a vector-typed expression is printed for one *lane*, a C expression
(the lane loop's variable, or a constant when lanes are unrolled). ``Ramp(b, s, n)`` at lane
``l`` is ``b + l * s``, ``Broadcast(v, n)`` is ``v``, a vector load is a load at the lane's index,
and a vector variable (bound by a vector LetStmt) is a C array indexed by the lane.

Signed integer overflow: the source is compiled *without* -fwrapv, so that gcc can analyze
index arithmetic (as LLVM's ``nsw``) and vectorize. Arithmetic in an *index context* (buffer
indices, loop bounds, allocation sizes) is plain C and assumed not to overflow. Elsewhere,
int32/int64 Add/Sub/Mul chains that depend on data (a load, an external call, a float conversion,
or a variable bound to one of those) wrap explicitly: computed in the unsigned type
and cast back once (``(int32_t)((uint32_t)a * (uint32_t)b + (uint32_t)c)``), as the LLVM
backend's wrapping value arithmetic; arithmetic on loop variables, sizes and scalar parameters
(index-like values) stays plain and readable.

Precedence is tracked so the output has parentheses only where C needs them (and around mixed
logical/bitwise operators, where gcc would warn and readers hesitate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir import dtype as dt
from ..ir.functor import ChainFunctor, post_order
from ..tir import expr as E
from ..tir.functor import CHAIN_KINDS, substitute
from .c_prelude import (
    HelperTable,
    c_string,
    float_literal,
    int_literal,
    is_narrow_int,
    storage_type,
    type_suffix,
    value_type,
)

__all__ = ["ExprPrinter", "CCodegenError", "EXTERN_KNOWN"]


class CCodegenError(ValueError):
    """The IR cannot be compiled by the C backend (the message says what and why)."""


# C operator precedence (higher binds tighter)
PRIMARY, UNARY, MUL, ADD, SHIFT, REL, EQUAL, BAND, BXOR, BOR, LAND, LOR, COND = (
    16, 15, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3)
# operators whose operands get parentheses unless they are simple (readability, -Wparentheses)
_FUSSY = {"&&", "||", "&", "|", "^", "<<", ">>"}

_ARITH = {E.Add: ("+", ADD), E.Sub: ("-", ADD), E.Mul: ("*", MUL)}
_CMP = {E.EQ: ("==", EQUAL), E.NE: ("!=", EQUAL), E.LT: ("<", REL), E.LE: ("<=", REL),
        E.GT: (">", REL), E.GE: (">=", REL)}
_BITWISE = {"bitwise_and": ("&", BAND), "bitwise_or": ("|", BOR), "bitwise_xor": ("^", BXOR),
            "shift_left": ("<<", SHIFT), "shift_right": (">>", SHIFT)}
# IR intrinsic -> C math function (float64 name; float32 appends "f"); round is half-to-even
_MATH = {"exp": "exp", "exp2": "exp2", "exp10": "exp10", "log": "log", "log2": "log2",
         "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf",
         "fabs": "fabs", "floor": "floor", "ceil": "ceil", "round": "nearbyint",
         "nearbyint": "nearbyint", "trunc": "trunc", "sin": "sin", "cos": "cos", "tan": "tan",
         "sinh": "sinh", "cosh": "cosh", "asin": "asin", "acos": "acos", "atan": "atan",
         "pow": "pow", "fmod": "fmod", "atan2": "atan2"}
_MATH_HELPERS = {"sigmoid", "rsqrt"}
_PREDICATES = {"isnan", "isinf", "isfinite"}
# functions declared by the headers the source includes: call_extern must not redeclare them
EXTERN_KNOWN = frozenset(
    [m for m in _MATH.values()] + [m + "f" for m in _MATH.values()]
    + ["memcpy", "memmove", "memset", "memcmp", "strlen", "malloc", "calloc", "free",
       "aligned_alloc", "abs", "labs", "llabs", "fmin", "fminf", "fmax", "fmaxf", "hypot",
       "hypotf", "cbrt", "cbrtf", "expm1", "expm1f", "rint", "rintf", "lround", "lroundf",
       "copysign", "copysignf", "fma", "fmaf", "ldexp", "ldexpf", "frexp", "frexpf"])


def _paren(text: str, prec: int, need: int) -> str:
    return text if prec >= need else f"({text})"


class ExprPrinter(ChainFunctor):
    """Prints expressions. The statement emitter provides names, pointers and declarations."""

    _chain_kinds = CHAIN_KINDS

    helpers: HelperTable
    externs: dict[str, str]  # name -> prototype
    data_vars: set[int]  # ids of scalar Vars whose values come from data (see module docstring)
    _index_depth = 0
    _data_memo: dict[int, tuple[E.PrimExpr, bool]]

    # provided by the statement emitter
    def var_ref(self, v: E.Var) -> tuple[str, bool]:  # (C name, is a lane-indexed array)
        raise NotImplementedError

    def pointer(self, data: E.Var, dtype: str) -> str:
        raise NotImplementedError

    def fresh_name(self, v: E.Var) -> str:
        raise NotImplementedError

    @classmethod
    def _method_name(cls, node_cls: type) -> str | None:
        return _EXPR_METHODS.get(node_cls.__name__)

    def generic_visit(self, e: Any, lane: str | None = None) -> tuple[str, int]:
        raise CCodegenError(f"C backend: cannot print {type(e).__name__} ({e}); is the "
                            "function lowered (tvm.lower) to IR form 2?")

    # ---- entry points ------------------------------------------------------------------------
    def expr(self, e: E.PrimExpr, lane: str | None = None) -> str:
        """``e`` as a C expression (at ``lane`` when ``e`` is a vector)."""
        return self._p(e, lane)[0]

    def operand(self, e: E.PrimExpr, need: int, lane: str | None = None) -> str:
        text, prec = self._p(e, lane)
        return _paren(text, prec, need)

    def index(self, e: E.PrimExpr, lane: str | None = None, need: int = 0) -> str:
        """``e`` in an index context: integer arithmetic that is assumed not to overflow."""
        self._index_depth += 1
        try:
            return self.operand(e, need, lane)
        finally:
            self._index_depth -= 1

    def is_data(self, e: E.PrimExpr) -> bool:
        """Whether ``e``'s value depends on data (loads, calls, float casts, data variables)."""
        memo = self._data_memo  # id -> (node, answer); holding the node keeps its id unique
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        for n in post_order(e, self._data_inputs, memo):  # inputs first, any depth
            out = self._own_data(n)
            if out is None:
                out = any(memo[id(k)][1] for k in self._data_inputs(n))
            memo[id(n)] = (n, out)
        return memo[id(e)][1]

    def _own_data(self, e: E.PrimExpr) -> bool | None:
        """``is_data`` of ``e`` when its operands do not decide it, else None."""
        if isinstance(e, E.Var):
            return id(e) in self.data_vars
        if isinstance(e, E.BufferLoad) or (
                isinstance(e, E.Call) and e.op in ("call_extern", "call_pure_extern", "reinterpret")):
            return True
        if isinstance(e, E.Cast) and not dt.is_integer(e.value.dtype):
            return True
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return False
        return None

    def _data_inputs(self, e: E.PrimExpr) -> list[E.PrimExpr]:
        if self._own_data(e) is not None:
            return []
        kids = [getattr(e, f) for f in e._fields]
        return [k for x in kids for k in (x if isinstance(x, tuple) else (x,))
                if isinstance(k, E.PrimExpr)]

    # ---- dispatch ----------------------------------------------------------------------------
    def _p(self, e: Any, lane: str | None) -> tuple[str, int]:
        if not isinstance(e, E.PrimExpr):
            raise CCodegenError(f"C backend: expected an expression, got {type(e).__name__}: {e!r}")
        if dt.lanes_of(e.dtype) == 1:
            lane = None
        elif lane is None:
            raise CCodegenError(f"C backend: vector expression {e} ({e.dtype}) in a scalar context")
        return self.visit_with(e, lane)

    # ---- leaves ------------------------------------------------------------------------------
    def _var(self, e: E.Var, lane: str | None) -> tuple[str, int]:
        name, is_array = self.var_ref(e)
        if is_array:
            return f"{name}[{lane}]", PRIMARY
        return name, PRIMARY

    def _int(self, e: E.IntImm, lane: str | None) -> tuple[str, int]:
        text = int_literal(e.value, e.dtype)
        return text, PRIMARY if text[0].isalnum() else UNARY

    def _float(self, e: E.FloatImm, lane: str | None) -> tuple[str, int]:
        text = float_literal(e.value, e.dtype)
        return text, PRIMARY if text[0].isalnum() else UNARY

    def _string(self, e: E.StringImm, lane: str | None) -> tuple[str, int]:
        return c_string(e.value), PRIMARY

    # ---- casts -------------------------------------------------------------------------------
    def _cast(self, e: E.Cast, lane: str | None) -> tuple[str, int]:
        src, dst = dt.element_of(e.value.dtype), dt.element_of(e.dtype)
        if src == dst:
            return self._p(e.value, lane)
        if dt.is_handle(src) or dt.is_handle(dst):
            return f"({storage_type(dst)}){self.operand(e.value, UNARY, lane)}", UNARY
        value = self.operand(e.value, UNARY, lane)
        if dst == "float16":
            # one rounding from the source type straight to half (never through float); an
            # integer converts exactly to float below 2^24, and beyond rounds to inf either way
            if src == "float64":
                return f"{self.helpers.use('tvmpy_f16_f64')}({self.expr(e.value, lane)})", PRIMARY
            if dt.is_float(src):
                return f"{self.helpers.use('tvmpy_f16')}({self.expr(e.value, lane)})", PRIMARY
            return f"{self.helpers.use('tvmpy_f16')}((float){value})", PRIMARY
        if src == "float16" and dst == "float32":
            return self._p(e.value, lane)  # already a float value, exactly
        d = dt.parse(dst)
        if dt.is_float(src) and d.kind in ("int", "uint") and (d.bits < 32 or dst == "uint32"):
            # through a wider signed integer, then wrap (as the LLVM backend): a C conversion
            # straight to a narrow or unsigned type is undefined for negative values
            wide = "int64_t" if dst == "uint32" else "int32_t"
            return f"({value_type(dst)})({wide}){value}", UNARY
        return f"({value_type(dst)}){value}", UNARY

    # ---- arithmetic --------------------------------------------------------------------------
    def _binary(self, op: str, prec: int, a: E.PrimExpr, b: E.PrimExpr,
                lane: str | None) -> tuple[str, int]:
        left_need, right_need = prec, prec + 1
        if op in ("&&", "||"):  # comparisons read well bare; bitwise and nested logic don't
            left_need = right_need = EQUAL
        elif op in _FUSSY:
            left_need = right_need = UNARY
        ta, pa = self._p(a, lane)
        if op in _FUSSY and pa == prec:
            left_need = prec  # a && b && c (each fussy precedence level has one operator)
        return f"{_paren(ta, pa, left_need)} {op} {self.operand(b, right_need, lane)}", prec

    def _wrap_result(self, text: str, prec: int, dtype: str) -> tuple[str, int]:
        """Bring a C arithmetic result back to the IR type (narrow ints wrap; float16 rounds)."""
        elem = dt.element_of(dtype)
        if elem == "float16":
            return f"{self.helpers.use('tvmpy_f16')}({text})", PRIMARY
        if is_narrow_int(elem):
            return f"({storage_type(elem)})({text})", UNARY
        return text, prec

    def _arith(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        if dt.is_integer(e.dtype):  # x + 0, 0 + x, x - 0, x * 1, 1 * x print as x
            neutral = 1 if isinstance(e, E.Mul) else 0
            if E.is_const_int(e.b, neutral):
                return self._p(e.a, lane)
            if E.is_const_int(e.a, neutral) and not isinstance(e, E.Sub):
                return self._p(e.b, lane)
        d = dt.parse(e.dtype)
        if d.kind == "int" and d.bits >= 32 and not self._index_depth and self.is_data(e):
            return self._wrapping(e, lane)
        if e.dtype == "uint16" and isinstance(e, E.Mul):  # int promotion would overflow int
            a, b = self.operand(e.a, UNARY, lane), self.operand(e.b, UNARY, lane)
            return f"(uint16_t)((uint32_t){a} * {b})", UNARY
        op, prec = _ARITH[type(e)]
        return self._wrap_result(*self._binary(op, prec, e.a, e.b, lane), e.dtype)

    def _wrapping(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        """A chain of signed Add/Sub/Mul that wraps: computed unsigned, converted back once."""
        unsigned = "u" + storage_type(e.dtype)

        def links(x: E.PrimExpr) -> list[E.PrimExpr]:
            return [x.a, x.b] if type(x) in _ARITH and x.dtype == e.dtype else []

        done: dict[int, tuple[str, int]] = {}
        for x in post_order(e, links):  # operands first: chains of any length
            if links(x):
                op, prec = _ARITH[type(x)]
                (ta, pa), (tb, pb) = done[id(x.a)], done[id(x.b)]
                done[id(x)] = f"{_paren(ta, pa, prec)} {op} {_paren(tb, pb, prec + 1)}", prec
            elif isinstance(x, E.IntImm) and x.value >= 0:
                done[id(x)] = f"{x.value}{'u' if dt.bits_of(x.dtype) == 32 else 'UL'}", PRIMARY
            else:
                done[id(x)] = f"({unsigned}){self.operand(x, UNARY, lane)}", UNARY
        text = done[id(e)][0]
        return f"({storage_type(e.dtype)})({text})", UNARY

    def _div(self, e: E.Div, lane: str | None) -> tuple[str, int]:
        return self._wrap_result(*self._binary("/", MUL, e.a, e.b, lane), e.dtype)

    def _mod(self, e: E.Mod, lane: str | None) -> tuple[str, int]:
        if dt.is_float(e.dtype):
            return self._math("fmod", e.dtype, [e.a, e.b], lane)
        return self._wrap_result(*self._binary("%", MUL, e.a, e.b, lane), e.dtype)

    def _floor_divmod(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        kind = "floordiv" if isinstance(e, E.FloorDiv) else "floormod"
        d = dt.parse(e.dtype)
        if d.kind in ("uint", "bool"):  # floor and truncation agree on non-negatives
            op = "/" if kind == "floordiv" else "%"
            return self._wrap_result(*self._binary(op, MUL, e.a, e.b, lane), e.dtype)
        if dt.element_of(e.dtype) == "float16":
            self.helpers.use("tvmpy_f16")
            fn = self.helpers.use(f"tvmpy_{kind}_f16")  # rounds each step, result is a half
            return self._call_text(fn, [e.a, e.b], lane), PRIMARY
        fn = self.helpers.use(f"tvmpy_{kind}_{type_suffix(e.dtype)}")
        return self._wrap_result(self._call_text(fn, [e.a, e.b], lane), PRIMARY, e.dtype)

    def _minmax(self, e: E.BinaryOp, lane: str | None) -> tuple[str, int]:
        kind = "min" if isinstance(e, E.Min) else "max"
        fn = self.helpers.use(f"tvmpy_{kind}_{type_suffix(e.dtype)}")
        return self._call_text(fn, [e.a, e.b], lane), PRIMARY

    def _cmp(self, e: E.CmpOp, lane: str | None) -> tuple[str, int]:
        op, prec = _CMP[type(e)]
        return self._binary(op, prec, e.a, e.b, lane)

    def _and(self, e: E.And, lane: str | None) -> tuple[str, int]:
        return self._binary("&&", LAND, e.a, e.b, lane)

    def _or(self, e: E.Or, lane: str | None) -> tuple[str, int]:
        return self._binary("||", LOR, e.a, e.b, lane)

    def _not(self, e: E.Not, lane: str | None) -> tuple[str, int]:
        return "!" + self.operand(e.a, UNARY, lane), UNARY

    def _select(self, e: E.Select, lane: str | None) -> tuple[str, int]:
        # Select may evaluate both sides; evaluating only the chosen one is a valid refinement
        # (expressions have no side effects), and lets gcc pick branchless code
        return self._conditional(e.condition, e.true_value, e.false_value, lane)

    def _conditional(self, c: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr,
                     lane: str | None) -> tuple[str, int]:
        return (f"{self.operand(c, LOR, lane)} ? {self.operand(t, LOR, lane)} : "
                f"{self.operand(f, LOR, lane)}", COND)

    # ---- vectors -----------------------------------------------------------------------------
    def _ramp(self, e: E.Ramp, lane: str | None) -> tuple[str, int]:
        assert lane is not None
        stride = E.const_value(e.stride)
        if lane.isdigit():
            k = int(lane)
            if stride is not None:
                off = k * stride
                if off == 0:
                    return self._p(e.base, None)
                offset = E.const(abs(off), e.base.dtype)
                return self._binary("+" if off > 0 else "-", ADD, e.base, offset, None)
            if k == 0:
                return self._p(e.base, None)
        step = lane if stride == 1 else f"{lane} * {self.operand(e.stride, MUL + 1)}"
        if E.is_const_int(e.base, 0):
            return step, PRIMARY if stride == 1 else MUL
        return f"{self.operand(e.base, ADD)} + {step}", ADD

    def _broadcast(self, e: E.Broadcast, lane: str | None) -> tuple[str, int]:
        return self._p(e.value, None)

    def _shuffle(self, e: E.Shuffle, lane: str | None) -> tuple[str, int]:
        if lane is None:  # one lane extracted: a scalar
            lane = "0"
        if not lane.isdigit():
            raise CCodegenError("C backend: Shuffle needs unrolled lanes (internal error)")
        pos = E.const_value(e.indices[int(lane)])
        if not isinstance(pos, int):
            raise CCodegenError(f"C backend: Shuffle index must be a constant, got {e.indices}")
        for v in e.vectors:
            n = dt.lanes_of(v.dtype)
            if pos < n:
                return self._p(v, str(pos))
            pos -= n
        raise CCodegenError(f"C backend: Shuffle index out of range in {e}")

    def _let(self, e: E.Let, lane: str | None) -> tuple[str, int]:
        if dt.lanes_of(e.var.dtype) > 1:
            # a vector let inside an expression: inline its (pure) value into the body per lane
            return self._p(substitute(e.body, {e.var: e.value}), lane)
        name = self.fresh_name(e.var)
        ctype = value_type(e.var.dtype)
        value = self.expr(e.value, None)
        # GNU statement expression: evaluated only where the Let is (lazy contexts stay lazy)
        return f"({{ const {ctype} {name} = {value}; {self.expr(e.body, lane)}; }})", PRIMARY

    # ---- memory ------------------------------------------------------------------------------
    def element_index(self, buffer: Any, index: E.PrimExpr, lane: str | None) -> str:
        """The C index of the (scalar) element read or written at ``lane``."""
        buf_lanes = dt.lanes_of(buffer.dtype)
        if buf_lanes == 1:
            return self.index(index, lane)
        # a buffer of vector elements: element i lane j is scalar element i * n + j
        if lane is None or not lane.isdigit():
            raise CCodegenError(f"C backend: buffer {buffer.name} of vector type {buffer.dtype} "
                                "(IR form 2 wants scalar element buffers)")
        k = int(lane)
        idx = self.index(index, str(k // buf_lanes), MUL)
        return f"{idx} * {buf_lanes} + {k % buf_lanes}"

    def _load(self, e: E.BufferLoad, lane: str | None) -> tuple[str, int]:
        if len(e.indices) != 1:
            raise CCodegenError(f"C backend: load of {e.buffer.name} has {len(e.indices)} indices; "
                                "IR form 2 (after tvm.lower) has flat 1-D buffers")
        ptr = self.pointer(e.buffer.data, e.buffer.dtype)
        text, prec = f"{ptr}[{self.element_index(e.buffer, e.indices[0], lane)}]", PRIMARY
        if dt.element_of(e.dtype) == "float16":
            text, prec = f"(float){text}", UNARY
        if e.predicate is not None:
            zero = E.const(0, dt.element_of(e.dtype))
            text = f"{self.operand(e.predicate, LOR, lane)} ? {text} : {self.expr(zero)}"
            prec = COND
        return text, prec

    def _producer_load(self, e: E.ProducerLoad, lane: str | None) -> tuple[str, int]:
        raise CCodegenError(f"C backend: tensor read {e} is not lowered; build through tvm.build / "
                            "tvm.lower, which turns tensor reads into buffer loads")

    # ---- calls -------------------------------------------------------------------------------
    def _call_text(self, fn: str, args: list[E.PrimExpr], lane: str | None) -> str:
        return f"{fn}({', '.join(self.expr(a, lane) for a in args)})"

    def _math(self, name: str, dtype: str, args: list[E.PrimExpr],
              lane: str | None) -> tuple[str, int]:
        elem = dt.element_of(dtype)
        if not dt.is_float(elem):
            raise CCodegenError(f"C backend: {name} needs float arguments, got {dtype}")
        if name in _MATH_HELPERS:
            fn = self.helpers.use(f"tvmpy_{name}_{type_suffix(elem)}")
        else:
            fn = _MATH[name] + ("" if elem == "float64" else "f")
        return self._wrap_result(self._call_text(fn, args, lane), PRIMARY, elem)

    def _call(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        op = e.op
        handler = _CALLS.get(op)
        if handler is not None:
            return handler(self, e, lane)
        if op in ("tvm_call_packed", "tvm_stack_make_array", "tvm_stack_make_shape"):
            raise CCodegenError(f"C backend: {op} inside an expression ({e}): use call_packed as a statement, "
                                "store its value or bind it with a LetStmt")
        if op in _MATH or op in _MATH_HELPERS:
            return self._math(op, e.dtype, list(e.args), lane)
        if op in _PREDICATES:
            return self._call_text(op, list(e.args), lane), PRIMARY
        if op in _BITWISE:
            sym, prec = _BITWISE[op]
            text, prec = self._binary(sym, prec, e.args[0], e.args[1], lane)
            if sym != "<<":  # &, |, ^ and >> of in-range operands stay in range
                return text, prec
            return self._wrap_result(text, prec, e.dtype)
        raise CCodegenError(f"C backend: unsupported intrinsic {op!r} in {e}")

    def _if_then_else(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        return self._conditional(e.args[0], e.args[1], e.args[2], lane)

    def _likely(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        return self._p(e.args[0], lane)

    def _abs(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        x = e.args[0]
        if dt.is_float(x.dtype):
            return self._math("fabs", e.dtype, [x], lane)
        if dt.is_uint(x.dtype) or dt.is_bool(x.dtype):
            return self._p(x, lane)
        zero = E.const(0, dt.element_of(x.dtype))
        fn = self.helpers.use(f"tvmpy_max_{type_suffix(x.dtype)}")
        neg = E.Sub(E.Broadcast(zero, dt.lanes_of(x.dtype)) if dt.lanes_of(x.dtype) > 1 else zero, x)
        return f"{fn}({self.expr(x, lane)}, {self.expr(neg, lane)})", PRIMARY

    def _bitwise_not(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        text = "~" + self.operand(e.args[0], UNARY, lane)
        if dt.is_int(e.dtype):  # ~x of a sign-extended int8/int16 stays in range
            return text, UNARY
        return self._wrap_result(text, UNARY, e.dtype)

    def _popcount(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        x = e.args[0]
        bits = dt.bits_of(x.dtype)
        arg = self.operand(x, UNARY, lane)
        if bits == 64:
            text = f"__builtin_popcountll((uint64_t){arg})"
        else:
            text = f"__builtin_popcount((uint{max(bits, 8)}_t){arg})"
        return f"({value_type(e.dtype)}){text}", UNARY

    def _reinterpret(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        src, dst = dt.element_of(e.args[0].dtype), dt.element_of(e.dtype)
        if dt.bytes_of(src) != dt.bytes_of(dst):
            raise CCodegenError(f"C backend: reinterpret {src} -> {dst} changes the size")
        value = self.expr(e.args[0], lane)
        if src == "float16":
            value = f"(_Float16){self.operand(e.args[0], UNARY, lane)}"
        text = (f"((union {{ {storage_type(src)} from; {storage_type(dst)} to; }})"
                f"{{ .from = {value} }}).to")
        if dst == "float16":
            return f"(float){text}", UNARY
        return text, PRIMARY

    def _access_ptr(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        ann, data, offset = e.args[0], e.args[1], e.args[2]
        dtype = ann.args[0].dtype if isinstance(ann, E.Call) and ann.args else "float32"
        if not isinstance(data, E.Var):
            raise CCodegenError(f"C backend: tvm_access_ptr needs a buffer data var, got {data}")
        ptr = self.pointer(data, dtype)
        if E.is_const_int(offset, 0):
            return ptr, PRIMARY
        return f"{ptr} + {self.index(offset, None, ADD + 1)}", ADD

    def _address_of(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        load = e.args[0]
        if not isinstance(load, E.BufferLoad):
            raise CCodegenError(f"C backend: address_of needs a buffer load, got {load}")
        ptr = self.pointer(load.buffer.data, load.buffer.dtype)
        return f"&{ptr}[{self.index(load.indices[0], '0')}]", UNARY

    def _prefetch(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        """``prefetch(address_of(...), rw, locality, cache_type)``: GCC/Clang's builtin (a
        comma expression of value 0: the call is a statement's value)."""
        addr, _ = self._address_of(e.args[0], lane)
        rw, loc = (int(getattr(a, "value", a)) for a in e.args[1:3])
        return f"(__builtin_prefetch({addr}, {rw}, {loc}), 0)", PRIMARY

    def _extern(self, e: E.Call, lane: str | None) -> tuple[str, int]:
        if not e.args or not isinstance(e.args[0], E.StringImm):
            raise CCodegenError(f"C backend: {e.op} needs the function name first, got {e}")
        name = e.args[0].value
        args = list(e.args[1:])
        if not name.isidentifier():
            raise CCodegenError(f"C backend: external function name {name!r} is not a C identifier")
        if name not in EXTERN_KNOWN:
            arg_types = ", ".join(storage_type(a.dtype) if dt.lanes_of(a.dtype) == 1 else "?"
                                  for a in args) or "void"
            if "?" in arg_types:
                raise CCodegenError(f"C backend: vector argument to external function {name}")
            proto = f"{storage_type(e.dtype)} {name}({arg_types});"
            old = self.externs.setdefault(name, proto)
            if old != proto:
                raise CCodegenError(f"C backend: external function {name} called with two "
                                    f"signatures: {old} and {proto}")
        return self._call_text(name, args, lane), PRIMARY


_EXPR_METHODS: dict[str, str] = {  # node class -> the ExprPrinter method printing it
    "Var": "_var", "IntImm": "_int", "FloatImm": "_float", "StringImm": "_string", "Cast": "_cast",
    "Add": "_arith", "Sub": "_arith", "Mul": "_arith", "Div": "_div", "Mod": "_mod",
    "FloorDiv": "_floor_divmod", "FloorMod": "_floor_divmod", "Min": "_minmax", "Max": "_minmax",
    "CmpOp": "_cmp", "And": "_and", "Or": "_or", "Not": "_not", "Select": "_select",
    "Ramp": "_ramp", "Broadcast": "_broadcast", "Shuffle": "_shuffle", "Let": "_let",
    "BufferLoad": "_load", "ProducerLoad": "_producer_load", "Call": "_call",
}  # fmt: skip
_CALLS: dict[str, Callable[..., tuple[str, int]]] = {
    "if_then_else": ExprPrinter._if_then_else, "likely": ExprPrinter._likely,
    "abs": ExprPrinter._abs, "bitwise_not": ExprPrinter._bitwise_not,
    "popcount": ExprPrinter._popcount, "reinterpret": ExprPrinter._reinterpret,
    "tvm_access_ptr": ExprPrinter._access_ptr, "address_of": ExprPrinter._address_of,
    "call_extern": ExprPrinter._extern, "call_pure_extern": ExprPrinter._extern,
    "prefetch": ExprPrinter._prefetch,
}
