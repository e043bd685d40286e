"""ConvertLayout (TVM's ``relay.transform.ConvertLayout(desired_layouts)``): rewrite the calls of
the operators named in ``desired_layouts`` into the given data (and kernel) layouts, carry the
new layout through the layout-agnostic operators after them, and put ``layout_transform`` back
only where a consumer needs the original layout (the function's type is unchanged).

What it does
``desired_layouts``: ``{"nn.conv2d": ["NHWC", "default"], "nn.max_pool2d": ["NHWC"], ...}``.
``nn.conv2d`` takes a data layout (NCHW or NHWC) and a kernel layout (OIHW, HWIO, HWOI or
"default": OIHW for NCHW, HWIO for NHWC, HWOI for a depthwise NHWC convolution); the 2-D pools
(``nn.max_pool2d``, ``nn.avg_pool2d``, ``nn.global_max_pool2d``, ``nn.global_avg_pool2d``)
take a layout. Layouts here are permutations of the 4-D tensor's axes; the channel-blocked
layouts (NCHW16c) are AlterOpLayout's, chosen by the target.

Propagation (a value's state: its original layout and the layout it is now held in) is the
ops' layout rules, the same ones AlterOpLayout follows (``layout_rules.py``, through the shared
rewriter ``layout_rewrite.py``): the elementwise/broadcast operators without positional
attributes follow their first converted operand (other tensor operands are broadcast to 4-D and
permuted: a constant at compile time), ``nn.bias_add`` (axis renamed), ``nn.pad`` (pad widths
permuted), ``concatenate`` (axis renamed) and the pools (``layout``) keep it; a
``layout_transform`` of a converted value starts from its new layout (none is left when that is
the target); every op without a rule (dense, reshape, reductions, the function's result) reads
its input in the original layout through one shared ``layout_transform``
(``layout_rules.SharedTransforms``, which also cancels a transform followed by its inverse). A
named operator whose call is left as it is reads its input in the original layout too.

When valid
Any dataflow graph: each rewrite computes the same values in another memory order and every
value leaves in its original layout (the function's type is unchanged); calls of the named
operators whose attributes cannot take the layout are left as they are.

``LegalizeLayouts`` is the same rewrite with the layouts tvmpy's operator implementations
compute (``BUILD_LAYOUTS``: NCHW/OIHW convolutions, NCHW pools); relay.build runs it first, so
an NHWC model (or one ConvertLayout made NHWC) builds: its convolutions run as NCHW (then
AlterOpLayout's NCHWc at opt_level 3), with one transform in and one out.

Example
    before:  %0 = nn.conv2d(%x, %W, padding=[1, 1, 1, 1]); nn.relu(%0)   {"nn.conv2d": ["NHWC", "default"]}
    after:   %0 = layout_transform(%x, src_layout="NCHW", dst_layout="NHWC");
             %1 = nn.conv2d(%0, %W_hwio, padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="HWIO");
             layout_transform(nn.relu(%1), src_layout="NHWC", dst_layout="NCHW")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..expr import Call
from ..op.registry import Op
from .layout_rewrite import LayoutRewriter
from .layout_rules import POOLS, Layout, tensor_shape
from .pass_infra import FunctionPass

__all__ = ["ConvertLayout", "LegalizeLayouts", "BUILD_LAYOUTS"]

_DATA_LAYOUTS = ("NCHW", "NHWC")
_KERNEL_LAYOUTS = ("OIHW", "HWIO", "HWOI")
_POOLS = tuple(p for p in POOLS if p != "nn.adaptive_avg_pool2d")
_SUPPORTED = ("nn.conv2d",) + _POOLS

BUILD_LAYOUTS: dict[str, list[str]] = {"nn.conv2d": ["NCHW", "OIHW"],
                                       **{p: ["NCHW"] for p in _POOLS}}

_State = tuple[Any, "Layout | None"]


def _check_desired(desired: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    if not isinstance(desired, Mapping):
        raise TypeError(f"ConvertLayout takes a dict op name -> [layouts], got {desired!r}")
    out: dict[str, list[str]] = {}
    for op, layouts in desired.items():
        name = op.name if isinstance(op, Op) else op
        if name not in _SUPPORTED:
            raise ValueError(f"ConvertLayout: no layout conversion for {name!r} (supported: "
                             f"{', '.join(_SUPPORTED)})")
        if isinstance(layouts, str) or not isinstance(layouts, Sequence) or not layouts:
            raise TypeError(f"ConvertLayout: the layouts of {name} must be a list such as "
                            f"['NHWC', 'default'], got {layouts!r}")
        lays = [str(x) for x in layouts]
        if lays[0] not in _DATA_LAYOUTS:
            raise ValueError(f"ConvertLayout: {name} data layout {lays[0]!r} is not supported "
                             f"(one of {', '.join(_DATA_LAYOUTS)}; blocked layouts such as "
                             f"NCHW16c are AlterOpLayout's)")
        if name == "nn.conv2d":
            if len(lays) == 1:
                lays.append("default")
            if len(lays) != 2 or lays[1] not in _KERNEL_LAYOUTS + ("default",):
                raise ValueError(f"ConvertLayout: nn.conv2d kernel layout {lays[1:]!r} is not "
                                 f"supported (one of {', '.join(_KERNEL_LAYOUTS)} or 'default')")
        elif len(lays) != 1:
            raise ValueError(f"ConvertLayout: {name} takes one layout, got {lays}")
        out[name] = lays
    return out


class _Convert(LayoutRewriter):
    """The named operators enter their desired layouts; the rest follows the layout rules."""

    def __init__(self, desired: dict[str, list[str]]) -> None:
        super().__init__()
        self.desired = desired

    def convert(self, c: Call) -> _State | None:
        name = c.op.name
        if name == "nn.conv2d" and name in self.desired:
            return self._conv2d(c, *self.desired[name])
        if name in _POOLS and name in self.desired:
            return self._pool(c, self.desired[name][0])
        return None

    def propagate(self, c: Call) -> _State | None:
        if c.op.name in self.desired:
            return None  # named and left as it is: it reads its inputs in the original layout
        return super().propagate(c)

    def _conv2d(self, c: Call, data_layout: str, kernel_layout: str) -> _State | None:
        a = c.attrs
        src, ksrc = a.data_layout, a.kernel_layout
        if src not in _DATA_LAYOUTS or ksrc not in _KERNEL_LAYOUTS:
            return None
        if kernel_layout == "default":
            kernel_layout = ("OIHW" if data_layout == "NCHW"
                             else "HWOI" if _is_depthwise(c) else "HWIO")
        if src == data_layout and ksrc == kernel_layout:
            return None  # already as desired: the generic rule rewrites its inputs
        data = self.get(c.args[0], Layout(src, data_layout))
        weight = self.transform(self.plain(c.args[1]), ksrc, kernel_layout)
        attrs = {**a.values, "data_layout": data_layout, "kernel_layout": kernel_layout,
                 "out_layout": ""}
        out = Call(c.op, [data, weight], attrs)
        orig = a.out_layout or src
        return out, (None if orig == data_layout else Layout(orig, data_layout))

    def _pool(self, c: Call, dst: str) -> _State | None:
        src = c.attrs.layout
        if src not in _DATA_LAYOUTS or dst == src:
            return None
        data = self.get(c.args[0], Layout(src, dst))
        return Call(c.op, [data], {**c.attrs.values, "layout": dst}), Layout(src, dst)


def _is_depthwise(c: Call) -> bool:
    data, weight = tensor_shape(c.args[0]), tensor_shape(c.args[1])
    a = c.attrs
    if data is None or weight is None or a.groups == 1:
        return False
    cin = data[a.data_layout.index("C")]
    return a.groups == cin and weight[a.kernel_layout.index("I")] == 1


class ConvertLayout(FunctionPass):
    """``relay.transform.ConvertLayout({"nn.conv2d": ["NHWC", "default"]})`` (opt_level 3, as
    in TVM): see the module docstring."""

    def __init__(self, desired_layouts: Mapping[str, Sequence[str]], name: str = "ConvertLayout",
                 opt_level: int = 3) -> None:
        super().__init__(name=name, opt_level=opt_level)
        self.desired_layouts = _check_desired(desired_layouts)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        new, _ = _Convert(self.desired_layouts).visit(func)
        return new


def LegalizeLayouts() -> ConvertLayout:
    """The layouts tvmpy's operator implementations compute (``BUILD_LAYOUTS``), at every
    opt_level: what relay.build runs first."""
    return ConvertLayout(BUILD_LAYOUTS, name="LegalizeLayouts", opt_level=0)
