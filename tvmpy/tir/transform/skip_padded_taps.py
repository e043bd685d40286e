"""SkipPaddedTaps: skip the multiply-accumulates of a reduction whose input is padding, and
hoist the padding test out of the loops it does not depend on.

What it does
    A *tap* is an accumulation ``acc[i] = acc[i] + x * w`` (either operand order) whose factor
    ``x`` is a padded read: ``if_then_else(c, a, 0)`` or ``select(c, a, 0)``, possibly
    broadcast or cast (the form a convolution takes when its zero padding is inlined). When
    ``c`` is false the update adds ``0 * w``, which is ``0`` for every finite ``w``: the update
    can be skipped. The pass

    - computes, for every statement, the conjuncts of ``c`` that all of its taps share (and
      that read no memory and use no variable the statement binds): when one is false, the
      whole statement does nothing but add zeros;
    - wraps each loop in an ``if`` of the shared conjuncts that do not use its variable and
      that no enclosing ``if`` tests already, so each test sits above the outermost loop it
      does not depend on: a kernel row that falls in the padding skips its whole (input lane,
      column) block, the test runs once per row instead of once per multiply-add. An ``if``
      only ever wraps a loop: a test that varies with the innermost loop stays in the taps'
      selects (no branch in the innermost loop's body);
    - drops those conjuncts from the taps' selects below the ``if`` (a select whose condition
      is left empty becomes the plain read ``a``); the conjuncts a tap does not share with its
      neighbours (the columns of a register tile at the left edge) stay in its select, so the
      unrolled and vectorized inner loops get no branch per multiply-add;
    - deletes taps whose factor is the constant zero (``acc + broadcast(0) * w``, what
      LoopPartition leaves in a register tile's padded edge copy).

When valid
    For finite ``w``: skipping adds ``0 * w == 0`` less (a ``-0.0`` accumulator may stay
    ``-0.0`` instead of becoming ``+0.0``; equal under ``==``). A NaN or infinite weight
    times a padded zero is NaN in the unskipped sum, and the skipped sum does not see it: the
    result differs where a non-finite weight meets the padding only. onnxruntime (MLAS) and
    PyTorch never multiply padding either. Integer reductions are always exact. Runs in the
    CPU pipeline after the last Simplify, when the register tile's statements are unrolled
    and the padding tests of LoopPartition's edge copies are folded to constants.

Example
    before:  for ry in range(0, 3):
                 for ici in range(0, 16):
                     acc[0] = acc[0] + if_then_else(y + ry >= 1 and x >= 1, A[..], 0f) * W[..]
                     acc[1] = acc[1] + if_then_else(y + ry >= 1, A[..], 0f) * W[..]
                     acc[2] = acc[2] + 0f * W[..]
    after:   for ry in range(0, 3):
                 if y + ry >= 1:
                     for ici in range(0, 16):
                         acc[0] = acc[0] + if_then_else(x >= 1, A[..], 0f) * W[..]
                         acc[1] = acc[1] + A[..] * W[..]
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir import dtype as dt
from ...ir.node import structural_equal
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, post_order_visit, uses_var
from .function_pass import PrimFuncPass

__all__ = ["SkipPaddedTaps", "skip_padded_taps_func"]

# The guards of a statement: the list of conjuncts all of its taps share, or None when the
# statement only adds constant zeros (or prefetches): it then never limits a sequence's guards.
Guards = list[E.PrimExpr] | None


def _is_zero(e: E.PrimExpr) -> bool:
    if isinstance(e, E.Broadcast):
        return _is_zero(e.value)
    if isinstance(e, E.Cast):
        return _is_zero(e.value)
    return isinstance(e, (E.IntImm, E.FloatImm)) and e.value == 0


def _pure(e: E.PrimExpr) -> bool:
    """A scalar condition without memory reads or calls (other than ``likely``)."""
    if dt.lanes_of(e.dtype) != 1:
        return False
    ok = True

    def f(n: object) -> None:
        nonlocal ok
        if isinstance(n, (E.BufferLoad, E.ProducerLoad, E.Let)) or (
                isinstance(n, E.Call) and n.op != "likely"):
            ok = False

    post_order_visit(e, f)
    return ok


_EFFECTS = ("call_extern", "call_packed", "tvm_call_packed", "call_llvm_intrin")


def _effect_free(e: E.PrimExpr) -> bool:
    """No call that may have a side effect (skipping the tap skips evaluating ``e``)."""
    ok = True

    def f(n: object) -> None:
        nonlocal ok
        if isinstance(n, E.Call) and n.op in _EFFECTS:
            ok = False

    post_order_visit(e, f)
    return ok


def _conjuncts(c: E.PrimExpr) -> list[E.PrimExpr]:
    """The conjuncts of ``c`` (``likely`` hints unwrapped)."""
    if isinstance(c, E.And):
        return _conjuncts(c.a) + _conjuncts(c.b)
    if isinstance(c, E.Call) and c.op == "likely":
        return _conjuncts(c.args[0])
    return [c]


def _has(cs: list[E.PrimExpr], c: E.PrimExpr) -> bool:
    return any(structural_equal(c, x) for x in cs)


def _and(cs: list[E.PrimExpr]) -> E.PrimExpr:
    out = cs[0]
    for c in cs[1:]:
        out = E.And(out, c)
    return out


# A padded read: its conjuncts and a function that rebuilds it without the ones it is given,
# or "zero" for a constant zero factor.
_Padded = tuple[list[E.PrimExpr], Callable[[list[E.PrimExpr]], E.PrimExpr]] | str | None


def _padded(x: E.PrimExpr) -> _Padded:
    if _is_zero(x):
        return "zero"
    if isinstance(x, (E.Broadcast, E.Cast)):
        inner = _padded(x.value)
        if not isinstance(inner, tuple):
            return inner
        inner_conds, inner_rebuild = inner
        wrap: Callable[[E.PrimExpr], E.PrimExpr] = (
            (lambda v: E.Broadcast(v, x.lanes)) if isinstance(x, E.Broadcast)
            else (lambda v: E.Cast(x.dtype, v)))
        return inner_conds, lambda held: wrap(inner_rebuild(held))
    if isinstance(x, E.Call) and x.op == "if_then_else":
        c, a, z = x.args
        make: Callable[[E.PrimExpr], E.PrimExpr] = lambda cond: E.Call(x.dtype, "if_then_else",
                                                                       [cond, a, z])
    elif isinstance(x, E.Select):
        c, a, z = x.condition, x.true_value, x.false_value
        make = lambda cond: E.Select(cond, a, z)  # noqa: E731
    else:
        return None
    if not _is_zero(z) or not _pure(c):
        return None
    conds = _conjuncts(c)

    def rebuild(held: list[E.PrimExpr]) -> E.PrimExpr:
        rest = [k for k in conds if not _has(held, k)]
        if len(rest) == len(conds):
            return x
        return make(_and(rest)) if rest else a

    return conds, rebuild


def _tap(s: S.BufferStore) -> _Padded:
    """The padded factor of an accumulation ``s`` (``acc[i] = acc[i] + x * w``), rebuilt as the
    whole stored value; None when ``s`` is no tap."""
    v = s.value
    if s.predicate is not None or not isinstance(v, E.Add) or not _effect_free(v):
        return None
    for acc, prod in ((v.a, v.b), (v.b, v.a)):
        if not (isinstance(acc, E.BufferLoad) and acc.buffer.data is s.buffer.data
                and acc.predicate is None and structural_equal(acc.indices, s.indices)):
            continue
        if not isinstance(prod, E.Mul):
            continue
        for x, w, first in ((prod.a, prod.b, True), (prod.b, prod.a, False)):
            p = _padded(x)
            if p is None:
                continue
            if isinstance(p, str):
                return p
            conds, rebuild = p

            def value(held: list[E.PrimExpr], rebuild=rebuild, w=w, first=first,
                      acc=acc, acc_first=acc is v.a) -> E.PrimExpr:
                px = rebuild(held)
                m = E.Mul(px, w) if first else E.Mul(w, px)
                return E.Add(acc, m) if acc_first else E.Add(m, acc)

            return conds, value
    return None


def _is_prefetch(s: S.Stmt) -> bool:
    return isinstance(s, S.Evaluate) and isinstance(s.value, E.Call) and s.value.op == "prefetch"


class _Skipper(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[int, tuple[S.Stmt, Guards]] = {}
        self.held: list[E.PrimExpr] = []

    # --- analysis: the conjuncts every tap of a statement shares ----------------------------
    def guards(self, s: S.Stmt) -> Guards:
        hit = self.memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        g = self._guards(s)
        self.memo[id(s)] = (s, g)
        return g

    def _guards(self, s: S.Stmt) -> Guards:
        if isinstance(s, S.BufferStore):
            t = _tap(s)
            if t is None:
                return []
            return None if isinstance(t, str) else [c for c in t[0] if _pure(c)]
        if _is_prefetch(s):
            return None
        if isinstance(s, S.SeqStmt):
            out: Guards = None
            for x in s.seq:
                g = self.guards(x)
                if g is None:
                    continue
                out = g if out is None else [c for c in out if _has(g, c)]
                if not out:
                    return []
            return out
        if isinstance(s, S.For) and s.kind != S.ForKind.THREAD_BINDING:
            g = self.guards(s.body)
            return None if g is None else [c for c in g if not uses_var(c, s.loop_var)]
        if isinstance(s, S.IfThenElse):
            then = self.guards(s.then_case)
            if then == []:  # no taps: an if of other stores is left where it is
                return []
            if s.else_case is not None:
                els = self.guards(s.else_case)
                if then is None or els is None:
                    return els if then is None else then
                return [c for c in then if _has(els, c)]
            if then is None:
                return None
            own = [c for c in _conjuncts(s.condition) if _pure(c)]
            return own + [c for c in then if not _has(own, c)]
        return []

    # --- the rewrite ---------------------------------------------------------------------
    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def _wrap(self, s: S.Stmt, inner: Callable[[], S.Stmt]) -> S.Stmt:
        g = self.guards(s)
        new = [c for c in g if not _has(self.held, c)] if g else []
        if not new:
            return inner()
        self.held.extend(new)
        try:
            body = inner()
        finally:
            del self.held[len(self.held) - len(new):]
        return S.IfThenElse(_and(new), body) if not S.is_no_op(body) else body

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:  # ifs go around loops only
        return S.seq(*[self.visit(x) for x in s.seq])

    def visit_For(self, s: S.For) -> S.Stmt:
        def inner() -> S.Stmt:
            body = self.visit(s.body)
            return s if body is s.body else s.replace(body=body)
        if s.kind == S.ForKind.THREAD_BINDING:
            return inner()
        return self._wrap(s, inner)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        own = [c for c in _conjuncts(s.condition) if _pure(c) and not _has(self.held, c)]
        self.held.extend(own)
        try:
            then = self.visit(s.then_case)
        finally:
            del self.held[len(self.held) - len(own):]
        els = self.visit(s.else_case) if s.else_case is not None else None
        if then is s.then_case and els is s.else_case:
            return s
        return S.IfThenElse(s.condition, then, els)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        t = _tap(s)
        if t is None:
            return s
        if isinstance(t, str):
            return S.no_op()
        if not any(_has(self.held, c) for c in t[0]):
            return s
        return S.BufferStore(s.buffer, t[1](self.held), s.indices)


def skip_padded_taps_func(func: PrimFunc) -> PrimFunc:
    """Skip the padded taps of ``func``'s reductions (see the module docstring)."""
    body = _Skipper().visit(func.body)
    return func if body is func.body else func.with_body(body)


def SkipPaddedTaps() -> PrimFuncPass:
    """``SkipPaddedTaps()``: skip the multiply-accumulates whose input is padding, the padding
    test hoisted out of the loops it does not depend on, as a pass (the pass form of
    :func:`skip_padded_taps_func`)."""
    return PrimFuncPass.from_func(skip_padded_taps_func, "SkipPaddedTaps")
