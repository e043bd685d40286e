"""The VTA simulator through the runtime API: every instruction kind against numpy, blocked
matmul and conv programs, dependency tokens (deadlock detection, latency hiding), errors and
stats, on the default and other hardware configurations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmpy.vta import hw_config as hc
from tvmpy.vta import isa, simulator
from tvmpy.vta.runtime import DEBUG_FORCE_SERIAL, CommandQueue, RuntimeAPIError

from . import programs
from .programs import C, L, S

SMALL_BLOCK = hc.HardwareConfig(log_block_in=3, log_block_out=3, log_inp_buff_size=14,
                                log_wgt_buff_size=16, log_acc_buff_size=16)
CONFIGS = {"default": hc.default_config(), "batch2": hc.HardwareConfig(log_batch=1),
           "block32": hc.HardwareConfig(log_block_in=5, log_block_out=5),
           "block8": SMALL_BLOCK, "block16x32": hc.HardwareConfig(log_block_out=5)}


def rand(rng, shape, dtype=np.int8, lo=None, hi=None):
    info = np.iinfo(dtype)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1,
                        shape, dtype=dtype)


def wrap(x):
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32 - 2**31).astype(np.int64)


def acc_roundtrip(cq, x, program):
    """Load int32 tiles ``x`` (n, B, BO) into acc[0:n] (and ``program`` adds compute), store
    the int8 narrowing back; returns what DRAM holds."""
    cfg = cq.config
    n = x.shape[0]
    xb = programs.upload(cq, x)
    out = cq.alloc_buffer(n * cfg.OUT_ELEM_BYTES)
    cq.load_buffer_2d(xb, 0, n, 1, n, 0, 0, 0, 0, 0, hc.MEM_ID_ACC)
    program()
    cq.dep_push(C, S)
    cq.dep_pop(C, S)
    cq.store_buffer_2d(0, hc.MEM_ID_OUT, out, 0, n, 1, n)
    cq.synchronize()
    return out.view(np.int8)[:x.size].reshape(x.shape)


# ---- DMA -------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg", [CONFIGS["default"], CONFIGS["batch2"]], ids=["default", "b2"])
def test_load_2d_strided_padded(cfg):
    rng = np.random.default_rng(1)
    cq = CommandQueue(cfg)
    b, bi = cfg.BATCH, cfg.BLOCK_IN
    rows, cols = 7, 11                                     # a 7 x 11 tile image in DRAM
    img = rand(rng, (rows, cols, b, bi))
    buf = programs.upload(cq, img)
    y0, x0, ys, xs = 2, 3, 4, 5                            # a 4 x 5 window at (2, 3)
    pads = dict(x_pad_before=1, y_pad_before=2, x_pad_after=3, y_pad_after=1)
    cq.load_buffer_2d(buf, y0 * cols + x0, xs, ys, cols, pads["x_pad_before"],
                      pads["y_pad_before"], pads["x_pad_after"], pads["y_pad_after"], 9,
                      hc.MEM_ID_INP)
    cq.device.buffers.inp[:] = 77                          # stale contents the pads overwrite
    cq.synchronize()
    want = np.pad(img[y0:y0 + ys, x0:x0 + xs], ((2, 1), (1, 3), (0, 0), (0, 0)))
    got = cq.device.buffers.inp[9:9 + want.shape[0] * want.shape[1]].reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    assert cq.device.buffers.inp[8].min() == 77 == cq.device.buffers.inp[9 + got.size // (b * bi)].max()


def test_acc_load_padding_and_strided_store():
    """An acc block loaded with padding, passed through an ALU, stored with a row stride."""
    cfg = hc.default_config()
    rng = np.random.default_rng(2)
    cq = CommandQueue(cfg)
    x = rand(rng, (3, 4, 1, 16), np.int32, -300, 300)
    xb = programs.upload(cq, x)
    out = cq.alloc_buffer(5 * 9 * cfg.OUT_ELEM_BYTES)
    out.view(np.int8)[:] = 55
    cq.load_buffer_2d(xb, 0, 4, 3, 4, 1, 1, 0, 1, 0, hc.MEM_ID_ACC)   # -> 5 x 5 tiles

    def add0():
        cq.uop_loop_begin(25, 1, 1, 0)
        cq.uop_push(1, 0, 0, 0, 0, hc.ALU_OPCODE_ADD, 1, 0)
        cq.uop_loop_end()

    cq.push_alu_op("add0", add0)
    cq.dep_push(C, S)
    cq.dep_pop(C, S)
    cq.store_buffer_2d(0, hc.MEM_ID_OUT, out, 2, 5, 5, 9)              # rows 9 tiles apart
    cq.synchronize()
    padded = np.pad(x, ((1, 1), (1, 0), (0, 0), (0, 0))).astype(np.int8)
    got = out.view(np.int8).reshape(5, 9, 1, 16)
    np.testing.assert_array_equal(got[:, 2:7], padded)
    assert (got[:, :2] == 55).all() and (got[:, 7:] == 55).all()


# ---- GEMM ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_blocked_matmul(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(3)
    m, k, n = 7, 3, 5                                      # primes: chunks do not divide
    a = rand(rng, (m, k, cfg.BATCH, cfg.BLOCK_IN))
    w = rand(rng, (n, k, cfg.BLOCK_OUT, cfg.BLOCK_IN))
    cq = CommandQueue(cfg)
    got = programs.matmul(cq, a, w, shift=9, m_chunk=3, nslots=2)
    np.testing.assert_array_equal(got, programs.matmul_ref(a, w, 9))


def test_gemm_accumulates_with_wraparound_and_reset():
    cfg = hc.default_config()
    cq = CommandQueue(cfg)
    big = np.full((1, 1, 1, 16), -128, np.int8)            # each GEMM adds 16 * 2^14 = 2^18
    a_buf, w_buf = programs.upload(cq, big), programs.upload(cq, np.full((1, 1, 16, 16), -128,
                                                                           np.int8))
    cq.load_buffer_2d(a_buf, 0, 1, 1, 1, 0, 0, 0, 0, 0, hc.MEM_ID_INP)
    cq.load_buffer_2d(w_buf, 0, 1, 1, 1, 0, 0, 0, 0, 0, hc.MEM_ID_WGT)
    cq.dep_push(L, C)
    cq.dep_pop(L, C)

    def reset():
        cq.uop_push(0, 1, 0, 0, 0, 0, 0, 0)

    def gemm():                                            # 2^13 + 1 accumulations into acc[0]
        cq.uop_loop_begin(8193, 0, 0, 0)
        cq.uop_push(0, 0, 0, 0, 0, 0, 0, 0)
        cq.uop_loop_end()

    cq.push_gemm_op("r", reset)
    cq.push_gemm_op("g", gemm)
    cq.synchronize()
    want = wrap(8193 * 2**18)
    assert (cq.device.buffers.acc[0] == want).all() and want != 8193 * 2**18
    assert (cq.device.buffers.out[0] == np.int8(want & 0xFF if want & 0x80 == 0 else
                                                (want & 0xFF) - 256)).all()
    cq.push_gemm_op("r", reset)                            # cached kernel, reset clears
    cq.synchronize()
    assert (cq.device.buffers.acc[0] == 0).all()


@pytest.mark.parametrize("pad", [0, 1, 2])
def test_small_conv(pad):
    cfg = hc.default_config()
    rng = np.random.default_rng(4 + pad)
    x = rand(rng, (2, 5, 7, 1, 16))                        # 32 channels, 5 x 7
    w = rand(rng, (3, 2, 3, 3, 16, 16))                    # 48 output channels, 3 x 3
    cq = CommandQueue(cfg)
    got = programs.conv2d(cq, x, w, pad, shift=8)
    want = programs.conv_ref(x, w, pad, 8)
    np.testing.assert_array_equal(got, want)
    assert 0 < (want > 0).mean() < 1


def test_conv_other_config():
    cfg = CONFIGS["batch2"]
    rng = np.random.default_rng(5)
    x = rand(rng, (1, 4, 3, 2, 16))
    w = rand(rng, (2, 1, 3, 3, 16, 16))
    np.testing.assert_array_equal(programs.conv2d(CommandQueue(cfg), x, w, 1, 7),
                                  programs.conv_ref(x, w, 1, 7))


# ---- ALU -------------------------------------------------------------------------------------
def _alu_ref(op, x, y):
    x, y = int(x), int(y)
    if op == hc.ALU_OPCODE_MIN:
        r = min(x, y)
    elif op == hc.ALU_OPCODE_MAX:
        r = max(x, y)
    elif op == hc.ALU_OPCODE_ADD:
        r = x + y
    else:
        r = x >> min(y, 31) if y >= 0 else x << min(-y, 32)
    return ((r + 2**31) % 2**32) - 2**31


@pytest.mark.parametrize("op", sorted(hc.ALU_NAMES), ids=hc.ALU_NAMES.values())
@pytest.mark.parametrize("use_imm", [True, False], ids=["imm", "tensor"])
def test_alu_ops(op, use_imm):
    cfg = hc.default_config()
    rng = np.random.default_rng(10 + op)
    n = 6
    x = rand(rng, (2 * n, 1, 16), np.int32)
    x[0, 0, :4] = [2**31 - 1, -2**31, 5, -7]
    if op == hc.ALU_OPCODE_SHR:
        x[n:] = rng.integers(-40, 41, x[n:].shape)          # shift amounts, both ways
    imm = {hc.ALU_OPCODE_SHR: -3, hc.ALU_OPCODE_ADD: -32768}.get(op, 1234)
    cq = CommandQueue(cfg)

    def kernel():                                           # acc[i] = op(acc[i], acc[n + i])
        cq.uop_loop_begin(n, 1, 1, 0)
        cq.uop_push(1, 0, 0, n, 0, op, int(use_imm), imm)
        cq.uop_loop_end()

    got = acc_roundtrip(cq, x, lambda: cq.push_alu_op(("alu", op, use_imm), kernel))
    want = x.astype(np.int64)
    for i in range(n):
        for j in range(16):
            y = imm if use_imm else x[n + i, 0, j]
            want[i, 0, j] = _alu_ref(op, x[i, 0, j], y)
    np.testing.assert_array_equal(got[:n], want[:n].astype(np.int8))
    np.testing.assert_array_equal(cq.device.buffers.acc[:n], want[:n])


@pytest.mark.parametrize("op, reduce", [(hc.ALU_OPCODE_MAX, np.max), (hc.ALU_OPCODE_MIN, np.min),
                                        (hc.ALU_OPCODE_ADD, np.sum)])
def test_alu_reduction_with_repeated_destination(op, reduce):
    """acc[0] = op over acc[0..8] (the destination repeats), and acc[9] += 7 four times."""
    cfg = hc.default_config()
    rng = np.random.default_rng(20)
    x = rand(rng, (10, 1, 16), np.int32)
    cq = CommandQueue(cfg)

    def kernel():
        cq.uop_loop_begin(8, 0, 1, 0)
        cq.uop_push(1, 0, 0, 1, 0, op, 0, 0)
        cq.uop_loop_end()

    def add_imm():
        cq.uop_loop_begin(4, 0, 0, 0)
        cq.uop_push(1, 0, 9, 0, 0, hc.ALU_OPCODE_ADD, 1, 7)
        cq.uop_loop_end()

    got = acc_roundtrip(cq, x, lambda: (cq.push_alu_op(("red", op), kernel),
                                        cq.push_alu_op("add7", add_imm)))
    want = wrap(reduce(x[:9].astype(np.int64), axis=0))
    np.testing.assert_array_equal(cq.device.buffers.acc[0], want)
    np.testing.assert_array_equal(got[0], want.astype(np.int8))
    np.testing.assert_array_equal(got[9], (x[9].astype(np.int64) + 28).astype(np.int8))


def test_alu_reads_its_own_results():
    """A prefix sum: acc[i] += acc[i - 1], each micro-op reading the one before's result."""
    cfg = hc.default_config()
    rng = np.random.default_rng(21)
    x = rand(rng, (6, 1, 16), np.int32, -50, 50)
    cq = CommandQueue(cfg)

    def kernel():
        cq.uop_loop_begin(5, 1, 1, 0)
        cq.uop_push(1, 0, 1, 0, 0, hc.ALU_OPCODE_ADD, 0, 0)
        cq.uop_loop_end()

    got = acc_roundtrip(cq, x, lambda: cq.push_alu_op("scan", kernel))
    # tile 0 was only loaded: as in the hardware, only GEMM/ALU results reach the out buffer
    np.testing.assert_array_equal(got[1:], np.cumsum(x, axis=0)[1:].astype(np.int8))
    assert (got[0] == 0).all()


