"""Whether a converter's scalar / axes input is known only at run time (then the converter emits
a ``relay.op.dyn`` operator that reads it, instead of needing it as a constant)."""

from __future__ import annotations

from ...expr import RelayExpr
from .context import ImportContext
from .registry import Names

__all__ = ["runtime_input", "expand_here"]


def runtime_input(ctx: ImportContext, names: Names, k: int) -> bool:
    """Input ``k`` is present and not a constant, and the import allows run-time shape-like
    inputs (``from_onnx(dynamic_inputs=False)`` keeps them import-time constants: the converter
    then raises ``OnnxConstantInputError`` as before)."""
    return (len(names) > k and bool(names[k]) and names[k] not in ctx.values
            and bool(getattr(ctx, "dynamic_inputs", True)))


def expand_here(ctx: ImportContext) -> list[RelayExpr]:
    """The current node converted by expanding its ONNX function body in place (what the
    importer does for an operator without a converter): the static form of an operator whose
    converter handles only its run-time-shape form."""
    from .context import OnnxConstantInputError
    from .functions import expand_function
    from .importer import _outer_sources, _type_proto, convert_nodes

    node, opset = ctx.node, ctx.opset
    types = [_type_proto(ctx.exprs[nm]) if nm else None for nm in node.input]
    if any(t is None for t in types):
        from onnx import TypeProto

        types = [t if t is not None else TypeProto() for t in types]
    ctx.expansions += 1
    expanded = expand_function(node, opset, types,
                               f"{node.name or node.op_type}__fn{ctx.expansions}__")
    if expanded is None:
        raise ctx.fail("has no function body to expand")
    body, body_opset = expanded
    try:
        convert_nodes(ctx, body, body_opset)
    except OnnxConstantInputError as e:  # name the node's inputs the body's tensors come from
        raise OnnxConstantInputError(str(e), *_outer_sources(body, e.tensors)) from None
    finally:
        ctx.node, ctx.opset = node, opset
    return [ctx.exprs[o] for o in node.output if o]
