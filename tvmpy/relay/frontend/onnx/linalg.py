"""ONNX matrix products: Gemm, MatMul (broadcast batches as batch_matmul), Einsum (one or two
operands) and Det (the Leibniz formula, n <= 4: an exact sum of signed products)."""

from __future__ import annotations

import itertools

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ...op import reduce as _red
from ..common import broadcast_dims, prod, reshape_to, same_dims
from .context import ImportContext, dtype_of, scalar_like, shape_of
from .registry import Attrs, Inputs, Names, Output, converter


@converter("Gemm")
def _gemm(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, B = inputs[0], inputs[1]
    if attrs.get("transA", 0):
        A = transform.transpose(A, (1, 0))
    if not attrs.get("transB", 0):
        B = transform.transpose(B, (1, 0))
    out = nn.dense(A, B)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        out = tensor.multiply(out, scalar_like(alpha, out))
    if len(inputs) > 2 and inputs[2] is not None:
        C = inputs[2] if beta == 1.0 else tensor.multiply(inputs[2], scalar_like(beta, inputs[2]))
        out = tensor.add(out, C)
    return out


@converter("MatMul")
def matmul(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    A, B = inputs
    sa, sb = shape_of(A), shape_of(B)
    if len(sa) == 1:
        A, sa = reshape_to(A, (1, sa[0])), [1, sa[0]]
        squeeze_a = True
    else:
        squeeze_a = False
    squeeze_b = len(sb) == 1
    if squeeze_b:
        B, sb = reshape_to(B, (sb[0], 1)), [sb[0], 1]
    M, K, N = sa[-2], sa[-1], sb[-1]
    if len(sb) == 2:
        a2 = reshape_to(A, (prod(sa[:-1]), K)) if len(sa) > 2 else A
        out = nn.dense(a2, transform.transpose(B, (1, 0)))
        batch = sa[:-2]
    else:
        batch = broadcast_dims(sa[:-2], sb[:-2])
        nb = prod(batch)
        a3 = A
        if not same_dims(sa[:-2], batch):
            a3 = transform.broadcast_to(A, batch + [M, K])
        b3 = B
        if not same_dims(sb[:-2], batch):
            b3 = transform.broadcast_to(B, batch + [K, N])
        a3 = reshape_to(a3, (nb, M, K))
        b3 = reshape_to(b3, (nb, K, N))
        out = nn.batch_matmul(a3, b3, transpose_b=False)
    shp = list(batch) + [M, N]
    if squeeze_a:
        shp.pop(-2)
    if squeeze_b:
        shp.pop(-1)
    return reshape_to(out, shp)


@converter("Einsum")
def _einsum(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """One or two operands ('...' and repeated letters, i.e. diagonals, included): sums, a
    transpose and one batch_matmul."""
    eq = attrs["equation"].replace(" ", "")
    lhs, _, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(inputs) or len(terms) > 2:
        raise ctx.fail(f"equation {eq!r}: one or two operands are supported")
    # '...': fresh capital letters for the broadcast axes, aligned on the right
    spare = [ch for ch in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if ch not in eq]
    n_ell = max(
        (len(shape_of(x)) - len(t) + 3 for t, x in zip(terms, inputs) if "..." in t), default=0
    )
    ell = "".join(spare[:n_ell][::-1])
    terms = [t.replace("...", ell[n_ell - (len(shape_of(x)) - len(t) + 3):]) if "..." in t else t
             for t, x in zip(terms, inputs)]
    if "->" not in eq:  # implicit output: '...' axes, then the letters used once, sorted
        letters = "".join(terms)
        out = ell + "".join(sorted(ch for ch in set(letters)
                                   if letters.count(ch) == 1 and ch not in ell))
    out = out.replace("...", ell)
    xs = list(inputs)
    for k, t in enumerate(terms):  # a repeated letter: the diagonal (eye mask, summed)
        while len(set(t)) != len(t):
            ch = next(ch for ch in t if t.count(ch) > 1)
            p, q = t.index(ch), t.index(ch, t.index(ch) + 1)
            sh = shape_of(xs[k])
            eye = np.eye(sh[p], dtype=dtype_of(xs[k])).reshape(
                [sh[p] if ax == p else sh[q] if ax == q else 1 for ax in range(len(sh))])
            xs[k] = _red.sum(tensor.multiply(xs[k], const(eye)), axis=[q])
            t = t[:q] + t[q + 1:]
        terms[k] = t
    dims: dict[str, int] = {}
    for t, x in zip(terms, xs):
        for ch, d in zip(t, shape_of(x)):
            if dims.setdefault(ch, d) != d:
                raise ctx.fail(f"equation {eq!r}: axis {ch!r} has sizes {dims[ch]} and {d} "
                             "(broadcasting a size-1 axis is not supported)")
    for k, t in enumerate(terms):  # letters only in this operand and not in the output: sum
        others = "".join(terms[:k] + terms[k + 1:]) + out
        gone = [j for j, ch in enumerate(t) if ch not in others]
        if gone:
            xs[k] = _red.sum(xs[k], axis=gone)
            terms[k] = "".join(ch for ch in t if ch in others)
    if len(terms) == 1:
        return transform.transpose(xs[0], [terms[0].index(ch) for ch in out])
    ta, tb = terms
    batch = [ch for ch in out if ch in ta and ch in tb]
    contract = [ch for ch in ta if ch in tb and ch not in out]
    fa = [ch for ch in ta if ch not in tb]
    fb = [ch for ch in tb if ch not in ta]
    size = lambda chs: int(np.prod([dims[ch] for ch in chs])) if chs else 1  # noqa: E731
    A = transform.transpose(xs[0], [ta.index(ch) for ch in batch + fa + contract])
    B = transform.transpose(xs[1], [tb.index(ch) for ch in batch + contract + fb])
    A = reshape_to(A, (size(batch), size(fa), size(contract)))
    B = reshape_to(B, (size(batch), size(contract), size(fb)))
    y = nn.batch_matmul(A, B, transpose_b=False)
    order = batch + fa + fb
    y = reshape_to(y, [dims[ch] for ch in order])
    return transform.transpose(y, [order.index(ch) for ch in out])


@converter("Det")
def _det(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    m = s[-1]
    if len(s) < 2 or s[-2] != m:
        raise ctx.fail(f"expected square matrices (..., n, n), got {s}")
    if m > 4:
        raise ctx.fail(f"determinants of {m}x{m} matrices are not supported (n <= 4)")
    r = len(s)

    def entry(row: int, col: int) -> RelayExpr:
        e = transform.strided_slice(x, [row, col], [row + 1, col + 1], axes=[r - 2, r - 1])
        return reshape_to(e, s[:-2])

    total = None
    for perm in itertools.permutations(range(m)):
        inv = sum(1 for p, q in itertools.combinations(perm, 2) if p > q)
        term = None
        for row, col in enumerate(perm):
            e = entry(row, col)
            term = e if term is None else tensor.multiply(term, e)
        if total is None:
            total = term if inv % 2 == 0 else tensor.negative(term)
        else:
            total = tensor.add(total, term) if inv % 2 == 0 else tensor.subtract(total, term)
    return total
