"""Matrix products: ``dense`` (``x @ W^T + bias``), ``matmul`` (optional transposes) and
``batch_matmul`` (batch broadcast when one side has batch 1)."""

from __future__ import annotations

from typing import Any

from ...te import Tensor, compute, reduce_axis
from ...te import sum as te_sum
from .conv2d import _cast
from .utils import check_rank, infer_out_dtype

__all__ = ["dense", "matmul", "batch_matmul", "add_bias", "reduction_checks"]


def _same(a: Any, b: Any) -> bool:
    try:
        return int(a) == int(b)
    except TypeError:
        return a is b or str(a) == str(b)


def reduction_checks(ka: Any, kb: Any, op: str, shape_a: Any, shape_b: Any) -> dict:
    """The compute attributes for reduction extents ``ka`` (A's) and ``kb`` (B's): none when
    they are the same size; when they are sizes known only at run time that nothing proves
    equal (``max(any, seq)`` against another ``any``, as broadcasts of relay.Any give), a
    precondition the kernel asserts before it computes (te/schedule_ops.py), as topi.reshape
    does for its element counts; two different constants raise ValueError."""
    from ...arith import can_prove
    from ...tir.expr import IntImm, convert

    if _same(ka, kb):
        return {}
    ca, cb = convert(ka), convert(kb)
    if (isinstance(ca, IntImm) and isinstance(cb, IntImm)) or can_prove(ca != cb):
        raise ValueError(f"{op}: reduction extents differ: A {tuple(shape_a)} gives {ka}, "
                         f"B {tuple(shape_b)} gives {kb}")
    if can_prove(ca == cb):
        return {}
    msg = (f"{op}: the reduction extents differ at these sizes: A {tuple(shape_a)} gives {ka}, "
           f"B {tuple(shape_b)} gives {kb}")
    return {"preconditions": ((ca == cb, msg),)}


def add_bias(out: Tensor, bias: Tensor | None, op: str) -> Tensor:
    """``out[..., j] + bias[j]`` as a broadcast stage (or ``out`` when no bias)."""
    if bias is None:
        return out
    check_rank(bias, 1, op, "bias")
    if not _same(bias.shape[0], out.shape[-1]):
        raise ValueError(f"{op}: bias has {bias.shape[0]} elements, the output has "
                         f"{out.shape[-1]} columns")
    return compute(out.shape, lambda *i: out[i] + _cast(bias[i[-1]], out.dtype),
                   name=f"{op}_bias", tag="broadcast")


def matmul(tensor_a: Tensor, tensor_b: Tensor, bias: Tensor | None = None,
           out_dtype: str | None = None, transpose_a: bool = False, transpose_b: bool = False,
           _op: str = "matmul") -> Tensor:
    """``op(A) @ op(B) (+ bias)``, ``op`` the optional transpose (2-D operands)."""
    check_rank(tensor_a, 2, _op, "tensor_a")
    check_rank(tensor_b, 2, _op, "tensor_b")
    m, ka = (tensor_a.shape[1], tensor_a.shape[0]) if transpose_a else tensor_a.shape
    kb, n = (tensor_b.shape[1], tensor_b.shape[0]) if transpose_b else tensor_b.shape
    checks = reduction_checks(ka, kb, _op, tensor_a.shape, tensor_b.shape)
    out_dtype = infer_out_dtype(out_dtype, tensor_a)
    k = reduce_axis((0, ka), name="k")

    def fa(i: Any) -> Any:
        return _cast(tensor_a[k, i] if transpose_a else tensor_a[i, k], out_dtype)

    def fb(j: Any) -> Any:
        return _cast(tensor_b[j, k] if transpose_b else tensor_b[k, j], out_dtype)

    out = compute((m, n), lambda i, j: te_sum(fa(i) * fb(j), axis=k), name=f"T_{_op}",
                  tag=_op, attrs={"transpose_a": transpose_a, "transpose_b": transpose_b,
                                  **checks})
    return add_bias(out, bias, _op)


def dense(data: Tensor, weight: Tensor, bias: Tensor | None = None,
          out_dtype: str | None = None) -> Tensor:
    """``data[M, K] @ weight[N, K]^T (+ bias[N])`` -> ``[M, N]`` (tag "dense")."""
    if len(data.shape) == 2 and len(weight.shape) == 2:
        try:
            reduction_checks(data.shape[1], weight.shape[1], "dense", data.shape, weight.shape)
        except ValueError:
            raise ValueError(f"dense: data has {data.shape[1]} input features, weight "
                             f"{tuple(weight.shape)} expects {weight.shape[1]}") from None
    return matmul(data, weight, bias, out_dtype, False, True, _op="dense")


def batch_matmul(tensor_a: Tensor, tensor_b: Tensor, oshape: Any = None,
                 out_dtype: str | None = None, transpose_a: bool = False,
                 transpose_b: bool = True) -> Tensor:
    """``A[b] @ B[b]`` over a batch (TVM's default ``transpose_b=True``: B is ``[b, N, K]``);
    a batch of 1 on either side broadcasts."""
    op = "batch_matmul"
    check_rank(tensor_a, 3, op, "tensor_a")
    check_rank(tensor_b, 3, op, "tensor_b")
    ba, bb = tensor_a.shape[0], tensor_b.shape[0]
    m, ka = (tensor_a.shape[2], tensor_a.shape[1]) if transpose_a else tensor_a.shape[1:]
    kb, n = (tensor_b.shape[2], tensor_b.shape[1]) if transpose_b else tensor_b.shape[1:]
    checks = reduction_checks(ka, kb, op, tensor_a.shape, tensor_b.shape)
    a1, b1 = _same(ba, 1), _same(bb, 1)
    ra, rb = (bool(getattr(d, "broadcast_at_run_time", False)) for d in (ba, bb))
    if not (a1 or b1 or _same(ba, bb) or ra or rb):
        raise ValueError(f"{op}: batch sizes {ba} and {bb} differ (and neither is 1)")
    batch = bb if a1 else ba
    if not (a1 or b1 or _same(ba, bb)):
        # relay.Any batch sizes: 1 or the other's at run time (checked before the kernel
        # runs, relay/size_checks.py); a side of 1 is read at batch 0
        from ...tir.op import if_then_else
        from ...tir.op import max as tmax

        batch = tmax(ba, bb) if ra and rb else bb if ra else ba
        a1 = (lambda b: if_then_else(ba == 1, 0, b)) if ra else False  # type: ignore[assignment]
        b1 = (lambda b: if_then_else(bb == 1, 0, b)) if rb else False  # type: ignore[assignment]
    if oshape is not None and [str(v) for v in oshape] != [str(v) for v in (batch, m, n)]:
        raise ValueError(f"{op}: oshape {tuple(oshape)} != computed {(batch, m, n)}")
    out_dtype = infer_out_dtype(out_dtype, tensor_a)
    k = reduce_axis((0, ka), name="k")

    def fa(b: Any, i: Any) -> Any:
        bi = a1(b) if callable(a1) else 0 if a1 else b
        return _cast(tensor_a[bi, k, i] if transpose_a else tensor_a[bi, i, k], out_dtype)

    def fb(b: Any, j: Any) -> Any:
        bi = b1(b) if callable(b1) else 0 if b1 else b
        return _cast(tensor_b[bi, j, k] if transpose_b else tensor_b[bi, k, j], out_dtype)

    return compute((batch, m, n), lambda b, i, j: te_sum(fa(b, i) * fb(b, j), axis=k),
                   name="T_batch_matmul", tag=op,
                   attrs={"transpose_a": transpose_a, "transpose_b": transpose_b, **checks})
