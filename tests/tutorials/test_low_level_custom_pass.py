"""The steps of TVM's tutorial "Writing a Customized Pass" on tvmpy: find loops with
stmt_functor.post_order_visit, rewrite them with stmt_functor.ir_transform and substitute into
an outer loop and a vectorized inner loop of 8, wrap that as a tir.transform.prim_func_pass, and
run it inside tvm.lower through PassContext(config={"tir.add_lower_pass": [(1, pass)]}). The
lowered IR must carry the 8-lane vector code, and the built function must still add."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
import tvmpy.testing
from tvmpy import te

RNG = np.random.default_rng(2613)
WIDTH = 8


def _vector_add(n):
    a = te.placeholder((n,), name="a")
    b = te.placeholder((n,), name="b")
    c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    return te.create_schedule(c.op), [a, b, c]


def _loops_divisible_by_width(stmt):
    found = []

    def visit(op):
        if (isinstance(op, tvm.tir.For) and isinstance(op.extent, tvm.tir.IntImm)
                and op.extent.value % WIDTH == 0):
            found.append(op)

    tvm.tir.stmt_functor.post_order_visit(stmt, visit)
    return found


def _make_vectorize_pass(log):
    """A prim_func_pass splitting each constant loop whose extent WIDTH divides into a serial
    outer loop and a vectorized inner loop of WIDTH; ``log`` gets the loops it rewrote."""

    @tvm.tir.transform.prim_func_pass(opt_level=0)
    def vectorize(f, mod, ctx):
        loops = _loops_divisible_by_width(f.body)
        log.extend(loops)

        def split(op):
            if not any(op.same_as(lp) for lp in loops):
                return None
            name = op.loop_var.name
            lo, li = te.var(name + ".outer"), te.var(name + ".inner")
            body = tvm.tir.stmt_functor.substitute(op.body, {op.loop_var: lo * WIDTH + li})
            body = tvm.tir.For(li, 0, WIDTH, tvm.tir.ForKind.VECTORIZED, body)
            return tvm.tir.For(lo, 0, op.extent.value // WIDTH, tvm.tir.ForKind.SERIAL, body)

        if not loops:
            return f
        return f.with_body(tvm.tir.stmt_functor.ir_transform(f.body, None, split, ["tir.For"]))

    return vectorize


def _store_lanes(func):
    """The lane counts of the indices of every buffer store."""
    lanes = []

    def visit(op):
        if isinstance(op, tvm.tir.BufferStore):
            idx = op.indices[0]
            lanes.append(idx.lanes if isinstance(idx, tvm.tir.Ramp) else 1)

    tvm.tir.stmt_functor.post_order_visit(func.body, visit)
    return lanes


def _loop_extents(func):
    out = []
    tvm.tir.stmt_functor.post_order_visit(
        func.body, lambda op: out.append(int(op.extent)) if isinstance(op, tvm.tir.For) else None)
    return out


def test_visitor_finds_the_loop():
    sch, args = _vector_add(tvm.tir.const(128, "int32"))
    ir = tvm.lower(sch, args)
    (loop,) = _loops_divisible_by_width(ir.body)
    assert loop.extent.value == 128 and loop.loop_var.name == "i"
    sch, args = _vector_add(tvm.tir.const(100, "int32"))
    assert _loops_divisible_by_width(tvm.lower(sch, args).body) == []


def test_substitute_and_ir_transform():
    i, j = te.var("i"), te.var("j")
    buf = tvm.tir.decl_buffer((64,), "float32", name="X")
    store = tvm.tir.BufferStore(buf, tvm.tir.const(1.0, "float32"), [i * 2])
    loop = tvm.tir.For(i, 0, 32, tvm.tir.ForKind.SERIAL, store)
    moved = tvm.tir.stmt_functor.substitute(store, {i: j + 1})
    assert str(moved.indices[0]) == "(j + 1) * 2"
    seen = []
    out = tvm.tir.stmt_functor.ir_transform(
        loop, lambda op: seen.append(type(op).__name__), None, ["tir.For"])
    assert seen == ["For"] and out.same_as(loop)  # preorder only looked; nothing changed


def test_pass_in_lower_phase_1_vectorizes():
    sch, args = _vector_add(tvm.tir.const(128, "int32"))
    plain = tvm.lower(sch, args)
    assert _store_lanes(plain) == [1] and _loop_extents(plain) == [128]
    rewritten = []
    vectorize = _make_vectorize_pass(rewritten)
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [(1, vectorize)]}):
        ir = tvm.lower(sch, args)
    assert len(rewritten) == 1
    # the inner loop of 8 became vector code: one loop of 16 whose store writes 8 lanes
    assert _loop_extents(ir) == [128 // WIDTH] and _store_lanes(ir) == [WIDTH]
    with tvm.transform.PassContext(config={"tir.add_lower_pass": [(1, vectorize)]}):
        f = tvm.build(sch, args, "llvm")
    a, b = (RNG.uniform(-1, 1, 128).astype("float32") for _ in range(2))
    c = tvm.nd.array(np.full(128, np.nan, "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a + b)


def test_pass_leaves_other_sizes_alone():
    sch, args = _vector_add(tvm.tir.const(100, "int32"))
    rewritten = []
    with tvm.transform.PassContext(
            config={"tir.add_lower_pass": [(1, _make_vectorize_pass(rewritten))]}):
        ir = tvm.lower(sch, args)
        f = tvm.build(sch, args, "llvm")
    assert rewritten == [] and _store_lanes(ir) == [1] and _loop_extents(ir) == [100]
    a, b = (RNG.uniform(-1, 1, 100).astype("float32") for _ in range(2))
    c = tvm.nd.array(np.full(100, np.nan, "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    tvm.testing.assert_allclose(c.numpy(), a + b)
