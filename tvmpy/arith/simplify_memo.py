"""A process-wide memo of the simplifier's results on scalar integer expressions.

Lowered kernels repeat the same index arithmetic over and over: a fused chain of injective
stages computed into buffers has one loop nest per stage, each over a loop variable of the same
name and range and with the same index expressions (a 200-stage channel-shuffle chain: 15 stages
per kernel, 9 kernels of one shape), and the tir pipeline simplifies every kernel three times.
The simplifier's own memo is keyed by object identity and is dropped whenever a variable is
bound (each loop), so all of it was recomputed from scratch: ~45% of that chain's build.

Here an expression's result is remembered under a key made of the expression's structure, with
variables by *name* (and dtype and kind), and of everything the analyzer knows at that point
(bindings, ranges, constant bounds, modular sets, constraint facts) written the same way. The
simplifier reads nothing else, and it orders terms by printed names (not identities), so equal
keys give equal results up to the identity of the variables, which a hit maps back to the
variables of the asking expression. Not memoised (the simplifier runs as before): expressions or
states where two distinct variables share a name (the key would not tell them apart), and
expressions with nodes outside the scalar index vocabulary (loads, lets, vectors ...).

The table is cleared with :func:`.sum_form.clear_caches` (the end of each compilation) and
when it grows past ``_LIMIT`` entries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..ir import dtype as dt
from ..tir import expr as E
from . import sum_form

if TYPE_CHECKING:  # pragma: no cover
    from .analyzer import _State

__all__ = ["candidate", "lookup_key", "get", "put", "clear", "disabled"]

_LIMIT = 100_000
_MAX_DEPTH = 64  # deeper expressions (long unrolled chains) are not memoised

# id(node) -> (node, key, vars): key None when the node cannot be memoised; vars: the distinct
# variables of the node (a tuple; None when two of them share a name)
_NKEY: dict[int, tuple[Any, Any, tuple | None]] = {}
# (expression key, state key) -> (result, {name: variable} of the expression and state)
_MEMO: dict[tuple, tuple[E.PrimExpr, dict[str, E.Var]]] = {}
_KIND: dict[str, int] = {}

_BINARY = (E.BinaryOp,)
_NONE = (None, None)


_enabled = True


def clear() -> None:
    _NKEY.clear()
    _MEMO.clear()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block the simplifier computes everything afresh (tests compare both ways)."""
    global _enabled
    saved, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = saved


sum_form.CLEAR_HOOKS.append(clear)


def candidate(e: E.PrimExpr) -> int:
    """2 for a scalar integer (or boolean) expression that is not a leaf, 1 for another
    non-leaf expression (float, vector), 0 for leaves."""
    if not _enabled or isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
        return 0
    kind = _KIND.get(e.dtype)
    if kind is None:
        d = dt.parse(e.dtype)
        kind = _KIND[e.dtype] = (
            0 if d.kind == "handle" else 2 if d.lanes == 1 and d.kind in ("int", "uint", "bool")
            else 1)
    return kind


def _merge(a: tuple | None, b: tuple | None) -> tuple | None:
    """The variables of both (by identity), or None when two distinct ones share a name."""
    if a is None or b is None:
        return None
    if not b:
        return a
    if not a:
        return b
    if len(a) == 1 and len(b) == 1:  # the common case: compared by identity, not ``==``
        x, y = a[0], b[0]
        if x is y:
            return a
        return None if x.name == y.name else (x, y)
    out = list(a)
    names = {v.name: v for v in a}
    for v in b:
        w = names.get(v.name)
        if w is None:
            names[v.name] = v
            out.append(v)
        elif w is not v:
            return None
    return tuple(out)


def nkey(e: Any, depth: int = 0) -> tuple[Any, tuple | None]:
    """(key, variables) of ``e``: the key is structural with variables by name (None: not
    memoisable); memoised by identity."""
    hit = _NKEY.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1], hit[2]
    if depth > _MAX_DEPTH:
        return _NONE
    k, vs = _nkey(e, depth + 1)
    if k is None:
        vs = None
    if len(_NKEY) > _LIMIT:
        _NKEY.clear()
    _NKEY[id(e)] = (e, k, vs)
    return k, vs


def _nkey(e: Any, depth: int) -> tuple[Any, tuple | None]:
    if isinstance(e, E.Var):
        return ("V", e.name, e.dtype, type(e).__name__), (e,)
    if isinstance(e, E.IntImm):
        return ("I", e.dtype, e.value), ()
    if isinstance(e, E.FloatImm):
        return ("F", e.dtype, repr(e.value)), ()
    if isinstance(e, _BINARY):
        ka, va = nkey(e.a, depth)
        kb, vb = nkey(e.b, depth)
        if ka is None or kb is None:
            return _NONE
        return (type(e).__name__, e.dtype, ka, kb), _merge(va, vb)
    if isinstance(e, E.Not):
        ka, va = nkey(e.a, depth)
        return (None, None) if ka is None else (("Not", ka), va)
    if isinstance(e, E.Cast):
        ka, va = nkey(e.value, depth)
        return (None, None) if ka is None else (("Cast", e.dtype, ka), va)
    if isinstance(e, E.Select):
        parts = [nkey(x, depth) for x in (e.condition, e.true_value, e.false_value)]
        return _compound(("Sel", e.dtype), parts)
    if isinstance(e, E.Call) and e.op != "call_extern":
        parts = [nkey(x, depth) for x in e.args]
        return _compound(("Call", str(e.op), e.dtype), parts)
    if isinstance(e, E.BufferLoad):  # buffers by name (the simplifier only tells them apart)
        b = e.buffer
        parts = [nkey(x, depth) for x in e.indices]
        if e.predicate is not None:
            parts.append(nkey(e.predicate, depth))
        k, vs = _compound(("Load", b.name, b.dtype, e.predicate is None), parts)
        return (None, None) if k is None else (k, _merge(vs, (b,)))
    if isinstance(e, E.Ramp):
        return _compound(("Ramp", e.dtype, e.lanes), [nkey(e.base, depth), nkey(e.stride, depth)])
    if isinstance(e, E.Broadcast):
        return _compound(("Bcast", e.dtype, e.lanes), [nkey(e.value, depth)])
    if isinstance(e, E.Let):
        parts = [nkey(x, depth) for x in (e.var, e.value, e.body)]
        return _compound(("Let", e.dtype), parts)
    if isinstance(e, E.StringImm):
        return ("S", e.value), ()
    return _NONE


