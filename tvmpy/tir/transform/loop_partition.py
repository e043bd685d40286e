"""LoopPartition: split a loop so that its main part runs without its ``likely`` guards.

What it does
    Non-divisible splits guard their body with ``if likely(xo * 8 + xi < n)``. For a loop over
    ``x`` in ``[m, m + e)`` this pass looks at every comparison inside a ``likely(...)`` in the
    loop's body (conjunctions are split into their comparisons). A comparison that is linear in
    ``x`` with an integer coefficient, and linear with integer coefficients in the variables of
    loops nested inside (whose ranges must not depend on ``x`` non-linearly), holds on an
    interval of ``x`` for *every* value of the inner variables; the intersection ``[lo, hi)`` of
    these intervals is where all of them hold. The loop (unless parallel, see below) becomes

        for x in [m, lo'):    body                       (pre, guards kept)
        for x in [lo', hi'):  body with those guards = True   (main)
        for x in [hi', m+e):  body                       (post, guards kept)

    with ``lo' = min(max(lo, m), m+e)`` and ``hi' = max(min(hi, m+e), lo')`` as expressions, so
    symbolic extents are handled (a clamp is left out when it provably does nothing). When a single comparison that involves only ``x`` sets a
    bound, it is known false beyond it, so the pre/post part gets it as ``False`` (the tail of
    an inner split loses its dead guard). Comparisons that read memory are not used (the
    memory may change while the loop runs). Empty parts vanish after Simplify, parts of extent 1 are
    substituted, and each part loops from 0 (its variable shifted by the part's start). When
    every comparison that sets the pre (post) bound is also known false for *all* inner values
    beyond some point (its best case over the inner loops), that part is split once more there
    and they become ``False`` beyond it: the chunks of a split loop that lie wholly outside a
    compute_at region wider than the stage disappear, and the chunk partly inside keeps a
    constant inner extent (so it can still be vectorized). The parts are then searched again
    (their inner loops), never re-split on ``x``. A parallel loop stays one loop whose body
    branches on ``x`` into the three parts (so a tail still runs in parallel with the main
    part); when it fuses several axes and the guards are linear in one of them, ``x % c`` or
    ``x // c``, rather than in ``x``, the branches test that term.

    Budget: the parts are searched again, so guards at ``N`` nested levels would make up to
    ``3**N`` copies (a padding stage computed inside a conv tile, non-divisible tiles at
    several levels: an auto-scheduler candidate grew from 38 to 12,000 statements). The
    partitioned function may hold at most ``max(max_growth * s, s + 64)`` statements (``s``
    the original's; ``max_growth`` is ``PassContext`` config ``tir.LoopPartition.max_growth``,
    default 8, ``None`` unbounded). When the full partition passes it, the pass keeps the
    deepest limit ``d`` on nested edge (pre/post) parts that fits: the main part of every loop
    is partitioned (the hot path loses its guards, the code grows linearly with ``N``), and
    inside edge parts only ``d`` levels deep; if even ``d = 0`` does not fit, loops whose parts
    would pass the budget stay whole (guards kept). Below the budget the result is the full
    partition, unchanged.

When valid
    Always: the main part's guards hold for every iteration in it (by construction), and the
    other parts keep them (a loop left whole by the budget keeps all of its guards). Expects single definition of each variable (see :mod:`.common`);
    pre/post parts are fresh copies.

Example
    before:  for i.outer in range(0, 3): for i.inner in range(0, 4):
                 if likely(i.outer * 4 + i.inner < 10) { C[i.outer * 4 + i.inner] = A[...] }
    after:   for i.outer in range(0, 2): for i.inner in range(0, 4): C[i.outer * 4 + i.inner] = A[...]
             for i.inner in range(0, 2): C[i.inner + 8] = A[...]
"""

from __future__ import annotations

from typing import Any

from ...ir import dtype as dt
from ...transform import PassContext
from .. import expr as E
from .. import stmt as S
from ..function import PrimFunc
from ..functor import Mutator, Visitor, reads_memory, substitute, uses_var
from ..op import max as _max
from ..op import min as _min
from .common import fresh_copy, is_const, linear_form, make_analyzer
from .function_pass import PrimFuncPass

__all__ = ["LoopPartition", "loop_partition_func"]


