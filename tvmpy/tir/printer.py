"""Readable, Python-like text for loop IR (stable enough for before/after tests).

```
def mm(A: Buffer[(1024, 1024), "float32"], ...):
    for i in range(0, 1024):
        for j in parallel(0, 1024):
            C[i, j] = 0f
```
Distinct variables that share a name are told apart by a suffix (``i``, ``i_1``).
"""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from ..ir.functor import ChainFunctor
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .functor import CHAIN_KINDS

__all__ = ["astext", "Printer"]

# binding strength of infix operators (higher binds tighter)
_PREC = {E.Or: 1, E.And: 2, E.EQ: 4, E.NE: 4, E.LT: 4, E.LE: 4, E.GT: 4, E.GE: 4,
         E.Add: 6, E.Sub: 6, E.Mul: 7, E.FloorDiv: 7, E.FloorMod: 7}
_FOR_KIND = {S.ForKind.SERIAL: "range", S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorized",
             S.ForKind.UNROLLED: "unroll", S.ForKind.THREAD_BINDING: "thread_binding"}


_ATOM = 100  # the binding strength of names, literals and calls: never parenthesised


class Printer(ChainFunctor):
    """Expressions dispatch to ``visit_<Class>``, statements to ``_s_<Class>`` (ir.functor)."""

    _chain_kinds = CHAIN_KINDS

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: dict[str, int] = {}
        self.lines: list[str] = []

    # ---- names -------------------------------------------------------------------------------
    def name_of(self, obj: Any, base: str) -> str:
        key = id(obj)
        n = self.names.get(key)
        if n is None:
            base = base or "v"
            count = self.used.get(base, 0)
            n = base if count == 0 else f"{base}_{count}"
            while n in self.used and count:
                count += 1
                n = f"{base}_{count}"
            self.used[base] = count + 1
            self.used.setdefault(n, 1)
            self.names[key] = n
        return n

    def buf(self, b: Buffer) -> str:
        # buffers that share a data Var (a parameter and its flattened view) share a name
        return self.name_of(b.data if isinstance(b.data, E.Var) else b, b.name)

    # ---- expressions -------------------------------------------------------------------------
    # ``visit_<Class>`` returns (text, binding strength); ``expr`` adds parentheses when the
    # context binds tighter (a negative literal has strength 0: parenthesised inside operators)
    def expr(self, e: Any, prec: int = 0) -> str:
        if e is None:
            return "None"
        if isinstance(e, (int, float, str)):
            return repr(e)
        text, p = self.visit(e)
        return f"({text})" if p < prec else text

    def generic_visit(self, e: Any) -> tuple[str, int]:
        reducer = getattr(e, "_print", None)
        if reducer is not None:
            return reducer(self), _ATOM
        return f"<{type(e).__name__}>", _ATOM

    def visit_Var(self, e: E.Var) -> tuple[str, int]:
        return self.name_of(e, e.name), _ATOM

    def visit_IntImm(self, e: E.IntImm) -> tuple[str, int]:
        if e.dtype == "int32":
            return str(e.value), _ATOM if e.value >= 0 else 0
        if e.dtype == "bool":
            return ("True" if e.value else "False"), _ATOM
        return f"{e.dtype}({e.value})", _ATOM

    def visit_FloatImm(self, e: E.FloatImm) -> tuple[str, int]:
        v = repr(e.value) if e.value == e.value and abs(e.value) != float("inf") else f'"{e.value}"'
        if e.dtype == "float32":
            s = v + "f" if not v.startswith('"') else f"float32({v})"
            return s, _ATOM if e.value >= 0 else 0
        return f"{e.dtype}({v})", _ATOM

    def visit_StringImm(self, e: E.StringImm) -> tuple[str, int]:
        return repr(e.value), _ATOM

    def visit_Cast(self, e: E.Cast) -> tuple[str, int]:
        return f"{e.dtype}({self.expr(e.value)})", _ATOM

    def _call(self, name: str, *args: Any) -> tuple[str, int]:
        return f"{name}({', '.join(self.expr(a) for a in args)})", _ATOM

    def visit_Min(self, e: E.Min) -> tuple[str, int]:
        return self._call("min", e.a, e.b)

    def visit_Max(self, e: E.Max) -> tuple[str, int]:
        return self._call("max", e.a, e.b)

    def visit_Div(self, e: E.Div) -> tuple[str, int]:
        if dt.is_float(e.dtype):
            return self._infix(e, "/", 7)
        return self._call("truncdiv", e.a, e.b)

    def visit_Mod(self, e: E.Mod) -> tuple[str, int]:
        return self._call("truncmod", e.a, e.b)

    def visit_BinaryOp(self, e: E.BinaryOp) -> tuple[str, int]:
        p = _PREC.get(type(e))
        if p is None:
            return self.generic_visit(e)
        return self._infix(e, e.symbol, p)

    def _infix(self, e: E.BinaryOp, sym: str, p: int) -> tuple[str, int]:
        # left-associative: the right operand needs parens at equal precedence
        return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p

    def visit_Not(self, e: E.Not) -> tuple[str, int]:
        return f"not {self.expr(e.a, 3)}", 3

    def visit_Select(self, e: E.Select) -> tuple[str, int]:
        return self._call("select", e.condition, e.true_value, e.false_value)

    def visit_Ramp(self, e: E.Ramp) -> tuple[str, int]:
        return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", _ATOM

    def visit_Broadcast(self, e: E.Broadcast) -> tuple[str, int]:
        return f"broadcast({self.expr(e.value)}, {e.lanes})", _ATOM

    def visit_Shuffle(self, e: E.Shuffle) -> tuple[str, int]:
        vectors = ", ".join(self.expr(v) for v in e.vectors)
        return f"shuffle([{vectors}], [{', '.join(self.expr(i) for i in e.indices)}])", _ATOM

    def visit_Let(self, e: E.Let) -> tuple[str, int]:
        return f"(let {self.expr(e.var)} = {self.expr(e.value)} in {self.expr(e.body)})", _ATOM

    def visit_Call(self, e: E.Call) -> tuple[str, int]:
        args = ", ".join(self.expr(a) for a in e.args)
        if e.op in ("call_extern", "call_pure_extern", "call_llvm_intrin", "call_llvm_pure_intrin"):
            return f"{e.op}({e.dtype!r}, {args})", _ATOM
        return f"{e.op}({args})", _ATOM

    def visit_BufferLoad(self, e: E.BufferLoad) -> tuple[str, int]:
        s = f"{self.buf(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
        if e.predicate is not None:
            s += f"@mask({self.expr(e.predicate)})"
        return s, _ATOM

    def visit_ProducerLoad(self, e: E.ProducerLoad) -> tuple[str, int]:
        return f"{e.producer.name}[{', '.join(self.expr(i) for i in e.indices)}]", _ATOM

    def visit_Range(self, e: E.Range) -> tuple[str, int]:
        lo = self.expr(e.min)
        zero_min = isinstance(e.min, E.IntImm) and not e.min.value
        return f"range({lo}, {self.expr(e.extent if zero_min else e.min + e.extent)})", _ATOM

    def visit_IterVar(self, e: E.IterVar) -> tuple[str, int]:
        var = self.expr(e.var)
        dom = self.expr(e.dom) if e.dom is not None else "None"
        tag = ", " + repr(e.thread_tag) if e.thread_tag else ""
        return f"iter_var({var}, {dom}{tag})", _ATOM

    def visit_Buffer(self, e: Buffer) -> tuple[str, int]:
        return self.buf(e), _ATOM

    # ---- statements --------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def stmt(self, s: Any, indent: int) -> None:
        m = type(self).dispatch_prefix(type(s), "_s_")
        if m is not None:
            m(self, s, indent)
        elif isinstance(s, E.PrimExpr):
            self.emit(indent, self.expr(s))
        else:
            self.emit(indent, f"<{type(s).__name__}>")

    def _s_SeqStmt(self, s: S.SeqStmt, indent: int) -> None:
        for x in s.seq:
            self.stmt(x, indent)

    def _s_For(self, s: S.For, indent: int) -> None:
        kind = _FOR_KIND[s.kind]
        extra = f", thread={s.thread_binding!r}" if s.thread_binding is not None else ""
        if s.annotations:
            extra += ", annotations={" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in s.annotations.items()) + "}"
        lo = self.expr(s.min)
        zero_min = isinstance(s.min, E.IntImm) and s.min.value == 0
        hi = self.expr(s.extent) if zero_min else self.expr(s.min + s.extent)
        self.emit(indent, f"for {self.expr(s.loop_var)} in {kind}({lo}, {hi}{extra}):")
        self.stmt(s.body, indent + 1)

    def _s_BufferStore(self, s: S.BufferStore, indent: int) -> None:
        idx = ", ".join(self.expr(i) for i in s.indices)
        line = f"{self.buf(s.buffer)}[{idx}] = {self.expr(s.value)}"
        if s.predicate is not None:
            line += f"  # mask {self.expr(s.predicate)}"
        self.emit(indent, line)

    def _s_IfThenElse(self, s: S.IfThenElse, indent: int) -> None:
        self.emit(indent, f"if {self.expr(s.condition)}:")
        self.stmt(s.then_case, indent + 1)
        if s.else_case is not None:
            self.emit(indent, "else:")
            self.stmt(s.else_case, indent + 1)

    def _s_LetStmt(self, s: S.LetStmt, indent: int) -> None:
        self.emit(indent, f"{self.expr(s.var)}: {s.var.dtype} = {self.expr(s.value)}")
        self.stmt(s.body, indent)

    def _s_Allocate(self, s: S.Allocate, indent: int) -> None:
        b = s.buffer
        shape = ", ".join(self.expr(x) for x in b.shape)
        self.emit(indent, f"{self.buf(b)} = allocate(({shape}{',' if len(b.shape) == 1 else ''}), {b.dtype!r}, {b.scope!r})")
        self.stmt(s.body, indent)

    def _s_AttrStmt(self, s: S.AttrStmt, indent: int) -> None:
        node = s.node
        if isinstance(node, (E.PrimExpr, E.IterVar, Buffer)):
            node_s = self.expr(node)
        elif isinstance(node, str):
            node_s = repr(node)
        else:
            node_s = getattr(node, "name", type(node).__name__)
        self.emit(indent, f"with attr({node_s}, {s.attr_key!r}, {self.expr(s.value)}):")
        self.stmt(s.body, indent + 1)

    def _s_AssertStmt(self, s: S.AssertStmt, indent: int) -> None:
        self.emit(indent, f"assert {self.expr(s.condition)}, {self.expr(s.message)}")
        self.stmt(s.body, indent)

    def _s_Evaluate(self, s: S.Evaluate, indent: int) -> None:
        self.emit(indent, self.expr(s.value))

    def _s_Prefetch(self, s: S.Prefetch, indent: int) -> None:
        self.emit(indent, f"prefetch({self.buf(s.buffer)}, [{', '.join(self.expr(r) for r in s.bounds)}])")

    def func(self, f: PrimFunc) -> None:
        params = []
        for p in f.params:
            b = f.buffer_map.get(p)
            if b is not None:
                self.names[id(p)] = self.name_of(b, b.name)  # print the handle by its buffer's name
                shape = ", ".join(self.expr(x) for x in b.shape)
                extra = ""
                if b.strides:
                    extra = ", strides=(" + ", ".join(self.expr(x) for x in b.strides) + ")"
                params.append(f"{self.buf(b)}: Buffer(({shape}{',' if len(b.shape) == 1 else ''}), {b.dtype!r}{extra})")
            else:
                params.append(f"{self.expr(p)}: {p.dtype}")
        attrs = {k: v for k, v in f.attrs.items() if k != "global_symbol"}
        if attrs:
            self.emit(0, "# attrs: " + ", ".join(f"{k}={v!r}" for k, v in attrs.items()))
        self.emit(0, f"def {f.name}({', '.join(params)}):")
        self.stmt(f.body, 1)


def astext(node: Any) -> str:
    p = Printer()
    if isinstance(node, PrimFunc):
        p.func(node)
        return "\n".join(p.lines)
    if isinstance(node, S.Stmt):
        p.stmt(node, 0)
        return "\n".join(p.lines)
    return p.expr(node)
