"""Whether a converter's scalar / axes input is known only at run time (then the converter emits
a ``relay.op.dyn`` operator that reads it, instead of needing it as a constant)."""

from __future__ import annotations

from .context import ImportContext
from .registry import Names

__all__ = ["runtime_input"]


def runtime_input(ctx: ImportContext, names: Names, k: int) -> bool:
    """Input ``k`` is present and not a constant, and the import allows run-time shape-like
    inputs (``from_onnx(dynamic_inputs=False)`` keeps them import-time constants: the converter
    then raises ``OnnxConstantInputError`` as before)."""
    return (len(names) > k and bool(names[k]) and names[k] not in ctx.values
            and bool(getattr(ctx, "dynamic_inputs", True)))
