"""UnrollLoop: explicit unrolling of UNROLLED loops, and TVM's automatic unrolling pragmas.

What it does
    - A loop of kind UNROLLED with a constant extent is replaced by ``extent`` copies of its
      body (each copy's inner variables renamed), in order. With a symbolic extent it stays an
      UNROLLED loop: a hint for the code generator.
    - ``with attr(x, "pragma_auto_unroll_max_step", N)`` (schedule ``pragma(x,
      "auto_unroll_max_step", N)``) unrolls, inside its body, every serial loop with a constant
      extent whose total number of executed statements (extent x steps of its body, counted
      bottom-up; a store or an evaluate is one step) is at most ``N``, as long as no
      non-unrolled loop lies between it and those inner ones (TVM's rule).
    - ``with attr(x, "pragma_unroll_explicit", 0)``: loops chosen for unrolling are only marked
      UNROLLED (left to the code generator) instead of being copied. The default is explicit.
    - loops of extent 1 are always replaced by their body.
    The two pragma attributes are consumed (removed); other attributes are kept.

When valid
    Always (copies are executed in the loop's order). Runs late, after vectorization, so that
    the copies already hold vector code.

Example
    before:  for j in unrolled(0, 3): C[i * 3 + j] = A[i * 3 + j] + 1f
    after:   C[i * 3] = A[i * 3] + 1f; C[i * 3 + 1] = A[i * 3 + 1] + 1f
             C[i * 3 + 2] = A[i * 3 + 2] + 1f
"""

from __future__ import annotations

from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator
from .common import fresh_copy
from .function_pass import PrimFuncPass

__all__ = ["UnrollLoop", "unroll_loop_func", "unroll"]

_PRAGMA_STEP = "pragma_auto_unroll_max_step"
_PRAGMA_EXPLICIT = "pragma_unroll_explicit"


def unroll(f: S.For) -> S.Stmt:
    """``f`` as explicit copies of its body (constant extent required)."""
    if not isinstance(f.extent, E.IntImm):
        raise ValueError(f"cannot unroll loop {f.loop_var.name} with non-constant extent "
                         f"{f.extent}")
    def value(i: int) -> E.PrimExpr:  # the loop variable's value in copy i (folded)
        if not i:
            return f.min
        if isinstance(f.min, E.IntImm):
            return E.const(f.min.value + i, f.min.dtype)
        return f.min + E.const(i, f.min.dtype)

    copies = [fresh_copy(f.body, {f.loop_var: value(i)}) for i in range(f.extent.value)]
    return S.seq(*copies)


class _Unroller(Mutator):
    def __init__(self, max_step: int = 0, explicit: bool = True, max_depth: int = 8):
        self.max_step = max_step
        self.explicit = explicit
        self.max_depth = max_depth
        self.step_count = 0
        self.unroll_depth = 0
        self.normal_depth = 0

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        if s.attr_key in (_PRAGMA_STEP, _PRAGMA_EXPLICIT):
            saved = (self.max_step, self.explicit)
            if not isinstance(s.value, E.IntImm):
                raise ValueError(f"{s.attr_key} needs a constant integer value, got {s.value}")
            if s.attr_key == _PRAGMA_STEP:
                self.max_step = s.value.value
            else:
                self.explicit = bool(s.value.value)
            body = self.visit(s.body)
            self.max_step, self.explicit = saved
            return body
        return self.generic_visit(s)

    def visit_BufferStore(self, s: S.BufferStore) -> S.Stmt:
        self.step_count += 1
        return s

    def visit_Evaluate(self, s: S.Evaluate) -> S.Stmt:
        if not isinstance(s.value, E.IntImm):
            self.step_count += 1
        return s

    def visit_SeqStmt(self, s: S.SeqStmt) -> S.Stmt:
        total = 0
        unroll_depth = self.unroll_depth
        normal_depth = self.normal_depth
        new = []
        for x in s.seq:
            self.step_count = 0
            self.unroll_depth, self.normal_depth = 0, 0
            new.append(self.visit(x))
            total += self.step_count
            unroll_depth = max(unroll_depth, self.unroll_depth)
            normal_depth = max(normal_depth, self.normal_depth)
        self.step_count = total
        self.unroll_depth, self.normal_depth = unroll_depth, normal_depth
        return s if all(a is b for a, b in zip(new, s.seq)) else S.seq(*new)

    def visit_For(self, f: S.For) -> S.Stmt:
        self.step_count = 0
        self.unroll_depth = 0
        self.normal_depth = 0
        body = self.visit(f.body)
        f = f if body is f.body else f.replace(body=body)
        value = f.extent.value if isinstance(f.extent, E.IntImm) else -1
        auto = (f.kind == S.ForKind.SERIAL and value >= 0 and self.normal_depth == 0
                and self.unroll_depth <= self.max_depth
                and value * self.step_count <= self.max_step)
        if f.kind == S.ForKind.UNROLLED:
            if value < 0:
                self.normal_depth += 1
                return f  # symbolic: a hint for the code generator
            auto = True
        if auto:
            self.step_count *= value
            self.unroll_depth += 1
        else:
            self.normal_depth += 1
        if value == 1 or (auto and self.explicit):
            return unroll(f)
        if auto and f.kind != S.ForKind.UNROLLED:
            return f.replace(kind=S.ForKind.UNROLLED)
        return f


def unroll_loop_func(func: PrimFunc, max_step: int = 0, explicit: bool = True) -> PrimFunc:
    """Unroll UNROLLED loops and apply the unrolling pragmas (see the module docstring)."""
    body = _Unroller(max_step, explicit).visit(func.body)
    return func if body is func.body else func.with_body(body)


def UnrollLoop() -> PrimFuncPass:
    """``tvm.tir.transform.UnrollLoop()``: unroll UNROLLED loops (and TVM's automatic unrolling pragmas), as a pass
    (the pass form of :func:`unroll_loop_func`)."""
    return PrimFuncPass.from_func(unroll_loop_func, "UnrollLoop")
