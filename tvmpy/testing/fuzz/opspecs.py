"""The fuzzer's operator catalog: for each ONNX operator, how to pick operands that satisfy its
shape and dtype constraints, draw attributes from their valid domain (edge cases included:
size-1 and prime dims, broadcasting, negative axes, strides / dilations / padding, groups),
and judge whether its result is well posed (see generator.py).

A spec is ``spec(builder) -> Plan | None`` (None: no operands fit now; the generator tries
another). ``SPECS`` maps a name (usually the op type) to its spec.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .generator import MAX_ELEMENTS, Builder, Plan, margin

__all__ = ["SPECS"]

SPECS: dict[str, Callable[[Builder], Plan | None]] = {}

F32 = ("float32",)
FLOAT = ("float32", "float32", "float32", "float16")  # float16 less often
INT = ("int32", "int64")
NUM = ("float32", "float16", "int32", "int64")
ANY = ("float32", "float16", "int32", "int64", "bool")


def spec(*names: str):
    """Register ``fn(builder, op_type)`` as the spec of each of ``names``."""
    def deco(fn):
        for n in names:
            SPECS[n] = functools.partial(fn, op=n)
        return fn
    return deco


def _i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def _scale(v: np.ndarray) -> float:
    v = np.asarray(v, dtype=np.float64)
    return float(max(1.0, np.abs(v).max())) if v.size else 1.0


def _away(x: np.ndarray, points: Callable[[np.ndarray], np.ndarray]) -> bool:
    """Every element of ``x`` is far (relative ``margin``) from its nearest point."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.size == 0:
        return True
    m = margin(x.dtype)
    x64 = x.astype(np.float64)
    return bool((np.abs(x64 - points(x64)) > m * np.maximum(1.0, np.abs(x64))).all())


def _not_near_int(x):
    return _away(x, np.round)


def _not_near_half(x):
    return _away(x, lambda v: np.floor(v) + 0.5)


