"""The last ONNX node-test operators (BitCast between float and integer types, MelWeightMatrix,
ai.onnx.ml ArrayFeatureExtractor / Binarizer / TreeEnsemble): random inputs through the
interpreter, the graph executor at opt_level 3 and the VM, against onnx's reference evaluator."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402
from tvmpy.relay.vm import VMCompileError  # noqa: E402

rng = np.random.default_rng(23)
F, I64 = TensorProto.FLOAT, TensorProto.INT64
EXECUTORS = [("debug", None), ("graph", 3), ("vm", 3)]


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset=21, ml=None):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    ops = [helper.make_opsetid("", opset)]
    if ml is not None:
        ops.append(helper.make_opsetid("ai.onnx.ml", ml))
    return helper.make_model(g, opset_imports=ops, ir_version=10)


def _check(model, feeds, executors=EXECUTORS, rtol=1e-6, atol=1e-6):
    want = ReferenceEvaluator(model).run(None, feeds)
    for executor, opt in executors:
        rep = TvmpyBackend.prepare(model, executor=executor, opt_level=opt)
        got = rep.run([feeds[vi.name] for vi in model.graph.input])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if w is None:  # an empty optional
                assert g is None, executor
                continue
            if isinstance(w, list):  # a sequence
                assert isinstance(g, list) and len(g) == len(w), executor
                for a, b in zip(g, w):
                    assert a.dtype == b.dtype and a.shape == b.shape, executor
                    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=executor)
                continue
            assert g.dtype == w.dtype and g.shape == w.shape, (executor, g.dtype, g.shape)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=executor)


@pytest.mark.parametrize("src,dst,shape", [
    ("float32", "int32", (3, 7)), ("int32", "float32", (5,)), ("float64", "int64", (2, 1, 3)),
    ("int64", "float64", ()), ("float16", "int16", (11,)), ("uint32", "float32", (1, 13)),
    ("float32", "uint32", (4, 3))])
def test_bitcast_float_int(src, dst, shape):
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    t_src = helper.np_dtype_to_tensor_dtype(np.dtype(src))
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=to)],
                   [_vi("x", t_src, list(shape))], [_vi("y", to, list(shape))], opset=26)
    if np.dtype(src).kind == "f":
        x = rng.normal(0, 100, size=shape).astype(src)
        x.reshape(-1)[:1] = -0.0 if x.size else x.reshape(-1)[:1]
    else:
        # integers whose bits are finite floats (no NaN payload: NaN != NaN in the comparison)
        x = rng.normal(0, 100, size=shape).astype(dst).view(src)
    _check(model, {"x": x}, rtol=0, atol=0)


def test_reinterpret_relay_op_rejects_width_change():
    from tvmpy import relay
    from tvmpy.relay.type_infer import infer_type

    x = relay.var("x", shape=(3,), dtype="float32")
    with pytest.raises(Exception, match="one bit width"):
        infer_type(relay.Function([x], relay.reinterpret(x, "int64")))


def test_binarizer():
    model = _model([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml",
                                     threshold=0.25)],
                   [_vi("x", F, [3, 1, 7])], [_vi("y", F, [3, 1, 7])], ml=1)
    _check(model, {"x": rng.normal(size=(3, 1, 7)).astype(np.float32)})


@pytest.mark.parametrize("dshape,ishape", [((5, 7), (3,)), ((2, 3, 11), (1, 4)), ((7,), (2,)),
                                           ((4, 6), (2, 2))])
def test_array_feature_extractor(dshape, ishape):
    model = _model([helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"],
                                     domain="ai.onnx.ml")],
                   [_vi("x", F, list(dshape)), _vi("i", I64, list(ishape))], [_vi("y", F, None)],
                   ml=1)
    idx = rng.integers(0, dshape[-1], size=ishape).astype(np.int64)
    _check(model, {"x": rng.normal(size=dshape).astype(np.float32), "i": idx})


def _random_ensemble(n_trees, n_feat, n_targets, dtype, member=False, missing=False):
    """Random trees in TreeEnsemble's attribute form (nodes of all trees in one list)."""
    nodes, leaves, roots, sets = [], [], [], []

    def grow(depth):  # returns (is_leaf, index)
        if depth > 0 and (depth >= 5 or rng.random() < 0.3):
            leaves.append((float(rng.normal() * 10), int(rng.integers(0, n_targets))))
            return True, len(leaves) - 1
        i = len(nodes)
        nodes.append(None)
        mode = int(rng.choice([0, 1, 2, 3, 4, 5, 6] if member else [0, 1, 2, 3, 4, 5]))
        split = float(np.round(rng.normal(), 1))
        if mode == 6:
            # (no member 0.0: onnx's reference ends a set at a falsy member)
            sets.append([float(np.round(v, 1)) or 0.5 for v in rng.normal(size=rng.integers(1, 4))])
        t, f = grow(depth + 1), grow(depth + 1)
        nodes[i] = (mode, split, int(rng.integers(0, n_feat)), t, f,
                    bool(missing and rng.random() < 0.5))
        return False, i

    for _ in range(n_trees):
        roots.append(grow(0)[1])
    mv = [v for s in sets for v in [*s, np.nan]]
    attrs = dict(
        n_targets=n_targets, tree_roots=roots,
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(nodes)], [n[0] for n in nodes]),
        nodes_splits=numpy_helper.from_array(np.array([n[1] for n in nodes], dtype), "s"),
        nodes_featureids=[n[2] for n in nodes],
        nodes_truenodeids=[n[3][1] for n in nodes], nodes_trueleafs=[int(n[3][0]) for n in nodes],
        nodes_falsenodeids=[n[4][1] for n in nodes],
        nodes_falseleafs=[int(n[4][0]) for n in nodes],
        leaf_weights=numpy_helper.from_array(np.array([w for w, _ in leaves], dtype), "w"),
        leaf_targetids=[t for _, t in leaves])
    if missing:
        attrs["nodes_missing_value_tracks_true"] = [int(n[5]) for n in nodes]
    if sets:
        attrs["membership_values"] = numpy_helper.from_array(np.array(mv, dtype), "mv")
    return attrs


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype,member,missing", [(np.float32, False, False),
                                                  (np.float64, True, True),
                                                  (np.float32, True, False)])
