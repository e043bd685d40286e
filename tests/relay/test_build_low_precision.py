"""Relay graphs whose tensors are storage-only dtypes (bfloat16, float8, int4) built with
relay.build: each operator computes in float32/int32 and rounds its result (LegalizeStorageDtypes),
checked against relay's interpreter (numpy on ml_dtypes arrays)."""

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402

RNG = np.random.default_rng(5)


def _build_and_interpret(params, body, feeds):
    mod = tvm.IRModule.from_expr(relay.Function(params, body))
    m = graph_executor.GraphModule(relay.build(mod, "llvm")["default"](tvm.cpu()))
    m.set_input(**feeds)
    m.run()
    got = m.get_output(0).numpy()
    want = relay.create_executor("debug", mod=mod).evaluate()(*feeds.values())
    return got, np.asarray(want.numpy() if hasattr(want, "numpy") else want)


def x_dtype(x):
    return x.type_annotation.dtype


_EXACT = {  # one rounding per operator on both sides: bit-equal
    "exp_add": lambda x: relay.add(relay.exp(x), x),
    "relu_scale": lambda x: relay.multiply(relay.nn.relu(x),
                                           relay.cast(relay.const(2.0), x_dtype(x))),
    "max": lambda x: relay.max(x, axis=0),
    "min_keepdims": lambda x: relay.min(x, axis=1, keepdims=True),
    "layout": lambda x: relay.concatenate([x, relay.reverse(x, axis=1)], axis=0),
    "where": lambda x: relay.where(relay.greater(x, relay.cast(relay.const(0.0), x_dtype(x))), x,
                                   relay.negative(x)),
}


@pytest.mark.parametrize("op", list(_EXACT))
@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_elementwise_and_layout_ops_exact(dtype, op):
    x = relay.var("x", shape=(5, 7), dtype=dtype)
    a = (RNG.standard_normal((5, 7)) * 2).astype(getattr(ml_dtypes, dtype))
    got, want = _build_and_interpret([x], _EXACT[op](x), {"x": a})
    assert got.dtype == want.dtype == a.dtype
    g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)])


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_reductions_round_per_step(dtype):
    """Sums and products accumulate in the storage type (a rounding per step): the compiled and
    the interpreted orders differ, so within a few units in the last place."""
    x = relay.var("x", shape=(6, 9), dtype=dtype)
    w = relay.var("w", shape=(4, 9), dtype=dtype)
    t = getattr(ml_dtypes, dtype)
    a = RNG.standard_normal((6, 9)).astype(t)
    b = RNG.standard_normal((4, 9)).astype(t)
    body = relay.Tuple([relay.nn.dense(x, w), relay.sum(x, axis=1), relay.nn.softmax(x)])
    mod = tvm.IRModule.from_expr(relay.Function([x, w], body))
    m = graph_executor.GraphModule(relay.build(mod, "llvm")["default"](tvm.cpu()))
    m.set_input(x=a, w=b)
    m.run()
    ref = [a.astype(np.float32) @ b.astype(np.float32).T, a.astype(np.float32).sum(1)]
    e = np.exp(a.astype(np.float32) - a.astype(np.float32).max(1, keepdims=True))
    ref.append(e / e.sum(1, keepdims=True))
    eps = float(ml_dtypes.finfo(t).eps)
    for i, r in enumerate(ref):
        got = m.get_output(i).numpy()
        assert got.dtype == np.dtype(t)
        np.testing.assert_allclose(got.astype(np.float32), r, rtol=8 * eps, atol=8 * eps * 4)


def test_int4_arithmetic_wraps():
    x = relay.var("x", shape=(16,), dtype="int4")
    a = np.arange(-8, 8).astype(ml_dtypes.int4)
    body = relay.add(x, relay.cast(relay.const(np.array(5, np.int8)), "int4"))
    got, want = _build_and_interpret([x], body, {"x": a})
    np.testing.assert_array_equal(got.astype(np.int32), ((np.arange(-8, 8) + 5 + 8) % 16) - 8)
    np.testing.assert_array_equal(got.astype(np.int32), want.astype(np.int32))
