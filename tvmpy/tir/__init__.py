"""Loop IR: expressions, statements, buffers, PrimFunc, visitors, passes and the interpreter."""

from ..ir.node import register_printer as _register_printer
from .buffer import Buffer, decl_buffer  # noqa: F401
from .expr import *  # noqa: F401,F403
from .expr import cast  # noqa: F401
from .function import PrimFunc  # noqa: F401
from .functor import Mutator, Visitor, post_order_visit, substitute  # noqa: F401
from .op import *  # noqa: F401,F403
from .op import abs, all, any, max, min, pow, round  # noqa: F401,A004
from .packed import call_packed, call_packed_lowered  # noqa: F401
from .stmt import *  # noqa: F401,F403
from .stmt import is_no_op  # noqa: F401

_register_printer((PrimExpr, Stmt, Buffer, PrimFunc, Range, IterVar),  # noqa: F405
                  "tvmpy.tir.printer:astext")


def __getattr__(name: str):
    # passes, pipeline, analysis and interpreter load on first use (``tvm.tir.transform.X``)
    if name in ("transform", "pipeline", "analysis", "interpreter", "ir_builder", "stmt_functor"):
        import importlib

        if name == "stmt_functor":  # TVM's name for the visitor helpers (post_order_visit, ...)
            name = "functor"
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tvmpy.tir' has no attribute {name!r}")
