"""Loop metadata the LLVM backend adds so that LLVM's own optimizations help, not hurt.

An innermost serial loop storing scalars at unit stride is kept rolled
(llvm.loop.unroll.disable) so that LLVM's loop vectorizer vectorizes it; otherwise LLVM's early
full unroll flattens it and then vectorizes the enclosing loop with gathers/scatters (the
"blocking" step of the GEMM tutorial ran ~7x slower that way).
"""

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.llvm import emit_assembly, emit_llvm_ir


def _blocked_matmul(n=64, bn=16):
    k = te.reduce_axis((0, n), "k")
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    C = te.compute((n, n), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    ko, ki = s[C].split(s[C].op.reduce_axis[0], factor=4)
    s[C].reorder(xo, yo, ko, ki, xi, yi)
    return s, [A, B, C]


def test_unit_stride_inner_loop_stays_rolled_and_is_vectorized_without_gathers():
    s, args = _blocked_matmul()
    f = tvm.lower(s, args, name="blocked")["blocked"]
    ir = emit_llvm_ir([f])
    assert "llvm.loop.unroll.disable" in ir
    asm = emit_assembly([f], "llvm -mcpu=znver4")
    assert "gather" not in asm and "scatter" not in asm
    assert "vfmadd" in asm or "vmulps" in asm  # vector arithmetic on the unit-stride loop
    m = tvm.build(s, args, "llvm")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype("float32") for _ in range(2))
    c = tvm.nd.empty((64, 64))
    m(a, b, c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_loops_of_vector_statements_keep_llvm_defaults():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    ir = emit_llvm_ir([tvm.lower(s, [A, B])["main"]])
    assert "llvm.loop.unroll.disable" not in ir


def _loops_of(stmt):
    from tvmpy import tir

    out = []
    tir.post_order_visit(stmt, lambda n: out.append(n) if isinstance(n, tir.For) else None)
    return out


def _hand_made_loops():
    """Loops whose vars are divided in memory indices directly, through lets (two deep), only
    in a divisor, only outside indices, or not at all; nested and innermost ones."""
    from tvmpy import tir
    from tvmpy.tir import expr as E

    A = tir.decl_buffer((256,), "float32", "A")
    B = tir.decl_buffer((256,), "float32", "B")
    i, j, k, m, q = (E.Var(n) for n in "ijkmq")
    t, u = E.Var("t"), E.Var("u")
    body = tir.seq(
        # direct: B[q * 8 + i % 8], i in an inner loop under q
        tir.For(q, 0, 4, tir.ForKind.SERIAL, tir.For(
            i, 0, 16, tir.ForKind.SERIAL,
            tir.BufferStore(B, A[i] * 2.0, [q * 8 + tir.floormod(i, 8)]))),
        # through two lets: t = j * 3, u = t + 1, A[u // 4]
        tir.For(j, 0, 16, tir.ForKind.SERIAL, tir.LetStmt(t, j * 3, tir.LetStmt(
            u, t + 1, tir.BufferStore(B, A[tir.floordiv(u, 4)], [j])))),
        # k only divides (is the divisor) and is divided outside any index: affine
        tir.For(k, 1, 8, tir.ForKind.SERIAL,
                tir.BufferStore(B, A[k] + tir.Cast("float32", tir.floordiv(k, 2)),
                                [tir.floordiv(64, k)])),
        # m: a plain unit-stride scalar loop (left for LLVM's vectorizer)
        tir.For(m, 0, 32, tir.ForKind.SERIAL, tir.BufferStore(B, A[m] + 1.0, [m])),
    )
    return tir.PrimFunc([A.data, B.data], body, {A.data: A, B.data: B}, {"global_symbol": "h"})


def test_loop_facts_of_one_walk_answer_as_the_walk_per_loop():
    """The code generator learns which loops divide their variable in an index (no LLVM loop
    vectorizer) and which are innermost (candidates for it) in one walk of the function; it
    answers for every loop as the walk of that loop's body did, lets and nesting included."""
    from tvmpy.codegen.llvm_codegen import _LoopFacts, _nonaffine_index, _prefers_loop_vectorizer

    s, args = _blocked_matmul(n=48, bn=16)
    A = te.placeholder((6, 50), name="A")
    Bc = te.compute((6, 50), lambda a, b: A[a, b] + A[a // 2, (b * 7) % 50], name="B")
    s2 = te.create_schedule(Bc.op)
    xo, xi = s2[Bc].split(Bc.op.axis[1], factor=8)
    funcs = [tvm.lower(s, args, name="mm"), tvm.lower(s2, [A, Bc], name="mix"),
             _hand_made_loops()]
    seen = {"divided": 0, "affine": 0, "prefers": 0}
    for f in funcs:
        facts = _LoopFacts(f.body)
        loops = _loops_of(f.body)
        assert {id(x.loop_var) for x in loops} == facts.loops
        for x in loops:
            direct = _nonaffine_index(x.loop_var, x.body)
            assert (id(x.loop_var) in facts.divided) == direct, x.loop_var.name
            seen["divided" if direct else "affine"] += 1
            prefers = _prefers_loop_vectorizer(x.loop_var, x.body)
            if id(x.loop_var) in facts.nested:
                assert not prefers, x.loop_var.name
            seen["prefers"] += prefers
    assert all(seen.values()), seen  # each kind of answer was checked


def test_hand_made_loops_get_the_metadata_of_their_kind():
    from tvmpy.tir import interpreter

    f = _hand_made_loops()
    ir = emit_llvm_ir([f])
    # i and j (divided, the latter through two lets): LLVM's vectorizer off; m: kept rolled
    assert ir.count('"llvm.loop.vectorize.enable", i1 false') >= 1
    assert "llvm.loop.unroll.disable" in ir
    m = tvm.build(f, target="llvm")
    a = np.arange(256, dtype="float32") + 1
    b = np.zeros(256, "float32")
    m(a, b)
    ref = np.zeros(256, "float32")
    interpreter.run(f, [a.copy(), ref])
    np.testing.assert_allclose(b, ref)
