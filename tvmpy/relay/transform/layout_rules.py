"""The layout rules of the layout passes (TVM's ``FInferCorrectLayout``): how each operator
follows when its input arrives in another layout, registered once per operator as the op
attribute ``FInferLayout`` and read by every pass that propagates layouts (ConvertLayout and
LegalizeLayouts, AlterOpLayout and its demand analysis ``layout_demand.py``; their common
rewriter is ``layout_rewrite.py``).

A value's layout state is ``Layout(orig, cur)``: a 4-D value whose layout in the original
graph is ``orig`` ("NCHW"), held in ``cur``: a permutation of it ("NHWC", ConvertLayout's) or
its channel-blocked form ("NCHW8c", AlterOpLayout's, ``tir.data_layout``).

A rule is ``rule(call, ctx) -> Propagation | None``. ``ctx`` (``LayoutContext``) gives the
layout states of the call's arguments as rewritten so far and converts them; the rule checks
everything it needs and returns ``Propagation(out, build)``: ``out`` the layout state of the
result (None: the original layout) and ``build()`` the rewritten call (run only when the pass
rewrites; the demand analysis only asks whether a rule would carry a layout). None: the call
cannot compute in that layout, and the pass gives it its inputs back in their original layouts
through one shared ``layout_transform`` (never a wrong answer).

Registered here: ``nn.bias_add``, ``nn.pad``, the 2-D pools, ``concatenate``,
``strided_slice`` (H and W, blocked), ``nn.stride_interleave`` (blocked), ``layout_transform``
(permutations); and, for any op without a rule, the elementwise/broadcast ops with no
positional attributes (``is_agnostic_elementwise``). A new op gets layout propagation in every
pass with one ``register_layout_rule(name)(rule)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from ...tir.data_layout import block_of, blocked
from ..expr import Call, Constant, RelayExpr, Tuple
from ..op import transform as _tr
from ..op.numpy_impl import layout_transform_np
from ..op.registry import Op, OpPattern, make_call, register_op_attr
from ..ty import TensorType

__all__ = ["Layout", "LayoutContext", "Propagation", "register_layout_rule", "layout_rule",
           "is_agnostic_elementwise", "is_spatial_slice", "blocked", "block_of", "tensor_shape",
           "POOLS", "SharedTransforms", "is_permutation"]

#: the op attribute that holds an operator's layout rule
RULE_KEY = "FInferLayout"

# elementwise/broadcast ops are layout-agnostic when their attributes are only these (no axis,
# shape, repeats ...: those name positions of the original layout)
AGNOSTIC_ATTRS = frozenset({"a_min", "a_max", "alpha", "approximate", "dtype"})
POOLS = ("nn.max_pool2d", "nn.avg_pool2d", "nn.global_max_pool2d", "nn.global_avg_pool2d",
         "nn.adaptive_avg_pool2d")
#: the layouts the 2-D pools compute in besides NCHW{c}c
POOL_LAYOUTS = ("NCHW", "NHWC")


class Layout(NamedTuple):
    """A 4-D value whose layout in the original graph is ``orig``, now held in ``cur``."""

    orig: str
    cur: str

    @property
    def block(self) -> int | None:
        """``c`` when ``cur`` is ``orig`` with its channels blocked by ``c``, else None."""
        return block_of(self.cur, self.orig)


class LayoutContext(Protocol):
    """What a rule may ask of the pass about the call's arguments (rewritten so far)."""

    def layout(self, e: RelayExpr) -> Layout | None:
        """The layout state of argument (or tuple field) ``e``; None: its original layout."""

    def wanted(self, call: Call) -> bool:
        """Whether the result of ``call`` is wanted in the new layout (``layout_demand``); a rule
        that would have to convert a whole tensor operand into the new layout asks first."""

    def get(self, e: RelayExpr, layout: Layout) -> RelayExpr:
        """``e`` (original layout ``layout.orig``), rewritten, in ``layout.cur``."""

    def plain(self, e: RelayExpr) -> RelayExpr:
        """``e``, rewritten, in its original layout."""

    def transform(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        """The rewritten ``e`` from ``src`` to ``dst`` (one shared ``layout_transform``)."""


class Propagation(NamedTuple):
    """A rule's answer: the result's layout state and how to build the rewritten call."""

    out: Layout | None
    build: Callable[[], RelayExpr]


Rule = Callable[[Call, LayoutContext], "Propagation | None"]


def register_layout_rule(name: str, rule: Rule | None = None, level: int = 10) -> Any:
    """Register ``rule`` as the layout rule of operator ``name`` (usable as a decorator)."""
    return register_op_attr(name, RULE_KEY, rule, level)


def layout_rule(call: Call) -> Rule | None:
    """The layout rule of ``call``: its op's registered one, else the elementwise rule when it
    is layout-agnostic, else None (it reads its inputs in their original layouts)."""
    if not isinstance(call.op, Op):
        return None
    rule = call.op.get_attr(RULE_KEY)
    if rule is None and is_agnostic_elementwise(call):
        return _broadcast
    return rule


# -- helpers ------------------------------------------------------------------------------------
def tensor_shape(e: RelayExpr) -> tuple | None:
    """The inferred shape of ``e`` (None when it is not a tensor or not typed)."""
    t = getattr(e, "checked_type", None)
    return tuple(t.shape) if isinstance(t, TensorType) else None


def is_agnostic_elementwise(call: Call) -> bool:
    """An elementwise/broadcast operator call that computes the same in any layout."""
    return (isinstance(call.op, Op) and call.op.pattern <= OpPattern.BROADCAST
            and set(call.attrs.values) <= AGNOSTIC_ATTRS)


def is_spatial_slice(call: Call) -> bool:
    """A ``strided_slice`` of a 4-D NCHW value along H and W only (``axes`` given, within 2-3):
    the same call slices NCHW{c}c."""
    shape = tensor_shape(call)
    axes = call.attrs.values.get("axes") if isinstance(call.op, Op) else None
    return (call.op.name == "strided_slice" and shape is not None and len(shape) == 4
            and axes is not None and len(axes) > 0 and all(a in (2, 3, -1, -2) for a in axes))


def is_permutation(src: str, dst: str) -> bool:
    """``dst`` reorders the axes of ``src`` (plain letters, no blocking): "NCHW" / "NHWC"."""
    return (src.isalpha() and src.isupper() and len(src) == len(dst)
            and sorted(src) == sorted(dst) and len(set(src)) == len(src))


def _first(layouts: Sequence[Layout | None]) -> Layout | None:
    return next((lay for lay in layouts if lay is not None), None)


def _permute(values: Sequence[Any], src: str, dst: str) -> list[Any]:
    """``values`` given per axis of ``src``, reordered for ``dst``."""
    return [values[src.index(ch)] for ch in dst]


def _is_whole_tensor(e: RelayExpr) -> bool:
    """A non-constant operand larger than a per-channel vector (its transform costs a copy)."""
    shape = tensor_shape(e)
    if isinstance(e, Constant) or shape is None:
        return False
    return any(not (isinstance(d, int) and d == 1) for i, d in enumerate(shape)
               if i != len(shape) - 3)


def _shape_after(full: tuple, c: int) -> tuple:
    """NCHW shape ``full`` as NCHW{c}c."""
    n, ch, h, w = full
    return (n, ch // c, h, w, c)


def _reshaped(e: RelayExpr, dims: tuple) -> RelayExpr:
    """``e`` reshaped to ``dims`` (a constant at compile time)."""
    if isinstance(e, Constant):
        return Constant(e.data.numpy().reshape(dims))
    return _tr.reshape(e, dims, allowzero=True)


# -- the elementwise/broadcast rule ---------------------------------------------------------------
def _operand(ctx: LayoutContext, e: RelayExpr, elay: Layout | None,
             lay: Layout) -> Callable[[], RelayExpr] | None:
    """How to build operand ``e`` (layout state ``elay``) of a broadcast op whose 4-D result
    moves to ``lay``; None when it cannot follow (unknown shape, more than 4 axes, ...).

    Permutations broadcast a lower-rank operand to 4-D and permute it; the blocked layout keeps
    its rank, as TVM does: a (C,1,1) operand becomes (C/c,1,1,c), one constant along the
    channels gets a unit block axis."""
    if elay is not None and elay.orig == lay.orig:
        return lambda: ctx.get(e, lay)
    shape = tensor_shape(e)
    if shape is None or len(shape) > 4:
        return None
    if len(shape) == 0:
        return lambda: ctx.plain(e)
    full = (1,) * (4 - len(shape)) + shape
    c = lay.block
    if c is None:  # a permutation: broadcast to 4-D, then permuted
        if len(shape) < 4 and not isinstance(e, Constant) \
                and not all(isinstance(d, int) for d in full):
            return None

        def permuted() -> RelayExpr:
            new = ctx.plain(e)
            return ctx.transform(new if len(shape) == 4 else _reshaped(new, full),
                                 lay.orig, lay.cur)
        return permuted
    if not all(isinstance(s, int) for s in full[1:]):
        return None
    if full[1] == 1:  # constant along the channels: a unit block axis
        return lambda: _reshaped(ctx.plain(e), (*shape, 1))
    if full[1] % c:
        return None
    lead = 4 - len(shape)

    def to_block() -> RelayExpr:
        # NCHW -> NCHW{c}c on the 4-D padded shape, then the leading unit axes dropped again
        new = ctx.plain(e)
        if isinstance(new, Constant):
            arr = layout_transform_np(new.data.numpy().reshape(full), lay.orig, lay.cur)
            return Constant(arr.reshape(arr.shape[lead:]))
        four = new if lead == 0 else _tr.reshape(new, full, allowzero=True)
        out = ctx.transform(four, lay.orig, lay.cur)
        return out if lead == 0 else _tr.reshape(out, _shape_after(full, c)[lead:],
                                                  allowzero=True)
    return to_block


def _broadcast(call: Call, ctx: LayoutContext) -> Propagation | None:
    """An elementwise/broadcast op follows its first operand in a new layout; the others are
    converted to it (whole tensors only when the result is wanted there)."""
    out = tensor_shape(call)
    if out is None or len(out) != 4:
        return None
    layouts = [ctx.layout(a) for a in call.args]
    lay = _first(layouts)
    if lay is None:
        return None
    c = lay.block
    if c is not None and (not isinstance(out[1], int) or out[1] % c):
        return None
    if any(elay is None and _is_whole_tensor(a) for a, elay in zip(call.args, layouts)) \
            and not ctx.wanted(call):
        return None  # one transform either way: back to the original saves the one at the end
    builds = [_operand(ctx, a, elay, lay) for a, elay in zip(call.args, layouts)]
    if any(b is None for b in builds):
        return None
    return Propagation(lay, lambda: Call(call.op, [b() for b in builds], call.attrs))


# -- per-op rules ----------------------------------------------------------------------------------
@register_layout_rule("nn.bias_add")
def _bias_add(call: Call, ctx: LayoutContext) -> Propagation | None:
    """The axis renamed; with the channels blocked, an ``add`` of the bias as (C/c,1,1,c)."""
    data, bias = call.args
    lay = ctx.layout(data)
    shape = tensor_shape(data)
    if lay is None or shape is None or len(shape) != 4:
        return None
    letter = lay.orig[call.attrs.axis % 4]
    c = lay.block
    if c is None:
        axis = lay.cur.index(letter)
        return Propagation(lay, lambda: Call(call.op, [ctx.get(data, lay), ctx.plain(bias)],
                                             {**call.attrs.values, "axis": axis}))
    if letter != "C":
        return None
    dims = (shape[1] // c, 1, 1, c)
    return Propagation(lay, lambda: make_call(
        "add", [ctx.get(data, lay), _reshaped(ctx.plain(bias), dims)]))


@register_layout_rule("nn.pad")
def _pad(call: Call, ctx: LayoutContext) -> Propagation | None:
    """The pad widths follow the axes; a blocked axis must not be padded (it would change the
    blocks), its block axis gets none."""
    data = call.args[0]
    lay = ctx.layout(data)
    pw = tuple(tuple(p) for p in call.attrs.pad_width)
    if lay is None or len(pw) != 4:
        return None
    c = lay.block
    if c is None:
        new_pw = tuple(_permute(pw, lay.orig, lay.cur))
    elif pw[lay.orig.index("C")] != (0, 0):
        return None
    else:
        new_pw = (*pw, (0, 0))
    return Propagation(lay, lambda: Call(
        call.op, [ctx.get(data, lay)] + [ctx.plain(x) for x in call.args[1:]],
        {**call.attrs.values, "pad_width": new_pw}))


def _pool(call: Call, ctx: LayoutContext) -> Propagation | None:
    """A pool computes in NCHW, NHWC and NCHW{c}c: its ``layout`` becomes the input's (the
    adaptive average pool only in its global (1, 1) form, blocked)."""
    data = call.args[0]
    lay = ctx.layout(data)
    if lay is None or lay.orig != call.attrs.layout:
        return None
    name = call.op.name
    if lay.block is None:
        if lay.cur not in POOL_LAYOUTS or lay.orig not in POOL_LAYOUTS \
                or name == "nn.adaptive_avg_pool2d":
            return None
    elif lay.orig != "NCHW":
        return None
    elif name == "nn.adaptive_avg_pool2d":
        if tuple(call.attrs.output_size) != (1, 1):
            return None
        return Propagation(lay, lambda: make_call(
            "nn.global_avg_pool2d", [ctx.get(data, lay)], {"layout": lay.cur}))
    return Propagation(lay, lambda: Call(call.op, [ctx.get(data, lay)],
                                         {**call.attrs.values, "layout": lay.cur}))


for _name in POOLS:
    register_layout_rule(_name, _pool)


@register_layout_rule("concatenate")
def _concatenate(call: Call, ctx: LayoutContext) -> Propagation | None:
    """The fields take the first converted field's layout, the axis renamed; along blocked
    channels every field takes one block (the gcd of the blocks and the other fields'
    channels)."""
    tup = call.args[0]
    out = tensor_shape(call)
    if not isinstance(tup, Tuple) or out is None or len(out) != 4:
        return None
    layouts = [ctx.layout(f) for f in tup.fields]
    lay = _first(layouts)
    if lay is None:
        return None
    letter = lay.orig[call.attrs.axis % 4]
    if None in layouts and not ctx.wanted(call):
        return None  # a field in the original layout would be converted in, the result out
    if lay.block is not None:
        if letter != "C":
            return None
        ch = lay.orig.index("C")
        shapes = [tensor_shape(f) for f in tup.fields]
        if any(s is None or len(s) != 4 or not isinstance(s[ch], int) for s in shapes):
            return None
        g = 0  # one block for all: divides every block and every unblocked field's channels
        for elay, sh in zip(layouts, shapes):
            b = elay.block if elay is not None and elay.orig == lay.orig else None
            g = math.gcd(g, b or sh[ch])
        lay = Layout(lay.orig, blocked(g, lay.orig))
    axis = lay.cur.index(letter)
    target = lay
    return Propagation(lay, lambda: Call(
        call.op, [Tuple([ctx.get(f, target) for f in tup.fields])],
        {**call.attrs.values, "axis": axis}))


@register_layout_rule("strided_slice")
def _strided_slice(call: Call, ctx: LayoutContext) -> Propagation | None:
    """A slice of H and W slices NCHW{c}c the same (axes 2 and 3 there too)."""
    data = call.args[0]
    lay = ctx.layout(data)
    if lay is None or lay.block is None or lay.orig != "NCHW" or not is_spatial_slice(call):
        return None
    return Propagation(lay, lambda: Call(call.op, [ctx.get(data, lay)], call.attrs))


@register_layout_rule("nn.stride_interleave")
def _stride_interleave(call: Call, ctx: LayoutContext) -> Propagation | None:
    """The phases of a transposed convolution interleave in NCHW{c}c, in the gcd of their
    blocks."""
    tup = call.args[0]
    if not isinstance(tup, Tuple) or call.attrs.layout != "NCHW":
        return None
    layouts = [ctx.layout(f) for f in tup.fields]
    blocks = [None if lay is None or lay.orig != "NCHW" else lay.block for lay in layouts]
    known = [b for b in blocks if b is not None]
    if not known or (None in blocks and not ctx.wanted(call)):
        return None
    g = 0  # one block for all parts (of one shape): divides every block
    for b in known:
        g = math.gcd(g, b)
    lay = Layout("NCHW", blocked(g))
    return Propagation(lay, lambda: make_call(
        "nn.stride_interleave", [Tuple([ctx.get(f, lay) for f in tup.fields])],
        {**call.attrs.values, "layout": lay.cur}))


@register_layout_rule("layout_transform")
def _layout_transform(call: Call, ctx: LayoutContext) -> Propagation | None:
    """A transform of a permuted value starts from where the value is now (none is left when
    that is the target layout)."""
    data = call.args[0]
    lay = ctx.layout(data)
    src, dst = call.attrs.src_layout, call.attrs.dst_layout
    if lay is None or lay.block is not None or lay.orig != src or not dst.isalpha() \
            or len(dst) != 4:
        return None
    return Propagation(None, lambda: ctx.transform(ctx.get(data, lay), lay.cur, dst))


class SharedTransforms:
    """The layout conversions a layout pass adds: ``convert(e, src, dst)`` is one
    ``layout_transform`` node per (value, target layout), shared by every consumer; a constant
    is transformed at compile time; the inverse of a permuting ``layout_transform`` is its
    input (no transform pair)."""

    def __init__(self) -> None:
        self._made: dict[tuple[int, str], RelayExpr] = {}
        self._keep_alive: list[Any] = []  # ids in the keys stay valid

    def __call__(self, e: RelayExpr, src: str, dst: str) -> RelayExpr:
        if src == dst:
            return e
        key = (id(e), dst)
        if key not in self._made:
            self._keep_alive.append(e)
            if isinstance(e, Constant):
                self._made[key] = Constant(layout_transform_np(e.data.numpy(), src, dst))
            elif (isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "layout_transform"
                  and e.attrs.src_layout == dst and e.attrs.dst_layout == src
                  and is_permutation(src, dst)):
                self._made[key] = e.args[0]
            else:
                self._made[key] = _tr.layout_transform(e, src, dst)
        return self._made[key]
