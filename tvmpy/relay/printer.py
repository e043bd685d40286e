"""Relay text printer, in TVM's format::

    def @main(%x: Tensor[(1, 3, 8, 8), float32], %w: Tensor[(4, 3, 3, 3), float32]) -> ... {
      %0 = nn.conv2d(%x, %w, padding=[1, 1, 1, 1]) /* ty=Tensor[(1, 4, 8, 8), float32] */;
      nn.relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] */
    }

Every compound node (call, tuple, ...) is bound once to ``%N`` (shared nodes print once); the last
expression of a block is printed inline. Only attributes that differ from the operator's defaults
are shown. Scalar constants print inline (``1f``); tensors as ``meta[relay.Constant][i]``. Types are
shown (``/* ty=... */``) for nodes that type inference has visited; an ``annotate(expr) -> str``
callback (``astext(annotate=...)``) prints its string there instead.

``astext(node)`` here is the bare text (``str()``); the ``.astext(show_meta_data, annotate)``
methods frame it as TVM does (``ir.function.TextMeta``: version line, metadata section).
"""

from __future__ import annotations

import base64
from typing import Any

from ..ir.function import TextMeta
from ..ir.functor import post_order
from .expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from .op.registry import Op
from .ty import type_str
from .visitor import dataflow_children

__all__ = ["astext", "short_str", "attr_str"]

_SUFFIX = {"float32": "f", "float64": "f64", "float16": "f16", "int32": "", "int64": "i64",
           "int8": "i8", "uint8": "u8", "bool": ""}


def _value_str(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_value_str(x) for x in v) + "]"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def attr_str(call: Call) -> list[str]:
    """``key=value`` strings for the attributes that differ from the operator's defaults."""
    schema = call.op.attrs_schema if isinstance(call.op, Op) else {}
    out = []
    order = [k for k in schema if k in call.attrs] + [k for k in call.attrs.keys() if k not in schema]
    for k in order:  # declaration order, as TVM prints
        v = call.attrs[k]
        if k in schema and _norm(schema[k]) == _norm(v):
            continue
        out.append(f"{k}={_value_str(v)}")
    return out


def _norm(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(v)
    return v


def _scalar_str(c: Constant) -> str | None:
    a = c.data.numpy()
    if a.shape != ():
        return None
    dt = str(a.dtype)
    if dt == "bool":
        return "True" if bool(a) else "False"
    if dt.startswith("float"):
        v = float(a)
        s = repr(v) if not v.is_integer() else str(int(v)) if abs(v) < 1e15 else repr(v)
        return s + _SUFFIX.get(dt, "f")
    return str(int(a)) + _SUFFIX.get(dt, dt)


def _bound_inputs(e: Any) -> list[Any]:
    """The dataflow inputs of ``e`` that print as a ``%N`` binding (not names or scalars)."""
    return [c for c in dataflow_children(e) if not isinstance(c, (Var, GlobalVar, Op, Constant))]


def _constant_record(c: Constant) -> dict:
    a = c.data.numpy()
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "data": base64.b64encode(a.tobytes()).decode("ascii")}


