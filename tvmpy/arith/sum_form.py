"""The canonical form of integer index expressions: a sum of ``coeff * monomial`` plus a constant.

A monomial is a product of *atoms*: anything that is not ``+ - *`` (variables, floordiv,
floormod, min, max, loads, casts, calls ...). Equal atoms are recognised structurally (variables by
identity), so ``x*4 + y - x*4`` becomes ``y``. Converting back to an expression orders terms
deterministically: higher degree first, then larger |coefficient|, then by printed name, positive
terms before subtracted ones, the constant last; so equal sums always print the same.

Floordiv/floormod atoms by positive constants are also read as *splits*
``floordiv(floormod(x, upper), lower)`` of the same ``x``, so that
``(x // 4) * 4 + x % 4`` merges back to ``x`` (and ``x % 32 // 4 * 4 + x % 4`` to ``x % 32``).
The identities hold for truncdiv/truncmod as well (both sides are odd functions of ``x``), but
floor and trunc splits are never mixed.
"""

from __future__ import annotations

import contextlib
import gc
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..ir.functor import CHAIN_DEPTH
from ..tir import expr as E
from .const_fold import dtype_int_range, wrap_int

__all__ = ["Sum", "skey", "okey", "to_sum", "fold_sum", "mul_sums", "split_info", "make_split",
           "congruent", "clear_caches", "cache_scope", "scope_generation", "freeze_finished",
           "in_cache_scope"]

_SKEY: dict[int, tuple[Any, Any]] = {}
_OKEY: dict[int, tuple[Any, str]] = {}
_CACHE_LIMIT = 100_000  # entries keep their nodes alive: bounded memory
INF = math.inf
_scope_lock = threading.Lock()
_scope_depth = 0
_generation = 0  # counts clear_caches() calls: what was memoised before a clear is stale


def clear_caches() -> None:
    """Forget every memoized key and sum. The caches are keyed by ``id`` and hold their
    expressions alive, so that an id is never reused while its entry exists; between
    compilations they only keep dead IR alive (megabytes per model)."""
    global _generation
    _generation += 1
    _SKEY.clear()
    _OKEY.clear()
    _SUM_CACHE.clear()
    for hook in CLEAR_HOOKS:
        hook()


CLEAR_HOOKS: list[Callable[[], None]] = []  # more memo tables to forget with these


@contextlib.contextmanager
def cache_scope() -> Iterator[None]:
    """A compilation (``relay.build``, one kernel of it): the caches are cleared when the
    outermost scope (of all threads) exits, so building many models in one process does not
    keep the IR of the finished ones alive. Inside, the ``_CACHE_LIMIT`` bound still holds.

    The objects alive when a scope is entered (the program, imported modules: torch's are
    millions) are also left out of the garbage collector's full collections until the
    outermost scope exits (``gc.freeze``); :func:`freeze_finished` adds what a finished part
    of the compilation keeps. Without it every full collection during a build walked them
    all again (10-20% of ResNet-18's build: each walk longer as the kernels' IR piles up).
    Cyclic garbage made before then is collected after the scope instead. Where objects are
    frozen already (a forked kernel worker: the parent's heap), the collector is left as it
    is: unfreezing would undo that."""
    global _scope_depth, _generation, _freezing
    with _scope_lock:
        if _scope_depth == 0:
            _freezing = gc.get_freeze_count() == 0
        _scope_depth += 1
        _generation += 1  # memo tables of an enclosing part are not carried into this one
        if _freezing:
            gc.freeze()
    try:
        yield
    finally:
        with _scope_lock:
            _scope_depth -= 1
            if _scope_depth == 0:
                clear_caches()
                if _freezing:
                    gc.unfreeze()
                    _freezing = False


_freezing = False  # whether the outermost cache_scope froze the heap (and will unfreeze it)


def freeze_finished() -> None:
    """Inside a :func:`cache_scope` that froze the heap: what is alive now (the IR of the
    kernels compiled so far) is left out of full garbage collections until it exits."""
    with _scope_lock:
        if _scope_depth and _freezing:
            gc.freeze()


def in_cache_scope() -> bool:
    return _scope_depth > 0


def scope_generation() -> int | None:
    """Inside a :func:`cache_scope`: a number that changes whenever the caches are cleared
    (memo tables kept elsewhere compare it to know they are stale); outside: None."""
    return _generation if _scope_depth else None


