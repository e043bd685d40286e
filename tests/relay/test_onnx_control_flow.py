"""ONNX If / Loop / Scan, sequences and optionals, and RNNs with a run-time sequence length:
imported once, run by the interpreter on random inputs, compared with onnx's reference
evaluator (or onnxruntime)."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvmpy import relay  # noqa: E402
from tvmpy.relay.expr import RelayTypeError  # noqa: E402
from tvmpy.relay.frontend import from_onnx  # noqa: E402
from tvmpy.relay.frontend.onnx import OnnxConvertError  # noqa: E402
from tvmpy.relay.type_infer import infer_type  # noqa: E402

rng = np.random.default_rng(11)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _const(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v)))


def _run(mod, *args):
    out = relay.create_executor("debug", mod).evaluate()(*args)
    return list(out) if isinstance(out, tuple) else [out]


def _check(model, feeds, shape=None, rtol=1e-5, ort=False):
    """Import once (no shapes fixed unless given), run with each feed dict, compare with onnx's
    reference evaluator (``ort``: with onnxruntime)."""
    mod, _ = from_onnx(model, shape)
    if ort:
        rt = pytest.importorskip("onnxruntime")
        ref = rt.InferenceSession(model.SerializeToString())
    else:
        ref = ReferenceEvaluator(model)
    names = [vi.name for vi in model.graph.input]
    for feed in feeds:
        got = _run(mod, *[feed[n] for n in names])
        want = ref.run(None, feed)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, list):
                assert len(g) == len(w)
                for a, b in zip(g, w):
                    np.testing.assert_allclose(np.asarray(a), b, rtol=rtol, atol=1e-6)
            else:
                assert np.asarray(g).shape == np.asarray(w).shape
                np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=1e-6)
    return mod


# ---- If -------------------------------------------------------------------------------------

def _if_model():
    then_g = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then",
                               [], [_vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [_vi("e", F, None)])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                  [_vi("c", B, []), _vi("x", F, [3, 5])], [_vi("y", F, None)])


def test_if_run_time_condition_branches_of_different_shapes():
    x = rng.standard_normal((3, 5)).astype("float32")
    mod = _check(_if_model(), [{"c": np.array(True), "x": x}, {"c": np.array(False), "x": x}])
    t = mod["main"].checked_type.ret_type
    assert str(t) == "Tensor[(?, 5), float32]"
    assert "if (" in mod.astext()


def test_if_constant_condition_is_inlined():
    m = _if_model()
    mod, _ = from_onnx(_model([_const("c", np.array(True))] + list(m.graph.node),
                              [_vi("x", F, [3, 5])], [_vi("y", F, None)]))
    assert "if (" not in mod.astext()
    assert mod["main"].checked_type.ret_type.shape == (6, 5)


def test_if_branches_of_different_ranks_are_refused():
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                               [_vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else",
                               [], [_vi("e", F, None)])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                                 name="pick")],
               [_vi("c", B, []), _vi("x", F, [3, 5])], [_vi("y", F, None)], opset=13)
    with pytest.raises(OnnxConvertError, match="If node 'pick'.*cannot be joined"):
        from_onnx(m)


# ---- Loop -----------------------------------------------------------------------------------

def _loop_model(with_m=True, with_cond=True):
    """Loop-carried: a sum (fixed shape) and a growing concatenation (shape changes per
    iteration); a scan output; the body reads the outer tensor ``w``; the condition stops when
    the sum exceeds ``limit``."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "w"], ["s_out"]),
         helper.make_node("Concat", ["g_in", "s_out"], ["g_out"], axis=0),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["s_out", "fi"], ["sf"]),
         # a 1-D scan output: onnx's reference concatenates (np.vstack) where onnxruntime
         # stacks (a new axis), which agree for 1-D outputs; tvmpy stacks
         _const("ax0", np.array([0], np.int64)),
         helper.make_node("Squeeze", ["sf", "ax0"], ["scan"]),
         helper.make_node("ReduceSum", ["s_out"], ["tot"], keepdims=0),
         helper.make_node("Less", ["tot", "limit"], ["c_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", B, []), _vi("s_in", F, [1, 4]),
                 _vi("g_in", F, None)],
        [_vi("c_out", B, []), _vi("s_out", F, None), _vi("g_out", F, None),
         _vi("scan", F, None)])
    ins = [_vi("M", I64, []), _vi("cond", B, []), _vi("s0", F, [1, 4]), _vi("g0", F, [2, 4]),
           _vi("w", F, [1, 4]), _vi("limit", F, [])]
    names = ["M" if with_m else "", "cond" if with_cond else "", "s0", "g0"]
    node = helper.make_node("Loop", names, ["s", "g", "scans"], body=body)
    return _model([node], ins, [_vi("s", F, None), _vi("g", F, None), _vi("scans", F, None)])


