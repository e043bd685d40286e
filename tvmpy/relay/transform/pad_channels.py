"""PadChannels: channel counts of half a vector padded to whole vectors along conv chains.

What it does
On a target whose NCHWc layout (``relay.op.strategy.x86_alter_op``) would block a channel
count ``C`` by exactly half a vector (24, 40, 72, 120 channels with 16-lane AVX-512 vectors:
blocks of 8, every FMA half-width), the tensors of ``C`` channels that only convolutions with
constant weights produce are given ``Cp`` = ``C`` rounded up to a whole vector instead: the
producing convolutions compute zero filters for the added channels (the weight, and the bias
of a following ``nn.bias_add`` or constant ``add``, padded with zeros), a depthwise
convolution over them carries them through (zero filters), an activation (``nn.relu``,
``clip``) maps them to a finite value, a residual ``add`` of two such tensors adds them, and
the plain 1x1 convolutions that read them ignore them (zero input channels in their weights).
A component with any other consumer (a pool, a concatenation, a graph output, a convolution
with a wider window: see :func:`_one_by_one`) is left
as it is: that consumer would need the ``C`` real channels cropped (a pass over the tensor). onnxruntime's NCHWc transformer pads the same way (MobileNet's
and MnasNet's 24 / 40 / 72 / 120 channels run as 32 / 48 / 80 / 128).

Beside ``x86_alter_op.padded_block``
The other channel padding, in AlterOpLayout, pads one plain convolution's output channels and
crops them after (a ``strided_slice`` fused with its epilogue), on every CPU: blocks under half
a vector always (57 -> 64), half-vector blocks only when the waste is at most 1/16 and the
reduction at least 128. This pass covers what the crop makes too dear there: half-vector counts
with any waste (24 -> 32), across whole chains with no crop, where half-width FMAs halve the
peak (two 512-bit FMA units). Both take the block from the layout's own rule
(``x86_alter_op.block_lanes`` / ``channel_block``); a chain padded here reaches AlterOpLayout
with whole-vector counts, so ``padded_block`` leaves it.

When valid
Exact: the added channels of every padded tensor hold finite values (zero filters and zero
biases give 0, the activations keep 0 finite), and every convolution that reads them
multiplies them by zero weights; the real channels are computed by the same arithmetic.
Skipped: a component (the tensors tied by the ops above) with any producer that is not a
convolution with a constant weight (a graph input, a pool, a concatenation), a symbolic or
non-float shape, layouts other than NCHW / OIHW.

Example (16 lanes)
    before:  %a = nn.conv2d(%x, W1 [24, 48, 1, 1]);  %b = nn.relu(%a);  nn.conv2d(%b, W2 [72, 24, 1, 1])
    after:   %a = nn.conv2d(%x, W1' [32, 48, 1, 1]); %b = nn.relu(%a);  nn.conv2d(%b, W2' [72, 32, 1, 1])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import Call, Constant, RelayExpr, Tuple
from ..op import transform as _tf
from ..op.registry import Op, make_call
from ..ty import TensorType
from ..visitor import ExprMutator, post_order_visit
from .pass_infra import FunctionPass

__all__ = ["PadChannels", "padded_channels"]

_UNARY = ("nn.relu", "clip")


def _is(e: Any, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _shape(e: Any) -> list[int] | None:
    t = getattr(e, "checked_type", None)
    if not isinstance(t, TensorType) or not t.dtype.startswith("float"):
        return None
    out = []
    for d in t.shape:
        d = getattr(d, "value", d)
        if not isinstance(d, int):
            return None
        out.append(d)
    return out


def padded_channels(c: int, lanes: int) -> int:
    """``c`` rounded up to whole vectors of ``lanes`` when the NCHWc layout would block it by
    exactly half a vector (``c`` a multiple of ``lanes / 2`` but not of ``lanes``), else ``c``.
    The block is the layout's own (``x86_alter_op.channel_block``), so the two cannot drift."""
    from ..op.strategy.x86_alter_op import channel_block, whole_vectors

    if lanes < 2 or channel_block(c, lanes) * 2 != lanes:
        return c
    return whole_vectors(c, lanes)


