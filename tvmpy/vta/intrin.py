"""VTA's tensor intrinsics (TVM's ``vta.intrin``): the GEMM core as a ``te`` tensor intrinsic.

``env.gemm`` computes ``out[i, j] += inp[i, k] * wgt[j, k]`` on one tile pair (``inp``:
BATCH x BLOCK_IN, ``wgt``: BLOCK_OUT x BLOCK_IN, ``out``: BATCH x BLOCK_OUT in the accumulator).
Tensorizing a stage with it leaves, per tile, a micro-op push inside a ``coproc_uop_scope``::

    attr [vta] coproc_uop_scope = "VTAPushGEMMOp"
      VTAUopPush(0, reset, VTASram(acc, off), VTASram(inp, off), VTASram(wgt, off), 0, 0, 0)

where ``VTASram(buffer_var, elem_offset)`` names an element of an on-chip buffer; the VTA
lowering (:mod:`tvmpy.vta.transform`) turns it into a buffer index (in tiles) once the on-chip
buffers are placed, and lifts the pushes (and the loops around them) into micro-kernels.
"""

from __future__ import annotations

from typing import Any

from .. import te
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import decl_buffer
from ..tir.op import call_extern

__all__ = ["gemm", "sram_ref", "uop_push", "UOP_SCOPE"]

UOP_SCOPE = "coproc_uop_scope"


def sram_ref(data: E.Var, elem_offset: Any) -> E.PrimExpr:
    """A reference to element ``elem_offset`` of on-chip buffer ``data``."""
    return call_extern("int32", "VTASram", data, elem_offset)


def uop_push(env: Any, mode: int, reset: int, dst: Any, src: Any, wgt: Any, opcode: int = 0,
             use_imm: int = 0, imm: Any = 0) -> S.Stmt:
    """One micro-op push in a micro-kernel scope (mode 0 GEMM, 1 ALU)."""
    key = "VTAPushGEMMOp" if mode == 0 else "VTAPushALUOp"
    call = call_extern("int32", "VTAUopPush", mode, reset, dst, src, wgt, opcode, use_imm, imm)
    return S.AttrStmt(env.dev.vta_axis, UOP_SCOPE, E.StringImm(key), S.Evaluate(call))


def gemm(env: Any, mock: bool = False) -> Any:
    """The GEMM tensor intrinsic of ``env`` (``env.gemm``); ``mock``: statements that do
    nothing (TVM's ``env.mock.gemm``)."""
    inp: Any = te.placeholder((env.BATCH, env.BLOCK_IN), dtype=env.inp_dtype, name=env.inp_scope)
    wgt: Any = te.placeholder((env.BLOCK_OUT, env.BLOCK_IN), dtype=env.wgt_dtype,
                              name=env.wgt_scope)
    k = te.reduce_axis((0, env.BLOCK_IN), name="k")
    out: Any = te.compute(
        (env.BATCH, env.BLOCK_OUT),
        lambda i, j: te.sum(inp[i, k].astype(env.acc_dtype) * wgt[j, k].astype(env.acc_dtype),
                            axis=[k]),
        name="out")
    binds = {
        inp: decl_buffer(inp.shape, inp.dtype, env.inp_scope, scope=env.inp_scope,
                         offset_factor=env.BATCH * env.BLOCK_IN),
        wgt: decl_buffer(wgt.shape, wgt.dtype, env.wgt_scope, scope=env.wgt_scope,
                         offset_factor=env.BLOCK_OUT * env.BLOCK_IN),
        out: decl_buffer(out.shape, out.dtype, env.acc_scope, scope=env.acc_scope,
                         offset_factor=env.BATCH * env.BLOCK_OUT),
    }

    def intrin_func(ins: list, outs: list) -> Any:
        dinp, dwgt = ins
        dout = outs[0]
        if mock:
            nop = S.Evaluate(0)
            return nop, nop, nop
        dst = sram_ref(dout.data, dout.elem_offset)

        def instr(reset: int) -> S.Stmt:
            if reset:
                return uop_push(env, 0, 1, dst, 0, 0)
            return uop_push(env, 0, 0, dst, sram_ref(dinp.data, dinp.elem_offset),
                            sram_ref(dwgt.data, dwgt.elem_offset))

        # body: the whole reduction in one call (no reduction loop outside): reset, then
        # accumulate; the accumulator holds whatever the last kernel left
        return S.seq(instr(1), instr(0)), instr(1), instr(0)

    return te.decl_tensor_intrin(out.op, intrin_func, name="GEMM", binds=binds)
