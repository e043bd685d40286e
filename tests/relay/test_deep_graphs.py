"""Relay graphs far deeper than Python's recursion limit (10,000 chained operator calls) go
through printing, type inference, visitors and mutators, the interpreter, FuseOps and
relay.build at opt_level 3, and run: every traversal is iterative (ir.functor)."""

import sys

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.visitor import ExprMutator, ExprVisitor

pytestmark = pytest.mark.usefixtures("default_recursion_limit")  # tests/conftest.py

CALLS = 10_000  # chained operator calls: x -> relu -> add 1 -> relu -> add 1 -> ...


def _chain() -> relay.Function:
    x = relay.var("x", shape=(4,))
    y = x
    for _ in range(CALLS // 2):
        y = relay.add(relay.nn.relu(y), relay.const(1.0))
    return relay.Function([x], y)


def _chain_ref(x: np.ndarray) -> np.ndarray:
    for _ in range(CALLS // 2):
        x = np.maximum(x, 0) + np.float32(1)
    return x


def _diamonds(n: int) -> relay.Function:
    """Wide and deep: each level uses the previous one twice and the one before once (a DAG
    whose nodes are shared), with a tuple of the last levels at the end."""
    x = relay.var("x", shape=(3,))
    prev, cur = x, relay.nn.relu(x)
    levels = [cur]
    for _ in range(n):
        prev, cur = cur, relay.add(relay.multiply(cur, relay.const(0.5)), relay.negative(prev))
        levels.append(cur)
    return relay.Function([x], relay.Tuple(levels[-3:]))


def _diamonds_ref(x: np.ndarray, n: int) -> list[np.ndarray]:
    prev, cur = x, np.maximum(x, 0)
    levels = [cur]
    for _ in range(n):
        prev, cur = cur, cur * np.float32(0.5) - prev
        levels.append(cur)
    return levels[-3:]


@pytest.fixture(scope="module")
def typed_chain(default_recursion_limit):
    return relay.transform.InferType()(tvm.IRModule.from_expr(_chain()))


def test_deeper_than_the_recursion_limit():
    assert CALLS > 5 * sys.getrecursionlimit()


def test_print_deep_chain():
    text = _chain().astext(show_types=False)
    assert text.count("nn.relu(") == CALLS // 2 and text.count("add(") == CALLS // 2
    assert f"%{CALLS - 2} = nn.relu(%{CALLS - 3})" in text


def test_infer_type_deep_chain(typed_chain):
    body = typed_chain["main"].body
    assert str(body.checked_type) == str(relay.TensorType((4,), "float32"))
    assert body.args[0].checked_type is not None


def test_visitor_and_mutator_deep_chain(typed_chain):
    class Count(ExprVisitor):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def visit_call(self, c):
            self.calls += 1
            super().visit_call(c)

    class ReluToSigmoid(ExprMutator):
        def visit_call(self, c):
            new = super().visit_call(c)
            return relay.sigmoid(new.args[0]) if c.op.name == "nn.relu" else new

    func = typed_chain["main"]
    counter = Count()
    counter.visit(func)
    assert counter.calls == CALLS
    out = ReluToSigmoid().visit(func)
    assert out.astext(show_types=False).count("sigmoid(") == CALLS // 2


def test_fuse_deep_chain(typed_chain):
    with tvm.transform.PassContext(opt_level=3):
        fused = relay.transform.FuseOps()(typed_chain)
    text = fused.astext(show_types=False)
    groups = text.count("Primitive=1")
    assert 0 < groups < CALLS // 10  # long elementwise runs, bounded by relay.FuseOps.max_depth
    assert text.count("nn.relu(") == CALLS // 2
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.max_depth": CALLS}):
        few = relay.transform.FuseOps()(typed_chain)  # groups thousands of calls deep
    assert few.astext(show_types=False).count("Primitive=1") <= 2


def test_interpreter_deep_chain():
    x = np.random.default_rng(1).standard_normal(4).astype("float32")
    run = relay.create_executor("debug", mod=tvm.IRModule.from_expr(_chain())).evaluate()
    np.testing.assert_allclose(np.asarray(run(x)), _chain_ref(x), rtol=1e-5)


def test_build_and_run_deep_chain():
    mod = tvm.IRModule.from_expr(_chain())
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    x = np.random.default_rng(0).standard_normal(4).astype("float32")
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), _chain_ref(x), rtol=1e-5)


def test_wide_and_deep_dag():
    # 3 calls a level, each level used by two: the post-dominator of every level is the output
    # tuple, thousands of nodes on (FuseOps' max_depth count stops at the limit: linear)
    n = 5_000
    mod = tvm.IRModule.from_expr(_diamonds(n))
    text = relay.transform.InferType()(mod).astext()
    assert text.count("negative(") == n
    assert relay.analysis.free_vars(mod["main"].body)[0].name_hint == "x"
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    x = np.array([0.5, -1.0, 2.0], dtype="float32")
    m.set_input("x", x)
    m.run()
    for k, want in enumerate(_diamonds_ref(x, n)):
        np.testing.assert_allclose(m.get_output(k).numpy(), want, rtol=1e-4, atol=1e-4)


def _two_uses(n: int) -> relay.Function:
    """x_{k+1} = relu(x_k) - x_{k-1}: every level used twice, one output."""
    x = relay.var("x", shape=(5,))
    prev, cur = x, relay.nn.relu(x)
    for _ in range(n):
        prev, cur = cur, relay.subtract(relay.nn.relu(cur), prev)
    return relay.Function([x], cur)


def _two_uses_ref(x: np.ndarray, n: int) -> np.ndarray:
    prev, cur = x, np.maximum(x, 0)
    for _ in range(n):
        prev, cur = cur, np.maximum(cur, 0) - prev
    return cur


def test_fuse_two_uses_per_node():
    # every level's post-dominator is the output, 10,000 calls on: the max_depth count stops at
    # the limit (was a walk to the output per node, quadratic)
    n = 5_000
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(_two_uses(n)))
    with tvm.transform.PassContext(opt_level=3):
        fused = relay.transform.FuseOps()(mod)
    text = fused.astext(show_types=False)
    assert text.count("nn.relu(") == n + 1 and text.count("subtract(") == n
    assert 0 < text.count("Primitive=1") < n


def test_build_two_uses_per_node():
    # small groups: inlining a group of this DAG into one kernel doubles its expression per
    # level (TE's compute_inline expands shared values), so the group depth is kept low here
    n = 5_000
    mod = tvm.IRModule.from_expr(_two_uses(n))
    with tvm.transform.PassContext(opt_level=3, config={"relay.FuseOps.max_depth": 8}):
        lib = relay.build(mod, target="llvm")
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    x = np.array([0.5, -1.0, 2.0, 1.5, -0.25], dtype="float32")
    m.set_input("x", x)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), _two_uses_ref(x, n), rtol=1e-5)
