"""The x86 NCHWc convolutions as AutoTVM templates (TVM's ``conv2d_NCHWc.x86`` and
``depthwise_conv2d_NCHWc.x86``).

The computes are ``topi.nn.conv2d_NCHWc`` / ``depthwise_conv2d_NCHWc``; the schedule is the
default one of ``conv2d.py`` (``schedule_nchwc_tile``) with its choices as knobs:

- ``tile_ow``: output columns per register tile (``reg_n``): 1..16 (a size that does not
  divide OW leaves a guarded tail tile); the default ``default_ow_tile(OW)`` first;
- ``tile_oc``: channel blocks (chunks of ``oc_bn`` output channels) per register tile, the
  divisors 1, 2, 4 of the chunk count;
- ``unroll_kw``: unroll the kernel-width reduction loop;
- ``inline_pad``: compute the padding inside the convolution (a per-pixel condition) instead
  of writing a padded copy of the input first;
- ``tile_oh``: output rows per parallel task (divisors of OH up to 8; default 1): coarser
  tasks keep a chunk group's weights in cache across rows;
- ``kernel_outer`` (plain convolutions with a window): reduction order (ky, kx, ic_chunk,
  ic_lane) instead of (ic_chunk, ky, kx, ic_lane).

With no tuned record (``cfg.is_fallback``) the knobs take exactly the values of
``schedule_conv2d_NCHWc(outs)``, so an untuned build is today's default schedule.

The channel blocks ``ic_bn``/``oc_bn`` (the layout) are chosen before these templates run, by
AlterOpLayout (``relay.op.strategy.x86_alter_op.conv_blocks``); they are part of the workload (the
tensor shapes), not knobs. To tune them (TVM's ``tile_ic``/``tile_oc``), tune the tasks of the
other blockings too (``autotvm.graph_tuner.layout_tasks``): the layout pass asks the dispatch
context (``apply_history_best``: the fastest blocking; ``apply_graph_best``: the graph tuner's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import autotvm
from ..nn.conv2d import conv2d_NCHWc as _nn_conv2d_NCHWc
from ..nn.depthwise_conv2d import depthwise_conv2d_NCHWc as _nn_depthwise_conv2d_NCHWc
from .conv2d import (
    _nchwc_tile,
    default_inline_pad,
    default_ow_tile,
    default_unroll_kw,
    find_nchwc,
    schedule_nchwc_tile,
)

if TYPE_CHECKING:
    from ...te import Tensor
    from ...te.schedule import Schedule

__all__ = ["conv2d_NCHWc", "schedule_conv2d_NCHWc_autotvm", "depthwise_conv2d_NCHWc",
           "schedule_depthwise_conv2d_NCHWc_autotvm", "define_nchwc_space"]

MAX_TILE_OW = 16
MAX_TILE_OH = 8


def _knob(cfg: Any, name: str, default: Any) -> Any:
    """A knob's value; ``default`` for configs of logs written before the knob existed."""
    return cfg[name].val if name in cfg else default


def _const(d: Any) -> int:
    return int(getattr(d, "value", d))


