"""Symbolic dims of a ``torch.export`` program (``dynamic_shapes=...``) as relay size vars.

torch records every size of a dynamic program as a sympy expression over its free symbols
(``s0``, ``s77``: one per ``torch.export.Dim``, shared by the inputs that share it), in the fake
tensors of the nodes' ``meta["val"]`` and in the SymInt values of ``aten.sym_size.int`` /
``operator.mul`` ... nodes. Each free symbol becomes ONE ``relay.Any`` (as ``from_onnx`` makes
one per ``dim_param``), and each size expression the matching tir expression over them, so the
shapes of a view ``(s0, s1 * 4, 8)`` and of its source ``(s0, s1, 32)`` stay provably equal in
element count. The table is per conversion (``symbol_scope``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from ....tir.expr import PrimExpr
from ... import ty

__all__ = ["symbol_scope", "dim", "dims_equal", "is_symbolic", "sym_expr", "name_symbol",
           "rename_symbol", "fix_symbol", "SymbolicDimError"]

_SYMS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("tvmpy_torch_syms",
                                                                     default=None)


class SymbolicDimError(ValueError):
    """A symbolic size torch recorded that has no tir form here (names the expression)."""


@contextlib.contextmanager
def symbol_scope() -> Iterator[None]:
    """A fresh symbol table (sympy symbol -> ``relay.Any``) for one conversion."""
    tok = _SYMS.set({"hints": {}, "fixed": {}})
    try:
        yield
    finally:
        _SYMS.reset(tok)


def _table() -> dict:
    table = _SYMS.get()
    if table is None:
        raise SymbolicDimError("symbolic size outside a conversion (symbol_scope)")
    return table


def name_symbol(d: Any, hint: str) -> None:
    """Name the symbol of the size ``d`` (when it is a bare symbol not yet named) ``hint`` in
    the generated code (``x_dim0``)."""
    e = _sympy_of(d)
    if e is not None and e.is_Symbol:
        _table()["hints"].setdefault(e, hint)


def rename_symbol(d: Any, hint: str) -> None:
    """Name the symbol of ``d`` ``hint`` (input_infos names it), unless it is already used."""
    e = _sympy_of(d)
    if e is not None and e.is_Symbol and e not in _table():
        _table()["hints"][e] = hint


def fix_symbol(d: Any, value: int) -> bool:
    """Specialize the symbol of the size ``d`` (a bare symbol) to ``value``: every size over it
    becomes static. False when ``d`` is not a bare symbol or is already fixed otherwise."""
    e = _sympy_of(d)
    if e is None or not e.is_Symbol:
        return False
    import sympy  # type: ignore[import-untyped]

    fixed = _table()["fixed"]
    return int(fixed.setdefault(e, sympy.Integer(int(value)))) == int(value)


def dims_equal(a: Any, b: Any) -> bool:
    """Whether two sizes (ints, SymInts, tir expressions) are provably equal."""
    return ty.dim_equal(dim(a), dim(b))


def is_symbolic(d: Any) -> bool:
    """Whether ``d`` (an int, SymInt or sympy expression) is not a plain number."""
    e = _sympy_of(d)
    return e is not None and not e.is_number


def _sympy_of(d: Any) -> Any:
    if isinstance(d, (int, bool)):
        return None
    node = getattr(d, "node", None)
    if node is not None and hasattr(node, "expr"):
        return node.expr
    if hasattr(d, "free_symbols"):
        return d
    return None


def dim(d: Any) -> Any:
    """A size as relay takes it: an int, or a tir expression over the program's symbols."""
    if isinstance(d, bool):
        return int(d)
    if isinstance(d, int):
        return d
    e = _sympy_of(d)
    if e is None:
        if isinstance(d, PrimExpr):
            return d
        return int(d)
    fixed = _table()["fixed"]
    if fixed:
        e = e.xreplace(fixed)
    if e.is_number:
        return int(e)
    return sym_expr(e)


def _symbol(s: Any) -> Any:
    table = _table()
    if s not in table:
        table[s] = ty.Any(table["hints"].get(s, str(s)))
    return table[s]


def sym_expr(e: Any) -> Any:
    """The tir expression of a sympy size expression (torch's ``FloorDiv``, ``Mod``,
    ``Max``/``Min`` and integer arithmetic)."""
    from .... import tir

    name = type(e).__name__
    if e.is_Symbol:
        return _symbol(e)
    if e.is_Integer:
        return int(e)
    args = [sym_expr(a) for a in e.args]
    if name == "Add":
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if name == "Mul":
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    if name == "Pow" and e.args[1].is_Integer and int(e.args[1]) > 0:
        out = args[0]
        for _ in range(int(e.args[1]) - 1):
            out = out * args[0]
        return out
    if name == "FloorDiv":
        return tir.floordiv(args[0], args[1])
    if name == "CeilDiv":
        return tir.floordiv(args[0] + args[1] - 1, args[1])
    if name in ("Mod", "PythonMod"):
        return tir.floormod(args[0], args[1])
    if name == "Max":
        return tir.max(*args) if len(args) > 1 else args[0]
    if name == "Min":
        return tir.min(*args) if len(args) > 1 else args[0]
    raise SymbolicDimError(f"symbolic size {e} ({name}) has no tir form in from_pytorch")
