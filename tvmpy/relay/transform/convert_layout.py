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

Propagation (a value's state: its original layout and the layout it is now held in): the
elementwise/broadcast operators without positional attributes (``layout_rules``) follow their
first converted operand (other tensor operands are broadcast to 4-D and permuted: a constant at
compile time), ``nn.bias_add`` (axis renamed), ``nn.pad`` (pad widths permuted),
``concatenate`` (axis renamed) and the pools (``layout``) keep it; a ``layout_transform`` of a
converted value starts from its new layout (none is left when that is the target); everything
else (dense,
reshape, reductions, the function's result) reads its input in the original layout through one
shared ``layout_transform`` (``layout_rules.SharedTransforms``, which also cancels a transform
followed by its inverse).

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
from typing import Any, NamedTuple

from ..expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..op import transform as _tr
from ..op.registry import Op
from ..visitor import ExprFunctor
from .layout_rules import SharedTransforms, is_agnostic_elementwise, tensor_shape
from .pass_infra import FunctionPass

__all__ = ["ConvertLayout", "LegalizeLayouts", "BUILD_LAYOUTS"]

_DATA_LAYOUTS = ("NCHW", "NHWC")
_KERNEL_LAYOUTS = ("OIHW", "HWIO", "HWOI")
_POOLS = ("nn.max_pool2d", "nn.avg_pool2d", "nn.global_max_pool2d", "nn.global_avg_pool2d")
_SUPPORTED = ("nn.conv2d",) + _POOLS

BUILD_LAYOUTS: dict[str, list[str]] = {"nn.conv2d": ["NCHW", "OIHW"],
                                       **{p: ["NCHW"] for p in _POOLS}}


class _Layout(NamedTuple):
    """A 4-D value whose layout in the original graph is ``orig``, now held in ``cur``."""

    orig: str
    cur: str


_State = tuple[RelayExpr, "_Layout | None"]


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


def _permute(values: Sequence[Any], src: str, dst: str) -> list[Any]:
    """``values`` given per axis of ``src``, reordered for ``dst``."""
    return [values[src.index(ch)] for ch in dst]


class _Convert(ExprFunctor):
    """``visit(e) -> (new_e, layout)``: ``layout`` is None when ``new_e`` has ``e``'s layout."""

    def __init__(self, desired: dict[str, list[str]]) -> None:
        super().__init__()
        self.desired = desired
        self._transform = SharedTransforms()

    # -- conversions ---------------------------------------------------------------------------
    def plain(self, e: RelayExpr) -> RelayExpr:
        new, lay = self.visit(e)
        return new if lay is None else self._transform(new, lay.cur, lay.orig)

    def in_layout(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        """The rewritten ``e`` (a 4-D value in layout ``src`` originally) in layout ``dst``."""
        new, lay = self.visit(e)
        if lay is None or lay.orig != src:
            new, cur = self.plain(e), src
        else:
            cur = lay.cur
        return self._transform(new, cur, dst)

    def _operand(self, e: RelayExpr, lay: _Layout) -> RelayExpr | None:
        """Operand ``e`` of a broadcast op whose 4-D result moves from ``lay.orig`` to
        ``lay.cur``; None when its shape is unknown or has more than 4 axes."""
        new, elay = self.visit(e)
        if elay is not None and elay.orig == lay.orig:
            return self.in_layout(e, lay.orig, lay.cur)
        shape = tensor_shape(e)
        if shape is None or len(shape) > 4:
            return None
        if len(shape) == 0:
            return new
        new = self.plain(e)
        full = (1,) * (4 - len(shape)) + shape
        if len(shape) < 4:
            if isinstance(new, Constant):
                new = Constant(new.data.numpy().reshape(full))
            elif all(isinstance(d, int) for d in full):
                new = _tr.reshape(new, full, allowzero=True)
            else:
                return None
        return self._transform(new, lay.orig, lay.cur)

    # -- nodes ---------------------------------------------------------------------------------
    def visit_var(self, v: Var) -> _State:
        return v, None

    def visit_global_var(self, v: Any) -> _State:
        return v, None

    def visit_constant(self, c: Constant) -> _State:
        return c, None

    def visit_op(self, op: Op) -> _State:
        return op, None

    def visit_tuple(self, t: Tuple) -> _State:
        fields = [self.plain(f) for f in t.fields]
        return (t if all(a is b for a, b in zip(fields, t.fields)) else Tuple(fields)), None

    def visit_tuple_getitem(self, t: TupleGetItem) -> _State:
        v = self.plain(t.tuple_value)
        return (t if v is t.tuple_value else TupleGetItem(v, t.index)), None

    def visit_let(self, let: Let) -> _State:
        return Let(let.var, self.plain(let.value), self.plain(let.body)), None

    def visit_if(self, i: If) -> _State:
        return If(self.plain(i.cond), self.plain(i.true_branch), self.plain(i.false_branch)), None

    def visit_function(self, f: Function) -> _State:
        if f.attrs.get("Primitive"):
            return f, None
        body = self.plain(f.body)
        return (f if body is f.body else Function(f.params, body, f.ret_type, attrs=f.attrs)), None

    def visit_call(self, c: Call) -> _State:
        if isinstance(c.op, Op):
            res = self._rule(c)
            if res is not None:
                return res
        op = c.op if isinstance(c.op, Op) else self.plain(c.op)
        args = [self.plain(a) for a in c.args]
        if op is c.op and all(a is b for a, b in zip(args, c.args)):
            return c, None
        return Call(op, args, c.attrs), None

    def _rule(self, c: Call) -> _State | None:
        name = c.op.name
        if name == "nn.conv2d" and name in self.desired:
            return self._conv2d(c, *self.desired[name])
        if name in _POOLS:
            return self._pool(c)
        if name == "nn.bias_add":
            return self._bias_add(c)
        if name == "nn.pad":
            return self._pad(c)
        if name == "concatenate":
            return self._concatenate(c)
        if name == "layout_transform":
            return self._layout_transform(c)
        if is_agnostic_elementwise(c):
            return self._broadcast(c)
        return None

    # -- the operators with a desired layout ---------------------------------------------------
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
        data = self.in_layout(c.args[0], src, data_layout)
        weight = self._transform(self.plain(c.args[1]), ksrc, kernel_layout)
        attrs = {**a.values, "data_layout": data_layout, "kernel_layout": kernel_layout,
                 "out_layout": ""}
        out = Call(c.op, [data, weight], attrs)
        orig = a.out_layout or src
        return out, (None if orig == data_layout else _Layout(orig, data_layout))

    def _pool(self, c: Call) -> _State | None:
        src = c.attrs.layout
        if src not in _DATA_LAYOUTS:
            return None
        if c.op.name in self.desired:
            dst = self.desired[c.op.name][0]
        else:  # not named: it keeps the layout its input arrives in, when it can compute it
            _, lay = self.visit(c.args[0])
            if lay is None or lay.orig != src or lay.cur not in _DATA_LAYOUTS:
                return None
            dst = lay.cur
        if dst == src:
            return None
        data = self.in_layout(c.args[0], src, dst)
        return Call(c.op, [data], {**c.attrs.values, "layout": dst}), _Layout(src, dst)

    # -- propagation ---------------------------------------------------------------------------
    def _bias_add(self, c: Call) -> _State | None:
        data, lay = self.visit(c.args[0])
        shape = tensor_shape(c.args[0])
        if lay is None or shape is None or len(shape) != 4:
            return None
        axis = c.attrs.axis % 4
        new_axis = lay.cur.index(lay.orig[axis])
        return Call(c.op, [data, self.plain(c.args[1])],
                    {**c.attrs.values, "axis": new_axis}), lay

    def _pad(self, c: Call) -> _State | None:
        data, lay = self.visit(c.args[0])
        pw = [tuple(p) for p in c.attrs.pad_width]
        if lay is None or len(pw) != 4:
            return None
        new_pw = tuple(_permute(pw, lay.orig, lay.cur))
        return Call(c.op, [data] + [self.plain(x) for x in c.args[1:]],
                    {**c.attrs.values, "pad_width": new_pw}), lay

    def _concatenate(self, c: Call) -> _State | None:
        tup = c.args[0]
        out = tensor_shape(c)
        if not isinstance(tup, Tuple) or out is None or len(out) != 4:
            return None
        lay = next((s for s in (self.visit(f)[1] for f in tup.fields) if s is not None), None)
        if lay is None:
            return None
        fields = [self.in_layout(f, lay.orig, lay.cur) for f in tup.fields]
        axis = lay.cur.index(lay.orig[c.attrs.axis % 4])
        return Call(c.op, [Tuple(fields)], {**c.attrs.values, "axis": axis}), lay

    def _layout_transform(self, c: Call) -> _State | None:
        """A transform of a converted value: from where the value is now (nothing left when
        that is already the target layout)."""
        new, lay = self.visit(c.args[0])
        src, dst = c.attrs.src_layout, c.attrs.dst_layout
        if lay is None or lay.orig != src or not dst.isalpha() or len(dst) != 4:
            return None
        return self._transform(new, lay.cur, dst), None

    def _broadcast(self, c: Call) -> _State | None:
        out = tensor_shape(c)
        if out is None or len(out) != 4:
            return None
        lay = next((s for s in (self.visit(a)[1] for a in c.args) if s is not None), None)
        if lay is None:
            return None
        args = [self._operand(a, lay) for a in c.args]
        if any(a is None for a in args):
            return None
        return Call(c.op, args, c.attrs), lay


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
