"""Operators whose output size depends on the data (argwhere / NonZero, unique, compress,
ONNX non-max suppression) and te.extern, which their kernels are written with.

Every op runs through the interpreter (FNumpy) and through its compiled kernel (built once, run
on inputs giving different counts: the executor's part, running the shape function on the host
and allocating the outputs, is done here by hand) against numpy / onnx's reference evaluator.
"""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.backend import lower_call, placeholders_for
from tvmpy.relay.expr import RelayTypeError
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.op.shape_func import ShapeFuncError, is_data_dependent, shape_func
from tvmpy.relay.type_infer import infer_type

rng = np.random.default_rng(23)


# ---- te.extern -----------------------------------------------------------------------------
def _positives(ins, outs):
    """Indices of the positive elements of ins[0], in order (a running count)."""
    ib = tvm.tir.ir_builder.create()
    a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    k = ib.allocate("int32", (1,), name="k", scope="local")
    k[0] = 0
    with ib.for_range(0, ins[0].shape[0], name="i") as i:
        with ib.if_scope(a[i] > 0.0):
            with ib.if_scope(k[0] < outs[0].shape[0]):
                o[k[0]] = i
            k[0] = k[0] + 1
    return ib.get()


def test_extern_symbolic_count_feeds_a_compute():
    n, m = te.var("n"), te.var("m")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0 - 1.0, name="B")
    c = te.extern((m,), [b], _positives, name="C", dtype="int64")
    d = te.compute((m,), lambda i: c[i] * 3 + 1, name="D")
    assert isinstance(c.op, te.ExternOp) and c.op.input_tensors == [b]
    s = te.create_schedule(d.op)
    text = str(tvm.lower(s, [a, d]))
    assert "C = allocate((m,), 'int64'" in text and "if B[i_1] > 0.0f" in text, text
    assert "with attr(C, 'extern_scope', 0):" in text, text
    f = tvm.build(s, [a, d])
    for size, p in ((1, 0.0), (1, 1.0), (7, 0.5), (13, 0.0), (13, 1.0), (31, 0.3)):
        x = np.where(rng.random(size) < p, rng.uniform(0.6, 2, size), rng.uniform(-2, 0.4, size))
        x = x.astype("float32")
        want = np.nonzero(x * 2 - 1 > 0)[0] * 3 + 1
        out = tvm.nd.array(np.zeros(len(want), "int64"))
        f(tvm.nd.array(x), out)
        np.testing.assert_array_equal(out.numpy(), want)


def test_extern_reads_a_cache_read_copy():
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    c = te.extern((n,), [a], _positives, name="C", dtype="int32")
    d = te.compute((n,), lambda i: c[i] + 1, name="D")
    s = te.create_schedule(d.op)
    aa = s.cache_read(a, "global", [c])
    assert s[d].op.input_tensors[0].op.input_tensors == [aa]
    f = tvm.build(s, [a, d])
    x = np.array([1.0, -1.0, 2.0, 3.0, -2.0], "float32")
    out = tvm.nd.array(np.zeros(5, "int32"))
    f(tvm.nd.array(x), out)
    np.testing.assert_array_equal(out.numpy()[:3], [1, 3, 4])  # 0, 2, 3 (+1); the rest unset


def test_extern_multiple_outputs_and_let():
    n = te.var("n")
    a = te.placeholder((n, 3), name="A")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        x, lo, hi = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0]), ib.buffer_ptr(outs[1])
        with ib.for_range(0, ins[0].shape[0], name="r") as r:
            base = ib.let("base", r * 3)
            lo[r] = tvm.te.min(x[base], x[base + 1], x[base + 2])
            m2 = ins[0]  # the placeholder Buffer itself: multi-dimensional loads
            hi[r] = tvm.te.max(m2[r, 0], m2[r, 1], m2[r, 2])
        return ib.get()

    outs = [tvm.tir.decl_buffer((n,), "float32", "lo_buf"), tvm.tir.decl_buffer((n,), "float32", "hi_buf")]
    lo, hi = te.extern([(n,), (n,)], [a], body, name="minmax", out_buffers=outs)
    assert lo.op.output_placeholders[0] is outs[0]
    s = te.create_schedule([lo.op])
    f = tvm.build(s, [a, lo, hi])
    for rows in (1, 5, 17):
        x = rng.standard_normal((rows, 3)).astype("float32")
        got = [tvm.nd.array(np.zeros(rows, "float32")) for _ in range(2)]
        f(tvm.nd.array(x), *got)
        np.testing.assert_array_equal(got[0].numpy(), x.min(1))
        np.testing.assert_array_equal(got[1].numpy(), x.max(1))