def _loop_feeds(m_values, limit=1e9):
    out = []
    for m in m_values:
        out.append({"M": np.array(m, np.int64), "cond": np.array(True),
                    "s0": rng.uniform(0.1, 1, (1, 4)).astype("float32"),
                    "g0": rng.uniform(0.1, 1, (2, 4)).astype("float32"),
                    "w": rng.uniform(0.1, 1, (1, 4)).astype("float32"),
                    "limit": np.array(limit, np.float32)})
    return out


def test_loop_trip_count_carried_shapes_change_scan_outputs():
    mod = _check(_loop_model(), _loop_feeds([1, 3, 7]))
    fns = [g.name_hint for g in mod.get_global_vars()]
    assert any(n.startswith("loop_") for n in fns)
    # the concatenation grows: its loop-carried type has a ? rows dimension
    ret = mod["main"].checked_type.ret_type
    assert str(ret.fields[1]) == "Tensor[(?, 4), float32]"


def test_loop_condition_stops_it():
    _check(_loop_model(), _loop_feeds([50, 50], limit=12.0))


def test_loop_condition_only_and_trip_count_only():
    feeds = _loop_feeds([40], limit=9.0)
    # (onnx's reference runs no iteration when M or cond is missing: onnxruntime is the reference)
    _check(_loop_model(with_m=False), feeds, ort=True)
    _check(_loop_model(with_cond=False), _loop_feeds([4]), ort=True)


def test_loop_without_trip_count_and_condition_is_refused():
    m = _loop_model(with_m=False, with_cond=False)
    with pytest.raises(OnnxConvertError, match="Loop node.*would not end"):
        from_onnx(m)


def test_nested_loops_read_outer_names():
    inner = helper.make_graph(
        [helper.make_node("Add", ["a_in", "x"], ["a_out"]),     # x: the outermost input
         helper.make_node("Mul", ["a_out", "k"], ["a_k"]),      # k: the outer body's tensor
         helper.make_node("Identity", ["ci"], ["co"])],
        "inner", [_vi("j", I64, []), _vi("ci", B, []), _vi("a_in", F, [3])],
        [_vi("co", B, []), _vi("a_k", F, [3])])
    outer = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["k"], to=F),
         helper.make_node("Loop", ["n_in", "", "acc_in"], ["acc_out"], body=inner),
         helper.make_node("Identity", ["c"], ["c2"])],
        "outer", [_vi("i", I64, []), _vi("c", B, []), _vi("acc_in", F, [3])],
        [_vi("c2", B, []), _vi("acc_out", F, [3])])
    m = _model([helper.make_node("Loop", ["M", "", "a0"], ["a"], body=outer)],
               [_vi("M", I64, []), _vi("n_in", I64, []), _vi("a0", F, [3]), _vi("x", F, [3])],
               [_vi("a", F, [3])])
    feeds = [{"M": np.array(m, np.int64), "n_in": np.array(n, np.int64),
              "a0": rng.uniform(-1, 1, 3).astype("float32"),
              "x": rng.uniform(-1, 1, 3).astype("float32")} for m, n in ((3, 2), (1, 5), (0, 2))]
    mod = _check(m, feeds, ort=True)
    assert len([g for g in mod.get_global_vars() if g.name_hint.startswith("loop_")]) == 2