def test_narrowing_store_wraps():
    cfg = hc.default_config()
    x = np.arange(-400, 400, 50, dtype=np.int32).reshape(1, 1, 16)
    cq = CommandQueue(cfg)

    def kernel():
        cq.uop_push(1, 0, 0, 0, 0, hc.ALU_OPCODE_ADD, 1, 0)

    got = acc_roundtrip(cq, x, lambda: cq.push_alu_op("id", kernel))
    np.testing.assert_array_equal(got, x.astype(np.int8))
    assert got.min() < 0 < got.max() and not np.array_equal(got, np.clip(x, -128, 127))


# ---- runtime: kernel cache, uop loads, dependency flags ---------------------------------------
def test_kernel_cache_and_uop_loads():
    cfg = hc.default_config()
    cq = CommandQueue(cfg)
    calls = []

    def kernel():
        calls.append(1)
        cq.uop_push(1, 0, 0, 0, 0, hc.ALU_OPCODE_ADD, 1, 1)

    for _ in range(3):
        cq.push_alu_op("k", kernel)
    kinds = [str(i).split()[0:2] for i in cq.insns]
    assert calls == [1]                                    # recorded once
    assert kinds.count(["LOAD", "UOP"]) == 1               # loaded once while resident
    cq.synchronize()
    cq.push_alu_op("k", kernel)                            # not resident across runs
    assert calls == [1] and [str(i).split()[:2] for i in cq.insns] == [["LOAD", "UOP"],
                                                                        ["ALU", "add"]]
    cq.synchronize()


