"""What onnxruntime refuses when it loads a model is refused before import, naming the node and
the attribute (``check_model``, called by ``from_onnx``):

- a ModelProto without a graph (an empty or non-ONNX file parses as one);
- per node of a standard domain, against the operator's schema of the model's opset: attributes
  the operator does not have, attributes of the wrong type (``Softmax axis=1.5``, ``Transpose
  perm="abc"``), required attributes missing; then the rest of ``onnx.checker.check_node``;
- ONNX shape and type inference in strict mode: type constraints (an int32 ``QuantizeLinear``
  zero point), attribute values against the input ranks (``Gather axis=7`` on a rank-2 input),
  inconsistent shapes. As in onnxruntime, a declared output or value_info *shape* that
  disagrees with the inferred one is not an error (the declared shapes are left out); types
  are checked.

Errors are ``OnnxValidationError`` (a ValueError), one line naming each problem (the first 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .context import OnnxConvertError

__all__ = ["check_model", "OnnxValidationError", "node_label"]

_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
# attributes accepted beyond the installed onnx's schema (onnx's reference evaluator has them)
_EXTENSION_ATTRIBUTES = {("SpaceToDepth", "mode")}


class OnnxValidationError(OnnxConvertError):
    """The model is not valid ONNX (what onnxruntime refuses to load)."""


def node_label(node: Any, index: int) -> str:
    """``Gather node 'g1'``, or for an unnamed node ``Gather node #3 (output 'y')``."""
    if node.name:
        return f"{node.op_type} node {node.name!r}"
    out = next((o for o in node.output if o), None)
    return f"{node.op_type} node #{index}" + (f" (output {out!r})" if out else "")


def _attr_type_name(t: int) -> str:
    from onnx import AttributeProto

    try:
        return AttributeProto.AttributeType.Name(t)
    except ValueError:
        return f"type {t}"


def _attr_value_text(at: Any) -> str:
    from onnx import helper

    try:
        v = helper.get_attribute_value(at)
    except Exception:  # noqa: BLE001 - an undecodable value: describe it by its type only
        return ""
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    text = repr(v) if isinstance(v, (int, float, str, list)) else type(v).__name__
    return f" {text[:60]}"


def _walk(graph: Any, where: str = "") -> Iterator[tuple[str, int, Any]]:
    """(path prefix, index, node) of every node, those of subgraphs (If/Loop/Scan) included."""
    todo = [(where, graph)]
    while todo:
        prefix, g = todo.pop()
        for k, node in enumerate(g.node):
            yield prefix, k, node
            for at in node.attribute:
                subs = [at.g] if at.HasField("g") else list(at.graphs)
                for sub in subs:
                    todo.append((f"{prefix}{node_label(node, k)} > {at.name} > ", sub))


def _schema(node: Any, opsets: dict[str, int]) -> Any:
    from onnx import defs

    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    if domain not in _STANDARD_DOMAINS or domain not in opsets:
        return None
    try:
        return defs.get_schema(node.op_type, opsets[domain], domain)
    except defs.SchemaError:
        return None  # no such operator: the importer lists it as unsupported


def _later_version(node: Any, opsets: dict[str, int]) -> int | None:
    """The opset that added a standard operator the model's (older) opset does not have."""
    from onnx import defs

    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    if domain not in _STANDARD_DOMAINS or domain not in opsets:
        return None
    for version in range(opsets[domain] + 1, defs.onnx_opset_version() + 1):
        try:
            return int(defs.get_schema(node.op_type, version, domain).since_version)
        except defs.SchemaError:
            continue
    return None


def _check_attributes(label: str, node: Any, schema: Any, version: int) -> list[str]:
    from onnx import AttributeProto

    errors = []
    known = schema.attributes
    seen = set()
    for at in node.attribute:
        seen.add(at.name)
        if at.ref_attr_name:
            continue  # a reference to an attribute of the enclosing function
        spec = known.get(at.name)
        if spec is None and (node.op_type, at.name) in _EXTENSION_ATTRIBUTES:
            continue
        if spec is None:
            names = ", ".join(sorted(known)) or "none"
            errors.append(f"{label}: unknown attribute {at.name!r} ({node.op_type} of opset "
                          f"{version} has: {names})")
        elif at.type != AttributeProto.UNDEFINED and at.type != int(spec.type):
            errors.append(f"{label}: attribute {at.name!r} must be of type "
                          f"{_attr_type_name(int(spec.type))}, got {_attr_type_name(at.type)}"
                          f"{_attr_value_text(at)}")
    for name, spec in known.items():
        if spec.required and name not in seen:
            errors.append(f"{label}: missing required attribute {name!r}")
    return errors


def _checker_context(model: Any, opsets: dict[str, int]) -> Any:
    from onnx import checker

    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version or checker.DEFAULT_CONTEXT.ir_version
    ctx.opset_imports = dict(opsets)
    return ctx


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.split("\n")[0].strip() if text else type(e).__name__


def _check_nodes(model: Any, opsets: dict[str, int]) -> list[str]:
    from onnx import checker

    errors: list[str] = []
    ctx = _checker_context(model, opsets)
    for prefix, k, node in _walk(model.graph):
        schema = _schema(node, opsets)
        label = prefix + node_label(node, k)
        if schema is None:
            later = _later_version(node, opsets)
            if later is not None:
                domain = "" if node.domain == "ai.onnx" else node.domain
                errors.append(f"{label}: {node.op_type} is not an operator of opset "
                              f"{opsets[domain]} (it was added in opset {later})")
            continue
        found = _check_attributes(label, node, schema, opsets[schema.domain])
        errors += found
        if found or any(at.HasField("g") or at.graphs or at.ref_attr_name
                        or (node.op_type, at.name) in _EXTENSION_ATTRIBUTES
                        for at in node.attribute):
            continue  # subgraphs are checked node by node; references only inside functions
        try:
            checker.check_node(node, ctx)
        except checker.ValidationError as e:
            errors.append(f"{label}: {_first_line(e)}")
    return errors