def test_long_loop_runs_in_constant_stack():
    mod = _check(_loop_model(), _loop_feeds([3000]), rtol=1e-4)
    assert mod is not None


# ---- Scan -----------------------------------------------------------------------------------

def _scan_model(seq_dim):
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Mul", ["s2", "x"], ["y"])],
        "body", [_vi("s", F, [2]), _vi("x", F, [2])], [_vi("s2", F, [2]), _vi("y", F, [2])])
    node = helper.make_node("Scan", ["s0", "xs"], ["sN", "ys"], body=body, num_scan_inputs=1,
                            scan_input_directions=[1], scan_output_axes=[1])
    return _model([node], [_vi("s0", F, [2]), _vi("xs", F, [seq_dim, 2])],
                  [_vi("sN", F, None), _vi("ys", F, None)], opset=16)


def test_scan_with_run_time_length_is_a_loop():
    feeds = [{"s0": rng.standard_normal(2).astype("float32"),
              "xs": rng.standard_normal((t, 2)).astype("float32")} for t in (1, 4, 7)]
    mod = _check(_scan_model("T"), feeds, ort=True)
    assert any(g.name_hint.startswith("loop_") for g in mod.get_global_vars())


def test_scan_with_static_length_is_unrolled():
    feeds = [{"s0": rng.standard_normal(2).astype("float32"),
              "xs": rng.standard_normal((5, 2)).astype("float32")}]
    mod = _check(_scan_model(5), feeds, ort=True)
    assert len(mod.get_global_vars()) == 1


# ---- sequences and optionals ----------------------------------------------------------------

def test_static_sequence_ops_stay_tuples():
    nodes = [helper.make_node("SequenceConstruct", ["a", "b"], ["s1"]),
             helper.make_node("SequenceInsert", ["s1", "c"], ["s2"]),
             _const("p0", np.int64(0)), _const("pm1", np.int64(-1)),
             helper.make_node("SequenceInsert", ["s2", "a", "p0"], ["s3"]),
             helper.make_node("SequenceErase", ["s3", "pm1"], ["s4"]),
             helper.make_node("SequenceLength", ["s4"], ["n"]),
             helper.make_node("SequenceAt", ["s4", "pm1"], ["last"]),
             helper.make_node("ConcatFromSequence", ["s4"], ["cat"], axis=1),
             helper.make_node("ConcatFromSequence", ["s4"], ["stk"], axis=-1, new_axis=1)]
    m = _model(nodes, [_vi(n, F, [2, 3]) for n in "abc"],
               [_vi("n", I64, None), _vi("last", F, None), _vi("cat", F, None),
                _vi("stk", F, None), helper.make_tensor_sequence_value_info("s4", F, None)])
    feeds = [{n: rng.standard_normal((2, 3)).astype("float32") for n in "abc"}]
    mod = _check(m, feeds)
    assert "list." not in mod.astext()


def test_sequence_grown_in_a_loop_is_a_run_time_list():
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("SequenceInsert", ["s_in", "xi"], ["s_out"]),
         helper.make_node("Identity", ["c"], ["c2"])],
        "body", [_vi("i", I64, []), _vi("c", B, []),
                 helper.make_tensor_sequence_value_info("s_in", F, None)],
        [_vi("c2", B, []), helper.make_tensor_sequence_value_info("s_out", F, None)])
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
             helper.make_node("Loop", ["M", "", "e"], ["seq"], body=body),
             helper.make_node("SequenceLength", ["seq"], ["n"]),
             helper.make_node("SequenceAt", ["seq", "pos"], ["at"]),
             helper.make_node("SequenceErase", ["seq", "pos"], ["erased"]),
             helper.make_node("ConcatFromSequence", ["erased"], ["cat"], axis=0)]
    m = _model(nodes, [_vi("M", I64, []), _vi("pos", I64, []), _vi("x", F, [2])],
               [_vi("n", I64, None), _vi("at", F, None), _vi("cat", F, None),
                helper.make_tensor_sequence_value_info("seq", F, None)])
    feeds = [{"M": np.array(m_, np.int64), "pos": np.array(p, np.int64),
              "x": rng.standard_normal(2).astype("float32")} for m_, p in ((3, 1), (5, -2))]
    mod = _check(m, feeds, ort=True)
    assert "list.insert" in mod.astext()
    f = relay.create_executor("debug", mod).evaluate()
    with pytest.raises(IndexError, match="SequenceAt: position 7 out of range for a sequence "
                                         "of 3"):
        f(np.array(3, np.int64), np.array(7, np.int64), feeds[0]["x"])


