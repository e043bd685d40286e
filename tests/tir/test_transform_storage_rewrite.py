"""storage_rewrite_func: disjoint lifetimes share memory, overlapping ones never do."""

from __future__ import annotations

import numpy as np
import pytest
from tir_pass_helpers import assert_same, expect, func, loop

from tvmpy import config, tir
from tvmpy.tir import expr as E
from tvmpy.tir.stmt import ForKind
from tvmpy.tir.transform import storage_rewrite_func
from tvmpy.tir.transform.storage_rewrite import plan_memory


def _allocs(f):
    out = []
    tir.post_order_visit(f.body, lambda n: out.append(n) if isinstance(n, tir.Allocate) else None)
    return out


def _chain(reads, n=16, kind=ForKind.SERIAL):
    """Stage t writes T<t> from A (or earlier stages listed in reads[t]); B sums the last."""
    A = tir.decl_buffer((n,), "float32", "A")
    B = tir.decl_buffer((n,), "float32", "B")
    T = [tir.decl_buffer((n,), "float32", f"T{t}", scope="local") for t in range(len(reads))]
    stages = []
    for t, srcs in enumerate(reads):
        i = E.Var("i")
        val = A[i] * float(t + 2)
        for s in srcs:
            val = val + T[s][i]
        stages.append(loop(i, n, tir.BufferStore(T[t], val, [i])))
    i = E.Var("i")
    stages.append(loop(i, n, tir.BufferStore(B, T[-1][i] + 1.0, [i])))
    body = tir.seq(*stages)
    for t in reversed(range(len(reads))):
        body = tir.Allocate(T[t], body)
    return func([A, B], body)


def test_chain_text():
    f = _chain([[], [0], [1], [2]], n=4)
    expect(storage_rewrite_func(f), """
        T0 = allocate((4,), 'float32', 'local')
        T1 = allocate((4,), 'float32', 'local')
        for i in range(0, 4):
            T0[i] = A[i] * 2.0f
        for i_1 in range(0, 4):
            T1[i_1] = A[i_1] * 3.0f + T0[i_1]
        for i_2 in range(0, 4):
            T0[i_2] = A[i_2] * 4.0f + T1[i_2]
        for i_3 in range(0, 4):
            T1[i_3] = A[i_3] * 5.0f + T0[i_3]
        for i_4 in range(0, 4):
            B[i_4] = T1[i_4] + 1.0f
    """)


def test_chain_reuses_dead_buffers():
    f = _chain([[], [0], [1], [2]])  # each stage reads only the previous one
    g = storage_rewrite_func(f)
    assert len(_allocs(g)) == 2
    assert_same(f, g)


def test_overlapping_lifetimes_not_merged():
    f = _chain([[], [0], [0, 1], [0, 2]])  # T0 stays live to the end
    g = storage_rewrite_func(f)
    names = [a.buffer.name for a in _allocs(g)]
    assert len(names) == 3
    for slot in plan_memory(f.body):
        for a in slot:
            for b in slot:
                if a is not b:
                    assert a.end < b.start or b.end < a.start
    assert_same(f, g)


def test_use_inside_later_loop_extends_lifetime():
    # T0 is allocated outside loop k and read in every iteration; T1 is allocated inside the
    # loop and written before T0's read: they must not share
    A = tir.decl_buffer((4,), "float32", "A")
    B = tir.decl_buffer((12,), "float32", "B")
    T0 = tir.decl_buffer((4,), "float32", "T0", scope="local")
    T1 = tir.decl_buffer((4,), "float32", "T1", scope="local")
    i, k, j, j2 = E.Var("i"), E.Var("k"), E.Var("j"), E.Var("j")
    body = tir.Allocate(T0, tir.seq(
        loop(i, 4, tir.BufferStore(T0, A[i] * 2.0, [i])),
        loop(k, 3, tir.Allocate(T1, tir.seq(
            loop(j, 4, tir.BufferStore(T1, A[j] + E.cast(k, "float32"), [j])),
            loop(j2, 4, tir.BufferStore(B, T1[j2] + T0[j2], [k * 4 + j2])))))))
    f = func([A, B], body)
    g = storage_rewrite_func(f)
    assert len(_allocs(g)) == 2
    assert_same(f, g)


