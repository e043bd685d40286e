"""The cycle model's command queues (fetch -> load/compute/store: 512 entries on TVM's FPGA
design, 8 in its HLS C simulation, which these small streams use) and its ALU initiation
interval (TVM's HLS design: GEMM at II=1, ALU at II=2)."""

from __future__ import annotations

import numpy as np
import pytest

from tvmpy.vta import hw_config as hc
from tvmpy.vta import isa, simulator
from tvmpy.vta.runtime import CommandQueue

from . import programs
from .test_simulator import rand


def _device(depth, seed=0):
    cfg = hc.default_config()
    dev = simulator.Device(cfg, simulator.Dram(), cmd_queue_depth=depth)
    rng = np.random.default_rng(seed)
    b = dev.buffers
    b.inp[:] = rand(rng, b.inp.shape)
    b.wgt[:] = rand(rng, b.wgt.shape)
    b.acc[:] = rand(rng, b.acc.shape, np.int32)
    dev.buffers.uop[0] = isa.encode_uop(isa.Uop(0, 0, 0), cfg)
    return dev, rng


def _gemm(n_out, **flags):
    return isa.GemmInsn(uop_bgn=0, uop_end=1, iter_out=n_out, iter_in=1, dst_factor_out=1,
                        src_factor_out=1, wgt_factor_out=0, **flags)


def _inp_load(dev, rng, rows, **flags):
    cfg = dev.cfg
    src = dev.dram.alloc(rows * cfg.INP_ELEM_BYTES)
    src.view(np.int8)[:] = rand(rng, (src.nbytes,))
    return isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_INP, sram_base=1000,
                       dram_base=src.addr // cfg.INP_ELEM_BYTES, y_size=1, x_size=rows,
                       x_stride=rows, **flags)


def _run(depth, build):
    dev, rng = _device(depth)
    stats = dev.run_insns(build(dev, rng)).as_dict()
    return stats, dev.buffers


def test_full_compute_queue_stalls_fetch_and_the_load_behind_it():
    """Ten long GEMMs, then an independent load: with unbounded queues the load overlaps the
    GEMMs; with 8-entry queues GEMM #9 enters the compute queue only when compute takes GEMM #1,
    after GEMM #0 has run, and the load behind it in the stream waits as long. Same buffer
    contents either way."""
    n = 100

    def build(dev, rng):
        return [_gemm(n) for _ in range(10)] + [_inp_load(dev, rng, 600)]

    free, free_bufs = _run(None, build)
    fifo, fifo_bufs = _run(8, build)
    assert free["fetch_queue_stall_cycles"] == 0
    cfg = hc.default_config()
    per_insn = hc.INS_BYTES // int(cfg.dram_bytes_per_cycle)
    gemm_cycles = n + simulator.GEMM_PIPELINE_DEPTH
    # GEMM #1 is taken when GEMM #0 (fetched at lat + per_insn) ends; #9 streamed at lat + 10 per
    assert fifo["fetch_queue_stall_cycles"] == per_insn + gemm_cycles - 10 * per_insn
    assert fifo["cycle_count"] > free["cycle_count"]
    load = fifo["load_busy_cycles"]
    assert free["cycle_count"] < 10 * gemm_cycles + 2 * load // 3     # the load overlapped
    assert fifo["cycle_count"] >= gemm_cycles + load                     # it waited for one
    for name in ("inp", "wgt", "acc", "out"):
        np.testing.assert_array_equal(getattr(fifo_bufs, name), getattr(free_bufs, name))


def test_queue_depth_only_counts_each_modules_own_queue():
    """Eight GEMMs fill the compute queue but not the load queue: no stall for the load."""
    def build(dev, rng):
        return [_gemm(300) for _ in range(8)] + [_inp_load(dev, rng, 64)]

    fifo, _ = _run(8, build)
    free, _ = _run(None, build)
    assert fifo["fetch_queue_stall_cycles"] == 0
    assert fifo["cycle_count"] == free["cycle_count"]


def test_full_queue_in_front_of_the_token_producer_is_a_deadlock():
    """Ten GEMMs each pop a load->compute token that loads later in the stream push. Unbounded
    queues run it; with 8 entries fetch can never reach the loads: a named deadlock, no hang."""
    def build(dev, rng):
        return ([_gemm(4, pop_prev=True) for _ in range(10)]
                + [_inp_load(dev, rng, 4, push_next=True) for _ in range(10)])

    free, _ = _run(None, build)
    assert free["gemm_count"] == 10 and free["load_count"] == 10
    with pytest.raises(simulator.DeadlockError) as err:
        _run(8, build)
    text = str(err.value)
    assert "compute module blocked at instruction #0" in text
    assert "load module waits for instruction #10" in text
    assert "fetch is stuck at instruction #9" in text
    assert "compute command queue is full (8 entries)" in text
    # nine GEMMs fit (one taken by the module + eight queued): no deadlock
    def nine(dev, rng):
        return ([_gemm(4, pop_prev=True) for _ in range(9)]
                + [_inp_load(dev, rng, 4, push_next=True) for _ in range(9)])

    assert _run(8, nine)[0]["gemm_count"] == 9


@pytest.mark.parametrize("n", [1, 7, 64])
def test_alu_runs_at_ii_2_and_gemm_at_ii_1(n):
    dev, _ = _device(None)
    alu = isa.AluInsn(uop_bgn=0, uop_end=1, iter_out=n, iter_in=1, dst_factor_out=1,
                      src_factor_out=1, alu_opcode=hc.ALU_OPCODE_ADD, use_imm=True, imm=3)
    s = dev.run_insns([alu]).as_dict()
    assert simulator.ALU_II == 2
    assert s["compute_busy_cycles"] == 2 * n + simulator.ALU_PIPELINE_DEPTH
    s = dev.run_insns([_gemm(n)]).as_dict()
    assert s["compute_busy_cycles"] == n + simulator.GEMM_PIPELINE_DEPTH


@pytest.mark.parametrize("depth", [None, 8, 2, 1])
@pytest.mark.parametrize("nslots", [1, 2])
def test_runtime_programs_are_exact_at_every_queue_depth(depth, nslots):
    """The runtime's streams (one slot, two interleaved slots) give numpy's result whatever the
    queue depth; the stall counter is zero only without a bound."""
    cfg = hc.default_config()
    rng = np.random.default_rng(30)
    a = rand(rng, (32, 8, 1, 16))
    w = rand(rng, (4, 8, 16, 16))
    cq = CommandQueue(cfg)
    cq.device.cmd_queue_depth = depth
    got = programs.matmul(cq, a, w, 10, m_chunk=4, nslots=nslots)
    np.testing.assert_array_equal(got, programs.matmul_ref(a, w, 10))
    stall = cq.last_stats.as_dict()["fetch_queue_stall_cycles"]
    assert (stall == 0) == (depth is None)


def test_queue_depth_is_checked_and_defaults_to_the_fpga_fifos():
    with pytest.raises(ValueError, match="cmd_queue_depth must be at least 1"):
        simulator.Device(hc.default_config(), simulator.Dram(), cmd_queue_depth=0)
    assert simulator.CMD_QUEUE_DEPTH == 512
    assert CommandQueue(hc.default_config()).device.cmd_queue_depth == 512
