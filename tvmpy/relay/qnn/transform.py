"""``relay.qnn.transform``: CanonicalizeOps here, FakeQuantizationToInteger re-exported.

What it does
    CanonicalizeOps rewrites every ``qnn.*`` call with its operator's ``FTVMQnnCanonicalize``
    rule into integer (and, for the float-defined ones, float) arithmetic on standard relay
    operators, so that the rest of the pipeline never meets a QNN operator.
    FakeQuantizationToInteger (QDQ regions -> QNN ops) lives in its own module.

When valid
    Always: each rule computes the QNN operator's definition; an operator without a rule is
    refused (NotImplementedError), not left for a later pass to trip over.

Example
    before:  qnn.requantize(%x, 0.5f, 0, 0.25f, 3, out_dtype="int8")       (x: int32)
    after:   %4 = nearbyint(multiply(cast(subtract(%x, 0), dtype="float32"), divide(0.5f, 0.25f)));
             cast(clip(add(%4, cast(3, dtype="float32")), a_min=-128.0, a_max=127.0), dtype="int8")
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, Function, RelayExpr
from ..op.registry import Op
from ..transform.pass_infra import FunctionPass
from ..visitor import ExprMutator, ExprVisitor
from .fake_quantization_to_integer import FakeQuantizationToInteger

__all__ = ["CanonicalizeOps", "FakeQuantizationToInteger", "has_qnn_ops"]


class _Canonicalize(ExprMutator):
    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        if not (isinstance(c.op, Op) and c.op.name.startswith("qnn.")):
            return new
        rule = c.op.get_attr("FTVMQnnCanonicalize")
        if rule is None:
            raise NotImplementedError(f"{c.op.name} has no canonicalization")
        assert isinstance(new, Call)
        return rule(c.attrs, list(new.args), [a.checked_type for a in c.args])


class CanonicalizeOps(FunctionPass):
    """``relay.qnn.transform.CanonicalizeOps()``: every ``qnn.*`` call becomes integer (and, for
    the float-defined ones, float) arithmetic on standard relay operators."""

    def __init__(self) -> None:
        super().__init__(name="CanonicalizeOps", opt_level=0)

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        return _Canonicalize().visit(func)


class _HasQnn(ExprVisitor):
    found = False

    def visit_op(self, op: Op) -> None:
        if op.name.startswith("qnn."):
            self.found = True


def has_qnn_ops(mod: Any) -> bool:
    """Whether any relay function of ``mod`` calls a ``qnn.*`` operator."""
    for f in mod.functions.values():
        if isinstance(f, Function):
            v = _HasQnn()
            v.visit(f)
            if v.found:
                return True
    return False
