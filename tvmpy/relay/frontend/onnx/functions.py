"""ONNX function expansion: operators that ONNX defines as a function of other operators.

Many ONNX operators (Attention, SoftmaxCrossEntropyLoss, GroupNormalization, Mish, the window
functions, ...) carry a function body in their schema: a small graph of primitive operators
that defines them, possibly built from the node's attributes and input types (a
*context-dependent* function). ``from_onnx`` converts an operator it has no converter for by
expanding that body in place, as onnxruntime does for operators without a kernel. The body is
taken at the model's opset (the newest function version not newer than it) and its own opset
import governs how its nodes are read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["function_versions", "function_body", "expand_function"]


def _schema(node: Any, opset: int) -> Any | None:
    import onnx.defs

    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    try:
        return onnx.defs.get_schema(node.op_type, opset, domain)
    except Exception:  # noqa: BLE001 -- onnx raises SchemaError (a C++ type) for unknown ops
        try:  # a domain whose opset the model does not import: its newest definition
            return onnx.defs.get_schema(node.op_type, domain=domain)
        except Exception:  # noqa: BLE001
            return None


def function_versions(node: Any, opset: int) -> tuple[int | None, bool]:
    """(the function version to use, whether it is context-dependent); (None, False) if the
    operator has no function body at this opset."""
    schema = _schema(node, opset)
    if schema is None:
        return None, False
    best: tuple[int | None, bool] = (None, False)
    for versions, ctx_dep in ((schema.function_opset_versions, False),
                              (schema.context_dependent_function_opset_versions, True)):
        for v in versions:
            if v <= opset and (best[0] is None or v > best[0]):
                best = (v, ctx_dep)
    if best[0] is None:  # only versions newer than the model's opset (a newer domain's op)
        for versions, ctx_dep in ((schema.function_opset_versions, False),
                                  (schema.context_dependent_function_opset_versions, True)):
            for v in versions:
                if best[0] is None or v < best[0]:
                    best = (v, ctx_dep)
    return best


def _with_defaults(node: Any, schema: Any) -> Any:
    """A copy of ``node`` with the schema's default attribute values filled in."""
    from onnx import NodeProto

    out = NodeProto()
    out.CopyFrom(node)
    have = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in have and attr.default_value and attr.default_value.name:
            out.attribute.append(attr.default_value)
    return out


def function_body(node: Any, opset: int, version: int) -> tuple[list[Any], int]:
    """The nodes (not renamed) of ``node``'s context-independent function body at ``version``
    and the default domain's opset they are written in."""
    from onnx import FunctionProto

    fn = FunctionProto()
    fn.ParseFromString(_schema(node, opset).get_function_with_opset_version(version))
    return list(fn.node), _body_opset(fn, opset)


def _body_opset(fn: Any, opset: int) -> int:
    return next((o.version for o in fn.opset_import if o.domain in ("", "ai.onnx")), opset)


def expand_function(node: Any, opset: int, input_types: Sequence[Any] | None,
                    prefix: str) -> tuple[list[Any], int] | None:
    """The nodes of ``node``'s function body, renamed into the caller's graph, and the default
    domain's opset they are written in; None when the operator has no function body.

    ``input_types``: TypeProtos of the node's inputs (needed by context-dependent functions);
    ``prefix`` makes the body's internal tensor names unique."""
    from onnx import FunctionProto

    version, ctx_dep = function_versions(node, opset)
    if version is None:
        return None
    schema = _schema(node, opset)
    full = _with_defaults(node, schema)
    if ctx_dep:
        if input_types is None:
            return None
        raw = schema.get_context_dependent_function_with_opset_version(
            version, full.SerializeToString(), [t.SerializeToString() for t in input_types])
    else:
        raw = schema.get_function_with_opset_version(version)
    fn = FunctionProto()
    fn.ParseFromString(raw)
    body_opset = _body_opset(fn, opset)

    names: dict[str, str] = {}
    for k, formal in enumerate(fn.input):
        names[formal] = node.input[k] if k < len(node.input) else ""
    for k, formal in enumerate(fn.output):
        if k < len(node.output) and node.output[k]:
            names[formal] = node.output[k]

    def rename(n: str) -> str:
        if n in names:
            return names[n]
        return "" if n == "" else prefix + n

    attrs = {a.name: a for a in full.attribute}
    for a in fn.attribute_proto:  # function-level attribute defaults (newer onnx)
        attrs.setdefault(a.name, a)
    return [_rename_node(inner, rename, attrs, prefix, k) for k, inner in
            enumerate(fn.node)], body_opset


def _rename_node(inner: Any, rename: Callable[[str], str], attrs: dict[str, Any],
                 prefix: str, k: int) -> Any:
    from onnx import AttributeProto, NodeProto

    new = NodeProto()
    new.CopyFrom(inner)
    new.ClearField("input")
    new.ClearField("output")
    new.ClearField("attribute")
    new.input.extend(rename(n) for n in inner.input)
    new.output.extend(rename(n) for n in inner.output)
    new.name = f"{prefix}{inner.name or inner.op_type + str(k)}"
    for at in inner.attribute:
        if at.ref_attr_name:
            if at.ref_attr_name in attrs:
                a = AttributeProto()
                a.CopyFrom(attrs[at.ref_attr_name])
                a.name = at.name
                new.attribute.append(a)
        elif at.type == AttributeProto.GRAPH:  # If/Scan bodies see the function's names
            g = AttributeProto()
            g.CopyFrom(at)
            _rename_graph(g.g, rename)
            new.attribute.append(g)
        else:
            new.attribute.append(at)
    return new


def _rename_graph(g: Any, rename: Callable[[str], str]) -> None:
    """Rename every tensor of a subgraph in place: its own names get the expansion's prefix
    like the body's, references to the function's tensors follow them."""
    from onnx import AttributeProto

    for vi in list(g.input) + list(g.output) + list(g.value_info):
        vi.name = rename(vi.name)
    for init in g.initializer:
        init.name = rename(init.name)
    for node in g.node:
        ins, outs = [rename(x) for x in node.input], [rename(x) for x in node.output]
        del node.input[:]
        node.input.extend(ins)
        del node.output[:]
        node.output.extend(outs)
        for at in node.attribute:
            if at.type == AttributeProto.GRAPH:
                _rename_graph(at.g, rename)