def test_extern_errors():
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="B")
    c = te.extern((n,), [b], _positives, name="C", dtype="int32")
    s = te.create_schedule(c.op)
    s[b].compute_inline()
    with pytest.raises(ValueError, match="input of extern stage C and cannot be compute_inline"):
        tvm.lower(s, [a, c])
    s = te.create_schedule(c.op)
    with pytest.raises(TypeError, match="split: stage C is an extern stage"):
        s[c].split(b.op.axis[0], 4)
    with pytest.raises(TypeError, match="returned None"):
        te.extern((n,), [a], lambda ins, outs: None, name="E")
    with pytest.raises(TypeError, match="inputs must be a list of te.Tensors"):
        te.extern((n,), [3], _positives)
    with pytest.raises(ValueError, match="2 output shapes but 3 dtypes"):
        te.extern([(n,), (n,)], [a], _positives, dtype=["int32"] * 3)

    def bad_store(ins, outs):
        ib = tvm.tir.ir_builder.create()
        ib.buffer_ptr(outs[0])[0] = ins[0][0]  # float into int32: must be cast
        return ib.get()

    with pytest.raises(TypeError, match="cast it"):
        te.extern((n,), [a], bad_store, dtype="int32")


# ---- the ops: helpers ----------------------------------------------------------------------
def _func(build, *params):
    return infer_type(relay.Function(list(params), build(*params)))


def _interp(func, *args):
    out = evaluate(func, *args)
    return [np.asarray(o) for o in out] if isinstance(out, (tuple, list)) else [np.asarray(out)]


def _compiled(func):
    """Build the function's one call (body or the tuple it returns) once; the returned runner
    sizes the outputs with the shape function, as an executor does, then calls the kernel."""
    call = func.body
    assert isinstance(call, relay.Call) and is_data_dependent(call.op)
    ins = placeholders_for(call)
    outs, schedule = lower_call(call, ins, "llvm")
    mod = tvm.build(schedule(outs), [*ins, *outs], "llvm")

    def run(*args):
        shapes = call.op.get_attr("FShapeFunc")(call.attrs, list(args))
        res = [tvm.nd.array(np.zeros(s, o.dtype)) for s, o in zip(shapes, outs)]
        mod(*[tvm.nd.array(np.require(a, requirements='C')) for a in args], *res)
        return [r.numpy() for r in res]

    return run


def _vm(func):
    """The function compiled once by relay.vm.compile: the op runs its upper-bound kernel
    (relay.op.upper_bound: no shape function before it, the kernel's count sizes the result)."""
    from tvmpy.runtime.vm import VirtualMachine

    exe = relay.vm.compile(tvm.IRModule.from_expr(func), "llvm")
    assert "upper bound]" in exe.bytecode, exe.bytecode
    vm = VirtualMachine(exe, tvm.cpu())

    def run(*args):
        out = vm.invoke("main", *args)
        return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]

    return run


def _both(func, args_list, reference):
    """The interpreter, the compiled kernel (built once, sized by the shape function) and the
    VM (built once, its upper-bound kernel) against ``reference`` on each argument tuple;
    returns the counts seen."""
    run, vm_run = _compiled(func), _vm(func)
    counts = []
    for args in args_list:
        want = [np.asarray(w) for w in reference(*args)]
        for got in (_interp(func, *args), run(*args), vm_run(*args)):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
                np.testing.assert_array_equal(g, w)
        counts.append(want[0].shape)
    return counts


