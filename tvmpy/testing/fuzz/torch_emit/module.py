"""The translated model: ``FuzzModule`` (an ``nn.Module`` running the nodes' translations in
graph order), ``to_torch`` and ``explain``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ._common import (
    EMITTERS,
    Fn,
    Node,
    Unsupported,
    _onnx_dt,
    _tdt,
)

# ---------------------------------------------------------------------------------------------
# the module


class FuzzModule(nn.Module):
    """An ONNX graph as torch code: ``forward(*graph_inputs) -> tuple(graph_outputs)``.

    ``steps`` are ``(op_type, fn, input names, output names)`` in graph order; a name in
    ``buffers`` is read from the registered buffer of that (sanitized) name."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 consts: dict[str, np.ndarray], steps: list[tuple[str, Fn, list[str], list[str]]]
                 ) -> None:
        super().__init__()
        self.input_names = list(inputs)
        self.output_names = list(outputs)
        self.buffers_of: dict[str, str] = {}
        taken: set[str] = set()
        for name, value in consts.items():
            attr = "c_" + re.sub(r"\W", "_", name)
            while attr in taken:
                attr += "_"
            taken.add(attr)
            self.register_buffer(attr, torch.from_numpy(np.array(value, copy=True)))
            self.buffers_of[name] = attr
        self.steps = steps

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if len(args) != len(self.input_names):
            raise TypeError(f"expected {len(self.input_names)} inputs, got {len(args)}")
        env: dict[str, Any] = dict(zip(self.input_names, args))
        for name, attr in self.buffers_of.items():
            env[name] = getattr(self, attr)
        for _op, fn, ins, outs in self.steps:
            res = fn(*[env[i] if i else None for i in ins])
            res = res if isinstance(res, tuple) else (res,)
            for name, value in zip(outs, res):
                if name:
                    env[name] = value
        return tuple(env[o] for o in self.output_names)


def _static_types(model: Any) -> tuple[dict[str, tuple[int, ...]], dict[str, np.dtype]]:
    from onnx import numpy_helper, shape_inference

    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, np.dtype] = {}
    g = inferred.graph
    for vi in [*g.input, *g.value_info, *g.output]:
        tt = vi.type.tensor_type
        if tt.elem_type:
            dtypes[vi.name] = _onnx_dt(tt.elem_type)
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    for init in g.initializer:
        v = numpy_helper.to_array(init)
        shapes[init.name], dtypes[init.name] = tuple(v.shape), v.dtype
    produced = [o for nd in g.node for o in nd.output if o]
    if any(o not in shapes for o in produced):  # data-dependent to shape inference (Compress)
        for name, v in _evaluate_all(model, shapes, dtypes).items():
            shapes.setdefault(name, tuple(v.shape))
            dtypes.setdefault(name, v.dtype)
    return shapes, dtypes


def _evaluate_all(model: Any, shapes: dict[str, tuple[int, ...]],
                  dtypes: dict[str, np.dtype]) -> dict[str, np.ndarray]:
    """Every tensor of ``model`` run by onnx's reference evaluator on zero inputs (shapes
    that depend only on initializers: Compress, GatherND with batch dims)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {}
    for vi in model.graph.input:
        if vi.name not in shapes or vi.name not in dtypes:
            return {}
        feeds[vi.name] = np.zeros(shapes[vi.name], dtypes[vi.name])
    try:
        with np.errstate(all="ignore"):
            ev = ReferenceEvaluator(model)
            return {k: np.asarray(v) for k, v in ev.run(None, feeds, intermediate=True).items()
                    if v is not None}
    except Exception:  # noqa: BLE001 - the shapes stay unknown: the nodes are refused
        return {}


def _translate(model: Any) -> FuzzModule:
    from onnx import numpy_helper

    g = model.graph
    if any(o.domain not in ("", "ai.onnx") for o in model.opset_import if o.domain):
        raise Unsupported("a non-default operator domain")
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    shapes, dtypes = _static_types(model)
    for vi in [*g.input, *g.output]:
        if vi.name not in dtypes or vi.name not in shapes:
            raise Unsupported(f"no static type for {vi.name!r}")
        _tdt(dtypes[vi.name])
    consts = dict(inits)
    steps: list[tuple[str, Fn, list[str], list[str]]] = []
    for k, proto in enumerate(g.node):
        if proto.domain not in ("", "ai.onnx"):
            raise Unsupported(f"{proto.op_type} of domain {proto.domain}")
        if proto.op_type not in EMITTERS:
            raise Unsupported(f"no translation of {proto.op_type}")
        node = Node(proto, shapes, dtypes, inits)
        for name in [*node.inputs, *node.outputs]:
            if name and name in dtypes:
                _tdt(dtypes[name])
        try:
            fn = EMITTERS[proto.op_type](node)
        except Unsupported as e:
            if str(e).startswith(node.name):
                raise
            raise Unsupported(f"{node.name}: {e}") from e
        except (TypeError, ValueError, IndexError, KeyError) as e:
            raise Unsupported(f"{node.name}: {type(e).__name__}: {e}") from e
        ins = list(node.inputs)
        for j, value in enumerate(node.extra):
            name = f"{node.outputs[0] or f'n{k}'}__const{j}"
            consts[name] = value
            ins.append(name)
        steps.append((proto.op_type, fn, ins, list(node.outputs)))
    used = {i for _, _, ins, _ in steps for i in ins}
    consts = {k: v for k, v in consts.items() if k in used}
    inputs = [vi.name for vi in g.input if vi.name not in inits]  # (old IR: weights as inputs)
    return FuzzModule(inputs, [vi.name for vi in g.output], consts, steps)


def explain(model: Any) -> str | None:
    """Why ``model`` has no torch translation (None when it has one)."""
    try:
        _translate(model)
    except Unsupported as e:
        return str(e)
    return None


def to_torch(model: Any) -> nn.Module | None:
    """``model`` (an ONNX ModelProto) as an ``nn.Module`` in eval mode computing the same
    graph with torch operations, or None when a node has no faithful translation."""
    try:
        return _translate(model).eval()
    except Unsupported:
        return None
