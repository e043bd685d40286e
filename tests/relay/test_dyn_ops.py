"""relay.op.dyn: operators whose shape arguments are tensors. Each is checked against an
independent numpy reference on random inputs through the interpreter (FNumpy + the
data-dependent shape function) and through its compiled kernel: one build with symbolic data
and output extents, run at two run-time sizes (outputs allocated with the shape function's
shapes, as an executor does). Then the ONNX node tests of the converters that emit them, with
every graph input fed at run time, and bad inputs."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.analysis import free_vars
from tvmpy.relay.backend import lower_call, placeholders_for
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.op import dyn
from tvmpy.relay.op.shape_func import ShapeFuncError, is_data_dependent
from tvmpy.relay.type_infer import infer_type

rng = np.random.default_rng(2026)


def _any(rank):
    return tuple(relay.Any() for _ in range(rank))


def _v(name, rank_or_shape, dtype="float32"):
    shape = _any(rank_or_shape) if isinstance(rank_or_shape, int) else rank_or_shape
    return relay.var(name, shape=shape, dtype=dtype)


def _r(*shape, dtype="float32"):
    if dtype.startswith(("int", "uint")):
        return rng.integers(1, 50, size=shape).astype(dtype)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def _i(*v):
    return np.asarray(v, dtype=np.int64)


def _outs(v):
    return [np.asarray(x) for x in v] if isinstance(v, (tuple, list)) else [np.asarray(v)]


def check(expr, inputs_list, ref, tol=0.0):
    """``expr`` (one dyn call over free variables) against ``ref(*inputs)`` for each input set:
    the interpreter, and one compiled kernel run at every set."""
    params = free_vars(expr)
    func = infer_type(relay.Function(params, expr))
    call = func.body
    assert call.op.name.startswith("dyn.") or call.op.name == "shape_of"
    ins = placeholders_for(call)
    outs, schedule_fn = lower_call(call, ins, "llvm")
    mod = tvm.build(schedule_fn(outs), [*ins, *outs], "llvm")
    fn = call.op.get_attr("FShapeFunc")
    for inputs in inputs_list:
        inputs = [np.asarray(v) for v in inputs]
        want = _outs(ref(*inputs))
        got = _outs(evaluate(func, *inputs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w)
        # the call's arguments: the function's inputs, or constants
        by_var = dict(zip(params, inputs))
        args = [by_var[a] if a in by_var else a.data.numpy() for a in call.args]
        shapes = (fn(call.attrs, args) if is_data_dependent(call.op)
                  else [w.shape for w in want])
        res = [tvm.nd.array(np.zeros(s, o.dtype)) for s, o in zip(shapes, outs)]
        mod(*args, *res)
        for r, w in zip(res, want):
            np.testing.assert_allclose(r.numpy(), w, rtol=tol, atol=tol)


def test_reshape():
    x, s = _v("x", 3), _v("s", (3,), "int64")
    check(dyn.reshape(x, s), [(_r(2, 3, 5), _i(5, 0, -1)), (_r(7, 1, 4), _i(2, 2, 7))],
          lambda a, b: a.reshape([a.shape[k] if v == 0 else v for k, v in enumerate(b)]))


def test_reshape_allowzero_keeps_a_literal_zero():
    x, s = _v("x", 2), _v("s", (2,), "int64")
    check(dyn.reshape(x, s, allowzero=True), [(_r(0, 3), _i(3, 0)), (_r(4, 0), _i(0, 9))],
          lambda a, b: a.reshape(b))


def test_broadcast_to_both_ways():
    x, s = _v("x", (3, relay.Any())), _v("s", (3,), "int64")
    check(dyn.broadcast_to(x, s), [(_r(3, 1), _i(2, 1, 6)), (_r(3, 5), _i(1, 3, 1))],
          lambda a, b: a * np.ones(b, a.dtype))


def test_full():
    v, s = _v("v", (), "int32"), _v("s", (2,), "int64")
    check(dyn.full(v, s, "int32"), [(np.int32(7), _i(3, 4)), (np.int32(-2), _i(1, 13))],
          lambda a, b: np.full(b, a, "int32"))


@pytest.mark.parametrize("dtype,sets", [
    ("int32", [(3, 17, 4), (10, -5, -3)]),
    ("float32", [(1.5, 4.0, 0.5), (0.0, -2.0, -0.75)]),
])
def test_arange(dtype, sets):
    a, b, c = (_v(n, (), dtype) for n in "abc")
    data = [tuple(np.asarray(v, dtype) for v in s) for s in sets]
    check(dyn.arange(a, b, c, dtype), data, lambda s, e, d: np.arange(s, e, d).astype(dtype))


def test_tile():
    x, reps = _v("x", 2), _v("r", (3,), "int64")
    check(dyn.tile(x, reps), [(_r(2, 3), _i(2, 1, 3)), (_r(5, 1), _i(1, 4, 2))],
          lambda a, b: np.tile(a, b))


def _slice_ref(x, b, e, s, ax):
    sl = [slice(None)] * x.ndim
    for bb, ee, ss, aa in zip(b, e, s, ax):
        sl[aa] = slice(bb, ee, ss)
    return x[tuple(sl)]


def test_strided_slice_onnx_clamping():
    x = _v("x", 3)
    b, e, s, ax = (_v(n, (2,), "int64") for n in ("b", "e", "s", "ax"))
    big = np.iinfo(np.int64).max
    sets = [
        (_r(5, 7, 3), _i(1, -1), _i(big, -8), _i(2, -2), _i(1, -1)),
        (_r(2, 11, 4), _i(-100, 3), _i(2, big), _i(1, 1), _i(0, 2)),
        (_r(3, 13, 1), _i(-1, 20), _i(-100, 0), _i(-3, -1), _i(1, 0)),
    ]
    check(dyn.strided_slice(x, b, e, s, ax), sets, _slice_ref)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
def test_pad(mode):
    x, p, v = _v("x", 2), _v("p", (4,), "int64"), _v("v", (), "float32")
    ax = relay.const(_i(0, 1))
    sets = [(_r(3, 4), _i(1, 0, 2, 3), np.float32(1.5)), (_r(5, 2), _i(0, 1, 3, 1), np.float32(-2))]

    def ref(a, pads, val):
        w = [(pads[0], pads[2]), (pads[1], pads[3])]
        if mode == "constant":
            return np.pad(a, w, constant_values=val)
        return np.pad(a, w, mode=mode)

    check(dyn.nn.pad(x, p, v, ax, pad_mode=mode), sets, ref)


def test_pad_negative_crops_and_axes_tensor():
    x, p, v, ax = _v("x", 3), _v("p", (2,), "int64"), _v("v", (), "float32"), _v("a", (1,), "int64")
    sets = [(_r(2, 5, 3), _i(-1, 2), np.float32(9), _i(-2)),
            (_r(4, 2, 6), _i(2, -3), np.float32(0.5), _i(2))]

    def ref(a, pads, val, axis):
        w = [(0, 0)] * 3
        w[axis[0] % 3] = (max(pads[0], 0), max(pads[1], 0))
        y = np.pad(a, w, constant_values=val)
        sl = [slice(None)] * 3
        sl[axis[0] % 3] = slice(max(-pads[0], 0), y.shape[axis[0] % 3] - max(-pads[1], 0))
        return y[tuple(sl)]

    check(dyn.nn.pad(x, p, v, ax), sets, ref)


def test_squeeze_and_expand_dims():
    x, ax = _v("x", 4), _v("a", (2,), "int64")
    check(dyn.squeeze(x, ax), [(_r(1, 3, 1, 5), _i(0, -2)), (_r(4, 1, 7, 1), _i(3, 1))],
          lambda a, b: np.squeeze(a, tuple(int(v) for v in b)))
    y = _v("y", 2)
    check(dyn.expand_dims(y, ax), [(_r(3, 5), _i(0, 3)), (_r(2, 7), _i(-1, 1))],
          lambda a, b: np.expand_dims(a, tuple(int(v) % 4 for v in b)))


def test_squeeze_of_static_shape_keeps_it():
    x = relay.var("x", shape=(1, 3, 1, 5))
    t = infer_type(relay.Function([x], dyn.squeeze(x, relay.const(_i(0, 2))))).body.checked_type
    assert tuple(t.shape) == (3, 5)


def test_split():
    x, s = _v("x", 2), _v("s", (3,), "int64")
    check(dyn.split(x, s, axis=1).astuple(),
          [(_r(2, 9), _i(2, 0, 7)), (_r(3, 5), _i(1, 3, 1))],
          lambda a, b: np.split(a, np.cumsum(b)[:-1], axis=1))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx, d = _v("i", 2, "int64"), _v("d", (1,), "int64")
    on, off = relay.const(np.float32(3)), relay.const(np.float32(-1))

    def ref(i, depth):
        n = int(depth[0])
        j = np.where(i < 0, i + n, i)
        hot = np.expand_dims(j, axis) == np.arange(n).reshape(
            [n if k == axis % 3 else 1 for k in range(3)])
        return np.where(hot, np.float32(3), np.float32(-1))

    sets = [(rng.integers(-4, 6, size=(3, 2)), _i(5)), (rng.integers(-8, 9, size=(1, 4)), _i(7))]
    check(dyn.one_hot(idx, d, on, off, axis=axis), sets, ref)


@pytest.mark.parametrize("ascend", [False, True])
def test_topk_ties_in_index_order(ascend):
    x, k = _v("x", 2), _v("k", (1,), "int64")

    def ref(a, kk):
        n = a.shape[1]
        key = a if ascend else -a
        order = np.array([sorted(range(n), key=lambda j, row=row: (key[row, j], j))
                          for row in range(a.shape[0])]).reshape(a.shape[0], n)[:, :kk[0]]
        return np.take_along_axis(a, order, 1), order.astype(np.int64)

    ties = rng.integers(0, 4, size=(3, 9)).astype("float32")  # many equal values
    check(dyn.topk(x, k, axis=1, is_ascend=ascend).astuple(),
          [(ties, _i(4)), (_r(2, 13), _i(13)), (_r(5, 6), _i(1))], ref)


def test_shape_of():
    x = _v("x", 3)
    check(dyn.shape_of(x), [(_r(2, 3, 5),), (_r(7, 1, 1),)], lambda a: np.asarray(a.shape))


def test_resize_interpreter():
    """dyn.image.resize: the ONNX definition (the static converter's matrices) against
    onnx's reference implementation, scales and sizes, with and without axes."""
    from onnx.reference.ops.op_resize import _interpolate_nd, _linear_coeffs, _nearest_coeffs

    x = _v("x", 4)
    sc = _v("sc", (4,), "float32")
    a = _r(1, 2, 5, 7)
    scales = np.asarray([1, 1, 0.6, 1.7], np.float32)
    got = evaluate(relay.Function([x, sc], dyn.image.resize(x, sc, mode="linear")), a, scales)
    want = _interpolate_nd(a, _linear_coeffs, scale_factors=scales,
                           coordinate_transformation_mode="half_pixel")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    sz = _v("sz", (2,), "int64")
    f = relay.Function([x, sz], dyn.image.resize(x, sz, use_sizes=True, axes=(2, 3),
                                                 coordinate_transformation_mode="asymmetric",
                                                 nearest_mode="floor"))
    got = evaluate(f, a, _i(9, 3))
    want = _interpolate_nd(a, lambda r, s=None: _nearest_coeffs(r, mode="floor"),
                           output_size=[1, 2, 9, 3], coordinate_transformation_mode="asymmetric")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode,coord,nearest", [
    ("nearest", "half_pixel", "round_prefer_floor"), ("nearest", "asymmetric", "floor"),
    ("nearest", "align_corners", "round_prefer_ceil"), ("nearest", "half_pixel", "ceil"),
    ("linear", "half_pixel", ""), ("linear", "align_corners", ""),
    ("linear", "pytorch_half_pixel", ""), ("linear", "half_pixel_symmetric", ""),
    ("linear", "tf_crop_and_resize", ""), ("nearest", "tf_crop_and_resize", "round_prefer_floor"),
])
def test_resize_kernel(mode, coord, nearest):
    """The compiled kernel (scales and sizes read at run time) against the interpreter, which
    test_resize_interpreter checks against onnx's reference."""
    x, roi = _v("x", 4), _v("roi", (4,), "float32")
    sc, sz = _v("sc", (2,), "float32"), _v("sz", (2,), "int64")
    kw = dict(axes=(2, 3), mode=mode, coordinate_transformation_mode=coord,
              nearest_mode=nearest or "round_prefer_floor", extrapolation_value=-3.0)
    r = np.asarray([0.1, 0.2, 0.9, 0.7], np.float32)
    ref = lambda f: lambda *a: evaluate(f, *a)  # noqa: E731
    f = relay.Function([x, roi, sc], dyn.image.resize(x, sc, roi, **kw))
    check(f.body, [(_r(1, 2, 5, 7), r, np.asarray([0.6, 2.5], np.float32)),
                   (_r(2, 1, 3, 4), r, np.asarray([3.0, 1.0], np.float32))], ref(f), tol=1e-6)
    f = relay.Function([x, roi, sz], dyn.image.resize(x, sz, roi, use_sizes=True, **kw))
    check(f.body, [(_r(1, 2, 5, 7), r, _i(3, 11)), (_r(2, 1, 4, 1), r, _i(9, 2))], ref(f),
          tol=1e-6)


