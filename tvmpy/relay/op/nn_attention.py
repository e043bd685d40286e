"""``nn.attention``: scaled dot-product attention over a batch of heads,
``softmax(q @ k^T * scale + bias, axis=-1) @ v`` as one operator (``q [B, M, D]``, ``k [B, N, D]``
or ``[B, D, N]`` with ``k_transposed``, ``v [B, N, E]``, an optional 4-D ``bias`` broadcast to
``[B // heads, heads, M, N]``). The graph pass ``FuseAttention`` (relay/transform/
fuse_attention.py) makes it of the batch_matmul -> scale / bias -> softmax -> batch_matmul chain
that ONNX exports of transformers contain. OPAQUE: its kernel (topi.nn.attention, scheduled per
block of query rows on x86) is its own; nothing fuses after it. Its injective producers (the
head splits ``reshape -> transpose -> reshape`` of the Q/K/V projections, a scale, a cast, a
mask's broadcast) fuse into it (``TFuseInjectiveInputs``, FuseOps phase 1): the kernel reads
the projections through those views (its schedule inlines them) instead of a copied
``[batch * heads, rows, head size]`` tensor."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr
from ..ty import TensorType, Type
from ._rel import fail, tensor_arg
from .registry import OpPattern, make_call, register_op, register_op_attr

__all__ = ["attention", "attention_np"]


def _attention_rel(arg_types: list[Type], attrs: Any) -> Type:
    from ...topi.nn.attention import attention_shapes

    q = tensor_arg(arg_types[0], "q")
    k = tensor_arg(arg_types[1], "k")
    v = tensor_arg(arg_types[2], "v")
    bias = tensor_arg(arg_types[3], "bias") if len(arg_types) > 3 else None
    for name, t in (("k", k), ("v", v), ("bias", bias)):
        if t is not None and t.dtype != q.dtype:
            fail(f"attention: {name} is {t.dtype}, q is {q.dtype}")
    if not q.dtype.startswith("float"):
        fail(f"attention: needs floating-point inputs, got {q.dtype}")
    try:
        b, m, _, _, e = attention_shapes(tuple(q.shape), tuple(k.shape), tuple(v.shape),
                                         None if bias is None else tuple(bias.shape),
                                         bool(attrs.k_transposed), int(attrs.heads))
    except ValueError as err:
        fail(str(err))
    return TensorType([b, m, e], q.dtype)


def attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None = None,
                 scale: float = 1.0, k_transposed: bool = False, heads: int = 1) -> np.ndarray:
    """The numpy meaning (the interpreter's FNumpy; tests' reference)."""
    kt = k if k_transposed else np.swapaxes(k, 1, 2)
    s = np.matmul(q, kt) * np.asarray(scale, q.dtype)
    if bias is not None:
        b = q.shape[0]
        s = (s.reshape(b // heads, heads, *s.shape[1:]) + bias).reshape(s.shape)
    s = s - s.max(-1, keepdims=True)
    e = np.exp(s)
    return np.matmul(e / e.sum(-1, keepdims=True), v).astype(q.dtype)


register_op("nn.attention", _attention_rel, OpPattern.OPAQUE, -1,
            {"scale": 1.0, "k_transposed": False, "heads": 1})
register_op_attr("nn.attention", "TFuseInjectiveInputs", True)
register_op_attr("nn.attention", "FNumpy", lambda attrs, ins, t: attention_np(
    *ins[:3], ins[3] if len(ins) > 3 else None, float(attrs.scale), bool(attrs.k_transposed),
    int(attrs.heads)))


def attention(q: RelayExpr, k: RelayExpr, v: RelayExpr, bias: RelayExpr | None = None,
              scale: float = 1.0, k_transposed: bool = False, heads: int = 1) -> RelayExpr:
    """``softmax(q @ k^T * scale + bias) @ v`` (see the module docstring for the shapes)."""
    args = [q, k, v] if bias is None else [q, k, v, bias]
    return make_call("nn.attention", args, {"scale": float(scale),
                                            "k_transposed": bool(k_transposed),
                                            "heads": int(heads)})
