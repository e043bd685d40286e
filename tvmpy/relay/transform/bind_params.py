"""Binding parameters: weights given as numpy arrays become Constants of the graph.

What it does
    ``bind_params_by_name(func, params)`` replaces the function parameters named in ``params``
    by Constants (numpy arrays) and drops them from the parameter list (other names in
    ``params`` are skipped, as in TVM; a shape/dtype mismatch is an error), so that
    FoldConstant / FoldScaleAxis can see the weights. ``BindParams(params)`` is the same as a
    module pass on main.

When valid
    Whenever the values are the ones the graph will run with (inference).

Example
    before:  fn (%x, %w) { nn.dense(%x, %w) }            bind_params_by_name(f, {"w": W})
    after:   fn (%x) { nn.dense(%x, meta[relay.Constant][0]) }
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...transform import Pass
from ..expr import Constant, Function, Var
from ..module import IRModule
from ..visitor import ExprMutator

__all__ = ["bind_params_by_name", "BindParams"]

_LOG = logging.getLogger(__name__)


class _Subst(ExprMutator):
    def __init__(self, mapping: dict[int, Any]):
        super().__init__()
        self.mapping = mapping

    def visit_var(self, v: Var) -> Any:
        return self.mapping.get(id(v), v)


def _as_array(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def bind_params_by_name(func: Function, params: Mapping[str, Any]) -> Function:
    """Return ``func`` with the parameters named in ``params`` replaced by constants.

    As TVM's: names in ``params`` that are no parameter of ``func`` are skipped (logged at
    debug level; a params dict of a whole model can carry more than one function uses);
    binding a name that several parameters share is an error (which one is meant?)."""
    if not isinstance(func, Function):
        raise TypeError(f"bind_params_by_name takes a relay Function, got {type(func).__name__}")
    by_name: dict[str, Var] = {}
    repeated: set[str] = set()
    for p in func.params:
        if p.name_hint in by_name:
            repeated.add(p.name_hint)
        by_name.setdefault(p.name_hint, p)
    unused = sorted(str(k) for k in params if k not in by_name)
    if unused:
        _LOG.debug("bind_params_by_name: %d name(s) are no parameter of the function, skipped: %s",
                   len(unused), unused)
    clash = sorted(str(k) for k in params if k in repeated)
    if clash:
        raise ValueError(f"bind_params_by_name: multiple parameters of the function are named "
                         f"{clash}; rename them (relay.var names) to bind them by name")
    mapping: dict[int, Any] = {}
    for name, value in params.items():
        if name not in by_name:
            continue
        p = by_name[name]
        arr = _as_array(value)
        t = p.type_annotation
        if t is not None and hasattr(t, "shape"):
            want = tuple(int(d) if isinstance(d, int) else None for d in t.shape)
            ok = len(want) == arr.ndim and all(w is None or w == g for w, g in zip(want, arr.shape))
            if not ok or str(arr.dtype) != str(t.dtype):
                raise ValueError(f"bind_params_by_name: %{name} expects {t}, got an array of "
                                 f"shape {arr.shape} and dtype {arr.dtype}")
        mapping[id(p)] = Constant(arr)
    body = _Subst(mapping).visit(func.body)
    rest = [p for p in func.params if id(p) not in mapping]
    return Function(rest, body, func.ret_type, attrs=func.attrs)


class BindParams(Pass):
    """Module pass binding ``params`` into ``main``."""

    def __init__(self, params: Mapping[str, Any]):
        super().__init__("BindParams", 0)
        self.params = dict(params)

    def transform_module(self, mod: IRModule, ctx: Any) -> IRModule:
        from . import InferType

        out = mod.copy()
        out["main"] = bind_params_by_name(mod["main"], self.params)
        return InferType()(out)
