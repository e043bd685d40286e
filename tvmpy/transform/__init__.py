"""The pass infrastructure shared by every IR level (TVM's ``tvm.transform``).

``Pass`` / ``ModulePass`` / ``Sequential`` / ``PassInfo`` (:mod:`.passes`) run on an
:class:`~tvmpy.ir.module.IRModule`; ``PassContext`` (:mod:`.context`) holds the options they run
under, per thread; ``PassTrace`` (:mod:`.instrument`) is the DUMP_IR / DEBUG helper of the
pipelines. The level-specific pass kinds live with their IR: ``tvm.tir.transform.PrimFuncPass``
(``prim_func_pass``) and ``tvm.relay.transform.FunctionPass`` (``function_pass``). This package
imports neither relay nor tir.
"""

from .context import PassContext
from .instrument import PassTrace
from .passes import (
    ModulePass,
    Pass,
    PassInfo,
    PrintIR,
    Sequential,
    module_pass,
    register_pass,
)

__all__ = ["PassContext", "PassInfo", "Pass", "ModulePass", "Sequential", "module_pass",
           "register_pass", "PassTrace", "PrintIR"]
