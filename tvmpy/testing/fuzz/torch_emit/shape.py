"""Torch translations of the fuzzer's ONNX nodes: shape and layout operators: reshape, transpose, concat, split, slice, pad, tile, ..."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._common import (
    Fn,
    Node,
    _emit,
    _norm,
    _tdt,
    _torch_pads,
)

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
