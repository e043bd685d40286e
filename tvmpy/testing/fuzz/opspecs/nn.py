"""Fuzzer operator specs: neural-network layers: convolutions, pools, matrix products, normalizations, resize."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._common import F32, FLOAT, Builder, Plan, _axes, _axis, _i64, _scale, spec


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
    st = attrs.get("strides", [1] * nd)
    if attrs.get("auto_pad") != "SAME_UPPER" and not all(
            _every_window_sees_data(shape[2 + i], k[i], st[i], dil[i], pads[i], pads[i + nd],
                                    bool(attrs.get("ceil_mode"))) for i in range(nd)):
        return None  # a window of padding only has no defined value (-inf here, ORT: other)
    if op == "AveragePool" and attrs.get("ceil_mode"):
        # a last window that ceil_mode adds past the padded input is averaged over different
        # counts by onnxruntime and onnx's reference: only ceil_mode that changes nothing
        st = attrs.get("strides", [1] * nd)
        if any((shape[2 + i] + pads[i] + pads[i + nd] - (k[i] - 1) * dil[i] - 1) % st[i]
               for i in range(nd)):
            del attrs["ceil_mode"]
    return Plan(op, [x], attrs)


def _every_window_sees_data(n: int, k: int, s: int, d: int, lo: int, hi: int,
                            ceil_mode: bool) -> bool:
    """Every output window of a pooling axis covers at least one element of the input (with
    dilations a window can fall between the data, on padding only)."""
    span = n + lo + hi - (k - 1) * d - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    for o in range(out):
        taps = [o * s - lo + j * d for j in range(k)]
        if not any(0 <= t < n for t in taps):
            return False
    return True


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


def _not_flat(axes_of: Callable[[np.ndarray], tuple[int, ...]]):
    """Normalizing over nearly constant data amplifies rounding by up to 1/sqrt(epsilon):
    require a spread. A single element is refused too: its normalized value is 0 in exact
    arithmetic, but implementations computing the variance as E[x^2] - E[x]^2 get rounding
    noise times 1/sqrt(epsilon) (onnxruntime's InstanceNormalization: 5e-4), and without an
    epsilon (MeanVarianceNormalization) 0/0."""
    def chk(i, o):
        v = np.asarray(i[0], np.float64)
        axes = axes_of(v)
        n = int(np.prod([v.shape[a] for a in axes]))
        if v.size == 0:
            return True
        if n <= 1:
            return False
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
    return Plan(op, [x], {"axes": axes}, check=_not_flat(lambda v: tuple(axes)))


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
