"""dense / batch_matmul at sizes that are not multiples of the vector width or the register
tile (issue 12): relay.build at opt_level 3 for llvm, checked against numpy on random inputs.

The x86 path packs B into 32- (16-) column panels; a partial last panel is zero-padded (at
compile time for a constant weight), the product is computed over whole panels and cropped.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.transform import AlterOpLayout, FoldConstant, InferType

RNG = np.random.default_rng(12)


def _build_run(func: relay.Function, inputs: dict[str, np.ndarray]) -> np.ndarray:
    mod = relay.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in inputs.items():
        g.set_input(k, v)
    g.run()
    return g.get_output(0).numpy()


def _altered(func: relay.Function) -> str:
    mod = relay.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=3), tvm.target.Target("llvm"):
        return str(FoldConstant()(AlterOpLayout()(InferType()(mod))))


def _u(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype("float32")


# m, k, n: primes, 1, non-multiples of 32 / 16 / 8, and one multiple (no padding)
DENSE = [(17, 37, 41), (16, 5, 1), (33, 129, 97), (67, 64, 131), (19, 23, 64), (40, 513, 33)]


@pytest.mark.parametrize("m,k,n", DENSE)
def test_dense_constant_weight_with_bias_relu(m, k, n):
    """A constant weight of any N is packed (padded when needed) and the bias + relu epilogue
    is fused on the cropped product."""
    x = relay.var("x", shape=(m, k))
    w, b = _u(n, k), _u(n)
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, relay.const(w)), relay.const(b)))
    func = relay.Function([x], y)
    text = _altered(func)
    assert "nn.contrib_dense_pack" in text and f"units={n}" in text
    xv = _u(m, k)
    got = _build_run(func, {"x": xv})
    np.testing.assert_allclose(got, np.maximum(xv @ w.T + b, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(17, 37, 41), (16, 5, 1), (33, 129, 97), (1, 37, 300),
                                   (3, 8, 33)])
def test_matmul_weight_as_input(m, k, n):
    """ONNX MatMul with B a graph input: dense(A, transpose(B)) becomes matmul(A, B) (B
    packed inside the kernel, or read in place for one row)."""
    a, bm = relay.var("a", shape=(m, k)), relay.var("b", shape=(k, n))
    y = relay.add(relay.nn.dense(a, relay.transpose(bm, (1, 0))), relay.const(1.5))
    av, bv = _u(m, k), _u(k, n)
    got = _build_run(relay.Function([a, bm], y), {"a": av, "b": bv})
    np.testing.assert_allclose(got, av @ bv + 1.5, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(1, 512, 1000), (1, 37, 1021), (3, 300, 97), (9, 17, 33),
                                   (2, 1, 1023), (1, 1, 1), (2, 131, 1)])
def test_dense_few_rows(m, k, n):
    """Few rows by a constant weight (a GEMV: packed at compile time, K split into partial
    sums; K = 1 and N = 1 included)."""
    x = relay.var("x", shape=(m, k))
    w = _u(n, k)
    xv = _u(m, k)
    got = _build_run(relay.Function([x], relay.nn.dense(x, relay.const(w))), {"x": xv})
    np.testing.assert_allclose(got, xv @ w.T, rtol=1e-4, atol=1e-4)


# (batch A, batch B, m, k, n)
BMM = [(3, 3, 19, 23, 37), (12, 12, 17, 16, 31), (4, 1, 33, 9, 65), (1, 3, 16, 7, 33),
       (2, 2, 5, 64, 127), (2, 2, 24, 40, 64)]


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("ba,bb,m,k,n", BMM)
def test_batch_matmul_any_shape(ba, bb, m, k, n, transpose_b):
    """batch_matmul with B [b, K, N] or [b, N, K], a broadcast batch, and a fused epilogue."""
    a = relay.var("a", shape=(ba, m, k))
    b = relay.var("b", shape=(bb, n, k) if transpose_b else (bb, k, n))
    bias = _u(n)
    y = relay.nn.relu(relay.add(relay.nn.batch_matmul(a, b, transpose_b=transpose_b),
                                relay.const(bias)))
    av, bv = _u(ba, m, k), _u(*((bb, n, k) if transpose_b else (bb, k, n)))
    got = _build_run(relay.Function([a, b], y), {"a": av, "b": bv})
    bt = bv.transpose(0, 2, 1) if transpose_b else bv
    np.testing.assert_allclose(got, np.maximum(av @ bt + bias, 0), rtol=1e-4, atol=1e-4)


def test_batch_matmul_untransposed_b_with_a_partial_panel_is_packed():
    """B [b, K, N] with N not a multiple of the panel: the packed implementation (its last
    panel zero-padded) is chosen; with whole panels the plain one stays."""
    from tvmpy import te
    from tvmpy.relay.op.strategy import select_implementation
    from tvmpy.relay.type_infer import infer_type

    def pick(n: int) -> str:
        a, b = relay.var("a", shape=(2, 8, 16)), relay.var("b", shape=(2, 16, n))
        call = infer_type(relay.Function([a, b], relay.nn.batch_matmul(
            a, b, transpose_b=False))).body
        ins = [te.placeholder(tuple(int(d) for d in x.checked_type.shape), name=f"i{i}")
               for i, x in enumerate(call.args)]
        return select_implementation(call.op, call.attrs, ins, call.checked_type,
                                     tvm.target.Target("llvm")).name

    assert pick(127) == "batch_matmul_pack.x86"
    assert pick(128) == "nn.batch_matmul.x86"


def test_onnx_matmul_awkward_sizes():
    """The user's path: an ONNX MatMul, B an initializer or an input, odd M, N, K."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = 37, 61, 77
    bv = _u(k, n)
    for const_b in (True, False):
        inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])]
        inits = [numpy_helper.from_array(bv, "B")] if const_b else []
        if not const_b:
            inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, [k, n]))
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["A", "B"], ["Y"])], "g", inputs,
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        mod, params = relay.frontend.from_onnx(model)
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target="llvm", params=params)
        g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
        av = _u(m, k)
        g.set_input("A", av)
        if not const_b:
            g.set_input("B", bv)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), av @ bv, rtol=1e-4, atol=1e-4)
