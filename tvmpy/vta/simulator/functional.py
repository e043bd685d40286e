"""What each VTA instruction computes, vectorised with numpy per instruction.

The on-chip buffers are typed numpy arrays of tiles: ``inp`` (depth, BATCH, BLOCK_IN) int8,
``wgt`` (depth, BLOCK_OUT, BLOCK_IN) int8, ``acc`` (depth, BATCH, BLOCK_OUT) int32, ``out``
(depth, BATCH, BLOCK_OUT) int8 and ``uop`` (depth,) uint32. GEMM and ALU write the accumulator
and its int8 narrowing into ``out`` (as the hardware's compute module does); STORE reads ``out``.

A GEMM expands its micro-ops and 2-level loop into index arrays, multiplies the gathered tiles
in float64 (exact: every partial sum stays far below 2^53), sums the products of each
accumulator tile and adds them into the int32 accumulators modulo 2^32, which is what the
hardware's wrapping 32-bit additions give in any order.
"""

from __future__ import annotations

import numpy as np

from ..hw_config import (
    ALU_NAMES,
    ALU_OPCODE_ADD,
    ALU_OPCODE_MAX,
    ALU_OPCODE_MIN,
    ALU_OPCODE_SHR,
    MEM_ID_ACC,
    MEM_ID_INP,
    MEM_ID_OUT,
    MEM_ID_UOP,
    MEM_ID_WGT,
    MEM_NAMES,
    OPCODE_LOAD,
    HardwareConfig,
)
from ..isa import AluInsn, GemmInsn, MemInsn, uop_layout
from .dram import Dram

_CHUNK = 1 << 16  # uop iterations per vectorised block of a GEMM


class BufferOverflowError(RuntimeError):
    """An instruction that indexes past the end of an on-chip buffer."""


class Buffers:
    """The five on-chip SRAMs of one VTA instance."""

    def __init__(self, cfg: HardwareConfig) -> None:
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        self.cfg = cfg
        self.inp = np.zeros((cfg.INP_BUFF_DEPTH, b, bi), dtype="<i1")
        self.wgt = np.zeros((cfg.WGT_BUFF_DEPTH, bo, bi), dtype="<i1")
        self.acc = np.zeros((cfg.ACC_BUFF_DEPTH, b, bo), dtype="<i4")
        self.out = np.zeros((cfg.OUT_BUFF_DEPTH, b, bo), dtype="<i1")
        self.uop = np.zeros(cfg.UOP_BUFF_DEPTH, dtype="<u4")
        self.by_id = {MEM_ID_UOP: self.uop, MEM_ID_WGT: self.wgt, MEM_ID_INP: self.inp,
                      MEM_ID_ACC: self.acc, MEM_ID_OUT: self.out}
        fields = {name: (pos, width) for name, pos, width, _ in uop_layout(cfg)}
        self._uop_fields = fields

    def decode_uops(self, bgn: int, end: int, where: str) -> tuple[np.ndarray, ...]:
        if not 0 <= bgn <= end <= len(self.uop):
            raise BufferOverflowError(f"{where}: micro-ops [{bgn}, {end}) outside the uop buffer "
                                      f"(depth {len(self.uop)})")
        words = self.uop[bgn:end].astype(np.int64)
        out = []
        for name in ("dst_idx", "src_idx", "wgt_idx"):
            pos, width = self._uop_fields[name]
            out.append((words >> pos) & ((1 << width) - 1))
        return tuple(out)


def _check_range(idx: np.ndarray, depth: int, what: str, where: str) -> None:
    if idx.size and int(idx.max()) >= depth:
        raise BufferOverflowError(f"{where}: {what} index {int(idx.max())} past the end of the "
                                  f"{what} buffer (depth {depth})")


