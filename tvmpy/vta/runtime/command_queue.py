"""VTA's JIT runtime (TVM's vta/runtime/runtime.cc, in snake case).

A :class:`CommandQueue` builds one instruction stream per command stream: 2-D DMA loads and
stores, GEMM and ALU instructions whose micro-op kernels are recorded on first use and cached by
key (``push_gemm_op(key, finit)``, as ``VTAPushGEMMOp``'s uop handle), with the micro-op buffer
loads inserted when a kernel is not resident in the uop SRAM. ``dep_push``/``dep_pop`` attach
dependency flags to the neighbouring instructions exactly as runtime.cc does (a pop waits on
the next instruction of the popping stage, a push rides on the last instruction when it belongs
to the pushing stage, else a no-op carries it). ``synchronize`` closes the stream with FINISH,
writes it to DRAM and runs it on the simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ..hw_config import (
    MEM_ID_ACC,
    MEM_ID_INP,
    MEM_ID_OUT,
    MEM_ID_UOP,
    MEM_ID_WGT,
    MEM_NAMES,
    OPCODE_LOAD,
    OPCODE_STORE,
    STAGE_COMPUTE,
    STAGE_LOAD,
    STAGE_NAMES,
    STAGE_STORE,
    HardwareConfig,
    default_config,
)
from ..isa import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Uop,
    encode,
    encode_stream,
    encode_uop,
)
from ..simulator import Device, Dram, DramBuffer, Stats, record

# debug flags (TVM's runtime.h VTA_DEBUG_*)
DEBUG_DUMP_INSN = 1 << 1
DEBUG_DUMP_UOP = 1 << 2
DEBUG_SKIP_READ_BARRIER = 1 << 3
DEBUG_SKIP_WRITE_BARRIER = 1 << 4
DEBUG_FORCE_SERIAL = 1 << 5


class RuntimeAPIError(ValueError):
    """A call of the runtime API that cannot describe a valid VTA program."""


class UopKernel:
    """A recorded micro-op kernel: up to two affine loops around a micro-op sequence."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.loops: list[tuple[int, int, int, int]] = []  # extent, dst, src, wgt factors
        self.uops: list[Uop] = []
        self.mode: int | None = None
        self.reset_out: int | None = None
        self.alu: tuple[int, int, int] | None = None      # opcode, use_imm, imm
        self.words: np.ndarray | None = None
        self.sram_begin = self.sram_end = 0
        self._open = 0

    @property
    def cached(self) -> bool:
        return self.sram_begin != self.sram_end

    def __len__(self) -> int:
        return len(self.uops)