@pytest.mark.parametrize("method,coord", [("nearest_neighbor", "asymmetric"),
                                          ("linear", "half_pixel"),
                                          ("nearest_neighbor", "align_corners")])
def test_resize2d_matches_the_static_op(method, coord):
    """dyn.image.resize2d (size a run-time tensor) computes what image.resize2d does."""
    x = relay.var("x", shape=(2, 3, 5, 7))
    size = _v("size", (2,), "int64")
    a = _r(2, 3, 5, 7)
    for oh, ow in ((9, 4), (2, 13)):
        static = relay.image.resize2d(x, (oh, ow), method=method,
                                      coordinate_transformation_mode=coord)
        want = evaluate(relay.Function([x], static), a)
        f = relay.Function([x, size], dyn.image.resize2d(
            x, size, method=method, coordinate_transformation_mode=coord))
        assert tuple(infer_type(f).body.checked_type.shape[:2]) == (2, 3)
        np.testing.assert_allclose(evaluate(f, a, _i(oh, ow)), want, rtol=1e-5, atol=1e-6)


def test_resize_keeps_unresized_dims_static():
    x = relay.var("x", shape=(2, 3, 8, 8))
    f = infer_type(relay.Function([x], dyn.image.resize(
        x, relay.const(_i(4, 4)), use_sizes=True, axes=(2, 3))))
    t = f.body.checked_type
    assert tuple(t.shape[:2]) == (2, 3) and not isinstance(t.shape[2], int)