def _conv_kind(c: Call) -> str | None:
    """"plain" / "depthwise" for an NCHW / OIHW ``nn.conv2d`` with a constant weight, else None."""
    if not _is(c, "nn.conv2d") or not isinstance(c.args[1], Constant):
        return None
    a = c.attrs
    if a.data_layout != "NCHW" or (a.kernel_layout or "OIHW") != "OIHW" \
            or a.out_layout not in ("", "NCHW"):
        return None
    d, w = _shape(c.args[0]), _shape(c.args[1])
    if d is None or w is None or len(d) != 4 or len(w) != 4:
        return None
    if int(a.groups) == 1:
        return "plain"
    if int(a.groups) == d[1] == w[0] and w[1] == 1:
        return "depthwise"
    return None


def _one_by_one(c: Call) -> bool:
    """A convolution with a 1x1 window. A wider window that reads a padded tensor pays the
    added input channels once per tap, and its Winograd form with 16-lane input blocks was
    slower: GoogLeNet's 512 -> 24 1x1 (14x14) padded to 32 gained ~5 us, its 24 -> 64 3x3
    consumer (Winograd) lost ~20 us, each of two (Intel Xeon, 1 thread, 2026-11-30), the model
    1.5% slower; so a component read by a wider window is left."""
    w = _shape(c.args[1])
    return w is not None and w[2] * w[3] == 1


def _channel_const(e: Any, c: int) -> bool:
    """A constant that broadcasts along the channels of an NCHW tensor of ``c`` channels:
    shape [c, 1, 1] or [1, c, 1, 1]."""
    if not isinstance(e, Constant):
        return False
    s = [int(x) for x in e.data.shape]
    return s in ([c, 1, 1], [1, c, 1, 1])


