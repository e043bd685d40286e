"""Composite shape expressions: the runtime evaluates the text abi.signature prints for them
exactly as the IR means it (floor/trunc division and modulo, min/max, casts)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmpy import te
from tvmpy.runtime.function import _truncdiv, _truncmod, compile_dim_expr
from tvmpy.tir import op

N, M = te.var("n"), te.var("m")


def _tree(draw, depth):
    """(PrimExpr, python function of env) pairs."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["n", "m", "c"]))
        if kind == "c":
            c = draw(st.integers(-9, 9))
            return c, (lambda env, c=c: c)
        v = N if kind == "n" else M
        return v, (lambda env, k=kind: env[k])
    a, fa = _tree(draw, depth - 1)
    which = draw(st.sampled_from(["+", "-", "*", "fdiv", "fmod", "tdiv", "tmod", "min", "max"]))
    if which in ("fdiv", "fmod", "tdiv", "tmod"):
        d = draw(st.integers(1, 7)) * draw(st.sampled_from([1, -1]))
        fn = {"fdiv": (op.floordiv, lambda x: x // d), "fmod": (op.floormod, lambda x: x % d),
              "tdiv": (op.truncdiv, lambda x: _truncdiv(x, d)),
              "tmod": (op.truncmod, lambda x: _truncmod(x, d))}[which]
        return fn[0](a, d), (lambda env, f=fn[1], fa=fa: f(fa(env)))
    b, fb = _tree(draw, depth - 1)
    if which == "min":
        return op.min(a, b), (lambda env: min(fa(env), fb(env)))
    if which == "max":
        return op.max(a, b), (lambda env: max(fa(env), fb(env)))
    py = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[which]
    e = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[which]()
    return e, (lambda env: py(fa(env), fb(env)))


@st.composite
def exprs(draw):
    return _tree(draw, 3)


@settings(max_examples=300, deadline=None)
@given(exprs(), st.integers(0, 50), st.integers(0, 50))
def test_printed_expressions_evaluate_like_the_ir(pair, n, m):
    e, ref = pair
    text = str(e)
    fn, _names = compile_dim_expr(text)
    assert fn({"n": n, "m": m}) == ref({"n": n, "m": m}), text


@pytest.mark.parametrize("text", ["n ** 2", "n if m else 1", "open('x')", "n.real", "n +"])
def test_rejects_anything_else(text):
    with pytest.raises(ValueError, match="cannot evaluate shape expression"):
        compile_dim_expr(text)


def test_truncating_helpers():
    assert [_truncdiv(a, b) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2)]] == [3, -3, -3, 3]
    assert [_truncmod(a, b) for a, b in [(7, 2), (-7, 2), (7, -2), (-7, -2)]] == [1, -1, 1, -1]