def test_uop_buffer_eviction():
    """A 16-entry uop buffer: kernels evict each other, reloads keep results right."""
    cfg = hc.HardwareConfig(log_uop_buff_size=6)
    rng = np.random.default_rng(22)
    x = rand(rng, (10, 1, 16), np.int32, -100, 100)
    cq = CommandQueue(cfg)

    def adder(i):
        def f():
            for j in range(6):
                cq.uop_push(1, 0, j, 0, 0, hc.ALU_OPCODE_ADD, 1, i)
        return f

    def program():
        for i in [1, 2, 3, 1, 2, 3]:
            cq.push_alu_op(("add", i), adder(i))

    got = acc_roundtrip(cq, x, program)
    assert sum(str(i).startswith("LOAD UOP sram") for i in cq.last_stream) == 6
    np.testing.assert_array_equal(got[:6], (x[:6] + 12).astype(np.int8))


def test_dep_flags_attach_like_runtime_cc():
    cfg = hc.default_config()
    cq = CommandQueue(cfg)
    buf = cq.alloc_buffer(4096)
    cq.load_buffer_2d(buf, 0, 1, 1, 1, 0, 0, 0, 0, 0, hc.MEM_ID_INP)
    cq.dep_push(L, C)                                      # rides on the load
    assert cq.insns[-1].push_next and len(cq.insns) == 1
    cq.dep_pop(L, C)                                       # waits with the next compute insn
    cq.push_alu_op("k", lambda: cq.uop_push(1, 0, 0, 0, 0, 0, 1, 0))
    assert cq.insns[1].pop_prev and str(cq.insns[1]).startswith("LOAD UOP")
    cq.dep_push(C, S)
    assert cq.insns[-1].push_next
    cq.dep_push(C, S)                                      # a second push needs a no-op
    assert cq.insns[-1].x_size == 0 and cq.insns[-1].push_next and len(cq.insns) == 4
    cq.dep_pop(C, S)
    cq.dep_pop(C, S)                                       # second pop commits the first
    assert cq.insns[-1].opcode == hc.OPCODE_STORE and cq.insns[-1].pop_prev
    cq.store_buffer_2d(0, hc.MEM_ID_OUT, buf, 0, 1, 1, 1)
    assert cq.insns[-1].pop_prev and cq.insns[-1].x_size == 1
    cq.synchronize()


