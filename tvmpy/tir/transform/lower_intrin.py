"""LowerIntrin: target-specific rewriting of intrinsic calls into simpler expressions.

What it does
    Each target kind has a table ``name -> rule``; a rule takes the ``Call`` and returns an
    equivalent expression (or None to keep the call). The default tables are empty: both CPU
    code generators implement every intrinsic of :mod:`tvmpy.tir.op` themselves. This is the
    place for a target that lacks one (register with ``tvm.target.register_intrin_rule``, which
    this module re-exports; the table and its registration live in target/intrin.py); the
    :data:`GENERIC_RULES` below (``sigmoid``, ``rsqrt``, ``exp10`` in terms of ``exp``/``sqrt``)
    can be registered for such a target.

When valid
    Always: every rule must return an expression with the call's exact meaning and dtype.

Example
    before:  B[i] = tir.rsqrt(A[i])                       # a target registered GENERIC_RULES
    after:   B[i] = 1.0f / tir.sqrt(A[i])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...ir.module import IRModule
from ...ir.op import declared_ops
from ...target.intrin import RULES, register_intrin_rule, rules_for
from ...target.target import as_target, current_target
from ...transform import PassContext
from .. import expr as E
from ..function import PrimFunc
from ..functor import Mutator
from ..op import INTRINSICS
from .function_pass import PrimFuncPass

__all__ = ["LowerIntrin", "lower_intrin_func", "register_intrin_rule", "GENERIC_RULES", "RULES"]

Rule = Callable[[E.Call], Any]


def _sigmoid(c: E.Call) -> E.PrimExpr:
    x = c.args[0]
    one = E.const(1.0, c.dtype)
    return one / (one + E.Call(c.dtype, "exp", [E.const(0.0, c.dtype) - x]))


def _rsqrt(c: E.Call) -> E.PrimExpr:
    return E.const(1.0, c.dtype) / E.Call(c.dtype, "sqrt", [c.args[0]])


def _exp10(c: E.Call) -> E.PrimExpr:
    return E.Call(c.dtype, "exp", [c.args[0] * E.const(math.log(10.0), c.dtype)])


GENERIC_RULES: dict[str, Rule] = {"sigmoid": _sigmoid, "rsqrt": _rsqrt, "exp10": _exp10}


class _Lowerer(Mutator):
    def __init__(self, rules: dict[str, Rule], custom: frozenset[str], kind: str):
        self.rules = rules
        self.custom = custom  # user-declared intrinsics: no code generator knows them
        self.kind = kind

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        e = self.generic_visit(e)
        rule = self.rules.get(e.op)
        if rule is None:
            if e.op in self.custom:
                raise ValueError(
                    f"intrinsic {e.op.name} (in `{e}`) has no lowering rule for target "
                    f"{self.kind!r}; register one with tvm.ir.register_intrin_lowering("
                    f"{e.op.name!r}, target={self.kind!r}, f=rule)")
            return e
        out = rule(e)
        if out is None or out is e:
            return e
        if not isinstance(out, E.PrimExpr):
            raise TypeError(f"LowerIntrin: the lowering rule of {e.op.name} returned "
                            f"{type(out).__name__}, not an expression")
        if out.dtype != e.dtype:
            raise TypeError(f"LowerIntrin: the lowering rule of {e.op.name} returned a "
                            f"{out.dtype} expression for a {e.dtype} call")
        return self.visit(out)


def lower_intrin_func(func: PrimFunc, target: Any = None,
                      rules: dict[str, Rule] | None = None) -> PrimFunc:
    """Apply the intrinsic rules of ``target``'s kind (or the given ``rules``)."""
    kind = str(getattr(target, "kind", None) or "llvm")
    if rules is None:
        rules = rules_for(kind)
    # a user-declared intrinsic without a rule is an error once the target is known (without
    # one, ``tvm.lower(s, args)``, it stays for the build to lower)
    custom = declared_ops() - INTRINSICS.keys() if target is not None else frozenset()
    if not rules and not custom:
        return func
    body = _Lowerer(rules, frozenset(custom), kind).visit(func.body)
    return func if body is func.body else func.with_body(body)


def LowerIntrin(target: Any = None) -> PrimFuncPass:
    """``tvm.tir.transform.LowerIntrin()``: apply the intrinsic rules of each PrimFunc's target:
    ``target`` when given (tvmpy's pipeline binds the build target), else the function's
    ``"target"`` attribute, else the current ``tvm.target.Target`` (``with target:``), else
    llvm's (the pass form of :func:`lower_intrin_func`)."""

    def run(func: PrimFunc, mod: IRModule, ctx: PassContext) -> PrimFunc:
        tgt = target if target is not None else func.attrs.get("target")
        return lower_intrin_func(func, as_target(tgt) if tgt is not None else current_target())

    return PrimFuncPass(run, 0, "LowerIntrin")
