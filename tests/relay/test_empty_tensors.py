"""Empty tensors through relay.build (llvm at opt 0 and 3, and the C target), against numpy:
an operator whose output has no elements computes nothing (its index math would divide by an
empty axis: the fuzzer's ONNX Tile of a (1, 0, 1, 1) input); empty inputs of non-empty
results (concatenate, broadcasts, reductions); empty convolutions."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.op._rel import RelayTypeError
from tvmpy.relay.type_infer import infer_type

RNG = np.random.default_rng(5)
V = relay.var


def _run(lib, feeds):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**feeds)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def _check(out, want_fn, opt, target="llvm", int_inputs=()):
    """Build ``out`` over its free variables, run it on random data and compare each output
    with ``want_fn(**inputs)`` (a value or a list)."""
    mod = tvm.IRModule.from_expr(relay.Function(free_vars(out), out))
    feeds = {}
    for p in mod["main"].params:
        shape = tuple(int(d) for d in p.type_annotation.shape)
        dtype = p.type_annotation.dtype
        feeds[p.name_hint] = (RNG.integers(-3, 3, size=shape).astype(dtype)
                              if p.name_hint in int_inputs else
                              RNG.standard_normal(shape).astype(dtype))
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(mod, target=target)
    got = _run(lib, feeds)
    want = want_fn(**feeds)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


CASES = {
    # empty results (the fuzzer's Tile first)
    "tile": (lambda: relay.tile(V("x", shape=(1, 0, 1, 1)), (2, 1, 3, 1)),
             lambda x: np.tile(x, (2, 1, 3, 1))),
    "tile_of_exp": (lambda: relay.tile(relay.exp(V("x", shape=(0, 2))), (3, 2)),
                    lambda x: np.tile(np.exp(x), (3, 2))),
    "tile_more_reps": (lambda: relay.tile(V("x", shape=(0, 3)), (2, 1, 2)),
                       lambda x: np.tile(x, (2, 1, 2))),
    "tile_zero_rep": (lambda: relay.tile(V("x", shape=(2, 3)), (0, 2)),
                      lambda x: np.tile(x, (0, 2))),
    "repeat": (lambda: relay.repeat(V("x", shape=(1, 0, 2)), 3, 1),
               lambda x: np.repeat(x, 3, 1)),
    "broadcast_to_empty": (lambda: relay.broadcast_to(V("x", shape=(1, 3)), (0, 3)),
                           lambda x: np.broadcast_to(x, (0, 3))),
    "expand_empty_input": (lambda: relay.broadcast_to(V("x", shape=(0, 1)), (2, 0, 3)),
                           lambda x: np.broadcast_to(x, (2, 0, 3))),
    "add_broadcast": (lambda: V("x", shape=(0, 1)) + V("y", shape=(1, 4)),
                      lambda x, y: x + y),
    "slice_empty": (lambda: relay.strided_slice(V("x", shape=(4, 5)), [3, 0], [1, 5]),
                    lambda x: x[3:1, 0:5]),
    "slice_empty_stride": (lambda: relay.strided_slice(relay.exp(V("x", shape=(4, 5))), [0, 4],
                                                       [4, 0], [1, 2]),
                           lambda x: np.exp(x)[0:4, 4:0:2]),
    "slice_negative_stride": (lambda: relay.strided_slice(V("x", shape=(4, 5)), [0, 1], [4, 3],
                                                          [1, -1]),
                              lambda x: x[0:4, 1:3:-1]),
    "slice_of_empty": (lambda: relay.strided_slice(V("x", shape=(0, 5)), [0, 1], [0, 3]),
                       lambda x: x[0:0, 1:3]),
    "concat_all_empty": (lambda: relay.concatenate([V("a", shape=(0, 3)), V("b", shape=(0, 3))],
                                                   axis=0),
                         lambda a, b: np.concatenate([a, b], 0)),
    "reshape": (lambda: relay.reshape(V("x", shape=(0, 6)), (3, 0, 2), allowzero=True),
                lambda x: x.reshape(3, 0, 2)),
    "take_empty_indices_wrap": (lambda: relay.take(V("x", shape=(0, 3)),
                                                   relay.const(np.zeros((0,), "int64")),
                                                   axis=0, mode="wrap"),
                                lambda x: np.take(x, np.zeros((0,), "int64"), axis=0)),
    "transpose": (lambda: relay.transpose(V("x", shape=(2, 0, 3)), (2, 0, 1)),
                  lambda x: x.transpose(2, 0, 1)),
    "conv_batch0": (lambda: relay.nn.conv2d(V("x", shape=(0, 3, 5, 5)), V("w", shape=(4, 3, 3, 3)),
                                            padding=(1, 1)),
                    lambda x, w: np.zeros((0, 4, 5, 5), "float32")),
    "conv_oc0": (lambda: relay.nn.conv2d(V("x", shape=(1, 3, 5, 5)), V("w", shape=(0, 3, 3, 3)),
                                         padding=(1, 1)),
                 lambda x, w: np.zeros((1, 0, 5, 5), "float32")),
    # an empty result that topi's compute itself refuses: lowering does not ask it
    "adaptive_pool_to_zero": (lambda: relay.nn.adaptive_avg_pool2d(V("x", shape=(1, 2, 4, 4)),
                                                                   (0, 2)),
                              lambda x: np.zeros((1, 2, 0, 2), "float32")),
    "cumsum_flat": (lambda: relay.cumsum(V("x", shape=(3, 0))), lambda x: np.cumsum(x)),
    "dense_3d_empty_rows": (lambda: relay.nn.dense(V("x", shape=(2, 0, 4)), V("w", shape=(3, 4))),
                            lambda x, w: x @ w.T),
    # non-empty results of empty inputs
    "dense_3d_k0": (lambda: relay.nn.dense(V("x", shape=(2, 3, 0)), V("w", shape=(5, 0))),
                    lambda x, w: x @ w.T),
    "concat_empty_part": (lambda: relay.concatenate([V("a", shape=(0, 3)), V("b", shape=(2, 3))],
                                                    axis=0),
                          lambda a, b: np.concatenate([a, b], 0)),
    "concat_empty_middle": (lambda: relay.concatenate([V("b", shape=(2, 3)), V("a", shape=(2, 0)),
                                                       relay.exp(V("c", shape=(2, 1)))], axis=1),
                            lambda b, a, c: np.concatenate([b, a, np.exp(c)], 1)),
    "sum_of_empty_tile": (lambda: relay.sum(relay.tile(V("x", shape=(1, 0, 1, 1)),
                                                       (2, 1, 3, 1)), axis=1),
                          lambda x: np.tile(x, (2, 1, 3, 1)).sum(axis=1)),
    "concat_of_empty_tile": (lambda: relay.concatenate(
        [relay.tile(V("x", shape=(0, 2)), (2, 1)), V("y", shape=(3, 2))], axis=0),
        lambda x, y: np.concatenate([np.tile(x, (2, 1)), y], 0)),
    "flatten_to_zero_rows": (lambda: relay.reshape(V("x", shape=(3, 0)), (0, 1), allowzero=True),
                             lambda x: x.reshape(0, 1)),
}


@pytest.mark.parametrize("opt", [0, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_empty_through_build(name, opt):
    make, want = CASES[name]
    _check(make(), want, opt)


@pytest.mark.parametrize("name", ["tile", "concat_empty_middle", "slice_empty_stride"])
def test_empty_c_target(name):
    make, want = CASES[name]
    _check(make(), want, 3, target="c")


def test_empty_outputs_next_to_a_non_empty_one():
    """One fused group with an empty and a non-empty output."""
    x = V("x", shape=(0, 3))
    y = V("y", shape=(2, 3))
    out = relay.Tuple([relay.tile(relay.exp(x), (2, 2)), relay.tile(relay.exp(y), (1, 2))])
    for opt in (0, 3):
        _check(out, lambda x, y: [np.tile(np.exp(x), (2, 2)), np.tile(np.exp(y), (1, 2))], opt)


def test_take_from_an_empty_axis_refused():
    """numpy refuses a non-empty take from an empty axis; clip mode would read out of bounds."""
    x = V("x", shape=(0, 3))
    idx = relay.const(np.array([0, 1], "int64"))
    with pytest.raises(RelayTypeError, match=r"take: cannot take \(2,\) indices from an empty"):
        infer_type(relay.take(x, idx, axis=0))
    with pytest.raises(RelayTypeError, match="from an empty axis"):
        infer_type(relay.take(x, idx))


@pytest.mark.parametrize("opt", [0, 3])
def test_onnx_tile_of_an_empty_input(opt):
    """Fuzzer reproducer: ONNX Tile(x[1,0,1,1], repeats=[2,1,3,1]) failed at relay.build with
    ZeroDivisionError: division by constant zero: i1 % 0."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from tvmpy.relay.frontend import from_onnx

    g = helper.make_graph(
        [helper.make_node("Tile", ["x", "r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 0, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2, 1, 3, 1], np.int64), "r")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mod, params = from_onnx(model)
    with tvm.transform.PassContext(opt_level=opt):
        lib = relay.build(mod, target="llvm", params=params)
    (got,) = _run(lib, {"x": np.zeros((1, 0, 1, 1), "float32")})
    assert got.shape == (2, 0, 3, 1) and got.dtype == np.float32