def test_split_to_sequence_run_time_split():
    m = _model([helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1),
                helper.make_node("SequenceLength", ["s"], ["n"])],
               [_vi("x", F, [2, 7]), _vi("split", I64, [3])],
               [helper.make_tensor_sequence_value_info("s", F, None), _vi("n", I64, None)])
    x = rng.standard_normal((2, 7)).astype("float32")
    _check(m, [{"x": x, "split": np.array([1, 4, 2], np.int64)},
               {"x": x, "split": np.array([0, 5, 2], np.int64)}])


def test_sequence_and_optional_through_the_backend():
    from tvmpy.contrib.onnx_backend import TvmpyBackend

    seq_t = helper.make_tensor_sequence_value_info("xs", F, [3])
    m = _model([helper.make_node("SequenceLength", ["xs"], ["n"]),
                helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=0),
                helper.make_node("OptionalHasElement", ["o"], ["has"]),
                helper.make_node("Identity", ["xs"], ["same"])],
               [seq_t, helper.make_value_info("o", helper.make_optional_type_proto(
                   helper.make_tensor_type_proto(F, [3])))],
               [_vi("n", I64, None), _vi("cat", F, None), _vi("has", B, None),
                helper.make_tensor_sequence_value_info("same", F, None)], opset=18)
    rep = TvmpyBackend.prepare(m, "CPU", executor="debug", bind_inputs=False)
    xs = [rng.standard_normal(3).astype("float32") for _ in range(4)]
    for o in (None, rng.standard_normal(3).astype("float32")):
        n, cat, has, same = rep.run([xs, o])
        assert int(n) == 4 and bool(has) == (o is not None)
        np.testing.assert_allclose(cat, np.concatenate(xs))
        assert isinstance(same, list) and len(same) == 4


def test_optional_get_element_of_an_empty_optional_is_refused():
    m = _model([helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [2])),
                helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")],
               [], [_vi("y", F, None)], opset=18)
    with pytest.raises(OnnxConvertError, match="OptionalGetElement node 'get'.*empty"):
        from_onnx(m)


# ---- RNNs with a run-time sequence length ---------------------------------------------------

@pytest.mark.parametrize("kind,direction", [("LSTM", "forward"), ("LSTM", "bidirectional"),
                                            ("GRU", "reverse"), ("RNN", "forward")])
def test_rnn_with_run_time_sequence_length(kind, direction):
    ort = pytest.importorskip("onnxruntime")
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    Inp, H, N = 3, 5, 2
    D = 2 if direction == "bidirectional" else 1
    W = rng.standard_normal((D, G * H, Inp)).astype("float32")
    R = rng.standard_normal((D, G * H, H)).astype("float32") * 0.5
    Bias = rng.standard_normal((D, 2 * G * H)).astype("float32")
    outs = ["Y", "Yh"] + (["Yc"] if kind == "LSTM" else [])
    node = helper.make_node(kind, ["X", "W", "R", "B"], outs, hidden_size=H,
                            direction=direction)
    m = _model([node], [_vi("X", F, ["seq", N, Inp])], [_vi(o, F, None) for o in outs],
               [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (R, "R"), (Bias, "B"))],
               opset=14)
    mod, _ = from_onnx(m)
    if kind == "RNN":  # a loop over the steps
        assert any(g.name_hint.endswith(tuple(str(k) for k in range(10)))
                   and g.name_hint.startswith(kind.lower()) for g in mod.get_global_vars())
    else:  # LSTM/GRU: the whole recurrence is one nn.rnn_scan kernel (no loop)
        assert "nn.rnn_scan" in mod.astext()
    sess = ort.InferenceSession(m.SerializeToString())
    for T in (1, 5, 13):
        x = rng.standard_normal((T, N, Inp)).astype("float32")
        for g, w in zip(_run(mod, x), sess.run(None, {"X": x})):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)


