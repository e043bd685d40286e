"""Winograd convolution F(m x m, 3 x 3) (Lavin & Gray, 2016) in the blocked NCHW{c} layout.

A 3x3 stride-1 convolution computes each ``m x m`` output tile from an ``alpha x alpha`` input
tile (``alpha = m + 2``) as ``Y = A^T [ U (.) V ] A`` summed over input channels, with
``V = B^T d B`` (input transform), ``U = G g G^T`` (weight transform, done once, at compile time
for constant weights) and ``(.)`` the element-wise product. Summed over channels the product
becomes ``alpha^2`` independent matrix products ``M[e, n] = U[e, n] @ V[e, n]`` (output channels
x input channels times input channels x tiles): ``alpha^2 / m^2`` multiplications per output
instead of 9 (F(4x4, 3x3): 36 / 16 = 2.25, a 4x cut; F(6x6, 3x3): 64 / 36, 5.1x), paid for with
the transforms and a slightly lower accuracy (the transform constants grow with ``m``).

Layouts: data ``[N, C/ib, H, W, ib]``; transformed weight ``[alpha, alpha, OC/ob, C, ob]`` (one
vector of ``ob`` output channels contiguous); output ``[N, OC/ob, OH, OW, ob]``. Stages (names
used by the x86 schedule): ``data_pad`` -> ``winograd_d`` (first 1-D pass of the input
transform) -> ``winograd_V`` -> ``winograd_M`` (the batched product, a reduction over input
channels) -> ``winograd_S`` (first 1-D pass of the output transform) -> the output (tag
``conv2d_winograd_nchwc``), which gathers tile elements back into the image. The transforms are
written as explicit sums of their non-zero terms, selected by the transform index: once that
index is a constant (unrolled loops) only the terms of one row are left.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any

import numpy as np

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from ...tir import Select
from ...tir.expr import const
from ..utils import get_const_tuple
from .pad import pad
from .utils import batch_const_shape, check_rank, get_pad_tuple, infer_out_dtype

__all__ = ["winograd_matrices", "conv2d_winograd_weight_transform", "winograd_weight_transform_np",
           "winograd_nchwc_np",
           "conv2d_winograd_nchwc", "winograd_tile_sizes"]

# interpolation points of the Toom-Cook construction per output tile size m (alpha - 1 finite
# points plus infinity): small integers first, then halves. For m = 4, 1/2 in place of 2 cuts
# the float32 rounding error 2-3x (Barabasz et al. 2020, "Error analysis and improving the
# accuracy of Winograd convolution"; measured on 32-1024 channels, ReLU and signed inputs) at
# the price of 26 instead of 22 non-zeros in B^T; with +-2 a 256-channel layer erred by 1e-5 of
# its output's max, 20x the direct convolution (tests/relay/test_conv_winograd.py)
_POINTS = {
    2: (0, 1, -1),
    3: (0, 1, -1, 2),
    4: (0, 1, -1, Fraction(1, 2), -2),
    5: (0, 1, -1, 2, -2, Fraction(1, 2)),
    6: (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2)),
}


def winograd_tile_sizes() -> tuple[int, ...]:
    """The output tile sizes ``m`` with transform matrices (F(m x m, 3 x 3))."""
    return tuple(sorted(_POINTS))


@functools.cache
def winograd_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A^T, B^T, G)`` of F(m, r) in float64: ``A^T`` is ``m x alpha``, ``B^T``
    ``alpha x alpha``, ``G`` ``alpha x r``, with ``y = A^T [(G g) * (B^T d)]`` the correlation
    ``y_i = sum_k d_{i+k} g_k`` of ``alpha`` inputs with ``r`` taps.

    ``A^T`` and ``G`` are the Vandermonde matrices of the points (``G``'s rows divided by
    ``prod_{l != j} (a_j - a_l)``), the point at infinity picking the leading coefficient;
    ``B^T`` is solved exactly (rational arithmetic) from the bilinear identity
    ``sum_j A^T[i, j] G[j, k] B^T[j, l] = [l == i + k]``.
    """
    if r != 3 or m not in _POINTS:
        raise ValueError(f"winograd: F({m}, {r}) is not supported; tile sizes "
                         f"{winograd_tile_sizes()} with a 3-tap kernel")
    pts = [Fraction(p) for p in _POINTS[m]]
    alpha = m + r - 1
    at = [[Fraction(0)] * alpha for _ in range(m)]
    g = [[Fraction(0)] * r for _ in range(alpha)]
    for j, a in enumerate(pts):
        f = Fraction(1)
        for l2, b in enumerate(pts):
            if l2 != j:
                f *= a - b
        for i in range(m):
            at[i][j] = a ** i
        for k in range(r):
            g[j][k] = a ** k / f
    at[m - 1][alpha - 1] = Fraction(1)
    g[alpha - 1][r - 1] = Fraction(1)
    # B^T column by column: for each l, unknowns x_j = B^T[j, l]; equations over (i, k)
    bt = [[Fraction(0)] * alpha for _ in range(alpha)]
    for l2 in range(alpha):
        rows, rhs = [], []
        for i in range(m):
            for k in range(r):
                rows.append([at[i][j] * g[j][k] for j in range(alpha)])
                rhs.append(Fraction(1 if l2 == i + k else 0))
        sol = _solve_exact(rows, rhs, alpha)
        for j in range(alpha):
            bt[j][l2] = sol[j]
    to = lambda mat: np.array([[float(x) for x in row] for row in mat], dtype=np.float64)
    return to(at), to(bt), to(g)


