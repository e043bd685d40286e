"""``gv(x)`` on a relay GlobalVar builds ``relay.Call(gv, [x])`` (TVM's GlobalVar.__call__):
a module whose main calls another global function, run against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay


def _module():
    x = relay.var("x", shape=(7, 3))
    w = relay.var("w", shape=(3,))
    mod = tvm.IRModule()
    scale = relay.GlobalVar("scale")
    mod[scale] = relay.Function([x, w], relay.nn.relu(x * w))
    y = relay.var("y", shape=(7, 3))
    v = relay.var("v", shape=(3,))
    call = scale(y, v)
    assert isinstance(call, relay.Call) and call.op is scale and list(call.args) == [y, v]
    mod["main"] = relay.Function([y, v], scale(call, v) + relay.const(1.0))
    return mod


@pytest.mark.parametrize("executor", ["vm", "debug"])
def test_call_global_var_runs(executor):
    mod = relay.transform.InferType()(_module())
    assert str(mod["main"].body.checked_type) == str(relay.TensorType((7, 3), "float32"))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 3)).astype("float32")
    w = rng.standard_normal(3).astype("float32")
    out = relay.create_executor(executor, mod=mod, target="llvm").evaluate()(a, w)
    ref = np.maximum(np.maximum(a * w, 0) * w, 0) + 1
    tvm.testing.assert_allclose(np.asarray(out.numpy() if hasattr(out, "numpy") else out), ref,
                                rtol=1e-5)


def test_call_global_var_rejects_non_relay_arguments():
    gv = relay.GlobalVar("f")
    with pytest.raises(TypeError, match="GlobalVar @f.*relay expressions"):
        gv(np.ones(3))
    with pytest.raises(TypeError, match="GlobalVar @f"):
        tvm.ir.GlobalVar("f")(3)
