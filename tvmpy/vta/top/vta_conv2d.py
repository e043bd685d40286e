"""Packed 2-D convolution on VTA (TVM's ``vta.top.vta_conv2d``).

Layouts: data ``NCHW{BATCH}n{BLOCK_IN}c`` = (N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN) int8,
kernel ``OIHW{BLOCK_OUT}o{BLOCK_IN}i`` = (O/BLOCK_OUT, C/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN)
int8, result (N/BATCH, O/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT) accumulated in int32 (tag
``conv2d_dense``). The schedule keeps the convolution in the accumulator, reads the data
(padded on the fly by the DMA) and the kernel into the on-chip buffers per input-channel tile,
runs the GEMM core through ``env.gemm``, applies the element-wise epilogue (bias add, shifts,
clip by min/max) on the tensor ALU, and stores the narrowed result by DMA; virtual threads on
output channels and rows (``cthread``) interleave the loads of one tile with the compute of
another (the paper's latency hiding).
"""

from __future__ import annotations

from typing import Any

from ... import autotvm, te, topi
from ...autotvm.task.task import TASK_TABLE
from ...autotvm.task.topi_integration import TopiTemplate
from ..environment import get_env
from .common import (
    as_pair,
    attach_at_store,
    bind_virtual_thread,
    const_int,
    default_tiles,
    one_output,
    schedule_epilogue_scopes,
    tiles_overflow,
    traverse_epilogue,
)

__all__ = ["conv2d_packed", "schedule_conv2d_packed", "conv2d_packed_compute"]


