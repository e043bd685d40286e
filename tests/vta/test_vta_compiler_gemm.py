"""TVM's VTA tutorials (matrix multiply, get started) ported with ``import tvmpy.vta as vta``,
and the lowering on awkward shapes, padding and virtual threads, run end to end on the
functional reference queue and compared with numpy."""

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.vta as vta
from tvmpy import te

from .compiler_helpers import gemm_compute


def _gemm_schedule(env, o, n, m, vthreads=1, tile_m=None):
    A, B, A_buf, B_buf, C_buf, C = gemm_compute(env, o, n, m)
    s = te.create_schedule(C.op)
    s[A_buf].set_scope(env.inp_scope)
    s[B_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    if vthreads > 1 or tile_m:
        tm = tile_m or m // vthreads
        co, ci_ = s[C].split(s[C].op.axis[1], factor=tm)
        co_o, co_i = s[C].split(co, nparts=vthreads) if vthreads > 1 else (None, co)
        s[C].reorder(*( [co_o] if co_o is not None else []), co_i, s[C].op.axis[0], ci_,
                     s[C].op.axis[2], s[C].op.axis[3])
        if co_o is not None:
            s[C].bind(co_o, te.thread_axis("cthread"))
        s[C_buf].compute_at(s[C], co_i)
        s[C].pragma(ci_, env.dma_copy)
    else:
        s[C].pragma(s[C].op.axis[0], env.dma_copy)
    ko, ki = s[C_buf].op.reduce_axis
    bo, co, bi, ci = s[C_buf].op.axis
    s[C_buf].reorder(ko, bo, co, bi, ci, ki)
    s[A_buf].compute_at(s[C_buf], ko)
    s[B_buf].compute_at(s[C_buf], ko)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[B_buf].pragma(s[B_buf].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(bi, env.gemm)
    return s, A, B, C


def _gemm_ref(env, a, b):
    o, n, m = a.shape[0], a.shape[1], b.shape[0]
    a2 = a.transpose(0, 2, 1, 3).reshape(o * env.BATCH, n * env.BLOCK_IN).astype(np.int32)
    b2 = b.transpose(0, 2, 1, 3).reshape(m * env.BLOCK_OUT, n * env.BLOCK_IN).astype(np.int32)
    c2 = (a2 @ b2.T).astype(np.int8)
    return c2.reshape(o, env.BATCH, m, env.BLOCK_OUT).transpose(0, 2, 1, 3)


def _run(env, f, o, n, m, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (o, n, env.BATCH, env.BLOCK_IN)).astype(np.int8)
    b = rng.integers(-128, 128, (m, n, env.BLOCK_OUT, env.BLOCK_IN)).astype(np.int8)
    ctx = tvm.cpu(0)
    A_nd = tvm.nd.array(a, ctx)
    B_nd = tvm.nd.array(b, ctx)
    C_nd = tvm.nd.array(np.zeros((o, m, env.BATCH, env.BLOCK_OUT), np.int8), ctx)
    f(A_nd, B_nd, C_nd)
    return C_nd.numpy(), _gemm_ref(env, a, b)


def test_matrix_multiply_tutorial_lowering_structure():
    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, 1, 16, 16)
    text = str(vta.lower(s, [A, B, C], simple_mode=True))
    for word in ("VTALoadBuffer2D", "VTAStoreBuffer2D", "VTAUopPush", "VTADepPush", "VTADepPop",
                 "vta.uop_kernel"):
        assert word in text, word
    assert "local.inp_buffer" not in text  # on-chip buffers are placed (tile indices)


@pytest.mark.parametrize("o,n,m", [(1, 16, 16), (1, 3, 2), (2, 5, 3)])
def test_matrix_multiply_tutorial(vta_queue, o, n, m):
    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, o, n, m)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="my_gemm")
    got, want = _run(env, f, o, n, m)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("vt", [1, 2, 4])
def test_virtual_threads_same_result(vta_queue, vt):
    env = vta.get_env()
    o, n, m = 1, 4, 8
    s, A, B, C = _gemm_schedule(env, o, n, m, vthreads=vt, tile_m=2)
    text = str(vta.lower(s, [A, B, C]))
    assert "virtual_thread" not in text
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
    got, want = _run(env, f, o, n, m, seed=vt)
    np.testing.assert_array_equal(got, want)


def test_save_load_roundtrip(vta_queue, tmp_path):
    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, 1, 3, 2)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="gemm")
    path = str(tmp_path / "gemm.o")
    f.save(path)
    g = tvm.runtime.load_module(path)
    got, want = _run(env, g, 1, 3, 2, seed=3)
    np.testing.assert_array_equal(got, want)


