"""Random relay graphs (the hypothesis generator of test_relay_random_graphs.py: elementwise,
broadcast, reductions incl. 0-d results, transpose, reshape, concat, slices, softmax) built by
relay.build(target="opencl"), run on PoCL with the graph executor's storage on the device,
against the relay interpreter."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_relay_random_graphs import graphs

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.transform import infer_type


@settings(max_examples=20, deadline=None)
@given(graphs(), st.integers(0, 2**31 - 1))
def test_random_graph_on_opencl_matches_interpreter(g, seed):
    inputs, nodes = g
    outs = nodes[len(inputs):]
    f = infer_type(relay.Function(inputs, relay.Tuple(outs)))
    rng = np.random.default_rng(seed)
    vals = [rng.standard_normal(tuple(v.checked_type.shape)).astype("float32") for v in inputs]
    with np.errstate(over="ignore"):
        want = evaluate(f, *vals)
    lib = relay.build(tvm.IRModule.from_expr(f), target="opencl")
    m = graph_executor.GraphModule(lib["default"](tvm.opencl(0)))
    for v, a in zip(inputs, vals):
        m.set_input(v.name_hint, a)
    m.run()
    for i, w in enumerate(want):
        got = m.get_output(i).numpy()
        w = np.asarray(w)
        assert got.shape == w.shape
        finite = np.isfinite(w)
        np.testing.assert_allclose(got[finite], w[finite], rtol=1e-4, atol=1e-5)