class _AtomCollector(Visitor):
    """Comparisons inside likely() calls, with the loops enclosing them (inside the loop)."""

    def __init__(self) -> None:
        self.loops: list[tuple[E.Var, E.PrimExpr, E.PrimExpr]] = []
        self.bound_inside: set[int] = set()
        self.atoms: list[tuple[E.PrimExpr, list, frozenset]] = []

    def visit_For(self, f: S.For) -> None:
        self.visit(f.min)
        self.visit(f.extent)
        self.loops.append((f.loop_var, f.min, f.extent))
        self.visit(f.body)
        self.loops.pop()

    def visit_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread") and isinstance(s.node, E.IterVar):
            v = s.node.var
            self.loops.append((v, E.const(0, v.dtype), s.value))
            self.visit(s.body)
            self.loops.pop()
            return
        self.generic_visit(s)

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.bound_inside.add(id(s.var))
        self.generic_visit(s)

    def visit_Let(self, e: E.Let) -> None:
        self.bound_inside.add(id(e.var))
        self.generic_visit(e)

    def visit_Call(self, e: E.Call) -> None:
        if e.op == "likely":
            for atom in _split_and(e.args[0]):
                self.atoms.append((atom, list(self.loops), frozenset(self.bound_inside)))
        self.generic_visit(e)


