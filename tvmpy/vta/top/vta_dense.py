"""Packed dense on VTA (TVM's ``vta.top.vta_dense``): data (N/BATCH, C/BLOCK_IN, BATCH,
BLOCK_IN) int8, weight (O/BLOCK_OUT, C/BLOCK_IN, BLOCK_OUT, BLOCK_IN) int8, result (N/BATCH,
O/BLOCK_OUT, BATCH, BLOCK_OUT) int32 (tag ``dense_pack``); the schedule mirrors the conv2d one
(input-channel tiles loaded by DMA, GEMM core, ALU epilogue, cthread on output channels)."""

from __future__ import annotations

from typing import Any

from ... import autotvm, te
from ..environment import get_env
from .common import (
    attach_at_store,
    bind_virtual_thread,
    const_int,
    divisors,
    one_output,
    schedule_epilogue_scopes,
    traverse_epilogue,
)

__all__ = ["dense_packed", "schedule_dense_packed", "dense_packed_compute"]


def dense_packed_compute(data: Any, weight: Any, out_dtype: str = "int32") -> Any:
    env = get_env()
    if len(data.shape) != 4 or len(weight.shape) != 4:
        raise ValueError(f"dense_packed: data and weight must be 4-D packed, got "
                         f"{list(data.shape)} and {list(weight.shape)}")
    ish = [const_int(x) for x in data.shape]
    wsh = [const_int(x) for x in weight.shape]
    if ish[1] != wsh[1] or ish[2] != env.BATCH or ish[3] != env.BLOCK_IN or wsh[3] != env.BLOCK_IN \
            or wsh[2] != env.BLOCK_OUT:
        raise ValueError(f"dense_packed: shapes {ish} / {wsh} do not match the VTA blocking "
                         f"(BATCH={env.BATCH}, BLOCK_IN={env.BLOCK_IN}, "
                         f"BLOCK_OUT={env.BLOCK_OUT}) or each other")
    if str(data.dtype) != env.inp_dtype or str(weight.dtype) != env.wgt_dtype:
        raise ValueError(f"dense_packed: data/weight must be {env.inp_dtype}/{env.wgt_dtype}, "
                         f"got {data.dtype}/{weight.dtype}")
    k_o = te.reduce_axis((0, ish[1]), name="k_o")
    k_i = te.reduce_axis((0, ish[3]), name="k_i")
    return te.compute(
        (ish[0], wsh[0], ish[2], wsh[2]),
        lambda b_o, c_o, b_i, c_i: te.sum(
            data[b_o, k_o, b_i, k_i].astype(out_dtype) * weight[c_o, k_o, c_i, k_i].astype(out_dtype),
            axis=[k_o, k_i]),
        name="res", tag="dense_pack")


@autotvm.register_topi_compute("dense_packed.vta")
def dense_packed(cfg: Any, data: Any, weight: Any, bias: Any = None,
                 out_dtype: str = "int32") -> Any:
    """``vta.top.dense_packed``: the packed int8 dense, int32 accumulate (``bias``: unused,
    as TVM's; add it in the epilogue)."""
    res = dense_packed_compute(data, weight, out_dtype)
    n = 1
    for x in res.shape:
        n *= const_int(x)
    cfg.add_flop(2 * n * const_int(data.shape[1]) * const_int(data.shape[3]))
    return res


@autotvm.register_topi_schedule("dense_packed.vta")
def schedule_dense_packed(cfg: Any, outs: Any) -> Any:
    output = one_output(outs, "schedule_dense_packed")
    ep = traverse_epilogue(output, "dense_pack")
    dense = ep.main
    s = te.create_schedule(output.op)
    env = get_env()
    b, c_o, _, _ = dense.op.axis
    c_i, _ = dense.op.reduce_axis
    cfg.define_split("tile_b", b, num_outputs=2)
    cfg.define_split("tile_ci", c_i, num_outputs=2)
    cfg.define_split("tile_co", c_o, num_outputs=2)
    cfg.define_knob("oc_nthread", [1, 2])
    if cfg.is_fallback:
        _fallback(cfg, env, dense)

    data, weight = dense.op.input_tensors
    cdata = s.cache_read(data, env.inp_scope, [dense])
    cweight = s.cache_read(weight, env.wgt_scope, [dense])
    s[dense].set_scope(env.acc_scope)
    cache_ewise = schedule_epilogue_scopes(s, env, ep)

    x_b, x_c, _, _ = s[output].op.axis
    x_bo, x_bi = cfg["tile_b"].apply(s, output, x_b)
    x_co, x_ci = cfg["tile_co"].apply(s, output, x_c)
    s[output].reorder(x_bo, x_co, x_bi, x_ci)
    attach_at_store(s, env, output, dense, ep, cache_ewise, x_co)
    bind_virtual_thread(s, output, x_co, x_bo, cfg["oc_nthread"].val)

    d_bo, d_co, d_bi, d_ci = s[dense].op.axis
    k_o, k_i = s[dense].op.reduce_axis
    s[dense].reorder(d_bo, k_o, d_co, d_bi, d_ci, k_i)
    k_o, _ = cfg["tile_ci"].apply(s, dense, k_o)
    s[cdata].compute_at(s[dense], k_o)
    s[cweight].compute_at(s[dense], k_o)
    s[cdata].pragma(s[cdata].op.axis[0], env.dma_copy)
    s[cweight].pragma(s[cweight].op.axis[0], env.dma_copy)
    s[dense].tensorize(d_bi, env.gemm)
    s[output].pragma(x_ci, env.dma_copy)
    return s


def _fallback(cfg: Any, env: Any, dense: Any) -> None:
    """Untuned tiles: the whole batch, the largest output-channel tile (even tile count for two
    virtual threads when there are >= 2 tiles) and input-channel tile fitting half the buffers."""
    from ...autotvm.space import OtherOptionEntity, SplitEntity

    data, weight = dense.op.input_tensors
    nb, ci = const_int(data.shape[0]), const_int(data.shape[1])
    co = const_int(weight.shape[0])
    inp_cap = env.INP_BUFF_SIZE // env.INP_ELEM_BYTES
    wgt_cap = env.WGT_BUFF_SIZE // env.WGT_ELEM_BYTES
    acc_cap = env.ACC_BUFF_SIZE // env.ACC_ELEM_BYTES
    nt = 2 if co >= 2 and co % 2 == 0 else 1
    b_t = max(d for d in divisors(nb) if d * 4 * nt <= acc_cap)
    co_t = max(d for d in divisors(co) if (co // d) % nt == 0 and b_t * d * 4 * nt <= acc_cap
               and d * nt <= wgt_cap)
    ci_t = max(d for d in divisors(ci) if b_t * d * nt <= inp_cap and co_t * d * nt <= wgt_cap)
    cfg["tile_b"] = SplitEntity([-1, b_t])
    cfg["tile_co"] = SplitEntity([-1, co_t])
    cfg["tile_ci"] = SplitEntity([-1, ci_t])
    cfg["oc_nthread"] = OtherOptionEntity(nt)