# ---- bad inputs: errors that name the operator, the shapes and the values --------------------
@pytest.mark.parametrize("build,inputs,match", [
    (lambda x, s: dyn.reshape(x, s), (_r(2, 3), _i(4, 2)),
     r"dyn.reshape: .*\(2, 3\).*cannot reshape \(2, 3\) \(6 elements\) to \[4, 2\]"),
    (lambda x, s: dyn.reshape(x, s), (_r(2, 3), _i(-1, -1)), r"more than one -1"),
    (lambda x, s: dyn.broadcast_to(x, s), (_r(2, 3), _i(4, 2)), r"do not broadcast"),
    (lambda x, s: dyn.tile(x, s), (_r(2, 3), _i(-1, 2)), r"negative repeats"),
    (lambda x, s: dyn.split(x, s, axis=1).astuple(), (_r(2, 3), _i(1, 1)),
     r"split sizes \[1, 1\] do not add up to axis 1"),
    (lambda x, s: dyn.squeeze(x, s), (_r(2, 3), _i(0, 1)), r"axis 0 .* has size 2, not 1"),
    (lambda x, s: dyn.expand_dims(x, s), (_r(2, 3), _i(1, 1)), r"name an axis twice"),
])
def test_bad_values_are_named(build, inputs, match):
    x, s = _v("x", 2), _v("s", (2,), "int64")
    with pytest.raises(ShapeFuncError, match=match):
        evaluate(relay.Function([x, s], build(x, s)), *inputs)


