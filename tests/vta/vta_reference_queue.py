"""A functional reference of the VTA runtime's CommandQueue API (the contract vta-hw
implements), for the compiler tests: it executes each command at once in program order (no
cycles) and checks that every dependency token pushed is popped. Independent of vta-hw's
simulator, so the compiler is checked against numpy even where that is not merged."""

from __future__ import annotations

from typing import Any

import numpy as np


class _Dram:
    def __init__(self, mem: bytearray, addr: int, nbytes: int):
        self.mem, self.addr, self.nbytes = mem, addr, nbytes

    def view(self, dtype: Any) -> np.ndarray:
        return np.frombuffer(self.mem, dtype=np.uint8, count=self.nbytes,
                             offset=self.addr).view(dtype)


class ReferenceQueue:
    def __init__(self, env: Any):
        self.env = env
        e = env
        self.mem = bytearray(1 << 24)
        self.top = 64
        self.sram = {2: np.zeros((e.INP_BUFF_SIZE // e.INP_ELEM_BYTES, e.BATCH, e.BLOCK_IN), np.int8),
                     1: np.zeros((e.WGT_BUFF_SIZE // e.WGT_ELEM_BYTES, e.BLOCK_OUT, e.BLOCK_IN), np.int8),
                     3: np.zeros((e.ACC_BUFF_SIZE // e.ACC_ELEM_BYTES, e.BATCH, e.BLOCK_OUT), np.int32)}
        self.tokens: dict[tuple[int, int], int] = {}
        self.kernels: dict[Any, list] = {}
        self.rec: list | None = None
        self.stats = {"load": 0, "store": 0, "gemm": 0, "alu": 0, "kernels": 0}

    def alloc_buffer(self, nbytes: int) -> _Dram:
        addr = self.top
        self.top += (nbytes + 63) // 64 * 64
        assert self.top <= len(self.mem)
        return _Dram(self.mem, addr, nbytes)

    def _tile_dtype(self, mem: int) -> tuple[Any, tuple]:
        arr = self.sram[mem]
        return arr.dtype, arr.shape[1:]

    def load_buffer_2d(self, src_addr: int, off: int, xs: int, ys: int, xstride: int, xpb: int,
                       ypb: int, xpa: int, ypa: int, dst: int, mem: int) -> None:
        self.stats["load"] += 1
        dtype, tshape = self._tile_dtype(mem)
        tbytes = int(np.prod(tshape)) * np.dtype(dtype).itemsize
        width = xpb + xs + xpa
        sram = self.sram[mem]
        for row in range(ypb + ys + ypa):
            for col in range(width):
                i = dst + row * width + col
                y, x = row - ypb, col - xpb
                if 0 <= y < ys and 0 <= x < xs:
                    a = src_addr + (off + y * xstride + x) * tbytes
                    sram[i] = np.frombuffer(self.mem, dtype, int(np.prod(tshape)), a).reshape(tshape)
                else:
                    sram[i] = 0

    def store_buffer_2d(self, src: int, mem: int, dst_addr: int, off: int, xs: int, ys: int,
                        xstride: int) -> None:
        self.stats["store"] += 1
        acc = self.sram[3]
        tb = acc.shape[1] * acc.shape[2]
        view = np.frombuffer(self.mem, np.int8)
        for y in range(ys):
            for x in range(xs):
                a = dst_addr + (off + y * xstride + x) * tb
                view_w = np.ndarray((tb,), np.int8, buffer=self.mem, offset=a)
                view_w[:] = acc[src + y * xs + x].astype(np.int8).ravel()
        del view

    def uop_loop_begin(self, ext: int, df: int, sf: int, wf: int) -> None:
        assert self.rec is not None
        self.rec.append(("loop", ext, df, sf, wf))

    def uop_loop_end(self) -> None:
        assert self.rec is not None
        self.rec.append(("end",))

    def uop_push(self, mode: int, reset: int, dst: int, src: int, wgt: int, opcode: int,
                 use_imm: int, imm: int) -> None:
        assert self.rec is not None
        self.rec.append(("uop", mode, reset, dst, src, wgt, opcode, use_imm, imm))

    def _push_op(self, key: Any, finit: Any, kind: str) -> None:
        if key not in self.kernels:
            self.rec = []
            finit()
            self.kernels[key] = self.rec
            self.rec = None
            self.stats["kernels"] += 1
        self.stats[kind] += 1
        prog = self.kernels[key]
        loops = [x for x in prog if x[0] == "loop"]
        uops = [x for x in prog if x[0] == "uop"]
        assert len(loops) <= 2
        l0 = loops[0] if loops else ("loop", 1, 0, 0, 0)
        l1 = loops[1] if len(loops) > 1 else ("loop", 1, 0, 0, 0)
        inp, wgt, acc = self.sram[2], self.sram[1], self.sram[3]
        for i in range(l0[1]):
            for j in range(l1[1]):
                for u in uops:
                    _, mode, reset, d, s, w, opc, use_imm, imm = u
                    d += i * l0[2] + j * l1[2]
                    s += i * l0[3] + j * l1[3]
                    w += i * l0[4] + j * l1[4]
                    if mode == 0:
                        if reset:
                            acc[d] = 0
                        else:
                            acc[d] += inp[s].astype(np.int32) @ wgt[w].astype(np.int32).T
                    else:
                        b = np.int32(imm) if use_imm else acc[s]
                        a = acc[d]
                        if opc == 0:
                            acc[d] = np.minimum(a, b)
                        elif opc == 1:
                            acc[d] = np.maximum(a, b)
                        elif opc == 2:
                            acc[d] = a + b
                        else:
                            acc[d] = a >> b if int(np.max(b)) >= 0 else a << -b

    def push_gemm_op(self, key: Any, finit: Any) -> None:
        self._push_op(("g", key), finit, "gemm")

    def push_alu_op(self, key: Any, finit: Any) -> None:
        self._push_op(("a", key), finit, "alu")

    def dep_push(self, a: int, b: int) -> None:
        self.tokens[(a, b)] = self.tokens.get((a, b), 0) + 1

    def dep_pop(self, a: int, b: int) -> None:
        n = self.tokens.get((a, b), 0)
        if n <= 0:  # executed in program order: a pop without a push would deadlock
            raise RuntimeError(f"token pop {a}->{b} with no token pushed")
        self.tokens[(a, b)] = n - 1

    def synchronize(self, wait_cycles: int = 0) -> None:
        left = {k: v for k, v in self.tokens.items() if v}
        if left:
            raise RuntimeError(f"unbalanced dependency tokens at synchronize: {left}")