def _apart(a, b) -> bool:
    """a and b (broadcast) are equal exactly or far apart (comparisons are well posed)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f":
        return True
    m = margin(a.dtype)
    a64, b64 = np.broadcast_arrays(a.astype(np.float64), b.astype(np.float64))
    d = np.abs(a64 - b64)
    return bool(((d == 0) | (d > m * np.maximum(1.0, np.maximum(np.abs(a64), np.abs(b64))))).all())


def _gaps(x: np.ndarray, axis: int, k: int | None = None, ties_ok: bool = False) -> bool:
    """Along ``axis`` the top ``k`` values (all when None) are separated by a margin, so their
    order does not depend on rounding."""
    x = np.asarray(x)
    if x.dtype.kind != "f" or x.shape[axis] < 2:
        return True
    s = -np.sort(-x.astype(np.float64), axis=axis)
    s = np.moveaxis(s, axis, -1)
    n = s.shape[-1] if k is None else min(k + 1, s.shape[-1])
    d = -np.diff(s[..., :n], axis=-1)
    ok = d > margin(x.dtype) * _scale(x)
    if ties_ok:
        ok |= d == 0
    return bool(ok.all())


def _positive(v):
    return v.dtype.kind == "f" and v.size > 0 and float(v.min()) > 0.05 * _scale(v) \
        and float(v.min()) > 0.05


def _nonzero(v):
    return v.dtype.kind == "f" and v.size > 0 and float(np.abs(v).min()) > 0.05


def _domain_operand(b: Builder, dtypes, pred, low: float, high: float) -> str | None:
    """A tensor in an operator's domain: from the pool, through an Abs -> Add(c) adapter, or
    a new leaf."""
    t = b.pick(dtypes, pred=pred)
    if t is not None and b.chance(0.7):
        return t
    src = b.pick(dtypes)
    if src is not None and b.chance(0.5) and low >= 0:
        a = Plan("Abs", [src])
        if b.try_insert(a):
            absname = b.nodes[-1].output[0]
            c = b.const(np.asarray(low + 0.2, dtype=b.dtype(src)))
            if b.try_insert(Plan("Add", [absname, c])):
                cand = b.nodes[-1].output[0]
                if pred(b.val(cand)):
                    return cand
    dt = b.choose(dtypes)
    shape = b.shape(src) if src is not None else (int(b.choose((1, 3, 4, 8))),)
    return b.leaf(shape, dt, low, high)


def _axis(b: Builder, rank: int) -> int:
    a = int(b.rng.integers(rank))
    return a - rank if b.chance(0.3) else a


def _axes(b: Builder, rank: int, min_n: int = 1) -> list[int]:
    n = int(b.rng.integers(min_n, rank + 1))
    axes = sorted(b.rng.choice(rank, size=n, replace=False).tolist())
    return [a - rank if b.chance(0.25) else a for a in axes]


# ---------------------------------------------------------------------------------------------
# elementwise


_UNARY_ANY = ["Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Sin", "Cos", "Atan", "Asinh",
              "Sinh", "Cosh", "Erf", "Softplus", "Softsign", "Elu", "Selu", "Celu",
              "LeakyRelu", "HardSigmoid", "HardSwish", "Identity", "Mish"]
_UNARY_F16 = {"Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Identity", "LeakyRelu",
              "Softplus", "Elu", "HardSigmoid"}


@spec(*_UNARY_ANY)
def unary(b: Builder, op: str) -> Plan | None:
    dts = FLOAT if op in _UNARY_F16 else F32
    if op in ("Abs", "Neg", "Relu", "Identity"):
        dts = ("float32", "float16", "int32", "int64") if op != "Relu" else FLOAT
    x = b.pick(dts)
    if x is None:
        return None
    attrs = {}
    if op in ("Elu", "Celu", "LeakyRelu") and b.chance(0.6):
        attrs["alpha"] = float(b.choose((0.01, 0.1, 0.5, 1.3)))
    if op == "Selu" and b.chance(0.5):
        attrs.update(alpha=1.5, gamma=1.1)
    if op == "HardSigmoid" and b.chance(0.6):
        attrs.update(alpha=float(b.choose((0.1, 0.3))), beta=float(b.choose((0.3, 0.6))))
    return Plan(op, [x], attrs)


@spec("ThresholdedRelu", "Shrink")
def kinked(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32)
    if x is None:
        return None
    if op == "ThresholdedRelu":
        alpha = float(b.choose((0.0, 0.5, 1.0)))
        return Plan(op, [x], {"alpha": alpha},
                    check=lambda i, o: _away(i[0], lambda v: np.full_like(v, alpha)))
    lambd, bias = float(b.choose((0.5, 1.0))), float(b.choose((0.0, 0.3)))
    return Plan(op, [x], {"lambd": lambd, "bias": bias},
                check=lambda i, o: _away(i[0], lambda v: np.where(v > 0, lambd, -lambd)))


@spec("Floor", "Ceil", "Round", "Sign")
def rounding(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT)
    if x is None:
        return None
    chk = {"Floor": _not_near_int, "Ceil": _not_near_int, "Round": _not_near_half,
           "Sign": lambda v: _away(v, np.zeros_like)}[op]
    return Plan(op, [x], check=lambda i, o: chk(i[0]))


_DOMAIN = {  # op: (predicate on the input, low, high of a fresh operand, check)
    "Log": (_positive, 0.1, 4.0),
    "Sqrt": (_positive, 0.1, 4.0),
    "Reciprocal": (_nonzero, 0.2, 3.0),
    "Acos": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.95, -0.9, 0.9),
    "Asin": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.95, -0.9, 0.9),
    "Atanh": (lambda v: v.size > 0 and float(np.abs(v).max()) < 0.9, -0.85, 0.85),
    "Acosh": (lambda v: v.size > 0 and float(v.min()) > 1.05, 1.1, 4.0),
    "Tan": (lambda v: v.size > 0 and float(np.abs(np.cos(v.astype(np.float64))).min()) > 0.1,
            -1.2, 1.2),
}


@spec(*_DOMAIN)
def domain_unary(b: Builder, op: str) -> Plan | None:
    pred, low, high = _DOMAIN[op]
    dts = FLOAT if op in ("Log", "Sqrt", "Reciprocal") else F32
    x = _domain_operand(b, dts, pred, low, high)
    if x is None:
        return None
    return Plan(op, [x], check=lambda i, o: bool(pred(np.asarray(i[0]))))


@spec("Add", "Sub", "Mul", "Max", "Min")
def binary(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    low, high = (-3.0, 3.0) if b.dtype(a).kind == "f" else (-20, 20)
    other = b.broadcast_partner(a, low, high)
    ins = [a, other] if b.chance(0.5) else [other, a]
    return Plan(op, ins)


@spec("Div")
def div(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    if b.dtype(a).kind == "f":
        d = b.broadcast_partner(a, 0.3, 3.0, pred=_nonzero)
        if b.chance(0.5):  # negative denominators too
            d = b.leaf(b.shape(d), b.dtype(a), -3.0, -0.3)
        return Plan(op, [a, d], check=lambda i, o: _nonzero(np.asarray(i[1])))
    d = b.broadcast_partner(a, 1, 9, pred=lambda v: bool((v != 0).all()))
    return Plan(op, [a, d], check=lambda i, o: bool((np.asarray(i[1]) != 0).all()))


@spec("Mod")
def mod(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM)
    if a is None:
        return None
    if b.dtype(a).kind == "f":
        d = b.broadcast_partner(a, 0.7, 2.5, pred=_nonzero)

        def chk(i, o):
            q = np.asarray(i[0], np.float64) / np.asarray(i[1], np.float64)
            return _not_near_int(q.astype(np.asarray(i[0]).dtype)) and _nonzero(np.asarray(i[1]))
        return Plan(op, [a, d], {"fmod": 1}, check=chk)
    d = b.broadcast_partner(a, 1, 7, pred=lambda v: bool((v != 0).all()))
    return Plan(op, [a, d], {"fmod": int(b.chance(0.5))},
                check=lambda i, o: bool((np.asarray(i[1]) != 0).all()))


@spec("Pow")
def power(b: Builder, op: str) -> Plan | None:
    base = _domain_operand(b, F32, _positive, 0.2, 3.0)
    if base is None:
        return None
    if b.chance(0.5):
        e = b.const(np.asarray(b.choose((2.0, 3.0, 0.5, -1.0, 1.5)), np.float32))
    else:
        e = b.broadcast_partner(base, -2.0, 2.0)
        if b.dtype(e) != b.dtype(base):
            return None
    return Plan(op, [base, e], check=lambda i, o: _positive(np.asarray(i[0])))


@spec("PRelu")
def prelu(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    slope_shape = (shape[1],) + (1,) * (len(shape) - 2) if len(shape) >= 2 and b.chance(0.6) \
        else shape[-1:]
    slope = b.leaf(slope_shape, "float32", -0.5, 0.5, feed=False)
    return Plan(op, [x, slope])


@spec("Sum", "Mean")
def variadic(b: Builder, op: str) -> Plan | None:
    a = b.pick(FLOAT)
    if a is None:
        return None
    others = [b.broadcast_partner(a) for _ in range(int(b.rng.integers(0, 3)))]
    return Plan(op, [a, *others])


@spec("Clip")
def clip(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM)
    if x is None:
        return None
    dt = b.dtype(x)
    lo = b.const(np.asarray(b.choose((-1, 0, -2)), dt)) if b.chance(0.8) else ""
    hi = b.const(np.asarray(b.choose((1, 2, 6)), dt)) if b.chance(0.8) else ""
    ins = [x, lo, hi]
    while ins[-1] == "":
        ins.pop()
    return Plan(op, ins)


@spec("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
def compare(b: Builder, op: str) -> Plan | None:
    a = b.pick(NUM if op != "Equal" else ("int32", "int64", "bool"))
    if a is None:
        return None
    low, high = (-3.0, 3.0) if b.dtype(a).kind == "f" else (-3, 4)
    other = b.broadcast_partner(a, low, high)
    return Plan(op, [a, other], check=lambda i, o: _apart(i[0], i[1]))


@spec("And", "Or", "Xor")
def logical(b: Builder, op: str) -> Plan | None:
    a = b.pick(("bool",))
    if a is None:
        return None
    return Plan(op, [a, b.broadcast_partner(a)])


@spec("Not")
def logical_not(b: Builder, op: str) -> Plan | None:
    a = b.pick(("bool",))
    return None if a is None else Plan(op, [a])


@spec("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def bitwise(b: Builder, op: str) -> Plan | None:
    a = b.pick(INT)
    if a is None:
        return None
    if op == "BitwiseNot":
        return Plan(op, [a])
    return Plan(op, [a, b.broadcast_partner(a, -50, 50)])


@spec("Where")
def where(b: Builder, op: str) -> Plan | None:
    c = b.pick(("bool",))
    x = b.pick(NUM)
    if x is None:
        return None
    if c is None:
        c = b.leaf([d if b.chance(0.7) else 1 for d in b.shape(x)], "bool")
    y = b.broadcast_partner(x)
    try:
        np.broadcast_shapes(b.shape(c), b.shape(x), b.shape(y))
    except ValueError:
        return None
    return Plan(op, [c, x, y])


@spec("IsNaN", "IsInf")
def is_special(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT)
    return None if x is None else Plan(op, [x])


@spec("Cast", "CastLike")
def cast(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY)
    if x is None:
        return None
    src = b.dtype(x)
    to = np.dtype(b.choose(("float32", "float16", "int32", "int64", "bool")))
    if to == src:
        to = np.dtype("float32") if src != np.float32 else np.dtype("int64")

    def chk(i, o):
        v = np.asarray(i[0])
        if v.dtype.kind == "f" and to.kind in "iu":
            return _not_near_int(v)
        if v.dtype.kind == "f" and to == np.bool_:
            return _away(v, np.zeros_like)
        if v.dtype.kind in "iu" and to == np.float16:
            return bool(np.abs(v).max(initial=0) <= 2048)
        return True
    if op == "Cast":
        from onnx import helper

        return Plan(op, [x], {"to": helper.np_dtype_to_tensor_dtype(to)}, check=chk)
    like = b.const(np.zeros((1,), to))
    return Plan(op, [x, like], check=chk)


# ---------------------------------------------------------------------------------------------
# shape and layout


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


# ---------------------------------------------------------------------------------------------
# indexing


@spec("Gather")
def gather(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    d = shape[axis]
    ishape = [int(b.choose((1, 2, 3, 4))) for _ in range(int(b.rng.integers(0, 3)))]
    idx = b.rng.integers(-d, d, size=ishape).astype(b.choose(("int64", "int32")))
    return Plan(op, [x, b.const(idx, "idx")], {"axis": axis})


@spec("GatherElements")
def gather_elements(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    ishape = [int(b.rng.integers(1, d + 1)) if d else 0 for d in shape]
    ishape[axis] = int(b.choose((1, 2, 3, shape[axis])))
    d = shape[axis]
    idx = b.rng.integers(-d, d, size=ishape).astype(np.int64)
    return Plan(op, [x, b.const(idx, "idx")], {"axis": axis})


@spec("GatherND")
def gather_nd(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    bd = int(b.rng.integers(0, min(2, len(shape) - 1) + 1)) if len(shape) > 1 else 0
    last = int(b.rng.integers(1, len(shape) - bd + 1))
    mid = [int(b.choose((1, 2, 3))) for _ in range(int(b.rng.integers(0, 2)))]
    ishape = list(shape[:bd]) + mid + [last]
    idx = np.stack([b.rng.integers(-shape[bd + k], shape[bd + k], size=ishape[:-1])
                    for k in range(last)], axis=-1).astype(np.int64)
    return Plan(op, [x, b.const(idx, "idx")], {"batch_dims": bd})


@spec("ScatterElements")
def scatter_elements(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    ishape = [int(b.rng.integers(1, d + 1)) for d in shape]
    axis_p = axis % len(shape)
    d = shape[axis]
    ishape[axis] = min(d, int(b.choose((1, 2, d))))
    # distinct target positions along the axis (duplicates make "none" order-dependent)
    perm = np.stack([b.rng.permutation(d)[:ishape[axis]] for _ in range(int(np.prod(ishape))
                                                                        // ishape[axis])])
    idx = np.moveaxis(perm.reshape([*ishape[:axis_p], *ishape[axis_p + 1:], ishape[axis_p]]),
                      -1, axis_p).astype(np.int64)
    idx = np.where(b.rng.random(idx.shape) < 0.3, idx - d, idx)
    upd = b.operand(ishape, b.dtype(x))
    red = _scatter_reduction(b, x)
    return Plan(op, [x, b.const(idx, "idx"), upd], {"axis": axis, "reduction": red})


@spec("ScatterND")
def scatter_nd(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    last = int(b.rng.integers(1, len(shape) + 1))
    cells = int(np.prod(shape[:last]))
    n = int(b.rng.integers(1, min(cells, 4) + 1))
    flat = b.rng.permutation(cells)[:n]
    idx = np.stack(np.unravel_index(flat, shape[:last]), axis=-1).astype(np.int64)
    upd = b.operand([n, *shape[last:]], b.dtype(x))
    red = _scatter_reduction(b, x)
    return Plan(op, [x, b.const(idx, "idx"), upd], {"reduction": red})


def _scatter_reduction(b: Builder, x: str) -> str:
    if b.dtype(x) == np.float16:  # onnxruntime has no float16 scatter reductions
        return "none"
    return b.choose(("none", "none", "add", "mul", "max", "min"))


@spec("Compress")
def compress(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    if b.chance(0.3):
        cond = b.rng.random(int(np.prod(shape))) < 0.5
        return Plan(op, [x, b.const(cond)])
    axis = _axis(b, len(shape))
    cond = b.rng.random(shape[axis]) < 0.6
    return Plan(op, [x, b.const(cond)], {"axis": axis})


@spec("ReverseSequence")
def reverse_sequence(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=2)
    if x is None:
        return None
    shape = b.shape(x)
    batch_axis = int(b.choose((0, 1)))
    time_axis = 1 - batch_axis
    lens = b.rng.integers(1, shape[time_axis] + 1, size=shape[batch_axis]).astype(np.int64)
    return Plan(op, [x, b.const(lens)], {"batch_axis": batch_axis, "time_axis": time_axis})


# ---------------------------------------------------------------------------------------------
# reductions


_REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare", "ReduceLogSum"]


@spec(*_REDUCE)
def reduce(b: Builder, op: str) -> Plan | None:
    dts = NUM if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd") else FLOAT
    if op == "ReduceLogSum":
        x = _domain_operand(b, F32, _positive, 0.2, 3.0)
    elif op == "ReduceProd":
        x = b.pick(dts, pred=lambda v: v.size <= 256 and (v.dtype.kind != "f" or
                                                           float(np.abs(v).max()) < 3))
    else:
        x = b.pick(dts, min_rank=1)
    if x is None:
        return None
    r = len(b.shape(x))
    ins = [x]
    if r and b.chance(0.85):
        ins.append(b.const(_i64(_axes(b, r))))
    attrs = {"keepdims": int(b.chance(0.5))}
    if op == "ReduceProd" and b.dtype(x).kind in "iu":
        return None if np.abs(b.val(x)).max(initial=0) > 3 or b.val(x).size > 16 else \
            Plan(op, ins, attrs)
    return Plan(op, ins, attrs)


@spec("ArgMax", "ArgMin")
def arg_reduce(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    r = len(b.shape(x))
    axis = _axis(b, r)
    last = int(b.chance(0.3))
    v = b.val(x)

    def chk(i, o):
        data = np.asarray(i[0]) if op == "ArgMax" else -np.asarray(i[0])
        if data.dtype.kind != "f":  # ints: ties are exact (select_last_index decides)
            return True
        return _gaps(data, axis, k=1)
    del v
    return Plan(op, [x], {"axis": axis, "keepdims": int(b.chance(0.5)),
                          "select_last_index": last}, check=chk)


@spec("TopK")
def topk(b: Builder, op: str) -> Plan | None:
    x = b.pick(("float32", "int64", "int32"), min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    k = int(b.rng.integers(1, shape[axis] + 1)) if shape[axis] else 0
    largest = int(b.chance(0.7))

    def chk(i, o):
        data = np.asarray(i[0])
        if data.dtype.kind != "f":
            # integer ties: the order of equal values is defined (lower index first)
            return True
        return _gaps(data if largest else -data, axis, k)
    return Plan(op, [x, b.const(_i64([k]))], {"axis": axis, "largest": largest, "sorted": 1},
                n_out=2, check=chk)


@spec("CumSum")
def cumsum(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    axis = _axis(b, len(b.shape(x)))
    return Plan(op, [x, b.const(np.asarray(axis, b.choose(("int64", "int32"))))],
                {"exclusive": int(b.chance(0.3)), "reverse": int(b.chance(0.3))})


@spec("Softmax", "LogSoftmax", "Hardmax")
def softmax(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT if op == "Softmax" else F32, min_rank=1)
    if x is None:
        return None
    axis = _axis(b, len(b.shape(x)))
    chk = (lambda i, o: _gaps(np.asarray(i[0]), axis, k=1)) if op == "Hardmax" else None
    return Plan(op, [x], {"axis": axis}, check=chk)


# ---------------------------------------------------------------------------------------------
# neural network layers


def _spatial_ok(v: np.ndarray, lo: int = 3, hi: int = 5) -> bool:
    return lo <= v.ndim <= hi and v.dtype == np.float32 and v.shape[1] >= 1


def _conv_geometry(b: Builder, spatial: tuple[int, ...]) -> dict | None:
    """Kernel, strides, dilations, pads / auto_pad valid for ``spatial``."""
    nd = len(spatial)
    k = [int(b.choose((1, 2, 3, 3, 5))) for _ in range(nd)]
    s = [int(b.choose((1, 1, 2, 3))) for _ in range(nd)]
    dil = [int(b.choose((1, 1, 2))) for _ in range(nd)]
    attrs: dict = {"kernel_shape": k}
    if any(x != 1 for x in s) or b.chance(0.3):
        attrs["strides"] = s
    if any(x != 1 for x in dil):
        attrs["dilations"] = dil
    mode = b.choose(("pads", "pads", "pads", "SAME_UPPER", "SAME_LOWER", "VALID"))
    if mode.startswith("SAME") and (any(x != 1 for x in dil) or any(a < b_ for a, b_ in zip(k, s))):
        mode = "pads"  # onnxruntime refuses dilations with SAME, and pads < 0 when k < s
    if mode == "pads":
        pads = [int(b.rng.integers(0, (k[i] - 1) * dil[i] // 2 + 2)) for i in range(nd)] + \
               [int(b.rng.integers(0, (k[i] - 1) * dil[i] // 2 + 2)) for i in range(nd)]
        pads = [min(p, (k[i % nd] - 1) * dil[i % nd]) for i, p in enumerate(pads)]
        attrs["pads"] = pads
        padded = [spatial[i] + pads[i] + pads[i + nd] for i in range(nd)]
    else:
        attrs["auto_pad"] = mode
        padded = list(spatial) if mode == "VALID" else [10 ** 6] * nd
    if any((k[i] - 1) * dil[i] + 1 > padded[i] for i in range(nd)):
        return None
    return attrs


@spec("Conv")
def conv(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, pred=_spatial_ok)
    if x is None:
        return None
    shape = b.shape(x)
    c = shape[1]
    geo = _conv_geometry(b, shape[2:])
    if geo is None:
        return None
    divs = [g for g in range(1, c + 1) if c % g == 0]
    groups = int(b.choose(divs)) if b.chance(0.4) else 1
    if b.chance(0.2):
        groups = c  # depthwise
    oc = groups * int(b.choose((1, 2, 3)) if groups > 1 else b.choose((1, 2, 3, 4, 8, 16)))
    w = b.leaf([oc, c // groups, *geo["kernel_shape"]], "float32", -1, 1, feed=False)
    ins = [x, w]
    if b.chance(0.6):
        ins.append(b.leaf([oc], "float32", -1, 1, feed=False))
    if groups > 1:
        geo["group"] = groups
    if b.chance(0.2):
        del geo["kernel_shape"]  # inferred from the weight
    return Plan(op, ins, geo)


@spec("ConvTranspose")
def conv_transpose(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, pred=lambda v: _spatial_ok(v, 3, 4) and v.size <= 1024)
    if x is None:
        return None
    shape = b.shape(x)
    c, nd = shape[1], len(shape) - 2
    k = [int(b.choose((1, 2, 3))) for _ in range(nd)]
    s = [int(b.choose((1, 2, 2, 3))) for _ in range(nd)]
    attrs: dict = {"kernel_shape": k, "strides": s}
    if b.chance(0.3):
        attrs["dilations"] = [int(b.choose((1, 2))) for _ in range(nd)]
    if b.chance(0.5):
        attrs["pads"] = [int(b.rng.integers(0, k[i % nd])) for i in range(2 * nd)]
    if b.chance(0.3):
        attrs["output_padding"] = [int(b.rng.integers(0, s[i])) for i in range(nd)]
    groups = int(b.choose([g for g in (1, 2, 3) if c % g == 0])) if b.chance(0.3) else 1
    if groups > 1:
        attrs["group"] = groups
    dil = attrs.get("dilations", [1] * nd)
    pads = attrs.get("pads", [0] * 2 * nd)
    opad = attrs.get("output_padding", [0] * nd)
    if any((shape[2 + i] - 1) * s[i] + (k[i] - 1) * dil[i] + 1 + opad[i] - pads[i] - pads[i + nd]
           < 1 for i in range(nd)):
        return None
    oc = int(b.choose((1, 2, 3, 4)))
    w = b.leaf([c, oc, *k], "float32", -1, 1, feed=False)
    ins = [x, w]
    if b.chance(0.5):
        ins.append(b.leaf([oc * groups], "float32", -1, 1, feed=False))
    return Plan(op, ins, attrs)


@spec("MaxPool", "AveragePool", "LpPool")
def pool(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, pred=_spatial_ok)
    if x is None:
        return None
    shape = b.shape(x)
    nd = len(shape) - 2
    k = [int(b.choose((1, 2, 3))) for _ in range(nd)]
    attrs: dict = {"kernel_shape": k}
    if b.chance(0.6):
        attrs["strides"] = [int(b.choose((1, 2, 3))) for _ in range(nd)]
    if op == "MaxPool" and b.chance(0.3):
        attrs["dilations"] = [int(b.choose((1, 2))) for _ in range(nd)]
    dil = attrs.get("dilations", [1] * nd)
    mode = b.choose(("pads", "pads", "SAME_UPPER", "VALID", "none"))
    st = attrs.get("strides", [1] * nd)
    if mode == "SAME_UPPER" and (any(d != 1 for d in dil) or any(a < b_ for a, b_ in zip(k, st))):
        mode = "pads"  # onnxruntime: other shapes with dilations, negative pads when k < s
    if mode == "pads":
        attrs["pads"] = [int(b.rng.integers(0, (k[i % nd] - 1) * dil[i % nd] // 2 + 1))
                         for i in range(2 * nd)]
    elif mode != "none":
        attrs["auto_pad"] = mode
    if op != "LpPool" and b.chance(0.3) and mode in ("pads", "none"):
        attrs["ceil_mode"] = 1
    if op == "AveragePool" and b.chance(0.5) and not attrs.get("ceil_mode"):
        # with ceil_mode, whether a window's part beyond the padding counts is ambiguous
        # (onnxruntime and onnx's reference differ)
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = int(b.choose((1, 2, 3)))
    pads = attrs.get("pads", [0] * 2 * nd)
    if any((k[i] - 1) * dil[i] + 1 > shape[2 + i] + pads[i] + pads[i + nd] for i in range(nd)):
        return None
    if op == "AveragePool" and attrs.get("ceil_mode"):
        # a last window that ceil_mode adds past the padded input is averaged over different
        # counts by onnxruntime and onnx's reference: only ceil_mode that changes nothing
        st = attrs.get("strides", [1] * nd)
        if any((shape[2 + i] + pads[i] + pads[i + nd] - (k[i] - 1) * dil[i] - 1) % st[i]
               for i in range(nd)):
            del attrs["ceil_mode"]
    return Plan(op, [x], attrs)


@spec("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, pred=_spatial_ok)
    if x is None:
        return None
    return Plan(op, [x], {"p": int(b.choose((1, 2, 3)))} if op == "GlobalLpPool" else {})


@spec("MatMul")
def matmul(b: Builder, op: str) -> Plan | None:
    a = b.pick(FLOAT, min_rank=1, max_rank=4)
    if a is None:
        return None
    sa = b.shape(a)
    k = sa[-1]
    n = int(b.choose((1, 3, 7, 8, 16, 17, 32)))
    if len(sa) == 1 or b.chance(0.5):
        bshape = [k, n] if b.chance(0.85) else [k]
    else:
        batch = [d if b.chance(0.6) else 1 for d in sa[:-2]]
        bshape = [*batch[int(b.rng.integers(len(batch) + 1)):], k, n]
    other = b.operand(bshape, b.dtype(a), -1, 1)
    return Plan(op, [a, other])


@spec("Gemm")
def gemm(b: Builder, op: str) -> Plan | None:
    a = b.pick(F32, min_rank=2, max_rank=2)
    if a is None:
        return None
    ta, tb = int(b.chance(0.3)), int(b.chance(0.5))
    m, k = b.shape(a)[::-1] if ta else b.shape(a)
    n = int(b.choose((1, 5, 8, 16, 19)))
    w = b.leaf([n, k] if tb else [k, n], "float32", -1, 1, feed=b.chance(0.2))
    ins = [a, w]
    if b.chance(0.7):
        ins.append(b.leaf(b.choose(([n], [1], [m, n], [m, 1], [])), "float32", -1, 1))
    attrs = {"transA": ta, "transB": tb}
    if b.chance(0.3):
        attrs.update(alpha=float(b.choose((0.5, 2.0))), beta=float(b.choose((0.0, 1.5))))
    return Plan(op, ins, attrs)


@spec("Einsum")
def einsum(b: Builder, op: str) -> Plan | None:
    a = b.pick(F32, min_rank=2, max_rank=3)
    if a is None:
        return None
    sa = b.shape(a)
    if len(sa) == 2:
        eq, bshape = b.choose((("ij,jk->ik", [sa[1], 4]), ("ij,kj->ik", [5, sa[1]]),
                               ("ij,ij->i", list(sa)), ("ij->ji", None), ("ij,j->i", [sa[1]])))
    else:
        eq, bshape = b.choose((("bij,bjk->bik", [sa[0], sa[2], 3]), ("bij->bji", None),
                               ("bij,bkj->bik", [sa[0], 4, sa[2]]), ("bij->bj", None)))
    ins = [a] if bshape is None else [a, b.operand(bshape, "float32", -1, 1)]
    return Plan(op, ins, {"equation": eq})


@spec("BatchNormalization")
def batch_norm(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=2, max_rank=5)
    if x is None:
        return None
    c = b.shape(x)[1]
    ins = [x, b.leaf([c], "float32", 0.5, 1.5, feed=False), b.leaf([c], "float32", -1, 1, False),
           b.leaf([c], "float32", -1, 1, False), b.leaf([c], "float32", 0.5, 2.0, False)]
    return Plan(op, ins, {"epsilon": float(b.choose((1e-5, 1e-3)))})


def _not_flat(axes_of: Callable[[np.ndarray], tuple[int, ...]], single_ok: bool = True):
    """Normalizing over nearly constant data amplifies rounding: require a spread (or exactly
    one element, whose normalized value is exactly 0 when there is an epsilon; without one, as
    in MeanVarianceNormalization, it is 0/0: NaN in onnxruntime, 0 in TVM-style frontends)."""
    def chk(i, o):
        v = np.asarray(i[0], np.float64)
        axes = axes_of(v)
        n = int(np.prod([v.shape[a] for a in axes]))
        if v.size == 0:
            return True
        if n <= 1:
            return single_ok
        return bool((v.std(axis=axes) > 1e-2 * _scale(v)).all())
    return chk


@spec("InstanceNormalization")
def instance_norm(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=3, max_rank=5)
    if x is None:
        return None
    c = b.shape(x)[1]
    ins = [x, b.leaf([c], "float32", 0.5, 1.5, feed=False), b.leaf([c], "float32", -1, 1, False)]
    return Plan(op, ins, {"epsilon": 1e-5},
                check=_not_flat(lambda v: tuple(range(2, v.ndim))))


@spec("LayerNormalization")
def layer_norm(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=1, pred=lambda v: v.size > 0)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    norm = shape[axis:] if axis >= 0 else shape[len(shape) + axis:]
    ins = [x, b.leaf(list(norm), "float32", 0.5, 1.5, feed=False)]
    if b.chance(0.7):
        ins.append(b.leaf(list(norm), "float32", -1, 1, feed=False))
    ax = axis % len(shape)
    return Plan(op, ins, {"axis": axis, "epsilon": 1e-5},
                check=_not_flat(lambda v: tuple(range(ax, v.ndim))))


@spec("LpNormalization")
def lp_norm(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=1)
    if x is None:
        return None
    axis = _axis(b, len(b.shape(x)))
    p = int(b.choose((1, 2)))

    def chk(i, o):
        v = np.asarray(i[0], np.float64)
        norm = np.abs(v).sum(axis=axis) if p == 1 else np.sqrt((v * v).sum(axis=axis))
        return bool((norm > 0.05 * _scale(v)).all())
    return Plan(op, [x], {"axis": axis, "p": p}, check=chk)


@spec("MeanVarianceNormalization")
def mvn(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=1)
    if x is None:
        return None
    axes = [a % len(b.shape(x)) for a in _axes(b, len(b.shape(x)))]
    return Plan(op, [x], {"axes": axes}, check=_not_flat(lambda v: tuple(axes), single_ok=False))


@spec("LRN")
def lrn(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=4, max_rank=4)
    if x is None:
        return None
    return Plan(op, [x], {"size": int(b.choose((1, 3, 5))), "alpha": 1e-3, "beta": 0.75,
                          "bias": float(b.choose((1.0, 2.0)))})


@spec("Dropout")
def dropout(b: Builder, op: str) -> Plan | None:
    x = b.pick(FLOAT)
    return None if x is None else Plan(op, [x])


@spec("Resize")
def resize(b: Builder, op: str) -> Plan | None:
    x = b.pick(F32, min_rank=3, max_rank=4, pred=lambda v: v.size <= 1024)
    if x is None:
        return None
    shape = b.shape(x)
    mode = b.choose(("nearest", "linear", "cubic") if len(shape) == 4 else ("nearest", "linear"))
    grow = mode == "cubic"  # onnxruntime's cubic mode differs from the definition downscaling
    ctm = b.choose(("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
                   if mode != "nearest" else ("asymmetric", "half_pixel", "align_corners"))
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = b.choose(("floor", "ceil", "round_prefer_floor",
                                          "round_prefer_ceil"))
    sizes = list(shape[:2]) + [int(b.choose((2 * d, d + 1, d) if grow else
                                            (1, 2, 3, 5, 2 * d, d + 1))) for d in shape[2:]]
    scales = None
    if b.chance(0.5):  # scale factors giving whole output sizes (exact coordinates)
        scales = [1.0, 1.0] + [float(b.choose((2.0, 3.0) if grow else (2.0, 3.0, 0.5)))
                               for _ in shape[2:]]
        sizes = [d * f for d, f in zip(shape, scales)]
        if any(n < 1 or n != int(n) for n in sizes):
            return None
        sizes = [int(n) for n in sizes]
    if mode == "nearest" and not all(
            _nearest_well_posed(shape[k], sizes[k], scales[k] if scales else None, ctm,
                                attrs["nearest_mode"]) for k in range(2, len(shape))):
        return None
    if scales is not None:
        return Plan(op, [x, "", b.const(np.asarray(scales, np.float32))], attrs)
    return Plan(op, [x, "", "", b.const(_i64(sizes))], attrs)


def _nearest_well_posed(n_in: int, n_out: int, scale: float | None, ctm: str,
                        nearest_mode: str) -> bool:
    """Nearest resizing picks ``rounding(coordinate)``: a coordinate on (or within rounding
    error of) a rounding boundary (integers for floor / ceil, halves for round_prefer_*)
    makes the pick depend on float rounding."""
    f = n_out / n_in if scale is None else scale
    x = np.arange(n_out, dtype=np.float64)
    if ctm == "align_corners":
        c = np.zeros_like(x) if n_out == 1 else x * (n_in - 1) / (n_out - 1)
    elif ctm == "asymmetric":
        c = x / f
    else:  # half_pixel
        c = (x + 0.5) / f - 0.5
    c = np.clip(c, 0, n_in - 1)  # clamped coordinates pick the border either way
    edge = np.round(c) if nearest_mode in ("floor", "ceil") else np.floor(c) + 0.5
    inside = (c > 1e-9) & (c < n_in - 1 - 1e-9)
    return bool((np.abs(c - edge)[inside] > 1e-3).all())