def run_load(bufs: Buffers, dram: Dram, insn: MemInsn, where: str) -> None:
    if insn.x_size == 0:
        return
    cfg = bufs.cfg
    mem = insn.memory_type
    if mem not in (MEM_ID_UOP, MEM_ID_INP, MEM_ID_WGT, MEM_ID_ACC):
        raise ValueError(f"{where}: LOAD into {MEM_NAMES.get(mem, mem)} is not supported "
                         f"(uop, inp, wgt, acc)")
    if insn.y_size == 0:
        return
    sram = bufs.by_id[mem]
    eb = cfg.elem_bytes(mem)
    xt = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    yt = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    end = insn.sram_base + xt * yt
    if end > len(sram):
        raise BufferOverflowError(f"{where}: writes {MEM_NAMES[mem]} tiles [{insn.sram_base}, "
                                  f"{end}) past the end of the {MEM_NAMES[mem]} buffer (depth "
                                  f"{len(sram)})")
    region = dram.region_2d(insn.dram_base * eb, insn.y_size, insn.x_size * eb,
                            insn.x_stride * eb, where)
    tile = sram.shape[1:]
    src = np.ascontiguousarray(region).view(sram.dtype).reshape((insn.y_size, insn.x_size) + tile)
    dst = sram[insn.sram_base:end].reshape((yt, xt) + tile)
    if xt * yt != insn.x_size * insn.y_size:
        dst[...] = 0
    dst[insn.y_pad_0:insn.y_pad_0 + insn.y_size, insn.x_pad_0:insn.x_pad_0 + insn.x_size] = src


def run_store(bufs: Buffers, dram: Dram, insn: MemInsn, where: str) -> None:
    if insn.x_size == 0:
        return
    if insn.memory_type != MEM_ID_OUT:
        raise ValueError(f"{where}: STORE reads the out buffer (memory_type {MEM_ID_OUT}), got "
                         f"{MEM_NAMES.get(insn.memory_type, insn.memory_type)}")
    if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
        raise ValueError(f"{where}: a STORE cannot pad")
    if insn.y_size == 0:
        return
    n = insn.x_size * insn.y_size
    if insn.sram_base + n > len(bufs.out):
        raise BufferOverflowError(f"{where}: reads out tiles [{insn.sram_base}, "
                                  f"{insn.sram_base + n}) past the end of the out buffer (depth "
                                  f"{len(bufs.out)})")
    eb = bufs.cfg.OUT_ELEM_BYTES
    region = dram.region_2d(insn.dram_base * eb, insn.y_size, insn.x_size * eb,
                            insn.x_stride * eb, where)
    src = bufs.out[insn.sram_base:insn.sram_base + n]
    region[...] = src.view(np.uint8).reshape(insn.y_size, insn.x_size * eb)


def _loop_indices(base: np.ndarray, insn: GemmInsn | AluInsn, f_out: int, f_in: int
                  ) -> np.ndarray:
    o = np.arange(insn.iter_out, dtype=np.int64)[:, None, None] * f_out
    i = np.arange(insn.iter_in, dtype=np.int64)[None, :, None] * f_in
    return (base[None, None, :] + o + i).reshape(-1)


def _narrow(bufs: Buffers, dst: np.ndarray) -> None:
    bufs.out[dst] = bufs.acc[dst].astype(np.int8)


def run_gemm(bufs: Buffers, insn: GemmInsn, where: str) -> None:
    u_dst, u_src, u_wgt = bufs.decode_uops(insn.uop_bgn, insn.uop_end, where)
    dst = _loop_indices(u_dst, insn, insn.dst_factor_out, insn.dst_factor_in)
    _check_range(dst, len(bufs.acc), "acc", where)
    if insn.reset:
        bufs.acc[dst] = 0
        bufs.out[dst] = 0
        return
    src = _loop_indices(u_src, insn, insn.src_factor_out, insn.src_factor_in)
    wgt = _loop_indices(u_wgt, insn, insn.wgt_factor_out, insn.wgt_factor_in)
    _check_range(src, len(bufs.inp), "inp", where)
    _check_range(wgt, len(bufs.wgt), "wgt", where)
    if dst.size == 0:
        return
    touched = []
    for lo in range(0, dst.size, _CHUNK):
        d, s, w = dst[lo:lo + _CHUNK], src[lo:lo + _CHUNK], wgt[lo:lo + _CHUNK]
        prod = _products(bufs, s, w)                        # (n, BATCH, BLOCK_OUT) float64
        order = np.argsort(d, kind="stable")
        ds = d[order]
        starts = np.flatnonzero(np.r_[True, ds[1:] != ds[:-1]])
        sums = np.add.reduceat(prod[order], starts, axis=0)
        uniq = ds[starts]
        acc = bufs.acc[uniq].astype(np.int64) + sums.astype(np.int64)
        bufs.acc[uniq] = acc.astype(np.uint32).view(np.int32) if acc.size else acc
        touched.append(uniq)
    _narrow(bufs, np.unique(np.concatenate(touched)))