def skey(e: Any) -> Any:
    """A hashable structural key: equal keys <=> structurally equal (free vars by identity)."""
    hit = _SKEY.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    k = _skey(e)
    if len(_SKEY) > _CACHE_LIMIT:
        _SKEY.clear()
    _SKEY[id(e)] = (e, k)
    return k


def _skey(e: Any) -> Any:
    if isinstance(e, E.Var):
        return ("V", id(e))
    if isinstance(e, E.IntImm):
        return ("I", e.dtype, e.value)
    if isinstance(e, E.FloatImm):
        return ("F", e.dtype, repr(e.value))
    if isinstance(e, E.StringImm):
        return ("S", e.value)
    if isinstance(e, E.BinaryOp):
        return (type(e).__name__, e.dtype, skey(e.a), skey(e.b))
    if isinstance(e, E.Not):
        return ("Not", skey(e.a))
    if isinstance(e, E.Cast):
        return ("Cast", e.dtype, skey(e.value))
    if isinstance(e, E.Select):
        return ("Sel", skey(e.condition), skey(e.true_value), skey(e.false_value))
    if isinstance(e, E.Call):
        return ("Call", e.op, e.dtype, tuple(skey(a) for a in e.args))
    if isinstance(e, E.BufferLoad):
        pred = () if e.predicate is None else skey(e.predicate)
        return ("Load", id(e.buffer), tuple(skey(i) for i in e.indices), pred)
    if isinstance(e, E.ProducerLoad):
        return ("PLoad", id(e.producer), tuple(skey(i) for i in e.indices))
    if isinstance(e, E.Ramp):
        return ("Ramp", skey(e.base), skey(e.stride), e.lanes)
    if isinstance(e, E.Broadcast):
        return ("Bcast", skey(e.value), e.lanes)
    if isinstance(e, E.Let):
        return ("Let", skey(e.var), skey(e.value), skey(e.body))
    if isinstance(e, E.Shuffle):
        return ("Shuf", tuple(skey(v) for v in e.vectors), tuple(skey(i) for i in e.indices))
    return ("O", id(e))


def okey(e: Any) -> str:
    """A readable sort key (names, not identities) used to order terms deterministically."""
    hit = _OKEY.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    if isinstance(e, E.Var):
        k = e.name
    elif isinstance(e, (E.IntImm, E.FloatImm)):
        k = f"{e.value}"
    elif isinstance(e, E.BinaryOp):
        k = f"{type(e).__name__}({okey(e.a)},{okey(e.b)})"
    elif isinstance(e, E.Cast):
        k = f"{okey(e.value)}:{e.dtype}"
    elif isinstance(e, E.Call):
        k = f"{e.op}({','.join(okey(a) for a in e.args)})"
    elif isinstance(e, E.BufferLoad):
        k = f"{e.buffer.name}[{','.join(okey(i) for i in e.indices)}]"
    elif isinstance(e, E.Select):
        k = f"select({okey(e.condition)},{okey(e.true_value)},{okey(e.false_value)})"
    else:
        k = type(e).__name__
    if len(_OKEY) > _CACHE_LIMIT:
        _OKEY.clear()
    _OKEY[id(e)] = (e, k)
    return k


def _atom_sort_key(a: E.PrimExpr) -> tuple:
    return (okey(a), hash(skey(a)))


def mono_key(atoms: tuple) -> tuple:
    return tuple(skey(a) for a in atoms)


