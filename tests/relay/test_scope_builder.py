"""``relay.ScopeBuilder`` as TVM's docs use it: let bindings, if/else scopes, ret, get; the built
function run by the debug interpreter and the VM against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay


def _branchy():
    x = relay.var("x", shape=(5,))
    y = relay.var("y", shape=(5,))
    sb = relay.ScopeBuilder()
    t = sb.let("t", relay.add(x, y))
    u = sb.let(("u", relay.TensorType((5,), "float32")), relay.multiply(t, relay.const(2.0)))
    with sb.if_scope(relay.greater(relay.sum(t), relay.const(0.0))):
        v = sb.let("v", relay.subtract(u, x))
        sb.ret(v)
    with sb.else_scope():
        sb.ret(relay.negative(u))
    body = sb.get()
    return relay.Function([x, y], body)


def _ref(a, b):
    t = a + b
    return 2 * t - a if t.sum() > 0 else -2 * t


def test_structure():
    f = _branchy()
    assert isinstance(f.body, relay.Let) and f.body.var.name_hint == "t"
    assert isinstance(f.body.body, relay.Let) and f.body.body.var.name_hint == "u"
    assert f.body.body.var.type_annotation is not None
    assert isinstance(f.body.body.body, relay.If)


@pytest.mark.parametrize("kind", ["debug", "vm"])
def test_runs_both_branches(kind):
    mod = tvm.IRModule.from_expr(_branchy())
    run = relay.create_executor(kind, mod=mod, target="llvm").evaluate()
    rng = np.random.default_rng(5)
    for sign in (1.0, -1.0):
        a = (sign * np.abs(rng.standard_normal(5)) + 0.1 * sign).astype("float32")
        b = (sign * np.abs(rng.standard_normal(5))).astype("float32")
        tvm.testing.assert_allclose(run(a, b).numpy(), _ref(a, b), rtol=1e-6)


def test_misuse_is_a_clear_error():
    x = relay.var("x", shape=(2,))
    sb = relay.ScopeBuilder()
    with pytest.raises(RuntimeError, match="no result"):
        sb.get()
    sb = relay.ScopeBuilder()
    with pytest.raises(RuntimeError, match="must directly follow an if_scope"):
        with sb.else_scope():
            pass
    sb = relay.ScopeBuilder()
    with sb.if_scope(relay.const(True)):
        sb.ret(x)
    with pytest.raises(RuntimeError, match="needs its else_scope"):
        sb.ret(x)
    sb = relay.ScopeBuilder()
    sb.ret(x)
    with pytest.raises(RuntimeError, match="already returned"):
        sb.ret(x)
    with pytest.raises(TypeError, match="relay expression"):
        relay.ScopeBuilder().let("a", np.ones(2))