def _compound(head: tuple, parts: list) -> tuple[Any, tuple | None]:
    vs: tuple | None = ()
    for k, v in parts:
        if k is None:
            return _NONE
        vs = _merge(vs, v)
    return (*head, *(k for k, _ in parts)), vs


def _sum_key(s: Any) -> tuple[Any, tuple | None]:
    vs: tuple | None = ()
    terms = []
    for c, atoms in s.terms.values():
        ks = []
        for a in atoms:
            k, v = nkey(a)
            if k is None:
                return _NONE
            ks.append(k)
            vs = _merge(vs, v)
        terms.append((c, tuple(ks)))
    return ("Sum", s.dtype, s.const, tuple(terms)), vs


def state_key(st: _State) -> tuple[Any, tuple | None]:
    """(key, variables) of what an analyzer state knows; memoised on the state until it
    changes (``_State.invalidate``)."""
    if st.memo_key is not None:
        return st.memo_key
    parts: list[Any] = []
    vs: tuple | None = ()

    def add(tag: str, v: E.Var, *rest: Any) -> None:
        nonlocal vs
        keys = []
        for x in rest:
            k, xv = nkey(x) if isinstance(x, E.PrimExpr) else (x, ())
            if k is None:
                vs = None
                return
            keys.append(k)
            vs = _merge(vs, xv)
        vk, vv = nkey(v)
        vs = _merge(vs, vv)
        parts.append((tag, vk, *keys))

    for v, val in st.var_value.items():
        add("val", v, val)
    for v, (lo, hi) in st.var_range.items():
        add("rng", v, lo, hi)
    for v, b in st.var_bound.items():
        add("bnd", v, b)
    for v, m in st.var_mod.items():
        add("mod", v, (m.coeff, m.base))
    for v, fs in st.range_facts.items():
        for f in fs:
            k, fv = _sum_key(f)
            vs = _merge(vs, fv) if k is not None else None
            add("rfact", v, k)
    for f in st.facts:
        k, fv = _sum_key(f)
        if k is None:
            vs = None
        vs = _merge(vs, fv)
        parts.append(("fact", k))
    st.memo_key = (tuple(parts), vs) if vs is not None else _NONE
    return st.memo_key


def lookup_key(e: E.PrimExpr, st: _State) -> tuple[tuple, tuple] | None:
    """The memo key of simplifying ``e`` in state ``st`` and the variables it names, or None."""
    ek, ev = nkey(e)
    if ek is None:
        return None
    sk, sv = state_key(st)
    if sk is None:
        return None
    vs = _merge(ev, sv)
    if vs is None:
        return None
    return (ek, sk), vs


def get(key: tuple, vs: tuple) -> E.PrimExpr | None:
    """The remembered result, over the variables ``vs`` of the asking expression and state."""
    hit = _MEMO.get(key)
    if hit is None:
        return None
    out, names = hit
    vmap = {}
    for v in vs:
        w = names[v.name]
        if w is not v:
            vmap[id(w)] = v
    return _subst(out, vmap, {}) if vmap else out


_setattr = object.__setattr__


def _subst(e: Any, vmap: dict, memo: dict) -> Any:
    """``e`` with variables and buffers replaced (``vmap`` by id; only the node kinds
    :func:`nkey` accepts occur)."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    if isinstance(e, E.Var):
        out = vmap.get(id(e), e)
    elif isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
        out = e
    elif isinstance(e, E.BinaryOp):
        a, b = _subst(e.a, vmap, memo), _subst(e.b, vmap, memo)
        if a is e.a and b is e.b:
            out = e
        else:
            out = object.__new__(type(e))
            _setattr(out, "dtype", e.dtype)
            _setattr(out, "a", a)
            _setattr(out, "b", b)
    else:
        fields = {}
        for f in type(e)._fields:
            x = getattr(e, f)
            if isinstance(x, tuple):
                y: Any = tuple(_subst(z, vmap, memo) for z in x)
                if all(p is q for p, q in zip(x, y)):
                    y = x
            else:
                y = x if x is None else _subst(x, vmap, memo)
            if y is not x:
                fields[f] = y
        if isinstance(e, E.BufferLoad):
            nb = vmap.get(id(e.buffer))
            if nb is not None:
                fields["buffer"] = nb
        elif isinstance(e, E.Let):
            nv = vmap.get(id(e.var))
            if nv is not None:
                fields["var"] = nv
        out = e.replace(**fields) if fields else e
    memo[id(e)] = out
    return out


def put(key: tuple, vs: tuple, out: E.PrimExpr) -> None:
    """Remember ``out`` (unless it names a variable the expression and state do not)."""
    _, ov = nkey(out)
    if ov is None:
        return
    names = {v.name: v for v in vs}
    for v in ov:
        if names.get(v.name) is not v:
            return
    if len(_MEMO) > _LIMIT:
        _MEMO.clear()
    _MEMO[key] = (out, names)
