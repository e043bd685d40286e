"""tir.ir_builder: scopes (let, allocate, attr) that take what follows, nested in loops, against
numpy through a te.extern kernel."""

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.tir import expr as E
from tvmpy.tir import ir_builder
from tvmpy.tir import stmt as S


def _extern(n: int, body) -> tvm.runtime.Module:
    A = te.placeholder((n,), "float32", name="A")
    B = te.extern((n,), [A], lambda ins, outs: body(ins[0], outs[0]), name="B", dtype="float32")
    s = te.create_schedule(B.op)
    return tvm.build(s, [A, B], "llvm")


def test_many_replaced_scopes_keep_their_bodies():
    """Each loop body opens a let that takes the store after it (folding replaces the let), and
    complete LetStmts emitted between the loops keep their own bodies: only statements opened by
    ``let``/``allocate``/``scope_attr`` take what follows (the builder tracks them by identity
    and holds them, so a freed node's id reused by a later statement cannot pass for one)."""
    n, rounds = 7, 300

    def body(a, b):
        ib = ir_builder.create()
        pa, pb = ib.buffer_ptr(a), ib.buffer_ptr(b)
        with ib.for_range(0, n, name="i") as i:
            pb[i] = pa[i]
        for r in range(rounds):
            with ib.for_range(0, n, name="i") as i:
                x = ib.let("x", pb[i] * 0.5)
                pb[i] = x + float(r % 3)
            # a complete statement (not an open scope): its body is its own
            v = E.Var("v", "float32")
            store = S.BufferStore(pb.buffer, v + 1.0, [E.const(r % n)])
            ib.emit(S.LetStmt(v, E.BufferLoad(pb.buffer, [E.const(r % n)]), store))
        return ib.get()

    f = _extern(n, body)
    a = np.random.default_rng(0).uniform(-2, 2, n).astype("float32")
    want = a.astype("float64").copy()
    for r in range(rounds):
        want = want * 0.5 + (r % 3)
        want[r % n] += 1.0
    b = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), want, rtol=1e-5, atol=1e-5)