# ---- type inference of control flow ---------------------------------------------------------

def test_if_unifies_differing_dims_with_any():
    c = relay.var("c", shape=(), dtype="bool")
    x = relay.var("x", shape=(3, 4))
    e = relay.If(c, relay.concatenate([x, x], 0), x)
    assert str(infer_type(e).checked_type) == "Tensor[(?, 4), float32]"
    with pytest.raises(RelayTypeError, match="branches have different types"):
        infer_type(relay.If(c, x, relay.cast(x, "int32")))


def test_recursive_function_needs_its_return_type():
    from tvmpy.relay.expr import Call, Function, GlobalVar, If
    from tvmpy.relay.transform import InferType

    gv = GlobalVar("count")
    i = relay.var("i", shape=(), dtype="int64")
    body = If(relay.less(i, relay.const(np.int64(10))), Call(gv, [relay.add(i, relay.const(
        np.int64(1)))]), i)
    mod = relay.IRModule({gv: Function([i], body)})
    with pytest.raises(RelayTypeError, match="recursive call to @count.*return type"):
        InferType()(mod)
    mod = relay.IRModule({gv: Function([i], body, ret_type=relay.TensorType((), "int64"))})
    mod["main"] = Function([], Call(gv, [relay.const(np.int64(0))]))
    InferType()(mod)
    assert int(relay.create_executor("debug", mod).evaluate()()) == 10


# ---- the node tests -------------------------------------------------------------------------

# cases that need run-time shape inputs (dyn ops, another helper's work) are left out here
_NODE_CASES = [
    "test_if", "test_if_seq", "test_scan_sum", "test_scan9_sum", "test_scan9_multi_state",
    "test_scan9_scalar", "test_range_float_type_positive_delta_expanded",
    "test_range_int32_type_negative_delta_expanded", "test_sequence_insert_at_back",
    "test_sequence_insert_at_front", "test_split_to_sequence_1", "test_split_to_sequence_2",
    "test_split_to_sequence_nokeepdims", "test_sequence_map_add_2_sequences",
    "test_sequence_map_add_2_sequences_expanded", "test_sequence_map_extract_shapes",
    "test_sequence_map_identity_1_sequence_1_tensor_expanded", "test_identity_sequence",
    "test_identity_opt", "test_optional_get_element_optional_sequence",
    "test_optional_get_element_tensor", "test_optional_has_element_empty_optional_input",
    "test_optional_has_element_empty_no_input_name_optional_input",
    "test_optional_has_element_tensor_input",
]


@pytest.fixture(scope="module")
def node_cases():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import onnx_conformance as oc

    return oc, {c.name: c for c in oc.load_cases() if c.name in _NODE_CASES}


@pytest.mark.parametrize("name", _NODE_CASES)
def test_onnx_node_case(node_cases, name):
    oc, cases = node_cases
    if name not in cases:
        pytest.skip(f"{name} is not in this onnx's node tests")
    outcome, detail = oc.run_case(cases[name], "debug", 120, None, bind_inputs=False)
    assert outcome == "pass", detail


