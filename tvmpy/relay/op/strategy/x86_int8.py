"""x86 int8 implementations: ``nn.conv2d`` / ``nn.dense`` / ``nn.batch_matmul`` with uint8 data,
int8 weights and int32 output (what QNN canonicalization emits) on the VNNI micro-kernel
(``topi/x86/conv2d_int8.py``, ``dense_int8.py``), and their AlterOpLayout rewrites.

* **Layouts** (AlterOpLayout, "cpu" targets): a plain NCHW/OIHW ``nn.conv2d`` becomes
  ``nn.contrib_conv2d_NCHWc_int8`` (data ``NCHW{ic_bn}c``, the kernel packed
  ``OIHW{ic_bn/4}i16o4i`` at compile time, output ``NCHW16c``). Input channels that are not a
  multiple of 4 are zero-padded (the data with ``nn.pad`` in NCHW, the kernel with zero
  channels); output channels that are not a multiple of 16 get zero filters and are cropped
  on the way out: by whole blocks of ``NCHW8c`` / ``NCHW4c`` when 8 or 4 divides them (the
  result stays blocked; an int8 convolution reads the block its input arrives in when it is a
  multiple of 4), else in NCHW. A depthwise int8 ``nn.conv2d`` becomes
  ``nn.contrib_depthwise_conv2d_NCHWc_int8`` in the block its input arrives in (16 after an
  int8 NCHWc convolution; channels padded to a multiple of 16 otherwise), so a quantized
  MobileNet stays blocked through it; on VNNI targets with 16-channel blocks and windows at
  most 4 wide its kernel is packed ``OIH16o4w`` (the vpdpbusd path of
  ``topi/x86/depthwise_int8.py``), else ``OIHW1i{c}o``. Both absorb the zero-point ``nn.pad`` that QNN
  canonicalization puts before a padded convolution (their ``pad_value`` attribute). ``nn.dense`` with a constant weight becomes
  ``nn.contrib_dense_pack_int8`` with the weight packed ``[N/16, K/4, 16, 4]``.
* **Strategies**: those two ops, and the unaltered int8 ``nn.conv2d`` (groups 1),
  ``nn.dense`` and ``nn.batch_matmul`` (packing inside the kernel), at plevel 20 over the
  generic int32 computes. Other integer combinations (int8 data, uint8 weights, ...) and
  other grouped int8 convolutions take the generic path (correct, not fast).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....topi.x86 import conv2d_int8 as _conv
from ....topi.x86 import dense_int8 as _dense
from ....topi.x86 import depthwise_int8 as _dw
from ...expr import Call, Constant, RelayExpr
from ...op import nn as _nn
from ...op import transform as _tr
from ...ty import TensorType
from ..nn_int8 import (
    contrib_conv2d_nchwc_int8,
    contrib_dense_pack_int8,
    contrib_depthwise_conv2d_nchwc_int8,
)
from . import OpStrategy, register_strategy_func
from .generic import in_target, wrap_topi_schedule

__all__ = ["is_int8_operands", "alter_conv2d_int8", "conv2d_int8_demand", "alter_dense_int8",
           "add_conv2d_int8", "add_dense_int8", "add_batch_matmul_int8", "INT8_PLEVEL"]

INT8_PLEVEL = 20


def _static(t: Any) -> bool:
    return isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape)


def is_int8_operands(data_dtype: str, weight_dtype: str, out_dtype: str) -> bool:
    """uint8 data x int8 weight accumulated in int32: the operands of vpdpbusd."""
    return data_dtype == "uint8" and weight_dtype == "int8" and out_dtype == "int32"


def _int8_operands_static(call: Call) -> bool:
    """A typed NCHW/OIHW ``nn.conv2d`` with uint8 x int8 -> int32 operands, static shapes."""
    a = call.attrs
    try:
        d, w = (x.checked_type for x in call.args)
    except ValueError:
        return False
    if not (_static(d) and _static(w)) or len(d.shape) != 4 or 0 in (*d.shape, *w.shape):
        return False
    return (is_int8_operands(d.dtype, w.dtype, a.out_dtype or d.dtype)
            and a.data_layout == "NCHW" and a.kernel_layout == "OIHW"
            and a.out_layout in ("", "NCHW"))


def _int8_conv(call: Call) -> bool:
    """A typed plain (groups 1) NCHW/OIHW int8 ``nn.conv2d`` with static shapes."""
    return _int8_operands_static(call) and call.attrs.groups == 1


def _int8_depthwise(call: Call) -> bool:
    """A typed depthwise (one filter per channel) NCHW/OIHW int8 ``nn.conv2d``."""
    if not _int8_operands_static(call):
        return False
    c = int(call.args[0].checked_type.shape[1])
    w = call.args[1].checked_type.shape
    return call.attrs.groups == c and int(w[0]) == c and int(w[1]) == 1 and c > 1


DW_BLOCK = 16
"""Channel block of an int8 depthwise convolution whose input does not arrive blocked: the
int8 NCHWc convolutions' output block."""