class _Printer:
    def __init__(self, show_types: bool = True, meta: TextMeta | None = None):
        self.show_types = show_types
        self.meta = meta if meta is not None else TextMeta()

    # a block: a list of lines, and a name table shared with enclosing blocks
    def block(self, expr: RelayExpr, names: dict[int, str], indent: str) -> tuple[list[str], str]:
        lines: list[str] = []
        counter = [0]
        final = self.expr(expr, names, lines, indent, counter, top=True)
        return lines, final

    def _ty(self, e: Any) -> str:
        if self.meta.annotate is not None:
            note = self.meta.annotate(e)
            return str(note) if note else ""
        t = getattr(e, "_checked_type", None)
        if not self.show_types or t is None:
            return ""
        return f" /* ty={type_str(t)} */"

    def expr(self, e: Any, names: dict[int, str], lines: list[str], indent: str, counter: list[int],
             top: bool = False) -> str:
        if id(e) in names:
            return names[id(e)]
        if isinstance(e, Var):
            return f"%{e.name_hint}"
        if isinstance(e, GlobalVar):
            return f"@{e.name_hint}"
        if isinstance(e, Op):
            return e.name
        if isinstance(e, Constant):
            s = _scalar_str(e)
            if s is not None:
                return s
            return self.meta.ref("relay.Constant", e, lambda: _constant_record(e))
        if any(id(c) not in names for c in _bound_inputs(e)):  # long chains: inputs first
            for n in post_order(e, _bound_inputs, names)[:-1]:
                self.expr(n, names, lines, indent, counter)
        sub = lambda x: self.expr(x, names, lines, indent, counter)
        if isinstance(e, Call):
            args = [sub(a) for a in e.args]
            op = sub(e.op)
            text = f"{op}({', '.join(args + attr_str(e))})"
        elif isinstance(e, Tuple):
            fs = [sub(f) for f in e.fields]
            text = "(" + ", ".join(fs) + ("," if len(fs) == 1 else "") + ")"
        elif isinstance(e, TupleGetItem):
            text = f"{sub(e.tuple_value)}.{e.index}"
        elif isinstance(e, Function):
            text = self.function(e, "fn ", names, indent)
        elif isinstance(e, Let):
            v = sub(e.value)
            ann = f": {type_str(e.var.type_annotation)}" if e.var.type_annotation is not None else ""
            lines.append(f"{indent}let %{e.var.name_hint}{ann} = {v};")
            return self.expr(e.body, names, lines, indent, counter, top)
        elif isinstance(e, If):
            c = sub(e.cond)
            inner = indent + "  "
            tl, tf = self.block(e.true_branch, dict(names), inner)
            fl, ff = self.block(e.false_branch, dict(names), inner)
            text = (f"if ({c}) {{\n" + "".join(x + "\n" for x in tl) + f"{inner}{tf}\n{indent}}} "
                    f"else {{\n" + "".join(x + "\n" for x in fl) + f"{inner}{ff}\n{indent}}}")
        else:
            raise TypeError(f"cannot print {e!r}")
        text += self._ty(e)
        if top:
            return text
        name = f"%{counter[0]}"
        counter[0] += 1
        lines.append(f"{indent}{name} = {text};")
        names[id(e)] = name
        return name

    def function(self, f: Function, head: str, names: dict[int, str], indent: str) -> str:
        params = []
        for p in f.params:
            ann = f": {type_str(p.type_annotation)}" if p.type_annotation is not None else ""
            params.append(f"%{p.name_hint}{ann}")
        params += [f"{k}={_value_str(v)}" for k, v in f.attrs.items()]
        ret = f.ret_type
        t = getattr(f, "_checked_type", None)
        if ret is None and t is not None:
            ret = t.ret_type
        ret_s = f" -> {type_str(ret)}" if ret is not None else ""
        inner = indent + "  "
        lines, final = self.block(f.body, {}, inner)
        body = "".join(x + "\n" for x in lines) + f"{inner}{final}\n"
        return f"{head}({', '.join(params)}){ret_s} {{\n{body}{indent}}}"


def astext(node: Any, show_types: bool = True, meta: TextMeta | None = None) -> str:
    """The bare text form of a relay expression, function or module (``meta``: the metadata
    and annotate callback shared with the rest of one astext print)."""
    from .module import IRModule

    p = _Printer(show_types, meta)
    if isinstance(node, IRModule):
        parts = [p.function(f, f"def @{g.name_hint}", {}, "") for g, f in node.functions.items()]
        return "\n\n".join(parts)
    if isinstance(node, Function):
        return p.function(node, "fn ", {}, "")
    from .analysis import free_vars

    head = []
    if isinstance(node, RelayExpr) and not isinstance(node, (Var, Constant, GlobalVar)):
        for v in free_vars(node):  # as TVM: declare the free variables first
            ann = f": {type_str(v.type_annotation)}" if v.type_annotation is not None else ""
            head.append(f"free_var %{v.name_hint}{ann};")
    lines, final = p.block(node, {}, "")
    return "\n".join(head + lines + [final])


def short_str(e: Any) -> str:
    """A one-line form for error messages: ``nn.conv2d(%x, %w, strides=[2, 2])``."""

    def arg(a: Any) -> str:
        if isinstance(a, Var):
            return f"%{a.name_hint}"
        if isinstance(a, Constant):
            s = _scalar_str(a)
            return s if s is not None else f"const{list(a.data.shape)}"
        if isinstance(a, Call):
            return f"{a.op.name if isinstance(a.op, Op) else 'fn'}(...)"
        if isinstance(a, TupleGetItem):
            return f"{arg(a.tuple_value)}.{a.index}"
        if isinstance(a, Tuple):
            return "(" + ", ".join(arg(f) for f in a.fields) + ")"
        return type(a).__name__
    if isinstance(e, Call):
        op = e.op.name if isinstance(e.op, Op) else arg(e.op)
        return f"{op}({', '.join([arg(a) for a in e.args] + attr_str(e))})"
    return arg(e)