class _Components:
    """Union-find over the channel tensors (calls) that share one channel padding."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, k: int) -> int:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _analyse(func: Any, lanes: int) -> dict[int, int]:
    """``{id(call): padded channels}`` of every call whose output is padded."""
    calls: list[Call] = []
    tuples: list[Tuple] = []

    def collect(e: Any) -> None:
        if isinstance(e, Call):
            calls.append(e)
        elif isinstance(e, Tuple):
            tuples.append(e)

    post_order_visit(func, collect)
    comp = _Components()
    chans: dict[int, int] = {}
    for c in calls:
        s = _shape(c)
        if s is None or len(s) != 4:
            continue
        kind = _conv_kind(c)
        cid = id(c)
        if kind == "plain":
            chans[cid] = s[1]
            comp.find(cid)
        elif kind == "depthwise":
            chans[cid] = s[1]
            comp.union(cid, id(c.args[0]))
        elif isinstance(c.op, Op) and c.op.name in _UNARY:
            chans[cid] = s[1]
            comp.union(cid, id(c.args[0]))
        elif _is(c, "nn.bias_add") and int(c.attrs.axis) in (1, -3) \
                and isinstance(c.args[1], Constant):
            chans[cid] = s[1]
            comp.union(cid, id(c.args[0]))
        elif (_is(c, "add") or _is(c, "multiply")) and _shape(c.args[0]) == s:
            x, y = c.args
            if _is(c, "add") and not isinstance(y, Constant) and _shape(y) == s:
                chans[cid] = s[1]
                comp.union(cid, id(x))
                comp.union(cid, id(y))
            elif _channel_const(y, s[1]):
                chans[cid] = s[1]
                comp.union(cid, id(x))
    # a component is padded when every member is an allowed op on tensors of one channel
    # count that needs padding, and every member's tensor inputs are members
    members: dict[int, list[Call]] = {}
    by_id = {id(c): c for c in calls}
    for cid in chans:
        members.setdefault(comp.find(cid), []).append(by_id[cid])
    bad: set[int] = set()
    for root, ms in members.items():
        cs = {chans[id(m)] for m in ms}
        if len(cs) != 1 or padded_channels(next(iter(cs)), lanes) == next(iter(cs)):
            bad.add(root)
            continue
        for m in ms:
            if _conv_kind(m) == "plain":
                continue
            for a in m.args:
                if isinstance(a, Constant):
                    continue
                if id(a) not in chans or comp.find(id(a)) != root:
                    bad.add(root)  # a producer that is not a member (input, pool, ...)
    # ... and no consumer reads a member without taking its padded channels (no crop: a pass
    # over the tensor that would cost more than the padding saves)
    for c in calls:
        for k, a in enumerate(c.args):
            if id(a) not in chans:
                continue
            aware = (k == 0 and _conv_kind(c) == "plain" and _one_by_one(c)) or (
                id(c) in chans and comp.find(id(c)) == comp.find(id(a)))
            if not aware:
                bad.add(comp.find(id(a)))
    for t in tuples:
        bad.update(comp.find(id(f)) for f in t.fields if id(f) in chans)
    if id(func.body) in chans:
        bad.add(comp.find(id(func.body)))
    out: dict[int, int] = {}
    for root, ms in members.items():
        if root in bad:
            continue
        for m in ms:
            out[id(m)] = padded_channels(chans[id(m)], lanes)
    return out


def _pad_axis(a: np.ndarray, axis: int, to: int) -> np.ndarray:
    width = [(0, 0)] * a.ndim
    width[axis] = (0, to - a.shape[axis])
    return np.pad(a, width)


class _Pad(ExprMutator):
    def __init__(self, padded: dict[int, int]) -> None:
        super().__init__()
        self.padded = padded

    def _crop(self, orig: Any, new: Any) -> Any:
        """``new`` as the consumer of ``orig`` that does not take its padded channels reads it."""
        if id(orig) not in self.padded:
            return new
        c = _shape(orig)[1]  # type: ignore[index]
        return _tf.strided_slice(new, (0,), (c,), axes=(1,))

    def visit_tuple(self, t: Tuple) -> RelayExpr:
        fields = [self._crop(f, self.visit(f)) for f in t.fields]
        return Tuple(fields)

    def visit_call(self, c: Call) -> RelayExpr:
        args = [self.visit(a) for a in c.args]
        op = self.visit(c.op)
        cp = self.padded.get(id(c))
        kind = _conv_kind(c)
        if kind == "plain" and (cp is not None or id(c.args[0]) in self.padded):
            w = c.args[1].data.numpy()
            if id(c.args[0]) in self.padded:  # zero weights for the padded input channels
                w = _pad_axis(w, 1, self.padded[id(c.args[0])])
            attrs = dict(c.attrs.items())
            if cp is not None:
                w = _pad_axis(w, 0, cp)
                attrs["channels"] = cp
            return make_call("nn.conv2d", [args[0], Constant(np.ascontiguousarray(w))], attrs)
        if cp is None:
            new_args = [self._crop(o, n) for o, n in zip(c.args, args)]
            if all(n is o for n, o in zip(new_args, c.args)) and op is c.op:
                return c
            return Call(op, new_args, c.attrs)
        # a member of a padded component (its tensor inputs are members)
        if kind == "depthwise":
            w = _pad_axis(c.args[1].data.numpy(), 0, cp)
            attrs = dict(c.attrs.items())
            attrs["groups"], attrs["channels"] = cp, cp
            return make_call("nn.conv2d", [args[0], Constant(np.ascontiguousarray(w))], attrs)
        new_args = []
        for o, n in zip(c.args, args):
            if isinstance(o, Constant) and id(o) not in self.padded:
                arr = o.data.numpy()
                axis = 0 if arr.ndim in (1, 3) else 1
                n = Constant(np.ascontiguousarray(_pad_axis(arr, axis, cp)))
            new_args.append(n)
        return Call(op, new_args, c.attrs)


class PadChannels(FunctionPass):
    """``PadChannels(lanes)`` (opt_level 3): see the module docstring. ``lanes`` None: the
    current target's fp32 vector lanes (at most 16) on a CPU target with two 512-bit FMA units
    (:func:`~tvmpy.target.cpu_features.fma512_units`: Intel's Xeons with AMX), else nothing is
    done: there a half-width FMA is half the core's peak, while a core that splits 512-bit
    FMAs into two halves (Zen 4) or has no AVX-512 runs both widths at one FMA rate, and the
    padding would only add arithmetic (24 -> 32 channels: a third)."""

    def __init__(self, lanes: int | None = None) -> None:
        super().__init__(name="PadChannels", opt_level=3)
        self.lanes = lanes

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        lanes = self.lanes
        if lanes is None:
            from ...target import Target

            target = Target.current()
            if target is None or "cpu" not in getattr(target, "keys", ()):
                return func
            if not ctx.config.get("relay.x86.pad_channels", True):
                return func
            from ...target.cpu_features import fma512_units

            if fma512_units(target.isa_features) < 2:
                return func  # see the class docstring
            from ..op.strategy.x86_alter_op import block_lanes

            lanes = block_lanes(target, "float32")
        padded = _analyse(func, lanes)
        if not padded:
            return func
        new = _Pad(padded).visit(func)
        body = new.body
        if id(func.body) in padded:  # the function's result: the real channels
            c = _shape(func.body)[1]  # type: ignore[index]
            body = _tf.strided_slice(body, (0,), (c,), axes=(1,))
        from ..expr import Function

        return Function(new.params, body, None, attrs=new.attrs)