def conv2d_int8_demand(call: Call) -> list[str | None] | None:
    """The layouts :func:`alter_conv2d_int8` reads the arguments in (None: not rewritten)."""
    if _int8_depthwise(call):
        c = int(call.args[0].checked_type.shape[1])
        return [f"NCHW{DW_BLOCK}c" if c % DW_BLOCK == 0 else None, None]
    if not _int8_conv(call):
        return None
    ic = int(call.args[0].checked_type.shape[1])
    icb, icp = _conv.int8_ic_block(ic)
    return [f"NCHW{icb}c" if icp == ic else None, None]


def _pack_kernel(weight: RelayExpr, icb: int) -> RelayExpr:
    """OIHW int8 -> the 7-D ``OIHW{icb/4}i16o4i`` kernel, zero-padded: computed for a constant,
    else relay pad/reshape/transpose (folded once the weight is bound)."""
    if isinstance(weight, Constant):
        return Constant(_conv.pack_kernel_int8_np(weight.data.numpy(), icb))
    oc, ic, kh, kw = (int(d) for d in weight.checked_type.shape)
    ocp, icp = -(-oc // 16) * 16, -(-ic // icb) * icb
    if (ocp, icp) != (oc, ic):
        weight = _nn.pad(weight, ((0, ocp - oc), (0, icp - ic), (0, 0), (0, 0)))
    r = _tr.reshape(weight, (ocp // 16, 16, icp // icb, icb // 4, 4, kh, kw))
    return _tr.transpose(r, (0, 2, 5, 6, 3, 1, 4))


def _pack_dw_kernel(weight: RelayExpr, cb: int) -> RelayExpr:
    """OIHW ``[C, 1, KH, KW]`` int8 -> ``[C/cb, 1, KH, KW, 1, cb]``, zero filters added."""
    if isinstance(weight, Constant):
        return Constant(_dw.pack_depthwise_kernel_int8_np(weight.data.numpy(), cb))
    c, _, kh, kw = (int(d) for d in weight.checked_type.shape)
    cp = -(-c // cb) * cb
    if cp != c:
        weight = _nn.pad(weight, ((0, cp - c), (0, 0), (0, 0), (0, 0)))
    return _tr.transpose(_tr.reshape(weight, (cp // cb, cb, 1, kh, kw, 1)), (0, 2, 3, 4, 5, 1))


def _pack_dw_kernel_dot(weight: RelayExpr) -> RelayExpr:
    """OIHW ``[C, 1, KH, KW<=4]`` int8 -> ``[C/16, KH, 16, 4]`` (the VNNI path's kernel)."""
    if isinstance(weight, Constant):
        return Constant(_dw.pack_depthwise_kernel_dot_np(weight.data.numpy()))
    c, _, kh, kw = (int(d) for d in weight.checked_type.shape)
    cp = -(-c // 16) * 16
    weight = _nn.pad(_tr.reshape(weight, (c, kh, kw)), ((0, cp - c), (0, 0), (0, 4 - kw)))
    return _tr.transpose(_tr.reshape(weight, (cp // 16, 16, kh, 4)), (0, 2, 1, 3))


def _zero_point_pad(call: Call, inputs: Any) -> tuple[Any, tuple[int, ...], int]:
    """``(data source, padding, pad value)``: when the convolution's data is a constant
    ``nn.pad`` of H and W only (QNN canonicalization pads with the data's zero point) and the
    convolution's own padding is zero (or the pad value is 0), the pad folds into the
    convolution: its source is the pad's arguments (an ``AlterInputs``, index 0). Otherwise
    the call's own arguments, padding and 0."""
    own = tuple(int(p) for p in call.attrs.padding)
    pad = call.args[0]
    if not (isinstance(pad, Call) and getattr(pad.op, "name", None) == "nn.pad"):
        return inputs, own, 0
    pa = pad.attrs
    pw = [tuple(int(x) for x in p) for p in pa.pad_width]
    value = float(pa.pad_value)
    if (pa.pad_mode != "constant" or len(pw) != 4 or pw[0] != (0, 0) or pw[1] != (0, 0)
            or not value.is_integer() or not 0 <= value <= 255 or (any(own) and value != 0)
            or min(min(p) for p in pw) < 0):
        return inputs, own, 0
    (pt, pb), (pl, pr) = pw[2], pw[3]
    return inputs.of_arg(0), (own[0] + pt, own[1] + pl, own[2] + pb, own[3] + pr), int(value)


def alter_conv2d_int8(call: Call, inputs: Any) -> tuple[RelayExpr, str | None] | None:
    """The int8 NCHWc rewrite of a typed ``nn.conv2d`` (see the module docstring), or None."""
    if _int8_depthwise(call):
        return _alter_depthwise_int8(call, inputs)
    if not _int8_conv(call):
        return None
    a = call.attrs
    d, w = (x.checked_type for x in call.args)
    ic, oc = int(d.shape[1]), int(w.shape[0])
    icb, icp = _conv.int8_ic_block(ic)
    src, padding, zp = _zero_point_pad(call, inputs)
    blk = src.block(0)
    if icp == ic and blk is not None and blk % 4 == 0 and ic % blk == 0:
        icb = blk  # any multiple of 4 works: take the block the input arrives in
    if icp == ic:
        data = src.get(0, f"NCHW{icb}c")
    else:  # (the added channels meet zero filters: their value does not matter)
        padded = _nn.pad(src.plain(0), ((0, 0), (0, icp - ic), (0, 0), (0, 0)))
        data = _tr.layout_transform(padded, "NCHW", f"NCHW{icb}c")
    kernel = _pack_kernel(inputs.plain(1), icb)
    ocp = -(-oc // 16) * 16
    out = contrib_conv2d_nchwc_int8(data, kernel, a.strides, padding, a.dilation, ocp,
                                    tuple(int(x) for x in w.shape[2:]), f"NCHW{icb}c",
                                    _conv.kernel_layout_int8(icb), zp)
    if ocp == oc:
        return out, "NCHW16c"
    return _crop_channels(out, oc)


def _crop_channels(out: RelayExpr, oc: int) -> tuple[RelayExpr, str | None]:
    """The first ``oc`` channels of an ``NCHW16c`` result padded to whole blocks: in a smaller
    block dividing ``oc`` (8 or 4: whole blocks are cut off, the result stays blocked, and the
    int8 convolution after it reads that block), else in NCHW."""
    b = next((b for b in (8, 4) if oc % b == 0), None)
    if b is None:
        plain = _tr.layout_transform(out, "NCHW16c", "NCHW")
        return _tr.strided_slice(plain, (0,), (oc,), axes=(1,)), None
    small = _tr.layout_transform(out, "NCHW16c", f"NCHW{b}c")
    return _tr.strided_slice(small, (0,), (oc // b,), axes=(1,)), f"NCHW{b}c"


def _alter_depthwise_int8(call: Call, inputs: Any) -> tuple[RelayExpr, str | None]:
    """An int8 depthwise ``nn.conv2d`` -> ``nn.contrib_depthwise_conv2d_NCHWc_int8`` in the
    block its input arrives in (when that divides the channels), else :data:`DW_BLOCK` with
    the channels padded (zero filters) and the result cropped in NCHW."""
    a = call.attrs
    c = int(call.args[0].checked_type.shape[1])
    kh, kw = (int(x) for x in call.args[1].checked_type.shape[2:])
    src, padding, zp = _zero_point_pad(call, inputs)
    blk = src.block(0)
    cb = blk if blk is not None and c % blk == 0 else DW_BLOCK
    cp = -(-c // cb) * cb
    if cp == c:
        data = src.get(0, f"NCHW{cb}c")
    else:
        padded = _nn.pad(src.plain(0), ((0, 0), (0, cp - c), (0, 0), (0, 0)))
        data = _tr.layout_transform(padded, "NCHW", f"NCHW{cb}c")
    from ....target import Target
    from ....topi.x86.int8_intrin import int8_isa

    target = Target.current()
    if _dw.uses_dot(cb, kw, int(a.dilation[1]), int8_isa(target)) and _dense.use_tensorize(target):
        kernel, kl = _pack_dw_kernel_dot(inputs.plain(1)), _dw.DOT_KERNEL_LAYOUT
    else:
        kernel, kl = _pack_dw_kernel(inputs.plain(1), cb), _dw.depthwise_kernel_layout_int8(cb)
    out = contrib_depthwise_conv2d_nchwc_int8(
        data, kernel, a.strides, padding, a.dilation, (kh, kw), f"NCHW{cb}c", kl, zp)
    if cp == c:
        return out, f"NCHW{cb}c"
    plain = _tr.layout_transform(out, f"NCHW{cb}c", "NCHW")
    return _tr.strided_slice(plain, (0,), (c,), axes=(1,)), None


def alter_dense_int8(call: Call, inputs: Any) -> tuple[RelayExpr, None] | None:
    """``nn.dense`` (int8 operands, 2-D, static shapes, a constant weight) with the weight
    packed at compile time, or None."""
    try:
        d, w = (x.checked_type for x in call.args)
    except ValueError:
        return None
    if not (_static(d) and _static(w)) or len(d.shape) < 2 or len(w.shape) != 2:
        return None
    if not is_int8_operands(d.dtype, w.dtype, call.attrs.out_dtype or d.dtype):
        return None
    weight = inputs.plain(1)
    if not isinstance(weight, Constant) or 0 in (*d.shape, *w.shape):
        return None  # a weight given at run time: packed inside the kernel (strategy)
    packed = Constant(_dense.pack_weight_int8_np(np.asarray(weight.data.numpy())))
    data = inputs.plain(0)
    lead = tuple(int(x) for x in d.shape[:-1])
    if len(lead) > 1:  # [..., K]: one matrix product over the flattened rows
        data = _tr.reshape(data, (int(np.prod(lead)), int(d.shape[-1])))
    out = contrib_dense_pack_int8(data, packed, int(w.shape[0]))
    if len(lead) > 1:
        out = _tr.reshape(out, (*lead, int(w.shape[0])))
    return out, None


# ---- computes and strategies ------------------------------------------------------------------
def _ints(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_ints(x) for x in v)
    return int(getattr(v, "value", v))


def _conv_nchwc_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    data, kernel = inputs
    return [_conv.conv2d_NCHWc_int8(data, kernel, _ints(attrs.strides), _ints(attrs.padding),
                                    _ints(attrs.dilation), attrs.data_layout, "NCHW16c",
                                    "int32", int(attrs.pad_value))]


def _dw_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    ks = None if attrs.kernel_size is None else _ints(attrs.kernel_size)
    return [_dw.depthwise_conv2d_NCHWc_int8(inputs[0], inputs[1], _ints(attrs.strides),
                                            _ints(attrs.padding), _ints(attrs.dilation),
                                            int(attrs.pad_value), "int32", _dw.DW_TILE_OW, ks)]


def _dense_pack_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    units = getattr(attrs.units, "value", attrs.units)
    return [_dense.dense_int8(inputs[0], inputs[1], None if units is None else int(units),
                              "int32")]


def _conv_nchw_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [_conv.conv2d_nchw_int8(inputs[0], inputs[1], _ints(attrs.strides),
                                   _ints(attrs.padding), _ints(attrs.dilation))]


def _dense_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    from ....topi import reshape

    data, weight = inputs
    packed = _dense.pack_weight_int8(weight)
    n = _ints(weight.shape[0])
    lead = tuple(_ints(d) for d in data.shape[:-1])
    if len(lead) > 1:  # [..., K] -> [rows, K] (a copy: tensorize matches plain rows) -> [..., N]
        flat = _dense.flatten_rows(data)
        return [reshape(_dense.dense_int8(flat, packed, n, "int32"), (*lead, n))]
    return [_dense.dense_int8(data, packed, n, "int32")]


def _batch_matmul_compute(attrs: Any, inputs: list, out_type: Any) -> list:
    return [_dense.batch_matmul_int8(inputs[0], inputs[1], "int32", bool(attrs.transpose_b))]


def _add(s: OpStrategy, compute: Any, schedule: Any, name: str, target: Any) -> None:
    s.add_implementation(in_target(compute, target), in_target(schedule, target), name,
                         INT8_PLEVEL)


def _strategy(compute: Any, schedule: Any, name: str) -> Any:
    def fstrategy(attrs: Any, inputs: Any, out_type: Any, target: Any) -> OpStrategy:
        s = OpStrategy()
        _add(s, compute, schedule, name, target)
        return s

    return fstrategy


register_strategy_func("nn.contrib_conv2d_NCHWc_int8", "generic", _strategy(
    _conv_nchwc_compute, wrap_topi_schedule(_conv.schedule_conv2d_NCHWc_int8),
    "conv2d_NCHWc_int8.x86"))
register_strategy_func("nn.contrib_depthwise_conv2d_NCHWc_int8", "generic", _strategy(
    _dw_compute, wrap_topi_schedule(_dw.schedule_depthwise_conv2d_NCHWc_int8),
    "depthwise_conv2d_NCHWc_int8.x86"))
register_strategy_func("nn.contrib_dense_pack_int8", "generic", _strategy(
    _dense_pack_compute, wrap_topi_schedule(_dense.schedule_dense_int8), "dense_int8.x86"))


def _tensor_static(t: Any) -> bool:
    return all(isinstance(getattr(d, "value", d), int) for d in t.shape)


def _int8_call(attrs: Any, inputs: list, out_type: Any) -> bool:
    """Two static, non-empty operands, uint8 x int8 -> int32: the int8 kernels apply."""
    if len(inputs) != 2 or not all(_tensor_static(t) for t in inputs):
        return False
    out_dtype = getattr(attrs, "out_dtype", "") or out_type.dtype
    if not is_int8_operands(inputs[0].dtype, inputs[1].dtype, out_dtype):
        return False
    return not any(int(getattr(d, "value", d)) == 0 for t in inputs for d in t.shape)


def add_conv2d_int8(s: OpStrategy, attrs: Any, inputs: list, out_type: Any,
                    target: Any = None) -> None:
    """The int8 implementation of an unaltered ``nn.conv2d`` (groups 1, NCHW/OIHW, at least
    16 output channels) at plevel :data:`INT8_PLEVEL`."""
    # (fewer than 16 output channels: the NCHW result reads fewer than 16 lanes of the
    # 16-channel blocks, bound inference shrinks the accumulation below the micro-kernel's
    # width and tensorize refuses it; AlterOpLayout's rewrite has no such limit)
    if _int8_call(attrs, inputs, out_type) and attrs.groups == 1 \
            and attrs.data_layout == "NCHW" and attrs.kernel_layout == "OIHW" \
            and attrs.out_layout in ("", "NCHW") and len(inputs[0].shape) == 4 \
            and int(getattr(inputs[1].shape[0], "value", inputs[1].shape[0])) >= 16:
        _add(s, _conv_nchw_compute, wrap_topi_schedule(_conv.schedule_conv2d_nchw_int8),
             "conv2d_nchw_int8.x86", target)


def add_dense_int8(s: OpStrategy, attrs: Any, inputs: list, out_type: Any,
                   target: Any = None) -> None:
    """The int8 implementation of an unaltered ``nn.dense`` (the weight packed inside the
    kernel) at plevel :data:`INT8_PLEVEL`."""
    if _int8_call(attrs, inputs, out_type) and len(inputs[0].shape) >= 2 \
            and len(inputs[1].shape) == 2:
        _add(s, _dense_compute, wrap_topi_schedule(_dense.schedule_dense_int8),
             "dense_int8.x86", target)


def add_batch_matmul_int8(s: OpStrategy, attrs: Any, inputs: list, out_type: Any,
                          target: Any = None) -> None:
    """The int8 implementation of ``nn.batch_matmul`` (A not transposed, 3-D operands) at
    plevel :data:`INT8_PLEVEL`."""
    if _int8_call(attrs, inputs, out_type) and not attrs.transpose_a \
            and len(inputs[0].shape) == 3 and len(inputs[1].shape) == 3:
        _add(s, _batch_matmul_compute, wrap_topi_schedule(_dense.schedule_batch_matmul_int8),
             "batch_matmul_int8.x86", target)