def test_rpc_local_session(vta_queue, tmp_path):
    from tvmpy import rpc

    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, 1, 2, 2)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host, name="gemm")
    path = str(tmp_path / "gemm.o")
    f.save(path)
    remote = rpc.LocalSession()
    remote.upload(path)
    g = remote.load_module("gemm.o")
    ctx = remote.ext_dev(0)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (1, 2, env.BATCH, env.BLOCK_IN)).astype(np.int8)
    b = rng.integers(-128, 128, (2, 2, env.BLOCK_OUT, env.BLOCK_IN)).astype(np.int8)
    c = tvm.nd.array(np.zeros((1, 2, env.BATCH, env.BLOCK_OUT), np.int8), ctx)
    g(tvm.nd.array(a, ctx), tvm.nd.array(b, ctx), c)
    np.testing.assert_array_equal(c.numpy(), _gemm_ref(env, a, b))


def test_virtual_threads_fewer_cycles():
    """Latency hiding: with 2 or 4 virtual threads the simulator's cycle count drops."""
    from tvmpy.vta.build import use_command_queue

    use_command_queue(None)
    env = vta.get_env()
    o, n, m = 2, 8, 8
    cycles = {}
    for vt in (1, 2, 4):
        s, A, B, C = _gemm_schedule(env, o, n, m, vthreads=vt, tile_m=2)
        f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
        vta.simulator.clear_stats()
        got, want = _run(env, f, o, n, m, seed=vt)
        np.testing.assert_array_equal(got, want)
        cycles[vt] = vta.simulator.stats()["cycle_count"]
    assert cycles[2] < cycles[1] and cycles[4] < cycles[1], cycles


def test_two_modules_share_a_queue(vta_queue):
    """Micro-kernels are cached per module: modules run alternately on one queue stay right."""
    env = vta.get_env()
    mods = []
    for o, n, m in [(1, 2, 3), (1, 3, 2)]:
        s, A, B, C = _gemm_schedule(env, o, n, m)
        mods.append((vta.build(s, [A, B, C], "ext_dev", env.target_host), o, n, m))
    for rnd in range(2):
        for f, o, n, m in mods:
            got, want = _run(env, f, o, n, m, seed=rnd)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("cfg", [{"LOG_BLOCK": 3, "LOG_ACC_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 13,
                                  "LOG_WGT_BUFF_SIZE": 16},
                                 {"LOG_BATCH": 1, "LOG_BLOCK": 4},
                                 {"LOG_BLOCK": 5}])
def test_other_hardware_configs(vta_queue, cfg, tmp_path):
    from tvmpy.vta.hw_config import HardwareConfig

    env = vta.Environment(HardwareConfig.from_dict(cfg))
    with env:
        assert vta.get_env() is env
        assert env.BLOCK_IN == 1 << cfg["LOG_BLOCK"] and env.BATCH == 1 << cfg.get("LOG_BATCH", 0)
        s, A, B, C = _gemm_schedule(env, 2, 3, 2)
        f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
        got, want = _run(env, f, 2, 3, 2, seed=5)
    np.testing.assert_array_equal(got, want)
    # saved and loaded, it runs on its own design outside the `with env:` (an RPC server's)
    path = str(tmp_path / "gemm.o")
    f.save(path)
    got, want = _run(env, tvm.runtime.load_module(path), 2, 3, 2, seed=6)
    np.testing.assert_array_equal(got, want)


def test_env_target():
    env = vta.get_env()
    assert env.target.kind == "ext_dev" and "vta" in env.target.keys


def test_tvm_build_ext_dev_names_vta_build():
    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, 1, 1, 1)
    with pytest.raises(ValueError, match="tvmpy.vta.build"):
        tvm.build(s, [A, B, C], target="ext_dev")


@pytest.mark.parametrize("o,n,m,tile_m", [(1, 3, 5, 2), (2, 2, 7, 3), (1, 1, 3, 2)])
def test_gemm_with_remainders(vta_queue, o, n, m, tile_m):
    """Output tiles split by a factor that does not divide them: the surplus GEMM calls are
    guarded, the copies bounded (zero-filled loads, shorter stores)."""
    env = vta.get_env()
    s, A, B, C = _gemm_schedule(env, o, n, m, tile_m=tile_m)
    f = vta.build(s, [A, B, C], "ext_dev", env.target_host)
    got, want = _run(env, f, o, n, m, seed=m)
    np.testing.assert_array_equal(got, want)
