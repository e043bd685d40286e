"""ONNX importer: ``from_onnx(model, shape) -> (IRModule, params)``, as in TVM.

Graph inputs that are initializers become parameters: relay Constants when ``freeze_params``
(TVM's meaning: weights embedded, ``params`` empty), else relay Vars with their values in
``params``. Other graph inputs become Vars with the given or the model's shapes. Values known at
import time (initializers, Constant, static Shape and what is computed only from them) are kept
as numpy arrays so shape-like inputs (Reshape's shape, Slice's starts, ...) fold to attributes.
Every operator type is checked before conversion: unsupported ones raise ONE OpNotImplemented
listing each type with its node names.

Each node goes to the converter registered for its operator type (``registry.py``; the
converters live in the operator-family modules of this package). An operator without a
converter but with an ONNX function body is imported through that body (``functions.py``).
Shape-like inputs that are graph inputs raise ``OnnxConstantInputError`` naming them (the ONNX
backend then binds them and imports again).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import op as _op  # noqa: F401  (registers operators)
from ...expr import Constant, Function, RelayExpr, RelayTypeError, Tuple, const, var
from ...module import IRModule
from ...ty import Any as AnyDim
from ...ty import ListType, TensorType, TupleType
from ...type_infer import infer_type
from ..common import unsupported_error
from . import dynamic, shape_values
from .context import (
    EMPTY_OPTIONAL,
    ImportContext,
    OnnxConstantInputError,
    OnnxConvertError,
    RuntimeOptional,
    np_dtype,
    shape_of,
)
from .functions import expand_function, function_body, function_versions
from .low_precision import NATIVE_OPS, in_compute_types, model_uses_low_precision
from .registry import CONVERTERS, Attrs
from .validate import check_model

__all__ = ["from_onnx", "supported_ops", "convert_nodes", "tensors_read"]

# operators whose outputs are values known at import time (converted here, not by a converter)
_VALUE_OPS = {"Constant", "Shape", "ConstantOfShape", "Size", "Range"}
# (unless their inputs are known only at run time: ``dynamic.value_op``)


def _value_op(ctx: ImportContext, node: Any, attrs: Attrs, names: list[str]) -> np.ndarray:
    from onnx import numpy_helper

    if node.op_type == "Constant":
        for key, conv in (("value", None), ("value_float", np.float32), ("value_int", np.int64),
                          ("value_floats", np.float32), ("value_ints", np.int64)):
            if key in attrs:
                v = attrs[key]
                return numpy_helper.to_array(v) if conv is None else np.asarray(v, dtype=conv)
        raise ctx.fail(f"attributes {sorted(attrs)} are not supported")
    if node.op_type == "ConstantOfShape":
        shp = [int(v) for v in ctx.value(names[0], "input")]
        v = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
        return np.full(shp, v.reshape(-1)[0], dtype=v.dtype)
    if node.op_type == "Range":
        st, lim, dl = (ctx.value(nm, w) for nm, w in zip(names, ("start", "limit", "delta")))
        first = [np.asarray(v).reshape(-1)[0] for v in (st, lim, dl)]  # (1-element tensors too)
        return np.arange(*first).astype(st.dtype)
    dims = shape_of(ctx.exprs[names[0]])
    if node.op_type != "Size":
        dims = dims[slice(attrs.get("start", 0), attrs.get("end", len(dims)))]
    symbolic = [str(d) for d in dims if not isinstance(d, int)]
    if symbolic:
        raise OnnxConstantInputError(
            f"{ctx.where()}: the shape of {names[0]!r} has dimensions known only at run time "
            f"({', '.join(symbolic)}); computing with run-time shape values is not supported "
            "yet: fix the input shapes with shape={...}", names[0])
    s = np.asarray(dims, dtype=np.int64)
    if node.op_type == "Size":
        return np.asarray(int(np.prod(s)), dtype=np.int64)
    return s


# attribute values no converter handles: (op, attribute) -> the values that are supported
_SUPPORTED_VALUES: dict[tuple[str, str], tuple] = {
    ("Resize", "keep_aspect_ratio_policy"): ("stretch", "not_larger", "not_smaller"),
    ("LayerNormalization", "stash_type"): (1,),
    ("Gelu", "approximate"): ("none", "tanh"), ("DepthToSpace", "mode"): ("DCR", "CRD"),
}


def _check_attr_values(ctx: ImportContext, attrs: Attrs) -> None:
    for key, v in attrs.items():
        ok = _SUPPORTED_VALUES.get((ctx.node.op_type, key))
        if ok is not None and v not in ok:
            raise ctx.fail(f"attribute {key}={v!r} is not supported (supported: {list(ok)})")


# operators whose ``axis`` / ``axes`` attribute counts dimensions of input 0 (rank r): the valid
# range is [-(r + below), r - 1 + above]; ``None`` for Unsqueeze: the output rank r + len(axes)
_AXIS_RANGE: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("Gather", "GatherElements", "ScatterElements", "Scatter", "Softmax",
                     "LogSoftmax", "Hardmax", "Concat", "Split", "TopK", "ArgMax", "ArgMin",
                     "Compress", "LpNormalization", "LayerNormalization", "SplitToSequence",
                     "Unique", "RMSNormalization", "TensorScatter"), (0, 0)),
    "Flatten": (0, 1), "OneHot": (1, 1),
}
_AXES_RANGE: dict[str, tuple[int, int] | None] = {
    **dict.fromkeys(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                     "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
                     "Squeeze", "Resize", "CenterCropPad"), (0, 0)),
    "Unsqueeze": None,
}


def _check_axes(ctx: ImportContext, attrs: Attrs, ins: list) -> None:
    """Refuse an ``axis``/``axes`` attribute out of range for the input's rank (converters then
    normalize negative values with ``% rank``, which must not turn 7 into 1)."""
    op = ctx.node.op_type
    checks = []
    if "axis" in attrs and op in _AXIS_RANGE:
        checks.append(("axis", [attrs["axis"]], _AXIS_RANGE[op]))
    if "axes" in attrs and op in _AXES_RANGE:
        axes = list(attrs["axes"])
        checks.append(("axes", axes, _AXES_RANGE[op] or (len(axes), len(axes))))
    if not checks or not ins or not isinstance(ins[0], RelayExpr):
        return
    t = infer_type(ins[0]).checked_type
    if not isinstance(t, TensorType):
        return
    r = len(t.shape)
    for name, values, (below, above) in checks:
        lo, hi = -(r + below), r - 1 + above
        bad = [v for v in values if not isinstance(v, int) or not lo <= v <= hi]
        if bad:
            shown = values[0] if name == "axis" else values
            raise ctx.fail(f"attribute {name}={shown} is out of range for an input of rank {r} "
                           f"(valid: {lo}..{hi})")


def _attrs(node: Any) -> Attrs:
    from onnx import helper

    out = {}
    for at in node.attribute:
        v = helper.get_attribute_value(at)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[at.name] = v
    return out


def supported_ops() -> list[str]:
    """The ONNX operator types (default domain) this importer converts."""
    return sorted(set(CONVERTERS) | _VALUE_OPS)


def _input_shape(vi: Any, shape: Mapping[str, Any] | None, dims_by_name: dict[str, Any],
                 tensor_type: Any = None) -> list[Any]:
    """An input's relay shape: ``shape[name]`` when given, else the model's dims, a
    ``dim_param`` as one ``relay.Any`` per name (inputs that share ``"batch"`` share the size)
    and an unknown dim as an ``Any`` of its own."""
    if shape and vi.name in shape:
        return [int(d) for d in shape[vi.name]]
    tt = vi.type.tensor_type if tensor_type is None else tensor_type
    dims: list[Any] = []
    for k, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.dim_param:
            if d.dim_param not in dims_by_name:
                dims_by_name[d.dim_param] = AnyDim(d.dim_param)
            dims.append(dims_by_name[d.dim_param])
        else:
            dims.append(AnyDim(f"{vi.name}_dim{k}"))
    return dims


def _input_var(ctx: ImportContext, vi: Any, shape: Mapping[str, Any] | None, dtype: Any,
               dims_by_name: dict[str, Any]) -> Any:
    """The relay Var of a graph input (None for an optional given as absent: ``shape[name]``
    is None). A sequence input is a tuple when ``shape[name]`` lists its tensors' shapes, else
    a run-time list (``ListType``) of the declared element type."""
    tp = vi.type
    given = shape.get(vi.name, ()) if shape else ()
    if tp.HasField("optional_type"):
        if shape and vi.name in shape and given is None:
            return None
        tp = tp.optional_type.elem_type
    if tp.HasField("sequence_type"):
        et = tp.sequence_type.elem_type.tensor_type
        dt = np_dtype(et.elem_type) if et.elem_type else "float32"
        if shape and vi.name in shape:
            return var(vi.name, TupleType([TensorType([int(d) for d in s], dt) for s in given]))
        if not et.HasField("shape"):
            raise ValueError(f"from_onnx: sequence input {vi.name!r} has elements of unknown "
                             "rank: give their shapes with shape={name: [shape, ...]}")
        dims = _input_shape(vi, None, dims_by_name, et)
        return var(vi.name, ListType(TensorType(dims, dt)))
    dt = dtype.get(vi.name, "float32") if isinstance(dtype, Mapping) else dtype
    elem = tp.tensor_type.elem_type
    if elem and not (isinstance(dtype, Mapping) and vi.name in dtype):
        dt = np_dtype(elem)
    return var(vi.name, shape=_input_shape(vi, shape, dims_by_name, tp.tensor_type), dtype=dt)


def from_onnx(model: Any, shape: Mapping[str, Any] | None = None, dtype: Any = "float32",
              opset: int | None = None, freeze_params: bool = True,
              output_info: dict[str, Any] | None = None, dynamic_inputs: bool = True
              ) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert an ONNX ModelProto to a relay IRModule and its parameters (TVM's from_onnx).

    ``shape`` fixes input shapes by name; the dims of the other inputs are the model's, a
    symbolic one (``dim_param`` or unknown) as ``relay.Any()`` (one compiled module then serves
    every size). A sequence input is a tuple when ``shape`` gives its tensors' shapes (a list
    of shapes), else a run-time list; an optional input is absent when ``shape`` gives None
    for it. ``output_info`` (a dict), when given, gets ``"empty_optional"``: the graph outputs
    that are empty optionals (the module returns an empty tuple for them), and
    ``"runtime_optional"``: those whose presence is known only at run time (the module returns
    the pair (present, value) for them). A shape-like input
    known only at run time (Reshape's shape as a graph input, Shape of a symbolic dimension,
    ...) gives a ``relay.op.dyn`` operator; with ``dynamic_inputs=False`` it raises
    ``OnnxConstantInputError`` naming the tensors instead (for executors without
    data-dependent shapes)."""
    from onnx import numpy_helper

    check_model(model)
    graph = model.graph
    if opset is None:
        opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                    default=13)
    missing: dict[str, list[str]] = {}
    _find_unsupported(graph.node, opset, missing)
    if missing:
        raise unsupported_error("from_onnx", missing)

    graph_inputs = {vi.name for vi in graph.input}
    unknown = sorted(set(shape or {}) - graph_inputs)
    if unknown:
        raise ValueError(f"from_onnx: shape given for {unknown}, which are not graph inputs "
                         f"(inputs: {sorted(graph_inputs)})")
    ctx = ImportContext(opset, freeze_params)
    ctx.dynamic_inputs = dynamic_inputs
    ctx.low_precision = model_uses_low_precision(graph)
    params: dict[str, np.ndarray] = {}
    inputs = []
    init_names = set()
    dims_by_name: dict[str, Any] = {}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        init_names.add(init.name)
        ctx.values[init.name] = arr
        if freeze_params:
            ctx.exprs[init.name] = const(arr)
        else:
            v = var(init.name, shape=arr.shape, dtype=str(arr.dtype))
            ctx.exprs[init.name] = v
            params[init.name] = arr
    for vi in graph.input:
        if vi.name in init_names:
            continue
        v = _input_var(ctx, vi, shape, dtype, dims_by_name)
        if v is None:
            ctx.exprs[vi.name] = EMPTY_OPTIONAL
            continue
        ctx.exprs[vi.name] = v
        inputs.append(v)
    if not freeze_params:
        inputs += [ctx.exprs[n] for n in params]

    convert_nodes(ctx, list(graph.node), opset)

    outs = [ctx.exprs[o.name] for o in graph.output]
    if output_info is not None:
        output_info["empty_optional"] = [o.name for o in graph.output
                                         if ctx.exprs[o.name] is EMPTY_OPTIONAL]
        output_info["runtime_optional"] = [o.name for o in graph.output
                                           if isinstance(ctx.exprs[o.name], RuntimeOptional)]
    outs = [Tuple([]) if e is EMPTY_OPTIONAL else Tuple([e.has, e.value])
            if isinstance(e, RuntimeOptional) else e for e in outs]
    body = outs[0] if len(outs) == 1 else Tuple(outs)
    func = Function(inputs, body)
    mod = IRModule.from_expr(func, dict(ctx.mod.functions))
    from ...transform import InferType
    from ...transform.float16_accumulation import widen_imported

    mod = InferType()(mod)
    # float16 products and sums accumulate in float32, as onnxruntime's CPU kernels
    return widen_imported(mod), params