def _split_and(c: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(c, E.And):
        return _split_and(c.a) + _split_and(c.b)
    return [c]


def _normalize(atom: E.PrimExpr) -> E.PrimExpr | None:
    """``d`` such that ``atom`` is ``d < 0``; None for other shapes."""
    if not isinstance(atom, (E.LT, E.LE, E.GT, E.GE)):
        return None
    if not dt.is_integer(atom.a.dtype) or dt.lanes_of(atom.a.dtype) != 1:
        return None
    one = E.const(1, atom.a.dtype)
    if isinstance(atom, E.LT):
        return atom.a - atom.b
    if isinstance(atom, E.LE):
        return atom.a - atom.b - one
    if isinstance(atom, E.GT):
        return atom.b - atom.a
    return atom.b - atom.a - one


def _eliminate(d: E.PrimExpr, loops: list, ana: Any, worst: bool) -> E.PrimExpr | None:
    """``d`` with the inner loop variables (innermost first) at the values that make it largest
    (``worst``) or smallest; None when ``d`` is not linear in one of them."""
    for v, vmin, vext in reversed(loops):
        if not uses_var(d, v):
            continue
        lf = linear_form(d, v)
        if lf is None:
            return None
        c, rest = lf
        top = vmin + vext - E.const(1, vext.dtype)
        pick = top if (c > 0) == worst else vmin
        d = ana.simplify(rest + E.const(c, rest.dtype) * E.cast(pick, rest.dtype))
    return d


def _x_bound(d: E.PrimExpr, x: E.Var, inner: set[int], ana: Any
             ) -> tuple[E.PrimExpr | None, E.PrimExpr | None] | None:
    """``d < 0`` (``d`` linear in ``x`` alone) as ``(lo, hi)``: it holds iff ``lo <= x`` (when
    ``d`` falls with ``x``) or ``x < hi`` (when it grows)."""
    if uses_var(d, lambda v: id(v) in inner):
        return None
    lf = linear_form(d, x)
    if lf is None or lf[0] == 0:
        return None
    a, r = lf
    if uses_var(r, x):
        return None
    if x.dtype != r.dtype:
        r = E.cast(r, x.dtype)
    if a > 0:  # a*x + r < 0  <=>  x < ceil(-r / a)
        hi = (E.const(0, x.dtype) - r) if a == 1 else (E.const(a - 1, x.dtype) - r) // a
        return None, ana.simplify(hi)
    b = -a  # -b*x + r < 0  <=>  x > r / b  <=>  x >= floor(r / b) + 1
    lo = (r if b == 1 else r // b) + E.const(1, x.dtype)
    return ana.simplify(lo), None


def _interval(atom: E.PrimExpr, x: E.Var, loops: list, bound_inside: frozenset, ana: Any
              ) -> tuple[E.PrimExpr | None, E.PrimExpr | None, bool,
                         E.PrimExpr | None] | None:
    """``(lo, hi, exact, dead)``: the atom holds for all inner values when ``lo <= x < hi``
    (None = open); ``exact``: it depends on ``x`` only, so it is false outside that interval;
    ``dead``: past it (``x >= dead`` for an upper bound ``hi``, ``x < dead`` for a lower one)
    the atom is false for every inner value (None when not known; ``hi`` / ``lo`` when
    exact)."""
    d = _normalize(atom)
    if d is None or not uses_var(d, x) or reads_memory(d):
        return None  # a load could change while the loop runs: not a fixed interval
    d = ana.simplify(d)
    exact = not any(uses_var(d, v) for v, _, _ in loops)
    inner = {id(v) for v, _, _ in loops} | set(bound_inside)
    worst = _eliminate(d, loops, ana, True)
    holds = None if worst is None else _x_bound(worst, x, inner, ana)
    if holds is None:
        return None
    dead = holds[1] if holds[1] is not None else holds[0]  # exact: false outside
    if not exact:
        dead = None
        best = _eliminate(d, loops, ana, False)
        fails = None if best is None else _x_bound(best, x, inner, ana)
        if fails is not None:  # best case d >= 0: the atom fails for all inner values
            dead = fails[1] if holds[1] is not None else fails[0]
    return holds[0], holds[1], exact, dead


class _AtomReplacer(Mutator):
    def __init__(self, atoms: set[int], value: bool = True):
        self.atoms = atoms
        self.value = value

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        if id(e) in self.atoms:
            return E.const(self.value, e.dtype)
        return self.generic_visit(e)


def _outside(body: S.Stmt, bound_atoms: list[tuple]) -> S.Stmt:
    """The body for iterations past one bound: when a single atom sets that bound and it
    depends on the loop variable only, it is false there."""
    if len(bound_atoms) == 1 and bound_atoms[0][1]:
        return _AtomReplacer({bound_atoms[0][0]}, False).visit(body)
    return body


def _bounds(col: _AtomCollector, interval: Any) -> tuple[E.PrimExpr | None, E.PrimExpr | None,
                                                       set[int], list[tuple], list[tuple]]:
    """``(lo, hi, chosen, lo_atoms, hi_atoms)`` over the collected atoms: ``interval(atom,
    loops, bound_inside)`` gives an atom's ``(lo, hi, exact, dead)`` (or None: not used); the
    bounds intersect, and each bound's atoms are listed as ``(id, exact, dead)``."""
    lo: E.PrimExpr | None = None
    hi: E.PrimExpr | None = None
    chosen: set[int] = set()
    lo_atoms: list[tuple] = []
    hi_atoms: list[tuple] = []
    for atom, loops, bound_inside in col.atoms:
        iv = interval(atom, loops, bound_inside)
        if iv is None:
            continue
        chosen.add(id(atom))
        if iv[0] is not None:
            lo_atoms.append((id(atom), iv[2], iv[3]))
            lo = iv[0] if lo is None else _max(lo, iv[0])
        if iv[1] is not None:
            hi_atoms.append((id(atom), iv[2], iv[3]))
            hi = iv[1] if hi is None else _min(hi, iv[1])
    return lo, hi, chosen, lo_atoms, hi_atoms


def _terms_of(atom: E.PrimExpr, x: E.Var) -> list[E.FloorMod | E.FloorDiv]:
    """The ``x % c`` / ``x // c`` (constant ``c > 0``) subterms of ``atom``."""
    found: list[E.FloorMod | E.FloorDiv] = []

    class _V(Visitor):
        def visit_PrimExpr(self, e: E.PrimExpr) -> None:
            if isinstance(e, (E.FloorMod, E.FloorDiv)) and e.a is x \
                    and isinstance(e.b, E.IntImm) and e.b.value > 0:
                found.append(e)
                return
            self.generic_visit(e)

    _V().visit(atom)
    return found


class _TermReplacer(Mutator):
    """``x % c`` (or ``x // c``, by ``kind``) -> ``y``."""

    def __init__(self, x: E.Var, kind: type, c: int, y: E.Var) -> None:
        self.x, self.kind, self.c, self.y = x, kind, c, y

    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        if isinstance(e, (E.FloorMod, E.FloorDiv)) and isinstance(e, self.kind) \
                and e.a is self.x and isinstance(e.b, E.IntImm) and e.b.value == self.c:
            return self.y
        return self.generic_visit(e)


class _OverBudget(Exception):
    """The partitioned copies passed the statement budget (strict mode)."""


def stmt_count(node: S.Stmt) -> int:
    """The number of statements in ``node`` (the size LoopPartition budgets; expressions are
    not visited)."""
    n, todo = 0, [node]
    while todo:
        st = todo.pop()
        n += 1
        for name in type(st)._fields:
            v = getattr(st, name)
            if isinstance(v, S.Stmt):
                todo.append(v)
            elif isinstance(v, (list, tuple)):
                todo.extend(x for x in v if isinstance(x, S.Stmt))
    return n


class _Partitioner(Mutator):
    """One partitioning run. ``size`` tracks the function's statement count as parts are made;
    ``budget`` caps it: past it a ``strict`` run raises :class:`_OverBudget`, a lenient one
    leaves the loop whole. ``edge_depth``: partition only inside at most that many nested edge
    (pre/post) parts (None: no limit)."""

    def __init__(self, func: PrimFunc, size: int = 0, budget: int | None = None,
                 edge_depth: int | None = None, strict: bool = True) -> None:
        self.ana = make_analyzer(func)
        self.size, self.budget = size, budget
        self.edge_depth, self.strict = edge_depth, strict
        self.depth = 0  # edge parts around the statement being visited
        self.edge_ids: set[int] = set()  # the pre/post branches of a parallel loop's body

    def visit_For(self, f: S.For) -> S.Stmt:
        if self.edge_depth is not None and self.depth > self.edge_depth:
            return f
        parts = self.partition(f)
        if parts is not None and self.budget is not None:
            grown = (self.size + sum(stmt_count(p) for p, _, _ in parts) - stmt_count(f)
                     + (len(parts) > 1))  # the SeqStmt holding the parts
            if grown > self.budget:
                if self.strict:
                    raise _OverBudget
                parts = None
            else:
                self.size = grown
        if parts is None:
            body = self.visit(f.body)
            return f if body is f.body else f.replace(body=body)
        out: list[S.Stmt] = []
        for p, is_part_loop, is_edge in parts:
            self.depth += is_edge
            if is_part_loop:  # a part of this loop: never split again on the same variable
                assert isinstance(p, S.For), "make_part flags only its loops as parts"
                body = self.visit(p.body)
                out.append(p if body is p.body else p.replace(body=body))
            else:  # a substituted single iteration
                out.append(self.visit(p))
            self.depth -= is_edge
        return S.seq(*out)

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        if not self.edge_ids:
            return self.generic_visit(s)
        cond = self.visit(s.condition)
        then_case = self.visit_edge(s.then_case)
        else_case = None if s.else_case is None else self.visit_edge(s.else_case)
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return S.IfThenElse(cond, then_case, else_case)

    def visit_edge(self, st: S.Stmt) -> S.Stmt:
        """``st`` visited one edge part deeper when it is a parallel loop's pre/post branch."""
        edge = id(st) in self.edge_ids
        self.depth += edge
        out = self.visit(st)
        self.depth -= edge
        return out

    def partition(self, f: S.For) -> list[tuple[S.Stmt, bool, bool]] | None:
        x = f.loop_var
        col = _AtomCollector()
        col.visit(f.body)
        lo, hi, chosen, lo_atoms, hi_atoms = _bounds(
            col, lambda atom, loops, inside: _interval(atom, x, loops, inside, self.ana))
        if not chosen:
            return self.partition_proxy(f, col) if f.kind == S.ForKind.PARALLEL else None
        simp = self.ana.simplify
        m, end = f.min, simp(f.min + f.extent)
        le = self.provably_le
        lo_c = m
        if lo is not None:
            lo_c = lo if le(m, lo) else _max(lo, m)
            lo_c = simp(lo_c if le(lo_c, end) else _min(lo_c, end))
        hi_c = end
        if hi is not None:
            hi_c = hi if le(hi, end) else _min(hi, end)
            hi_c = simp(hi_c if le(lo_c, hi_c) else _max(hi_c, lo_c))
        main_body = _AtomReplacer(chosen).visit(f.body)
        if f.kind == S.ForKind.PARALLEL:
            return self.branch(f, lo_c if lo is not None else None,
                               hi_c if hi is not None else None, main_body,
                               _outside(f.body, lo_atoms), _outside(f.body, hi_atoms))
        parts: list[tuple[S.Stmt, bool, bool] | None] = []
        if lo is not None:
            parts.extend(self.edge_parts(f, m, lo_c, lo_atoms, False))
        parts.append(self.make_part(f, lo_c, simp(hi_c - lo_c), main_body, fresh=False))
        if hi is not None:
            parts.extend(self.edge_parts(f, hi_c, end, hi_atoms, True))
        return [p for p in parts if p is not None]

    def partition_proxy(self, f: S.For, col: _AtomCollector
                        ) -> list[tuple[S.Stmt, bool, bool]] | None:
        """A parallel loop over fused axes: guards linear in ``x % c`` or ``x // c`` (an axis
        of the fusion, e.g. the column panel in ``fuse(batch, panel)``) instead of ``x``. The
        body branches on that term (the parts are not contiguous ranges of ``x``)."""
        x, simp = f.loop_var, self.ana.simplify
        terms: dict[tuple[type, int], E.PrimExpr] = {}
        for atom, _, _ in col.atoms:
            for t in _terms_of(atom, x):
                assert isinstance(t.b, E.IntImm)
                terms.setdefault((type(t), t.b.value), t)
        end = simp(f.min + f.extent)
        for (kind, c), term in sorted(terms.items(), key=lambda kv: kv[0][0] is E.FloorDiv):
            y = E.Var("p", x.dtype)

            def in_term(atom: E.PrimExpr, loops: list, inside: frozenset,
                        kind: type = kind, c: int = c, y: E.Var = y) -> Any:
                a2 = _TermReplacer(x, kind, c, y).visit(atom)
                return None if uses_var(a2, x) else _interval(a2, y, loops, inside, self.ana)

            lo, hi, chosen, lo_atoms, hi_atoms = _bounds(col, in_term)
            if not chosen:
                continue
            if kind is E.FloorMod:
                ymin, yend = E.const(0, x.dtype), E.const(c, x.dtype)
            else:
                ymin, yend = simp(f.min // c), simp((end - 1) // c + 1)
            main = _AtomReplacer(chosen).visit(f.body)
            return self.branch(f, lo, hi, main, _outside(f.body, lo_atoms),
                               _outside(f.body, hi_atoms), term, ymin, yend)
        return None

    def branch(self, f: S.For, lo: E.PrimExpr | None, hi: E.PrimExpr | None, main: S.Stmt,
               pre: S.Stmt, post: S.Stmt, term: E.PrimExpr | None = None,
               tmin: E.PrimExpr | None = None, tend: E.PrimExpr | None = None
               ) -> list[tuple[S.Stmt, bool, bool]]:
        """A parallel loop keeps one loop, its parts become branches of its body
        (``if x < lo: pre elif x < hi: main else: post``): split into loops, the parts after
        the first would run one after the other, e.g. the tail panel of a GEMM on one thread
        after all the others."""
        simp = self.ana.simplify
        x = f.loop_var if term is None else term  # what the parts are ranges of
        start = f.min if term is None else tmin
        end = simp(f.min + f.extent) if term is None else tend
        assert start is not None and end is not None  # (tmin/tend come with term)

        def empty(a: E.PrimExpr, b: E.PrimExpr) -> bool:  # [a, b) provably empty
            d = simp(b - a)
            return isinstance(d, E.IntImm) and d.value <= 0

        body = main
        if hi is not None and not empty(hi, end):
            post = fresh_copy(post)
            self.edge_ids.add(id(post))
            body = S.IfThenElse(x < hi, body, post)
        if lo is not None and not empty(start, lo):
            pre = fresh_copy(pre)
            self.edge_ids.add(id(pre))
            body = S.IfThenElse(x < lo, pre, body)
        return [(f.replace(body=body), True, False)]

    def edge_parts(self, f: S.For, start: E.PrimExpr, stop: E.PrimExpr, atoms: list,
                   upper: bool) -> list[tuple[S.Stmt, bool, bool] | None]:
        """The iterations ``[start, stop)`` outside the main part, on the side of an upper
        (``upper``) or lower bound. When every atom setting that bound is known false for all
        inner values past a point, the part splits there and the atoms are ``False`` beyond:
        e.g. the last chunks of a split loop that overhangs its region (a compute_at bound
        wider than the stage), so the one chunk partly inside keeps a constant inner extent."""
        simp, le = self.ana.simplify, self.provably_le
        deads = [a[2] for a in atoms]
        if any(d is None for d in deads):
            return [self.make_part(f, start, simp(stop - start), _outside(f.body, atoms),
                                   fresh=True)]
        cut = deads[0]
        for d in deads[1:]:
            cut = _max(cut, d) if upper else _min(cut, d)
        cut = simp(cut)
        cut = cut if le(start, cut) else _max(cut, start)
        cut = simp(cut if le(cut, stop) else _min(cut, stop))
        killed = _AtomReplacer({a[0] for a in atoms}, False).visit(f.body)
        near = _outside(f.body, atoms)
        if upper:
            return [self.make_part(f, start, simp(cut - start), near, fresh=True),
                    self.make_part(f, cut, simp(stop - cut), killed, fresh=True)]
        return [self.make_part(f, start, simp(cut - start), killed, fresh=True),
                self.make_part(f, cut, simp(stop - cut), near, fresh=True)]

    def provably_le(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """``a <= b`` for all values: the analyzer, or floordiv's monotonicity
        (``(x + c0) // d <= (x + c1) // d`` when ``c0 <= c1``, ``d > 0``)."""
        if self.ana.can_prove(a <= b):
            return True
        if isinstance(a, E.FloorDiv) and isinstance(b, E.FloorDiv) \
                and isinstance(a.b, E.IntImm) and isinstance(b.b, E.IntImm) \
                and a.b.value == b.b.value and a.b.value > 0:
            diff = self.ana.simplify(b.a - a.a)
            return isinstance(diff, E.IntImm) and diff.value >= 0
        return False

    def make_part(self, f: S.For, start: E.PrimExpr, extent: E.PrimExpr, body: S.Stmt,
                  fresh: bool) -> tuple[S.Stmt, bool, bool] | None:
        """(statement, is a loop over x) for one part; None when it is empty."""
        if isinstance(extent, E.IntImm):
            if extent.value <= 0:
                return None
            if extent.value == 1:
                return fresh_copy(body, {f.loop_var: start}), False, fresh
        # each part loops from 0 (codegen- and reader-friendly): x = x' + start
        shifted = f.loop_var if is_const(start, 0) else None
        if fresh:
            nv = E.Var(f.loop_var.name, f.loop_var.dtype)
            value = nv if shifted is not None else nv + start
            return f.replace(loop_var=nv, min=E.const(0, f.min.dtype), extent=extent,
                             body=fresh_copy(body, {f.loop_var: value})), True, True
        if shifted is None:
            body = substitute(body, {f.loop_var: f.loop_var + start})
        return f.replace(min=E.const(0, f.min.dtype), extent=extent, body=body), True, False


MAX_GROWTH = 8  # the partitioned function may hold this many times the original statements
MIN_BUDGET = 64  # ... or this many more, for small functions
_UNSET: Any = object()


def loop_partition_func(func: PrimFunc, max_growth: float | None = _UNSET) -> PrimFunc:
    """Partition every loop whose body has ``likely`` guards linear in its variable, within a
    budget of ``max_growth`` times the function's statements (None: no budget; by default the
    PassContext's ``tir.LoopPartition.max_growth``, else :data:`MAX_GROWTH`; see the module
    docstring)."""
    if max_growth is _UNSET:
        max_growth = PassContext.current().config.get("tir.LoopPartition.max_growth", MAX_GROWTH)
    if max_growth is not None and not (isinstance(max_growth, (int, float))
                                       and max_growth > 0):
        raise ValueError(f"tir.LoopPartition.max_growth must be a number > 0 or None, "
                         f"got {max_growth!r}")
    size = stmt_count(func.body)
    budget = None if max_growth is None else max(int(max_growth * size), size + MIN_BUDGET)
    try:
        body = _Partitioner(func, size, budget).visit(func.body)
    except _OverBudget:
        body = _budgeted(func, size, budget)
    return func if body is func.body else func.with_body(body)


def _budgeted(func: PrimFunc, size: int, budget: int | None) -> S.Stmt:
    """The deepest edge-part limit whose partition fits the budget; when none does, a lenient
    run at depth 0 (loops whose parts would pass the budget stay whole)."""
    best: S.Stmt | None = None
    for depth in range(_loop_depth(func.body) + 1):
        try:
            best = _Partitioner(func, size, budget, edge_depth=depth).visit(func.body)
        except _OverBudget:
            break
    if best is None:
        best = _Partitioner(func, size, budget, edge_depth=0, strict=False).visit(func.body)
    return best


def _loop_depth(node: S.Stmt) -> int:
    """The deepest nest of loops in ``node``."""

    class _D(Visitor):
        def __init__(self) -> None:
            self.cur = self.best = 0

        def visit_For(self, f: S.For) -> None:
            self.cur += 1
            self.best = max(self.best, self.cur)
            self.visit(f.body)
            self.cur -= 1

        def visit_PrimExpr(self, e: E.PrimExpr) -> None:
            return None

    d = _D()
    d.visit(node)
    return d.best


def LoopPartition() -> PrimFuncPass:
    """``tvm.tir.transform.LoopPartition()``: split loops so their main part runs without ``likely`` guards, as a pass
    (the pass form of :func:`loop_partition_func`)."""
    return PrimFuncPass.from_func(loop_partition_func, "LoopPartition")
