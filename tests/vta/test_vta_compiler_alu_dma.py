"""ALU stages (TVM's "get started" vector add, shift and clip with immediates), DMA with
padding (a conv-style padded input), remainders, virtual-thread cycles and errors, end to end
against numpy."""

import numpy as np
import pytest

import tvmpy.vta as vta
from tvmpy import te, topi
from tvmpy.vta.transform.lowering import VTALoweringError


def _vector_alu(env, o, m, ops, out_pragma=True):
    """C = clip((A + B) op...) per ``ops`` (each one ALU stage), loaded into the accumulator."""
    shape = (o, m, env.BATCH, env.BLOCK_OUT)
    A = te.placeholder(shape, name="A", dtype=env.acc_dtype)
    B = te.placeholder(shape, name="B", dtype=env.acc_dtype)
    A_buf = te.compute(shape, lambda *i: A(*i), "A_buf")
    B_buf = te.compute(shape, lambda *i: B(*i), "B_buf")
    stages = [te.compute(shape, lambda *i: A_buf(*i).astype(env.acc_dtype) + B_buf(*i).astype(env.acc_dtype), "C_buf")]
    for k, (op, val) in enumerate(ops):
        prev = stages[-1]
        if op == "shr":
            f = lambda *i, p=prev, v=val: p(*i) >> v  # noqa: E731
        elif op == "shl":
            f = lambda *i, p=prev, v=val: p(*i) << v  # noqa: E731
        elif op == "min":
            f = lambda *i, p=prev, v=val: te.min(p(*i), v)  # noqa: E731
        elif op == "max":
            f = lambda *i, p=prev, v=val: te.max(p(*i), v)  # noqa: E731
        else:
            f = lambda *i, p=prev, v=val: p(*i) + v  # noqa: E731
        stages.append(te.compute(shape, f, f"S{k}"))
    C = te.compute(shape, lambda *i: stages[-1](*i).astype(env.inp_dtype), "C")
    s = te.create_schedule(C.op)
    for t in (A_buf, B_buf, *stages):
        s[t].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    for t in stages:
        s[t].pragma(s[t].op.axis[0], env.alu)
    if out_pragma:
        s[C].pragma(s[C].op.axis[0], env.dma_copy)
    return s, A, B, C


def _np_ops(x, ops):
    fns = {"shr": np.right_shift, "shl": np.left_shift, "min": np.minimum, "max": np.maximum,
           "add": np.add}
    for op, v in ops:
        x = fns[op](x, np.int32(v))
    return x


@pytest.mark.parametrize("ops", [[], [("shr", 3)], [("shr", 2), ("min", 127), ("max", -128)],
                                 [("add", -7), ("shl", 1), ("max", 5)]])
def test_get_started_vector_alu(vta_queue, ops):
    env = vta.get_env()
    o, m = 1, 3
    s, A, B, C = _vector_alu(env, o, m, ops)
    text = str(vta.lower(s, [A, B, C]))
    assert "VTAUopPush" in text and "VTALoadBuffer2D" in text
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
    rng = np.random.default_rng(len(ops))
    shape = (o, m, env.BATCH, env.BLOCK_OUT)
    a = rng.integers(-300, 300, shape).astype(np.int32)
    b = rng.integers(-300, 300, shape).astype(np.int32)
    c = np.zeros(shape, np.int8)
    f(a, b, c)
    np.testing.assert_array_equal(c, _np_ops(a + b, ops).astype(np.int8))


