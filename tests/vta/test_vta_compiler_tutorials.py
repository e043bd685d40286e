"""TVM's VTA tutorials ported with ``import tvmpy.vta as vta``, unchanged in structure: "Get
Started" (vector add in the accumulator, ALU) and "Simple Matrix Multiply" (GEMM), each saved
as gemm.o, uploaded to ``rpc.LocalSession()``, run on ``remote.ext_dev(0)`` through vta-hw's
simulator and compared with numpy, with the simulator's statistics read as the tutorials do."""

import numpy as np

import tvmpy as tvm
import tvmpy.vta as vta
from tvmpy import rpc, te

from .compiler_helpers import deploy, gemm_compute, pack


def test_matrix_multiply_tutorial_as_written():
    env = vta.get_env()
    assert env.TARGET in ["sim", "tsim"]
    remote = rpc.LocalSession()

    # Output channel factor m - total 16x16=256 output channels
    m = 16
    # Input channel factor n - total 16x16=256 input channels
    n = 16
    # Batch factor o (we use single batch inference)
    o = 1
    A, B, A_buf, B_buf, C_buf, C = gemm_compute(env, o, n, m)
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    ko, ki = s[C_buf].op.reduce_axis
    s[C_buf].reorder(ko, s[C_buf].op.axis[0], s[C_buf].op.axis[1], s[C_buf].op.axis[2],
                     s[C_buf].op.axis[3], ki)
    s[A_buf].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(s[C_buf].op.axis[2], env.gemm)
    text = str(vta.lower(s, [A, B, C], simple_mode=True))
    assert "VTAUopPush" in text

    my_gemm = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="my_gemm")
    f = deploy(remote, my_gemm, "gemm.o")
    ctx = remote.ext_dev(0)

    A_orig = np.random.randint(-128, 128, size=(o * env.BATCH, n * env.BLOCK_IN)).astype(A.dtype)
    B_orig = np.random.randint(-128, 128, size=(m * env.BLOCK_OUT, n * env.BLOCK_IN)).astype(B.dtype)
    A_nd = tvm.nd.array(pack(A_orig, env.BATCH, env.BLOCK_IN), ctx)
    B_nd = tvm.nd.array(pack(B_orig, env.BLOCK_OUT, env.BLOCK_IN), ctx)
    C_nd = tvm.nd.array(np.zeros((o, m, env.BATCH, env.BLOCK_OUT)).astype(C.dtype), ctx)

    if env.TARGET in ["sim", "tsim"]:
        vta.simulator.clear_stats()
    f(A_nd, B_nd, C_nd)
    C_ref = np.dot(A_orig.astype(env.acc_dtype), B_orig.T.astype(env.acc_dtype)).astype(C.dtype)
    np.testing.assert_equal(pack(C_ref, env.BATCH, env.BLOCK_OUT), C_nd.numpy())
    sim_stats = vta.simulator.stats()
    assert sim_stats["gemm_counter"] == o * m * n  # one GEMM per (co, ko) tile pair
    assert sim_stats["inp_load_nbytes"] == o * n * env.INP_ELEM_BYTES


def test_get_started_tutorial_as_written():
    env = vta.get_env()
    remote = rpc.LocalSession()
    # Output channel factor m - total 64 x 16 = 1024 output channels
    m = 64
    # Batch factor o - total 1 x 1 = 1
    o = 1
    A = te.placeholder((o, m, env.BATCH, env.BLOCK_OUT), name="A", dtype="int32")
    B = te.placeholder((o, m, env.BATCH, env.BLOCK_OUT), name="B", dtype="int32")
    A_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: B(*i), "B_buf")
    C_buf = te.compute(
        (o, m, env.BATCH, env.BLOCK_OUT),
        lambda *i: A_buf(*i).astype(env.acc_dtype) + B_buf(*i).astype(env.acc_dtype),
        name="C_buf")
    C = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda *i: C_buf(*i).astype(env.inp_dtype),
                   name="C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.acc_scope)
    s[B_buf].set_scope(env.acc_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].pragma(C_buf.op.axis[0], env.alu)
    with vta.build_config():
        text = str(vta.lower(s, [A, B, C], simple_mode=True))
    assert "VTAUopPush" in text
    my_vadd = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="my_vadd")
    f = deploy(remote, my_vadd, "vadd.o")
    ctx = remote.ext_dev(0)
    A_orig = np.random.randint(-128, 128, size=(o * env.BATCH, m * env.BLOCK_OUT)).astype(A.dtype)
    B_orig = np.random.randint(-128, 128, size=(o * env.BATCH, m * env.BLOCK_OUT)).astype(B.dtype)
    A_nd = tvm.nd.array(pack(A_orig, env.BATCH, env.BLOCK_OUT), ctx)
    B_nd = tvm.nd.array(pack(B_orig, env.BATCH, env.BLOCK_OUT), ctx)
    C_nd = tvm.nd.array(np.zeros((o, m, env.BATCH, env.BLOCK_OUT)).astype(C.dtype), ctx)
    vta.simulator.clear_stats()
    f(A_nd, B_nd, C_nd)
    C_ref = (A_orig.astype(env.acc_dtype) + B_orig.astype(env.acc_dtype)).astype(C.dtype)
    np.testing.assert_equal(pack(C_ref, env.BATCH, env.BLOCK_OUT), C_nd.numpy())
    assert vta.simulator.stats()["alu_counter"] > 0
