"""TVM 0.6/0.7 module names and small IRModule methods that old scripts use:
``tvm.topi.util``, ``tvm.contrib.debugger.debug_runtime``, ``IRModule.update_func``."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import relay, te


def test_topi_util_is_topi_utils():
    from tvmpy.topi import util, utils

    assert util.get_const_tuple is utils.get_const_tuple
    A = te.placeholder((3, 7), name="A")
    assert util.get_const_tuple(A.shape) == (3, 7)


def test_debug_runtime_is_debug_executor(tmp_path):
    from tvmpy.contrib.debugger import debug_executor, debug_runtime

    assert debug_runtime.create is debug_executor.create
    x = relay.var("x", shape=(2, 5))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.nn.relu(x) + relay.const(1.0)))
    lib = relay.build(mod, target="llvm")
    m = debug_runtime.create(lib.get_graph_json(), lib.get_lib(), tvm.cpu(0),
                             dump_root=str(tmp_path))
    a = np.random.default_rng(0).standard_normal((2, 5)).astype("float32")
    m.set_input("x", a)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), np.maximum(a, 0) + 1)


def test_irmodule_update_func():
    x = relay.var("x", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x + x))
    gv = mod.get_global_var("main")
    y = relay.var("y", shape=(3,))
    mod.update_func(gv, relay.Function([y], y * y))
    assert mod.get_global_var("main") is gv
    out = relay.create_executor("debug", mod=mod).evaluate()(np.array([1, 2, 3], "float32"))
    tvm.testing.assert_allclose(out.numpy(), [1, 4, 9])
