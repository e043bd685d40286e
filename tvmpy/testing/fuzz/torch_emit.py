"""The fuzzer's random ONNX models as PyTorch modules, for the PyTorch frontend's oracle.

``to_torch(model)`` turns a generated ONNX graph into an ``nn.Module`` whose ``forward`` takes
the graph inputs (in graph-input order), computes every node with torch operations
(``torch.add``, ``F.conv2d``, ``torch.permute``, ``torch.topk`` ...) and returns the graph
outputs as a tuple. Initializers become registered buffers; index tensors the translation
derives from them (normalized gather indices, reflect-pad indices ...) are buffers too.

The translation is exact or absent: a node whose op type or attribute combination has no
faithful torch equivalent (``Resize`` in ``tf_crop_and_resize`` mode, ``ConvTranspose`` with
``output_shape``, float ``Mod`` with ``fmod=0`` ...) makes ``to_torch`` return None, and
``explain`` says which. Shapes are static: onnx's shape inference gives every tensor's shape,
so geometry (``SAME`` padding, ceil-mode pooling, resize coordinates) is resolved here.
Operands ONNX passes as tensors but torch takes as Python values (shapes, axes, pads, ``k``,
split sizes) must be initializers.

``EMITTERS`` lists the op types with a translation (``sorted(EMITTERS)``).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["to_torch", "explain", "EMITTERS", "FuzzModule", "Unsupported"]

Fn = Callable[..., Any]  # runtime tensors -> a tensor or a tuple of tensors


class Unsupported(Exception):
    """A node has no faithful torch translation."""


class Node:
    """One ONNX node with what its translation needs: attributes, the static shapes and
    dtypes of its inputs and outputs, the values of initializer inputs, and extra constant
    operands the translation adds (``add_const``)."""

    def __init__(self, proto: Any, shapes: dict[str, tuple[int, ...]],
                 dtypes: dict[str, np.dtype], inits: dict[str, np.ndarray]) -> None:
        from onnx import helper

        self.op = proto.op_type
        self.name = proto.name or proto.op_type
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        self._shapes, self._dtypes, self._inits = shapes, dtypes, inits
        self.extra: list[np.ndarray] = []  # constant operands appended after the inputs

    def attr(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name, default)
        if isinstance(v, bytes):
            return v.decode()
        return v

    def has(self, k: int) -> bool:
        return k < len(self.inputs) and self.inputs[k] != ""

    def shape(self, k: int) -> tuple[int, ...]:
        return self._lookup(self._shapes, self.inputs[k], "shape")

    def dtype(self, k: int) -> np.dtype:
        return self._lookup(self._dtypes, self.inputs[k], "dtype")

    def out_shape(self, k: int = 0) -> tuple[int, ...]:
        return self._lookup(self._shapes, self.outputs[k], "shape")

    def out_dtype(self, k: int = 0) -> np.dtype:
        return self._lookup(self._dtypes, self.outputs[k], "dtype")

    def _lookup(self, table: dict, name: str, what: str) -> Any:
        if name not in table:
            raise Unsupported(f"{self.name}: no static {what} for {name!r}")
        return table[name]

    def const(self, k: int) -> np.ndarray | None:
        """The value of input ``k`` when it is an initializer (None when absent)."""
        if not self.has(k):
            return None
        v = self._inits.get(self.inputs[k])
        if v is None:
            raise Unsupported(f"{self.name}: input {k} ({self.inputs[k]!r}) must be an "
                              "initializer")
        return v

    def ints(self, k: int) -> list[int] | None:
        v = self.const(k)
        return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]

    def add_const(self, value: np.ndarray) -> int:
        """Register a constant operand (a buffer): the translation's fn receives it after the
        node's inputs; returns its position among fn's positional arguments."""
        self.extra.append(np.ascontiguousarray(value))
        return len(self.inputs) + len(self.extra) - 1

    def refuse(self, why: str) -> Unsupported:
        return Unsupported(f"{self.name}: {why}")


EMITTERS: dict[str, Callable[[Node], Fn]] = {}


def _emit(*ops: str) -> Callable[[Callable[[Node], Fn]], Callable[[Node], Fn]]:
    def deco(fn: Callable[[Node], Fn]) -> Callable[[Node], Fn]:
        for op in ops:
            EMITTERS[op] = fn
        return fn
    return deco


_TORCH_DTYPES = {np.dtype(k): v for k, v in [
    ("float32", torch.float32), ("float16", torch.float16), ("float64", torch.float64),
    ("int8", torch.int8), ("int16", torch.int16), ("int32", torch.int32),
    ("int64", torch.int64), ("uint8", torch.uint8), ("bool", torch.bool)]}


def _tdt(dt: Any) -> torch.dtype:
    dt = np.dtype(dt)
    if dt not in _TORCH_DTYPES:
        raise Unsupported(f"dtype {dt}")
    return _TORCH_DTYPES[dt]


def _onnx_dt(elem_type: int) -> np.dtype:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _norm(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _torch_pads(begins: Sequence[int], ends: Sequence[int]) -> list[int]:
    """ONNX's [begins..., ends...] over the last len(begins) dims as F.pad's list (last dim
    first)."""
    out: list[int] = []
    for b, e in zip(reversed(list(begins)), reversed(list(ends))):
        out += [int(b), int(e)]
    return out


# ---------------------------------------------------------------------------------------------
# elementwise


_UNARY: dict[str, Fn] = {
    "Abs": torch.abs, "Neg": torch.neg, "Relu": torch.relu, "Sigmoid": torch.sigmoid,
    "Tanh": torch.tanh, "Exp": torch.exp, "Log": torch.log, "Sqrt": torch.sqrt,
    "Reciprocal": torch.reciprocal, "Sin": torch.sin, "Cos": torch.cos, "Tan": torch.tan,
    "Asin": torch.asin, "Acos": torch.acos, "Atan": torch.atan, "Sinh": torch.sinh,
    "Cosh": torch.cosh, "Asinh": torch.asinh, "Acosh": torch.acosh, "Atanh": torch.atanh,
    "Erf": torch.erf, "Floor": torch.floor, "Ceil": torch.ceil, "Round": torch.round,
    "Sign": torch.sign, "Softplus": F.softplus, "Softsign": F.softsign, "Mish": F.mish,
    "HardSwish": F.hardswish, "Not": torch.logical_not, "BitwiseNot": torch.bitwise_not,
    "IsNaN": torch.isnan,
}


@_emit(*_UNARY)
def _unary(n: Node) -> Fn:
    f = _UNARY[n.op]
    return lambda x: f(x)


@_emit("Identity")
def _identity(n: Node) -> Fn:
    return lambda x: x


@_emit("Elu", "Celu", "LeakyRelu", "Selu", "HardSigmoid", "ThresholdedRelu", "Shrink")
def _activation(n: Node) -> Fn:
    op = n.op
    if op == "Elu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: F.elu(x, alpha)
    if op == "Celu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: F.celu(x, alpha)
    if op == "LeakyRelu":
        alpha = float(n.attr("alpha", 0.01))
        return lambda x: F.leaky_relu(x, alpha)
    if op == "Selu":
        alpha = float(n.attr("alpha", 1.67326319217681884765625))
        gamma = float(n.attr("gamma", 1.05070102214813232421875))
        return lambda x: gamma * F.elu(x, alpha)
    if op == "HardSigmoid":
        alpha, beta = float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5))
        return lambda x: torch.clamp(alpha * x + beta, 0.0, 1.0)
    if op == "ThresholdedRelu":
        alpha = float(n.attr("alpha", 1.0))
        return lambda x: torch.where(x > alpha, x, torch.zeros_like(x))
    lambd, bias = float(n.attr("lambd", 0.5)), float(n.attr("bias", 0.0))
    return lambda x: torch.where(x < -lambd, x + bias,
                                 torch.where(x > lambd, x - bias, torch.zeros_like(x)))


@_emit("IsInf")
def _isinf(n: Node) -> Fn:
    pos, neg = int(n.attr("detect_positive", 1)), int(n.attr("detect_negative", 1))
    if pos and neg:
        return lambda x: torch.isinf(x)
    if pos:
        return lambda x: torch.isposinf(x)
    if neg:
        return lambda x: torch.isneginf(x)
    return lambda x: torch.zeros_like(x, dtype=torch.bool)


_BINARY: dict[str, Fn] = {
    "Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Equal": torch.eq,
    "Less": torch.lt, "Greater": torch.gt, "LessOrEqual": torch.le, "GreaterOrEqual": torch.ge,
    "And": torch.logical_and, "Or": torch.logical_or, "Xor": torch.logical_xor,
    "BitwiseAnd": torch.bitwise_and, "BitwiseOr": torch.bitwise_or,
    "BitwiseXor": torch.bitwise_xor,
}


@_emit(*_BINARY)
def _binary(n: Node) -> Fn:
    f = _BINARY[n.op]
    return lambda a, b: f(a, b)


@_emit("Div")
def _div(n: Node) -> Fn:
    if n.dtype(0).kind in "iu":  # ONNX integer division truncates toward zero
        return lambda a, b: torch.div(a, b, rounding_mode="trunc")
    return lambda a, b: torch.div(a, b)


@_emit("Mod")
def _mod(n: Node) -> Fn:
    if int(n.attr("fmod", 0)):
        return lambda a, b: torch.fmod(a, b)  # C fmod: the dividend's sign
    if n.dtype(0).kind == "f":
        raise n.refuse("Mod with fmod=0 on floats is invalid ONNX")
    return lambda a, b: torch.remainder(a, b)  # Python modulo: the divisor's sign


@_emit("Pow")
def _pow(n: Node) -> Fn:
    dt = _tdt(n.out_dtype())
    if n.dtype(0) != n.dtype(1) and n.dtype(0).kind != "f":
        raise n.refuse("integer base with a different exponent type")
    return lambda a, b: torch.pow(a, b).to(dt)


@_emit("PRelu")
def _prelu(n: Node) -> Fn:
    xs, ss = n.shape(0), n.shape(1)
    if len(xs) >= 2 and ss == (xs[1],) + (1,) * (len(xs) - 2):  # one slope per channel
        return lambda x, s: F.prelu(x, s.reshape(-1))
    return lambda x, s: torch.where(x < 0, x * s, x)


@_emit("Max", "Min", "Sum", "Mean")
def _variadic(n: Node) -> Fn:
    op, k = n.op, len(n.inputs)

    if k == 1:
        return lambda x: x.clone()
    pair = {"Max": torch.maximum, "Min": torch.minimum}.get(op, torch.add)

    def fn(*xs: torch.Tensor) -> torch.Tensor:
        acc = xs[0]
        for x in xs[1:]:
            acc = pair(acc, x)
        return acc / k if op == "Mean" else acc
    return fn


@_emit("Clip")
def _clip(n: Node) -> Fn:
    lo, hi = n.const(1), n.const(2)
    lo_v = None if lo is None else np.asarray(lo).item()
    hi_v = None if hi is None else np.asarray(hi).item()
    if lo_v is None and hi_v is None:
        return lambda x, *_: x.clone()
    return lambda x, *_: torch.clamp(x, lo_v, hi_v)


@_emit("Where")
def _where(n: Node) -> Fn:
    return lambda c, a, b: torch.where(c, a, b)


@_emit("Cast", "CastLike")
def _cast(n: Node) -> Fn:
    dt = _tdt(n.out_dtype())
    if n.op == "Cast" and n.attr("saturate", 1) != 1:
        raise n.refuse("saturate=0 (float8 casts)")
    return lambda x, *_: x.to(dt)


# ---------------------------------------------------------------------------------------------
# shape and layout


@_emit("Reshape")
def _reshape(n: Node) -> Fn:
    target = n.ints(1)
    xs = n.shape(0)
    if int(n.attr("allowzero", 0)) and 0 in target:
        raise n.refuse("allowzero=1 with a 0 in the shape")
    # 0 copies the input's dim there; -1 is inferred (as torch.reshape does)
    shape = [xs[k] if d == 0 else d for k, d in enumerate(target)]
    return lambda x, _s: torch.reshape(x, shape)


@_emit("Transpose")
def _transpose(n: Node) -> Fn:
    r = len(n.shape(0))
    perm = [int(p) for p in n.attr("perm", list(range(r))[::-1])]
    return lambda x: torch.permute(x, perm)


@_emit("Flatten")
def _flatten(n: Node) -> Fn:
    xs = n.shape(0)
    axis = int(n.attr("axis", 1))
    axis = axis + len(xs) if axis < 0 else axis
    shape = [math.prod(xs[:axis]), math.prod(xs[axis:])]
    return lambda x: torch.reshape(x, shape)


@_emit("Squeeze")
def _squeeze(n: Node) -> Fn:
    r = len(n.shape(0))
    axes = n.ints(1)
    if axes is None:
        return lambda x, *_: torch.squeeze(x)
    dims = tuple(sorted(_norm(a, r) for a in axes))
    return lambda x, _a: torch.squeeze(x, dims)


@_emit("Unsqueeze")
def _unsqueeze(n: Node) -> Fn:
    r = len(n.out_shape())
    dims = sorted(_norm(a, r) for a in n.ints(1))

    def fn(x: torch.Tensor, _a: Any) -> torch.Tensor:
        for d in dims:
            x = torch.unsqueeze(x, d)
        return x
    return fn


@_emit("Expand")
def _expand(n: Node) -> Fn:
    shape = list(np.broadcast_shapes(n.shape(0), tuple(n.ints(1))))
    return lambda x, _s: x.expand(shape)


@_emit("Concat")
def _concat(n: Node) -> Fn:
    axis = _norm(int(n.attr("axis")), len(n.shape(0)))
    return lambda *xs: torch.cat(list(xs), axis)


@_emit("Split")
def _split(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    d, k = xs[axis], len(n.outputs)
    sizes = n.ints(1)
    if sizes is None:
        num = int(n.attr("num_outputs", k))
        chunk = -(-d // num)
        sizes = [chunk] * (num - 1) + [d - chunk * (num - 1)]
        if sizes[-1] < 0:
            raise n.refuse(f"{d} does not split into {num} parts")
    if len(sizes) != k or sum(sizes) != d:
        raise n.refuse(f"split sizes {sizes} for {k} outputs of {d}")
    return lambda x, *_: tuple(torch.split(x, sizes, axis))


@_emit("Slice")
def _slice(n: Node) -> Fn:
    xs = n.shape(0)
    r = len(xs)
    starts, ends = n.ints(1), n.ints(2)
    axes = n.ints(3) if n.has(3) else list(range(len(starts)))
    steps = n.ints(4) if n.has(4) else [1] * len(starts)
    plan = []  # (axis, flip, start, stop, step) in the (flipped) axis
    for a, s, e, st in zip(axes, starts, ends, steps):
        a, d = _norm(a, r), xs[_norm(a, r)]
        if st == 0:
            raise n.refuse("step 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            plan.append((a, False, s, max(s, e), st))
        else:  # flip the axis: index i is d - 1 - i there
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            fs, fe = d - 1 - s, d - 1 - e
            plan.append((a, True, fs, max(fs, fe), -st))

    def fn(x: torch.Tensor, *_: Any) -> torch.Tensor:
        for a, flip, s, e, st in plan:
            if flip:
                x = torch.flip(x, [a])
            idx = [slice(None)] * a + [slice(s, e, st)]
            x = x[tuple(idx)]
        return x
    return fn


@_emit("Tile")
def _tile(n: Node) -> Fn:
    reps = n.ints(1)
    return lambda x, _r: x.repeat(*reps)


@_emit("Pad")
def _pad(n: Node) -> Fn:
    xs = n.shape(0)
    r = len(xs)
    pads = n.ints(1)
    axes = [_norm(a, r) for a in n.ints(3)] if n.has(3) else list(range(r))
    if len(pads) != 2 * len(axes):
        raise n.refuse(f"{len(pads)} pads for {len(axes)} axes")
    begins, ends = [0] * r, [0] * r
    for k, a in enumerate(axes):
        begins[a], ends[a] = pads[k], pads[k + len(axes)]
    mode = n.attr("mode", "constant")
    if mode == "constant":
        v = n.const(2)
        value = 0 if v is None else np.asarray(v).item()
        tp = _torch_pads(begins, ends)
        return lambda x, *_: F.pad(x, tp, value=value)
    if mode not in ("reflect", "edge") or min(pads) < 0:
        raise n.refuse(f"mode {mode} with pads {pads}")
    padded = [a for a in range(r) if begins[a] or ends[a]]
    if not padded:
        return lambda x, *_: x.clone()
    if mode == "reflect" and any(xs[a] < 2 or max(begins[a], ends[a]) >= xs[a]
                                 for a in padded):
        raise n.refuse("reflect pads as large as the axis")
    k = r - padded[0]  # trailing dims F.pad would pad
    if k <= 2 and r in (k + 1, k + 2):
        tp = _torch_pads(begins[r - k:], ends[r - k:])
        tmode = "reflect" if mode == "reflect" else "replicate"
        return lambda x, *_: F.pad(x, tp, mode=tmode)
    npmode = "reflect" if mode == "reflect" else "edge"
    gathers = [(a, n.add_const(np.pad(np.arange(xs[a]), (begins[a], ends[a]),
                                      mode=npmode).astype(np.int64))) for a in padded]

    def fn(x: torch.Tensor, *args: Any) -> torch.Tensor:
        for a, j in gathers:
            x = torch.index_select(x, a, args[j - 1])
        return x
    return fn


@_emit("DepthToSpace", "SpaceToDepth")
def _depth_space(n: Node) -> Fn:
    b, c, h, w = n.shape(0)
    bs = int(n.attr("blocksize"))
    if n.op == "SpaceToDepth":
        return lambda x: torch.reshape(torch.permute(torch.reshape(
            x, [b, c, h // bs, bs, w // bs, bs]), [0, 3, 5, 1, 2, 4]),
            [b, c * bs * bs, h // bs, w // bs])
    if n.attr("mode", "DCR") == "DCR":
        shape6, perm = [b, bs, bs, c // (bs * bs), h, w], [0, 3, 4, 1, 5, 2]
    else:
        shape6, perm = [b, c // (bs * bs), bs, bs, h, w], [0, 1, 4, 2, 5, 3]
    out = [b, c // (bs * bs), h * bs, w * bs]
    return lambda x: torch.reshape(torch.permute(torch.reshape(x, shape6), perm), out)


@_emit("Trilu")
def _trilu(n: Node) -> Fn:
    k = n.ints(1)
    k = 0 if k is None else k[0]
    upper = int(n.attr("upper", 1))
    return lambda x, *_: torch.triu(x, k) if upper else torch.tril(x, k)


@_emit("Shape")
def _shape(n: Node) -> Fn:
    xs = n.shape(0)
    start = int(n.attr("start", 0))
    end = n.attr("end")
    dims = list(xs[start:end] if end is not None else xs[start:])
    return lambda x: torch.tensor(dims, dtype=torch.int64)


@_emit("Size")
def _size(n: Node) -> Fn:
    return lambda x: torch.tensor(x.numel(), dtype=torch.int64)


@_emit("EyeLike")
def _eye_like(n: Node) -> Fn:
    rows, cols = n.shape(0)
    k = int(n.attr("k", 0))
    dt = _tdt(n.out_dtype())
    return lambda x: torch.ones(rows, cols, dtype=dt).triu(k).tril(k)


@_emit("ConstantOfShape")
def _const_of_shape(n: Node) -> Fn:
    from onnx import numpy_helper

    shape = n.ints(0)
    v = n.attr("value")
    value = np.zeros(1, np.float32) if v is None else numpy_helper.to_array(v)
    dt = _tdt(value.dtype)
    fill = value.reshape(-1)[0].item()
    return lambda _s: torch.full(shape, fill, dtype=dt)


@_emit("Range")
def _range(n: Node) -> Fn:
    start, limit, delta = (np.asarray(n.const(k)).item() for k in range(3))
    dt = _tdt(n.out_dtype())
    count = max(math.ceil((limit - start) / delta), 0)
    if n.out_shape() != (count,):
        raise n.refuse(f"Range length {count}, shape inference says {n.out_shape()}")
    return lambda *_: torch.arange(start, limit, delta, dtype=dt)


@_emit("OneHot")
def _one_hot(n: Node) -> Fn:
    if n.dtype(0).kind not in "iu":
        raise n.refuse("non-integer indices")
    depth = int(np.asarray(n.const(1)).reshape(-1)[0])
    r = len(n.out_shape())
    axis = _norm(int(n.attr("axis", -1)), r)
    where = [depth if k == axis else 1 for k in range(r)]

    def fn(i: torch.Tensor, _d: Any, values: torch.Tensor) -> torch.Tensor:
        i = i.to(torch.int64)
        i = torch.where(i < 0, i + depth, i)  # negative indices count from the end
        hot = torch.unsqueeze(i, axis) == torch.arange(depth).reshape(where)
        return torch.where(hot, values[1], values[0])
    return fn


# ---------------------------------------------------------------------------------------------
# indexing


def _norm_index(idx: np.ndarray, d: int) -> np.ndarray:
    idx = np.asarray(idx).astype(np.int64)
    if ((idx < -d) | (idx >= d)).any():
        raise Unsupported("index out of range")
    return np.where(idx < 0, idx + d, idx)


@_emit("Gather")
def _gather(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    out = list(n.out_shape())
    n.add_const(_norm_index(n.const(1), xs[axis]).reshape(-1))
    return lambda x, _i, idx: torch.reshape(torch.index_select(x, axis, idx), out)


@_emit("GatherElements")
def _gather_elements(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    n.add_const(_norm_index(n.const(1), xs[axis]))
    return lambda x, _i, idx: torch.gather(x, axis, idx)


@_emit("GatherND")
def _gather_nd(n: Node) -> Fn:
    xs = n.shape(0)
    bd = int(n.attr("batch_dims", 0))
    idx = np.asarray(n.const(1)).astype(np.int64)
    last = idx.shape[-1]
    cell = xs[bd:bd + last]
    idx = np.stack([_norm_index(idx[..., k], cell[k]) for k in range(last)], axis=-1)
    nb, ncell = math.prod(xs[:bd]), math.prod(cell)
    lin = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), cell) if last else \
        np.zeros(idx.shape[:-1], np.int64)
    lin = lin.reshape(nb, -1) + (np.arange(nb) * ncell)[:, None]  # rows of x's flattening
    n.add_const(lin.reshape(-1).astype(np.int64))
    flat = [nb * ncell, *xs[bd + last:]]
    out = list(n.out_shape())
    return lambda x, _i, rows: torch.reshape(torch.index_select(
        torch.reshape(x, flat), 0, rows), out)


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@_emit("ScatterElements")
def _scatter_elements(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    n.add_const(_norm_index(n.const(1), xs[axis]))
    red = n.attr("reduction", "none")
    if red == "none":
        return lambda x, _i, u, idx: torch.scatter(x, axis, idx, u)
    if red not in _SCATTER_REDUCE:
        raise n.refuse(f"reduction {red}")
    how = _SCATTER_REDUCE[red]
    return lambda x, _i, u, idx: torch.scatter_reduce(x, axis, idx, u, how, include_self=True)


@_emit("ScatterND")
def _scatter_nd(n: Node) -> Fn:
    xs = n.shape(0)
    idx = np.asarray(n.const(1)).astype(np.int64)
    last = idx.shape[-1]
    cell = xs[:last]
    idx = np.stack([_norm_index(idx[..., k], cell[k]) for k in range(last)], axis=-1)
    lin = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), cell).reshape(-1)
    n.add_const(lin.astype(np.int64))
    flat = [math.prod(cell), *xs[last:]]
    uflat = [lin.size, *xs[last:]]
    red = n.attr("reduction", "none")
    if red not in ("none", "add", "mul", "max", "min"):
        raise n.refuse(f"reduction {red}")

    def fn(x: torch.Tensor, _i: Any, u: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        xf, uf = torch.reshape(x, flat), torch.reshape(u, uflat)
        if red == "none":
            y = torch.index_copy(xf, 0, rows, uf)
        elif red == "add":
            y = torch.index_add(xf, 0, rows, uf)
        else:
            with warnings.catch_warnings():  # "index_reduce() is in beta"
                warnings.simplefilter("ignore")
                y = torch.index_reduce(xf, 0, rows, uf, _SCATTER_REDUCE[red],
                                       include_self=True)
        return torch.reshape(y, list(xs))
    return fn


@_emit("Compress")
def _compress(n: Node) -> Fn:
    xs = n.shape(0)
    cond = np.asarray(n.const(1)).astype(bool).reshape(-1)
    axis = n.attr("axis")
    d = math.prod(xs) if axis is None else xs[_norm(int(axis), len(xs))]
    n.add_const(np.nonzero(cond[:d])[0].astype(np.int64))
    if axis is None:
        return lambda x, _c, keep: torch.index_select(torch.reshape(x, [-1]), 0, keep)
    a = _norm(int(axis), len(xs))
    return lambda x, _c, keep: torch.index_select(x, a, keep)


@_emit("ReverseSequence")
def _reverse_sequence(n: Node) -> Fn:
    xs = n.shape(0)
    ba, ta = int(n.attr("batch_axis", 1)), int(n.attr("time_axis", 0))
    lens = np.asarray(n.const(1)).astype(np.int64)
    t = np.arange(xs[ta])
    src = np.where(t[None, :] < lens[:, None], lens[:, None] - 1 - t[None, :], t[None, :])
    if ba > ta:
        src = src.T  # [time, batch]
    shape = [1] * len(xs)
    shape[ba], shape[ta] = xs[ba], xs[ta]
    n.add_const(np.broadcast_to(src.reshape(shape), xs).astype(np.int64))
    return lambda x, _l, idx: torch.gather(x, ta, idx)


# ---------------------------------------------------------------------------------------------
# reductions


def _reduce_dims(n: Node) -> list[int] | None:
    """The reduced axes (None: the node is an identity, noop_with_empty_axes)."""
    r = len(n.shape(0))
    axes = n.ints(1) if n.has(1) else n.attr("axes")
    if not axes:
        if int(n.attr("noop_with_empty_axes", 0)):
            return None
        return list(range(r))
    return sorted({_norm(int(a), r) for a in axes})


@_emit("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum")
def _reduce(n: Node) -> Fn:
    dims = _reduce_dims(n)
    if dims is None:
        return lambda x, *_: x.clone()
    keep = bool(int(n.attr("keepdims", 1)))
    dt = _tdt(n.dtype(0))
    op = n.op
    if op == "ReduceProd":  # torch.prod takes one axis
        pdims, pkeep = (dims, keep) if dims else ([0], False)

        def prod(x: torch.Tensor, *_: Any) -> torch.Tensor:
            x = x if dims else torch.reshape(x, [1])
            for d in reversed(pdims):
                x = torch.prod(x, d, keepdim=pkeep, dtype=dt)
            return x
        return prod
    f = _REDUCE[op]
    if not dims:  # a rank-0 input: reduce it as one element (torch's dim=[] means all axes)
        return lambda x, *_: f(torch.reshape(x, [1]), [0], False, dt)
    return lambda x, *_: f(x, dims, keep, dt)


_REDUCE: dict[str, Callable[[torch.Tensor, list[int], bool, torch.dtype], torch.Tensor]] = {
    "ReduceSum": lambda x, d, k, dt: torch.sum(x, d, keepdim=k, dtype=dt),
    "ReduceMean": lambda x, d, k, dt: torch.mean(x, d, keepdim=k),
    "ReduceMax": lambda x, d, k, dt: torch.amax(x, d, keepdim=k),
    "ReduceMin": lambda x, d, k, dt: torch.amin(x, d, keepdim=k),
    "ReduceL1": lambda x, d, k, dt: torch.sum(torch.abs(x), d, keepdim=k),
    "ReduceL2": lambda x, d, k, dt: torch.linalg.vector_norm(x, 2, d, keepdim=k),
    "ReduceLogSumExp": lambda x, d, k, dt: torch.logsumexp(x, d, keepdim=k),
    "ReduceSumSquare": lambda x, d, k, dt: torch.sum(x * x, d, keepdim=k),
    "ReduceLogSum": lambda x, d, k, dt: torch.log(torch.sum(x, d, keepdim=k)),
}


@_emit("ArgMax", "ArgMin")
def _arg_reduce(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", 0)), len(xs))
    keep = bool(int(n.attr("keepdims", 1)))
    f = torch.argmax if n.op == "ArgMax" else torch.argmin
    if int(n.attr("select_last_index", 0)):
        last = xs[axis] - 1
        return lambda x: last - f(torch.flip(x, [axis]), axis, keepdim=keep)
    return lambda x: f(x, axis, keepdim=keep)


@_emit("TopK")
def _topk(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    k = n.ints(1)[0]
    largest = bool(int(n.attr("largest", 1)))
    if not int(n.attr("sorted", 1)):
        raise n.refuse("sorted=0 (the order is unspecified)")
    if n.dtype(0).kind == "f":
        return lambda x, _k: tuple(torch.topk(x, k, axis, largest=largest, sorted=True))

    def fn(x: torch.Tensor, _k: Any) -> tuple[torch.Tensor, torch.Tensor]:
        # integers tie: ONNX takes the lower index first, as a stable sort does
        v, i = torch.sort(x, dim=axis, descending=largest, stable=True)
        return torch.narrow(v, axis, 0, k), torch.narrow(i, axis, 0, k)
    return fn


@_emit("CumSum")
def _cumsum(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(np.asarray(n.const(1)).reshape(-1)[0]), len(xs))
    exclusive, reverse = int(n.attr("exclusive", 0)), int(n.attr("reverse", 0))
    dt = _tdt(n.dtype(0))
    d = xs[axis]

    def fn(x: torch.Tensor, _a: Any) -> torch.Tensor:
        if reverse:
            x = torch.flip(x, [axis])
        y = torch.cumsum(x, axis, dtype=dt)
        if exclusive and d:
            y = torch.cat([torch.zeros_like(torch.narrow(y, axis, 0, 1)),
                           torch.narrow(y, axis, 0, d - 1)], axis)
        if reverse:
            y = torch.flip(y, [axis])
        return y
    return fn


@_emit("Softmax", "LogSoftmax", "Hardmax")
def _softmax(n: Node) -> Fn:
    xs = n.shape(0)
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    if n.op == "Softmax":
        return lambda x: F.softmax(x, axis)
    if n.op == "LogSoftmax":
        return lambda x: F.log_softmax(x, axis)
    where = [xs[axis] if k == axis else 1 for k in range(len(xs))]

    def hardmax(x: torch.Tensor) -> torch.Tensor:
        hot = torch.argmax(x, axis, keepdim=True) == torch.arange(xs[axis]).reshape(where)
        return hot.to(x.dtype)
    return hardmax


# ---------------------------------------------------------------------------------------------
# convolutions and pooling


def _geometry(n: Node, kernel: Sequence[int]) -> tuple[list[int], list[int], list[int]]:
    """strides, dilations and [begins..., ends...] pads (auto_pad resolved) of a conv/pool."""
    spatial = n.shape(0)[2:]
    nd = len(spatial)
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    dil = [int(d) for d in n.attr("dilations", [1] * nd)]
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in n.attr("pads", [0] * 2 * nd)]
    elif auto == "VALID":
        pads = [0] * 2 * nd
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * 2 * nd
        for i in range(nd):
            out = -(-spatial[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto == "SAME_UPPER" else (big, small)
    else:
        raise n.refuse(f"auto_pad {auto}")
    return strides, dil, pads


@_emit("Conv")
def _conv(n: Node) -> Fn:
    ws = n.shape(1)
    nd = len(ws) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D convolution")
    kernel = list(ws[2:])
    if list(n.attr("kernel_shape", kernel)) != kernel:
        raise n.refuse("kernel_shape differs from the weight's")
    strides, dil, pads = _geometry(n, kernel)
    group = int(n.attr("group", 1))
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    auto = n.attr("auto_pad", "NOTSET")
    padding: Any
    pre: list[int] | None = None
    if auto == "VALID":
        padding = "valid"
    elif auto == "SAME_UPPER" and all(s == 1 for s in strides):
        padding = "same"  # torch's "same" puts the odd pad at the end, as SAME_UPPER does
    elif pads[:nd] == pads[nd:]:
        padding = pads[:nd]
    else:
        padding, pre = 0, _torch_pads(pads[:nd], pads[nd:])

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        if pre is not None:
            x = F.pad(x, pre)
        return conv(x, w, b, strides, padding, dil, group)
    return fn


@_emit("ConvTranspose")
def _conv_transpose(n: Node) -> Fn:
    ws = n.shape(1)
    nd = len(ws) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D transposed convolution")
    if n.attr("output_shape") is not None:
        raise n.refuse("output_shape")
    if n.attr("auto_pad", "NOTSET") not in ("NOTSET", "", "VALID"):
        raise n.refuse(f"auto_pad {n.attr('auto_pad')}")
    kernel = list(ws[2:])
    if list(n.attr("kernel_shape", kernel)) != kernel:
        raise n.refuse("kernel_shape differs from the weight's")
    strides = [int(s) for s in n.attr("strides", [1] * nd)]
    dil = [int(d) for d in n.attr("dilations", [1] * nd)]
    pads = [0] * 2 * nd if n.attr("auto_pad") == "VALID" else \
        [int(p) for p in n.attr("pads", [0] * 2 * nd)]
    outpad = [int(p) for p in n.attr("output_padding", [0] * nd)]
    group = int(n.attr("group", 1))
    if any(op >= max(s, d) for op, s, d in zip(outpad, strides, dil)):
        raise n.refuse("output_padding not below the stride or dilation")
    conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    if pads[:nd] == pads[nd:]:
        return lambda x, w, b=None: conv(x, w, b, strides, pads[:nd], outpad, group, dil)
    # asymmetric: the unpadded result, cropped (pads remove rows from each end)
    crop = (Ellipsis, *(slice(pads[i], -pads[i + nd] or None) for i in range(nd)))
    return lambda x, w, b=None: conv(x, w, b, strides, 0, outpad, group, dil)[crop]


def _pool_plan(n: Node, kernel: Sequence[int]) -> tuple[list[int], list[int], list[int],
                                                         list[int], bool]:
    """strides, dilations, pads [begins..., ends...], extra end padding (ceil mode: windows
    past the padded input) and whether torch's own padding reproduces ONNX's windows."""
    xs, out = n.shape(0), n.out_shape()
    nd = len(xs) - 2
    strides, dil, pads = _geometry(n, kernel)
    extra = []
    for i in range(nd):
        eff = (kernel[i] - 1) * dil[i] + 1
        padded = xs[2 + i] + pads[i] + pads[i + nd]
        e = max(0, (out[2 + i] - 1) * strides[i] + eff - padded)
        if (padded + e - eff) // strides[i] + 1 != out[2 + i]:
            raise n.refuse("pooling windows do not match the output shape")
        extra.append(e)
    for i in range(nd):  # a window of padding only has no defined value (max: -inf or not)
        taps = np.arange(out[2 + i])[:, None] * strides[i] - pads[i] + \
            np.arange(kernel[i])[None, :] * dil[i]
        if not ((taps >= 0) & (taps < xs[2 + i])).any(axis=1).all():
            raise n.refuse("a pooling window covers only padding")
    ceil = bool(int(n.attr("ceil_mode", 0)))
    native = pads[:nd] == pads[nd:] and all(
        (k - 1) * d + 1 <= size for k, d, size in zip(kernel, dil, xs[2:])) and all(
        p <= k // 2 for p, k in zip(pads[:nd], kernel)) and all(
        _torch_pool_len(xs[2 + i], kernel[i], strides[i], pads[i], dil[i], ceil) == out[2 + i]
        for i in range(nd))
    return strides, dil, pads, extra, native


def _torch_pool_len(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    eff = (k - 1) * d + 1
    num = size + 2 * p - eff
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1  # torch: the last window starts inside the input or left padding
    return out


@_emit("MaxPool")
def _max_pool(n: Node) -> Fn:
    if len([o for o in n.outputs if o]) > 1:
        raise n.refuse("the Indices output")
    if n.dtype(0).kind != "f":
        raise n.refuse("integer max pooling")
    nd = len(n.shape(0)) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D pooling")
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides, dil, pads, extra, native = _pool_plan(n, kernel)
    pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
    if native:
        ceil = bool(int(n.attr("ceil_mode", 0)))
        return lambda x: pool(x, kernel, strides, pads[:nd], dil, ceil_mode=ceil)
    tp = _torch_pads(pads[:nd], [e + x for e, x in zip(pads[nd:], extra)])
    return lambda x: pool(F.pad(x, tp, value=-math.inf), kernel, strides, 0, dil)


@_emit("AveragePool", "LpPool")
def _avg_pool(n: Node) -> Fn:
    xs = n.shape(0)
    nd = len(xs) - 2
    if nd not in (1, 2, 3):
        raise n.refuse(f"{nd}-D pooling")
    kernel = [int(k) for k in n.attr("kernel_shape")]
    strides, dil, pads, extra, native = _pool_plan(n, kernel)
    if any(d != 1 for d in dil):
        raise n.refuse("dilated average pooling")
    pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[nd - 1]
    include = bool(int(n.attr("count_include_pad", 0)))
    tp = _torch_pads(pads[:nd], [e + x for e, x in zip(pads[nd:], extra)])
    size = math.prod(kernel)
    if n.op == "LpPool":
        p = int(n.attr("p", 2))
        return lambda x: torch.pow(pool(F.pad(torch.pow(torch.abs(x), p), tp), kernel, strides)
                                   * size, 1.0 / p)
    if native:
        ceil = bool(int(n.attr("ceil_mode", 0)))
        return lambda x: pool(x, kernel, strides, pads[:nd], ceil_mode=ceil,
                              count_include_pad=include)
    # window sums over the zero-padded input, divided by the number of counted cells (the
    # input's, plus the explicit pads' with count_include_pad; never the ceil-mode overhang)
    mask = np.pad(np.ones(xs[2:], np.float64),
                  [(0 if include else pads[i], extra[i] + (0 if include else pads[i + nd]))
                   for i in range(nd)])
    if include:
        mask = np.pad(mask, [(pads[i], pads[i + nd]) for i in range(nd)], constant_values=1)
    count = _window_sums(mask, kernel, strides)
    if (count == 0).any():
        raise n.refuse("a pooling window covers no counted cell")
    n.add_const(count.astype(n.dtype(0)))
    return lambda x, cnt: pool(F.pad(x, tp), kernel, strides) * size / cnt


def _window_sums(a: np.ndarray, kernel: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    from numpy.lib.stride_tricks import sliding_window_view

    w = sliding_window_view(a, tuple(kernel))
    w = w[tuple(slice(None, None, s) for s in strides)]
    return w.sum(axis=tuple(range(-len(kernel), 0)))


@_emit("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(n: Node) -> Fn:
    dims = list(range(2, len(n.shape(0))))
    if n.op == "GlobalAveragePool":
        return lambda x: torch.mean(x, dims, keepdim=True)
    if n.op == "GlobalMaxPool":
        return lambda x: torch.amax(x, dims, keepdim=True)
    p = int(n.attr("p", 2))
    return lambda x: torch.pow(torch.sum(torch.pow(torch.abs(x), p), dims, keepdim=True),
                               1.0 / p)


# ---------------------------------------------------------------------------------------------
# matrix products and normalization


@_emit("MatMul")
def _matmul(n: Node) -> Fn:
    return lambda a, b: torch.matmul(a, b)


@_emit("Gemm")
def _gemm(n: Node) -> Fn:
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    has_c = n.has(2)
    nout = n.out_shape()[1]
    if tb and not ta and alpha == 1.0 and (not has_c or beta == 1.0 and n.shape(2) == (nout,)):
        return lambda a, w, c=None: F.linear(a, w, c)

    def fn(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None) -> torch.Tensor:
        a = a.t() if ta else a
        b = b.t() if tb else b
        if c is None:
            return torch.mm(a, b) * alpha if alpha != 1.0 else torch.mm(a, b)
        return torch.addmm(c, a, b, beta=beta, alpha=alpha)
    return fn


@_emit("Einsum")
def _einsum(n: Node) -> Fn:
    eq = n.attr("equation").replace(" ", "")
    return lambda *xs: torch.einsum(eq, *xs)


@_emit("BatchNormalization")
def _batch_norm(n: Node) -> Fn:
    if int(n.attr("training_mode", 0)) or len([o for o in n.outputs if o]) > 1:
        raise n.refuse("training mode")
    eps = float(n.attr("epsilon", 1e-5))
    return lambda x, s, b, m, v: F.batch_norm(x, m, v, s, b, False, 0.0, eps)


@_emit("InstanceNormalization")
def _instance_norm(n: Node) -> Fn:
    eps = float(n.attr("epsilon", 1e-5))
    xs = n.shape(0)
    if math.prod(xs[2:]) > 1:
        return lambda x, s, b: F.instance_norm(x, weight=s, bias=b, eps=eps)
    # torch refuses instance_norm of one spatial element: the formula
    dims, cshape = list(range(2, len(xs))), [xs[1]] + [1] * (len(xs) - 2)
    return lambda x, s, b: (x - torch.mean(x, dims, keepdim=True)) / torch.sqrt(
        torch.var(x, dims, correction=0, keepdim=True) + eps) * torch.reshape(s, cshape) \
        + torch.reshape(b, cshape)


@_emit("LayerNormalization")
def _layer_norm(n: Node) -> Fn:
    xs = n.shape(0)
    if len([o for o in n.outputs if o]) > 1:
        raise n.refuse("Mean / InvStdDev outputs")
    if int(n.attr("stash_type", 1)) != 1 and n.dtype(0) != np.float32:
        raise n.refuse("stash_type other than float32")
    axis = _norm(int(n.attr("axis", -1)), len(xs))
    norm = list(xs[axis:])
    if n.shape(1) != tuple(norm) or (n.has(2) and n.shape(2) != tuple(norm)):
        raise n.refuse("scale / bias broadcast to the normalized shape")
    eps = float(n.attr("epsilon", 1e-5))
    return lambda x, s, b=None: F.layer_norm(x, norm, s, b, eps)


@_emit("LpNormalization")
def _lp_norm(n: Node) -> Fn:
    axis = _norm(int(n.attr("axis", -1)), len(n.shape(0)))
    p = int(n.attr("p", 2))
    if p not in (1, 2):
        raise n.refuse(f"p={p}")
    return lambda x: F.normalize(x, float(p), axis, eps=0.0)


@_emit("MeanVarianceNormalization")
def _mvn(n: Node) -> Fn:
    r = len(n.shape(0))
    axes = sorted({_norm(int(a), r) for a in n.attr("axes", [0, 2, 3])})
    return lambda x: (x - torch.mean(x, axes, keepdim=True)) / torch.sqrt(
        torch.var(x, axes, correction=0, keepdim=True))


@_emit("LRN")
def _lrn(n: Node) -> Fn:
    size = int(n.attr("size"))
    if size % 2 == 0:
        raise n.refuse("even size (torch centers the window the other way)")
    alpha, beta = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75))
    bias = float(n.attr("bias", 1.0))
    return lambda x: F.local_response_norm(x, size, alpha, beta, bias)


@_emit("Dropout")
def _dropout(n: Node) -> Fn:
    if n.has(2):
        t = n.const(2)
        if t is None or bool(np.asarray(t).reshape(-1)[0]):
            raise n.refuse("training mode")
    if len([o for o in n.outputs if o]) > 1:
        return lambda x, *_: (x.clone(), torch.ones_like(x, dtype=torch.bool))
    return lambda x, *_: F.dropout(x, 0.5, training=False)


# ---------------------------------------------------------------------------------------------
# resize


def _resize_coords(ctm: str, out_len: int, in_len: int, scale: np.float32) -> np.ndarray:
    """ONNX's source coordinate of each output index (float32, as onnxruntime computes)."""
    x = np.arange(out_len, dtype=np.float32)
    f32 = np.float32
    if ctm == "asymmetric":
        return x / scale
    if ctm == "half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5)
    if ctm == "pytorch_half_pixel":
        return (x + f32(0.5)) / scale - f32(0.5) if out_len > 1 else np.zeros(1, f32)
    if ctm == "align_corners":
        return x * f32(in_len - 1) / f32(out_len - 1) if out_len > 1 else np.zeros(1, f32)
    raise Unsupported(f"coordinate_transformation_mode {ctm}")


