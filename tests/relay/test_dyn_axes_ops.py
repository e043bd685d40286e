"""Operators whose axes / scalar parameters are run-time tensors (relay.op.dyn reductions, trilu,
cumsum/cumprod, window, dropout): the interpreter and the compiled kernels (one build, run at
several sizes and parameter values) against numpy, the ONNX node tests of these operators with
every graph input fed at run time, and the errors for bad values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.op.dyn import dropout as dyn_dropout
from tvmpy.relay.op.dyn import reduce as dyn_reduce
from tvmpy.relay.op.dyn import scalar_args, window
from tvmpy.relay.op.shape_func import ShapeFuncError
from tvmpy.relay.ty import type_str
from tvmpy.relay.type_infer import infer_type
from tvmpy.topi.dyn.reduce import dyn_reduce as topi_dyn_reduce
from tvmpy.topi.dyn.scalar_args import dyn_scan, dyn_trilu

RNG = np.random.default_rng(1111)

_NP = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def _run(f, *args):
    out = relay.create_executor("debug").evaluate(f)(*args)
    return [np.asarray(o) for o in out] if isinstance(out, (tuple, list)) else np.asarray(out)


def _x(*shape, dtype="float32"):
    return RNG.uniform(0.5, 1.5, size=shape).astype(dtype)


# ---- reductions -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(_NP))
@pytest.mark.parametrize("keep", [True, False])
def test_reduce_interpreter_matches_numpy(kind, keep):
    x = relay.var("x", shape=(3, 1, 5, 2))
    a = relay.var("a", shape=(2,), dtype="int64")
    f = relay.Function([x, a], getattr(dyn_reduce, kind)(x, a, keepdims=keep))
    for axes in ([0, 2], [-1, 1], [3, 0]):
        xv = _x(3, 1, 5, 2)
        got = _run(f, xv, np.array(axes, "int64"))
        want = _NP[kind](xv, axis=tuple(axes), keepdims=keep)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_reduce_types():
    x = relay.var("x", shape=(3, 1, 5))
    a = relay.var("a", shape=(1,), dtype="int64")
    assert type_str(infer_type(dyn_reduce.sum(x, a)).checked_type) == \
        "Tensor[(?, 1, ?), float32]"
    assert type_str(infer_type(dyn_reduce.max(x, a, keepdims=False)).checked_type) == \
        "Tensor[(?, ?), float32]"
    n = relay.var("n", shape=(relay.Any(),), dtype="int64")
    with pytest.raises(relay.RelayTypeError, match="number of axes must be static"):
        infer_type(dyn_reduce.sum(x, n, keepdims=False))


def test_reduce_empty_axis_gives_identities_and_noop():
    x = relay.var("x", shape=(2, 0, 3))
    a = relay.var("a", shape=(1,), dtype="int64")
    for kind, ident in [("sum", 0), ("prod", 1), ("max", -np.inf), ("min", np.inf),
                        ("mean", 0)]:
        got = _run(relay.Function([x, a], getattr(dyn_reduce, kind)(x, a)),
                   np.zeros((2, 0, 3), "float32"), np.array([1], "int64"))
        np.testing.assert_array_equal(got, np.full((2, 1, 3), ident, "float32"))
    e = relay.var("e", shape=(relay.Any(),), dtype="int64")
    y = relay.var("y", shape=(2, 3))
    yv = _x(2, 3)
    noop = relay.Function([y, e], dyn_reduce.sum(y, e, noop_with_empty_axes=True))
    np.testing.assert_array_equal(_run(noop, yv, np.zeros((0,), "int64")), yv)
    every = relay.Function([y, e], dyn_reduce.sum(y, e))
    np.testing.assert_allclose(_run(every, yv, np.zeros((0,), "int64")),
                               yv.sum(keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("axes, msg", [([0, 3], "axes value 3 is out of range"),
                                       ([1, -4], "axes value -4 is out of range"),
                                       ([1, -2], "repeated axes")])
def test_reduce_bad_axes_name_node_and_value(axes, msg):
    x = relay.var("x", shape=(2, 3, 4))
    a = relay.var("a", shape=(2,), dtype="int64")
    f = relay.Function([x, a], dyn_reduce.sum(x, a, node="ReduceSum node 'r7'"))
    with pytest.raises(ShapeFuncError, match=f"ReduceSum node 'r7': {msg}"):
        _run(f, _x(2, 3, 4), np.array(axes, "int64"))


def _reduce_kernel(kind, rank, keep, n_axes):
    d = [te.var(f"d{k}") for k in range(rank)]
    o = [te.var(f"o{k}") for k in range(rank if keep else rank - n_axes)]
    A = te.placeholder(d, name="A")
    X = te.placeholder((n_axes,), dtype="int64", name="axes")
    B = topi_dyn_reduce(A, X, o, kind, keep)
    return tvm.build(te.create_schedule(B.op), [A, X, B], "llvm")


@pytest.mark.parametrize("kind", list(_NP))
@pytest.mark.parametrize("keep", [True, False])
def test_reduce_kernel_one_build_several_shapes_and_axes(kind, keep):
    f = _reduce_kernel(kind, 3, keep, 2)
    for shape, axes in [((3, 4, 5), (0, 2)), ((7, 1, 2), (-1, 1)), ((2, 3, 1), (1, 0)),
                        ((4, 0, 3), (0, 2))]:
        xv = _x(*shape)
        want = _NP[kind](xv, axis=axes, keepdims=keep)
        out = tvm.nd.array(np.full(want.shape, np.nan, "float32"))
        f(tvm.nd.array(xv), tvm.nd.array(np.array(axes, "int64")), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)


def test_reduce_kernel_empty_reduced_axis_and_int():
    f = _reduce_kernel("max", 2, True, 1)
    out = tvm.nd.array(np.zeros((3, 1), "float32"))
    f(tvm.nd.array(np.zeros((3, 0), "float32")), tvm.nd.array(np.array([1], "int64")), out)
    np.testing.assert_array_equal(out.numpy(), np.full((3, 1), -np.inf, "float32"))
    d = [te.var("d0"), te.var("d1")]
    A = te.placeholder(d, dtype="int32", name="A")
    X = te.placeholder((1,), dtype="int64", name="axes")
    o = [te.var("o0")]
    B = topi_dyn_reduce(A, X, o, "sum", False)
    g = tvm.build(te.create_schedule(B.op), [A, X, B], "llvm")
    xv = RNG.integers(-50, 50, size=(5, 3)).astype("int32")
    for ax in (0, 1):
        out = tvm.nd.array(np.zeros((xv.shape[1 - ax],), "int32"))
        g(tvm.nd.array(xv), tvm.nd.array(np.array([ax], "int64")), out)
        np.testing.assert_array_equal(out.numpy(), xv.sum(axis=ax))


# ---- trilu, cumsum, cumprod ------------------------------------------------------------------
def test_trilu_interpreter_and_kernel():
    x = relay.var("x", shape=(2, 4, 5))
    k = relay.var("k", shape=(), dtype="int64")
    for upper in (True, False):
        f = relay.Function([x, k], scalar_args.trilu(x, k, upper))
        n, m = te.var("n"), te.var("m")
        A = te.placeholder((2, n, m), name="A")
        K = te.placeholder((), dtype="int64", name="k")
        B = dyn_trilu(A, K, upper)
        g = tvm.build(te.create_schedule(B.op), [A, K, B], "llvm")
        for shape, kv in [((2, 4, 5), -1), ((2, 4, 5), 2), ((2, 7, 3), 0), ((2, 3, 3), -5)]:
            xv = _x(*shape)
            want = np.triu(xv, kv) if upper else np.tril(xv, kv)
            if shape == (2, 4, 5):
                np.testing.assert_array_equal(_run(f, xv, np.array(kv, "int64")), want)
            out = tvm.nd.array(np.full(shape, np.nan, "float32"))
            g(tvm.nd.array(xv), tvm.nd.array(np.array(kv, "int64")), out)
            np.testing.assert_array_equal(out.numpy(), want)


def _scan_ref(kind, x, ax, exclusive, reverse):
    y = np.flip(x, ax) if reverse else x
    acc = (np.cumsum if kind == "sum" else np.cumprod)(y, axis=ax)
    if exclusive:
        ident = np.full_like(np.take(acc, [0], axis=ax), 0 if kind == "sum" else 1)
        acc = np.concatenate([ident, np.take(acc, np.arange(x.shape[ax] - 1), axis=ax)], ax)
    return np.flip(acc, ax) if reverse else acc


@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (True, False), (False, True),
                                                (True, True)])
def test_scan_interpreter_and_kernel(kind, exclusive, reverse):
    x = relay.var("x", shape=(3, 4, 5))
    a = relay.var("a", shape=(1,), dtype="int32")
    fn = scalar_args.cumsum if kind == "sum" else scalar_args.cumprod
    f = relay.Function([x, a], fn(x, a, exclusive, reverse))
    d = [te.var(f"d{k}") for k in range(3)]
    A = te.placeholder(d, name="A")
    X = te.placeholder((1,), dtype="int32", name="axis")
    B = dyn_scan(A, X, kind, exclusive, reverse)
    g = tvm.build(te.create_schedule(B.op), [A, X, B], "llvm")
    for shape, ax in [((3, 4, 5), 1), ((3, 4, 5), -1), ((7, 2, 1), 0), ((2, 1, 6), 2)]:
        xv = _x(*shape)
        want = _scan_ref(kind, xv, ax, exclusive, reverse)
        if shape == (3, 4, 5):
            np.testing.assert_allclose(_run(f, xv, np.array([ax], "int32")), want, rtol=1e-5)
        out = tvm.nd.array(np.full(shape, np.nan, "float32"))
        g(tvm.nd.array(xv), tvm.nd.array(np.array([ax], "int32")), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)


def test_scan_bad_axis_names_node_and_value():
    x = relay.var("x", shape=(3, 4))
    a = relay.var("a", shape=(), dtype="int64")
    f = relay.Function([x, a], scalar_args.cumsum(x, a, node="CumSum node 'c'"))
    with pytest.raises(ValueError, match="CumSum node 'c': axis value 2 is out of range"):
        _run(f, _x(3, 4), np.array(2, "int64"))


# ---- window, dropout --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["hann", "hamming", "blackman"])
@pytest.mark.parametrize("periodic", [True, False])
def test_window_interpreter_and_kernel(kind, periodic):
    from tvmpy.relay.op.strategy import select_implementation

    s = relay.var("s", shape=(), dtype="int64")
    call = infer_type(window.window(s, kind, periodic))
    assert type_str(call.checked_type) == "Tensor[(?), float32]"
    impl = select_implementation(call.op, call.attrs, [te.placeholder((), "int64")],
                                 call.checked_type, "llvm")
    (out_t,) = impl.compute(call.attrs, [te.placeholder((), "int64")], call.checked_type)
    g = tvm.build(te.create_schedule(out_t.op), [out_t], "llvm")
    f = relay.Function([s], window.window(s, kind, periodic))
    a0, a1, a2 = window.WINDOWS[kind]
    for n in (10, 7, 1):
        k = np.arange(n)
        N = n if periodic else n - 1
        with np.errstate(all="ignore"):
            want = (a0 + a1 * np.cos(2 * np.pi * k / N) + a2 * np.cos(4 * np.pi * k / N))
        got = _run(f, np.array(n, "int64"))
        np.testing.assert_allclose(got, want.astype("float32"), rtol=1e-6, atol=1e-7)
        out = tvm.nd.array(np.full((n,), np.nan, "float32"))
        g(out)
        np.testing.assert_allclose(out.numpy(), got, rtol=1e-6, atol=1e-7)


def test_dropout_identity_unless_training_with_a_ratio():
    x = relay.var("x", shape=(40, 50))
    r = relay.var("r", shape=(), dtype="float32")
    t = relay.var("t", shape=(), dtype="bool")
    out, mask = dyn_dropout.dropout(x, r, t, seed=3)
    f = relay.Function([x, r, t], relay.Tuple([out, mask]))
    xv = _x(40, 50)
    for ratio, training in [(0.5, False), (0.0, True)]:
        y, m = _run(f, xv, np.float32(ratio), np.bool_(training))
        np.testing.assert_array_equal(y, xv)
        assert m.all()
    y, m = _run(f, xv, np.float32(0.25), np.bool_(True))  # random: statistics only
    assert 0.65 < m.mean() < 0.85
    np.testing.assert_allclose(y[m], xv[m] / 0.75, rtol=1e-6)
    assert (y[~m] == 0).all()


# ---- ONNX node tests, every input fed at run time -------------------------------------------
_ONNX_CASES = r"^test_(reduce_|tril|triu|cumsum|cumprod|(hann|hamming|blackman)window(_symmetric)?$" \
    r"|dft(?!_inverse_opset19)|stft|col2im|affine_grid_.d(_align_corners)?$|maxunpool" \
    r"|dropout|training_dropout_zero_ratio)"
_RANDOM = {"test_training_dropout", "test_training_dropout_default",
           "test_training_dropout_mask", "test_training_dropout_default_mask"}


@pytest.fixture(scope="module")
def onnx_cases():
    pytest.importorskip("onnx")
    import re

    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return [c for c in load_node_model_tests()
                if re.match(_ONNX_CASES, c.name) and c.name not in _RANDOM]


def test_onnx_node_tests_fed_at_run_time(onnx_cases):
    from onnx import TensorProto, numpy_helper
    from onnx.backend.test.runner import Runner

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    assert len(onnx_cases) >= 150
    failed = []
    for case in onnx_cases:
        inputs, ref = [[numpy_helper.to_array(t) if isinstance(t, TensorProto) else t
                        for t in ts] for ts in case.data_sets[0]]
        rep = TvmpyBackend.prepare(case.model, "CPU", executor="debug", bind_inputs=False)
        try:
            with np.errstate(all="ignore"):
                out = list(rep.run(inputs))
            Runner.assert_similar_outputs(ref, out, rtol=case.rtol, atol=case.atol)
        except Exception as e:  # noqa: BLE001 -- collect every failing case
            failed.append(f"{case.name}: {type(e).__name__}: {str(e)[:200]}")
    assert not failed, "\n".join(failed)


def test_onnx_reduce_axes_out_of_range_names_the_node():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="rsum", keepdims=1)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    from tvmpy.contrib.onnx_backend import TvmpyBackend

    rep = TvmpyBackend.prepare(model, "CPU", executor="debug", bind_inputs=False)
    np.testing.assert_allclose(rep.run([_x(2, 3), np.array([1], "int64")])[0].shape, (2, 1))
    with pytest.raises(ShapeFuncError, match="ReduceSum node 'rsum': axes value 5 is out of "
                                             "range for data of rank 2"):
        rep.run([_x(2, 3), np.array([5], "int64")])


# ---- compiled kernels of the data-dependent ops through their strategies ----------------------
def _strategy_kernel(expr, key="cpu"):
    """Build ``expr``'s (one call on relay vars) strategy compute once, on placeholders of the
    vars' (possibly ``?``) shapes, with the "cpu" (x86) or "generic" schedule; returns a runner
    ``f(*arrays) -> output`` whose output shape comes from the interpreter (the shape function's
    job in an executor)."""
    from tvmpy.relay.op.strategy import select_implementation
    from tvmpy.target import as_target

    call = infer_type(expr)
    if isinstance(call, relay.TupleGetItem):  # (dropout: its first output)
        call = call.tuple_value
    ins = [te.placeholder(a.checked_type.shape, a.checked_type.dtype, name=a.name_hint)
           for a in call.args]
    if key == "cpu":
        impl = select_implementation(call.op, call.attrs, ins, call.checked_type, "llvm")
        assert impl.name.endswith(".x86"), impl.name
    else:
        gfunc = call.op.get_attr("FTVMStrategy").generic_func
        impl = gfunc.fdefault(call.attrs, ins, call.checked_type, as_target("llvm")).best()
    outs = impl.compute(call.attrs, ins, call.checked_type)
    if isinstance(call.checked_type, relay.TupleType):
        outs = outs[:1]
    g = tvm.build(impl.schedule(call.attrs, outs, "llvm"), [*ins, *outs], "llvm")
    interp = relay.Function(list(call.args), expr)  # (the args are all vars)

    def run(*arrays):
        want = _run(interp, *arrays)
        out = tvm.nd.array(np.full(want.shape, np.nan, want.dtype))
        g(*[tvm.nd.array(a) for a in arrays], out)
        return out.numpy(), want

    return run


def _v(name, shape, dtype="float32"):
    return relay.var(name, shape=[relay.Any() if d is None else d for d in shape], dtype=dtype)


@pytest.mark.parametrize("inverse, onesided", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_dft_kernel_matches_interpreter(inverse, onesided):
    from tvmpy.relay.op.dyn import signal

    ch = 2 if inverse else 1
    x, a = _v("x", (1, None, None, ch)), _v("a", (), "int64")
    run = _strategy_kernel(signal.dft(x, a, inverse, onesided))
    for shape, axis in [((1, 6, 5, ch), 1), ((1, 4, 7, ch), -2), ((1, 3, 1, ch), 1)]:
        xv = RNG.standard_normal(shape).astype("float32")
        got, want = run(xv, np.array(axis, "int64"))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    ref = np.fft.fft(xv[..., 0], axis=1) if not inverse and not onesided else None
    if ref is not None:
        np.testing.assert_allclose(got[..., 0], ref.real, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("has_window", [True, False])
def test_stft_kernel_matches_interpreter(has_window):
    from tvmpy.relay.op.dyn import signal

    sig, step = _v("s", (2, None, 1)), _v("st", (), "int64")
    third = _v("w", (None,)) if has_window else _v("fl", (), "int64")
    run = _strategy_kernel(signal.stft(sig, step, third, has_window))
    for n, st, fl in [(32, 4, 8), (19, 3, 5)]:
        sv = RNG.standard_normal((2, n, 1)).astype("float32")
        t = RNG.uniform(0.2, 1, fl).astype("float32") if has_window else np.array(fl, "int64")
        got, want = run(sv, np.array(st, "int64"), t)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        frames = sv[0, np.arange((n - fl) // st + 1)[:, None] * st + np.arange(fl), 0]
        win = t if has_window else 1.0
        np.testing.assert_allclose(got[0, ..., 0], np.fft.rfft(frames * win, axis=-1).real,
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_kernel_matches_interpreter(align):
    from tvmpy.relay.op.dyn import spatial

    for nd in (2, 3):
        th, sz = _v("theta", (2, nd, nd + 1)), _v("size", (nd + 2,), "int64")
        run = _strategy_kernel(spatial.affine_grid(th, sz, align))
        for spatial_size in ([5, 3, 1, 4][:nd], [2, 7, 3][:nd]):
            tv = RNG.standard_normal((2, nd, nd + 1)).astype("float32")
            got, want = run(tv, np.array([2, 3, *spatial_size], "int64"))
            assert want.shape == (2, *spatial_size, nd)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_col2im_kernel_matches_interpreter():
    from tvmpy.relay.op.dyn import spatial

    x, im, bl = _v("x", (2, None, None)), _v("im", (2,), "int64"), _v("bl", (2,), "int64")
    run = _strategy_kernel(spatial.col2im(x, im, bl, dilations=(1, 2), pads=(1, 0, 0, 1),
                                          strides=(2, 1)))
    for image, block, C in [((5, 6), (2, 3), 3), ((4, 7), (3, 1), 2)]:
        nblk = [(image[0] + 1 - (block[0] - 1) - 1) // 2 + 1,
                (image[1] + 1 - (2 * (block[1] - 1) + 1)) + 1]
        xv = _x(2, C * block[0] * block[1], nblk[0] * nblk[1])
        got, want = run(xv, np.array(image, "int64"), np.array(block, "int64"))
        assert want.shape == (2, C, *image)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_max_unpool_kernel_matches_interpreter():
    from tvmpy.relay.op.dyn import spatial

    x, i, o = _v("x", (1, 2, 2, 2)), _v("i", (1, 2, 2, 2), "int64"), _v("o", (4,), "int64")
    run = _strategy_kernel(spatial.max_unpool(x, i, o, (1, 2, 4, 4)))
    xv = _x(1, 2, 2, 2)
    iv = np.array([[[[0, 3], [9, 14]], [[16, 18], [27, 31]]]], "int64")
    for out in ((1, 2, 4, 4), (1, 2, 5, 5), (1, 2, 3, 4)):
        got, want = run(xv, iv, np.array(out, "int64"))
        assert want.shape == out and np.count_nonzero(want) > 0
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ShapeFuncError, match="output_shape"):
        _run(relay.Function([x, i, o], spatial.max_unpool(x, i, o, (1, 2, 4, 4))), xv, iv,
             np.array([1, 3, 4, 4], "int64"))


@pytest.mark.parametrize("key", ["cpu", "generic"])
def test_strategies_of_every_axes_op_one_build_two_sizes(key):
    """Each op's strategy (x86 schedule, and the generic one) built once on ``?`` shapes, run at
    two sizes / parameter values against the interpreter."""
    from tvmpy.relay.op.dyn import signal, spatial

    x, a2 = _v("x", (None, 3, None)), _v("a", (2,), "int64")
    k0, w = _v("k", (), "int64"), _v("s", (), "int64")
    xs = [_x(4, 3, 5), _x(7, 3, 2)]
    cases = [(getattr(dyn_reduce, kind)(x, a2, keepdims=keep),
              [[xs[0], np.array([0, 2], "int64")], [xs[1], np.array([-1, 1], "int64")]])
             for kind in _NP for keep in (True, False)]
    cases += [(scalar_args.trilu(x, k0), [[xs[0], np.array(1, "int64")],
                                          [xs[1], np.array(-1, "int64")]]),
              (scalar_args.cumprod(x, k0, reverse=True), [[xs[0], np.array(2, "int64")],
                                                          [xs[1], np.array(0, "int64")]]),
              (window.window(w, "blackman", False), [[np.array(9, "int64")],
                                                     [np.array(4, "int64")]]),
              (dyn_dropout.dropout(x, _v("r", (), "float32"), _v("tm", (), "bool"))[0],
               [[xs[0], np.array(0.3, "float32"), np.array(False)],
                [xs[1], np.array(0.0, "float32"), np.array(True)]]),
              (signal.dft(_v("d", (1, None, 2, 2)), k0), [
                  [RNG.standard_normal((1, 5, 2, 2)).astype("float32"), np.array(1, "int64")],
                  [RNG.standard_normal((1, 3, 2, 2)).astype("float32"), np.array(2, "int64")]]),
              (spatial.affine_grid(_v("t", (2, 2, 3)), _v("z", (4,), "int64"), True), [
                  [_x(2, 2, 3), np.array([2, 1, 3, 4], "int64")],
                  [_x(2, 2, 3), np.array([2, 1, 5, 2], "int64")]])]
    for expr, runs in cases:
        run = _strategy_kernel(expr, key)
        for args in runs:
            got, want = run(*args)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dropout_kernel_in_training_drops_about_the_ratio_and_rescales():
    from tvmpy.relay.op.strategy import select_implementation

    x, r, t = _v("x", (None, 64)), _v("r", (), "float32"), _v("t", (), "bool")
    call = infer_type(dyn_dropout.dropout(x, r, t, seed=5)[0]).tuple_value
    ins = [te.placeholder(a.checked_type.shape, a.checked_type.dtype) for a in call.args]
    impl = select_implementation(call.op, call.attrs, ins, call.checked_type, "llvm")
    outs = impl.compute(call.attrs, ins, call.checked_type)
    g = tvm.build(impl.schedule(call.attrs, outs, "llvm"), [*ins, *outs], "llvm")
    xv = _x(50, 64)
    y, m = tvm.nd.array(np.zeros((50, 64), "float32")), tvm.nd.array(np.zeros((50, 64), bool))
    g(tvm.nd.array(xv), tvm.nd.array(np.array(0.25, "float32")), tvm.nd.array(np.array(True)),
      y, m)
    mask = m.numpy()
    assert 0.7 < mask.mean() < 0.8
    np.testing.assert_allclose(y.numpy()[mask], xv[mask] / 0.75, rtol=1e-6)
    assert (y.numpy()[~mask] == 0).all()
    g(tvm.nd.array(xv), tvm.nd.array(np.array(0.25, "float32")), tvm.nd.array(np.array(False)),
      y, m)
    np.testing.assert_array_equal(y.numpy(), xv)
    assert m.numpy().all()


def test_onnx_static_import_keeps_needing_constants():
    """from_onnx(dynamic_inputs=False) (the graph executor's backend path) refuses run-time axes /
    scalars as before, naming the tensor, so that the backend binds it; a constant keeps the
    static relay."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from tvmpy.relay.frontend.onnx import OnnxConstantInputError, from_onnx

    def model(op, init=None, **attrs):
        node = helper.make_node(op, ["x", "a"], ["y"], **attrs)
        a_vi = helper.make_tensor_value_info("a", TensorProto.INT64, [1])
        g = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               *([] if init is not None else [a_vi])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[] if init is None else
                              [numpy_helper.from_array(init, "a")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])

    for op in ("ReduceSum", "ReduceLogSumExp", "CumSum", "Trilu"):
        with pytest.raises(OnnxConstantInputError) as ei:
            from_onnx(model(op), dynamic_inputs=False)
        assert ei.value.tensors == ("a",)
        mod, _ = from_onnx(model(op))
        assert "dyn." in str(mod["main"]), op
        mod, _ = from_onnx(model(op, np.array([1], "int64")))
        assert "dyn." not in str(mod["main"]), op