def conv2d_packed_compute(data: Any, kernel: Any, strides: Any, padding: Any,
                          dilation: Any = (1, 1), out_dtype: str = "int32") -> Any:
    """The packed convolution's compute (no AutoTVM context needed)."""
    env = get_env()
    if len(data.shape) != 6 or len(kernel.shape) != 6:
        raise ValueError(f"conv2d_packed: data and kernel must be 6-D packed "
                         f"(NCHWnc / OIHWoi), got {list(data.shape)} and {list(kernel.shape)}")
    if tuple(as_pair(dilation)) != (1, 1):
        raise ValueError(f"conv2d_packed: VTA supports dilation 1 only, got {dilation}")
    ish = [const_int(x) for x in data.shape]
    ksh = [const_int(x) for x in kernel.shape]
    if ish[1] != ksh[1] or ish[5] != ksh[5] or ish[4] != env.BATCH or ish[5] != env.BLOCK_IN \
            or ksh[4] != env.BLOCK_OUT:
        raise ValueError(
            f"conv2d_packed: shapes {ish} / {ksh} do not match the VTA blocking "
            f"(BATCH={env.BATCH}, BLOCK_IN={env.BLOCK_IN}, BLOCK_OUT={env.BLOCK_OUT}) or each other")
    if str(data.dtype) != env.inp_dtype or str(kernel.dtype) != env.wgt_dtype:
        raise ValueError(f"conv2d_packed: data/kernel must be {env.inp_dtype}/{env.wgt_dtype}, "
                         f"got {data.dtype}/{kernel.dtype}")
    sh, sw = as_pair(strides)
    ph, pw = as_pair(padding)[:2] if len(padding) != 4 else (padding[0], padding[1])
    pad_after = (ph, pw) if len(padding) != 4 else (padding[2], padding[3])
    if ph or pw or pad_after[0] or pad_after[1]:
        pad_data = topi.nn.pad(data, [0, 0, ph, pw, 0, 0], [0, 0, pad_after[0], pad_after[1], 0, 0],
                               name="pad_data")
    else:
        pad_data = data
    kh, kw = ksh[2], ksh[3]
    oh = (ish[2] + ph + pad_after[0] - kh) // sh + 1
    ow = (ish[3] + pw + pad_after[1] - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d_packed: kernel {kh}x{kw} larger than the padded input")
    oshape = (ish[0], ksh[0], oh, ow, ish[4], ksh[4])
    d_i = te.reduce_axis((0, kh), name="d_i")
    d_j = te.reduce_axis((0, kw), name="d_j")
    k_o = te.reduce_axis((0, ish[1]), name="k_o")
    k_i = te.reduce_axis((0, ish[5]), name="k_i")
    return te.compute(
        oshape,
        lambda b_o, c_o, i, j, b_i, c_i: te.sum(
            pad_data[b_o, k_o, i * sh + d_i, j * sw + d_j, b_i, k_i].astype(out_dtype)
            * kernel[c_o, k_o, d_i, d_j, c_i, k_i].astype(out_dtype),
            axis=[k_o, d_i, d_j, k_i]),
        name="res", tag="conv2d_dense")


class _Conv2DTemplate(TopiTemplate):
    """The tuning template of ``conv2d_packed.vta`` (as TVM's tune_relay_vta registers it):
    the convolution with the epilogue it has in a quantized network (``>> 8``, clip to
    [0, 127] in two ALU stages, cast to int8), since the VTA schedule stores the narrowed result.
    Records keep the workload of the relay call (data, kernel, strides, padding, dilation,
    layout, out_dtype), so ``apply_history_best`` serves ``vta.top.conv2d_packed``."""

    def __call__(self, *args: Any) -> tuple[Any, list[Any]]:
        from ... import tir

        env = get_env()
        res: Any = self.fcompute(*args)  # type: ignore[misc]
        res = topi.right_shift(res, 8)
        hi = tir.const((1 << (env.OUT_WIDTH - 1)) - 1, res.dtype)
        res = te.compute(res.shape, lambda *i: te.min(res(*i), hi), name="clipA",
                         tag="elemwise")
        res = te.compute(res.shape, lambda *i: te.max(res(*i), tir.const(0, res.dtype)),
                         name="clipB", tag="elemwise")
        out = topi.cast(res, env.out_dtype)
        s = self.fschedule([out])  # type: ignore[misc]
        return s, [a for a in args if isinstance(a, te.Tensor)] + [out]


TASK_TABLE["conv2d_packed.vta"] = _Conv2DTemplate("conv2d_packed.vta")


@autotvm.register_topi_compute("conv2d_packed.vta")
def conv2d_packed(cfg: Any, data: Any, kernel: Any, strides: Any, padding: Any,
                  dilation: Any = (1, 1), layout: str = "NCHW1n16c",
                  out_dtype: str = "int32") -> Any:
    """``vta.top.conv2d_packed``: the packed int8 convolution, int32 accumulate."""
    res = conv2d_packed_compute(data, kernel, strides, padding, dilation, out_dtype)
    b, co, oh, ow, _, _ = (const_int(x) for x in res.shape)
    kh, kw = const_int(kernel.shape[2]), const_int(kernel.shape[3])
    ci, bi = const_int(data.shape[1]), const_int(data.shape[4])
    cfg.add_flop(2 * b * co * oh * ow * kh * kw * ci * bi * const_int(data.shape[5])
                 * const_int(kernel.shape[4]))
    return res


def _define_space(cfg: Any, conv: Any) -> None:
    b, c_o, x_i, x_j, _, _ = conv.op.axis
    c_i = conv.op.reduce_axis[0]
    cfg.define_split("tile_b", b, num_outputs=2)
    cfg.define_split("tile_h", x_i, num_outputs=2)
    cfg.define_split("tile_w", x_j, num_outputs=2)
    cfg.define_split("tile_ci", c_i, num_outputs=2)
    cfg.define_split("tile_co", c_o, num_outputs=2)
    cfg.define_knob("oc_nthread", [1, 2])
    cfg.define_knob("h_nthread", [1, 2])


@autotvm.register_topi_schedule("conv2d_packed.vta")
def schedule_conv2d_packed(cfg: Any, outs: Any) -> Any:
    """The VTA schedule of ``outs`` (the convolution followed by its ALU epilogue)."""
    output = one_output(outs, "schedule_conv2d_packed")
    ep = traverse_epilogue(output, "conv2d_dense")
    conv = ep.main
    s = te.create_schedule(output.op)
    env = get_env()
    _define_space(cfg, conv)
    # a residual (a full-size element-wise input) takes accumulator tiles of its own
    full = {id(t) for _, t in ep.ewise_inputs if len(t.shape) == 6
            and const_int(t.shape[2]) * const_int(t.shape[3]) > 1}
    if cfg.is_fallback:
        _fallback(cfg, env, conv, acc_copies=1 + len(full))
    else:
        _check_fits(cfg, env, conv, acc_copies=1 + len(full))

    data, kernel = conv.op.input_tensors
    if isinstance(data.op, te.ComputeOp) and "pad" in data.op.tag:
        pad_data = data
        cdata = pad_data
        s[pad_data].set_scope(env.inp_scope)
    else:
        cdata = s.cache_read(data, env.inp_scope, [conv])
    ckernel = s.cache_read(kernel, env.wgt_scope, [conv])
    s[conv].set_scope(env.acc_scope)
    cache_ewise = schedule_epilogue_scopes(s, env, ep)

    x_bo, x_co, x_i, x_j, x_bi, x_ci = s[output].op.axis
    x_bo0, x_bo1 = cfg["tile_b"].apply(s, output, x_bo)
    x_co0, x_co1 = cfg["tile_co"].apply(s, output, x_co)
    x_i0, x_i1 = cfg["tile_h"].apply(s, output, x_i)
    x_j0, x_j1 = cfg["tile_w"].apply(s, output, x_j)
    s[output].reorder(x_bo0, x_i0, x_co0, x_j0, x_bo1, x_co1, x_i1, x_j1, x_bi, x_ci)
    attach_at_store(s, env, output, conv, ep, cache_ewise, x_j0)

    # virtual threads: output channel tiles, then row tiles
    bind_virtual_thread(s, output, x_co0, x_bo0, cfg["oc_nthread"].val)
    bind_virtual_thread(s, output, x_i0, x_bo0, cfg["h_nthread"].val)

    c_bo, c_co, c_i, c_j, c_bi, c_ci = s[conv].op.axis
    k_o, d_i, d_j, k_i = s[conv].op.reduce_axis
    s[conv].reorder(c_bo, k_o, c_j, d_j, d_i, c_co, c_i, c_bi, c_ci, k_i)
    k_o, _ = cfg["tile_ci"].apply(s, conv, k_o)
    s[cdata].compute_at(s[conv], k_o)
    s[ckernel].compute_at(s[conv], k_o)
    s[cdata].pragma(s[cdata].op.axis[0], env.dma_copy)
    s[ckernel].pragma(s[ckernel].op.axis[0], env.dma_copy)
    s[conv].tensorize(c_bi, env.gemm)
    s[output].pragma(x_co1, env.dma_copy)
    return s


def _fallback(cfg: Any, env: Any, conv: Any, acc_copies: int = 1) -> None:
    """Untuned tiles from the shape and the buffer sizes (as TVM's tophub defaults do for the
    PYNQ design): the largest output tile whose input window, weights and accumulators fit
    half of each on-chip buffer (the other half for the second virtual thread)."""
    data, kernel = conv.op.input_tensors
    b, co, oh, ow, _, _ = (const_int(x) for x in conv.shape)
    ci = const_int(kernel.shape[1])
    kh, kw = const_int(kernel.shape[2]), const_int(kernel.shape[3])
    stride = _stride_of(conv)
    t = default_tiles(env, b=b, co=co, oh=oh, ow=ow, ci=ci, kh=kh, kw=kw, stride=stride,
                      acc_copies=acc_copies)
    from ...autotvm.space import OtherOptionEntity, SplitEntity

    cfg["tile_b"] = SplitEntity([-1, 1])
    cfg["tile_h"] = SplitEntity([-1, t["h"]])
    cfg["tile_w"] = SplitEntity([-1, t["w"]])
    cfg["tile_ci"] = SplitEntity([-1, t["ci"]])
    cfg["tile_co"] = SplitEntity([-1, t["co"]])
    cfg["oc_nthread"] = OtherOptionEntity(t["oc_nthread"])
    cfg["h_nthread"] = OtherOptionEntity(t["h_nthread"])


def _check_fits(cfg: Any, env: Any, conv: Any, acc_copies: int = 1) -> None:
    """Refuse a tuning configuration whose tiles overflow an on-chip buffer before lowering
    (an InstantiationError costs the tuner no build and no simulation; the lowering would
    refuse it later anyway)."""
    from ...autotvm.space import InstantiationError

    kernel = conv.op.input_tensors[1]
    nt = cfg["oc_nthread"].val * cfg["h_nthread"].val
    why = tiles_overflow(env, h=cfg["tile_h"].size[-1], w=cfg["tile_w"].size[-1],
                         co=cfg["tile_co"].size[-1], ci=cfg["tile_ci"].size[-1],
                         kh=const_int(kernel.shape[2]), kw=const_int(kernel.shape[3]),
                         stride=_stride_of(conv), nthreads=nt, acc_copies=acc_copies,
                         b=cfg["tile_b"].size[-1])
    if why is not None:
        raise InstantiationError(f"conv2d_packed.vta: {why}")


def _stride_of(conv: Any) -> int:
    """The row stride, recovered from the shapes (for the tile estimate only)."""
    data, kernel = conv.op.input_tensors
    hp, kh, oh = const_int(data.shape[2]), const_int(kernel.shape[2]), const_int(conv.shape[2])
    return max(1, (hp - kh) // (oh - 1)) if oh > 1 else 1