_NEAREST = {"floor": np.floor, "ceil": np.ceil,
            "round_prefer_floor": lambda v: np.ceil(v - np.float32(0.5)),
            "round_prefer_ceil": lambda v: np.floor(v + np.float32(0.5))}


@_emit("Resize")
def _resize(n: Node) -> Fn:
    xs, out = n.shape(0), n.out_shape()
    r = len(xs)
    if int(n.attr("antialias", 0)) or n.attr("axes") is not None or \
            n.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise n.refuse("antialias / axes / keep_aspect_ratio_policy")
    if int(n.attr("exclude_outside", 0)):
        raise n.refuse("exclude_outside")
    given = n.const(2) if n.has(2) else None
    scales_given = given is not None and given.size > 0
    if scales_given:  # else sizes: the scale is out / in
        scales = [np.float32(s) for s in given.reshape(-1)]
    else:
        scales = [np.float32(o) / np.float32(i) for o, i in zip(out, xs)]
    if tuple(out[:2]) != tuple(xs[:2]) or any(s != 1 for s in scales[:2]):
        raise n.refuse("resizing the batch or channel axis")
    mode = n.attr("mode", "nearest")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    spatial = list(range(2, r))
    if mode == "nearest":
        rnd = _NEAREST[n.attr("nearest_mode", "round_prefer_floor")]
        if (ctm, n.attr("nearest_mode", "round_prefer_floor")) == ("asymmetric", "floor") \
                and r == 4 and scales_given and all(
                float(s).is_integer() for s in scales[2:]):
            sf = [float(s) for s in scales[2:]]
            return lambda x, *_: F.interpolate(x, scale_factor=sf, mode="nearest")
        gathers = []
        for a in spatial:
            src = rnd(_resize_coords(ctm, out[a], xs[a], scales[a]))
            idx = np.clip(src, 0, xs[a] - 1).astype(np.int64)
            if out[a] != xs[a] or (idx != np.arange(xs[a])).any():
                gathers.append((a, n.add_const(idx)))

        def nearest(x: torch.Tensor, *args: Any) -> torch.Tensor:
            for a, j in gathers:
                x = torch.index_select(x, a, args[j - 1])
            return x
        return nearest
    if mode not in ("linear", "cubic") or (mode == "cubic" and r != 4) or r not in (3, 4, 5):
        raise n.refuse(f"mode {mode} on rank {r}")
    if mode == "cubic" and float(n.attr("cubic_coeff_a", -0.75)) != -0.75:
        raise n.refuse("cubic_coeff_a other than -0.75")
    torch_mode = {"cubic": "bicubic"}.get(mode, ("linear", "bilinear", "trilinear")[r - 3])
    align = {"align_corners": True, "half_pixel": False}.get(ctm)
    if ctm == "pytorch_half_pixel" and all(out[a] > 1 for a in spatial):
        align = False  # pytorch_half_pixel is half_pixel unless an output axis has length 1
    if align is None:
        if mode == "cubic":
            raise n.refuse(f"cubic with {ctm}")
        return _linear_by_gathers(n, ctm, xs, out, scales)
    if scales_given:
        sf = [float(s) for s in scales[2:]]
        return lambda x, *_: F.interpolate(x, scale_factor=sf, mode=torch_mode,
                                           align_corners=align)
    size = list(out[2:])
    return lambda x, *_: F.interpolate(x, size=size, mode=torch_mode, align_corners=align)


