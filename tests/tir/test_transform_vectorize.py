"""vectorize_loop_func: ramps and broadcasts, strided access, and scalarization when it must."""

from __future__ import annotations

import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import tir
from tvmpy.tir import expr as E
from tvmpy.tir.analysis import lowered_errors
from tvmpy.tir.stmt import ForKind
from tvmpy.tir.transform import vectorize_loop_func

V = ForKind.VECTORIZED


def _bufs(*specs):
    return [tir.decl_buffer((n,), dtype, name) for name, n, dtype in specs]


def _vec(body_fn, n=8, lanes=8, extra=(), dtype="float32"):
    A, B = _bufs(("A", n * 2 + 8, dtype), ("B", n * 2 + 8, dtype))
    i = E.Var("i")
    f = func([A, B, *extra], loop(i, lanes, body_fn(A, B, i), V))
    return f, vectorize_loop_func(f)


def test_contiguous():
    f, g = _vec(lambda A, B, i: tir.BufferStore(B, A[i] * 2.0 + 1.0, [i]))
    expect(g, "B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] * broadcast(2.0f, 8) + broadcast(1.0f, 8)")
    assert not lowered_errors(g)
    assert_same(f, g)


def test_strided_and_offset():
    f, g = _vec(lambda A, B, i: tir.BufferStore(B, A[i * 2 + 1], [i + 3]))
    expect(g, "B[ramp(3, 1, 8)] = A[ramp(1, 2, 8)]")
    assert_same(f, g)


def test_broadcast_invariant_load_and_nonzero_min():
    A, B = _bufs(("A", 20, "float32"), ("B", 20, "float32"))
    i = E.Var("i")
    f = func([A, B], loop(i, 4, tir.BufferStore(B, A[i] + A[0], [i]), V, lo=5))
    g = vectorize_loop_func(f)
    expect(g, "B[ramp(5, 1, 4)] = A[ramp(5, 1, 4)] + broadcast(A[0], 4)")
    assert_same(f, g)


def test_int_and_intrinsics_and_select():
    A, B = _bufs(("A", 16, "float32"), ("B", 16, "float32"))
    i = E.Var("i")
    val = tir.Select(i < 3, tir.exp(A[i]), tir.sqrt(A[i]) + E.cast(i, "float32"))
    f = func([A, B], loop(i, 8, tir.BufferStore(B, val, [i]), V))
    g = vectorize_loop_func(f)
    s = str(g)
    assert "exp(A[ramp(0, 1, 8)])" in s and "select(ramp(0, 1, 8) < broadcast(3, 8)" in s
    assert not lowered_errors(g)
    assert_same(f, g, rtol=1e-5)


def test_inner_loop_is_interchanged():
    # C[i] += A[k] * B[k, i]: i vectorized outside the reduction loop k
    A = tir.decl_buffer((5,), "float32", "A")
    Bm = tir.decl_buffer((40,), "float32", "B")
    C = tir.decl_buffer((8,), "float32", "C")
    i, k = E.Var("i"), E.Var("k")
    body = loop(i, 8, loop(k, 5, tir.BufferStore(C, C[i] + A[k] * Bm[k * 8 + i], [i])), V)
    f = func([A, Bm, C], body)
    g = vectorize_loop_func(f)
    expect(g, """
        for k in range(0, 5):
            C[ramp(0, 1, 8)] = C[ramp(0, 1, 8)] + broadcast(A[k], 8) * B[ramp(k * 8, 1, 8)]
    """)
    assert_same(f, g, rtol=1e-5)


def _is_serial_loop(g):
    return isinstance(g.body, tir.For) and g.body.kind == ForKind.SERIAL


@pytest.mark.parametrize("case", ["floordiv_store", "extern_call", "reduction_same_address",
                                  "if_reads_memory", "scalar_load_in_branch", "dependence",
                                  "alloc_inside"])