class Sum:
    """``sum(coeff * prod(atoms)) + const`` over one integer dtype. Mutable while being built."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: str, const: int = 0):
        self.terms: dict[tuple, list] = {}  # mono key -> [coeff, atoms (sorted)]
        self.const = const
        self.dtype = dtype

    # ---- building ----------------------------------------------------------------------------
    @classmethod
    def atom(cls, e: E.PrimExpr, coeff: int = 1) -> Sum:
        s = cls(e.dtype)
        s.add_mono((e,), coeff)
        return s

    def copy(self) -> Sum:
        s = Sum(self.dtype, self.const)
        s.terms = {k: [c, a] for k, (c, a) in self.terms.items()}
        return s

    def add_mono(self, atoms: tuple, coeff: int) -> None:
        if coeff == 0:
            return
        if len(atoms) > 1:
            atoms = tuple(sorted(atoms, key=_atom_sort_key))
        k = mono_key(atoms)
        t = self.terms.get(k)
        if t is None:
            self.terms[k] = [coeff, atoms]
        else:
            t[0] += coeff
            if t[0] == 0:
                del self.terms[k]

    def coeff_of(self, atoms: tuple) -> int:
        """The coefficient of the monomial ``prod(atoms)`` (0 when absent)."""
        if len(atoms) > 1:
            atoms = tuple(sorted(atoms, key=_atom_sort_key))
        t = self.terms.get(mono_key(atoms))
        return 0 if t is None else t[0]

    def iadd(self, other: Sum, scale: int = 1) -> Sum:
        self.const += other.const * scale
        for c, atoms in other.terms.values():
            self.add_mono(atoms, c * scale)
        return self

    def scaled(self, c: int) -> Sum:
        s = Sum(self.dtype, self.const * c)
        if c:
            s.terms = {k: [v * c, a] for k, (v, a) in self.terms.items()}
        return s

    def mul(self, other: Sum) -> Sum:
        out = Sum(self.dtype, self.const * other.const)
        for c1, a1 in self.terms.values():
            out.add_mono(a1, c1 * other.const)
            for c2, a2 in other.terms.values():
                out.add_mono(a1 + a2, c1 * c2)
        if self.const:
            for c2, a2 in other.terms.values():
                out.add_mono(a2, c2 * self.const)
        return out

    # ---- queries -----------------------------------------------------------------------------
    def is_const(self) -> bool:
        return not self.terms

    def n_terms(self) -> int:
        return len(self.terms) + (1 if self.const else 0)

    def items(self):
        return self.terms.values()

    def coeff_gcd(self) -> int:
        g = 0
        for c, _ in self.terms.values():
            g = math.gcd(g, c)
        return g

    # ---- back to an expression ---------------------------------------------------------------
    def sorted_terms(self) -> list:
        def key(t):
            c, atoms = t
            return (c < 0, -len(atoms), -abs(c), [okey(a) for a in atoms])

        return sorted(self.terms.values(), key=key)

    def _wrapped(self) -> Sum:
        """This sum with its constant and coefficients wrapped to the dtype."""
        out = Sum(self.dtype, wrap_int(self.const, self.dtype))
        for c, atoms in self.terms.values():
            out.add_mono(atoms, wrap_int(c, self.dtype))
        return out

    def to_expr(self) -> E.PrimExpr:
        """The expression (constants and coefficients wrapped to the dtype: + - * are exact
        modulo 2**bits, so wrapping at the end equals wrapping every step)."""
        dtype = self.dtype
        if not _fits(self, dtype):
            return self._wrapped().to_expr()
        out: E.PrimExpr | None = None
        terms = self.sorted_terms()
        const_done = False
        if terms and terms[0][0] < 0:  # only subtracted terms: start from the constant
            out = E.IntImm(dtype, self.const)
            const_done = True
        for c, atoms in terms:
            mono = atoms[0]
            for a in atoms[1:]:
                mono = E.Mul(mono, a)
            if out is None:
                out = mono if c == 1 else E.Mul(mono, E.IntImm(dtype, c))
            elif c > 0 or wrap_int(-c, dtype) != -c:  # -INT_MIN does not fit: add INT_MIN
                out = E.Add(out, mono if c == 1 else E.Mul(mono, E.IntImm(dtype, c)))
            else:
                out = E.Sub(out, mono if c == -1 else E.Mul(mono, E.IntImm(dtype, -c)))
        if out is None:
            return E.IntImm(dtype, self.const)
        if const_done:
            return out
        if self.const > 0 or (self.const < 0 and wrap_int(-self.const, dtype) != -self.const):
            out = E.Add(out, E.IntImm(dtype, self.const))
        elif self.const < 0:
            out = E.Sub(out, E.IntImm(dtype, -self.const))
        return out


_SUM_CACHE: dict[int, tuple[Any, Sum]] = {}


def remember_sum(e: E.PrimExpr, s: Sum) -> None:
    """Record that ``e`` (built by ``s.to_expr()``) reads back as ``s``: saves re-parsing."""
    if len(_SUM_CACHE) > _CACHE_LIMIT:
        _SUM_CACHE.clear()
    _SUM_CACHE[id(e)] = (e, s.copy())


def _fits(s: Sum, dtype: str) -> bool:
    lo, hi = dtype_int_range(dtype)
    if not lo <= s.const <= hi:
        return False
    return all(lo <= c <= hi for c, _ in s.terms.values())


def fold_sum(e: E.PrimExpr, leaf: Callable[[E.PrimExpr], Sum | None],
             product: Callable[[E.Mul, Sum, Sum], Sum],
             done: Callable[[E.PrimExpr, Sum], Sum] | None = None) -> Sum:
    """The Sum of a chain of ``+ - *`` rooted at ``e``, evaluated children first with an explicit
    stack (an unrolled 10,000-term reduction is as deep as it is long). ``leaf(n)`` gives the
    Sum of a node not to be entered (None: enter it; it must then be an Add, Sub or Mul), and
    ``product(n, a, b)`` that of the Mul ``n`` of sums ``a`` and ``b``; ``done(n, s)``, if
    given, sees (and returns) the Sum of each node entered. Sums are combined in place:
    ``leaf`` and ``product`` return fresh ones."""
    todo: list[Any] = [e]  # a node to read, or (node,) once its two operands are on ``vals``
    vals: list[Sum] = []
    while todo:
        n = todo.pop()
        if type(n) is tuple:
            n = n[0]
            b = vals.pop()
            a = vals.pop()
            if isinstance(n, E.Add):
                s = a.iadd(b)
            elif isinstance(n, E.Sub):
                s = a.iadd(b, -1)
            else:
                s = product(n, a, b)
            vals.append(s if done is None else done(n, s))
            continue
        leaf_sum = leaf(n)
        if leaf_sum is not None:
            vals.append(leaf_sum)
        else:
            todo.append((n,))
            todo.append(n.b)
            todo.append(n.a)
    return vals[0]


def mul_sums(a: Sum, b: Sum, max_expand: int) -> Sum | None:
    """``a * b`` when one is constant or the expansion has at most ``max_expand`` terms."""
    if a.is_const():
        return b.scaled(a.const)
    if b.is_const():
        return a.scaled(b.const)
    if a.n_terms() * b.n_terms() <= max_expand:
        return a.mul(b)
    return None


def to_sum(e: E.PrimExpr, max_expand: int = 16, depth: int = 0) -> Sum:
    """Read an (already simplified) integer expression as a Sum. Products of two sums are
    expanded when that creates at most ``max_expand`` terms, else kept as one atom. ``depth``
    counts the nested calls: past ``CHAIN_DEPTH`` the chain below is read with ``fold_sum``."""
    hit = _SUM_CACHE.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1].copy()
    if isinstance(e, E.IntImm):
        return Sum(e.dtype, e.value)
    if not isinstance(e, (E.Add, E.Sub, E.Mul)):
        return Sum.atom(e)
    if depth >= CHAIN_DEPTH:
        return _fold_to_sum(e, max_expand)
    depth += 1
    a, b = to_sum(e.a, max_expand, depth), to_sum(e.b, max_expand, depth)
    if isinstance(e, E.Add):
        return a.iadd(b)
    if isinstance(e, E.Sub):
        return a.iadd(b, -1)
    if a.is_const():
        return b.scaled(a.const)
    if b.is_const():
        return a.scaled(b.const)
    if a.n_terms() * b.n_terms() <= max_expand:
        return a.mul(b)
    return Sum.atom(e)


def _fold_to_sum(e: E.PrimExpr, max_expand: int) -> Sum:
    def leaf(n: E.PrimExpr) -> Sum | None:
        if isinstance(n, (E.Add, E.Sub, E.Mul)):
            hit = _SUM_CACHE.get(id(n))
            return hit[1].copy() if hit is not None and hit[0] is n else None
        return to_sum(n)

    def product(n: E.Mul, a: Sum, b: Sum) -> Sum:
        p = mul_sums(a, b, max_expand)
        return Sum.atom(n) if p is None else p

    return fold_sum(e, leaf, product)


# ---- floordiv/floormod splits ----------------------------------------------------------------
def split_info(e: E.PrimExpr):
    """``(mode, inner, lower, upper)`` when ``e == div(mod(inner, upper), lower)`` with constant
    positive factors (mode 'floor' or 'trunc'; upper may be inf), else None."""
    if isinstance(e, (E.FloorDiv, E.Div)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        mode = "floor" if isinstance(e, E.FloorDiv) else "trunc"
        lower = e.b.value
        inner = e.a
        mod_cls = E.FloorMod if mode == "floor" else E.Mod
        if (
            isinstance(inner, mod_cls)
            and isinstance(inner.b, E.IntImm)
            and inner.b.value > 0
            and inner.b.value % lower == 0
        ):
            return mode, inner.a, lower, inner.b.value
        return mode, inner, lower, INF
    if isinstance(e, (E.FloorMod, E.Mod)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        mode = "floor" if isinstance(e, E.FloorMod) else "trunc"
        return mode, e.a, 1, e.b.value
    return None


def make_split(mode: str, inner: E.PrimExpr, lower: int, upper: float) -> E.PrimExpr:
    dtype = inner.dtype
    div_cls, mod_cls = (E.FloorDiv, E.FloorMod) if mode == "floor" else (E.Div, E.Mod)
    out = inner
    if upper != INF:
        out = mod_cls(out, E.IntImm(dtype, int(upper)))
    if lower != 1:
        out = div_cls(out, E.IntImm(dtype, lower))
    return out


_MERGE_TYPES = (E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max)


def merge_splits(s: Sum, reparse) -> bool:
    """Merge ``c*l1/l2 * split(x, l1, u) + c * split(x, l2, l1)`` into ``c * split(x, l2, u)``
    (and a full split ``split(x, 1, inf)`` into ``x`` itself, read back with ``reparse``).
    Mutates ``s``; returns whether anything changed."""
    if not any(len(a) == 1 and type(a[0]) in _MERGE_TYPES for _, a in s.terms.values()):
        return False
    changed = _merge_symbolic(s, reparse)
    changed |= _merge_minmax(s, reparse)
    changed |= _merge_sub_floordiv(s, reparse)
    changed |= _merge_congruent(s, reparse)
    groups: dict[tuple, list] = {}
    for k, (c, atoms) in s.terms.items():
        if len(atoms) != 1:
            continue
        info = split_info(atoms[0])
        if info is None:
            continue
        mode, inner, lo, up = info
        groups.setdefault((mode, skey(inner)), []).append((lo, up, c, k, inner))
    for (mode, _), items in groups.items():
        if len(items) < 2:
            continue
        merged = True
        while merged and len(items) >= 2:
            merged = False
            for i, (l1, u1, c1, k1, inner) in enumerate(items):
                for j, (l2, u2, c2, k2, _) in enumerate(items):
                    if i == j or u2 != l1 or l1 % l2 != 0 or c1 != c2 * (l1 // l2):
                        continue
                    # an earlier merge may have changed (or removed) these terms: the items'
                    # coefficients must still be the current ones
                    if s.terms.get(k1, (0,))[0] != c1 or s.terms.get(k2, (0,))[0] != c2:
                        continue
                    del s.terms[k1]
                    del s.terms[k2]
                    changed = merged = True
                    rest = [it for n, it in enumerate(items) if n not in (i, j)]
                    if l2 == 1 and u1 == INF:
                        s.iadd(reparse(inner), c2)
                    else:
                        new = make_split(mode, inner, l2, u1)
                        s.add_mono((new,), c2)
                        rest.append((l2, u1, c2, mono_key((new,)), inner))
                    items = rest
                    break
                if merged:
                    break
    return changed


_CONGRUENT_MAX_SPLITS = 24  # pairs are compared one by one: skip sums with more splits


def _merge_congruent(s: Sum, reparse) -> bool:
    """``c*l1/l2 * split(x, l1, u) + c * split(y, l2, l1)`` -> ``c * split(x, l2, u)`` for floor
    splits of *different* dividends with ``x == y (mod l1)``: the lower split only depends on
    its dividend modulo ``l1``. This is the shape left once ``floormod`` has reduced the
    coefficients of its dividend (``(16*o + i) // 13 * 13 + (3*o + i) % 13``) or an outer
    split has been taken out (``(o % 196 * 16 + i) // 56 * 56 + (o * 16 + i) % 56``)."""
    items = []
    for k, (c, atoms) in s.terms.items():
        if len(atoms) != 1:
            continue
        info = split_info(atoms[0])
        if info is not None and info[0] == "floor":
            items.append((info[2], info[3], c, k, info[1]))
    if len(items) < 2 or len(items) > _CONGRUENT_MAX_SPLITS:
        return False
    changed = False
    for l1, u1, c1, k1, x in items:
        for l2, u2, c2, k2, y in items:
            if k1 == k2 or u2 != l1 or l1 % l2 or c1 != c2 * (l1 // l2):
                continue
            if skey(x) == skey(y):
                continue
            if s.terms.get(k1, (0,))[0] != c1 or s.terms.get(k2, (0,))[0] != c2:
                continue  # changed by an earlier merge
            if not congruent(to_sum(x), to_sum(y), int(l1)):
                continue
            del s.terms[k1]
            del s.terms[k2]
            if l2 == 1 and u1 == INF:
                s.iadd(reparse(x), c2)
            else:
                s.add_mono((make_split("floor", x, l2, u1),), c2)
            changed = True
            break
    return changed


def congruent(a: Sum, b: Sum, c: int, depth: int = 4) -> bool:
    """Is ``a == b (mod c)`` for every value of the variables (``c > 0``)? Terms whose
    coefficient ``c`` divides vanish, and ``k * floormod(x, m)`` counts as ``k * x`` when ``c``
    divides ``k * m`` (the two differ by ``k * m * floordiv(x, m)``)."""
    d = a.copy().iadd(b, -1)
    for _ in range(depth + 1):
        rest = Sum(d.dtype, d.const % c)
        expanded = False
        for coeff, atoms in d.items():
            coeff %= c
            if not coeff:
                continue
            m = atoms[0]
            if (
                len(atoms) == 1
                and isinstance(m, E.FloorMod)
                and isinstance(m.b, E.IntImm)
                and m.b.value > 0
                and coeff * m.b.value % c == 0
            ):
                rest.iadd(to_sum(m.a), coeff)
                expanded = True
            else:
                rest.add_mono(atoms, coeff)
        d = rest
        if not expanded:
            break
    return d.const % c == 0 and all(coeff % c == 0 for coeff, _ in d.items())


def _merge_symbolic(s: Sum, reparse) -> bool:
    """``c * floordiv(x, d) * d + c * floormod(x, d)`` -> ``c * x`` for a non-constant atom ``d``
    (and the truncating pair alike)."""
    changed = False
    for k, (c, atoms) in list(s.terms.items()):
        if len(atoms) != 1 or k not in s.terms:
            continue
        m = atoms[0]
        if not isinstance(m, (E.FloorMod, E.Mod)) or isinstance(m.b, E.IntImm):
            continue
        div_cls = E.FloorDiv if isinstance(m, E.FloorMod) else E.Div
        d_atoms = to_sum(m.b)
        if d_atoms.const or len(d_atoms.terms) != 1:
            continue
        ((dc, datoms),) = d_atoms.terms.values()
        if dc != 1:
            continue
        div_atom = div_cls(m.a, m.b)
        pair = (div_atom,) + tuple(datoms)
        if s.coeff_of(pair) != c:
            continue
        s.add_mono(pair, -c)
        s.add_mono((m,), -c)
        s.iadd(reparse(m.a), c)
        changed = True
    return changed


def _merge_minmax(s: Sum, reparse) -> bool:
    """``c * min(a, b) + c * max(a, b)`` -> ``c * (a + b)``."""
    mins = {}
    for k, (c, atoms) in s.terms.items():
        if len(atoms) == 1 and isinstance(atoms[0], E.Min):
            m = atoms[0]
            mins[frozenset((skey(m.a), skey(m.b)))] = (k, c, m)
    if not mins:
        return False
    changed = False
    for k, (c, atoms) in list(s.terms.items()):
        if len(atoms) != 1 or not isinstance(atoms[0], E.Max) or k not in s.terms:
            continue
        mx = atoms[0]
        hit = mins.get(frozenset((skey(mx.a), skey(mx.b))))
        # an earlier merge may have changed these terms: compare the current coefficients
        if hit is None or s.terms[k][0] != c or s.terms.get(hit[0], (0,))[0] != c:
            continue
        del s.terms[k]
        del s.terms[hit[0]]
        s.iadd(reparse(mx.a), c)
        s.iadd(reparse(mx.b), c)
        changed = True
    return changed


def _merge_sub_floordiv(s: Sum, reparse) -> bool:
    """``c * x - c * k * floordiv(x, k)`` -> ``c * floormod(x, k)`` when every term of ``c * x``
    appears in the sum (so the rewrite removes terms)."""
    changed = False
    for k, (coeff, atoms) in list(s.terms.items()):
        if len(atoms) != 1 or k not in s.terms:
            continue
        info = split_info(atoms[0])
        if info is None:
            continue
        mode, inner, lo, up = info
        if up != INF or lo == 1 or coeff % lo != 0:
            continue
        c = -coeff // lo
        xs = reparse(inner)
        if not xs.terms or any(s.coeff_of(a) != c * ca for ca, a in xs.items()):
            continue
        del s.terms[k]
        s.iadd(xs, -c)
        s.add_mono((make_split(mode, inner, 1, lo),), c)
        changed = True
    return changed
