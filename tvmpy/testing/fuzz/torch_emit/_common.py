"""What the torch translations share: the node view (``Node``), the registry (``EMITTERS``,
``_emit``), ``Unsupported``, and the dtype / axis / padding conversions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

Fn = Callable[..., Any]  # runtime tensors -> a tensor or a tuple of tensors


class Unsupported(Exception):
    """A node has no faithful torch translation."""


class Node:
    """One ONNX node with what its translation needs: attributes, the static shapes and
    dtypes of its inputs and outputs, the values of initializer inputs, and extra constant
    operands the translation adds (``add_const``)."""

    def __init__(self, proto: Any, shapes: dict[str, tuple[int, ...]],
                 dtypes: dict[str, np.dtype], inits: dict[str, np.ndarray]) -> None:
        from onnx import helper

        self.op = proto.op_type
        self.name = proto.name or proto.op_type
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        self._shapes, self._dtypes, self._inits = shapes, dtypes, inits
        self.extra: list[np.ndarray] = []  # constant operands appended after the inputs

    def attr(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name, default)
        if isinstance(v, bytes):
            return v.decode()
        return v

    def has(self, k: int) -> bool:
        return k < len(self.inputs) and self.inputs[k] != ""

    def shape(self, k: int) -> tuple[int, ...]:
        return self._lookup(self._shapes, self.inputs[k], "shape")

    def dtype(self, k: int) -> np.dtype:
        return self._lookup(self._dtypes, self.inputs[k], "dtype")

    def out_shape(self, k: int = 0) -> tuple[int, ...]:
        return self._lookup(self._shapes, self.outputs[k], "shape")

    def out_dtype(self, k: int = 0) -> np.dtype:
        return self._lookup(self._dtypes, self.outputs[k], "dtype")

    def _lookup(self, table: dict, name: str, what: str) -> Any:
        if name not in table:
            raise Unsupported(f"{self.name}: no static {what} for {name!r}")
        return table[name]

    def const(self, k: int) -> np.ndarray | None:
        """The value of input ``k`` when it is an initializer (None when absent)."""
        if not self.has(k):
            return None
        v = self._inits.get(self.inputs[k])
        if v is None:
            raise Unsupported(f"{self.name}: input {k} ({self.inputs[k]!r}) must be an "
                              "initializer")
        return v

    def ints(self, k: int) -> list[int] | None:
        v = self.const(k)
        return None if v is None else [int(x) for x in np.asarray(v).reshape(-1)]

    def add_const(self, value: np.ndarray) -> int:
        """Register a constant operand (a buffer): the translation's fn receives it after the
        node's inputs; returns its position among fn's positional arguments."""
        self.extra.append(np.ascontiguousarray(value))
        return len(self.inputs) + len(self.extra) - 1

    def refuse(self, why: str) -> Unsupported:
        return Unsupported(f"{self.name}: {why}")


EMITTERS: dict[str, Callable[[Node], Fn]] = {}


def _emit(*ops: str) -> Callable[[Callable[[Node], Fn]], Callable[[Node], Fn]]:
    def deco(fn: Callable[[Node], Fn]) -> Callable[[Node], Fn]:
        for op in ops:
            EMITTERS[op] = fn
        return fn
    return deco


_TORCH_DTYPES = {np.dtype(k): v for k, v in [
    ("float32", torch.float32), ("float16", torch.float16), ("float64", torch.float64),
    ("int8", torch.int8), ("int16", torch.int16), ("int32", torch.int32),
    ("int64", torch.int64), ("uint8", torch.uint8), ("bool", torch.bool)]}


def _tdt(dt: Any) -> torch.dtype:
    dt = np.dtype(dt)
    if dt not in _TORCH_DTYPES:
        raise Unsupported(f"dtype {dt}")
    return _TORCH_DTYPES[dt]


def _onnx_dt(elem_type: int) -> np.dtype:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _norm(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _torch_pads(begins: Sequence[int], ends: Sequence[int]) -> list[int]:
    """ONNX's [begins..., ends...] over the last len(begins) dims as F.pad's list (last dim
    first)."""
    out: list[int] = []
    for b, e in zip(reversed(list(begins)), reversed(list(ends))):
        out += [int(b), int(e)]
    return out