def _padded_gemm(env, h, w, n, m, pad):
    """A 1x1 'conv' over a zero-padded input: the pad compute is recognised by the DMA."""
    A = te.placeholder((n, h, w, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    B = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), name="B", dtype=env.wgt_dtype)
    hp, wp = h + 2 * pad, w + 2 * pad
    Ap = topi.nn.pad(A, [0, pad, pad, 0, 0], name="A_pad")  # TVM's packed NCHWnc order
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute(
        (hp, wp, m, env.BATCH, env.BLOCK_OUT),
        lambda y, x, co, bi, ci: te.sum(Ap[ko, y, x, bi, ki].astype(env.acc_dtype)
                                        * B[co, ko, ci, ki].astype(env.acc_dtype), axis=[ko, ki]),
        name="C_buf")
    C = te.compute(C_buf.shape, lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")
    s = te.create_schedule(C.op)
    B_buf = s.cache_read(B, env.wgt_scope, [C_buf])
    s[Ap].set_scope(env.inp_scope)
    s[C_buf].set_scope(env.acc_scope)
    y, x, co, bi, ci = s[C_buf].op.axis
    ko, ki = s[C_buf].op.reduce_axis
    s[C_buf].reorder(ko, y, x, co, bi, ci, ki)
    s[Ap].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    s[Ap].pragma(s[Ap].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(bi, env.gemm)
    return s, A, B, C


@pytest.mark.parametrize("h,w,n,m,pad", [(3, 5, 2, 2, 1), (2, 3, 1, 1, 2)])
def test_dma_padding_conv_input(vta_queue, h, w, n, m, pad):
    env = vta.get_env()
    s, A, B, C = _padded_gemm(env, h, w, n, m, pad)
    text = str(vta.lower(s, [A, B, C]))
    assert "VTALoadBuffer2D" in text and "A_pad" not in text.split("def")[1].split(")")[0]
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
    load_a = next(ln for ln in f.get_source().splitlines() if "load_buffer_2d(_addr['A" in ln)
    # x_size w, y_size h, then the pads (x before, y before, x after, y after) on the fly
    assert f", {w}, {h}, " in load_a and f", {pad}, {pad}, {pad}, {pad}, " in load_a, load_a
    rng = np.random.default_rng(h * 7 + w)
    a = rng.integers(-128, 128, (n, h, w, env.BATCH, env.BLOCK_IN)).astype(np.int8)
    b = rng.integers(-128, 128, (m, n, env.BLOCK_OUT, env.BLOCK_IN)).astype(np.int8)
    c = np.zeros((h + 2 * pad, w + 2 * pad, m, env.BATCH, env.BLOCK_OUT), np.int8)
    f(a, b, c)
    ap = np.pad(a, [(0, 0), (pad, pad), (pad, pad), (0, 0), (0, 0)]).astype(np.int32)
    want = np.einsum("kyxbi,ckji->yxcbj", ap, b.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(c, want)


def test_sram_overflow_is_a_clear_error():
    env = vta.get_env()
    big = env.mem_info(env.inp_scope).max_entries + 1
    A = te.placeholder((big, 1, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    A_buf = te.compute(A.shape, lambda *i: A(*i), "A_buf")
    C = te.compute(A.shape, lambda *i: A_buf(*i), "C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    with pytest.raises(VTALoweringError, match="local.inp_buffer overflows"):
        vta.lower(s, [A, C])


def test_unsupported_alu_expression_is_a_clear_error():
    env = vta.get_env()
    shape = (1, 1, env.BATCH, env.BLOCK_OUT)
    A = te.placeholder(shape, name="A", dtype=env.acc_dtype)
    A_buf = te.compute(shape, lambda *i: A(*i), "A_buf")
    M = te.compute(shape, lambda *i: A_buf(*i) * A_buf(*i), "M")
    C = te.compute(shape, lambda *i: M(*i).astype(env.inp_dtype), "C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.acc_scope)
    s[M].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[M].pragma(s[M].op.axis[0], env.alu)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    with pytest.raises(VTALoweringError, match="unsupported ALU expression"):
        vta.lower(s, [A, C])


@pytest.mark.parametrize("m,factor", [(5, 2), (7, 3), (1, 2)])
def test_alu_and_dma_with_remainders(vta_queue, m, factor):
    """A split that does not divide: guards on whole tiles become DMA bounds (loads zero-fill
    the unused tiles, stores move the valid ones) and guards around the ALU micro-ops."""
    env = vta.get_env()
    ops = [("shr", 1), ("max", -20)]
    s, A, B, C = _vector_alu(env, 2, m, ops, out_pragma=False)
    co, ci = s[C].split(s[C].op.axis[1], factor=factor)
    stages = [t for t in s.stages if t.op.name in ("A_buf", "B_buf", "C_buf", "S0", "S1")]
    for st in stages:
        st.compute_at(s[C], co)
    s[C].pragma(ci, env.dma_copy)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
    rng = np.random.default_rng(m)
    shape = (2, m, env.BATCH, env.BLOCK_OUT)
    a = rng.integers(-300, 300, shape).astype(np.int32)
    b = rng.integers(-300, 300, shape).astype(np.int32)
    c = np.full(shape, 99, np.int8)
    f(a, b, c)
    np.testing.assert_array_equal(c, _np_ops(a + b, ops).astype(np.int8))


def test_stage_without_pragma_is_a_clear_error():
    env = vta.get_env()
    shape = (1, 2, env.BATCH, env.BLOCK_IN)
    A = te.placeholder(shape, name="A", dtype=env.inp_dtype)
    A_buf = te.compute(shape, lambda *i: A(*i), "A_buf")
    C = te.compute(shape, lambda *i: A_buf(*i), "C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)  # no dma_copy pragmas
    with pytest.raises(VTALoweringError, match="has no VTA form"):
        vta.build(s, [A, C])
