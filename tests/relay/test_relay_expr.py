"""Relay graph construction: nodes, attrs, registry, structural equality, visitor/mutator,
free_vars, IRModule."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.ir import structural_equal, structural_hash
from tvmpy.relay.analysis import bound_vars, free_vars
from tvmpy.relay.op import OpPattern


def _block(shape=(1, 3, 8, 8), cout=4):
    x = relay.var("x", shape=shape)
    w = relay.var("w", shape=(cout, shape[1], 3, 3))
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=cout, kernel_size=3)
    return relay.Function([x, w], relay.nn.relu(y))


def test_var_and_const():
    x = relay.var("x", shape=(1, 3), dtype="float16")
    assert x.name_hint == "x"
    assert x.type_annotation.shape == (1, 3) and x.type_annotation.dtype == "float16"
    assert relay.var("s", "int64").type_annotation.shape == ()
    assert relay.const(1.5).data.dtype == "float32"
    assert relay.const(3).data.dtype == "int32"
    a = np.arange(6, dtype="int64").reshape(2, 3)
    c = relay.const(a)
    assert c.data.dtype == "int64" and c.data.shape == (2, 3)
    np.testing.assert_array_equal(c.data.numpy(), a)
    a[0, 0] = 100  # the constant holds its own copy
    assert c.data.numpy()[0, 0] == 0
    with pytest.raises(ValueError):
        c.data.numpy()[0, 0] = 1


def test_nodes_are_immutable():
    x = relay.var("x", shape=(2,))
    with pytest.raises(AttributeError):
        x.name_hint = "y"
    call = relay.nn.relu(x)
    with pytest.raises(AttributeError):
        call.args = ()
    with pytest.raises(TypeError):
        bool(call)


def test_call_attrs_and_defaults():
    f = _block()
    conv = f.body.args[0]
    assert conv.op is relay.op.get("nn.conv2d")
    assert conv.attrs.strides == (1, 1)
    assert conv.attrs["padding"] == (1, 1, 1, 1)
    assert conv.attrs.kernel_size == (3, 3)
    assert conv.attrs.data_layout == "NCHW" and conv.attrs.kernel_layout == "OIHW"
    with pytest.raises(AttributeError, match="no field 'stride'"):
        _ = conv.attrs.stride
    nhwc = relay.nn.conv2d(relay.var("a", shape=(1, 8, 8, 3)), relay.var("b", shape=(3, 3, 3, 4)),
                           data_layout="NHWC")
    assert nhwc.attrs.kernel_layout == "HWIO"


def test_make_call_checks():
    from tvmpy.relay.op.registry import make_call

    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeError, match="unknown attributes \\['bogus'\\]"):
        make_call("nn.relu", [x], {"bogus": 1})
    with pytest.raises(TypeError, match="takes 2 inputs, got 1"):
        make_call("add", [x])
    with pytest.raises(TypeError, match="pool_size' is required"):
        make_call("nn.max_pool2d", [x], {})
    with pytest.raises(TypeError, match="relay expressions"):
        relay.add(x, 1.0 + 0j)  # not an expression, not convertible: caught at Call


def test_registry():
    get = relay.op.get
    assert get("nn.conv2d").pattern == OpPattern.OUT_ELEMWISE_FUSABLE == 4
    assert get("nn.dense").pattern == 4 and get("nn.batch_matmul").pattern == 4
    assert get("add").pattern == OpPattern.BROADCAST == 1
    assert get("nn.relu").pattern == OpPattern.ELEMWISE == 0
    assert get("reshape").pattern == OpPattern.INJECTIVE == 2
    assert get("sum").pattern == OpPattern.COMM_REDUCE == 3
    assert get("nn.softmax").pattern == OpPattern.COMM_REDUCE  # a row reduction: fuses its inputs
    assert get("nn.layer_norm").pattern == OpPattern.OPAQUE == 8
    assert get("nn.relu") is get("nn.relu")
    assert get("nn.conv2d").num_inputs == 2
    with pytest.raises(ValueError, match="'nn.conv3x' is not registered"):
        get("nn.conv3x")
    with pytest.raises(ValueError, match="already registered"):
        relay.op.register_op("add", lambda t, a: t[0], OpPattern.BROADCAST, 2)


def test_register_op_attr_levels():
    from tvmpy.relay.op.registry import _REGISTRY, register_op, register_op_attr

    op = register_op("test.identity_attr_op", lambda t, a: t[0], OpPattern.ELEMWISE, 1)
    try:
        register_op_attr("test.identity_attr_op", "FTVMStrategy", "generic", level=10)
        register_op_attr("test.identity_attr_op", "FTVMStrategy", "x86", level=11)
        register_op_attr("test.identity_attr_op", "FTVMStrategy", "low", level=5)
        assert op.get_attr("FTVMStrategy") == "x86"

        @register_op_attr("test.identity_attr_op", "FTVMCompute")
        def compute(attrs, inputs, out_type):
            return inputs

        assert op.get_attr("FTVMCompute") is compute
        assert op.get_attr("missing", 7) == 7
    finally:
        del _REGISTRY["test.identity_attr_op"]


def test_structural_equal_functions():
    f1, f2 = _block(), _block()
    assert f1 is not f2
    assert structural_equal(f1, f2)
    assert structural_hash(f1) == structural_hash(f2)
    assert not structural_equal(f1, _block(cout=8))
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    f3 = relay.Function([x, w], relay.nn.relu(relay.nn.conv2d(x, w, padding=(2, 2))))
    assert not structural_equal(f1, f3)  # attrs differ


def test_structural_equal_free_vars_and_constants():
    x1, x2 = relay.var("x", shape=(3,)), relay.var("x", shape=(3,))
    assert not structural_equal(relay.nn.relu(x1), relay.nn.relu(x2))
    assert structural_equal(relay.nn.relu(x1), relay.nn.relu(x2), map_free_vars=True)
    x3 = relay.var("x", shape=(4,))
    assert not structural_equal(relay.nn.relu(x1), relay.nn.relu(x3), map_free_vars=True)
    a = np.random.default_rng(0).standard_normal(3).astype("float32")
    c1, c2 = relay.const(a), relay.const(a.copy())
    assert structural_equal(relay.add(x1, c1), relay.add(x1, c2))
    assert structural_hash(c1) == structural_hash(c2)
    assert not structural_equal(relay.add(x1, c1), relay.add(x1, relay.const(a + 1)))
    assert not structural_equal(c1, relay.const(a.astype("float64")))


def test_structural_equal_let_binding():
    def build():
        x = relay.var("x", shape=(2,))
        v = relay.var("v")
        return relay.Function([x], relay.Let(v, relay.exp(x), relay.add(v, v)))

    assert structural_equal(build(), build())
    x = relay.var("x", shape=(2,))
    v, u = relay.var("v"), relay.var("u")
    # the body uses a different (outer-bound) variable: not the same program
    other = relay.Function([x], relay.Let(v, relay.exp(x), relay.Let(u, x, relay.add(u, v))))
    assert not structural_equal(build(), other)


def test_operator_sugar():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(3,))
    assert (x + y).op.name == "add"
    assert (x - y).op.name == "subtract"
    assert (x * y).op.name == "multiply"
    assert (x / y).op.name == "divide"
    assert (-x).op.name == "negative"
    two = x * 2.0
    assert two.args[1].data.dtype == "float32" and float(two.args[1].data.numpy()) == 2.0
    assert (1.0 - x).args[0].data.numpy() == 1.0


class _Counter(relay.ExprVisitor):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def visit_call(self, c):
        self.calls += 1
        super().visit_call(c)


def test_visitor_visits_dag_once():
    x = relay.var("x", shape=(4,))
    a = relay.exp(x)
    b = relay.add(a, a)
    c = relay.multiply(b, b)
    cnt = _Counter()
    cnt.visit(relay.Function([x], c))
    assert cnt.calls == 3
    seen = []
    relay.post_order_visit(c, lambda n: seen.append(type(n).__name__))
    assert seen.count("Call") == 3 and seen.count("Var") == 1
    assert seen[-1] == "Call"


class _ReluToSigmoid(relay.ExprMutator):
    def visit_call(self, c):
        new = super().visit_call(c)
        if new.op.name == "nn.relu":
            return relay.sigmoid(new.args[0])
        return new


def test_mutator_rewrites_and_keeps_sharing():
    x = relay.var("x", shape=(4,))
    r = relay.nn.relu(x)
    body = relay.add(relay.exp(r), relay.log(r))
    out = _ReluToSigmoid().visit(body)
    assert out.args[0].args[0] is out.args[1].args[0]  # shared node stays shared
    assert out.args[0].args[0].op.name == "sigmoid"
    untouched = relay.add(relay.exp(x), x)
    assert _ReluToSigmoid().visit(untouched) is untouched


def test_deep_chain_does_not_overflow():
    x = relay.var("x", shape=(2,))
    y = x
    for _ in range(3000):
        y = relay.nn.relu(y)
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function([x], y)))
    assert mod["main"].checked_type.ret_type.shape == (2,)
    assert "%2998 = nn.relu(%2997)" in str(mod)


def test_free_vars():
    x, y, z = (relay.var(n, shape=(2,)) for n in "xyz")
    e = relay.add(relay.multiply(y, x), y)
    assert [v.name_hint for v in free_vars(e)] == ["y", "x"]
    assert free_vars(relay.Function([x, y], e)) == []
    f = relay.Function([x], e)
    assert free_vars(f) == [y]
    v = relay.var("v")
    let = relay.Let(v, relay.exp(z), relay.add(v, x))
    assert [u.name_hint for u in free_vars(let)] == ["z", "x"]
    assert bound_vars(let) == [v]


def test_irmodule():
    x = relay.var("x", shape=(2, 3))
    y = relay.var("y", shape=(3,))
    mod = tvm.IRModule.from_expr(relay.add(x, y))
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["x", "y"]
    assert mod.get_global_var("main").name_hint == "main"
    assert "main" in mod and len(mod) == 1
    with pytest.raises(KeyError, match="no function @other"):
        mod["other"]
    with pytest.raises(TypeError, match="holds Functions"):
        mod["other"] = relay.add(x, y)
    f = _block()
    mod2 = tvm.IRModule.from_expr(f)
    assert mod2["main"] is f
    assert tvm.IRModule is relay.IRModule


def test_split_tuple_wrapper():
    x = relay.var("x", shape=(6, 4))
    parts = relay.split(x, 3, axis=0)
    assert len(parts) == 3
    assert isinstance(parts[2], relay.TupleGetItem) and parts[2].index == 2
    assert parts[-1].index == 2
    with pytest.raises(IndexError):
        parts[3]
    assert isinstance(parts.astuple(), relay.Call)


def test_pickle_roundtrip():
    import pickle

    f = _block()
    g = pickle.loads(pickle.dumps(f))
    assert structural_equal(f, g)
    assert g.body.op is relay.op.get("nn.relu")
    c = relay.const(np.arange(4, dtype="int8"))
    assert structural_equal(pickle.loads(pickle.dumps(c)), c)


def test_hand_built_call_errors_are_named():
    from tvmpy.relay.transform import infer_type

    x = relay.var("x", shape=(2, 3))
    with pytest.raises(relay.RelayTypeError, match="add takes 2 inputs, got 1"):
        infer_type(relay.Call(relay.op.get("add"), [x]))
    with pytest.raises(relay.RelayTypeError, match="bad attributes or arguments for transpose"):
        infer_type(relay.Call(relay.op.get("transpose"), [x], {}))


def test_tvm_style_registration_helpers():
    from tvmpy.relay.op.registry import _REGISTRY, register_op

    op = register_op("test.helpers_op", lambda t, a: t[0], OpPattern.OPAQUE, 1)
    try:
        assert op.get_attr("TOpPattern") == OpPattern.OPAQUE
        relay.op.register_pattern("test.helpers_op", OpPattern.INJECTIVE)
        assert op.pattern == OpPattern.INJECTIVE == op.get_attr("TOpPattern")

        @relay.op.register_strategy("test.helpers_op")
        def strategy(attrs, inputs, out_type, target):
            return "impl"

        relay.op.register_compute("test.helpers_op", lambda attrs, inputs, out_type: inputs)
        assert op.get_attr("FTVMStrategy") is strategy
        assert op.get_attr("FTVMCompute")(None, [1], None) == [1]
    finally:
        del _REGISTRY["test.helpers_op"]
    with pytest.raises(ValueError, match="not registered"):
        relay.op.register_pattern("test.helpers_op", 0)


def test_irmodule_structural_equal():
    from tvmpy.ir import assert_structural_equal

    m1, m2 = tvm.IRModule.from_expr(_block()), tvm.IRModule.from_expr(_block())
    assert_structural_equal(m1, m2)
    assert not structural_equal(m1, tvm.IRModule.from_expr(_block(cout=5)))
    m3 = m2.copy()
    m3["other"] = _block()
    assert not structural_equal(m1, m3)
    assert len(m2) == 1 and len(m3) == 2
    with pytest.raises(NotImplementedError):
        relay.Function([], relay.const(1.0), None, ["T"])


def test_well_formed():
    from tvmpy.relay.analysis import well_formed

    x = relay.var("x", shape=(2,))
    v = relay.var("v")
    assert well_formed(relay.Function([x], relay.Let(v, relay.exp(x), relay.add(v, v))))
    assert not well_formed(relay.Let(v, x, relay.Let(v, x, v)))  # bound twice
    f = relay.Function([x], relay.exp(x))
    assert well_formed(relay.Tuple([f, f]))  # one function shared is fine
    assert not well_formed(relay.Tuple([x, f]))  # x used outside the function binding it
    assert not well_formed(relay.Tuple([f, x]))
    assert not well_formed(relay.Function([x, x], x))
    assert well_formed(relay.add(x, x))  # free variables are allowed


def test_const_data_adopts_a_new_array_only_when_asked():
    import numpy as np

    from tvmpy.relay.expr import ConstData

    a = np.arange(6, dtype="float32").reshape(2, 3)
    owned = ConstData(a, copy=False)
    assert owned.numpy() is a and not a.flags.writeable  # adopted, and read-only from now on
    b = np.ones(4)
    copied = ConstData(b)
    assert copied.numpy() is not b and b.flags.writeable
    strided = np.arange(8.0)[::2]  # not contiguous: copied even when adoption is asked
    assert ConstData(strided, copy=False).numpy().flags.c_contiguous


def test_const_data_strided_is_copied_once_when_read():
    import numpy as np

    from tvmpy.relay.expr import ConstData

    base = np.arange(35, dtype="float32").reshape(5, 7)
    base.setflags(write=False)
    lazy = ConstData(base.T, copy=False, strided=True)  # a transposed view: kept as it is
    assert np.shares_memory(lazy.strided(), base) and not lazy.strided().flags.c_contiguous
    assert lazy == ConstData(base.T.copy()) and hash(lazy) == hash(ConstData(base.T.copy()))
    got = lazy.numpy()  # first read: one C-contiguous, read-only copy, kept
    assert got.flags.c_contiguous and not got.flags.writeable and lazy.numpy() is got
    np.testing.assert_array_equal(got, base.T)
    import pickle

    back = pickle.loads(pickle.dumps(ConstData(base.T, copy=False, strided=True)))
    assert back.numpy().flags.c_contiguous and back == lazy
