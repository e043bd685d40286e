"""Random graphs (hypothesis): every node's inferred type matches what the numpy interpreter
computes, printing works, and a deep copy is structurally equal (same hash) but not identical."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmpy import relay
from tvmpy.ir import structural_equal, structural_hash
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.transform import infer_type


class _Copy(relay.ExprMutator):
    """Rebuilds every call and tuple (new objects, same program)."""

    def visit_call(self, c):
        return relay.Call(self.visit(c.op), [self.visit(a) for a in c.args], c.attrs)

    def visit_tuple(self, t):
        return relay.Tuple([self.visit(f) for f in t.fields])


def _grow(draw, nodes):
    """Append one random node built from existing ones (valid by construction)."""
    x = draw(st.sampled_from(nodes))
    shape = tuple(x.checked_type.shape)
    nd = len(shape)
    kind = draw(st.sampled_from(["unary", "binary", "reduce", "transpose", "reshape", "concat",
                                 "slice", "softmax", "expand"]))
    if kind == "unary":
        op = draw(st.sampled_from([relay.exp, relay.tanh, relay.sigmoid, relay.nn.relu,
                                   relay.negative, relay.abs]))
        y = op(x)
    elif kind == "binary":
        same = [n for n in nodes if tuple(n.checked_type.shape) == shape]
        other = draw(st.sampled_from(same))
        if nd and draw(st.booleans()):  # broadcast a reduced operand
            other = relay.sum(other, axis=[draw(st.integers(0, nd - 1))], keepdims=True)
        op = draw(st.sampled_from([relay.add, relay.subtract, relay.multiply, relay.maximum]))
        y = op(x, other) if draw(st.booleans()) else op(other, x)
    elif kind == "reduce" and nd:
        axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
        op = draw(st.sampled_from([relay.sum, relay.mean, relay.max, relay.min]))
        y = op(x, axis=axes, keepdims=draw(st.booleans()))
    elif kind == "transpose" and nd:
        y = relay.transpose(x, draw(st.permutations(range(nd))))
    elif kind == "reshape":
        size = int(np.prod(shape))
        divs = [d for d in range(1, size + 1) if size % d == 0]
        a = draw(st.sampled_from(divs))
        y = relay.reshape(x, (a, -1))
    elif kind == "concat" and nd:
        ax = draw(st.integers(0, nd - 1))
        y = relay.concatenate([x, x], axis=ax)
    elif kind == "slice" and nd:
        ax = draw(st.integers(0, nd - 1))
        d = shape[ax]
        b = draw(st.integers(0, max(d - 1, 0)))
        y = relay.strided_slice(x, [b], [d], [draw(st.integers(1, 2))], axes=[ax])
    elif kind == "softmax" and nd:
        y = relay.nn.softmax(x, axis=draw(st.integers(-nd, nd - 1)))
    else:
        y = relay.expand_dims(x, draw(st.integers(-nd - 1, nd)))
    infer_type(y)
    if int(np.prod(y.checked_type.shape)) <= 4096:
        nodes.append(y)


@st.composite
def graphs(draw):
    shapes = draw(st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3), min_size=1,
                           max_size=3))
    inputs = [relay.var(f"in{i}", shape=tuple(s)) for i, s in enumerate(shapes)]
    nodes = list(inputs)
    for _ in range(draw(st.integers(1, 12))):
        _grow(draw, nodes)
    return inputs, nodes


@settings(max_examples=40, deadline=None)
@given(graphs(), st.integers(0, 2**31 - 1))
def test_random_graph_types_match_interpreter(g, seed):
    inputs, nodes = g
    outs = nodes[len(inputs):]
    f = relay.Function(inputs, relay.Tuple(outs))
    infer_type(f)
    rng = np.random.default_rng(seed)
    vals = [rng.standard_normal(tuple(v.checked_type.shape)).astype("float32") for v in inputs]
    with np.errstate(over="ignore"):
        results = evaluate(f, *vals)
    for node, res in zip(outs, results):
        t = node.checked_type
        assert res.shape == tuple(t.shape) and str(res.dtype) == t.dtype, (str(node), res.shape)
    text = str(f)
    assert text.startswith("fn (") and text.endswith("}")
    copy = _Copy().visit(f)
    assert copy is not f and copy.body is not f.body
    assert structural_equal(copy, f) and structural_hash(copy) == structural_hash(f)
