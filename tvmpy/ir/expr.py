"""Expression bases shared by the IR levels: ``RelayExpr`` (a typed graph-level expression, whose
``checked_type`` type inference records) and ``GlobalVar`` (the name of a function in an
IRModule), TVM's ``tvm.ir.RelayExpr`` and ``tvm.ir.GlobalVar``. relay's expressions build on
them; the operator sugar and the printer live in relay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .node import Node

__all__ = ["RelayExpr", "GlobalVar", "register_global_var_call"]

#: how ``GlobalVar.__call__`` builds a call: set by relay (a higher layer) when it is imported
_CALL_BUILDER: list[Callable[[GlobalVar, Sequence[RelayExpr]], RelayExpr]] = []


def register_global_var_call(build: Callable[[GlobalVar, Sequence[RelayExpr]], RelayExpr]) -> None:
    """Install relay's ``Call`` as what ``gv(*args)`` builds (relay calls this on import)."""
    _CALL_BUILDER[:] = [build]


class RelayExpr(Node):
    """Base of graph-level expressions: a ``span`` and the ``checked_type`` set by inference."""

    __slots__ = ("_checked_type", "span")
    span: Any

    @property
    def checked_type(self) -> Any:
        t = getattr(self, "_checked_type", None)
        if t is None:
            raise ValueError(
                "the type of this expression is not known yet: run relay.transform.InferType() "
                "on its module (or relay.transform.infer_type(expr)) first"
            )
        return t

    def _set_checked_type(self, t: Any) -> None:
        object.__setattr__(self, "_checked_type", t)


class GlobalVar(RelayExpr):
    """The name of a function in an IRModule (``@main``); relay calls it as ``Call(gv, args)``."""

    __slots__ = ("name_hint",)
    name_hint: str

    def __init__(self, name_hint: str):
        self._init(name_hint=str(name_hint), span=None)

    def __str__(self) -> str:
        return f"@{self.name_hint}"

    def __call__(self, *args: Any) -> RelayExpr:
        """TVM's ``gv(x, y)``: a relay call of this global function, ``relay.Call(gv, [x, y])``."""
        if _CALL_BUILDER and all(isinstance(a, RelayExpr) for a in args):
            return _CALL_BUILDER[0](self, args)
        types = [type(a).__name__ for a in args]
        raise TypeError(f"cannot call GlobalVar @{self.name_hint} with arguments of types "
                        f"{types}: its arguments must be relay expressions (relay.var, "
                        "relay.const, ...)")