def _products(bufs: Buffers, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """inp[s[n]] @ wgt[w[n]]^T for every n, grouped by the operand with fewer distinct tiles."""
    n = s.size
    b, bo = bufs.acc.shape[1:]
    out = np.empty((n, b, bo), dtype=np.float64)
    ws, winv = np.unique(w, return_inverse=True)
    ss, sinv = np.unique(s, return_inverse=True)
    if len(ws) <= len(ss):
        wf = bufs.wgt[ws].astype(np.float64)                # (k, BO, BI)
        a = bufs.inp[s].astype(np.float64)                  # (n, B, BI)
        order = np.argsort(winv, kind="stable")
        bounds = np.searchsorted(winv[order], np.arange(len(ws) + 1))
        for k in range(len(ws)):
            sel = order[bounds[k]:bounds[k + 1]]
            out[sel] = a[sel] @ wf[k].T
    else:
        af = bufs.inp[ss].astype(np.float64)                # (k, B, BI)
        wg = bufs.wgt[w].astype(np.float64)                 # (n, BO, BI)
        order = np.argsort(sinv, kind="stable")
        bounds = np.searchsorted(sinv[order], np.arange(len(ss) + 1))
        for k in range(len(ss)):
            sel = order[bounds[k]:bounds[k + 1]]
            out[sel] = np.einsum("bk,nok->nbo", af[k], wg[sel])
    return out


def _alu(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One ALU operation on int64 copies of int32 values; the result wraps to int32."""
    if op == ALU_OPCODE_MIN:
        r = np.minimum(a, b)
    elif op == ALU_OPCODE_MAX:
        r = np.maximum(a, b)
    elif op == ALU_OPCODE_ADD:
        r = a + b
    elif op == ALU_OPCODE_SHR:
        b = np.broadcast_to(b, a.shape)
        right = a >> np.clip(b, 0, 31)
        left = a << np.clip(-b, 0, 32)
        r = np.where(b >= 0, right, left)
    else:
        raise ValueError(f"unknown ALU opcode {op} (known: {ALU_NAMES})")
    return r.astype(np.uint32).view(np.int32) if r.size else r.astype(np.int32)


def run_alu(bufs: Buffers, insn: AluInsn, where: str) -> None:
    if insn.alu_opcode not in ALU_NAMES:
        raise ValueError(f"{where}: unknown ALU opcode {insn.alu_opcode}")
    u_dst, u_src, _ = bufs.decode_uops(insn.uop_bgn, insn.uop_end, where)
    dst = _loop_indices(u_dst, insn, insn.dst_factor_out, insn.dst_factor_in)
    src = _loop_indices(u_src, insn, insn.src_factor_out, insn.src_factor_in)
    _check_range(dst, len(bufs.acc), "acc", where)
    if not insn.use_imm:
        _check_range(src, len(bufs.acc), "acc (ALU source)", where)
    if dst.size == 0:
        return
    acc = bufs.acc
    n = dst.size
    uniq_dst = np.unique(dst)
    if insn.reset:
        acc[dst] = 0
    elif len(uniq_dst) == n and (insn.use_imm or not _reads_after_write(dst, src, len(acc))):
        b = np.int64(insn.imm) if insn.use_imm else acc[src].astype(np.int64)
        acc[dst] = _alu(insn.alu_opcode, acc[dst].astype(np.int64), b)
    else:  # repeated destinations or a source written earlier by the same instruction
        imm = np.int64(insn.imm)
        for k in range(n):
            b = imm if insn.use_imm else acc[src[k]].astype(np.int64)
            acc[dst[k]] = _alu(insn.alu_opcode, acc[dst[k]].astype(np.int64), b)
    _narrow(bufs, uniq_dst)


def _reads_after_write(dst: np.ndarray, src: np.ndarray, depth: int) -> bool:
    """Whether some micro-op reads a tile that an earlier micro-op of the sequence wrote."""
    pos = np.full(depth, dst.size, dtype=np.int64)
    pos[dst] = np.arange(dst.size)
    return bool(np.any(pos[src] < np.arange(src.size)))


def is_load(insn: MemInsn) -> bool:
    return insn.opcode == OPCODE_LOAD
