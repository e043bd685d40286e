"""The ONNX converter registry and the one converter signature.

A converter turns one ONNX node into relay::

    @converter("Relu")
    def _relu(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        return nn.relu(inputs[0])

``inputs`` are the node's inputs as relay expressions (``None`` for an omitted optional input),
``attrs`` its attributes by name (strings decoded), ``names`` its input tensor names (to read
shape-like inputs known at import time: ``ctx.value(names[1], "shape")``), ``ctx.node`` the
NodeProto itself. It returns one expression, or a list for a node with several outputs. The
registry is keyed by operator type (default domain); importing a converter module registers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...expr import RelayExpr
from .context import ImportContext

__all__ = ["Inputs", "Attrs", "Names", "Output", "Converter", "CONVERTERS", "converter",
           "register"]

Inputs = list[RelayExpr | None]
Attrs = dict[str, Any]
Names = list[str]
Output = RelayExpr | list[RelayExpr]
Converter = Callable[[ImportContext, Inputs, Attrs, Names], Output]

CONVERTERS: dict[str, Converter] = {}


def register(op_type: str, conv: Converter) -> Converter:
    """Register ``conv`` as the converter of ``op_type`` (one converter per operator type)."""
    if op_type in CONVERTERS:
        raise ValueError(f"ONNX operator {op_type} already has a converter")
    CONVERTERS[op_type] = conv
    return conv


def converter(*op_types: str) -> Callable[[Converter], Converter]:
    """Decorator: register the function as the converter of each of ``op_types``."""
    def deco(conv: Converter) -> Converter:
        for op_type in op_types:
            register(op_type, conv)
        return conv
    return deco