# ---- tokens: deadlock and latency hiding -----------------------------------------------------
def test_deadlock_is_reported():
    """Compute pops one load token more than the loads push (the stream's last no-op)."""
    cfg = hc.default_config()
    cq = CommandQueue(cfg)
    cq.dep_pop(L, C)
    cq.push_alu_op("k", lambda: cq.uop_push(1, 0, 0, 0, 0, 0, 1, 0))
    with pytest.raises(simulator.DeadlockError) as err:
        cq.synchronize()
    text = str(err.value)
    assert "compute module blocked at instruction #4 (LOAD UOP nop [pop_prev pop_next])" in text
    assert "load->compute token and that queue is empty" in text
    assert cq.insns == []                                  # the queue is usable again
    cq.push_alu_op("k", lambda: None)
    cq.synchronize()


def test_deadlock_cycle_on_device():
    """Load waits for compute and compute for load: a hand-written stream, no hang."""
    cfg = hc.default_config()
    dev = simulator.Device(cfg, simulator.Dram())
    stream = [isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_INP, pop_next=True),
              isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_UOP, pop_prev=True,
                          push_prev=True),
              isa.FinishInsn()]
    with pytest.raises(simulator.DeadlockError) as err:
        dev.run_insns(stream)
    assert "load module blocked at instruction #0" in str(err.value)
    assert "compute module blocked at instruction #1" in str(err.value)
    with pytest.raises(simulator.SimulatorError, match="no prev module to pop"):
        dev.run_insns([isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_WGT,
                                   pop_prev=True)])


