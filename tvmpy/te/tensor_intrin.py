"""Tensor intrinsics: a hardware (or hand-written) operation described by a compute, together
with the statements that perform it (TVM's ``te.decl_tensor_intrin``).

The compute (``op``) says *what* the intrinsic computes on small placeholders, e.g. an 8x8x8 gemm
update ``C[i, j] += A[i, k] * B[j, k]``. ``fintrin(ins, outs)`` receives one Buffer per input and
output tensor (from ``binds``, or compact buffers with a symbolic element offset) and returns the
statements that perform it: one statement (``body``), or a tuple ``(body, reset, update)`` where

- ``body`` computes the outputs from scratch (reduction included),
- ``reset`` sets the outputs to the reduction's identity,
- ``update`` accumulates into the outputs.

Any of the three may be None; expressions (e.g. a bare ``call_extern``) are wrapped in
``Evaluate``. Buffers declared with symbolic ``elem_offset`` / ``strides`` (``te.var``) are bound to
the real buffers' offsets and strides when the intrinsic is matched by ``Stage.tensorize``
(:mod:`tvmpy.te.tensorize`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..tir import expr as E
from ..tir import stmt as S
from ..tir.buffer import Buffer, decl_buffer
from ..tir.expr import Var
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

__all__ = ["TensorIntrin", "decl_tensor_intrin"]


class TensorIntrin:
    """A declared tensor intrinsic. ``inputs``: the placeholder tensors of ``op`` (in
    ``op.input_tensors`` order); ``buffers``: their Buffers then the outputs'; ``body``, ``reset``,
    ``update``: the statements from ``fintrin`` (None when not given)."""

    __slots__ = ("name", "op", "inputs", "buffers", "body", "reset", "update", "scalar_params")

    def __init__(self, name: str, op: ComputeOp, inputs: Sequence[Tensor],
                 buffers: Sequence[Buffer], body: S.Stmt | None, reset: S.Stmt | None,
                 update: S.Stmt | None, scalar_params: Sequence[Var] = ()):
        self.name = name
        self.op = op
        self.inputs = tuple(inputs)
        self.buffers = tuple(buffers)
        self.body, self.reset, self.update = body, reset, update
        self.scalar_params = tuple(scalar_params)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(self.op.output(k) for k in range(self.op.num_outputs))

    def buffer_of(self, t: Tensor) -> Buffer:
        for k, x in enumerate((*self.inputs, *self.outputs)):
            if x == t:
                return self.buffers[k]
        raise KeyError(f"{t.name} is not a tensor of intrinsic {self.name}")

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name!r}, op={self.op.name})"


def _as_stmt(x: Any, what: str, name: str) -> S.Stmt | None:
    if x is None:
        return None
    if isinstance(x, S.Stmt):
        return x
    x = E.convert(x)
    if isinstance(x, E.PrimExpr):
        return S.Evaluate(x)
    raise TypeError(f"decl_tensor_intrin {name}: {what} must be a Stmt or an expression, got "
                    f"{type(x).__name__}")


def _check_buffer(buf: Any, t: Tensor, name: str) -> Buffer:
    if not isinstance(buf, Buffer):
        raise TypeError(f"decl_tensor_intrin {name}: binds[{t.name}] must be a tir.Buffer "
                        f"(tvm.tir.decl_buffer), got {type(buf).__name__}")
    if buf.dtype != t.dtype:
        raise TypeError(f"decl_tensor_intrin {name}: buffer {buf.name} has dtype {buf.dtype} but "
                        f"tensor {t.name} is {t.dtype}")
    if len(buf.shape) != len(t.shape):
        raise ValueError(f"decl_tensor_intrin {name}: buffer {buf.name} has {len(buf.shape)} "
                         f"dimensions but tensor {t.name} has {len(t.shape)}")
    for d, (a, b) in enumerate(zip(buf.shape, t.shape)):
        ca, cb = E.const_value(a), E.const_value(b)
        if ca is not None and cb is not None and ca != cb:
            raise ValueError(f"decl_tensor_intrin {name}: buffer {buf.name} has extent {ca} in "
                             f"dimension {d} but tensor {t.name} has {cb}")
    if buf.strides and len(buf.strides) != len(buf.shape):
        raise ValueError(f"decl_tensor_intrin {name}: buffer {buf.name} has {len(buf.strides)} "
                         f"strides for {len(buf.shape)} dimensions")
    return buf


def decl_tensor_intrin(op: Operation | Tensor, fintrin: Callable[..., Any],
                       name: str = "tensor_intrin", binds: dict | None = None,
                       scalar_params: Sequence[Var] | None = None,
                       default_buffer_params: dict | None = None) -> TensorIntrin:
    """Declare a tensor intrinsic computing ``op`` and performed by ``fintrin(ins, outs)``
    (``fintrin(ins, outs, scalar_params)`` when ``scalar_params`` are given).
    ``default_buffer_params``: keyword arguments of ``tir.decl_buffer`` for the buffers of the
    tensors not in ``binds`` (TVM 0.8's, e.g. ``{"offset_factor": 16}``; the default here is
    ``offset_factor=1``: any offset)."""
    if isinstance(op, Tensor):
        op = op.op
    if not isinstance(op, ComputeOp):
        raise TypeError(f"decl_tensor_intrin {name}: op must be a te.compute operation, got "
                        f"{type(op).__name__}")
    if not callable(fintrin):
        raise TypeError(f"decl_tensor_intrin {name}: fintrin must be a function (ins, outs) -> "
                        f"statements, got {type(fintrin).__name__} {fintrin!r}")
    inputs = op.input_tensors
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"decl_tensor_intrin {name}: input {t.name} of {op.name} must be a "
                            "te.placeholder (the intrinsic describes one operation)")
    for iv in (*op.axis, *op.reduce_axis):
        dom = iv.known_dom
        if E.const_value(dom.extent) is None or E.const_value(dom.min) != 0:
            raise ValueError(f"decl_tensor_intrin {name}: axis {iv.var.name} must have a constant "
                             f"extent and start at 0, got {dom.min}..+{dom.extent}")
    binds = dict(binds or {})
    tensors = [*inputs, *(op.output(k) for k in range(op.num_outputs))]
    for key in binds:
        if not any(key == t for t in tensors):
            raise ValueError(f"decl_tensor_intrin {name}: binds has tensor {getattr(key, 'name', key)}"
                             f" which is not an input or output of {op.name}")
    buf_params = {"offset_factor": 1, **(default_buffer_params or {})}
    allowed = {"strides", "elem_offset", "scope", "data_alignment", "offset_factor"}
    if set(buf_params) - allowed:
        raise TypeError(f"decl_tensor_intrin {name}: default_buffer_params takes "
                        f"{sorted(allowed)} (tir.decl_buffer's), got "
                        f"{sorted(set(buf_params) - allowed)}")
    buffers = []
    for t in tensors:
        buf = next((b for k, b in binds.items() if k == t), None)
        if buf is None:
            buf = decl_buffer(t.shape, t.dtype, t.op.name, **buf_params)
        buffers.append(_check_buffer(buf, t, name))
    ins, outs = buffers[:len(inputs)], buffers[len(inputs):]
    params = tuple(scalar_params or ())
    for p in params:
        if not isinstance(p, Var):
            raise TypeError(f"decl_tensor_intrin {name}: scalar_params must be te.var Vars, got {p!r}")
    result = fintrin(ins, outs, list(params)) if params else fintrin(ins, outs)
    if isinstance(result, (list, tuple)):
        if len(result) != 3:
            raise ValueError(f"decl_tensor_intrin {name}: fintrin must return one statement or "
                             f"(body, reset, update), got a sequence of {len(result)}")
        body, reset, update = (_as_stmt(x, w, name) for x, w in
                               zip(result, ("body", "reset", "update")))
    else:
        body, reset, update = _as_stmt(result, "body", name), None, None
    if body is None and update is None:
        raise ValueError(f"decl_tensor_intrin {name}: fintrin returned neither a body nor an "
                         "update statement")
    if not op.reduce_axis and body is None:
        raise ValueError(f"decl_tensor_intrin {name}: {op.name} has no reduction, so fintrin must "
                         "return a body")
    return TensorIntrin(name, op, inputs, buffers, body, reset, update, params)
