"""Fuzzer operator specs: shape and layout operators: reshape, transpose, concat, split, slice, pad, tile, ...."""

from __future__ import annotations

import numpy as np

from ._common import ANY, F32, MAX_ELEMENTS, NUM, Builder, Plan, _axes, _axis, _i64, spec


@spec("Reshape")
def reshape(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY)
    if x is None:
        return None
    shape = b.shape(x)
    n = int(np.prod(shape))
    dims = _factorize(b, n)
    target = list(dims)
    if target and b.chance(0.4):
        target[int(b.rng.integers(len(target)))] = -1
    if b.chance(0.3) and len(target) <= len(shape):
        k = int(b.rng.integers(len(target) + 1))
        if k and target[k - 1] == shape[k - 1] and -1 not in target[:k]:
            target[k - 1] = 0  # 0 copies the input's dim
    return Plan(op, [x, b.const(_i64(target))])


def _factorize(b: Builder, n: int) -> list[int]:
    out = []
    rest = n
    for _ in range(int(b.rng.integers(1, 5))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = int(b.choose(divs))
        out.append(d)
        rest //= d
    out.append(rest)
    b.rng.shuffle(out)
    return out[:6]


@spec("Transpose")
def transpose(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    perm = b.rng.permutation(len(b.shape(x))).tolist()
    return Plan(op, [x], {"perm": perm} if b.chance(0.9) else {})


@spec("Flatten")
def flatten(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    r = len(b.shape(x))
    return Plan(op, [x], {"axis": int(b.rng.integers(-r, r + 1))})


@spec("Squeeze")
def squeeze(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, pred=lambda v: 1 in v.shape)
    if x is None:
        return None
    shape = b.shape(x)
    ones = [k for k, d in enumerate(shape) if d == 1]
    if b.chance(0.2):
        return Plan(op, [x])
    sel = [k for k in ones if b.chance(0.7)] or ones[:1]
    return Plan(op, [x, b.const(_i64([k - len(shape) if b.chance(0.3) else k for k in sel]))])


@spec("Unsqueeze")
def unsqueeze(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, max_rank=4)
    if x is None:
        return None
    r = len(b.shape(x)) + int(b.rng.integers(1, 3))
    axes = b.rng.choice(r, size=r - len(b.shape(x)), replace=False).tolist()
    return Plan(op, [x, b.const(_i64([a - r if b.chance(0.3) else a for a in axes]))])


@spec("Expand")
def expand(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, max_rank=5)
    if x is None:
        return None
    shape = list(b.shape(x))
    target = [int(b.choose((2, 3, 5))) if d == 1 and b.chance(0.6) else
              (1 if b.chance(0.2) else d) for d in shape]
    if b.chance(0.4):
        target = [int(b.choose((1, 2, 3)))] + target
    if int(np.prod(np.broadcast_shapes(tuple(target), tuple(shape)))) > MAX_ELEMENTS:
        return None
    return Plan(op, [x, b.const(_i64(target))])


@spec("Concat")
def concat(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape, r = b.shape(x), len(b.shape(x))
    axis = _axis(b, r)
    parts = [x]
    for _ in range(int(b.rng.integers(1, 4))):
        s = list(shape)
        s[axis] = int(b.choose((1, 2, 3, shape[axis])))
        same = [t for t in b.candidates((b.dtype(x),)) if b.shape(t) == tuple(s)]
        parts.append(b.choose(same) if same and b.chance(0.5) else b.leaf(s, b.dtype(x)))
    b.rng.shuffle(parts)
    return Plan(op, parts, {"axis": axis})


@spec("Split")
def split(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1, pred=lambda v: max(v.shape, default=0) >= 2)
    if x is None:
        return None
    shape = b.shape(x)
    axes = [k for k, d in enumerate(shape) if d >= 2]
    axis = int(b.choose(axes))
    d = shape[axis]
    if b.chance(0.5):
        n = int(b.rng.integers(2, min(d, 4) + 1))
        return Plan(op, [x], {"axis": axis - len(shape) if b.chance(0.3) else axis,
                              "num_outputs": n}, n_out=n)
    cuts = sorted(b.rng.choice(np.arange(1, d), size=min(d - 1, int(b.rng.integers(1, 3))),
                               replace=False).tolist())
    sizes = np.diff([0, *cuts, d]).tolist()
    return Plan(op, [x, b.const(_i64(sizes))], {"axis": axis}, n_out=len(sizes))


@spec("Slice")
def slice_(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axes = _axes(b, len(shape))
    starts, ends, steps = [], [], []
    for a in axes:
        d = shape[a]
        step = int(b.choose((1, 1, 1, 2, 3, -1, -2)))
        if step > 0:
            s = int(b.rng.integers(-d, d)) if d else 0
            e = int(b.choose((d, d + 5, 2 ** 62, -1, int(b.rng.integers(-d, d + 1)) if d else 0)))
        else:
            s = int(b.choose((-1, d - 1, 2 ** 62))) if d else 0
            e = int(b.choose((-d - 1, 0, -(2 ** 62)))) if d else 0
        starts.append(s)
        ends.append(e)
        steps.append(step)
    ins = [x, b.const(_i64(starts)), b.const(_i64(ends)), b.const(_i64(axes))]
    if b.chance(0.8) or any(s != 1 for s in steps):
        ins.append(b.const(_i64(steps)))
    return Plan(op, ins)


@spec("Tile")
def tile(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1, pred=lambda v: v.size <= 512)
    if x is None:
        return None
    reps = [int(b.choose((1, 1, 2, 3))) for _ in b.shape(x)]
    return Plan(op, [x, b.const(_i64(reps))])


@spec("Pad")
def pad(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    mode = b.choose(("constant", "constant", "reflect", "edge"))
    pads = []
    for side in range(2):
        for d in shape:
            hi = d - 1 if mode == "reflect" else 3
            lo = -min(1, d - 1) if mode == "constant" and side == 0 and d > 1 else 0
            pads.append(int(b.rng.integers(lo, max(hi, 0) + 1)) if hi >= 0 else 0)
    ins = [x, b.const(_i64(pads))]
    if mode == "constant" and b.chance(0.5):
        ins.append(b.const(np.asarray(1.5 if b.dtype(x).kind == "f" else 2, b.dtype(x))))
    return Plan(op, ins, {"mode": mode})


@spec("DepthToSpace", "SpaceToDepth")
def depth_space(b: Builder, op: str) -> Plan | None:
    bs = int(b.choose((2, 3)))
    if op == "DepthToSpace":
        x = b.pick(F32, min_rank=4, max_rank=4, pred=lambda v: v.shape[1] % (bs * bs) == 0)
        if x is None:
            return None
        return Plan(op, [x], {"blocksize": bs, "mode": b.choose(("DCR", "CRD"))})
    x = b.pick(F32, min_rank=4, max_rank=4,
               pred=lambda v: v.shape[2] % bs == 0 and v.shape[3] % bs == 0)
    return None if x is None else Plan(op, [x], {"blocksize": bs})


@spec("Trilu")
def trilu(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=2)
    if x is None:
        return None
    ins = [x]
    if b.chance(0.6):
        ins.append(b.const(_i64(int(b.rng.integers(-3, 4)))))
    return Plan(op, ins, {"upper": int(b.chance(0.5))})


@spec("Shape", "Size")
def shape_of(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY)
    if x is None:
        return None
    attrs = {}
    if op == "Shape" and b.chance(0.3) and b.shape(x):
        r = len(b.shape(x))
        attrs = {"start": int(b.rng.integers(-r, r))}
    return Plan(op, [x], attrs)


@spec("EyeLike")
def eye_like(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=2, max_rank=2)
    if x is None:
        return None
    return Plan(op, [x], {"k": int(b.rng.integers(-2, 3))})


@spec("ConstantOfShape")
def const_of_shape(b: Builder, op: str) -> Plan | None:
    from onnx import numpy_helper

    shape = [int(b.choose((1, 2, 3, 5))) for _ in range(int(b.rng.integers(1, 4)))]
    value = np.asarray([b.choose((0.5, -2.0, 3.0))], b.choose(("float32", "int64")))
    return Plan(op, [b.const(_i64(shape))], {"value": numpy_helper.from_array(value)})


@spec("Range")
def range_(b: Builder, op: str) -> Plan | None:
    dt = b.choose(("float32", "int64", "int32"))
    start, delta = b.choose((0, 1, -3, 2)), b.choose((1, 2, -1, 3))
    limit = start + delta * int(b.rng.integers(1, 9))
    return Plan(op, [b.const(np.asarray(v, dt)) for v in (start, limit, delta)])


@spec("OneHot")
def one_hot(b: Builder, op: str) -> Plan | None:
    depth = int(b.choose((3, 5, 8)))
    x = b.pick(("int64",), max_rank=3,
               pred=lambda v: v.size > 0 and int(np.abs(v).max()) < depth)
    if x is None:
        x = b.leaf([int(b.choose((1, 3, 4)))] * int(b.rng.integers(1, 3)), "int64", -depth,
                   depth)
    values = b.const(np.asarray([b.choose((0.0, -1.0)), b.choose((1.0, 2.5))], np.float32))
    r = len(b.shape(x)) + 1
    return Plan(op, [x, b.const(_i64(depth)), values], {"axis": int(b.rng.integers(-r, r))})