def test_latency_hiding():
    """Two interleaved streams (two buffer slots) beat the serial one, same results."""
    cfg = hc.default_config()
    rng = np.random.default_rng(30)
    a = rand(rng, (32, 8, 1, 16))
    w = rand(rng, (4, 8, 16, 16))
    want = programs.matmul_ref(a, w, 10)
    cycles = {}
    for nslots in (1, 2):
        simulator.clear_stats()
        got = programs.matmul(CommandQueue(cfg), a, w, 10, m_chunk=4, nslots=nslots)
        np.testing.assert_array_equal(got, want)
        s = simulator.stats()
        cycles[nslots] = s["cycle_count"]
        assert s["gemm_counter"] == 32 * 8 * 4
        assert 0 < s["gemm_utilization"] < 1
    assert cycles[2] < cycles[1]
    # the same interleaved stream forced serial (TVM's VTA_DEBUG_FORCE_SERIAL): no overlap left
    simulator.clear_stats()
    cq = CommandQueue(cfg)
    cq.set_debug_flag(DEBUG_FORCE_SERIAL)
    np.testing.assert_array_equal(programs.matmul(cq, a, w, 10, m_chunk=4, nslots=2), want)
    s = simulator.stats()
    assert s["cycle_count"] > cycles[1] > cycles[2]
    assert s["cycle_count"] >= (s["load_busy_cycles"] + s["compute_busy_cycles"]
                                + s["store_busy_cycles"] + s["load_dram_stall_cycles"]
                                + s["compute_dram_stall_cycles"] + s["store_dram_stall_cycles"])


