"""Checks on loop IR: the lowered-form contract (IR form 2) and single definition of variables.

``verify_lowered(func)`` raises a ValueError listing every place where ``func`` breaks the
contract that code generators rely on (see PREAMBLE / DESIGN): 1-D buffers of scalar element
type without strides, one index per access (scalar; for a store a ramp whose lanes match the
value; for a load any integer vector, a gather where it is not a ramp), no VECTORIZED loops
left. ``verify_single_definition`` checks the invariant that passes keep:
each variable is defined (loop, let, allocation) at most once.
"""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from . import expr as E
from . import stmt as S
from .buffer import Buffer
from .function import PrimFunc
from .functor import post_order_visit

__all__ = ["verify_lowered", "verify_single_definition", "lowered_errors"]


def _buffer_errors(b: Buffer, where: str) -> list[str]:
    errs = []
    if len(b.shape) != 1:
        errs.append(f"{where}: buffer {b.name} is {len(b.shape)}-d, expected 1-d")
    if b.strides:
        errs.append(f"{where}: buffer {b.name} has strides")
    if dt.lanes_of(b.dtype) != 1:
        errs.append(f"{where}: buffer {b.name} has vector dtype {b.dtype}")
    return errs


def lowered_errors(func: PrimFunc) -> list[str]:
    """Every violation of the lowered-form contract in ``func`` (empty when it conforms)."""
    errs: list[str] = []

    def access(node: Any, kind: str) -> None:
        errs.extend(_buffer_errors(node.buffer, kind))
        if len(node.indices) != 1:
            errs.append(f"{kind} of {node.buffer.name} has {len(node.indices)} indices")
            return
        idx = node.indices[0]
        lanes = dt.lanes_of(idx.dtype)
        if lanes != 1 and kind == "store" and not isinstance(idx, E.Ramp):
            errs.append(f"{kind} of {node.buffer.name}: vector index {idx} is not a ramp")
        if not dt.is_integer(dt.element_of(idx.dtype)):
            errs.append(f"{kind} of {node.buffer.name}: index {idx} is not an integer")
        if kind == "store" and dt.lanes_of(node.value.dtype) != lanes:
            errs.append(f"store to {node.buffer.name}: value {node.value.dtype} vs index lanes "
                        f"{lanes}")

    def f(n: Any) -> None:
        if isinstance(n, E.BufferLoad):
            access(n, "load")
        elif isinstance(n, S.BufferStore):
            access(n, "store")
        elif isinstance(n, S.Allocate):
            errs.extend(_buffer_errors(n.buffer, "allocate"))
        elif isinstance(n, S.For) and n.kind == S.ForKind.VECTORIZED:
            errs.append(f"vectorized loop {n.loop_var.name} left")

    post_order_visit(func.body, f)
    return errs


def verify_lowered(func: PrimFunc) -> None:
    errs = lowered_errors(func)
    if errs:
        shown = "\n  ".join(errs[:20])
        raise ValueError(f"{func.name}: not in lowered form ({len(errs)} problems):\n  {shown}")


def verify_single_definition(func: PrimFunc) -> None:
    """Raise ValueError naming a variable that is defined more than once."""
    seen: dict[int, str] = {id(p): p.name for p in func.params}

    def define(v: E.Var) -> None:
        if id(v) in seen:
            raise ValueError(f"variable {v.name} is defined more than once")
        seen[id(v)] = v.name

    def f(n: Any) -> None:
        if isinstance(n, S.For):
            define(n.loop_var)
        elif isinstance(n, (S.LetStmt, E.Let)):
            define(n.var)
        elif isinstance(n, S.Allocate):
            define(n.buffer.data)

    post_order_visit(func.body, f)