def _solve_exact(rows: list[list[Fraction]], rhs: list[Fraction], n: int) -> list[Fraction]:
    """Gaussian elimination over the rationals of a consistent system with ``n`` unknowns."""
    aug = [row[:] + [b] for row, b in zip(rows, rhs)]
    piv_cols: list[int] = []
    r = 0
    for c in range(n):
        p = next((i for i in range(r, len(aug)) if aug[i][c] != 0), None)
        if p is None:
            continue
        aug[r], aug[p] = aug[p], aug[r]
        inv = 1 / aug[r][c]
        aug[r] = [x * inv for x in aug[r]]
        for i in range(len(aug)):
            if i != r and aug[i][c] != 0:
                fac = aug[i][c]
                aug[i] = [x - fac * y for x, y in zip(aug[i], aug[r])]
        piv_cols.append(c)
        r += 1
    if any(all(x == 0 for x in row[:n]) and row[n] != 0 for row in aug):
        raise ArithmeticError("winograd: inconsistent transform system")  # pragma: no cover
    if len(piv_cols) != n:
        raise ArithmeticError("winograd: under-determined transform system")  # pragma: no cover
    sol = [Fraction(0)] * n
    for i, c in enumerate(piv_cols):
        sol[c] = aug[i][n]
    return sol


def _row_sum(mat: np.ndarray, row: int, get: Any, dtype: str) -> Any:
    """``sum_k mat[row, k] * get(k)`` over the non-zero entries (no multiply for +-1)."""
    acc = None
    for k, c in enumerate(mat[row]):
        if c == 0:
            continue
        v = get(k)
        if c == -1:
            term, neg = v, True
        else:
            term, neg = (v if c == 1 else v * const(float(c), dtype)), False
        if acc is None:
            acc = -term if neg else term
        else:
            acc = acc - term if neg else acc + term
    return acc if acc is not None else const(0.0, dtype)


def _transform(mat: np.ndarray, idx: Any, get: Any, dtype: str) -> Any:
    """``sum_k mat[idx, k] * get(k)`` for a loop index ``idx``: a select over its values (one
    row of terms once ``idx`` is a constant)."""
    rows = mat.shape[0]
    expr = _row_sum(mat, rows - 1, get, dtype)
    for i in range(rows - 2, -1, -1):
        expr = Select(idx == i, _row_sum(mat, i, get, dtype), expr)
    return expr


def _check_weight(oc: int, kh: int, kw: int, oc_bn: int, op: str) -> None:
    if (kh, kw) != (3, 3):
        raise ValueError(f"{op}: kernel must be 3x3, got {kh}x{kw}")
    if oc % oc_bn:
        raise ValueError(f"{op}: {oc} output channels are not a multiple of the block {oc_bn}")