def test_buffer_read_in_a_kernel_not_reused_for_its_output():
    """Two global buffers of one function: T0 written by one kernel, read by a second that
    then writes T1 (a later statement). The second kernel's threads run at once (T0 read by one thread after another
    wrote T1), so T1 may not take T0's storage: a thread scope is one lifetime span, like a
    loop. (GPU Winograd's batched product read its transformed input and wrote its output in
    one buffer, and erred on the GPU.)"""
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    T0 = tir.decl_buffer((8,), "float32", "T0")
    T1 = tir.decl_buffer((8,), "float32", "T1")
    tx0, tx1, tx2 = (tir.IterVar(None, E.Var("threadIdx.x"), 1, "threadIdx.x")
                     for _ in range(3))

    def kernel(iv, stmt):
        return tir.AttrStmt(iv, "thread_extent", E.IntImm("int32", 8), stmt)

    body = tir.Allocate(T0, tir.Allocate(T1, tir.seq(
        kernel(tx0, tir.BufferStore(T0, A[tx0.var] * 2.0, [tx0.var])),
        kernel(tx1, tir.seq(tir.BufferStore(B, T0[7 - tx1.var], [tx1.var]),
                            tir.BufferStore(T1, A[tx1.var] + 1.0, [tx1.var]))),
        kernel(tx2, tir.BufferStore(B, B[tx2.var] + T1[tx2.var], [tx2.var])))))
    g = storage_rewrite_func(func([A, B], body))
    assert len(_allocs(g)) == 2


def test_parallel_loop_allocations_stay():
    f = _chain([[], [0], [1]])
    wrapped = func([*f.buffer_map.values()], tir.For(E.Var("p"), 0, 2, ForKind.PARALLEL, f.body))
    g = storage_rewrite_func(wrapped)
    assert g is wrapped


def test_different_dtype_or_scope_not_shared():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    T0 = tir.decl_buffer((8,), "float32", "T0", scope="local")
    T1 = tir.decl_buffer((8,), "int32", "T1", scope="local")
    T2 = tir.decl_buffer((8,), "float32", "T2", scope="global")
    i, j, m, q = (E.Var(s) for s in "ijmq")
    body = tir.Allocate(T0, tir.Allocate(T1, tir.Allocate(T2, tir.seq(
        loop(i, 8, tir.BufferStore(T0, A[i], [i])),
        loop(j, 8, tir.BufferStore(T1, E.cast(T0[j], "int32"), [j])),
        loop(m, 8, tir.BufferStore(T2, E.cast(T1[m], "float32"), [m])),
        loop(q, 8, tir.BufferStore(B, T2[q], [q]))))))
    f = func([A, B], body)
    assert storage_rewrite_func(f) is f


def test_debug_reports_saved_bytes(capsys):
    f = _chain([[], [0], [1], [2]])
    with config.config(DEBUG=1):
        storage_rewrite_func(f)
    assert "saved 128 bytes" in capsys.readouterr().out


@pytest.mark.parametrize("seed", range(12))
def test_random_chains_preserve_results(seed):
    rng = np.random.default_rng(seed)
    stages = int(rng.integers(2, 7))
    reads = [sorted(set(rng.integers(0, t, int(rng.integers(0, 3))).tolist())) if t else []
             for t in range(stages)]
    f = _chain(reads, n=int(rng.integers(1, 9)))
    g = storage_rewrite_func(f)
    for slot in plan_memory(f.body):
        ends = sorted((u.start, u.end) for u in slot)
        for (_s0, e0), (s1, _) in zip(ends, ends[1:]):
            assert e0 < s1
    # fresh allocations are poisoned (NaN) by the interpreter: a wrong merge shows up
    assert_same(f, g)