def _onnx_ref(op_type, inputs, n_out, **attrs):
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    vis = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
           for nm, x in zip(names, inputs)]
    node = helper.make_node(op_type, names, outs, **attrs)
    graph = helper.make_graph([node], "g", vis,
                              [helper.make_empty_tensor_value_info(o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    del TensorProto
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


def _sparse(shape, p, dtype="float32"):
    x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1, 1], shape)
    return np.where(rng.random(shape) < p, x, 0).astype(dtype)


# ---- argwhere / NonZero --------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (5, 7), (2, 3, 4), (1, 1)])
def test_argwhere(shape):
    x = relay.var("x", shape=(relay.Any(),) + shape[1:])
    f = _func(relay.argwhere, x)
    assert str(f.body.checked_type) == f"Tensor[(?, {len(shape)}), int32]"
    sizes = [(1,) + shape[1:], shape, (11,) + shape[1:]]
    args = [(_sparse(s, p),) for s in sizes for p in (0.0, 0.4, 1.0)]
    counts = _both(f, args, lambda a: [np.argwhere(a).astype("int32")])
    assert {c[0] for c in counts} >= {0}  # none selected among them
    scalar = _func(relay.argwhere, relay.var("s", shape=()))  # (count, 0): count is 0 or 1
    _both(scalar, [(np.array(v, "float32"),) for v in (2.5, 0.0)],
          lambda a: [np.zeros((int(a != 0), 0), "int32")])
    booleans = relay.var("b", shape=(4, 3), dtype="bool")
    fb = _func(relay.argwhere, booleans)
    _both(fb, [(rng.random((4, 3)) < p,) for p in (0, 0.5, 1)],
          lambda a: [np.argwhere(a).astype("int32")])


# ---- compress ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress(axis):
    x = relay.var("x", shape=(4, 5))
    c = relay.var("c", shape=(relay.Any(),), dtype="bool")
    f = _func(lambda a, b: relay.compress(a, b, axis), x, c)
    n = 20 if axis is None else (4 if axis == 0 else 5)
    args = []
    for length in (1, n // 2, n):
        for p in (0.0, 0.5, 1.0):
            args.append((rng.standard_normal((4, 5)).astype("float32"), rng.random(length) < p))
    _both(f, args, lambda a, b: [np.compress(b, a, axis=axis)])


def test_compress_condition_past_the_end():
    x = relay.var("x", shape=(3,))
    c = relay.var("c", shape=(5,), dtype="bool")
    f = _func(lambda a, b: relay.compress(a, b, 0), x, c)
    ok = np.array([1, 0, 1, 0, 0], bool)  # entries past the end may be false (numpy's rule)
    np.testing.assert_array_equal(_interp(f, np.arange(3, dtype="float32"), ok)[0], [0, 2])
    with pytest.raises(ShapeFuncError, match="compress.*selects index 4, past the end of axis 0"):
        evaluate(f, np.arange(3, dtype="float32"), np.array([1, 0, 1, 0, 1], bool))
    with pytest.raises(RelayTypeError, match="condition must be 1-d"):
        infer_type(relay.compress(x, relay.var("c2", shape=(1, 3), dtype="bool")))


# ---- unique --------------------------------------------------------------------------------
@pytest.mark.parametrize("is_sorted", [True, False])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique(axis, is_sorted):
    x = relay.var("x", shape=(relay.Any(), 4))
    f = _func(lambda a: relay.unique(a, is_sorted, axis=axis).astuple(), x)
    ty = f.body.checked_type
    assert [str(t.dtype) for t in ty.fields] == ["float32", "int64", "int64", "int64"]
    args = []
    for rows in (1, 6, 9):
        few = rng.integers(0, 3, (rows, 4)).astype("float32")  # many repeats
        if axis is not None:  # repeated slices along the axis
            ax = axis % 2
            few = np.take(few, rng.integers(0, few.shape[ax], few.shape[ax]), axis=ax)
        args += [(few,), (rng.standard_normal((rows, 4)).astype("float32"),),
                 (np.full((rows, 4), 1.5, "float32"),)]

    def ref(a):
        if is_sorted or a.ndim == 1 or axis is None:
            kw = {} if axis is None else {"axis": axis}
            flat = a if axis is not None or is_sorted else a.reshape(-1)
            return _onnx_ref("Unique", [flat], 4, sorted=int(is_sorted), **kw)
        # onnx's reference takes the unsorted slices along axis 0 only: first occurrences here
        y, idx, inv, cnt = np.unique(a, True, True, True, axis=axis)
        order = np.argsort(idx)
        rank = np.argsort(order)
        return [np.take(a, idx[order], axis=axis), idx[order], rank[inv.reshape(-1)], cnt[order]]

    _both(f, args, ref)


@pytest.mark.parametrize("is_sorted", [True, False])
def test_unique_nan_and_large(is_sorted):
    """NaNs are one value, sorted last (numpy, onnx's reference); sizes over many merge passes."""
    x = relay.var("x", shape=(relay.Any(),))
    f = _func(lambda a: relay.unique(a, is_sorted).astuple(), x)
    nan = np.array([2.0, np.nan, 1.0, np.nan, 2.0, -0.5], "float32")
    args = [(nan,), (rng.integers(-40, 40, 997).astype("float32"),),
            (rng.standard_normal(1024).astype("float32"),)]
    _both(f, args, lambda a: _onnx_ref("Unique", [a], 4, sorted=int(is_sorted)))


def test_unique_errors():
    x = relay.var("x", shape=(3, 4))
    with pytest.raises(RelayTypeError, match="axis"):
        infer_type(relay.unique(x, axis=2).astuple())
    with pytest.raises(TypeError):  # TVM's positional return_counts is not an axis here
        relay.unique(x, True, True)


# ---- non-max suppression -------------------------------------------------------------------
def _nms_inputs(b, c, n, center, tie_scores):
    xy = rng.uniform(0, 4, (b, n, 2))
    wh = rng.uniform(0.5, 3, (b, n, 2))
    wh[rng.random((b, n, 2)) < 0.1] = 0  # degenerate boxes (zero area) are never suppressed
    if center:
        boxes = np.concatenate([xy, wh], -1)
    else:  # corners in either order (flipped boxes)
        boxes = np.concatenate([xy, xy + wh * rng.choice([-1, 1], (b, n, 2))], -1)
    if tie_scores:
        scores = rng.integers(0, 4, (b, c, n)) / 4.0
    else:
        scores = rng.random((b, c, n))
    return boxes.astype("float32"), scores.astype("float32")


@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(center):
    bx = relay.var("boxes", shape=(relay.Any(), relay.Any(), 4))
    sc = relay.var("scores", shape=(relay.Any(), relay.Any(), relay.Any()))
    mo = relay.var("max_out", shape=(1,), dtype="int64")
    io = relay.var("iou", shape=(1,), dtype="float32")
    so = relay.var("score", shape=(relay.Any(),), dtype="float32")
    f = _func(lambda *a: relay.vision.all_class_non_max_suppression(*a, center_point_box=center),
              bx, sc, mo, io, so)
    assert str(f.body.checked_type) == "Tensor[(?, 3), int64]"
    args = []
    for b, c, n in ((1, 1, 1), (2, 3, 9), (1, 2, 23)):
        for ties in (False, True):
            boxes, scores = _nms_inputs(b, c, n, center, ties)
            for m, iou, s in ((3, 0.5, [0.3]), (100, 0.2, []), (0, 0.5, [0.0]), (5, 0.0, [2.0]),
                              (100, 1.0, [-1.0])):  # limit, suppress most, none, none, all
                args.append((boxes, scores, np.array([m], "int64"), np.array([iou], "float32"),
                             np.array(s, "float32")))

    def ref(*a):
        return _onnx_ref("NonMaxSuppression", list(a), 1, center_point_box=center)

    counts = _both(f, args, ref)
    seen = {c[0] for c in counts}
    assert 0 in seen and max(seen) > 10


def test_non_max_suppression_errors():
    bx = relay.var("boxes", shape=(1, 5, 3))
    sc = relay.var("scores", shape=(1, 1, 5))
    one = relay.const(np.array([1], "int64"))
    th = relay.const(np.array([0.5], "float32"))
    with pytest.raises(RelayTypeError, match=r"boxes must be \(batch, boxes, 4\)"):
        infer_type(relay.vision.all_class_non_max_suppression(bx, sc, one, th, th))
    bx4 = relay.var("b4", shape=(1, 6, 4))
    with pytest.raises(RelayTypeError, match="disagree on the box count"):
        infer_type(relay.vision.all_class_non_max_suppression(bx4, sc, one, th, th))
    with pytest.raises(RelayTypeError, match="iou_threshold must be a scalar"):
        infer_type(relay.vision.all_class_non_max_suppression(
            bx4, relay.var("s6", shape=(1, 1, 6)), one, relay.const(np.ones(2, "float32")), th))
    anyb = relay.var("ab", shape=(1, relay.Any(), 4))
    f = _func(lambda b, s: relay.vision.all_class_non_max_suppression(b, s, one, th, th), anyb,
              relay.var("as", shape=(1, 1, relay.Any())))
    with pytest.raises(ShapeFuncError, match=r"boxes \(1, 5, 4\) and scores \(1, 1, 6\) disagree"):
        evaluate(f, np.ones((1, 5, 4), "float32"), np.ones((1, 1, 6), "float32"))
    with pytest.raises(ValueError, match="center_point_box must be 0 or 1"):
        relay.vision.all_class_non_max_suppression(bx4, sc, one, th, th, center_point_box=2)


def test_shape_func_needs_the_values():
    x = relay.var("x", shape=(3,))
    call = infer_type(relay.argwhere(x))
    assert is_data_dependent(call.op)
    fn = call.op.get_attr("FShapeFunc")  # fn(attrs, input arrays), as an executor calls it
    assert fn(call.attrs, [np.array([0.0, 2.0, -1.0], "float32")]) == [(2, 1)]
    from tvmpy.relay.op.shape_func import concrete_type

    with pytest.raises(ShapeFuncError, match="depends on the input values"):
        shape_func(call.op, call.attrs, [(3,)])
    with pytest.raises(ShapeFuncError, match="depends on input values"):
        concrete_type(call.op, call.attrs, [x.type_annotation])
    t = concrete_type(call.op, call.attrs, [x.type_annotation], [np.array([1.0, 0.0, 3.0], "float32")])
    assert tuple(t.shape) == (2, 1) and t.dtype == "int32"


def test_no_gpu_kernel():
    call = infer_type(relay.argwhere(relay.var("x", shape=(3,))))
    with pytest.raises(NotImplementedError, match="argwhere: no GPU kernel"):
        lower_call(call, placeholders_for(call), "cuda")


def test_graph_executor_refuses_a_data_dependent_shape():
    x = relay.var("x", shape=(4, 3))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.argwhere(x)))
    with pytest.raises(Exception, match=r"shape \(any_\d+, 2\).*not sizes of any graph input"):
        relay.build(mod, "llvm")