def test_bad_slice_and_topk_and_one_hot_values():
    x = _v("x", 2)
    b = _v("b", (1,), "int64")
    f = relay.Function([x, b], dyn.strided_slice(x, b, relay.const(_i(5)), relay.const(_i(0))))
    with pytest.raises(ShapeFuncError, match="step 0"):
        evaluate(f, _r(3, 4), _i(0))
    with pytest.raises(ShapeFuncError, match=r"k=6 is out of range for an axis of size 4"):
        evaluate(relay.Function([x, b], dyn.topk(x, b).astuple()), _r(3, 4), _i(6))
    i = _v("i", 1, "int64")
    f = relay.Function([i, b], dyn.one_hot(i, b, relay.const(np.float32(1)),
                                           relay.const(np.float32(0))))
    with pytest.raises(ShapeFuncError, match="depth 0 must be positive"):
        evaluate(f, _i(1, 2), _i(0))
    p = _v("p", (3,), "int64")
    with pytest.raises(relay.RelayTypeError, match="3 pads for 2 axes"):
        infer_type(relay.Function([x, p], dyn.nn.pad(x, p)))


def test_shape_tensor_types_are_checked():
    x = _v("x", 2)
    with pytest.raises(relay.RelayTypeError, match="the new shape must be an integer tensor"):
        infer_type(relay.Function([x], dyn.reshape(x, relay.var("s", shape=(2,)))))
    with pytest.raises(relay.RelayTypeError, match="1-D tensor of static length"):
        infer_type(relay.Function([x], dyn.reshape(x, relay.var("s", shape=(relay.Any(),),
                                                                  dtype="int64"))))