def test_tree_ensemble_random(agg, dtype, member, missing):
    attrs = _random_ensemble(7, 5, 3, dtype, member, missing)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _model([helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml",
                                     aggregate_function=agg, **attrs)],
                   [_vi("x", t, [13, 5])], [_vi("y", t, [13, 3])], ml=5)
    # split-like values (ties with EQ/NEQ/membership) and NaN (missing values)
    x = np.round(rng.normal(size=(13, 5)), 1).astype(dtype)
    x[rng.random(x.shape) < 0.1] = np.nan
    _check(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_tree_ensemble_bad_attributes_named():
    from tvmpy.relay.frontend import from_onnx

    attrs = _random_ensemble(2, 3, 2, np.float32)
    attrs["post_transform"] = 2
    model = _model([helper.make_node("TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", **attrs)],
                   [_vi("x", F, [4, 3])], [_vi("y", F, [4, 2])], ml=5)
    with pytest.raises(Exception, match="TreeEnsemble node.*post_transform=2"):
        from_onnx(model)


def _mel_model(consts=None, out_dt=None):
    names = ["n", "dft", "sr", "lo", "hi"]
    types = [TensorProto.INT64, TensorProto.INT64, TensorProto.INT64, F, F]  # one T1 (ONNX)
    kw = {} if out_dt is None else {"output_datatype": out_dt}
    nodes = [helper.make_node("MelWeightMatrix", names, ["y"], **kw)]
    inputs = [_vi(nm, t, []) for nm, t in zip(names, types)]
    if consts is not None:  # every input a Constant node: the importer folds the matrix
        nodes = [helper.make_node("Constant", [], [nm], value=numpy_helper.from_array(v, nm))
                 for nm, v in zip(names, consts)] + nodes
        inputs = []
    return _model(nodes, inputs, [_vi("y", out_dt or F, None)], opset=17)


def _mel_feeds(n, dft, sr, lo, hi):
    return {"n": np.asarray(n, np.int64), "dft": np.asarray(dft, np.int64),
            "sr": np.asarray(sr, np.int64), "lo": np.asarray(lo, np.float32),
            "hi": np.asarray(hi, np.float32)}


@pytest.mark.parametrize("n,dft,sr,lo,hi", [(8, 16, 8192, 0.0, 4096.0), (13, 64, 16000, 20.0, 7600.0),
                                            (1, 7, 22050, 133.3, 5000.0), (40, 512, 44100, 0.0, 22050.0),
                                            (5, 31, 8000, 300.0, 3999.5)])
def test_mel_weight_matrix(n, dft, sr, lo, hi):
    feeds = _mel_feeds(n, dft, sr, lo, hi)
    # fed at run time: one build, the output shape from the values (the VM)
    _check(_mel_model(), feeds)
    _check(_mel_model(consts=list(feeds.values()), out_dt=TensorProto.DOUBLE), {},
           executors=[("debug", None), ("graph", 3)])


def test_mel_weight_matrix_one_build_many_values():
    model = _mel_model()
    rep = TvmpyBackend.prepare(model, executor="vm", opt_level=3)
    for n, dft, sr, lo, hi in [(3, 10, 8000, 10.0, 3000.0), (17, 100, 16000, 55.5, 8000.0)]:
        feeds = _mel_feeds(n, dft, sr, lo, hi)
        want = ReferenceEvaluator(model).run(None, feeds)[0]
        got = rep.run(list(feeds.values()))[0]
        assert got.shape == (dft // 2 + 1, n)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,axis", [((3, 17), -1), ((2, 5, 7), 1), ((1, 4, 3, 11), -1)])
def test_softmax_float16_rounds_each_step_as_onnx(shape, axis):
    """float16 Softmax: bit-exact with onnx's reference along the last axis (each step of the
    function body rounded to float16), not a float32 softmax rounded once. Along another axis
    numpy sums float16 element by element in float16 (the last axis: pairwise in float32, as
    here): an ulp apart there."""
    h = TensorProto.FLOAT16
    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=axis)],
                   [_vi("x", h, list(shape))], [_vi("y", h, list(shape))], opset=13)
    x = (rng.normal(size=shape) * 3).astype(np.float16)
    tol = 0 if axis == -1 else 2e-3
    _check(model, {"x": x}, executors=[("debug", None), ("graph", 3)], rtol=tol, atol=tol)