# ---- ONNX ----------------------------------------------------------------------------------
_ONNX_CASES = r"test_(nonzero|unique|nonmaxsuppression|compress)_"


def _node_cases(pattern):
    import re
    import warnings

    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c for c in load_node_model_tests() if re.match(pattern, c.name)]


def _run_node_cases(cases, executor="debug"):
    """Each case with every graph input fed at run time, in the interpreter (or the VM)."""
    from onnx import TensorProto, numpy_helper
    from onnx.backend.test.runner import Runner

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    for case in cases:
        inputs, ref = ([numpy_helper.to_array(t) if isinstance(t, TensorProto) else t for t in ts]
                       for ts in case.data_sets[0])
        rep = TvmpyBackend.prepare(case.model, executor=executor, bind_inputs=False)
        Runner.assert_similar_outputs(ref, list(rep.run(inputs)), rtol=case.rtol, atol=case.atol)
        if executor == "vm":
            assert rep.host_ops == [], (case.name, rep.host_ops)


def test_onnx_node_tests_fed_at_run_time():
    cases = _node_cases(_ONNX_CASES)
    assert len(cases) >= 20, [c.name for c in cases]
    _run_node_cases(cases)


def test_onnx_node_tests_through_the_vm():
    """The same node tests, one VM build each: every one runs its upper-bound kernel."""
    _run_node_cases(_node_cases(_ONNX_CASES), executor="vm")


