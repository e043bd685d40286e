"""Computes and schedules of the bit-serial operators (every target: the computes of
``topi.nn.bitserial``; CPUs: the ``topi.x86.bitserial`` schedules), and their weight prepacking:
a constant weight becomes ``nn.bitpack(weight)`` in AlterOpLayout, which FoldConstant then
evaluates at compile time, so runs pack only the activations."""

from __future__ import annotations

from typing import Any

from .... import topi
from ....topi.x86 import bitserial as x86_bitserial
from ...expr import Call, Constant
from ..registry import register_alter_op_layout

__all__ = ["BITSERIAL_COMPUTES", "BITSERIAL_X86_SCHEDULES"]


def _bitpack(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.bitpack(inputs[0], attrs.bits, attrs.pack_axis, attrs.bit_axis,
                            attrs.pack_dtype, name=attrs.name)]


def _dense(attrs: Any, inputs: list, out_type: Any) -> list:
    return [topi.nn.bitserial_dense(inputs[0], inputs[1], attrs.data_bits, attrs.weight_bits,
                                    attrs.pack_dtype, attrs.out_dtype, attrs.unipolar)]


def _conv2d(attrs: Any, inputs: list, out_type: Any) -> list:
    fn = (topi.nn.bitserial_conv2d_nchw if attrs.data_layout == "NCHW"
          else topi.nn.bitserial_conv2d_nhwc)
    return [fn(inputs[0], inputs[1], tuple(attrs.strides), tuple(attrs.padding),
               attrs.activation_bits, attrs.weight_bits, attrs.pack_dtype, attrs.out_dtype,
               attrs.unipolar)]


def _conv2d_x86(attrs: Any, outs: list, target: Any) -> Any:
    if attrs.data_layout == "NCHW":
        return x86_bitserial.schedule_bitserial_conv2d_nchw(outs)
    return x86_bitserial.schedule_bitserial_conv2d_nhwc(outs)


def _dense_x86(attrs: Any, outs: list, target: Any) -> Any:
    return x86_bitserial.schedule_bitserial_dense(outs)


#: the computes (every target; generic.py adds them to its table) and the CPU schedules (x86.py);
#: nn.bitpack is injective: the targets' injective schedules
BITSERIAL_COMPUTES = {"nn.bitpack": _bitpack, "nn.bitserial_dense": _dense,
                      "nn.bitserial_conv2d": _conv2d}
BITSERIAL_X86_SCHEDULES = {"nn.bitserial_dense": _dense_x86, "nn.bitserial_conv2d": _conv2d_x86}


# the packed weight's (pack_axis, bit_axis) per op and data layout, as the computes take it
def _weight_packing(c: Call) -> tuple[int, int, int] | None:
    """(pack_axis, bit_axis, unpacked rank) of ``c``'s weight, as its compute packs it."""
    if c.op.name == "nn.bitserial_dense":
        return 1, 1, 2
    return (1, 2, 4) if c.attrs.data_layout == "NCHW" else (2, 4, 4)


def _prepack_weight(c: Call, inputs: Any) -> Any:
    """A constant unpacked weight -> ``nn.bitpack(weight)`` (folded at compile time)."""
    from ..nn_bitserial import bitpack

    weight = inputs.plain(1)
    pack_axis, bit_axis, rank = _weight_packing(c)
    if not isinstance(weight, Constant) or len(weight.data.shape) != rank:
        return None
    packed = bitpack(weight, c.attrs.weight_bits, pack_axis, bit_axis, c.attrs.pack_dtype,
                     name="weight_packed")
    return Call(c.op, [inputs.plain(0), packed], c.attrs), None


register_alter_op_layout("nn.bitserial_dense", _prepack_weight)
register_alter_op_layout("nn.bitserial_conv2d", _prepack_weight)
