"""Shared pass helpers (fresh copies, linear forms) and the lowered-form verifier."""

from __future__ import annotations

import pytest
from tir_pass_helpers import func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.analysis import lowered_errors, verify_lowered, verify_single_definition
from tvmpy.tir.stmt import ForKind
from tvmpy.tir.transform.common import fresh_copy, linear_form


def test_fresh_copy_renames_definitions_and_buffers():
    A = tir.decl_buffer((4,), "float32", "A")
    T = tir.decl_buffer((4,), "float32", "T", scope="local")
    i, x = E.Var("i"), E.Var("x")
    s = tir.Allocate(T, loop(i, 4, tir.BufferStore(T, A[i] + E.cast(x, "float32"), [i])))
    c = fresh_copy(s, {x: E.const(3)})
    assert c.buffer.data is not T.data and c.body.loop_var is not i
    assert c.body.body.buffer is c.buffer  # accesses follow the renamed allocation
    assert "3" in str(c) and "x" not in str(c)
    verify_single_definition(func([A], tir.seq(s, c)))


@pytest.mark.parametrize("make,coeff", [
    (lambda x, y: x * 3 + y - 2, 3),
    (lambda x, y: (x + y) * 4 - x, 3),
    (lambda x, y: y - x * 2, -2),
    (lambda x, y: y + 5, 0),
])
def test_linear_form(make, coeff):
    x, y = E.Var("x"), E.Var("y")
    c, rest = linear_form(make(x, y), x)
    assert c == coeff
    assert "x" not in str(rest)


def test_linear_form_rejects_nonlinear():
    x, y = E.Var("x"), E.Var("y")
    assert linear_form(x * y, x) is None
    assert linear_form(x // 2, x) is None


def test_verify_lowered_reports_problems():
    A = tir.decl_buffer((4, 4), "float32", "A")
    i = E.Var("i")
    f = func([A], loop(i, 4, tir.BufferStore(A, 1.0, [i, i]), ForKind.VECTORIZED))
    errs = lowered_errors(f)
    assert any("2-d" in e for e in errs) and any("vectorized loop" in e for e in errs)
    with pytest.raises(ValueError, match="not in lowered form"):
        verify_lowered(f)


def test_verify_single_definition():
    A = tir.decl_buffer((4,), "float32", "A")
    i = E.Var("i")
    st = loop(i, 4, tir.BufferStore(A, 1.0, [i]))
    with pytest.raises(ValueError, match="defined more than once"):
        verify_single_definition(func([A], tir.seq(st, st)))