def _linear_by_gathers(n: Node, ctm: str, xs: Sequence[int], out: Sequence[int],
                       scales: Sequence[np.float32]) -> Fn:
    """Separable linear interpolation as two gathers and a blend per axis (coordinates clamped
    to the input, as onnxruntime does)."""
    steps = []
    for a in range(2, len(xs)):
        src = np.clip(_resize_coords(ctm, out[a], xs[a], scales[a]), 0, xs[a] - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, xs[a] - 1)
        w = (src - lo).astype(np.float32).reshape([-1] + [1] * (len(xs) - 1 - a))
        steps.append((a, n.add_const(lo), n.add_const(hi), n.add_const(w)))

    def fn(x: torch.Tensor, *args: Any) -> torch.Tensor:
        for a, jl, jh, jw in steps:
            lo = torch.index_select(x, a, args[jl - 1])
            hi = torch.index_select(x, a, args[jh - 1])
            x = lo + (hi - lo) * args[jw - 1]
        return x
    return fn


# ---------------------------------------------------------------------------------------------
# the module


class FuzzModule(nn.Module):
    """An ONNX graph as torch code: ``forward(*graph_inputs) -> tuple(graph_outputs)``.

    ``steps`` are ``(op_type, fn, input names, output names)`` in graph order; a name in
    ``buffers`` is read from the registered buffer of that (sanitized) name."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 consts: dict[str, np.ndarray], steps: list[tuple[str, Fn, list[str], list[str]]]
                 ) -> None:
        super().__init__()
        self.input_names = list(inputs)
        self.output_names = list(outputs)
        self.buffers_of: dict[str, str] = {}
        taken: set[str] = set()
        for name, value in consts.items():
            attr = "c_" + re.sub(r"\W", "_", name)
            while attr in taken:
                attr += "_"
            taken.add(attr)
            self.register_buffer(attr, torch.from_numpy(np.array(value, copy=True)))
            self.buffers_of[name] = attr
        self.steps = steps

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if len(args) != len(self.input_names):
            raise TypeError(f"expected {len(self.input_names)} inputs, got {len(args)}")
        env: dict[str, Any] = dict(zip(self.input_names, args))
        for name, attr in self.buffers_of.items():
            env[name] = getattr(self, attr)
        for _op, fn, ins, outs in self.steps:
            res = fn(*[env[i] if i else None for i in ins])
            res = res if isinstance(res, tuple) else (res,)
            for name, value in zip(outs, res):
                if name:
                    env[name] = value
        return tuple(env[o] for o in self.output_names)


def _static_types(model: Any) -> tuple[dict[str, tuple[int, ...]], dict[str, np.dtype]]:
    from onnx import numpy_helper, shape_inference

    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, np.dtype] = {}
    g = inferred.graph
    for vi in [*g.input, *g.value_info, *g.output]:
        tt = vi.type.tensor_type
        if tt.elem_type:
            dtypes[vi.name] = _onnx_dt(tt.elem_type)
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    for init in g.initializer:
        v = numpy_helper.to_array(init)
        shapes[init.name], dtypes[init.name] = tuple(v.shape), v.dtype
    produced = [o for nd in g.node for o in nd.output if o]
    if any(o not in shapes for o in produced):  # data-dependent to shape inference (Compress)
        for name, v in _evaluate_all(model, shapes, dtypes).items():
            shapes.setdefault(name, tuple(v.shape))
            dtypes.setdefault(name, v.dtype)
    return shapes, dtypes


def _evaluate_all(model: Any, shapes: dict[str, tuple[int, ...]],
                  dtypes: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    """Every tensor of ``model`` run by onnx's reference evaluator on zero inputs (shapes
    that depend only on initializers: Compress, GatherND with batch dims)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {}
    for vi in model.graph.input:
        if vi.name not in shapes or vi.name not in dtypes:
            return {}
        feeds[vi.name] = np.zeros(shapes[vi.name], dtypes[vi.name])
    try:
        with np.errstate(all="ignore"):
            ev = ReferenceEvaluator(model)
            return {k: np.asarray(v) for k, v in ev.run(None, feeds, intermediate=True).items()
                    if v is not None}
    except Exception:  # noqa: BLE001 - the shapes stay unknown: the nodes are refused
        return {}


