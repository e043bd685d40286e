"""Converters' dynamic forms: when a shape-like input (Reshape's shape, Slice's starts, Resize's
sizes, TopK's k, ...) is not a constant known at import time, the node becomes a
``relay.op.dyn`` operator that reads it at run time. The static converters keep their own
(unchanged) output whenever every such input is known."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import dyn, transform
from .context import ImportContext, dtype_of, shape_of, typed_const
from .registry import Attrs, Inputs, Names, Output

__all__ = ["runtime_inputs", "reshape", "expand", "tile", "split", "slice_", "squeeze",
           "unsqueeze", "pad", "topk", "one_hot", "constant_of_shape", "range_", "resize", "value_op"]


def runtime_inputs(ctx: ImportContext, names: Names, *positions: int) -> bool:
    """Whether one of the (present) inputs at ``positions`` is known only at run time (with
    ``from_onnx(..., dynamic_inputs=False)``: ``OnnxConstantInputError`` naming it)."""
    late = [names[p] for p in positions if len(names) > p and names[p]
            and names[p] not in ctx.values]
    if late and not ctx.dynamic_inputs:
        ctx.value(late[0], _input_name(ctx, names.index(late[0])))  # raises, naming it
    return bool(late)


def _input_name(ctx: ImportContext, k: int) -> str:
    """The schema's name of the node's input ``k`` (Reshape's 1: "shape")."""
    try:
        from onnx import defs

        return defs.get_schema(ctx.node.op_type, ctx.opset, ctx.node.domain).inputs[k].name
    except Exception:  # (no schema: a custom domain)
        return f"#{k}"


def _int(e: RelayExpr) -> RelayExpr:
    return e if dtype_of(e).startswith(("int", "uint")) else transform.cast(e, "int64")


def _1d(e: RelayExpr) -> RelayExpr:
    """A scalar as a 1-element vector (shape-like tensors are 1-D)."""
    return transform.reshape(e, (1,)) if len(shape_of(e)) == 0 else e


def _opt(inputs: Inputs, k: int) -> RelayExpr | None:
    return inputs[k] if len(inputs) > k else None


def reshape(ctx: ImportContext, inputs: Inputs, attrs: Attrs) -> Output:
    return dyn.reshape(inputs[0], _int(inputs[1]), bool(attrs.get("allowzero", 0)))


def expand(ctx: ImportContext, inputs: Inputs) -> Output:
    return dyn.broadcast_to(inputs[0], _int(inputs[1]))


def tile(ctx: ImportContext, inputs: Inputs) -> Output:
    return dyn.tile(inputs[0], _int(inputs[1]))


def split(ctx: ImportContext, inputs: Inputs, axis: int) -> Output:
    out = dyn.split(inputs[0], _int(_1d(inputs[1])), axis)
    return [out[k] for k in range(len(out))]


def slice_(ctx: ImportContext, inputs: Inputs) -> Output:
    x, starts, ends = inputs[0], _int(inputs[1]), _int(inputs[2])
    n = shape_of(starts)[0]
    axes, steps = _opt(inputs, 3), _opt(inputs, 4)
    axes = _int(axes) if axes is not None else const(np.arange(n, dtype=np.int64))
    steps = _int(steps) if steps is not None else const(np.ones(n, dtype=np.int64))
    return dyn.strided_slice(x, starts, ends, steps, axes)


def squeeze(ctx: ImportContext, inputs: Inputs) -> Output:
    return dyn.squeeze(inputs[0], _int(_1d(inputs[1])))


def unsqueeze(ctx: ImportContext, inputs: Inputs) -> Output:
    return dyn.expand_dims(inputs[0], _int(_1d(inputs[1])))


def pad(ctx: ImportContext, inputs: Inputs, mode: str) -> Output:
    x = inputs[0]
    r = len(shape_of(x))
    value = _opt(inputs, 2)
    value = typed_const(0, dtype_of(x)) if value is None else value
    axes = _opt(inputs, 3)
    axes = const(np.arange(r, dtype=np.int64)) if axes is None else _int(_1d(axes))
    return dyn.nn.pad(x, _int(inputs[1]), value, axes, pad_mode=mode)


def topk(ctx: ImportContext, inputs: Inputs, attrs: Attrs) -> Output:
    out = dyn.topk(inputs[0], _int(inputs[1]), int(attrs.get("axis", -1)),
                   is_ascend=not attrs.get("largest", 1))
    return [out[0], out[1]]


def one_hot(ctx: ImportContext, inputs: Inputs, attrs: Attrs) -> Output:
    values = inputs[2]
    off = transform.take(values, const(np.asarray(0, np.int64)), axis=0)
    on = transform.take(values, const(np.asarray(1, np.int64)), axis=0)
    return dyn.one_hot(inputs[0], inputs[1], on, off, int(attrs.get("axis", -1)), dtype_of(values))


def constant_of_shape(ctx: ImportContext, inputs: Inputs, attrs: Attrs,
                      names: Names | None = None) -> Output:
    """``dyn.full``; a static ``full`` over the very symbolic dims when the shape is tracked
    (``ConstantOfShape(Shape(x))``: the attention mask ``ones(input_ids.shape)``), so that its
    dims stay those of ``x`` (dyn.full's would be fresh Anys no graph input gives)."""
    from onnx import numpy_helper

    from ...op import tensor
    from . import shape_values

    v = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    fill = const(v.reshape(()))
    dims = shape_values.lookup(ctx, names[0]) if names else None
    if dims is not None and shape_values.connected(ctx, dims):
        return tensor.full(fill, dims, str(v.dtype))
    return dyn.full(fill, _int(inputs[0]), str(v.dtype))


def range_(ctx: ImportContext, inputs: Inputs) -> Output:
    return dyn.arange(inputs[0], inputs[1], inputs[2], dtype_of(inputs[0]))


def resize(ctx: ImportContext, x: RelayExpr, spec: Any, axes: list[int] | None,
           target: RelayExpr, use_sizes: bool, roi: RelayExpr | None,
           policy: str = "stretch") -> Output:
    """A Resize (or Upsample) whose scales, sizes or roi are run-time tensors."""
    if spec.mode != "nearest" and not dtype_of(x).startswith("float"):
        raise ctx.fail(f"{spec.mode} resize of {dtype_of(x)} data is not supported")
    return dyn.image.resize(
        x, _int(target) if use_sizes else target, roi, use_sizes=use_sizes, axes=axes or (),
        mode=spec.mode, coordinate_transformation_mode=spec.coord,
        nearest_mode=spec.nearest_mode, cubic_coeff_a=spec.cubic_a,
        exclude_outside=spec.exclude_outside, antialias=spec.antialias,
        extrapolation_value=spec.extrapolation_value, keep_aspect_ratio_policy=policy)


def value_op(ctx: ImportContext, op_type: str, inputs: Inputs, attrs: Attrs, names: Names
             ) -> RelayExpr | None:
    """The run-time form of a value operator (Shape, Size, ConstantOfShape, Range) whose input
    is not known at import time; None when it is (the importer folds it to a constant)."""
    if op_type in ("Shape", "Size"):
        x = inputs[0]
        dims = shape_of(x)
        if all(isinstance(d, int) for d in dims) or not ctx.dynamic_inputs:
            return None
        s = dyn.shape_of(x, "int64")
        if op_type == "Size":
            from ...op import reduce

            return reduce.prod(s)
        r = len(dims)
        lo, hi = (int(attrs.get(k, d)) for k, d in (("start", 0), ("end", r)))
        lo, hi = (max(0, min(r, v + r if v < 0 else v)) for v in (lo, hi))
        return s if (lo, hi) == (0, r) else transform.strided_slice(s, [lo], [max(lo, hi)])
    if not runtime_inputs(ctx, names, *range(len(names))):
        return None
    if op_type == "ConstantOfShape":
        return constant_of_shape(ctx, inputs, attrs, names)
    if op_type == "Range":
        out = _range_to_symbolic_limit(ctx, inputs, names)
        return out if out is not None else range_(ctx, inputs)
    return None


def _range_to_symbolic_limit(ctx: ImportContext, inputs: Inputs, names: Names
                             ) -> RelayExpr | None:
    """``Range(0, D, 1)`` with ``D`` a symbolic dim read by a Shape op (``torch.arange(seq)``):
    the indices with that same dimension D (dyn.arange's would be a fresh Any)."""
    from . import shape_values

    start, delta = ctx.values.get(names[0]), ctx.values.get(names[2])
    limit = shape_values.scalar(ctx, names[1])
    if start is None or delta is None or limit is None or isinstance(limit, int):
        return None
    if int(start.reshape(-1)[0]) != 0 or int(delta.reshape(-1)[0]) != 1:
        return None
    idx = shape_values.index_range(ctx, limit)
    if idx is None:
        return None
    dt = dtype_of(inputs[0])
    return idx if dt == "int64" else transform.cast(idx, dt)
