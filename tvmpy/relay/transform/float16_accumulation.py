"""WidenFloat16Accumulation: float16 products and sums accumulate in float32, rounded once.

What it does
Every call of an operator registered with ``register_float16_accumulation`` (the per-operator
attribute ``TFloat16Accumulation`` of ``relay/op/registry.py``, set beside each operator's
registration: convolutions, dense / matmul / batch_matmul, softmax / log_softmax, sum / mean /
prod / variance) whose result is float16 becomes the same call on float32 operands, its result
cast to float16 once: ``op(a, b)`` -> ``cast(op(cast(a, f32), cast(b, f32)), f16)``. An
``nn.bias_add`` (kind "epilogue") whose data is such a widened result is added in float32
before that one rounding. This is what onnxruntime (its CPU provider computes float16 Conv,
Gemm, MatMul, reductions in float32), torch's CPU kernels (float32 ``opmath`` accumulators,
the bias of conv2d / addmm added before rounding) and numpy do; a float16 accumulator drifts by
whole percents over a few hundred terms. Both frontends (ONNX, PyTorch) run it on the module
they return (``widen_imported``), unless the current PassContext lists it in ``disabled_pass``;
it is not part of relay.build, and ``topi.sum`` of float16 accumulates in float16
as TVM's does (cast first for more).

When valid
Always: it only changes rounding (to fewer, later roundings). A call with an explicit non-float16
``out_dtype`` is left alone (its accumulator is chosen already); calls whose result is not
float16 are untouched, so a float32 module comes back as the same object (no kernel changes).
A bias_add is widened only as the epilogue of a widened call, never a plain ``add``: the pass
does not know where a source model's node ends (torch's ``x @ w + b`` rounds between the two).

Example
    before:  %0 = nn.conv2d(%x, %w) /* f16 */; nn.bias_add(%0, %b) /* f16 */
    after:   %0 = nn.conv2d(cast(%x, "float32"), cast(%w, "float32"));
             cast(nn.bias_add(%0, cast(%b, "float32")), "float16")
"""

from __future__ import annotations

from typing import Any

from ...ir.module import IRModule
from ...transform import Pass, PassContext
from ..expr import Call, Function, RelayExpr
from ..op import transform as _tf
from ..op.registry import FLOAT16_ACCUMULATION, Op
from ..visitor import ExprMutator

__all__ = ["WidenFloat16Accumulation", "widen_float16_accumulation", "widen_imported"]

_F16, _F32 = "float16", "float32"


def _dtype(e: RelayExpr) -> str:
    return str(getattr(e.checked_type, "dtype", ""))


class _Widen(ExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.narrowed: dict[int, RelayExpr] = {}  # id(cast to f16 made here) -> its f32 source

    def _narrow(self, wide: RelayExpr) -> RelayExpr:
        out = _tf.cast(wide, _F16)
        self.narrowed[id(out)] = wide
        return out

    def visit_call(self, c: Call) -> RelayExpr:
        new = super().visit_call(c)
        kind = c.op.get_attr(FLOAT16_ACCUMULATION) if isinstance(c.op, Op) else None
        if kind is None or _dtype(c) != _F16:
            return new
        attrs: dict[str, Any] = dict(c.attrs.items()) if c.attrs is not None else {}
        if attrs.get("out_dtype") not in (None, "", _F16):
            return new
        if "out_dtype" in attrs:
            attrs["out_dtype"] = ""
        args = list(new.args)
        if kind == "epilogue":
            wide = self.narrowed.get(id(args[0]))
            if wide is None:
                return new
            args[0] = wide
        args = [a if kind == "epilogue" and i == 0 or _dtype(o) != _F16 else _tf.cast(a, _F32)
                for i, (a, o) in enumerate(zip(args, c.args))]
        return self._narrow(Call(new.op, args, attrs))


def widen_float16_accumulation(func: Function) -> Function:
    """``func`` (type-checked) with its float16 accumulating calls computed in float32 (the
    same object when it has none)."""
    return _Widen().visit(func)


class WidenFloat16Accumulation(Pass):
    """``WidenFloat16Accumulation()(mod)``: every relay function of ``mod`` widened (see the
    module docstring); ``mod`` itself when nothing changes, else the re-typed new module."""

    def __init__(self) -> None:
        super().__init__("WidenFloat16Accumulation", 0)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from . import InferType

        mod = InferType()(mod)
        out, changed = IRModule(), False
        for gv, func in mod.items():
            if isinstance(func, Function) and not func.attrs.get("Primitive"):
                new = widen_float16_accumulation(func)
                changed = changed or new is not func
                func = new
            out[gv] = func
        return InferType()(out) if changed else mod


def widen_imported(mod: IRModule) -> IRModule:
    """What the frontends run on the (typed) module they return: the pass, unless the current
    PassContext disables it (``disabled_pass=["WidenFloat16Accumulation"]``: float16
    accumulators, as TVM's importers give)."""
    p = WidenFloat16Accumulation()
    return p(mod) if PassContext.current().pass_enabled(p.name, p.opt_level) else mod