def _converter_key(node: Any) -> str:
    """The registry key: the operator type in the default domain, else ``domain.type`` (the
    com.microsoft QOperator ops onnxruntime's quantizer emits are registered that way)."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _has_converter(node: Any) -> bool:
    key = _converter_key(node)
    return key in CONVERTERS or (node.domain in ("", "ai.onnx") and node.op_type in _VALUE_OPS)


def _find_unsupported(nodes: Any, opset: int, missing: dict[str, list[str]],
                      where: str = "") -> None:
    """Collect unsupported operator types: no converter and no ONNX function body (the
    bodies of plain functions are checked too; context-dependent ones when expanded)."""
    from onnx import AttributeProto

    for k, node in enumerate(nodes):
        for at in node.attribute:  # If/Scan bodies
            if at.type == AttributeProto.GRAPH:
                _find_unsupported(at.g.node, opset, missing,
                                  f"{where}{node.name or node.op_type}.{at.name} > ")
        if _has_converter(node):
            continue
        version, ctx_dep = function_versions(node, opset)
        if version is None:
            key = (
                node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            )
            missing.setdefault(key, []).append(where + (node.name or f"#{k} (unnamed)"))
        elif not ctx_dep:
            body, body_opset = function_body(node, opset, version)
            _find_unsupported(body, body_opset, missing,
                              f"{where}{node.name or node.op_type} (function body) > ")


def _type_proto(e: RelayExpr) -> Any:
    from onnx import helper

    t = infer_type(e).checked_type
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(str(t.dtype)))
    return helper.make_tensor_type_proto(elem, [int(d) for d in t.shape])


def _outer_sources(body: list, tensors: tuple[str, ...]) -> list[str]:
    """The tensors outside a function body that body tensors ``tensors`` are computed from."""
    producer = {o: nd for nd in _walk(body) for o in nd.output if o}
    out, todo, seen = [], list(tensors), set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in producer:
            todo.extend(tensors_read(producer[t]))
        else:
            out.append(t)
    return sorted(out)


def _walk(nodes: list) -> list:
    """Nodes and, recursively, the nodes of their subgraphs."""
    out = []
    for nd in nodes:
        out.append(nd)
        for at in nd.attribute:
            if at.HasField("g"):
                out += _walk(list(at.g.node))
    return out


def tensors_read(node: Any) -> list[str]:
    """The tensors a node reads: its inputs and, for If/Scan, what its subgraphs read."""
    names = [nm for nm in node.input if nm]
    for at in node.attribute:
        if at.HasField("g"):
            for sub in at.g.node:
                names += tensors_read(sub)
    return names


_READS_RUNTIME_OPTIONAL = frozenset({"OptionalHasElement", "OptionalGetElement", "Identity",
                                     "If"})


def convert_nodes(ctx: ImportContext, nodes: list, opset: int) -> None:
    for k, node in enumerate(nodes):
        ctx.opset = opset
        ctx.node = node
        names = list(node.input)
        for nm in names:
            if nm and nm not in ctx.exprs:
                raise ctx.fail(f"input {nm!r} is not produced by any earlier node or graph input")
        if not _has_converter(node):
            types = [_type_proto(ctx.exprs[nm]) if nm else None for nm in names]
            if any(t is None for t in types):
                from onnx import TypeProto

                types = [t if t is not None else TypeProto() for t in types]
            ctx.expansions += 1
            prefix = f"{node.name or node.op_type}__fn{ctx.expansions}__"
            expanded = expand_function(node, opset, types, prefix)
            if expanded is None:
                raise unsupported_error("from_onnx", {node.op_type: [node.name or f"#{k}"]})
            body, body_opset = expanded
            missing: dict[str, list[str]] = {}
            _find_unsupported(body, body_opset, missing, f"{node.name or node.op_type} > ")
            if missing:
                raise unsupported_error("from_onnx", missing)
            try:
                convert_nodes(ctx, body, body_opset)
            except OnnxConstantInputError as e:
                raise OnnxConstantInputError(str(e), *_outer_sources(body, e.tensors)) from None
            continue
        a = _attrs(node)
        if node.op_type in _VALUE_OPS:
            ins = [ctx.exprs[nm] if nm else None for nm in names]
            e = dynamic.value_op(ctx, node.op_type, ins, a, names)
            if e is not None:  # an input known only at run time
                ctx.exprs[node.output[0]] = e
                shape_values.track(ctx, node, names, a)
                continue
        if node.op_type in _VALUE_OPS:
            val = _value_op(ctx, node, a, names)
            ctx.values[node.output[0]] = val
            ctx.exprs[node.output[0]] = const(val)
            continue
        _check_attr_values(ctx, a)
        ins = [ctx.exprs[nm] if nm else None for nm in names]
        _check_axes(ctx, a, ins)
        if node.op_type not in _READS_RUNTIME_OPTIONAL and any(
                isinstance(x, RuntimeOptional) for x in ins):
            raise ctx.fail("an input is an optional whose presence is known only at run time: "
                           "only OptionalHasElement, OptionalGetElement, Identity and If read "
                           "one")
        try:
            conv = CONVERTERS[_converter_key(node)]
            if ctx.low_precision and node.op_type not in NATIVE_OPS:
                conv = in_compute_types(conv)  # bfloat16/float8/int4... compute in 32 bits
            out = conv(ctx, ins, a, names)
        except (OnnxConvertError, KeyError) as e:
            if isinstance(e, KeyError):
                raise ctx.fail(f"missing required attribute {e}") from None
            raise
        except TypeError as e:  # a converter that needs a static size met a relay.Any
            if not any(m in str(e) for m in ("cannot be used as a Python integer",
                                             "as a Python bool")):
                if isinstance(e, RelayTypeError) and ctx.where() not in str(e):
                    raise RelayTypeError(f"{ctx.where()}: {e}") from None  # name the node
                raise
            raise ctx.fail(f"needs static shapes, but its input shapes "
                           f"{[_shape_text(x) for x in ins if x is not None]} have dimensions "
                           "known only at run time; fix the input shapes with shape={...}"
                           ) from None
        except ValueError as e:
            if ctx.where() in str(e):
                raise
            raise ctx.fail(str(e)) from None
        outs = out if isinstance(out, list) else [out]
        outputs = [o for o in node.output]
        for k, o in enumerate(outputs):
            if not o:
                continue
            if k >= len(outs):
                raise ctx.fail(f"output {k} ({o!r}) is not supported")
            ctx.exprs[o] = outs[k]
            if isinstance(outs[k], Constant) and outs[k].data.numpy().size <= 4096:
                ctx.values[o] = outs[k].data.numpy()  # (e.g. an If branch's folded outputs)
        _fold(ctx, node, names, outputs, outs)
        shape_values.track(ctx, node, names, a)


def _shape_text(x: RelayExpr) -> str:
    from ...ty import type_str

    return type_str(infer_type(x).checked_type)


def _fold(ctx: ImportContext, node: Any, names: list[str], outputs: list[str], outs: list) -> None:
    """Evaluate a node whose inputs are all known shape-like values (small integer tensors or
    values computed from Constant/Shape), so later shape inputs fold to attributes."""
    if any(at.g.node for at in node.attribute if at.HasField("g")):
        return  # If/Scan read outer tensors implicitly: the inputs do not say what is known
    if node.op_type == "DequantizeLinear":
        return  # a QDQ weight stays quantized (FakeQuantizationToInteger reads the pair)
    known = [nm for nm in (names[:1] if node.op_type == "CastLike" else names) if nm]
    if not known or any(nm not in ctx.values for nm in known):
        return
    if any(ctx.values[nm].size > 4096 or not isinstance(ctx.exprs[nm], Constant)
           for nm in known):
        return
    if any(not isinstance(o, RelayExpr) or not isinstance(infer_type(o).checked_type, TensorType)
           for o in outs):
        return  # sequences (tuples, lists) and optionals stay as they are
    from ...interpreter import evaluate

    for o, e in zip(outputs, outs):
        if not o:
            continue
        val = evaluate(Function([], e))
        val = np.asarray(val.numpy() if hasattr(val, "numpy") else val)
        ctx.values[o] = val
        ctx.exprs[o] = const(val)