def _one_node_model(op_type, inputs, n_out, **attrs):
    from onnx import helper

    vis = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shp)
           for nm, dt, shp in inputs]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op_type, [nm for nm, _, _ in inputs], outs, **attrs)
    graph = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_vm_one_build_many_counts():
    """ONNX backend, executor="vm", one build per model: NonMaxSuppression from every box kept to
    none (score threshold), Unique and NonZero of changing sizes (empty included), Compress with
    all / none selected, each against onnx's reference."""
    from onnx.reference import ReferenceEvaluator

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    def check(model, feeds_list):
        rep = TvmpyBackend.prepare(model, executor="vm", bind_inputs=False)
        assert rep.executor_used == "vm" and rep.host_ops == [], (rep.executor_used, rep.host_ops)
        ref = ReferenceEvaluator(model)
        counts = []
        for feeds in feeds_list:
            got = rep.run(list(feeds.values()))
            want = ref.run(None, feeds)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
                np.testing.assert_array_equal(g, w)
            counts.append(want[0].shape[0])
        return counts

    nms = _one_node_model("NonMaxSuppression", [("b", "float32", [2, "n", 4]),
                                                ("s", "float32", [2, 3, "n"]),
                                                ("m", "int64", [1]), ("i", "float32", [1]),
                                                ("t", "float32", [1])], 1)
    feeds = []
    for n, ties in ((1, False), (17, False), (40, False), (0, False), (300, True)):
        boxes, scores = _nms_inputs(2, 3, n, 0, ties)  # (ties: a deep heap of equal scores)
        for m, t in ((1000, -1.0), (1000, 0.5), (2, 0.3), (1000, 2.0), (0, 0.1)):
            feeds.append({"b": boxes, "s": scores, "m": np.array([m], "int64"),
                          "i": np.array([0.4], "float32"), "t": np.array([t], "float32")})
    counts = check(nms, feeds)
    assert 0 in counts and max(counts) > 40 and len(set(counts)) > 5, counts

    uniq = _one_node_model("Unique", [("x", "float32", ["n"])], 4, sorted=0)
    counts = check(uniq, [{"x": rng.integers(0, k, n).astype("float32")}
                          for n, k in ((50, 3), (7, 100), (0, 1), (301, 40), (1, 1))])
    assert len(set(counts)) == 5, counts
    nz = _one_node_model("NonZero", [("x", "float32", ["n", 3])], 1)
    check(nz, [{"x": _sparse((n, 3), p)} for n, p in ((5, 0.0), (9, 1.0), (0, 0.5), (30, 0.3))])
    cmp = _one_node_model("Compress", [("x", "float32", ["n", 4]), ("c", "bool", ["k"])], 1,
                          axis=1)
    check(cmp, [{"x": rng.standard_normal((n, 4)).astype("float32"), "c": rng.random(k) < p}
                for n, k, p in ((3, 4, 1.0), (5, 2, 0.0), (2, 4, 0.5), (0, 3, 1.0))])


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (0,)])
def test_argwhere_of_a_zero_extent_compiles(shape):
    """argwhere of an input with a constant 0 extent (an ONNX NonZero fed an empty batch)
    lowers to its kernel: its index arithmetic never divides by that 0 (it did, and the VM
    fell back to numpy silently); the result is empty, as numpy's."""
    x = relay.var("x", shape=shape)
    run = _vm(_func(lambda a: relay.argwhere(a), x))
    (got,) = run(np.ones(shape, "float32"))
    assert got.shape == (0, len(shape)) and got.dtype == np.int32