def test_loop_grows_empty_int64_sequence():
    """SequenceEmpty (int64) carried by a Loop that inserts int64 tensors: the run-time list's
    element type is the inserted tensors' (test_sequence_map_extract_shapes_expanded)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Shape", ["x"], ["sh"]),
         helper.make_node("Unsqueeze", ["i", "ax"], ["i1"]),
         helper.make_node("Concat", ["sh", "i1"], ["row"], axis=0),
         helper.make_node("SequenceInsert", ["s_in", "row"], ["s_out"])],
        "body", [_vi("i", I64, []), _vi("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_sequence_value_info("s_in", I64, None)],
        [_vi("c_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("s_out", I64, None)],
        [numpy_helper.from_array(np.array([0], np.int64), "ax")])
    model = _model([helper.make_node("SequenceEmpty", [], ["e"], dtype=I64),
                    helper.make_node("Constant", [], ["t"], value=numpy_helper.from_array(
                        np.array(True), "t")),
                    helper.make_node("Loop", ["m", "t", "e"], ["out"], body=body)],
                   [_vi("m", I64, []), _vi("x", F, ["n", 3])],
                   [helper.make_tensor_sequence_value_info("out", I64, None)], opset=17)
    for m, n in [(4, 2), (1, 7)]:
        _check(model, {"m": np.asarray(m, np.int64),
                       "x": rng.normal(size=(n, 3)).astype(np.float32)},
               executors=[("debug", None), ("vm", 3), ("graph", 3)])


def _if_optional_model(seq: bool, get: bool):
    """If(c): then an empty optional, else an optional holding x (a tensor, or a sequence of
    it); outputs the optional and whether it has an element (``get``: its element, negated,
    instead of the optional)."""
    tp = (helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, [2, 3])) if seq
          else helper.make_tensor_type_proto(F, [2, 3]))
    otp = helper.make_optional_type_proto(tp)
    then_g = helper.make_graph([helper.make_node("Optional", [], ["o_t"], type=tp)], "then", [],
                               [helper.make_value_info("o_t", otp)])
    nodes = [helper.make_node("SequenceConstruct", ["x"], ["sx"])] if seq else []
    nodes.append(helper.make_node("Optional", ["sx" if seq else "x"], ["o_e"]))
    else_g = helper.make_graph(nodes, "else", [], [helper.make_value_info("o_e", otp)])
    nodes = [helper.make_node("If", ["c"], ["opt"], then_branch=then_g, else_branch=else_g),
             helper.make_node("OptionalHasElement", ["opt"], ["has"])]
    outs = [helper.make_value_info("opt", otp)]
    if get:
        nodes.append(helper.make_node("OptionalGetElement", ["opt"], ["g"]))
        if seq:
            nodes.append(helper.make_node("SequenceAt", ["g", "zero"], ["g0"]))
        nodes.append(helper.make_node("Neg", ["g0" if seq else "g"], ["got"]))
        outs = [_vi("got", F, [2, 3])]
    zero = helper.make_node("Constant", [], ["zero"],
                            value=numpy_helper.from_array(np.array(0, np.int64), "zero"))
    return _model([zero] + nodes, [_vi("c", TensorProto.BOOL, []), _vi("x", F, [2, 3])],
                  outs + [_vi("has", TensorProto.BOOL, [])], opset=18)


@pytest.mark.parametrize("seq", [False, True])
def test_if_optional_empty_in_one_branch(seq):
    """An optional whose presence is decided at run time (test_if_opt): present or None at
    the graph output, read by OptionalHasElement / OptionalGetElement. (onnx's reference
    evaluator wraps an If's optional output in a list and calls [None] present, so the
    expected values are written out.)"""
    x = rng.normal(size=(2, 3)).astype(np.float32)
    for executor, opt in EXECUTORS:
        for c in (True, False):
            rep = TvmpyBackend.prepare(_if_optional_model(seq, get=False), executor=executor,
                                       opt_level=opt)
            val, has = rep.run([np.asarray(c), x])
            assert bool(has) is (not c) and has.dtype == np.bool_, executor
            if c:
                assert val is None, executor
            else:
                np.testing.assert_array_equal(val[0] if seq else val, x)
                assert not seq or len(val) == 1
        rep = TvmpyBackend.prepare(_if_optional_model(seq, get=True), executor=executor,
                                   opt_level=opt)
        got, has = rep.run([np.asarray(False), x])
        np.testing.assert_array_equal(got, -x)


def test_runtime_optional_refused_by_other_ops():
    from tvmpy.relay.frontend import from_onnx

    tp = helper.make_tensor_type_proto(F, [2])
    then_g = helper.make_graph([helper.make_node("Optional", [], ["o_t"], type=tp)], "then", [],
                               [helper.make_value_info("o_t", helper.make_optional_type_proto(tp))])
    else_g = helper.make_graph([helper.make_node("Optional", ["x"], ["o_e"])], "else", [],
                               [helper.make_value_info("o_e", helper.make_optional_type_proto(tp))])
    model = _model([helper.make_node("If", ["c"], ["opt"], then_branch=then_g, else_branch=else_g),
                    helper.make_node("Relu", ["opt"], ["y"])],
                   [_vi("c", TensorProto.BOOL, []), _vi("x", F, [2])], [_vi("y", F, [2])],
                   opset=18)
    # (ONNX type inference refuses it before import; else the importer)
    with pytest.raises(Exception, match="Relu node.*(presence is known only at run time|"
                                        "unsupported type: optional)"):
        from_onnx(model)


@pytest.mark.parametrize("scales", [[1, 1, 0.6, 0.6], [1, 1, 0.45, 1.7]])
def test_resize_linear_antialias_run_time_scales(scales, monkeypatch):
    """Resize(antialias=1, linear) with its scales fed at run time, compiled: the kernel has
    no antialiased filter, so the VM runs it with numpy (it used to ignore antialias), with a
    RuntimeWarning naming the node (under the suite's strict mode: an error, so it is off
    here)."""
    model = _model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                     antialias=1)],
                   [_vi("x", F, [1, 2, 7, 5]), _vi("s", F, [4])], [_vi("y", F, None)], opset=19)
    feeds = {"x": rng.normal(size=(1, 2, 7, 5)).astype(np.float32),
             "s": np.asarray(scales, np.float32)}
    with pytest.raises(VMCompileError, match="antialiased linear resize has no kernel"):
        _check(model, feeds, [("vm", None)])
    monkeypatch.setenv("TVMPY_STRICT_SCHEDULES", "0")
    with pytest.warns(RuntimeWarning, match=r"dyn.image.resize.*antialiased linear resize has "
                                            r"no kernel\); the VM runs its numpy"):
        _check(model, feeds, rtol=1e-5, atol=1e-5)
