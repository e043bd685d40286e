"""Shared pieces of the PyTorch frontend's converters: the conversion context, the converter
signature and registry (overload name -> converter), the identity ops, dtype names and helpers
that read shapes and dtypes from the fx nodes' ``meta["val"]`` (the fake tensors torch.export
records).

A converter, ``f(ctx: ConvertContext, node: Node, args: Args) -> Output``, takes the conversion
context, the fx node and its arguments bound by the op's schema (a dict name -> value, defaults
filled in, fx nodes replaced by relay expressions, or by lists of them for multi-output nodes)
and returns a relay expression or a list of them (multi-output ops, read back with
``operator.getitem``). Converters are keyed by the full
overload name (``"aten.add.Tensor"``): an overload not registered is reported as unsupported,
never converted by a guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...expr import Call, RelayExpr, const
from ...op import transform
from .symbolic import dim, dims_equal  # noqa: F401  (dims_equal: re-exported)

if TYPE_CHECKING:
    from torch.fx import Node

__all__ = ["CONVERTERS", "IDENTITY_OPS", "PyTorchConvertError", "ConvertContext", "Args", "Output",
           "Converter", "converter", "register", "np_dtype"]


class PyTorchConvertError(ValueError):
    """An argument value a converter does not support (names the node and the op)."""


def np_dtype(tdt: Any) -> str:
    """numpy dtype name of a torch dtype (``torch.float32`` -> ``"float32"``)."""
    name = str(tdt).replace("torch.", "")
    if name not in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                    "bool"):
        raise PyTorchConvertError(f"dtype {tdt} is not supported")
    return name


class ConvertContext:
    """Conversion state: relay values (an expression, or a list for multi-output nodes) and
    torch values known at import time, per fx node."""

    def __init__(self) -> None:
        self.env: dict[Any, Any] = {}
        self.values: dict[Any, Any] = {}

    def expr(self, n: Node) -> Any:
        v = self.env.get(n)
        if v is None:
            raise PyTorchConvertError(f"node {n.name!r} ({n.target}) has no value to use")
        return v

    def resolve(self, v: Any) -> Any:
        import torch.fx

        if isinstance(v, torch.fx.Node):
            return self.expr(v)
        if isinstance(v, (list, tuple)):
            return type(v)(self.resolve(x) for x in v)
        return v

    def resolve_value(self, v: Any) -> Any:
        import torch.fx

        if isinstance(v, torch.fx.Node):
            return self.values[v]
        if isinstance(v, (list, tuple)):
            return type(v)(self.resolve_value(x) for x in v)
        if isinstance(v, dict):
            return {k: self.resolve_value(x) for k, x in v.items()}
        return v


Args = dict[str, Any]  # the node's arguments by schema name (tensors as relay expressions)
Output = RelayExpr | list[Any]  # one expression, or one per output (None: not converted)
Converter = Callable[[ConvertContext, "Node", Args], Output]
CONVERTERS: dict[str, Converter] = {}
# ops that return their (first) input unchanged at inference
IDENTITY_OPS = {"aten.clone.default", "aten.contiguous.default", "aten.alias.default",
                "aten.detach.default", "aten.lift_fresh_copy.default", "aten.dropout.default",
                "aten.feature_dropout.default", "aten.alpha_dropout.default",
                "aten.native_dropout.default"}


def register(name: str, conv: Converter) -> Converter:
    """Register ``conv`` as the converter of the ATen overload ``name`` (one per overload)."""
    if name in CONVERTERS:
        raise ValueError(f"{name} already has a converter")
    CONVERTERS[name] = conv
    return conv


def converter(*names: str) -> Callable[[Converter], Converter]:
    """Decorator: register the function as the converter of each ATen overload in ``names``."""
    def deco(conv: Converter) -> Converter:
        for name in names:
            register(name, conv)
        return conv
    return deco


# ------------------------------------------------------------------------------------------------
# helpers on node metadata
def val(n: Any) -> Any:
    return n.meta["val"]


def val0(n: Any) -> Any:
    """The fake tensor of a node's (first) output."""
    v = n.meta["val"]
    return v[0] if isinstance(v, (list, tuple)) else v


def out_shape(node: Any) -> list[Any]:
    """Shape of a node's (first) output: ints, and tir expressions of the program's symbolic
    dims (``dim``)."""
    return [dim(d) for d in val0(node).shape]


def out_dtype(node: Any) -> str:
    return np_dtype(val0(node).dtype)


def in_meta(node: Any, name: str) -> Any:
    """The fake tensor of a node's tensor argument ``name`` (positional or keyword)."""
    schema = node.target._schema
    for k, arg in enumerate(schema.arguments):
        if arg.name == name:
            src = node.args[k] if k < len(node.args) else node.kwargs.get(name)
            return src.meta["val"] if hasattr(src, "meta") else src
    raise KeyError(name)


def in_shape(node: Any, name: str = "self") -> list[Any]:
    """Shape of the node's tensor argument ``name`` (ints and symbolic dims, as ``out_shape``)."""
    return [dim(d) for d in in_meta(node, name).shape]


def in_dtype(node: Any, name: str = "self") -> str:
    return np_dtype(in_meta(node, name).dtype)


def prod_dims(dims: Any) -> Any:
    """The product of sizes (ints, or tir expressions of symbolic dims); 1 when empty."""
    out: Any = 1
    for d in dims:
        out = out * d
    return out


def broadcast_dims(*shapes: Any) -> list[Any]:
    """numpy's broadcast of shapes that may hold symbolic dims (torch checked on export that
    they broadcast: a symbolic dim against a static one > 1 is that size)."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        ds = [s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0]
        big = [d for d in ds if not (isinstance(d, int) and d == 1)]
        static = [d for d in big if isinstance(d, int)]
        out.append(static[0] if static else big[0] if big else 1)
    return out


def scalar(v: Any, dtype: str) -> RelayExpr:
    """``v`` as a 0-d relay tensor; a symbolic size (a tir expression over the program's
    ``Any`` dims) as its run-time value: the sum of a run-time-sized vector of ones."""
    from ....tir.expr import PrimExpr

    if isinstance(v, PrimExpr):
        from ...op import reduce, tensor

        return reduce.sum(tensor.full(const(np.asarray(1, dtype=dtype)), (v,), dtype))
    return const(np.asarray(v, dtype=dtype))


def cast_to(x: RelayExpr, frm: str, to: str) -> RelayExpr:
    """``x`` (of dtype ``frm``) as dtype ``to``; no cast when they agree."""
    return x if frm == to else transform.cast(x, to)


def norm_axis(ax: int, rank: int) -> int:
    return ax + rank if ax < 0 else ax


def fail(node: Any, msg: str) -> PyTorchConvertError:
    return PyTorchConvertError(f"{node.target} node {node.name!r}: {msg}")


def reshape_to(x: RelayExpr, shape: Any) -> RelayExpr:
    """``reshape(x, shape)``, reshaping the source of ``x`` when ``x`` is itself a reshape (views
    of views stay one reshape)."""
    while isinstance(x, Call) and getattr(x.op, "name", None) == "reshape":
        x = x.args[0]
    return transform.reshape(x, shape, allowzero=True)  # literal shapes: 0 is an empty axis


def split_sizes(x: RelayExpr, sizes: list[int], ax: int) -> list[RelayExpr]:
    """``x`` cut along ``ax`` into pieces of the given sizes."""
    if len(sizes) == 1:
        return [x]
    idx = [int(v) for v in np.cumsum(sizes)[:-1]]
    parts = transform.split(x, idx, axis=ax)
    return [parts[k] for k in range(len(sizes))]