def winograd_weight_transform_np(kernel: np.ndarray, m: int, oc_bn: int) -> np.ndarray:
    """numpy: ``kernel[OC, C, 3, 3]`` -> ``[alpha, alpha, OC/oc_bn, C, oc_bn]`` (``G g G^T``;
    float32 weights in float32, others in float64)."""
    oc, ic, kh, kw = kernel.shape
    _check_weight(oc, kh, kw, oc_bn, "winograd weight transform")
    _, _, g = winograd_matrices(m)
    g = np.asarray(g, dtype=np.float64)
    alpha = m + 2
    # G g G^T for every (o, i) as ONE matrix product, laid out as the result wants it:
    # U[(e, n), (ob, i, bi)] = sum_(k, l) (G kron G)[(e, n), (k, l)] w[ob*bn + bi, i, (k, l)]
    # (a 3-operand einsum runs its naive 6-deep loop, and transposing the alpha^2-times larger
    # result costs as much: 1.5 s of a ResNet-18 build)
    # float32 weights: products in float32 (the 36 x 9 matrix has few non-zeros per row, the
    # result differs from float64 by at most an ulp; float64 memory traffic was most of it)
    ct = np.float32 if kernel.dtype == np.float32 else np.float64
    w = kernel.reshape(oc // oc_bn, oc_bn, ic, kh * kw).transpose(3, 0, 2, 1)
    w = np.ascontiguousarray(w, dtype=ct).reshape(kh * kw, -1)
    u = (np.kron(g, g).astype(ct) @ w).reshape(alpha, alpha, oc // oc_bn, ic, oc_bn)
    return np.ascontiguousarray(u, dtype=kernel.dtype)


def winograd_nchwc_np(data: np.ndarray, weight: np.ndarray, padding: Any, m: int) -> np.ndarray:
    """numpy (float64) of :func:`conv2d_winograd_nchwc` for any transformed ``weight`` (the
    algorithm itself, not the direct convolution it equals when ``weight`` is ``G g G^T``)."""
    at, bt, _ = winograd_matrices(m)
    alpha = m + 2
    n, icc, h, w, icb = data.shape
    _, _, occ, ic, ocb = weight.shape
    pt, pl, pb, pr = get_pad_tuple(padding, (3, 3))
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    nh, nw = -(-oh // m), -(-ow // m)
    x = data.astype(np.float64).transpose(0, 1, 4, 2, 3).reshape(n, icc * icb, h, w)
    x = np.pad(x, ((0, 0), (0, 0), (pt, nh * m + 2 - h - pt), (pl, nw * m + 2 - w - pl)))
    tiles = np.empty((n, ic, nh, nw, alpha, alpha))
    for i in range(nh):
        for j in range(nw):
            tiles[:, :, i, j] = x[:, :, i * m:i * m + alpha, j * m:j * m + alpha]
    v = np.einsum("er,ncijrs,us->eunijc", bt, tiles, bt)
    u = weight.astype(np.float64).transpose(0, 1, 2, 4, 3).reshape(alpha, alpha, occ * ocb, ic)
    mm = np.einsum("euoc,eunijc->eunijo", u, v)
    y = np.einsum("ae,eunijo,bu->nijoab", at, mm, at)  # [n, nh, nw, oc, m, m]
    y = y.transpose(0, 3, 1, 4, 2, 5).reshape(n, occ * ocb, nh * m, nw * m)[:, :, :oh, :ow]
    return y.reshape(n, occ, ocb, oh, ow).transpose(0, 1, 3, 4, 2)


def conv2d_winograd_weight_transform(kernel: Tensor, tile_size: int, oc_bn: int) -> Tensor:
    """te: ``kernel[OC, C, 3, 3]`` -> ``[alpha, alpha, OC/oc_bn, C, oc_bn]``."""
    check_rank(kernel, 4, "conv2d_winograd_weight_transform", "kernel", "OIHW")
    oc, ic, kh, kw = get_const_tuple(kernel.shape, "winograd weight transform: kernel shape", symbolic=False)
    _check_weight(oc, kh, kw, oc_bn, "conv2d_winograd_weight_transform")
    _, _, g = winograd_matrices(tile_size)
    alpha = tile_size + 2
    dt = kernel.dtype
    # G g first (along kh), then (G g) G^T (along kw)
    gk = compute((alpha, 3, oc, ic), lambda e, kx, o, i: _transform(
        g, e, lambda ky: kernel[o, i, ky, kx], dt), name="winograd_Gg")
    return compute((alpha, alpha, oc // oc_bn, ic, oc_bn), lambda e, n, oo, i, oi: _transform(
        g, n, lambda kx: gk[e, kx, oo * oc_bn + oi, i], dt), name="winograd_U",
        tag="winograd_weight_transform")


def conv2d_winograd_nchwc(data: Tensor, weight: Tensor, padding: Any, tile_size: int,
                          out_dtype: str | None = None) -> Tensor:
    """3x3, stride 1, dilation 1 convolution of ``data[N, C/ib, H, W, ib]`` with the transformed
    ``weight[alpha, alpha, OC/ob, C, ob]`` -> ``[N, OC/ob, OH, OW, ob]``."""
    op = "conv2d_winograd_nchwc"
    check_rank(data, 5, op, "data", "NCHWc")
    check_rank(weight, 5, op, "weight", "[alpha, alpha, OC/ob, C, ob]")
    n, ic_chunk, h, w, ic_bn = batch_const_shape(data.shape, f"{op}: data shape")
    a1, a2, oc_chunk, ic, oc_bn = get_const_tuple(weight.shape, f"{op}: weight shape", symbolic=False)
    m = int(tile_size)
    alpha = m + 2
    winograd_matrices(m)  # validates m
    if (a1, a2) != (alpha, alpha):
        raise ValueError(f"{op}: the weight is transformed for {a1}x{a2} tiles, tile_size {m} "
                         f"needs {alpha}x{alpha}")
    if ic != ic_chunk * ic_bn:
        raise ValueError(f"{op}: weight has {ic} input channels, data {ic_chunk}x{ic_bn}")
    out_dtype = infer_out_dtype(out_dtype, data)
    at, bt, _ = winograd_matrices(m)
    pt, pl, pb, pr = get_pad_tuple(padding, (3, 3))
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: the 3x3 window is larger than the padded input "
                         f"{h + pt + pb}x{w + pl + pr}")
    nh, nw = -(-oh // m), -(-ow // m)
    ntile = n * nh * nw
    # pad so that every tile's alpha x alpha window is inside: rows nh*m + 2, columns nw*m + 2
    dpad = pad(data, [0, 0, pt, pl, 0], [0, 0, nh * m + 2 - h - pt, nw * m + 2 - w - pl, 0],
               name="data_pad")
    dt = data.dtype

    def tile_px(p: Any, c: Any, r1: Any, r2: Any) -> Any:
        b, t = p // (nh * nw), p % (nh * nw)
        return dpad[b, c // ic_bn, (t // nw) * m + r1, (t % nw) * m + r2, c % ic_bn]

    # V = B^T d B: along the tile's rows, then its columns
    d1 = compute((alpha, alpha, ntile, ic), lambda e, r2, p, c: _transform(
        bt, e, lambda r1: tile_px(p, c, r1, r2), dt), name="winograd_d")
    V = compute((alpha, alpha, ntile, ic), lambda e, nu, p, c: _transform(
        bt, nu, lambda r2: d1[e, r2, p, c], dt), name="winograd_V")
    rc = reduce_axis((0, ic), name="rc")
    M = compute((alpha, alpha, ntile, oc_chunk * oc_bn), lambda e, nu, p, co: te_sum(
        _cast(weight[e, nu, co // oc_bn, rc, co % oc_bn], out_dtype)
        * _cast(V[e, nu, p, rc], out_dtype), axis=rc), name="winograd_M")
    # Y = A^T M A
    S = compute((m, alpha, ntile, oc_chunk * oc_bn), lambda vh, r2, p, co: _transform(
        at, vh, lambda r1: M[r1, r2, p, co], out_dtype), name="winograd_S")

    def out(b: Any, oco: Any, y: Any, x: Any, oci: Any) -> Any:
        p = (b * nh + y // m) * nw + x // m
        return _transform(at, x % m, lambda r2: S[y % m, r2, p, oco * oc_bn + oci], out_dtype)

    return compute((n, oc_chunk, oh, ow, oc_bn), out, name=op, tag="conv2d_winograd_nchwc",
                   attrs={"tile_size": m})


def _cast(x: Any, dtype: str) -> Any:
    return x if x.dtype == dtype else x.astype(dtype)
