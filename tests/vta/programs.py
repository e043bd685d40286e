"""VTA programs written by hand against the runtime API (what vta-compiler's lowering emits),
with their numpy references. Shared by the simulator tests and bench/vta_sim_speed.py.
"""

from __future__ import annotations

import numpy as np

from tvmpy.vta import hw_config as hc
from tvmpy.vta.runtime import CommandQueue

L, C, S = hc.STAGE_LOAD, hc.STAGE_COMPUTE, hc.STAGE_STORE


def upload(cq: CommandQueue, arr: np.ndarray):
    buf = cq.alloc_buffer(max(arr.nbytes, 1))
    buf.view(arr.dtype)[:arr.size] = arr.ravel()
    return buf


def matmul_ref(a: np.ndarray, w: np.ndarray, shift: int) -> np.ndarray:
    """a (M, K, B, BI) x w (N, K, BO, BI) -> (M, N, B, BO), >> shift, narrowed to int8."""
    acc = np.einsum("mkbi,nkoi->mnbo", a.astype(np.int64), w.astype(np.int64))
    acc = ((acc + 2**31) % 2**32 - 2**31) >> shift
    return acc.astype(np.int8)


def matmul(cq: CommandQueue, a: np.ndarray, w: np.ndarray, shift: int, m_chunk: int,
           nslots: int, war: bool = True) -> np.ndarray:
    """Blocked matrix multiply in chunks of ``m_chunk`` row tiles; ``nslots`` buffer slots
    (1: load/compute/store serialised by WAR tokens; 2: two interleaved virtual threads)."""
    cfg = cq.config
    m, k = a.shape[:2]
    n = w.shape[0]
    a_buf, w_buf = upload(cq, a), upload(cq, w)
    out = cq.alloc_buffer(m * n * cfg.OUT_ELEM_BYTES)
    # weights once, before everything (the first compute waits for them with the first chunk)
    cq.load_buffer_2d(w_buf, 0, n * k, 1, n * k, 0, 0, 0, 0, 0, hc.MEM_ID_WGT)
    chunks = [(m0, min(m_chunk, m - m0)) for m0 in range(0, m, m_chunk)]
    for i, (m0, mb) in enumerate(chunks):
        slot = i % nslots
        inp_base, acc_base = slot * m_chunk * k, slot * m_chunk * n
        if i >= nslots and war:
            cq.dep_pop(C, L)                    # WAR: compute has read this inp slot
        cq.load_buffer_2d(a_buf, m0 * k, mb * k, 1, mb * k, 0, 0, 0, 0, inp_base, hc.MEM_ID_INP)
        cq.dep_push(L, C)
        cq.dep_pop(L, C)
        if i >= nslots:
            cq.dep_pop(S, C)                    # WAR: store has read this out slot

        def reset(mb=mb, acc_base=acc_base):
            cq.uop_loop_begin(mb, n, 0, 0)
            for j in range(n):
                cq.uop_push(0, 1, acc_base + j, 0, 0, 0, 0, 0)
            cq.uop_loop_end()

        def gemm(mb=mb, acc_base=acc_base, inp_base=inp_base):
            cq.uop_loop_begin(mb, n, k, 0)
            cq.uop_loop_begin(k, 0, 1, 1)
            for j in range(n):
                cq.uop_push(0, 0, acc_base + j, inp_base, j * k, 0, 0, 0)
            cq.uop_loop_end()
            cq.uop_loop_end()

        def shr(mb=mb, acc_base=acc_base):
            cq.uop_loop_begin(mb * n, 1, 1, 0)
            cq.uop_push(1, 0, acc_base, acc_base, 0, hc.ALU_OPCODE_SHR, 1, shift)
            cq.uop_loop_end()

        cq.push_gemm_op(("reset", mb, n, acc_base), reset)
        cq.push_gemm_op(("gemm", mb, n, k, acc_base, inp_base), gemm)
        cq.push_alu_op(("shr", mb, n, acc_base, shift), shr)
        if war:
            cq.dep_push(C, L)
        cq.dep_push(C, S)
        cq.dep_pop(C, S)
        cq.store_buffer_2d(acc_base, hc.MEM_ID_OUT, out, m0 * n, mb * n, 1, mb * n)
        cq.dep_push(S, C)
    for _ in range(min(nslots, len(chunks))):   # drain the WAR tokens nobody waits for
        if war:
            cq.dep_pop(C, L)
        cq.dep_pop(S, C)
    cq.synchronize()
    return out.view(np.int8)[:m * n * cfg.BATCH * cfg.BLOCK_OUT].reshape(
        m, n, cfg.BATCH, cfg.BLOCK_OUT).copy()


