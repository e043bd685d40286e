"""SkipPaddedTaps: accumulations of a padded read (``acc + if_then_else(c, a, 0) * w``) skipped
where the read is padding, the shared conditions hoisted out of the loops they do not depend
on, constant-zero taps deleted; values unchanged (for finite weights), against the interpreter
and, through te schedules of padded convolutions, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tir_pass_helpers import assert_same, expect, func, loop

import tvmpy as tvm
from tvmpy import te, tir, topi
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.functor import post_order_visit
from tvmpy.tir.op import if_then_else
from tvmpy.tir.transform import skip_padded_taps_func


def _bufs(n_in=20, n_w=48):
    A = tir.decl_buffer((n_in,), "float32", "A")
    W = tir.decl_buffer((n_w,), "float32", "W")
    C = tir.decl_buffer((4,), "float32", "C")
    return A, W, C


def _acc(C, idx, x, w):
    return S.BufferStore(C, C[idx] + x * w, [idx])


def test_row_condition_hoisted_column_condition_kept_zero_tap_deleted():
    """The docstring's example: the row test (shared by every tap of the (ici) loop, invariant
    in it) goes above the loop; the first tap's column test stays in its select; the tap of a
    constant zero is gone."""
    A, W, C = _bufs()
    y, x = tir.Var("y", "int32"), tir.Var("x", "int32")
    ry, ici = tir.Var("ry", "int32"), tir.Var("ici", "int32")
    row = y + ry >= 1
    body = S.seq(
        _acc(C, 0, if_then_else(tir.all(row, x >= 1), A[ry * 4 + ici], tir.const(0.0, "float32")),
             W[ry * 16 + ici]),
        _acc(C, 1, if_then_else(row, A[ry * 4 + ici + 1], tir.const(0.0, "float32")),
             W[ry * 16 + ici + 4]),
        _acc(C, 2, tir.const(0.0, "float32"), W[ry * 16 + ici + 8]))
    f = func([A, W, C, y, x], loop(ry, 3, loop(ici, 4, body)))
    g = skip_padded_taps_func(f)
    expect(g, """
        for ry in range(0, 3):
            if y + ry >= 1:
                for ici in range(0, 4):
                    C[0] = C[0] + if_then_else(x >= 1, A[ry * 4 + ici], 0.0f) * W[ry * 16 + ici]
                    C[1] = C[1] + A[ry * 4 + ici + 1] * W[ry * 16 + ici + 4]
    """)
    for yy in (0, 1):
        for xx in (0, 1):
            assert_same(f, g, {"y": yy, "x": xx})


def test_condition_of_the_loop_var_stays_inside_and_reversed_operands():
    """A test on the loop's own variable is not hoisted out of it (nor made a branch in its
    body: an ``if`` only wraps loops); operands in either order
    (``w * x``, ``x * w + acc``) and a broadcast / cast padded read are recognized."""
    A, W, C = _bufs()
    y, i = tir.Var("y", "int32"), tir.Var("i", "int32")
    zero = tir.const(0.0, "float32")
    body = S.seq(
        S.BufferStore(C, W[i] * if_then_else(tir.all(i >= y, y >= 2), A[i], zero) + C[0], [0]),
        S.BufferStore(C, C[1] + tir.Cast("float32", if_then_else(tir.all(y >= 2, i >= y), A[i],
                                                                 zero)) * W[i + 8], [1]))
    f = func([A, W, C, y], loop(i, 6, body))
    g = skip_padded_taps_func(f)
    # the test of y alone is above the loop; the one of i stays in both selects
    assert isinstance(g.body, S.IfThenElse) and isinstance(g.body.then_case, S.For)
    assert str(g.body.condition) == "y >= 2" and str(g).count("i >= y") == 2
    for yy in range(5):
        assert_same(f, g, {"y": yy})


@pytest.mark.parametrize("case", ["nonzero_else", "other_index", "reads_memory", "not_shared",
                                  "plain_store", "extern_call"])
def test_not_a_tap_or_not_shared_is_left_alone(case):
    A, W, C = _bufs()
    y, i = tir.Var("y", "int32"), tir.Var("i", "int32")
    zero = tir.const(0.0, "float32")
    pad = if_then_else(y >= 1, A[i], zero)
    if case == "nonzero_else":  # padding with 1: skipping would change the sum
        st_ = _acc(C, 0, if_then_else(y >= 1, A[i], tir.const(1.0, "float32")), W[i])
    elif case == "other_index":  # C[1] = C[0] + ...: no accumulation
        st_ = S.BufferStore(C, C[0] + pad * W[i], [1])
    elif case == "reads_memory":  # the condition reads a buffer
        st_ = _acc(C, 0, if_then_else(A[0] > 0.5, A[i], zero), W[i])
    elif case == "not_shared":  # a tap and a plain store share no condition
        st_ = S.seq(_acc(C, 0, pad, W[i]), S.BufferStore(C, W[i], [1]))
    elif case == "extern_call":  # skipping the tap would skip a call with a side effect
        st_ = _acc(C, 0, pad, E.Call("float32", "call_extern", [E.StringImm("f"), W[i]]))
    else:
        st_ = S.BufferStore(C, pad * W[i], [0])
    f = func([A, W, C, y], loop(i, 5, st_))
    g = skip_padded_taps_func(f)
    assert g is f or str(g) == str(f)


def test_existing_if_and_prefetch_do_not_block_the_hoist():
    """A prefetch in the loop body does not stop the shared test from leaving the loop (it is
    skipped with the taps), and it is kept; an enclosing ``if`` of the same test is not
    repeated."""
    A, W, C = _bufs()
    y, i = tir.Var("y", "int32"), tir.Var("i", "int32")
    zero = tir.const(0.0, "float32")
    pf = S.Evaluate(E.Call("int32", "prefetch", [E.Call("handle", "address_of", [W[i]]),
                                                 0, 3, 1]))
    tap = _acc(C, 0, if_then_else(y >= 1, A[i], zero), W[i])
    f = func([A, W, C, y], loop(i, 5, S.seq(pf, tap)))
    g = skip_padded_taps_func(f)
    assert isinstance(g.body, S.IfThenElse) and "prefetch" in str(g)
    f2 = func([A, W, C, y], S.IfThenElse(y >= 1, loop(i, 5, tap)))
    g2 = skip_padded_taps_func(f2)
    assert str(g2).count("if ") == 1 and "if_then_else" not in str(g2)
    for yy in (0, 1, 2):
        assert_same(f2, g2, {"y": yy})


def _conv1d(n, c, k, pad_l, pad_r, dil, stride, inner, unroll_k, vec):
    """A padded, dilated 1-D convolution with the padding inlined, scheduled with an output
    tile of ``inner`` columns (unrolled) and the output lanes vectorized when ``vec``."""
    lanes = 4
    A = te.placeholder((c, n), name="A")
    Wt = te.placeholder((c, k, lanes), name="W")
    P = topi.nn.pad(A, [0, pad_l], [0, pad_r], name="P")
    ow = (n + pad_l + pad_r - (k - 1) * dil - 1) // stride + 1
    rc = te.reduce_axis((0, c), name="rc")
    rk = te.reduce_axis((0, k), name="rk")
    out = te.compute((ow, lanes), lambda x, o: te.sum(P[rc, x * stride + rk * dil]
                                                       * Wt[rc, rk, o], axis=[rc, rk]),
                     name="out")
    s = te.create_schedule(out.op)
    s[P].compute_inline()
    x, o = s[out].op.axis
    xo, xi = s[out].split(x, factor=inner)
    s[out].reorder(xo, rc, rk, xi, o)
    if unroll_k:
        s[out].unroll(rk)
    s[out].unroll(xi)
    if vec:
        s[out].vectorize(o)
    return s, A, Wt, out, ow


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(n=st.integers(1, 13), c=st.integers(1, 3), k=st.integers(1, 4),
       pad_l=st.integers(0, 6), pad_r=st.integers(0, 6), dil=st.integers(1, 5),
       stride=st.integers(1, 3), inner=st.integers(1, 5), unroll_k=st.booleans(),
       vec=st.booleans())
def test_padded_conv1d_random_schedules(n, c, k, pad_l, pad_r, dil, stride, inner, unroll_k,
                                        vec):
    """Random padded 1-D convolutions (padding up to larger than the window's reach, dilation
    larger than the input, size-1 inputs, prime sizes) through the whole pipeline with and
    without the pass, against numpy."""
    if n + pad_l + pad_r < (k - 1) * dil + 1:
        return
    s, A, Wt, out, ow = _conv1d(n, c, k, pad_l, pad_r, dil, stride, inner, unroll_k, vec)
    rng = np.random.default_rng(n * 1000 + k * 100 + dil)
    a = rng.uniform(-1, 1, (c, n)).astype("float32")
    w = rng.uniform(-1, 1, (c, k, 4)).astype("float32")
    ap = np.pad(a, ((0, 0), (pad_l, pad_r)))
    want = np.zeros((ow, 4), "float32")
    for x in range(ow):
        for j in range(k):
            want[x] += ap[:, x * stride + j * dil] @ w[:, j, :]
    for disabled in ([], ["SkipPaddedTaps"]):
        with tvm.transform.PassContext(disabled_pass=disabled):
            f = tvm.build(s, [A, Wt, out], "llvm")
        res = tvm.nd.array(np.full((ow, 4), np.nan, "float32"))
        f(tvm.nd.array(a), tvm.nd.array(w), res)
        np.testing.assert_allclose(res.numpy(), want, rtol=1e-5, atol=1e-5)


def test_conv1d_ir_skips_padding_rows_and_zero_taps():
    """The lowered 1-D convolution: no constant-zero multiply left, and the padded read's test
    that the whole tile shares (none here: the columns differ) stays in the selects, while a
    2-D one's row test becomes an ``if`` above the input-channel loop."""
    s, A, Wt, out, _ = _conv1d(11, 3, 3, 2, 2, 2, 1, 4, True, True)
    text = str(tvm.lower(s, [A, Wt, out]))
    assert "broadcast(0.0f, 4) *" not in text and "0.0f *" not in text
    # 2-D: rows padded, the row test above the channel loop
    Ai = te.placeholder((1, 2, 5, 6, 4), name="A")
    Wi = te.placeholder((1, 2, 3, 3, 4, 8), name="W")
    conv = topi.nn.conv2d_NCHWc(Ai, Wi, 1, 1, 1, "NCHW4c", "NCHW8c")
    with tvm.target.Target("llvm"):
        sch = topi.x86.schedule_conv2d_NCHWc([conv])
    low = tvm.lower(sch, [Ai, Wi, conv])
    ifs = []

    def visit(n):
        if isinstance(n, S.IfThenElse):
            ifs.append(n)

    post_order_visit(low.body, visit)
    # an if around a loop over the input lanes, its condition the row test only
    assert any(isinstance(i.then_case, (S.For, S.SeqStmt)) and "ry" in str(i.condition)
               for i in ifs)
    assert "broadcast(0.0f, 8) *" not in str(low)