_INFERENCE_LINE = re.compile(r"\(op_type:([\w.]+)(?:, node name: ([^)]*))?\):\s*(.*)")


def _inference_errors(model: Any) -> list[str]:
    """Strict ONNX shape/type inference on a copy of the model whose unnamed nodes are named
    ``#k`` (so that errors say which node) and whose declared output and value_info shapes are
    left out (onnxruntime only warns about those)."""
    from onnx import checker, shape_inference

    m = _skeleton(model)
    labels: dict[str, str] = {}
    nodes: dict[str, Any] = {}
    for k, node in enumerate(m.graph.node):
        if not node.name:
            node.name = f"#{k}"
        labels[node.name] = node_label(model.graph.node[k], k)
        nodes[node.name] = node
    del m.graph.value_info[:]
    for out in m.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    try:
        shape_inference.infer_shapes(m, check_type=True, strict_mode=True)
    except (shape_inference.InferenceError, checker.ValidationError, RuntimeError) as e:
        errors = []
        for line in str(e).splitlines():
            line = line.strip()
            hit = _INFERENCE_LINE.search(line)
            if hit:
                op, name, msg = hit.groups()
                if "Inference error(s)" in msg:
                    continue  # in the operator's ONNX function body: onnx's problem, not the model's
                msg = re.sub(r"^(\[\w+\]\s*)+", "", msg).strip()
                msg = re.sub(r"\((\d+)\) vs \((\d+)\)", _elem_types, msg)
                label = labels.get(name or "", f"{op} node {name!r}" if name else f"{op} node")
                errors.append(f"{label}: {msg}{_named_attributes(nodes.get(name or ''), msg)}")
        return errors if errors or "(op_type:" in str(e) else [_first_line(e)]
    except ValueError:
        return []  # a model over protobuf's 2 GiB: not inferred (onnx cannot serialize it)
    return []


_SMALL_INITIALIZER = 4096  # elements: larger weights are given to inference by type only


def _copy_fields(dst: Any, src: Any, skip: str) -> None:
    """Copy every field of the protobuf message ``src`` into ``dst`` except ``skip``."""
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        repeated = (field.is_repeated if hasattr(field, "is_repeated")  # protobuf >= 5.29
                    else field.label == field.LABEL_REPEATED)
        if repeated:
            getattr(dst, field.name).extend(value)
        elif field.message_type is not None:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def _skeleton(model: Any) -> Any:
    """A copy of ``model`` for inference without its large weights: each initializer of more
    than ``_SMALL_INITIALIZER`` elements becomes a graph input of its type and shape (the
    values inference reads, shapes and axes, are small), so validating costs no copy of them."""
    from onnx import ModelProto, helper

    m = ModelProto()
    _copy_fields(m, model, "graph")
    _copy_fields(m.graph, model.graph, "initializer")
    declared = {vi.name for vi in model.graph.input}
    for init in model.graph.initializer:
        size = 1
        for d in init.dims:
            size *= d
        if size <= _SMALL_INITIALIZER:
            m.graph.initializer.append(init)
        elif init.name not in declared:
            m.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type,
                                                               list(init.dims)))
    return m


def _elem_types(hit: re.Match) -> str:
    """``(1) vs (7)`` of an inference message -> ``float32 vs int64``."""
    from onnx import helper

    try:
        return " vs ".join(str(helper.tensor_dtype_to_np_dtype(int(t))) for t in hit.groups())
    except (KeyError, ValueError, TypeError):
        return hit.group(0)


def _named_attributes(node: Any, msg: str) -> str:
    """`` (axis=7)``: the values of the node's attributes the message names."""
    from onnx import helper

    if node is None:
        return ""
    shown = []
    for at in node.attribute:
        if re.search(rf"\b{re.escape(at.name)}\b", msg) and not (at.HasField("g") or at.graphs):
            v = helper.get_attribute_value(at)
            shown.append(f"{at.name}={v.decode() if isinstance(v, bytes) else v}")
    return f" ({', '.join(shown)})" if shown else ""


def check_model(model: Any) -> None:
    """Raise ``OnnxValidationError`` naming every node whose attributes or types are invalid
    (see the module docstring); return None for a valid model."""
    from onnx import ModelProto

    if not isinstance(model, ModelProto):
        raise TypeError(f"from_onnx: expected an onnx.ModelProto, got {type(model).__name__}")
    if not model.HasField("graph") or not (model.graph.node or model.graph.output):
        raise OnnxValidationError("not an ONNX model: it has no graph (an empty file, or not an "
                                  "ONNX file?)")
    opsets: dict[str, int] = {}
    for o in model.opset_import:
        opsets["" if o.domain == "ai.onnx" else o.domain] = int(o.version)
    if "" not in opsets and any(n.domain in ("", "ai.onnx") for n in model.graph.node):
        raise OnnxValidationError("invalid ONNX model: it imports no opset of the default "
                                  "domain (opset_import), so its operators' versions are unknown")
    errors = _check_nodes(model, opsets)
    if not errors:
        errors = _inference_errors(model)
    if errors:
        more = f"; ... and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise OnnxValidationError("invalid ONNX model: " + "; ".join(errors[:5]) + more)