def _translate(model: Any) -> FuzzModule:
    from onnx import numpy_helper

    g = model.graph
    if any(o.domain not in ("", "ai.onnx") for o in model.opset_import if o.domain):
        raise Unsupported("a non-default operator domain")
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    shapes, dtypes = _static_types(model)
    for vi in [*g.input, *g.output]:
        if vi.name not in dtypes or vi.name not in shapes:
            raise Unsupported(f"no static type for {vi.name!r}")
        _tdt(dtypes[vi.name])
    consts = dict(inits)
    steps: list[tuple[str, Fn, list[str], list[str]]] = []
    for k, proto in enumerate(g.node):
        if proto.domain not in ("", "ai.onnx"):
            raise Unsupported(f"{proto.op_type} of domain {proto.domain}")
        if proto.op_type not in EMITTERS:
            raise Unsupported(f"no translation of {proto.op_type}")
        node = Node(proto, shapes, dtypes, inits)
        for name in [*node.inputs, *node.outputs]:
            if name and name in dtypes:
                _tdt(dtypes[name])
        try:
            fn = EMITTERS[proto.op_type](node)
        except Unsupported as e:
            if str(e).startswith(node.name):
                raise
            raise Unsupported(f"{node.name}: {e}") from e
        except (TypeError, ValueError, IndexError, KeyError) as e:
            raise Unsupported(f"{node.name}: {type(e).__name__}: {e}") from e
        ins = list(node.inputs)
        for j, value in enumerate(node.extra):
            name = f"{node.outputs[0] or f'n{k}'}__const{j}"
            consts[name] = value
            ins.append(name)
        steps.append((proto.op_type, fn, ins, list(node.outputs)))
    used = {i for _, _, ins, _ in steps for i in ins}
    consts = {k: v for k, v in consts.items() if k in used}
    inputs = [vi.name for vi in g.input if vi.name not in inits]  # (old IR: weights as inputs)
    return FuzzModule(inputs, [vi.name for vi in g.output], consts, steps)


def explain(model: Any) -> str | None:
    """Why ``model`` has no torch translation (None when it has one)."""
    try:
        _translate(model)
    except Unsupported as e:
        return str(e)
    return None


def to_torch(model: Any) -> nn.Module | None:
    """``model`` (an ONNX ModelProto) as an ``nn.Module`` in eval mode computing the same
    graph with torch operations, or None when a node has no faithful translation."""
    try:
        return _translate(model).eval()
    except Unsupported:
        return None