def define_nchwc_space(cfg: Any, out: Tensor, kernel: Tensor, depthwise: bool) -> None:
    """Declare the knobs of the NCHWc templates for the output ``out`` (``[N, OC/oc_bn, OH, OW,
    oc_bn]``) and set the fallback config to the default schedule's choices."""
    oc_chunk, ow = _const(out.shape[1]), _const(out.shape[3])
    kh, kw = _const(kernel.shape[2]), _const(kernel.shape[3])
    d_oc, d_reg = _nchwc_tile(oc_chunk, depthwise)
    d_reg = default_ow_tile(ow, d_reg)
    d_inline = default_inline_pad(out, depthwise)
    ow_cands = [d_reg] + [r for r in range(1, min(ow, MAX_TILE_OW) + 1) if r != d_reg]
    oc_cands = [d_oc] + [c for c in (1, 2, 4) if oc_chunk % c == 0 and c != d_oc]
    # the default first: a fallback config takes each knob's first candidate
    cfg.define_knob("tile_ow", ow_cands)
    cfg.define_knob("tile_oc", oc_cands)
    cfg.define_knob("unroll_kw", [False, True] if kw > 1 else [False])
    cfg.define_knob("inline_pad", [d_inline, not d_inline])
    oh = _const(out.shape[2])
    cfg.define_knob("tile_oh", [r for r in range(1, min(oh, MAX_TILE_OH) + 1) if oh % r == 0])
    cfg.define_knob("kernel_outer", [False, True] if not depthwise and kh * kw > 1 else [False])
    if cfg.is_fallback:
        from ...autotvm.space import OtherOptionEntity

        cfg["tile_ow"] = OtherOptionEntity(d_reg)
        cfg["tile_oc"] = OtherOptionEntity(d_oc)
        cfg["unroll_kw"] = OtherOptionEntity(default_unroll_kw(out, depthwise))
        cfg["inline_pad"] = OtherOptionEntity(d_inline)
        cfg["tile_oh"] = OtherOptionEntity(1)
        cfg["kernel_outer"] = OtherOptionEntity(False)


def _schedule(cfg: Any, outs: Any) -> Schedule:
    s, conv, out, _ = find_nchwc(outs)
    oc_chunk = _const(conv.shape[1])
    schedule_nchwc_tile(s, conv, out, max(1, min(int(cfg["tile_oc"].val), oc_chunk)),
                        int(cfg["tile_ow"].val), bool(cfg["inline_pad"].val),
                        bool(cfg["unroll_kw"].val), _knob(cfg, "tile_oh", 1),
                        bool(_knob(cfg, "kernel_outer", False)))
    return s


@autotvm.register_topi_compute("conv2d_NCHWc.x86")
def conv2d_NCHWc(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                 dilation: Any, layout: str = "", out_layout: str = "",
                 out_dtype: str | None = None) -> Tensor:
    """``topi.nn.conv2d_NCHWc`` with the tuning knobs of the x86 schedule."""
    out = _nn_conv2d_NCHWc(data, kernel, strides, padding, dilation, layout, out_layout,
                           out_dtype)
    define_nchwc_space(cfg, out, kernel, depthwise=False)
    n, oc_chunk, oh, ow, oc_bn = (_const(d) for d in out.shape)
    _, ic_chunk, kh, kw, ic_bn, _ = (_const(d) for d in kernel.shape)
    cfg.add_flop(2 * n * oc_chunk * oh * ow * oc_bn * ic_chunk * ic_bn * kh * kw)
    return out


@autotvm.register_topi_schedule("conv2d_NCHWc.x86")
def schedule_conv2d_NCHWc_autotvm(cfg: Any, outs: Any) -> Schedule:
    """The x86 NCHWc schedule with the config's knobs."""
    return _schedule(cfg, outs)


@autotvm.register_topi_compute("depthwise_conv2d_NCHWc.x86")
def depthwise_conv2d_NCHWc(cfg: Any, data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                           dilation: Any, layout: str = "", out_layout: str = "",
                           out_dtype: str | None = None) -> Tensor:
    """``topi.nn.depthwise_conv2d_NCHWc`` with the tuning knobs of the x86 schedule."""
    out = _nn_depthwise_conv2d_NCHWc(data, kernel, strides, padding, dilation, layout,
                                     out_layout, out_dtype)
    define_nchwc_space(cfg, out, kernel, depthwise=True)
    n, c_chunk, oh, ow, c_bn = (_const(d) for d in out.shape)
    kh, kw = _const(kernel.shape[2]), _const(kernel.shape[3])
    cfg.add_flop(2 * n * c_chunk * oh * ow * c_bn * kh * kw)
    return out


@autotvm.register_topi_schedule("depthwise_conv2d_NCHWc.x86")
def schedule_depthwise_conv2d_NCHWc_autotvm(cfg: Any, outs: Any) -> Schedule:
    """The x86 depthwise NCHWc schedule with the config's knobs."""
    return _schedule(cfg, outs)
