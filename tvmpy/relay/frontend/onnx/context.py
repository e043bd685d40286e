"""The ONNX importer's conversion state and the helpers every converter uses.

``ImportContext`` maps each ONNX tensor name to its relay expression and, when it is known at
import time, its numpy value; it knows the node being converted, so errors name it
(``ctx.fail``) and shape-like inputs read as constants (``ctx.value``) say which tensor they
needed (``OnnxConstantInputError``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import Constant, RelayExpr, const
from ...type_infer import infer_type

__all__ = ["EMPTY_OPTIONAL", "RuntimeOptional", "OnnxConvertError", "OnnxConstantInputError", "ImportContext", "shape_of", "dtype_of",
           "np_dtype", "scalar_like", "typed_const", "check_2d"]


class OnnxConvertError(ValueError):
    """An attribute or input value a converter does not support (names node and attribute)."""


class OnnxConstantInputError(OnnxConvertError):
    """A shape-like input (Reshape's shape, Slice's starts, ...) is not known at import time.

    ``tensors`` names the ONNX tensors whose values were needed (for a node inside an expanded
    function body: the outer tensors it is computed from): a runtime that knows the graph
    inputs' values (the ONNX backend, ``tvmpy.contrib.onnx_backend``) binds the graph inputs it
    depends on as constants and imports again."""

    def __init__(self, msg: str, *tensors: str):
        super().__init__(msg)
        self.tensors = tensors


class _EmptyOptional:
    """The value of an ONNX optional known at import time to hold nothing (an optional that
    holds a value is that value: whether one is present is fixed when the graph is imported)."""

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"


EMPTY_OPTIONAL: Any = _EmptyOptional()


class RuntimeOptional:
    """An ONNX optional whose presence is known only at run time (an If that yields a value in
    one branch and an empty optional in the other): ``has`` (a bool scalar) and ``value`` (the
    value when present, a placeholder of its type when not). Read by OptionalHasElement,
    OptionalGetElement and Identity; a graph output of this kind is returned as the pair
    ``(has, value)`` and the ONNX backend gives None or the value."""

    __slots__ = ("has", "value")

    def __init__(self, has: RelayExpr, value: RelayExpr):
        self.has = has
        self.value = value

    def __repr__(self) -> str:
        return "RuntimeOptional(...)"


class ImportContext:
    """Conversion state: relay expressions and known numpy values per ONNX tensor name."""

    def __init__(self, opset: int, freeze: bool):
        self.opset = opset
        self.freeze = freeze
        self.exprs: dict[str, RelayExpr] = {}
        self.values: dict[str, np.ndarray] = {}
        self.node: Any = None  # the NodeProto being converted
        self.expansions = 0  # function bodies expanded so far (unique name prefixes)
        self.low_precision = False  # the model has bfloat16/float8/int4... tensors
        self.dynamic_inputs = True  # run-time shape-like inputs give relay.op.dyn operators
        from ...module import IRModule

        self.mod = IRModule()  # the global functions made so far (Loop bodies), for typing

    def where(self) -> str:
        n = self.node
        return f"{n.op_type} node {n.name or '(unnamed)'!r}"

    def fail(self, msg: str) -> OnnxConvertError:
        return OnnxConvertError(f"{self.where()}: {msg}")

    def value(self, name: str, what: str) -> np.ndarray:
        if name not in self.values:
            raise OnnxConstantInputError(
                f"{self.where()}: input {what} ({name!r}) must be a constant known at import "
                "time", name)
        return self.values[name]

    def bind(self, name: str, e: RelayExpr) -> None:
        """``name`` is ``e`` from here on (its value known when ``e`` is a Constant)."""
        self.exprs[name] = e
        if isinstance(e, Constant):
            self.values[name] = e.data.numpy()
        else:
            self.values.pop(name, None)


def shape_of(e: RelayExpr) -> list[Any]:
    """The shape of ``e``: ints, and its symbolic dimensions (``relay.Any``) as they are."""
    return [d if not isinstance(d, (int, np.integer)) else int(d)
            for d in infer_type(e).checked_type.shape]


def dtype_of(e: RelayExpr) -> str:
    return str(infer_type(e).checked_type.dtype)


def np_dtype(onnx_type: int) -> str:
    """The numpy dtype name of an ONNX TensorProto data type."""
    from onnx import helper

    return str(np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type)))


def typed_const(v: Any, dtype: str) -> Constant:
    return const(np.asarray(v, dtype=dtype))


def scalar_like(v: float, like: RelayExpr) -> Constant:
    """A scalar constant of ``like``'s dtype."""
    return typed_const(v, dtype_of(like))


def check_2d(ctx: ImportContext, x: RelayExpr, what: str = "data") -> list[int]:
    """The shape of ``x``, which must be 4-D (NCHW)."""
    s = shape_of(x)
    if len(s) != 4:
        raise ctx.fail(f"only 2-D (NCHW, 4-D {what}) is supported, got shape {s}")
    return s
