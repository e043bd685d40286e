"""Relay: the graph-level IR (the paper's high-level dataflow graph).

    from tvmpy import relay
    x = relay.var("x", shape=(1, 3, 8, 8)); w = relay.var("w", shape=(4, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    mod = relay.transform.InferType()(mod); print(mod)

Modules: ``ty`` (types), ``expr`` (nodes), ``op`` (registry and operator constructors),
``type_infer``, ``printer``, ``visitor`` (ExprVisitor/ExprMutator), ``analysis``, ``module``,
``transform`` (passes), ``interpreter`` (the numpy reference: ``create_executor("debug")``),
``testing`` (ResNet/MobileNetV2/BERT workloads with random weights).
"""

from ..runtime.param_dict import load_param_dict, save_param_dict  # noqa: F401
from . import (  # noqa: F401
    analysis,
    build_module,
    frontend,
    op,
    qnn,  # noqa: E402,F401  (after relay.op: registers the qnn.* operators)
    transform,
)
from .build_module import (
    build,  # noqa: F401
    build_config,  # noqa: F401  (TVM 0.6/0.7 name of PassContext)
)
from .expr import (  # noqa: F401
    Attrs,
    Call,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    RelayExpr,
    RelayTypeError,
    Tuple,
    TupleGetItem,
    Var,
    const,
    var,
)
from .interpreter import create_executor  # noqa: F401
from .module import IRModule  # noqa: F401
from .op import image, nn, vision  # noqa: F401
from .op.data_dependent import argwhere, compress, unique  # noqa: F401
from .op.reduce import *  # noqa: F401,F403
from .op.tensor import *  # noqa: F401,F403
from .op.transform import *  # noqa: F401,F403
from .scope_builder import ScopeBuilder  # noqa: F401
from .ty import Any, FuncType, ListType, TensorType, TupleType, Type, scalar_type  # noqa: F401
from .visitor import ExprMutator, ExprVisitor, post_order_visit  # noqa: F401

Module = IRModule  # TVM 0.6's spelling of relay.IRModule
from . import quantize, vm  # noqa: F401,E402  (relay.quantize; relay.vm: the virtual machine)