def test_missing_war_token_is_a_real_race():
    """Without the compute->load token, the load of the next chunk overwrites the input slot
    while the compute still needs it: the modules really run concurrently."""
    cfg = hc.default_config()
    rng = np.random.default_rng(31)
    a, w = rand(rng, (6, 4, 1, 16)), rand(rng, (3, 4, 16, 16))
    want = programs.matmul_ref(a, w, 9)
    np.testing.assert_array_equal(programs.matmul(CommandQueue(cfg), a, w, 9, 2, 1), want)
    racy = programs.matmul(CommandQueue(cfg), a, w, 9, 2, 1, war=False)
    assert not np.array_equal(racy, want)
    np.testing.assert_array_equal(racy[4:], want[4:])          # the last chunk is not overwritten


# ---- errors and stats ------------------------------------------------------------------------
def test_errors_are_named():
    cfg = hc.default_config()
    cq = CommandQueue(cfg)
    buf = cq.alloc_buffer(64)
    cq.load_buffer_2d(buf, 0, 8, 1, 8, 0, 0, 0, 0, 0, hc.MEM_ID_INP)   # 128 bytes of 64
    with pytest.raises(simulator.DramAccessError, match=r"instruction #0 \(LOAD INP.*outside"):
        cq.synchronize()
    cq.load_buffer_2d(buf, 0, 1, 1, 1, 0, 0, 0, 0, cfg.INP_BUFF_DEPTH - 1, hc.MEM_ID_INP)
    cq.load_buffer_2d(buf, 0, 1, 1, 1, 1, 0, 0, 0, cfg.INP_BUFF_DEPTH - 1, hc.MEM_ID_INP)
    with pytest.raises(simulator.BufferOverflowError, match="instruction #1 .*past the end "
                                                            "of the inp buffer"):
        cq.synchronize()
    cq.push_gemm_op("g", lambda: cq.uop_push(0, 0, 0, 0, cfg.WGT_BUFF_DEPTH - 1, 0, 0, 0))
    cq.push_gemm_op("g2", lambda: (cq.uop_loop_begin(2, 0, 0, 1),
                                   cq.uop_push(0, 0, 0, 0, cfg.WGT_BUFF_DEPTH - 1, 0, 0, 0),
                                   cq.uop_loop_end()))
    with pytest.raises(simulator.BufferOverflowError, match="wgt index 1024 past the end"):
        cq.synchronize()
    with pytest.raises(RuntimeAPIError, match="outside a micro-kernel"):
        cq.uop_push(0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(RuntimeAPIError, match="one mode"):
        cq.push_gemm_op("mix", lambda: (cq.uop_push(0, 0, 0, 0, 0, 0, 0, 0),
                                        cq.uop_push(1, 0, 0, 0, 0, 0, 0, 0)))
    with pytest.raises(RuntimeAPIError, match="recorded in GEMM mode"):
        cq.push_alu_op("g", lambda: None)
    with pytest.raises(RuntimeAPIError, match="stores read the out buffer"):
        cq.store_buffer_2d(0, hc.MEM_ID_ACC, buf, 0, 1, 1, 1)
    with pytest.raises(RuntimeAPIError, match="neighbouring stages"):
        cq.dep_push(L, S)
    with pytest.raises(isa.IsaError, match="x_pad_0=20"):
        cq.load_buffer_2d(buf, 0, 1, 1, 1, 20, 0, 0, 0, 0, hc.MEM_ID_INP)
    with pytest.raises(RuntimeAPIError, match="not a multiple of the 256-byte wgt tile"):
        cq.load_buffer_2d(buf.addr + 16, 0, 1, 1, 1, 0, 0, 0, 0, 0, hc.MEM_ID_WGT)


def test_timeout_and_stats():
    cfg = hc.default_config()
    rng = np.random.default_rng(40)
    a, w = rand(rng, (4, 2, 1, 16)), rand(rng, (3, 2, 16, 16))
    simulator.clear_stats()
    programs.matmul(CommandQueue(cfg), a, w, 8, m_chunk=2, nslots=2)
    s = simulator.stats()
    assert s["runs"] == 1 and s["gemm_counter"] == 4 * 2 * 3 and s["alu_counter"] == 12
    assert s["inp_load_nbytes"] == a.nbytes and s["wgt_load_nbytes"] == w.nbytes
    assert s["out_store_nbytes"] == 4 * 3 * 16 == s["dram_write_bytes"]
    assert s["dram_read_bytes"] >= a.nbytes + w.nbytes + s["uop_load_nbytes"]
    assert s["gemm_count"] == 4 and s["alu_count"] == 2 and s["finish_count"] == 1
    assert s["store_count"] == 2 and s["load_count"] == 3 + 6
    assert s["compute_busy_cycles"] <= s["cycle_count"]
    assert s["load_busy_cycles"] + s["load_stall_cycles"] <= s["cycle_count"]
    simulator.clear_stats()
    assert simulator.stats()["cycle_count"] == 0
    cq = CommandQueue(cfg)
    cq.push_alu_op("k", lambda: cq.uop_push(1, 0, 0, 0, 0, 0, 1, 0))
    with pytest.raises(simulator.DeviceTimeoutError, match="more than the 10"):
        cq.synchronize(wait_cycles=10)


@pytest.mark.parametrize("rows, nslots", [(2, 1), (3, 2), (5, 2)])
def test_tiled_conv_virtual_threads(rows, nslots):
    """Row tiles whose border rows are padded by the DMA; 1 or 2 interleaved slots."""
    cfg = hc.default_config()
    rng = np.random.default_rng(50)
    x = rand(rng, (2, 7, 6, 1, 16))
    w = rand(rng, (2, 2, 3, 3, 16, 16))
    got = programs.conv2d_tiled(CommandQueue(cfg), x, w, 8, rows, nslots)
    np.testing.assert_array_equal(got, programs.conv_ref(x, w, 1, 8))


# ---- random GEMM / ALU instructions against the hardware's loop nest, written out -------------
def _device_with_random_buffers(cfg, seed):
    rng = np.random.default_rng(seed)
    dev = simulator.Device(cfg, simulator.Dram())
    bufs = dev.buffers
    bufs.inp[:] = rand(rng, bufs.inp.shape)
    bufs.wgt[:] = rand(rng, bufs.wgt.shape)
    bufs.acc[:] = rand(rng, bufs.acc.shape, np.int32)
    return dev, rng


def _load_uops(dev, uops, base):
    for j, u in enumerate(uops):
        dev.buffers.uop[base + j] = isa.encode_uop(u, dev.cfg)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_gemm_matches_loop_nest(data):
    cfg = data.draw(st.sampled_from([CONFIGS["default"], CONFIGS["batch2"]]))
    dev, rng = _device_with_random_buffers(cfg, data.draw(st.integers(0, 1000)))
    nu = data.draw(st.integers(1, 5))
    uops = [isa.Uop(data.draw(st.integers(0, 30)), data.draw(st.integers(0, 30)),
                    data.draw(st.integers(0, 30))) for _ in range(nu)]
    f = st.integers(0, 4)
    insn = isa.GemmInsn(uop_bgn=3, uop_end=3 + nu, iter_out=data.draw(st.integers(1, 4)),
                        iter_in=data.draw(st.integers(1, 5)), dst_factor_out=data.draw(f),
                        dst_factor_in=data.draw(f), src_factor_out=data.draw(f),
                        src_factor_in=data.draw(f), wgt_factor_out=data.draw(f),
                        wgt_factor_in=data.draw(f), reset=data.draw(st.booleans()))
    _load_uops(dev, uops, 3)
    b = dev.buffers
    acc = b.acc.astype(np.int64)
    for o in range(insn.iter_out):
        for i in range(insn.iter_in):
            for u in uops:
                d = u.dst_idx + o * insn.dst_factor_out + i * insn.dst_factor_in
                s = u.src_idx + o * insn.src_factor_out + i * insn.src_factor_in
                w = u.wgt_idx + o * insn.wgt_factor_out + i * insn.wgt_factor_in
                if insn.reset:
                    acc[d] = 0
                else:
                    acc[d] += b.inp[s].astype(np.int64) @ b.wgt[w].astype(np.int64).T
    dev.run_insns([insn])
    np.testing.assert_array_equal(b.acc, wrap(acc))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_alu_matches_loop_nest(data):
    cfg = CONFIGS["default"]
    dev, rng = _device_with_random_buffers(cfg, data.draw(st.integers(0, 1000)))
    b = dev.buffers
    nu = data.draw(st.integers(1, 4))
    uops = [isa.Uop(data.draw(st.integers(0, 12)), data.draw(st.integers(0, 12)), 0)
            for _ in range(nu)]
    f = st.integers(0, 3)
    op = data.draw(st.sampled_from(sorted(hc.ALU_NAMES)))
    if op == hc.ALU_OPCODE_SHR:
        b.acc[:] = rng.integers(-40, 41, b.acc.shape)
    insn = isa.AluInsn(uop_bgn=0, uop_end=nu, iter_out=data.draw(st.integers(1, 3)),
                       iter_in=data.draw(st.integers(1, 4)), dst_factor_out=data.draw(f),
                       dst_factor_in=data.draw(f), src_factor_out=data.draw(f),
                       src_factor_in=data.draw(f), alu_opcode=op,
                       use_imm=data.draw(st.booleans()), imm=data.draw(st.integers(-40, 40)))
    _load_uops(dev, uops, 0)
    acc = b.acc.astype(np.int64)
    for o in range(insn.iter_out):
        for i in range(insn.iter_in):
            for u in uops:
                d = u.dst_idx + o * insn.dst_factor_out + i * insn.dst_factor_in
                s = u.src_idx + o * insn.src_factor_out + i * insn.src_factor_in
                for j in range(acc.shape[2]):
                    y = insn.imm if insn.use_imm else acc[s, 0, j]
                    acc[d, 0, j] = _alu_ref(op, acc[d, 0, j], y)
    dev.run_insns([insn])
    np.testing.assert_array_equal(b.acc, acc)


def test_large_tiles_are_aligned():
    """BLOCK 128: a 16 KiB weight tile, larger than a page; buffers still align to it."""
    cfg = hc.HardwareConfig(log_block_in=7, log_block_out=7, log_wgt_buff_size=18,
                            log_inp_buff_size=12, log_acc_buff_size=14)
    rng = np.random.default_rng(60)
    cq = CommandQueue(cfg)
    cq.alloc_buffer(100)
    a = rand(rng, (2, 1, 1, 128))
    w = rand(rng, (3, 1, 128, 128))
    got = programs.matmul(cq, a, w, 12, m_chunk=1, nslots=2)
    np.testing.assert_array_equal(got, programs.matmul_ref(a, w, 12))


def test_dram_allocation_reuses_freed_ranges():
    dram = simulator.Dram()
    a, b, c = dram.alloc(100), dram.alloc(5000), dram.alloc(10)
    assert a.addr % 4096 == 0 and b.addr >= a.addr + 4096 and c.addr >= b.addr + 5000
    dram.free(b)
    d = dram.alloc(4096)                      # fits b's old place
    assert a.addr < d.addr < c.addr
    e = dram.alloc(100, align=16384)
    assert e.addr % 16384 == 0 and e.addr > c.addr
    with pytest.raises(ValueError, match="not allocated"):
        dram.free(b)
    with pytest.raises(simulator.DramAccessError, match="outside every allocated buffer"):
        dram.find(b.addr + 4096, 8)
