"""Scaled dot-product attention as one operator: ``softmax(q @ k^T * scale + bias) @ v`` over a
batch of heads. Stages: ``T_attn_kt`` (``k`` as ``[B, D, N]``, a copy when ``k`` comes as
``[B, N, D]`` or is computed by a fused producer) -> ``T_attn_scores_acc`` (the products, a reduction over D) ->
``T_attn_scores`` (scale and bias) -> ``T_attn_max`` -> ``T_attn_exp`` -> ``T_attn_sum`` ->
``T_attn_pv`` (unnormalized ``exp @ v``) -> ``T_attn_out`` (divided by the row's sum, once per
output rather than once per score). The x86 schedule computes the score stages per block of
query rows (topi/x86/attention.py): the ``[B, M, N]`` scores never exist whole."""

from __future__ import annotations

from typing import Any

from ...te import ComputeOp, Tensor, compute, reduce_axis
from ...te import max as te_max
from ...te import sum as te_sum
from ...tir.expr import const
from .softmax import _exp_nonpositive

__all__ = ["attention", "attention_shapes"]


def _static(d: Any) -> Any:
    v = getattr(d, "value", d)
    return v if isinstance(v, int) else None


def attention_shapes(q: Any, k: Any, v: Any, bias: Any, k_transposed: bool,
                     heads: int) -> tuple[Any, Any, Any, Any, Any]:
    """(B, M, N, D, E) of an attention call; raises ValueError naming what does not fit.
    ``q [B, M, D]``, ``k [B, N, D]`` (``[B, D, N]`` with ``k_transposed``), ``v [B, N, E]``;
    ``bias`` (or None) 4-D, broadcastable to ``[B // heads, heads, M, N]``. Works on shapes
    (tuples of ints / PrimExprs) so the relay type relation shares it."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t) != 3:
            raise ValueError(f"attention: {name} must be 3-D [batch, rows, features], got "
                             f"{len(t)}-D {tuple(t)}")
    b, m, d = q
    n, d2 = (k[2], k[1]) if k_transposed else (k[1], k[2])
    n2, e = v[1], v[2]

    def differ(a: Any, c: Any) -> bool:
        a, c = _static(a), _static(c)
        return a is not None and c is not None and a != c

    for what, a, c in (("batch of q and k", b, k[0]), ("batch of q and v", b, v[0]),
                       ("feature size of q and k", d, d2), ("key count of k and v", n, n2)):
        if differ(a, c):
            raise ValueError(f"attention: {what} differ ({a} vs {c}); q {tuple(q)}, k "
                             f"{tuple(k)}{' (transposed)' if k_transposed else ''}, v {tuple(v)}")
    if not isinstance(heads, int) or heads < 1:
        raise ValueError(f"attention: heads must be a positive int, got {heads!r}")
    bs = _static(b)
    if bs is not None and bs % heads:
        raise ValueError(f"attention: batch {bs} is not a multiple of heads={heads}")
    if bias is not None:
        if len(bias) != 4:
            raise ValueError(f"attention: bias must be 4-D (broadcast to [batch/heads, heads, "
                             f"rows, keys]), got {tuple(bias)}")
        want = (bs // heads if bs is not None else None, heads, _static(m), _static(n))
        for ax, (have, full) in enumerate(zip(bias, want)):
            hv = _static(have)
            if hv is not None and hv != 1 and full is not None and hv != full:
                raise ValueError(f"attention: bias {tuple(bias)} does not broadcast to "
                                 f"[{want[0]}, {heads}, {m}, {n}] (axis {ax})")
    return b, m, n, d, e


def attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None,
              scale: float = 1.0, k_transposed: bool = False, heads: int = 1) -> Tensor:
    """``softmax(q @ k^T * scale + bias, axis=-1) @ v`` per batch entry (tag
    "attention_output"). ``bias`` broadcasts over ``[B // heads, heads, M, N]`` (masks,
    relative position biases: batch entry ``b`` is group ``b // heads``, head ``b % heads``).
    Rows of ``exp`` below float32's normal range flush to 0 (``softmax``'s
    ``_exp_nonpositive``); a row whose scores are all ``-inf`` gives NaN, as softmax does."""
    _, m, n, dd, e = attention_shapes(q.shape, k.shape, v.shape,
                                      None if bias is None else bias.shape, k_transposed, heads)
    dtype = q.dtype
    if k.dtype != dtype or v.dtype != dtype or (bias is not None and bias.dtype != dtype):
        raise ValueError(f"attention: dtypes differ: q {dtype}, k {k.dtype}, v {v.dtype}"
                         + ("" if bias is None else f", bias {bias.dtype}"))
    b = q.shape[0]
    if k_transposed and not isinstance(k.op, ComputeOp):
        kt = k
    elif k_transposed:  # a fused producer's view (a transpose): read once into [B, D, N]
        kt = compute((b, dd, n), lambda bb, x, j: k[bb, x, j], name="T_attn_kt",
                     tag="attention_kt")
    else:
        kt = compute((b, dd, n), lambda bb, x, j: k[bb, j, x], name="T_attn_kt",
                     tag="attention_kt")
    rd = reduce_axis((0, dd), name="d")
    acc = compute((b, m, n), lambda bb, i, j: te_sum(q[bb, i, rd] * kt[bb, rd, j], axis=rd),
                  name="T_attn_scores_acc", tag="attention_scores_acc")
    sc = const(float(scale), dtype)
    if bias is not None:
        one = [_static(x) == 1 for x in bias.shape]

        def bias_at(bb: Any, i: Any, j: Any) -> Any:
            idx = (bb // heads, bb % heads, i, j)
            return bias[tuple(0 if o else x for o, x in zip(one, idx))]

        scores = compute((b, m, n), lambda bb, i, j: acc[bb, i, j] * sc + bias_at(bb, i, j),
                         name="T_attn_scores", tag="attention_scores")
    else:
        scores = compute((b, m, n), lambda bb, i, j: acc[bb, i, j] * sc,
                         name="T_attn_scores", tag="attention_scores")
    k1 = reduce_axis((0, n), name="j")
    mx = compute((b, m), lambda bb, i: te_max(scores[bb, i, k1], axis=k1), name="T_attn_max",
                 tag="attention_max")
    ex = compute((b, m, n), lambda bb, i, j: _exp_nonpositive(scores[bb, i, j] - mx[bb, i]),
                 name="T_attn_exp", tag="attention_exp")
    k2 = reduce_axis((0, n), name="j")
    sm = compute((b, m), lambda bb, i: te_sum(ex[bb, i, k2], axis=k2), name="T_attn_sum",
                 tag="attention_sum")
    k3 = reduce_axis((0, n), name="j")
    pv = compute((b, m, e), lambda bb, i, c: te_sum(ex[bb, i, k3] * v[bb, k3, c], axis=k3),
                 name="T_attn_pv", tag="attention_pv")
    inv = compute((b, m), lambda bb, i: const(1.0, dtype) / sm[bb, i], name="T_attn_inv",
                  tag="attention_inv")
    return compute((b, m, e), lambda bb, i, c: pv[bb, i, c] * inv[bb, i], name="T_attn_out",
                   tag="attention_output",
                   attrs={"heads": heads, "k_transposed": int(bool(k_transposed))})