def test_reduce_kernel_bool_max_min_and_empty():
    for kind, ident, fn in (("max", False, np.any), ("min", True, np.all)):
        d = [te.var("d0"), te.var("d1")]
        A = te.placeholder(d, dtype="bool", name="A")
        X = te.placeholder((1,), dtype="int64", name="axes")
        o = [te.var("o0"), te.var("o1")]
        B = topi_dyn_reduce(A, X, o, kind, True)
        g = tvm.build(te.create_schedule(B.op), [A, X, B], "llvm")
        xv = RNG.uniform(size=(4, 5)) > 0.5
        for ax in (0, 1):
            out = tvm.nd.array(np.zeros([1 if k == ax else s for k, s in enumerate(xv.shape)],
                                        bool))
            g(tvm.nd.array(xv), tvm.nd.array(np.array([ax], "int64")), out)
            np.testing.assert_array_equal(out.numpy(), fn(xv, axis=ax, keepdims=True))
        out = tvm.nd.array(np.zeros((3, 1), bool))
        g(tvm.nd.array(np.zeros((3, 0), bool)), tvm.nd.array(np.array([1], "int64")), out)
        np.testing.assert_array_equal(out.numpy(), np.full((3, 1), ident))


def test_reduce_float16_accumulates_in_float32():
    x = relay.var("x", shape=(3, 600), dtype="float16")
    a = relay.var("a", shape=(1,), dtype="int64")
    xv = RNG.uniform(0.5, 1.5, size=(3, 600)).astype("float16")
    want = xv.astype("float32").sum(axis=1).astype("float16")
    got = _run(relay.Function([x, a], dyn_reduce.sum(x, a, keepdims=False)), xv,
               np.array([1], "int64"))
    np.testing.assert_array_equal(got, want)
    # compiled: ReduceSum over run-time axes (dyn.sum), widened by the frontend's
    # WidenFloat16Accumulation, against onnxruntime; axis 0 of 4099 rows drifts in float16
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from tvmpy.contrib.onnx_backend import TvmpyBackend

    H = TensorProto.FLOAT16
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", H, [4099, 3]),
                                        helper.make_tensor_value_info("axes", TensorProto.INT64,
                                                                      [1])],
                          [helper.make_tensor_value_info("y", H, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    xv = RNG.uniform(0.0, 1.0, size=(4099, 3)).astype("float16")
    axes = np.array([0], "int64")
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]
                                ).run(None, {"x": xv, "axes": axes})[0]
    from tvmpy.relay.frontend import from_onnx

    text = str(from_onnx(model)[0])
    assert "dyn.sum" in text and "float32" in text
    rep = TvmpyBackend.prepare(model, "CPU", executor="graph", bind_inputs=False)
    got = rep.run([xv, axes])[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=2 ** -10)