def test_vm_runs_no_host_shape_function(monkeypatch):
    """The VM sizes these ops by their kernels' counts: their data-dependent shape functions
    (a host pass over the data; for NMS the whole suppression) are never called."""
    x = relay.var("x", shape=(relay.Any(),))
    f = _func(lambda a: relay.Tuple([relay.argwhere(a), relay.unique(a)[0],
                                     relay.compress(a, relay.greater(a, relay.const(0.0)))]), x)

    def refuse(attrs, ins):
        raise AssertionError("shape function called")

    for name in ("argwhere", "unique", "compress", "vision.all_class_non_max_suppression"):
        monkeypatch.setitem(relay.op.get(name).entry.attrs, "FShapeFunc", refuse)
    run = _vm(f)
    for n in (0, 1, 6, 50):
        v = np.round(rng.standard_normal(n), 1).astype("float32")
        a, u, c = run(v)
        np.testing.assert_array_equal(a, np.argwhere(v).astype("int32"))
        np.testing.assert_array_equal(u, np.unique(v))
        np.testing.assert_array_equal(c, v[v > 0])


def test_vm_compress_condition_past_the_end():
    x = relay.var("x", shape=(relay.Any(),))
    c = relay.var("c", shape=(relay.Any(),), dtype="bool")
    run = _vm(_func(lambda a, b: relay.compress(a, b, 0), x, c))
    np.testing.assert_array_equal(run(np.arange(3, dtype="float32"), np.array([1, 0, 1, 0], bool))[0],
                                  [0, 2])
    from tvmpy.runtime.vm import VMError

    with pytest.raises(VMError, match="compress: the condition selects index 4, past the end "
                                        r"of axis 0 \(size 3\)"):
        run(np.arange(3, dtype="float32"), np.array([1, 0, 1, 0, 1], bool))
    bx = relay.var("b", shape=(1, relay.Any(), 4))
    sc = relay.var("s", shape=(1, 1, relay.Any()))
    th = relay.const(np.array([0.5], "float32"))
    nms = _vm(_func(lambda b, s: relay.vision.all_class_non_max_suppression(
        b, s, relay.const(np.array([2], "int64")), th, th), bx, sc))
    with pytest.raises(VMError, match=r"boxes \(1, 5, 4\) and scores \(1, 1, 6\) disagree"):
        nms(np.ones((1, 5, 4), "float32"), np.ones((1, 1, 6), "float32"))


def test_onnx_image_decoder_on_the_host():
    """ImageDecoder: a host operator (Pillow), no kernel; onnx's 9 node tests match exactly."""
    pytest.importorskip("PIL")
    op = relay.op.get("image.decode")
    assert op.get_attr("TRuntimeBuiltin") and op.get_attr("FTVMStrategy") is None
    cases = _node_cases(r"test_image_decoder_")
    assert len(cases) == 9, [c.name for c in cases]
    _run_node_cases(cases)
    enc = relay.var("enc", shape=(relay.Any(),), dtype="uint8")
    f = _func(lambda e: relay.op.image_decode.decode(e, "BGR"), enc)
    assert str(f.body.checked_type).endswith(", 3), uint8]")
    with pytest.raises(ShapeFuncError, match="image.decode: cannot decode the 5 bytes"):
        evaluate(f, np.arange(5, dtype="uint8"))
    with pytest.raises(RelayTypeError, match="must be a 1-d uint8 tensor"):
        infer_type(relay.op.image_decode.decode(relay.var("f", shape=(4,))))


