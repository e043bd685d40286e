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
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc

__all__ = ["astext", "Printer"]

# binding strength of infix operators (higher binds tighter)
_PREC = {E.Or: 1, E.And: 2, E.EQ: 4, E.NE: 4, E.LT: 4, E.LE: 4, E.GT: 4, E.GE: 4,
         E.Add: 6, E.Sub: 6, E.Mul: 7, E.FloorDiv: 7, E.FloorMod: 7}
_FOR_KIND = {S.ForKind.SERIAL: "range", S.ForKind.PARALLEL: "parallel", S.ForKind.VECTORIZED: "vectorized",
             S.ForKind.UNROLLED: "unroll", S.ForKind.THREAD_BINDING: "thread_binding"}


class Printer:
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
    def expr(self, e: Any, prec: int = 0) -> str:
        if e is None:
            return "None"
        if isinstance(e, (int, float, str)):
            return repr(e)
        if isinstance(e, E.Var):
            return self.name_of(e, e.name)
        if isinstance(e, E.IntImm):
            if e.dtype == "int32":
                return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
            if e.dtype == "bool":
                return "True" if e.value else "False"
            return f"{e.dtype}({e.value})"
        if isinstance(e, E.FloatImm):
            v = repr(e.value) if e.value == e.value and abs(e.value) != float("inf") else f'"{e.value}"'
            if e.dtype == "float32":
                s = v + "f" if not v.startswith('"') else f"float32({v})"
                return s if e.value >= 0 or prec == 0 else f"({s})"
            return f"{e.dtype}({v})"
        if isinstance(e, E.StringImm):
            return repr(e.value)
        if isinstance(e, E.Cast):
            return f"{e.dtype}({self.expr(e.value)})"
        if isinstance(e, (E.Min, E.Max)):
            return f"{type(e).__name__.lower()}({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Div):
            if dt.is_float(e.dtype):
                return self._infix(e, "/", 7, prec)
            return f"truncdiv({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Mod):
            return f"truncmod({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.BinaryOp):
            p = _PREC.get(type(e))
            if p is not None:
                return self._infix(e, e.symbol, p, prec)
        if isinstance(e, E.Not):
            s = f"not {self.expr(e.a, 3)}"
            return f"({s})" if prec > 3 else s
        if isinstance(e, E.Select):
            return f"select({self.expr(e.condition)}, {self.expr(e.true_value)}, {self.expr(e.false_value)})"
        if isinstance(e, E.Ramp):
            return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})"
        if isinstance(e, E.Broadcast):
            return f"broadcast({self.expr(e.value)}, {e.lanes})"
        if isinstance(e, E.Shuffle):
            return f"shuffle([{', '.join(self.expr(v) for v in e.vectors)}], [{', '.join(self.expr(i) for i in e.indices)}])"
        if isinstance(e, E.Let):
            return f"(let {self.expr(e.var)} = {self.expr(e.value)} in {self.expr(e.body)})"
        if isinstance(e, E.Call):
            args = ", ".join(self.expr(a) for a in e.args)
            if e.op in ("call_extern", "call_pure_extern"):
                return f"{e.op}({e.dtype!r}, {args})"
            return f"{e.op}({args})"
        if isinstance(e, E.BufferLoad):
            s = f"{self.buf(e.buffer)}[{', '.join(self.expr(i) for i in e.indices)}]"
            if e.predicate is not None:
                s += f"@mask({self.expr(e.predicate)})"
            return s
        if isinstance(e, E.ProducerLoad):
            return f"{e.producer.name}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, E.Range):
            return f"range({self.expr(e.min)}, {self.expr(e.min + e.extent) if not isinstance(e.min, E.IntImm) or e.min.value else self.expr(e.extent)})"
        if isinstance(e, E.IterVar):
            return f"iter_var({self.expr(e.var)}, {self.expr(e.dom) if e.dom is not None else 'None'}{', ' + repr(e.thread_tag) if e.thread_tag else ''})"
        if isinstance(e, Buffer):
            return self.buf(e)
        reducer = getattr(e, "_print", None)
        if reducer is not None:
            return reducer(self)
        return f"<{type(e).__name__}>"

    def _infix(self, e: E.BinaryOp, sym: str, p: int, prec: int) -> str:
        # left-associative: the right operand needs parens at equal precedence
        s = f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}"
        return f"({s})" if p < prec else s

    # ---- statements --------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def stmt(self, s: Any, indent: int) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x, indent)
        elif isinstance(s, S.For):
            kind = _FOR_KIND[s.kind]
            extra = f", thread={s.thread_binding!r}" if s.thread_binding is not None else ""
            if s.annotations:
                extra += ", annotations={" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in s.annotations.items()) + "}"
            lo = self.expr(s.min)
            zero_min = isinstance(s.min, E.IntImm) and s.min.value == 0
            hi = self.expr(s.extent) if zero_min else self.expr(s.min + s.extent)
            self.emit(indent, f"for {self.expr(s.loop_var)} in {kind}({lo}, {hi}{extra}):")
            self.stmt(s.body, indent + 1)
        elif isinstance(s, S.BufferStore):
            idx = ", ".join(self.expr(i) for i in s.indices)
            line = f"{self.buf(s.buffer)}[{idx}] = {self.expr(s.value)}"
            if s.predicate is not None:
                line += f"  # mask {self.expr(s.predicate)}"
            self.emit(indent, line)
        elif isinstance(s, S.IfThenElse):
            self.emit(indent, f"if {self.expr(s.condition)}:")
            self.stmt(s.then_case, indent + 1)
            if s.else_case is not None:
                self.emit(indent, "else:")
                self.stmt(s.else_case, indent + 1)
        elif isinstance(s, S.LetStmt):
            self.emit(indent, f"{self.expr(s.var)}: {s.var.dtype} = {self.expr(s.value)}")
            self.stmt(s.body, indent)
        elif isinstance(s, S.Allocate):
            b = s.buffer
            shape = ", ".join(self.expr(x) for x in b.shape)
            self.emit(indent, f"{self.buf(b)} = allocate(({shape}{',' if len(b.shape) == 1 else ''}), {b.dtype!r}, {b.scope!r})")
            self.stmt(s.body, indent)
        elif isinstance(s, S.AttrStmt):
            node = s.node
            if isinstance(node, (E.PrimExpr, E.IterVar, Buffer)):
                node_s = self.expr(node)
            elif isinstance(node, str):
                node_s = repr(node)
            else:
                node_s = getattr(node, "name", type(node).__name__)
            self.emit(indent, f"with attr({node_s}, {s.attr_key!r}, {self.expr(s.value)}):")
            self.stmt(s.body, indent + 1)
        elif isinstance(s, S.AssertStmt):
            self.emit(indent, f"assert {self.expr(s.condition)}, {self.expr(s.message)}")
            self.stmt(s.body, indent)
        elif isinstance(s, S.Evaluate):
            self.emit(indent, self.expr(s.value))
        elif isinstance(s, S.Prefetch):
            self.emit(indent, f"prefetch({self.buf(s.buffer)}, [{', '.join(self.expr(r) for r in s.bounds)}])")
        elif isinstance(s, E.PrimExpr):
            self.emit(indent, self.expr(s))
        else:
            self.emit(indent, f"<{type(s).__name__}>")

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
