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


def _max_index(base: np.ndarray, insn: GemmInsn | AluInsn, f_out: int, f_in: int) -> int:
    return int(base.max()) + (insn.iter_out - 1) * f_out + (insn.iter_in - 1) * f_in


def run_gemm(bufs: Buffers, insn: GemmInsn, where: str) -> None:
    u_dst, u_src, u_wgt = bufs.decode_uops(insn.uop_bgn, insn.uop_end, where)
    if u_dst.size == 0 or insn.iter_out == 0 or insn.iter_in == 0:
        return
    checks = [("acc", u_dst, insn.dst_factor_out, insn.dst_factor_in, len(bufs.acc))]
    if not insn.reset:
        checks += [("inp", u_src, insn.src_factor_out, insn.src_factor_in, len(bufs.inp)),
                   ("wgt", u_wgt, insn.wgt_factor_out, insn.wgt_factor_in, len(bufs.wgt))]
    for what, base, f_out, f_in, depth in checks:
        top = _max_index(base, insn, f_out, f_in)
        if top >= depth:
            raise BufferOverflowError(f"{where}: {what} index {top} past the end of the {what} "
                                      f"buffer (depth {depth})")
    if insn.reset:
        dst = _loop_indices(u_dst, insn, insn.dst_factor_out, insn.dst_factor_in)
        bufs.acc[dst] = 0
        bufs.out[dst] = 0
        return
    if not _gemm_structured(bufs, insn, u_dst, u_src, u_wgt):
        _gemm_generic(bufs, insn, u_dst, u_src, u_wgt)


def _axis_offsets(axes: list[tuple[int, int, int, int]], k: int) -> np.ndarray:
    """Index offsets (factor ``k`` of each axis) over the iteration space of ``axes``."""
    off = np.zeros(1, dtype=np.int64)
    for ext, *factors in axes:
        off = (off[:, None] + np.arange(ext, dtype=np.int64)[None, :] * factors[k]).ravel()
    return off


def _gemm_structured(bufs: Buffers, insn: GemmInsn, u_dst: np.ndarray, u_src: np.ndarray,
                     u_wgt: np.ndarray) -> bool:
    """The common shape of a GEMM: loops that move the accumulator ("spatial") leave the weight
    alone, loops that do not ("reduction") sum into it. Each group of micro-ops with one
    accumulator base is then one matrix product over (reduction x micro-op x BLOCK_IN)."""
    axes = [(insn.iter_out, insn.dst_factor_out, insn.src_factor_out, insn.wgt_factor_out),
            (insn.iter_in, insn.dst_factor_in, insn.src_factor_in, insn.wgt_factor_in)]
    axes = [a for a in axes if a[0] > 1]
    spatial = [a for a in axes if a[1] != 0]
    reduction = [a for a in axes if a[1] == 0]
    if any(a[3] != 0 for a in spatial):
        return False
    sp_d, sp_s = _axis_offsets(spatial, 0), _axis_offsets(spatial, 1)
    if len(np.unique(sp_d)) != sp_d.size:
        return False
    red_s, red_w = _axis_offsets(reduction, 1), _axis_offsets(reduction, 2)
    b, bi = bufs.inp.shape[1:]
    bo = bufs.acc.shape[2]
    wgt_f = bufs.wgt
    touched = []
    for dval in np.unique(u_dst):
        us = np.flatnonzero(u_dst == dval)
        src_ru = (red_s[:, None] + u_src[us][None, :]).ravel()
        wgt_ru = (red_w[:, None] + u_wgt[us][None, :]).ravel()
        ru = src_ru.size
        wm = wgt_f[wgt_ru].astype(np.float64).transpose(0, 2, 1).reshape(ru * bi, bo)
        step = max(1, _CHUNK * 16 // max(ru, 1))
        for lo in range(0, sp_d.size, step):
            idx = sp_s[lo:lo + step, None] + src_ru[None, :]           # (s, ru)
            s = idx.shape[0]
            a = bufs.inp[idx].astype(np.float64).transpose(0, 2, 1, 3).reshape(s * b, ru * bi)
            res = (a @ wm).reshape(s, b, bo).astype(np.int64)
            d = sp_d[lo:lo + step] + dval
            bufs.acc[d] = (bufs.acc[d].astype(np.int64) + res).astype(np.uint32).view(np.int32)
            touched.append(d)
    _narrow(bufs, np.unique(np.concatenate(touched)))
    return True


def _gemm_generic(bufs: Buffers, insn: GemmInsn, u_dst: np.ndarray, u_src: np.ndarray,
                  u_wgt: np.ndarray) -> None:
    dst = _loop_indices(u_dst, insn, insn.dst_factor_out, insn.dst_factor_in)
    src = _loop_indices(u_src, insn, insn.src_factor_out, insn.src_factor_in)
    wgt = _loop_indices(u_wgt, insn, insn.wgt_factor_out, insn.wgt_factor_in)
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
        bufs.acc[uniq] = acc.astype(np.uint32).view(np.int32)
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


_REDUCERS = {ALU_OPCODE_MIN: np.minimum, ALU_OPCODE_MAX: np.maximum, ALU_OPCODE_ADD: np.add}


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
    elif insn.alu_opcode in _REDUCERS and (insn.use_imm or not np.isin(src, uniq_dst).any()):
        # a reduction into repeated destinations: order-free (min/max, and + modulo 2^32)
        pos = np.searchsorted(uniq_dst, dst)
        tmp = acc[uniq_dst].astype(np.int64)
        b = (np.broadcast_to(np.int64(insn.imm), (n,) + acc.shape[1:]) if insn.use_imm
             else acc[src].astype(np.int64))
        _REDUCERS[insn.alu_opcode].at(tmp, pos, b)
        acc[uniq_dst] = tmp.astype(np.uint32).view(np.int32)
    else:  # a source written earlier by the same instruction, or repeated shifts
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