def test_ops_are_opaque_and_data_dependent():
    from tvmpy.relay.op import OpPattern

    names = [n for n in relay.op.list_op_names() if n.startswith("dyn.")]
    assert len(names) >= 13
    # (dyn.trilu / dyn.dropout read a run-time scalar that changes values, not the shape)
    static_shape = {"dyn.trilu", "dyn.dropout"}
    for n in names:
        op = relay.op.get(n)
        assert op.pattern == OpPattern.OPAQUE and is_data_dependent(op) != (n in static_shape), n
        assert op.get_attr("FNumpy") is not None and op.get_attr("FTVMStrategy") is not None


# ---- ONNX: the node tests of the converters that emit dyn ops, every input fed at run time ----
_ONNX_OPS = ("reshape", "expand", "constantofshape", "range", "tile", "slice", "pad", "split",
             "squeeze", "unsqueeze", "center_crop_pad", "resize", "upsample", "top_k", "onehot",
             "shape", "size")


def _node_cases():
    import re
    import warnings

    from onnx.backend.test.loader import load_node_model_tests

    pat = re.compile(r"test_(" + "|".join(_ONNX_OPS) + r")(_|$)")
    # (Range's expanded form is a Loop; sequences and bfloat16 belong to other work)
    skip = re.compile(r"range_.*_expanded|sequence|bfloat16")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [c for c in load_node_model_tests() if pat.match(c.name) and not skip.search(c.name)]


def test_onnx_node_cases_feed_every_input():
    """Every case of these operators with all graph inputs fed at run time (shape-like ones
    included: they become dyn ops), in the interpreter, checked as onnx's runner does."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, numpy_helper
    from onnx.backend.test.runner import Runner

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    cases = _node_cases()
    assert len(cases) >= 125
    failures = []
    for case in cases:
        try:
            rep = TvmpyBackend.prepare(case.model, executor="debug", bind_inputs=False)
            for ins, ref in case.data_sets:
                ins, ref = ([numpy_helper.to_array(t) if isinstance(t, TensorProto) else t
                             for t in ts] for ts in (ins, ref))
                with np.errstate(all="ignore"):
                    out = list(rep.run(ins))
                Runner.assert_similar_outputs(ref, out, rtol=case.rtol, atol=case.atol)
        except Exception as e:  # noqa: BLE001 -- collect every failing case, then report
            failures.append(f"{case.name}: {type(e).__name__}: {str(e).strip()[:200]}")
    assert not failures, f"{len(failures)}/{len(cases)} failed:\n" + "\n".join(failures)


def _onnx_reshape_model(shape_as_initializer):
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")
    inits = [numpy_helper.from_array(_i(3, -1), "s")] if shape_as_initializer else []
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 6))]
    if not shape_as_initializer:
        ins.append(helper.make_tensor_value_info("s", TensorProto.INT64, (2,)))
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                          None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_constant_shape_keeps_the_static_op():
    pytest.importorskip("onnx")
    from tvmpy.relay.frontend.onnx import from_onnx

    text = str(from_onnx(_onnx_reshape_model(True))[0]["main"])
    assert "reshape(%x, newshape=[3, 4]" in text and "dyn." not in text
    text = str(from_onnx(_onnx_reshape_model(False))[0]["main"])
    assert "dyn.reshape(%x, %s)" in text


def test_onnx_bad_run_time_shape_is_named():
    pytest.importorskip("onnx")
    from tvmpy.contrib.onnx_backend import TvmpyBackend

    rep = TvmpyBackend.prepare(_onnx_reshape_model(False), executor="debug", bind_inputs=False)
    x = _r(2, 6)
    np.testing.assert_array_equal(rep.run([x, _i(4, 3)])[0], x.reshape(4, 3))
    with pytest.raises(ShapeFuncError, match=r"dyn.reshape: .*\(2, 6\).*cannot reshape "
                                             r"\(2, 6\) \(12 elements\) to \[5, -1\]"):
        rep.run([x, _i(5, -1)])
