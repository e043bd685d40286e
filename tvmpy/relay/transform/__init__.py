"""Graph passes over IRModules (``relay.transform``), one concept per module, on the shared pass
infrastructure (:mod:`tvmpy.transform`: Pass / ModulePass / Sequential, gated by
``tvm.transform.PassContext``'s opt_level, required_pass and disabled_pass) and relay's
FunctionPass (``pass_infra``).

IR form the optimization passes assume (there is no ToBasicBlockNormalForm here): a pure
dataflow graph, i.e. every operator is side-effect free and deterministic, so a subexpression
may be shared, evaluated early (FoldConstant) or merged with an equal one (EliminateCommonSubexpr)
wherever it appears; ``Let`` is only a naming device (DeadCodeElimination drops unused ones), and
``If`` branches are pure too. Each pass returns a re-typed module (InferType ran on it).

Every pass module states what it does, when it is valid, and a short before/after example;
``layout_rules.py`` (each op's layout rule, registered once), ``layout_rewrite.py`` (the rewriter
ConvertLayout and AlterOpLayout share) and ``layout_demand.py`` (AlterOpLayout's demand analysis),
``pass_infra.py`` relay's pass kind.
"""

from __future__ import annotations

from ...ir.module import IRModule
from ...transform import ModulePass, Pass, PassContext, Sequential, module_pass, register_pass
from ..expr import Function, RelayExpr
from ..type_infer import TypeInferencer, infer_type
from .pass_infra import FunctionPass, function_pass

__all__ = [
    "InferType", "infer_type", "FuseAttention", "CopyViewsIntoTakes", "Pass", "ModulePass",
    "FunctionPass", "Sequential",
    "module_pass", "function_pass", "PassContext", "SimplifyInference", "FoldConstant",
    "EliminateCommonSubexpr", "DeadCodeElimination", "FoldScaleAxis", "BindParams",
    "bind_params_by_name", "AlterOpLayout", "SinkReshape", "FuseOps", "ConvTransposeToConv",
    "DropPaddingTaps", "SplitConcatConv", "PadChannels", "ConvertLayout", "LegalizeLayouts", "Legalize", "RemoveUnusedFunctions", "PrintIR",
    "WidenFloat16Accumulation", "ToMixedPrecision",
]  # fmt: skip


class InferType(Pass):
    """``relay.transform.InferType()(mod)``: types every function; returns the (typed) module.
    Types are recorded on the nodes (``checked_type``), so the same module object is returned."""

    def __init__(self) -> None:
        super().__init__("InferType", 0)

    def __call__(self, mod: IRModule) -> IRModule:
        if isinstance(mod, RelayExpr):
            raise TypeError("InferType runs on an IRModule; use relay.transform.infer_type(expr)")
        return super().__call__(mod)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        inf = TypeInferencer(mod)
        for f in mod.functions.values():
            if isinstance(f, Function):  # tir PrimFuncs of the module are typed already
                inf.visit(f)
        return mod


register_pass("InferType", InferType)


def PrintIR(show_meta_data: bool = True) -> Pass:
    """TVM v0.6's ``relay.transform.PrintIR(show_meta_data=True)``: a pass printing the module
    (later versions: ``tvm.transform.PrintIR(header, show_meta_data)``, the same pass)."""
    from ...transform import PrintIR as _print_ir

    return _print_ir("relay.transform.PrintIR", show_meta_data=show_meta_data)

from .alter_op_layout import AlterOpLayout  # noqa: E402
from .bind_params import BindParams, bind_params_by_name  # noqa: E402
from .conv_transpose import ConvTransposeToConv  # noqa: E402
from .convert_layout import ConvertLayout, LegalizeLayouts  # noqa: E402
from .dead_code import DeadCodeElimination, RemoveUnusedFunctions  # noqa: E402
from .drop_padding_taps import DropPaddingTaps  # noqa: E402
from .eliminate_common_subexpr import EliminateCommonSubexpr  # noqa: E402
from .float16_accumulation import WidenFloat16Accumulation  # noqa: E402
from .fold_constant import FoldConstant  # noqa: E402
from .fold_scale_axis import FoldScaleAxis  # noqa: E402
from .fuse_attention import FuseAttention  # noqa: E402
from .fuse_ops import FuseOps  # noqa: E402
from .legalize import Legalize  # noqa: E402
from .mixed_precision import ToMixedPrecision  # noqa: E402
from .pad_channels import PadChannels  # noqa: E402
from .simplify_inference import SimplifyInference  # noqa: E402
from .sink_reshape import SinkReshape  # noqa: E402
from .split_concat_conv import SplitConcatConv  # noqa: E402
from .take_views import CopyViewsIntoTakes  # noqa: E402

for _p in (SimplifyInference, FoldConstant, EliminateCommonSubexpr, DeadCodeElimination,
           FoldScaleAxis, AlterOpLayout, SinkReshape, DropPaddingTaps, SplitConcatConv, PadChannels,
           FuseAttention, CopyViewsIntoTakes, WidenFloat16Accumulation, ToMixedPrecision):
    register_pass(_p.__name__, _p)
register_pass("FuseOps", FuseOps)