def test_onnx_import_keeps_static_compress_and_folds_constant_nonzero():
    from onnx import TensorProto, helper

    from tvmpy.relay.frontend import from_onnx

    cond = helper.make_tensor("cond", TensorProto.BOOL, [3], [True, False, True])
    nz_in = helper.make_tensor("nz", TensorProto.FLOAT, [2, 2], [1.0, 0.0, 0.0, 3.0])
    nodes = [helper.make_node("Compress", ["x", "cond"], ["y"], axis=1),
             helper.make_node("NonZero", ["nz"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_empty_tensor_value_info("y"),
                               helper.make_empty_tensor_value_info("z")], initializer=[cond, nz_in])
    mod, params = from_onnx(helper.make_model(graph))
    text = str(mod["main"])
    assert "compress" not in text and "argwhere" not in text, text  # static: take / a constant
    x = rng.standard_normal((2, 3)).astype("float32")
    y, z = evaluate(mod["main"], x, **params) if params else evaluate(mod["main"], x)
    np.testing.assert_array_equal(np.asarray(y), x[:, [0, 2]])
    np.testing.assert_array_equal(np.asarray(z), [[0, 1], [0, 1]])


def test_onnx_masked_select_pipeline():
    """Greater -> NonZero -> Transpose -> GatherND -> Relu -> Unique, ReduceSum: ordinary ops
    after data-dependent ones, a symbolic batch, every input fed at run time (interpreter)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    nodes = [helper.make_node("Greater", ["x", "t"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "idx"], ["sel"]),
             helper.make_node("Relu", ["sel"], ["r"]),
             helper.make_node("Unique", ["r"], ["u", "ui", "uinv", "uc"]),
             helper.make_node("ReduceSum", ["sel"], ["s"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
                     helper.make_tensor_value_info("t", TensorProto.FLOAT, [])],
        [helper.make_empty_tensor_value_info(o) for o in ("idx", "sel", "u", "uc", "s")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    rep = TvmpyBackend.prepare(model, executor="debug", bind_inputs=False)
    ref = ReferenceEvaluator(model)
    for n in (1, 4, 9):
        for t in (-10.0, 0.3, 10.0):  # all, some, none selected
            x = np.round(rng.standard_normal((n, 3)), 1).astype("float32")
            feeds = {"x": x, "t": np.array(t, "float32")}
            for got, want in zip(rep.run([x, feeds["t"]]), ref.run(None, feeds)):
                assert got.shape == want.shape and got.dtype == want.dtype
                np.testing.assert_allclose(got, want, rtol=1e-6)


def test_onnx_nonzero_of_a_scalar_and_bool():
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    for elem, shape, values in ((TensorProto.FLOAT, [], [np.array(0.0, "float32"),
                                                        np.array(-3.0, "float32")]),
                                (TensorProto.BOOL, [2, 1, 3], [rng.random((2, 1, 3)) < p
                                                               for p in (0, 0.5, 1)])):
        graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", elem, shape)],
                                  [helper.make_empty_tensor_value_info("y")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        rep = TvmpyBackend.prepare(model, executor="debug", bind_inputs=False)
        for v in values:
            (want,) = ReferenceEvaluator(model).run(None, {"x": v})
            (got,) = rep.run([v])
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_whole_graph_through_the_vm():
    """With the VM (helper vm's relay.vm.compile): one build, the data-dependent calls run their
    compiled upper-bound kernels between ordinary segments."""
    vm_mod = pytest.importorskip("tvmpy.relay.vm")
    if not hasattr(vm_mod, "compile"):
        pytest.skip("relay.vm.compile is not on this branch")
    from tvmpy.runtime.vm import VirtualMachine

    x = relay.var("x", shape=(relay.Any(), 3))
    b = relay.var("b", shape=(1, relay.Any(), 4))
    s = relay.var("s", shape=(1, 2, relay.Any()))
    u = relay.unique(relay.nn.relu(x))
    nz = relay.argwhere(x)
    nms = relay.vision.all_class_non_max_suppression(
        b, s, relay.const(np.array([3], "int64")), relay.const(np.array([0.5], "float32")),
        relay.const(np.array([0.1], "float32")))
    c = relay.compress(x, relay.greater(relay.sum(x, axis=0), relay.const(0.0)), axis=1)
    out = relay.Tuple([u[0], u[3], relay.add(relay.cast(nz, "float32"), relay.const(1.0)), nms, c])
    mod = tvm.IRModule.from_expr(relay.Function([x, b, s], out))
    exe = vm_mod.compile(mod, "llvm")
    code = str(exe.bytecode)
    for op in ("argwhere", "unique", "vision.all_class_non_max_suppression", "compress"):
        assert f"kernel {op} [fused_" in code, code  # a compiled kernel, not numpy
    vm = VirtualMachine(exe, tvm.cpu())
    for n in (1, 5, 8):
        xv = np.round(rng.standard_normal((n, 3)), 1).astype("float32")
        bv, sv = _nms_inputs(1, 2, n, 0, True)
        got = vm.run(xv, bv, sv)
        for g, w in zip(got, evaluate(mod["main"], xv, bv, sv)):
            np.testing.assert_array_equal(g.numpy() if hasattr(g, "numpy") else np.asarray(g),
                                          np.asarray(w))


def test_onnx_bad_attributes_name_the_node():
    from onnx import TensorProto, helper

    from tvmpy.relay.frontend import from_onnx
    from tvmpy.relay.frontend.onnx import OnnxConvertError

    def model(node, inputs):
        vis = [helper.make_tensor_value_info(nm, t, s) for nm, t, s in inputs]
        graph = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info("y")])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    f = TensorProto.FLOAT
    uniq = helper.make_node("Unique", ["x"], ["y"], name="uq", axis=2)
    # (ONNX shape inference refuses it before the converter would)
    with pytest.raises(OnnxConvertError, match=r"Unique node 'uq': (axis 2 is out of range|"
                                               r"Invalid value for attribute axis \(axis=2\))"):
        from_onnx(model(uniq, [("x", f, [3, 4])]))
    nms = helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nms", center_point_box=3)
    with pytest.raises(OnnxConvertError, match="NonMaxSuppression node 'nms': center_point_box"):
        from_onnx(model(nms, [("b", f, [1, 4, 4]), ("s", f, [1, 1, 4])]))


def test_empty_inputs():
    x = relay.var("x", shape=(relay.Any(), 3))
    empty = np.zeros((0, 3), "float32")
    _both(_func(relay.argwhere, x), [(empty,)], lambda a: [np.argwhere(a).astype("int32")])
    f = _func(lambda a: relay.unique(a).astuple(), x)
    _both(f, [(empty,)], lambda a: _onnx_ref("Unique", [a.reshape(-1)], 4))
    c = relay.var("c", shape=(relay.Any(),), dtype="bool")
    _both(_func(lambda a, b: relay.compress(a, b, 0), x, c), [(empty, np.zeros(0, bool))],
          lambda a, b: [np.compress(b, a, axis=0)])
    bx, sc = relay.var("b", shape=(1, relay.Any(), 4)), relay.var("s", shape=(1, 2, relay.Any()))
    mo, io = relay.var("m", shape=(1,), dtype="int64"), relay.var("i", shape=(1,))
    f = _func(relay.vision.all_class_non_max_suppression, bx, sc, mo, io, relay.var("t", shape=(1,)))
    args = (np.zeros((1, 0, 4), "float32"), np.zeros((1, 2, 0), "float32"), np.array([3], "int64"),
            np.array([0.5], "float32"), np.array([0.1], "float32"))
    _both(f, [args], lambda *a: _onnx_ref("NonMaxSuppression", list(a), 1))


def test_onnx_compress_without_dynamic_inputs_binds_the_condition():
    """from_onnx(..., dynamic_inputs=False) (the backend's default, binding mode, for the graph
    executor) refuses a run-time condition, naming it; the backend then binds it and builds the
    static take, as before."""
    from onnx import TensorProto, helper

    from tvmpy.contrib.onnx_backend import TvmpyBackend
    from tvmpy.relay.frontend import from_onnx
    from tvmpy.relay.frontend.onnx import OnnxConstantInputError

    node = helper.make_node("Compress", ["x", "c"], ["y"], name="cmp", axis=1)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
        helper.make_tensor_value_info("c", TensorProto.BOOL, [4])],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    with pytest.raises(OnnxConstantInputError, match="Compress node 'cmp'") as e:
        from_onnx(model, {"x": (2, 4), "c": (4,)}, dtype={"x": "float32", "c": "bool"},
                  dynamic_inputs=False)
    assert e.value.tensors == ("c",)
    mod, _ = from_onnx(model, {"x": (2, 4), "c": (4,)}, dtype={"x": "float32", "c": "bool"})
    assert "compress(" in str(mod["main"])
    x = rng.standard_normal((2, 4)).astype("float32")
    for cond in (np.array([1, 0, 1, 1], bool), np.zeros(4, bool)):
        (got,) = TvmpyBackend.prepare(model, executor="graph").run([x, cond])
        np.testing.assert_array_equal(got, np.compress(cond, x, axis=1))


def test_vm_upper_bound_saved_and_loaded():
    """The upper-bound kernels survive Executable.save / load_exec; the exact results are
    prefixes (views) of the bounded buffers, which later runs never overwrite."""
    from tvmpy.runtime.vm import Executable, VirtualMachine

    x = relay.var("x", shape=(relay.Any(), 3))
    u = relay.unique(x, False, axis=0)
    f = relay.Function([x], relay.Tuple([relay.argwhere(x), u[0], u[3]]))
    exe = relay.vm.compile(tvm.IRModule.from_expr(f), "llvm")
    code, lib = exe.save()
    loaded = Executable.load_exec(code, lib)
    assert loaded.bytecode.count("upper bound]") == 2, loaded.bytecode
    vm = VirtualMachine(loaded, tvm.cpu())
    kept = []
    for n, k in ((6, 2), (9, 9), (1, 1), (0, 1)):
        v = rng.integers(0, k, (n, 3)).astype("float32")
        v[rng.random((n, 3)) < 0.3] = 0
        kept.append((v, vm.invoke("main", v)))
    for v, (a, y, cnt) in kept:
        np.testing.assert_array_equal(a.numpy(), np.argwhere(v).astype("int32"))
        ry, ri, _, rc = _onnx_ref("Unique", [v], 4, sorted=0, axis=0)
        np.testing.assert_array_equal(y.numpy(), ry)
        np.testing.assert_array_equal(cnt.numpy(), rc)