class CommandQueue:
    """The host side of one VTA device: DRAM buffers, micro-kernel cache, instruction stream."""

    def __init__(self, config: HardwareConfig | None = None, dram: Dram | None = None) -> None:
        self.config = config or default_config()
        self.dram = dram or Dram()
        self.device = Device(self.config, self.dram, on_stats=record)
        self.kernels: dict[Hashable, UopKernel] = {}
        self.last_stats: Stats | None = None
        self.last_stream: list[Insn] = []     # the instructions of the last synchronize
        self.debug_flag = 0
        self._record: UopKernel | None = None
        self.insns: list[Insn] = []
        self._pending_prev = [False] * 4
        self._pending_next = [False] * 4
        self._stream_buffers: list[DramBuffer] = []
        self._resident: list[UopKernel] = []
        self._uop_end = 0

    # ---- DRAM -----------------------------------------------------------------------------
    def alloc_buffer(self, nbytes: int) -> DramBuffer:
        """A page-aligned DRAM buffer (TVM's VTABufferAlloc); ``.addr`` is its physical address."""
        cfg = self.config
        return self.dram.alloc(nbytes, align=max(cfg.WGT_ELEM_BYTES, cfg.INP_ELEM_BYTES,
                                                 cfg.ACC_ELEM_BYTES))

    def free_buffer(self, buf: DramBuffer) -> None:
        self.dram.free(buf)

    def _elem_base(self, addr: int | DramBuffer, mem: int, offset: int, what: str) -> int:
        phys = addr.addr if isinstance(addr, DramBuffer) else int(addr)
        eb = self.config.elem_bytes(mem)
        if phys % eb:
            raise RuntimeAPIError(f"{what}: DRAM address {phys:#x} is not a multiple of the "
                                  f"{eb}-byte {MEM_NAMES[mem]} tile")
        return phys // eb + int(offset)

    # ---- DMA ------------------------------------------------------------------------------
    def load_buffer_2d(self, src_dram_addr: int | DramBuffer, src_elem_offset: int, x_size: int,
                       y_size: int, x_stride: int, x_pad_before: int, y_pad_before: int,
                       x_pad_after: int, y_pad_after: int, dst_sram_index: int,
                       dst_memory_type: int) -> None:
        """LOAD a y_size x x_size block of tiles (rows x_stride apart), zero-padded around."""
        if dst_memory_type not in (MEM_ID_INP, MEM_ID_WGT, MEM_ID_ACC, MEM_ID_UOP):
            raise RuntimeAPIError(f"load_buffer_2d: cannot load into memory type "
                                  f"{MEM_NAMES.get(dst_memory_type, dst_memory_type)}")
        insn = MemInsn(opcode=OPCODE_LOAD, memory_type=dst_memory_type,
                       sram_base=int(dst_sram_index),
                       dram_base=self._elem_base(src_dram_addr, dst_memory_type, src_elem_offset,
                                                 "load_buffer_2d"),
                       y_size=int(y_size), x_size=int(x_size), x_stride=int(x_stride),
                       y_pad_0=int(y_pad_before), y_pad_1=int(y_pad_after),
                       x_pad_0=int(x_pad_before), x_pad_1=int(x_pad_after))
        stage = STAGE_COMPUTE if dst_memory_type in (MEM_ID_ACC, MEM_ID_UOP) else STAGE_LOAD
        self._append(insn, stage)

    def store_buffer_2d(self, src_sram_index: int, src_memory_type: int,
                        dst_dram_addr: int | DramBuffer, dst_elem_offset: int, x_size: int,
                        y_size: int, x_stride: int) -> None:
        """STORE out-buffer tiles [src_sram_index, +x_size*y_size) as rows x_stride apart."""
        if src_memory_type != MEM_ID_OUT:
            raise RuntimeAPIError(f"store_buffer_2d: stores read the out buffer (memory type "
                                  f"{MEM_ID_OUT}), got {src_memory_type}")
        insn = MemInsn(opcode=OPCODE_STORE, memory_type=src_memory_type,
                       sram_base=int(src_sram_index),
                       dram_base=self._elem_base(dst_dram_addr, src_memory_type, dst_elem_offset,
                                                 "store_buffer_2d"),
                       y_size=int(y_size), x_size=int(x_size), x_stride=int(x_stride))
        self._append(insn, STAGE_STORE)

    # ---- micro-kernels --------------------------------------------------------------------
    def _recording(self, what: str) -> UopKernel:
        if self._record is None:
            raise RuntimeAPIError(f"{what} outside a micro-kernel: call it from the finit of "
                                  f"push_gemm_op / push_alu_op")
        return self._record

    def uop_loop_begin(self, extent: int, dst_factor: int, src_factor: int,
                       wgt_factor: int) -> None:
        k = self._recording("uop_loop_begin")
        if k.uops:
            raise RuntimeAPIError("uop_loop_begin after uop_push: loops enclose the whole kernel")
        if len(k.loops) >= 2:
            raise RuntimeAPIError("a micro-kernel has at most 2 loops")
        k.loops.append((int(extent), int(dst_factor), int(src_factor), int(wgt_factor)))
        k._open += 1

    def uop_loop_end(self) -> None:
        k = self._recording("uop_loop_end")
        if k._open == 0:
            raise RuntimeAPIError("uop_loop_end without uop_loop_begin")
        k._open -= 1

    def uop_push(self, mode: int, reset_out: int, dst_index: int, src_index: int,
                 wgt_index: int, opcode: int, use_imm: int, imm_val: int) -> None:
        """Append a micro-op (mode 0 GEMM, 1 ALU) to the kernel being recorded."""
        k = self._recording("uop_push")
        mode, reset_out = int(mode), int(bool(reset_out))
        if mode not in (0, 1):
            raise RuntimeAPIError(f"uop_push: mode is 0 (GEMM) or 1 (ALU), got {mode}")
        if k.mode is None:
            k.mode, k.reset_out = mode, reset_out
        elif (k.mode, k.reset_out) != (mode, reset_out):
            raise RuntimeAPIError(f"uop_push: a kernel has one mode and reset flag; got "
                                  f"mode={mode} reset={reset_out} after mode={k.mode} "
                                  f"reset={k.reset_out}")
        if mode == 1:
            alu = (int(opcode), int(bool(use_imm)), int(imm_val))
            if k.alu is None:
                k.alu = alu
            elif k.alu != alu:
                raise RuntimeAPIError(f"uop_push: a kernel has one ALU operation; got {alu} "
                                      f"after {k.alu}")
        k.uops.append(Uop(int(dst_index), int(src_index), int(wgt_index)))

    def push_gemm_op(self, key: Hashable, finit: Callable[[], Any]) -> None:
        """Queue a GEMM running the micro-kernel ``key`` (recorded by ``finit()`` once)."""
        self._push_op(key, finit, 0, "push_gemm_op")

    def push_alu_op(self, key: Hashable, finit: Callable[[], Any]) -> None:
        """Queue an ALU instruction running the micro-kernel ``key``."""
        self._push_op(key, finit, 1, "push_alu_op")

    def _get_kernel(self, key: Hashable, finit: Callable[[], Any], what: str) -> UopKernel:
        kernel = self.kernels.get(key)
        if kernel is not None:
            return kernel
        if self._record is not None:
            raise RuntimeAPIError(f"{what}: nested micro-kernel recording")
        kernel = UopKernel(key)
        self._record = kernel
        try:
            finit()
        finally:
            self._record = None
        if kernel._open:
            raise RuntimeAPIError(f"{what}: {kernel._open} uop_loop_begin without uop_loop_end")
        if not kernel.uops:
            raise RuntimeAPIError(f"{what}: the micro-kernel {key!r} pushed no micro-op")
        if len(kernel.uops) > self.config.UOP_BUFF_DEPTH:
            raise RuntimeAPIError(f"{what}: the micro-kernel has {len(kernel.uops)} micro-ops, "
                                  f"more than the uop buffer holds ({self.config.UOP_BUFF_DEPTH})")
        kernel.words = np.array([encode_uop(u, self.config) for u in kernel.uops], dtype="<u4")
        if self.debug_flag & DEBUG_DUMP_UOP:
            print(f"micro-kernel {key!r}: loops {kernel.loops} uops {kernel.uops}")
        self.kernels[key] = kernel
        return kernel

    def _push_op(self, key: Hashable, finit: Callable[[], Any], mode: int, what: str) -> None:
        kernel = self._get_kernel(key, finit, what)
        if kernel.mode != mode:
            raise RuntimeAPIError(f"{what}: the micro-kernel {key!r} was recorded in "
                                  f"{'ALU' if kernel.mode else 'GEMM'} mode")
        self._make_resident(kernel)
        loops = list(kernel.loops)
        if mode == 1 and len(loops) == 1:       # runtime.cc: one ALU loop is the inner one
            loops = [(1, 0, 0, 0)] + loops
        while len(loops) < 2:
            loops.append((1, 0, 0, 0))
        (eo, do, so, wo), (ei, di, si, wi) = loops
        common: dict[str, Any] = dict(reset=bool(kernel.reset_out), uop_bgn=kernel.sram_begin,
                      uop_end=kernel.sram_end, iter_out=eo, iter_in=ei, dst_factor_out=do,
                      dst_factor_in=di, src_factor_out=so, src_factor_in=si)
        insn: Insn
        if mode == 0:
            insn = GemmInsn(**common, wgt_factor_out=wo, wgt_factor_in=wi)
        else:
            assert kernel.alu is not None
            opcode, use_imm, imm = kernel.alu
            insn = AluInsn(**common, alu_opcode=opcode, use_imm=bool(use_imm), imm=imm)
        self._append(insn, STAGE_COMPUTE)

    def _make_resident(self, kernel: UopKernel) -> None:
        """Place ``kernel`` in the uop SRAM (ring order, evicting overlapped kernels) and load it."""
        if kernel.cached:
            return
        n = len(kernel)
        begin = self._uop_end if self._uop_end + n <= self.config.UOP_BUFF_DEPTH else 0
        end = begin + n
        for other in self._resident:
            if other.cached and other.sram_begin < end and begin < other.sram_end:
                other.sram_begin = other.sram_end = 0
        self._resident = [k for k in self._resident if k.cached] + [kernel]
        kernel.sram_begin, kernel.sram_end = begin, end
        self._uop_end = end
        buf = self.dram.alloc(n * 4)
        assert kernel.words is not None
        buf.view("<u4")[:n] = kernel.words
        self._stream_buffers.append(buf)
        insn = MemInsn(opcode=OPCODE_LOAD, memory_type=MEM_ID_UOP, sram_base=begin,
                       dram_base=buf.addr // 4, y_size=1, x_size=n, x_stride=n)
        self._append(insn, STAGE_COMPUTE)

    # ---- dependency tokens (runtime.cc's InsnQueue) ---------------------------------------
    def dep_push(self, from_qid: int, to_qid: int) -> None:
        """Stage ``from_qid`` signals ``to_qid`` after its last queued instruction."""
        self._check_pair(from_qid, to_qid, "dep_push")
        self._commit_pending_pop(from_qid)
        if self.insns:
            last = self.insns[-1]
            if self._stage_of(last) == from_qid:
                if from_qid < to_qid and not last.push_next:
                    last.push_next = True
                    return
                if from_qid > to_qid and not last.push_prev:
                    last.push_prev = True
                    return
        if from_qid < to_qid:
            self._push_noop(from_qid, push_next=True)
        else:
            self._push_noop(from_qid, push_prev=True)

    def dep_pop(self, from_qid: int, to_qid: int) -> None:
        """Stage ``to_qid``'s next instruction waits for a token from ``from_qid``."""
        self._check_pair(from_qid, to_qid, "dep_pop")
        pending = self._pending_prev if from_qid < to_qid else self._pending_next
        if pending[to_qid]:
            self._commit_pending_pop(to_qid)
        pending[to_qid] = True

    @staticmethod
    def _check_pair(a: int, b: int, what: str) -> None:
        ok = {(STAGE_LOAD, STAGE_COMPUTE), (STAGE_COMPUTE, STAGE_LOAD),
              (STAGE_COMPUTE, STAGE_STORE), (STAGE_STORE, STAGE_COMPUTE)}
        if (a, b) not in ok:
            raise RuntimeAPIError(f"{what}({a}, {b}): tokens flow between neighbouring stages "
                                  f"only (1 load <-> 2 compute <-> 3 store)")

    @staticmethod
    def _stage_of(insn: Insn) -> int:
        if isinstance(insn, MemInsn):
            if insn.opcode == OPCODE_STORE:
                return STAGE_STORE
            if insn.x_size == 0:
                return 0                      # runtime.cc: a no-op load has no stage here
            return STAGE_COMPUTE if insn.memory_type in (MEM_ID_ACC, MEM_ID_UOP) else STAGE_LOAD
        return STAGE_COMPUTE

    def _commit_pending_pop(self, stage: int) -> None:
        if self._pending_prev[stage] or self._pending_next[stage]:
            self._push_noop(stage, pop_prev=self._pending_prev[stage],
                            pop_next=self._pending_next[stage])

    def _push_noop(self, stage: int, push_prev: bool = False, push_next: bool = False,
                   pop_prev: bool = False, pop_next: bool = False) -> None:
        insn = MemInsn(opcode=OPCODE_STORE if stage == STAGE_STORE else OPCODE_LOAD,
                       memory_type=MEM_ID_INP if stage == STAGE_LOAD else
                       (MEM_ID_OUT if stage == STAGE_STORE else MEM_ID_UOP),
                       push_prev=push_prev, push_next=push_next, pop_prev=pop_prev,
                       pop_next=pop_next)
        self.insns.append(insn)
        self._pending_prev[stage] = self._pending_next[stage] = False

    def _append(self, insn: Insn, stage: int) -> None:
        insn.pop_prev = self._pending_prev[stage]
        insn.pop_next = self._pending_next[stage]
        self._pending_prev[stage] = self._pending_next[stage] = False
        encode(insn, self.config)            # field ranges are checked at the call
        self.insns.append(insn)

    def set_debug_flag(self, flag: int) -> None:
        """TVM's VTASetDebugMode: DEBUG_DUMP_INSN prints each stream, DEBUG_DUMP_UOP each new
        micro-kernel, DEBUG_FORCE_SERIAL runs instructions one after another (no overlap)."""
        self.debug_flag = int(flag)

    def read_barrier(self, buffer: Any = None, elem_bits: int = 0, start: int = 0,
                     extent: int = 0) -> None:
        """TVM's VTAReadBarrier: nothing to flush, DRAM is coherent in the simulator."""

    def write_barrier(self, buffer: Any = None, elem_bits: int = 0, start: int = 0,
                      extent: int = 0) -> None:
        """TVM's VTAWriteBarrier: nothing to invalidate in the simulator."""

    # ---- running --------------------------------------------------------------------------
    def synchronize(self, wait_cycles: int = 1 << 31) -> Stats:
        """Close the stream (FINISH after every module's work), run it, and start a new one."""
        self.dep_push(STAGE_STORE, STAGE_COMPUTE)
        self.dep_push(STAGE_LOAD, STAGE_COMPUTE)
        self.dep_pop(STAGE_STORE, STAGE_COMPUTE)
        self.dep_pop(STAGE_LOAD, STAGE_COMPUTE)
        self._commit_pending_pop(STAGE_COMPUTE)
        self._append(FinishInsn(), STAGE_COMPUTE)
        assert not any(self._pending_prev) and not any(self._pending_next)
        data = encode_stream(self.insns, self.config)
        if self.debug_flag & DEBUG_DUMP_INSN:
            print(self.dump())
        buf = self.dram.alloc(len(data))
        buf.data[:] = np.frombuffer(data, dtype=np.uint8)
        count = len(self.insns)
        self.last_stream = self.insns
        try:
            self.last_stats = self.device.run(buf.addr, count, wait_cycles,
                                              serial=bool(self.debug_flag & DEBUG_FORCE_SERIAL))
        finally:
            self.dram.free(buf)
            self._reset_stream()
        return self.last_stats

    def _reset_stream(self) -> None:
        for buf in self._stream_buffers:
            self.dram.free(buf)
        self.insns = []
        self._pending_prev = [False] * 4
        self._pending_next = [False] * 4
        self._stream_buffers = []
        # as runtime.cc, kernels are not assumed resident across runs
        for k in self._resident:
            k.sram_begin = k.sram_end = 0
        self._resident = []
        self._uop_end = 0

    def dump(self) -> str:
        """The queued stream, one disassembled instruction a line."""
        return "\n".join(f"{i:4d} {STAGE_NAMES.get(self._stage_of(x), 'nop'):>7} {x}"
                         for i, x in enumerate(self.insns))


_default: dict[HardwareConfig, CommandQueue] = {}


def get_command_queue(config: HardwareConfig | None = None) -> CommandQueue:
    """The process's command queue for ``config`` (TVM's CommandQueue::ThreadLocal)."""
    cfg = config or default_config()
    if cfg not in _default:
        _default[cfg] = CommandQueue(cfg)
    return _default[cfg]