def test_scalarized(case):
    A, B = _bufs(("A", 32, "float32"), ("B", 32, "float32"))
    i = E.Var("i")
    if case == "floordiv_store":  # lanes 2k and 2k + 1 store to one element
        body = tir.BufferStore(B, A[i], [i // 2])
    elif case == "extern_call":
        body = tir.Evaluate(tir.call_extern("int32", "some_fn", i))
    elif case == "reduction_same_address":
        body = tir.BufferStore(B, B[0] + A[i], [0])
    elif case == "if_reads_memory":
        body = tir.IfThenElse(A[i] > 1.0, tir.BufferStore(A, A[i] * 2.0, [i]),
                              tir.BufferStore(A, A[i] * 3.0, [i]))
    elif case == "scalar_load_in_branch":
        body = tir.BufferStore(B, tir.if_then_else(i >= 1, A[3], 0.0), [i])
    elif case == "dependence":
        body = tir.seq(tir.BufferStore(B, A[i], [i]), tir.BufferStore(A, B[i + 1], [i]))
    else:
        T = tir.decl_buffer((1,), "float32", "T", scope="local")
        body = tir.Allocate(T, tir.seq(tir.BufferStore(T, A[i], [0]),
                                       tir.BufferStore(B, T[0], [i])))
    f = func([A, B], loop(i, 8, body, V))
    g = vectorize_loop_func(f)
    assert _is_serial_loop(g), str(g)
    if case != "extern_call":
        assert_same(f, g)


def test_guarded_loads_become_masked():
    # padding: the load of A[i - 2] is only valid where i >= 2
    A, B = _bufs(("A", 6, "float32"), ("B", 8, "float32"))
    i = E.Var("i")
    f = func([A, B], loop(i, 8, tir.BufferStore(
        B, tir.if_then_else(tir.likely(tir.all(i >= 2, i < 8)), A[i - 2], 0.0), [i]), V))
    g = vectorize_loop_func(f)
    assert not lowered_errors(g)
    s = str(g)
    assert "A[ramp(-2, 1, 8)]@mask(" in s and "select(" in s and "likely" not in s
    assert_same(f, g)  # the interpreter bounds-checks every unmasked lane


def test_vector_if_becomes_predicated_stores():
    A, B = _bufs(("A", 16, "float32"), ("B", 16, "float32"))
    i = E.Var("i")
    f = func([A, B], loop(i, 8, tir.IfThenElse(
        i < 3, tir.BufferStore(B, A[i] * 2.0, [i]), tir.BufferStore(B, A[i + 1], [i])), V))
    g = vectorize_loop_func(f)
    expect(g, """
        B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)]@mask(ramp(0, 1, 8) < broadcast(3, 8)) * broadcast(2.0f, 8)  # mask ramp(0, 1, 8) < broadcast(3, 8)
        B[ramp(0, 1, 8)] = A[ramp(1, 1, 8)]@mask(not ramp(0, 1, 8) < broadcast(3, 8))  # mask not ramp(0, 1, 8) < broadcast(3, 8)
    """)
    assert_same(f, g)


def test_select_without_loads():
    A, B = _bufs(("A", 16, "float32"), ("B", 16, "float32"))
    i = E.Var("i")
    f2 = func([A, B], loop(i, 8, tir.BufferStore(
        B, A[i] * tir.if_then_else(i >= 2, E.const(2.0), E.const(3.0)), [i]), V))
    g2 = vectorize_loop_func(f2)
    assert "select(" in str(g2) and not lowered_errors(g2)
    assert_same(f2, g2)


def test_symbolic_extent_scalarized():
    n = E.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    i = E.Var("i")
    f = func([A], loop(i, n, tir.BufferStore(A, A[i] + 1.0, [i]), V))
    g = vectorize_loop_func(f)
    assert _is_serial_loop(g)
    assert_same(f, g, {"n": 7})


def test_invariant_if_kept():
    A, B = _bufs(("A", 16, "float32"), ("B", 16, "float32"))
    i, t = E.Var("i"), E.Var("t")
    f = func([A, B, t], loop(i, 8, tir.IfThenElse(
        t > 0, tir.BufferStore(B, A[i], [i]), tir.BufferStore(B, A[i] * 2.0, [i])), V))
    g = vectorize_loop_func(f)
    assert isinstance(g.body, tir.IfThenElse) and not lowered_errors(g)
    assert_same(f, g, {"t": 1})
    assert_same(f, g, {"t": -1})


def test_wide_loop_is_chunked():
    A, B = _bufs(("A", 150, "float32"), ("B", 150, "float32"))
    i = E.Var("i")
    f = func([A, B], loop(i, 150, tir.BufferStore(B, A[i] + 1.0, [i]), V))
    g = vectorize_loop_func(f)
    s = str(g)
    assert "ramp(i.outer * 64, 1, 64)" in s and "ramp(128, 1, 22)" in s
    assert not lowered_errors(g)
    assert_same(f, g)


def test_vector_let_and_int_dtype():
    A, B = _bufs(("A", 16, "int32"), ("B", 16, "int32"))
    i, t = E.Var("i"), E.Var("t")
    f = func([A, B], loop(i, 8, tir.LetStmt(t, A[i] * 3, tir.BufferStore(B, t + i, [i])), V))
    g = vectorize_loop_func(f)
    assert "int32x8" in str(g) and not lowered_errors(g)
    assert_same(f, g)


def test_nested_vectorized_inner_first():
    A = tir.decl_buffer((4, 8), "float32", "A")
    i, j = E.Var("i"), E.Var("j")
    f = func([A], loop(i, 4, loop(j, 8, tir.BufferStore(A, A[i * 8 + j] * 2.0, [i * 8 + j]),
                                  V), V))
    from tvmpy.tir.transform import storage_flatten_func

    f = storage_flatten_func(func([A], loop(i, 4, loop(j, 8, tir.BufferStore(
        A, A[i, j] * 2.0, [i, j]), V), V)))
    g = vectorize_loop_func(f)
    assert _is_serial_loop(g) and "ramp(i * 8, 1, 8)" in str(g)
    assert_same(f, g)


def test_fused_index_divmod_stays_ramp():
    # bias[f % 16] and rows f // 16 with f = o * 8 + i, i vectorized: no lane crosses 16
    A = tir.decl_buffer((64,), "float32", "A")
    bias = tir.decl_buffer((16,), "float32", "bias")
    R = tir.decl_buffer((4,), "float32", "R")
    o, i = E.Var("o"), E.Var("i")
    f_ = o * 8 + i
    body = loop(o, 8, loop(i, 8, tir.BufferStore(
        A, A[f_] + bias[f_ % 16] + R[f_ // 16], [f_]), V))
    f = func([A, bias, R], body)
    g = vectorize_loop_func(f)
    s = str(g)
    assert "bias[ramp(o % 2 * 8, 1, 8)]" in s and "broadcast(R[" in s, s
    assert not lowered_errors(g)
    assert_same(f, g)
    # a ramp that may cross a multiple of the divisor (o * 8 % 12 is 0 or 4): a gather
    body2 = loop(o, 8, loop(i, 8, tir.BufferStore(A, bias[(o * 8 + i) % 12], [o * 8 + i]), V))
    g2 = vectorize_loop_func(func([A, bias], body2))
    assert "bias[ramp(o * 8, 1, 8) % broadcast(12, 8)]" in str(g2), str(g2)
    assert not lowered_errors(g2)
    assert_same(func([A, bias], body2), g2)


def test_row_col_of_fused_index_recombined():
    # A[f // 16, f % 16] flattened with a row stride of 20: f // 16 is lane-invariant
    A = tir.decl_buffer((80,), "float32", "A")
    B = tir.decl_buffer((64,), "float32", "B")
    o, i = E.Var("o"), E.Var("i")
    f_ = o * 8 + i
    body = loop(o, 8, loop(i, 8, tir.BufferStore(B, A[f_ // 16 * 20 + f_ % 16], [f_]), V))
    f = func([A, B], body)
    g = vectorize_loop_func(f)
    assert "A[ramp(" in str(g) and not lowered_errors(g), str(g)
    assert_same(f, g)


def test_let_bound_ramp_index():
    A, B = _bufs(("A", 32, "float32"), ("B", 32, "float32"))
    i, j = E.Var("i"), E.Var("j")
    f = func([A, B], loop(i, 8, tir.LetStmt(j, i * 2 + 1, tir.BufferStore(B, A[j], [i])), V))
    g = vectorize_loop_func(f)
    expect(g, "B[ramp(0, 1, 8)] = A[ramp(1, 2, 8)]")
    assert_same(f, g)


def test_repeating_index_is_a_window_load_and_shuffle():
    # nearest-neighbour upsampling A[i // 2] and a broadcast read A[i % 4]: the lanes' offsets
    # from lane 0 are constants, so one contiguous load of the window they span + a shuffle
    A, B = _bufs(("A", 32, "float32"), ("B", 32, "float32"))
    i = E.Var("i")
    f = func([A, B], loop(i, 8, tir.BufferStore(B, A[i // 2] + A[i % 4 + 9], [i]), V))
    g = vectorize_loop_func(f)
    expect(g, "B[ramp(0, 1, 8)] = shuffle([A[ramp(0, 1, 4)]], [0, 0, 1, 1, 2, 2, 3, 3]) + "
              "shuffle([A[ramp(9, 1, 4)]], [0, 1, 2, 3, 0, 1, 2, 3])")
    assert not lowered_errors(g)
    assert_same(f, g)


def test_broadcast_axis_between_kept_axes():
    # the fused elementwise loop of a[1, 4, 10, 8] + b[1, 4, 1, 8] split by 16 (the x86
    # injective schedule): b's index is o // 5 * 8 + i % 8, constant offsets within a row of 8
    A = tir.decl_buffer((320,), "float32", "A")
    Bb = tir.decl_buffer((32,), "float32", "B")
    o, i = E.Var("o"), E.Var("i")
    fused = o * 16 + i
    body = loop(o, 20, loop(i, 16, tir.BufferStore(
        A, A[fused] + Bb[fused // 80 * 8 + fused % 8], [fused]), V))
    f = func([A, Bb], body)
    g = vectorize_loop_func(f)
    assert "shuffle([B[ramp(o // 5 * 8, 1, 8)]]" in str(g), str(g)
    assert_same(f, g)


def test_transposed_read_is_a_gather_and_masked_under_a_condition():
    # a transposed read A[i % 3 * 4 + i // 3] at constant lanes: a window of 10 + a shuffle;
    # shifted by an outer loop's o the offsets are not constant: a gather; under a vector
    # condition the gather is masked (lanes 5.. would read past A's 12 elements)
    A, B = _bufs(("A", 12, "float32"), ("B", 16, "float32"))
    i, o = E.Var("i"), E.Var("o")
    f = func([A, B], loop(i, 8, tir.BufferStore(B, A[i % 3 * 4 + i // 3], [i]), V))
    g = vectorize_loop_func(f)
    expect(g, "B[ramp(0, 1, 8)] = shuffle([A[ramp(0, 1, 10)]], [0, 4, 8, 1, 5, 9, 2, 6])")
    assert_same(f, g)
    f1 = func([A, B], loop(o, 3, loop(i, 8, tir.BufferStore(
        B, A[(i + o) % 3 * 4 + (i + o) // 3], [i + o]), V)))
    g1 = vectorize_loop_func(f1)
    assert "A[ramp(o, 1, 8) % broadcast(3, 8)" in str(g1) and not lowered_errors(g1), str(g1)
    assert_same(f1, g1)
    guarded = tir.if_then_else(i < 5, A[i * 2 % 7 + 5], 0.0)
    f2 = func([A, B], loop(i, 8, tir.BufferStore(B, guarded, [i]), V))
    g2 = vectorize_loop_func(f2)
    assert "@mask(" in str(g2) and not lowered_errors(g2), str(g2)
    assert_same(f2, g2)


def test_gather_from_a_written_buffer_is_scalarized():
    # lanes would read elements that other lanes of the same vector write
    A = tir.decl_buffer((16,), "float32", "A")
    i = E.Var("i")
    f = func([A], loop(i, 8, tir.BufferStore(A, A[i % 4] + 1.0, [i]), V))
    g = vectorize_loop_func(f)
    assert _is_serial_loop(g), str(g)
    assert_same(f, g)


@pytest.mark.parametrize("lo", [0, 2])
def test_a_loops_range_does_not_leak_into_its_siblings(lo):
    """A sibling loop of symbolic extent ``1 - p`` runs only when ``p == 0``; what its range
    implies must not reach the vectorized loop after it (an auto-scheduler schedule lost the
    ``p * 3`` of its store index this way and wrote every block's rows to block 0). Also a
    loop that starts at ``lo``: its range is ``[lo, lo + extent)``."""
    A, B, C = _bufs(("A", 16, "float32"), ("B", 16, "float32"), ("C", 16, "float32"))
    p, a, i = E.Var("p"), E.Var("a"), E.Var("i")
    idx = p * 4 + tir.max(1 - p * 2, 0) * 2 + i  # 2 + i for p = 0, 4 + i for p = 1
    body = tir.SeqStmt([
        loop(a, 1 - p * 2, tir.BufferStore(C, A[a] + 1.0, [a + lo]), lo=lo),
        loop(i, 3, tir.BufferStore(B, A[idx] * 2.0, [idx]), V),
    ])
    f = func([A, B, C], loop(p, 2, body))
    g = vectorize_loop_func(f)
    assert "p * 4" in str(g)
    assert_same(f, g)


def test_strided_store_of_a_constant_product():
    """A store whose index strides by a product of constants (``i * 2`` of the loop's ramp
    ``ramp(b, 1, n)``: stride ``1 * 2``) is vectorized with the folded stride (it was
    scalarized as 'a symbolic stride': NCHW16c -> NCHW2c transforms ran scalar)."""
    f, g = _vec(lambda A, B, i: tir.BufferStore(B, A[i] + 1.0, [i * 2 + 1]))
    expect(g, "B[ramp(1, 2, 8)] = A[ramp(0, 1, 8)] + broadcast(1.0f, 8)")
    assert not lowered_errors(g)
    assert_same(f, g)
