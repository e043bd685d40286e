"""relay.build of fused groups whose values are read many times (issue 10's quantized ViT).

A Quantize/Dequantize pair as the ONNX importer writes it rounds half to even with floor,
floor_mod and two where's: ``x / s`` is read twice and ``floor(x / s)`` five times. FuseOps puts
a dozen such pairs (with transposes and adds between them, as in a QDQ transformer) in one
group; before te.inline shared those reads, the inlined expression grew ~8x per pair and
lowering never finished. The lowered function must now stay linear in the number of ops.
"""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.build_module import lower_to_primitives
from tvmpy.tir.functor import post_order_visit

PAIRS = 12  # 8**12 copies of the input read under plain substitution


def _round_half_even(x):
    f = relay.floor(x)
    d = x - f
    half = relay.const(0.5)
    even = f + relay.floor_mod(f, relay.const(2.0))
    return relay.where(relay.greater(d, half), f + relay.const(1.0),
                       relay.where(relay.less(d, half), f, even))


def _qdq(x, scale, zp):
    q = relay.cast(relay.clip(_round_half_even(x / relay.const(scale)) + relay.const(zp), 0.0,
                              255.0), "uint8")
    return (relay.cast(q, "float32") - relay.const(zp)) * relay.const(scale)


def _np_qdq(x, scale, zp):
    q = np.clip(np.round(x / np.float32(scale)) + zp, 0, 255).astype(np.uint8)  # np.round: half-even
    return (q.astype(np.float32) - zp) * np.float32(scale)


def _model():
    x = relay.var("x", shape=(1, 5, 7))
    b = relay.var("b", shape=(1, 7, 5))
    y = x
    for k in range(PAIRS):
        y = _qdq(y, 0.02 + 0.001 * k, 128.0 - k)
        y = relay.transpose(y, (0, 2, 1)) + b if k % 2 == 0 else relay.transpose(y, (0, 2, 1))
    return tvm.IRModule.from_expr(relay.Function(free_vars(y), y))


def _reference(xv, bv):
    y = xv
    for k in range(PAIRS):
        y = _np_qdq(y, 0.02 + 0.001 * k, 128.0 - k)
        y = np.transpose(y, (0, 2, 1)) + bv if k % 2 == 0 else np.transpose(y, (0, 2, 1))
    return y


def _ir_size(node) -> int:
    n = [0]
    post_order_visit(node, lambda _: n.__setitem__(0, n[0] + 1))
    return n[0]


def test_qdq_chain_lowers_to_linear_size():
    prims = lower_to_primitives(_model(), "llvm")
    big = max(prims.funcs, key=lambda f: str(f.func).count("where("))
    assert str(big.func).count("where(") >= 2 * 8  # at least 8 pairs in one fused group
    size = _ir_size(big.prim_func.body)
    assert size < 60 * 16 * PAIRS, size  # ~16 relay ops per pair


def test_qdq_chain_builds_and_matches_numpy():
    rng = np.random.default_rng(3)
    xv = rng.uniform(-2.0, 2.0, (1, 5, 7)).astype("float32")
    bv = rng.uniform(-0.5, 0.5, (1, 7, 5)).astype("float32")
    lib = relay.build(_model(), target="llvm")
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=xv, b=bv)
    m.run()
    got = m.get_output(0).numpy()
    want = _reference(xv, bv)
    # the last pair's dequantized outputs are multiples of its scale: agree to a step or better
    np.testing.assert_allclose(got, want, atol=0.035)
    assert np.mean(np.abs(got - want) < 1e-5) > 0.9


# ShuffleNet-style chains (issue 25): channel split, a block on one half, concat, channel
# shuffle (reshape -> transpose -> reshape), each stage reading both halves twice. Plain
# substitution doubles the inlined expression per stage (2**200 at 200 stages); FuseOps puts
# long runs of these injective stages in one group.
def _shuffle_chain(stages: int, c: int = 8) -> tvm.IRModule:
    x = relay.var("x", shape=(1, c, 3, 5))
    y = x
    for k in range(stages):
        parts = relay.split(y, 2, axis=1)
        a, b = parts[0], parts[1]
        b2 = relay.nn.relu(b) + a * relay.const(0.5 + 0.01 * (k % 7))
        y = relay.concatenate([relay.clip(a + b2, -3.0, 3.0), b2 * relay.const(0.5)], axis=1)
        y = relay.reshape(relay.transpose(relay.reshape(y, (1, 2, c // 2, 3, 5)),
                                          (0, 2, 1, 3, 4)), (1, c, 3, 5))
    return tvm.IRModule.from_expr(relay.Function([x], y))


def _shuffle_chain_ref(xv: np.ndarray, stages: int) -> np.ndarray:
    y = xv
    c = xv.shape[1]
    for k in range(stages):
        a, b = y[:, : c // 2], y[:, c // 2:]
        b2 = np.maximum(b, 0) + a * np.float32(0.5 + 0.01 * (k % 7))
        y = np.concatenate([np.clip(a + b2, -3, 3), b2 * np.float32(0.5)], axis=1)
        y = y.reshape(1, 2, c // 2, 3, 5).transpose(0, 2, 1, 3, 4).reshape(1, c, 3, 5)
    return y


def test_shuffle_chain_lowers_to_linear_size():
    sizes = {}
    for stages in (25, 50, 100):
        with tvm.transform.PassContext(opt_level=3):
            prims = lower_to_primitives(_shuffle_chain(stages), "llvm")
        sizes[stages] = sum(_ir_size(f.prim_func.body) for f in prims.funcs)
    assert sizes[100] <= 2.3 * sizes[50] and sizes[50] <= 2.3 * sizes[25], sizes


def test_shuffle_chain_200_stages_builds_and_matches_numpy():
    xv = np.random.default_rng(5).uniform(-2.0, 2.0, (1, 8, 3, 5)).astype("float32")
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(_shuffle_chain(200), target="llvm")
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=xv)
    m.run()
    np.testing.assert_allclose(m.get_output(0).numpy(), _shuffle_chain_ref(xv, 200),
                               rtol=1e-5, atol=1e-5)