def conv_ref(x: np.ndarray, w: np.ndarray, pad: int, shift: int) -> np.ndarray:
    """x (CIB, H, W, B, BI), w (COB, CIB, KH, KW, BO, BI), stride 1 -> (COB, OH, OW, B, BO)
    int8 of clip(relu(conv >> shift), 127)."""
    cib, h, wd = x.shape[:3]
    cob, _, kh, kw = w.shape[:4]
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0), (0, 0)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    acc = np.zeros((cob, oh, ow, x.shape[3], w.shape[4]), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            patch = xp[:, dy:dy + oh, dx:dx + ow]            # (CIB, OH, OW, B, BI)
            acc += np.einsum("cyxbi,pcoi->pyxbo", patch, w[:, :, dy, dx].astype(np.int64))
    return np.clip(acc >> shift, 0, 127).astype(np.int8)


def conv2d(cq: CommandQueue, x: np.ndarray, w: np.ndarray, pad: int, shift: int) -> np.ndarray:
    """A stride-1 conv2d in one pass: the padding is the input DMA's, on the fly."""
    cfg = cq.config
    cib, h, wd = x.shape[:3]
    cob, _, kh, kw = w.shape[:4]
    hp, wp = h + 2 * pad, wd + 2 * pad
    oh, ow = hp - kh + 1, wp - kw + 1
    x_buf, w_buf = upload(cq, x), upload(cq, w)
    out = cq.alloc_buffer(cob * oh * ow * cfg.OUT_ELEM_BYTES)
    for c in range(cib):   # one padded 2-D load per input-channel block
        cq.load_buffer_2d(x_buf, c * h * wd, wd, h, wd, pad, pad, pad, pad, c * hp * wp,
                          hc.MEM_ID_INP)
    cq.load_buffer_2d(w_buf, 0, cob * cib * kh * kw, 1, cob * cib * kh * kw, 0, 0, 0, 0, 0,
                      hc.MEM_ID_WGT)
    cq.dep_push(L, C)
    cq.dep_pop(L, C)

    def reset():
        cq.uop_loop_begin(cob * oh * ow, 1, 0, 0)
        cq.uop_push(0, 1, 0, 0, 0, 0, 0, 0)
        cq.uop_loop_end()

    def gemm():
        cq.uop_loop_begin(oh, ow, wp, 0)
        cq.uop_loop_begin(ow, 1, 1, 0)
        for o in range(cob):
            for c in range(cib):
                for dy in range(kh):
                    for dx in range(kw):
                        cq.uop_push(0, 0, o * oh * ow, c * hp * wp + dy * wp + dx,
                                    ((o * cib + c) * kh + dy) * kw + dx, 0, 0, 0)
        cq.uop_loop_end()
        cq.uop_loop_end()

    def alu(op, imm):
        def f():
            cq.uop_loop_begin(cob * oh * ow, 1, 1, 0)
            cq.uop_push(1, 0, 0, 0, 0, op, 1, imm)
            cq.uop_loop_end()
        return f

    cq.push_gemm_op(("conv-reset", cob * oh * ow), reset)
    cq.push_gemm_op(("conv", x.shape, w.shape, pad), gemm)
    for op, imm in ((hc.ALU_OPCODE_SHR, shift), (hc.ALU_OPCODE_MAX, 0), (hc.ALU_OPCODE_MIN, 127)):
        cq.push_alu_op(("conv-alu", cob * oh * ow, op, imm), alu(op, imm))
    cq.dep_push(C, S)
    cq.dep_pop(C, S)
    cq.store_buffer_2d(0, hc.MEM_ID_OUT, out, 0, cob * oh * ow, 1, cob * oh * ow)
    cq.synchronize()
    return out.view(np.int8)[:cob * oh * ow * cfg.BATCH * cfg.BLOCK_OUT].reshape(
        cob, oh, ow, cfg.BATCH, cfg.BLOCK_OUT).copy()


def conv2d_tiled(cq: CommandQueue, x: np.ndarray, w: np.ndarray, shift: int, rows: int,
                 nslots: int) -> np.ndarray:
    """A 3x3 pad-1 stride-1 conv2d in tiles of ``rows`` output rows, each tile's input rows
    loaded with the image border's padding on the fly; ``nslots`` buffer slots interleave the
    tiles as virtual threads (tokens as TVM's VTA conv schedule with ``cthread``)."""
    cfg = cq.config
    cib, h, wd = x.shape[:3]
    cob, _, kh, kw = w.shape[:4]
    assert (kh, kw) == (3, 3)
    wp = wd + 2
    x_buf, w_buf = upload(cq, x), upload(cq, w)
    out = cq.alloc_buffer(cob * h * wd * cfg.OUT_ELEM_BYTES)
    nw = cob * cib * 9
    inp_slot, acc_slot = cib * (rows + 2) * wp, cob * rows * wd
    if nslots * inp_slot > cfg.INP_BUFF_DEPTH or nslots * acc_slot > cfg.ACC_BUFF_DEPTH:
        raise ValueError("tile too large for the buffers")
    cq.load_buffer_2d(w_buf, 0, nw, 1, nw, 0, 0, 0, 0, 0, hc.MEM_ID_WGT)
    tiles = [(r0, min(rows, h - r0)) for r0 in range(0, h, rows)]
    for i, (r0, th) in enumerate(tiles):
        slot = i % nslots
        ib, ab = slot * inp_slot, slot * acc_slot
        if i >= nslots:
            cq.dep_pop(C, L)
        lo, hi = max(r0 - 1, 0), min(r0 + th + 1, h)
        for c in range(cib):
            cq.load_buffer_2d(x_buf, c * h * wd + lo * wd, wd, hi - lo, wd, 1, lo - (r0 - 1), 1,
                              (r0 + th + 1) - hi, ib + c * (th + 2) * wp, hc.MEM_ID_INP)
        cq.dep_push(L, C)
        cq.dep_pop(L, C)
        if i >= nslots:
            cq.dep_pop(S, C)

        def reset(th=th, ab=ab):
            cq.uop_loop_begin(cob * th * wd, 1, 0, 0)
            cq.uop_push(0, 1, ab, 0, 0, 0, 0, 0)
            cq.uop_loop_end()

        def gemm(th=th, ab=ab, ib=ib):
            cq.uop_loop_begin(th, wd, wp, 0)
            cq.uop_loop_begin(wd, 1, 1, 0)
            for o in range(cob):
                for c in range(cib):
                    for dy in range(3):
                        for dx in range(3):
                            cq.uop_push(0, 0, ab + o * th * wd, ib + c * (th + 2) * wp
                                        + dy * wp + dx, ((o * cib + c) * 3 + dy) * 3 + dx,
                                        0, 0, 0)
            cq.uop_loop_end()
            cq.uop_loop_end()

        def alu(op, imm, th=th, ab=ab):
            def f():
                cq.uop_loop_begin(cob * th * wd, 1, 1, 0)
                cq.uop_push(1, 0, ab, ab, 0, op, 1, imm)
                cq.uop_loop_end()
            return f

        cq.push_gemm_op(("t-reset", th, ab, cob, wd), reset)
        cq.push_gemm_op(("t-conv", th, ab, ib, x.shape, w.shape), gemm)
        for op, imm in ((hc.ALU_OPCODE_SHR, shift), (hc.ALU_OPCODE_MAX, 0),
                        (hc.ALU_OPCODE_MIN, 127)):
            cq.push_alu_op(("t-alu", th, ab, cob, wd, op, imm), alu(op, imm))
        cq.dep_push(C, L)
        cq.dep_push(C, S)
        cq.dep_pop(C, S)
        for o in range(cob):   # this tile's rows of every output-channel block
            cq.store_buffer_2d(ab + o * th * wd, hc.MEM_ID_OUT, out, o * h * wd + r0 * wd,
                               th * wd, 1, th * wd)
        cq.dep_push(S, C)
    for _ in range(min(nslots, len(tiles))):
        cq.dep_pop(C, L)
        cq.dep_pop(S, C)
    cq.synchronize()
    return out.view(np.int8)[:cob * h * wd * cfg.BATCH * cfg.BLOCK_OUT].reshape(
        cob, h, wd, cfg.BATCH, cfg.BLOCK_OUT).copy()