def test_sequence_input_of_run_time_length_is_a_list():
    m = _model([helper.make_node("SequenceLength", ["xs"], ["n"]),
                helper.make_node("SequenceAt", ["xs", "p"], ["at"]),
                helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=1, new_axis=1)],
               [helper.make_tensor_sequence_value_info("xs", F, [2, "k"]), _vi("p", I64, [])],
               [_vi("n", I64, None), _vi("at", F, None), _vi("cat", F, None)])
    mod, _ = from_onnx(m)
    assert str(mod["main"].params[0].checked_type) == "List[Tensor[(2, ?), float32]]"
    f = relay.create_executor("debug", mod).evaluate()
    for n in (1, 4):
        xs = [rng.standard_normal((2, 3)).astype("float32") for _ in range(n)]
        got = f(xs, np.array(-1, np.int64))
        want = ReferenceEvaluator(m).run(None, {"xs": xs, "p": np.array(-1, np.int64)})
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w)


def test_sequence_map_over_a_run_time_list():
    body = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["y"]),
                              helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0)],
                             "body", [_vi("a", F, ["k"]), _vi("b", F, [1])],
                             [_vi("y", F, None), _vi("s", F, None)])
    m = _model([helper.make_node("SequenceMap", ["xs", "w"], ["ys", "ss"], body=body)],
               [helper.make_tensor_sequence_value_info("xs", F, ["k"]), _vi("w", F, [1])],
               [helper.make_tensor_sequence_value_info("ys", F, None),
                helper.make_tensor_sequence_value_info("ss", F, None)])
    mod, _ = from_onnx(m)
    f = relay.create_executor("debug", mod).evaluate()
    w = np.array([1.5], np.float32)
    for sizes in ((3,), (2, 5, 1)):
        xs = [rng.standard_normal(s).astype("float32") for s in sizes]
        ys, ss = f(xs, w)
        assert len(ys) == len(ss) == len(xs)
        for x, y, s in zip(xs, ys, ss):
            np.testing.assert_allclose(y, x * w, rtol=1e-6)
            np.testing.assert_allclose(s, x.sum(), rtol=1e-5)


def test_bad_sequence_positions_and_feeds():
    from tvmpy.contrib.onnx_backend import TvmpyBackend

    m = _model([helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
                _const("p", np.int64(2)),
                helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at2")],
               [_vi("a", F, [3])], [_vi("y", F, None)])
    with pytest.raises(OnnxConvertError, match=r"SequenceAt node 'at2': position 2 is out of "
                                               r"range for a sequence of 2 tensors"):
        from_onnx(m)
    seq_in = _model([helper.make_node("SequenceLength", ["xs"], ["n"])],
                    [helper.make_tensor_sequence_value_info("xs", F, [3])], [_vi("n", I64, None)])
    rep = TvmpyBackend.prepare(seq_in, "CPU", executor="debug", bind_inputs=False)
    with pytest.raises(ValueError, match=r"input 'xs': expected shape \[3\], got \[4\]"):
        rep.run([[np.zeros(3, np.float32), np.ones(4, np.float32)]])
    with pytest.raises(ValueError, match="input 'xs': expected a sequence"):
        rep.run([np.ones(3, np.float32)])


def test_lstm_run_time_length_with_sequence_lens_and_batch():
    ort = pytest.importorskip("onnxruntime")
    Inp, H = 3, 4
    W = rng.standard_normal((1, 4 * H, Inp)).astype("float32")
    R = rng.standard_normal((1, 4 * H, H)).astype("float32") * 0.5
    node = helper.make_node("LSTM", ["X", "W", "R", "", "L"], ["Y", "Yh", "Yc"], hidden_size=H)
    m = _model([node], [_vi("X", F, ["seq", "batch", Inp]), _vi("L", TensorProto.INT32,
                                                                 ["batch"])],
               [_vi(o, F, None) for o in ("Y", "Yh", "Yc")],
               [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")], opset=14)
    mod, _ = from_onnx(m)
    sess = ort.InferenceSession(m.SerializeToString())
    for T, N in ((6, 3), (2, 1)):
        x = rng.standard_normal((T, N, Inp)).astype("float32")
        lens = rng.integers(1, T + 1, N).astype("int32")
        for g, w in zip(_run(mod, x, lens), sess.run(None, {"X": x, "L": lens})):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)
