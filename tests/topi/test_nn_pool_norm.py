"""topi.nn pooling, batch_norm, layer_norm, softmax / log_softmax with x86 schedules."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi import nn, testing

from .nn_util import check

POOL_WINDOWS = [(3, 2, 1, (1, 0, 1, 2)), (2, 2, 1, 0), (3, 1, 2, 1), ((2, 3), (1, 2), 1, (0, 1))]


# count_include_pad only affects avg pooling
POOL_KINDS = [("max", False, True), ("max", True, True)] + [
    ("avg", ceil, cip) for ceil in (False, True) for cip in (False, True)]


@pytest.mark.parametrize("pool_type,ceil_mode,count_include_pad", POOL_KINDS)
@pytest.mark.parametrize("window", POOL_WINDOWS)
def test_pool2d(pool_type, ceil_mode, count_include_pad, window):
    k, stride, dil, pad = window
    A = te.placeholder((2, 3, 11, 13), name="A")
    out = nn.pool2d(A, k, stride, dil, pad, pool_type, ceil_mode,
                    count_include_pad=count_include_pad)
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool2d_python(a, k, stride, dil, pad, pool_type, ceil_mode,
                                          count_include_pad))


def test_pool2d_c_target_and_fused_relu():
    A = te.placeholder((1, 2, 7, 6), name="A")
    out = nn.pool2d(A, 3, 2, 1, 1, "avg", True, count_include_pad=False)
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool2d_python(a, 3, 2, 1, 1, "avg", True, False), target="c")
    out = topi.relu(nn.pool2d(A, 2, 2, 1, 0, "max"))
    check([A], out, topi.x86.schedule_pool,
          lambda a: np.maximum(testing.pool2d_python(a, 2, 2, 1, 0, "max"), 0))


def test_pool_reference_known_values():
    a = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(testing.pool2d_python(a, 2, 2, 1, 0, "max")[0, 0],
                                  [[5, 7], [13, 15]])
    # 3x3 avg, pad 1: the corner window holds 4 values; with padding counted, divide by 9
    ex = testing.pool2d_python(a, 3, 1, 1, 1, "avg", count_include_pad=False)
    inc = testing.pool2d_python(a, 3, 1, 1, 1, "avg", count_include_pad=True)
    assert ex[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 4)
    assert inc[0, 0, 0, 0] == pytest.approx((0 + 1 + 4 + 5) / 9)
    # ceil mode: 4 -> ceil((4 - 3) / 2) + 1 = 2 outputs of a 3-window at stride 2
    assert testing.pool2d_python(a, 3, 2, 1, 0, "max", ceil_mode=True).shape == (1, 1, 2, 2)


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 5), (1, 17, 1, 1)])
def test_global_pool(pool_type, shape):
    A = te.placeholder(shape, name="A")
    check([A], nn.global_pool(A, pool_type), topi.x86.schedule_global_pool,
          lambda a: testing.global_pool_python(a, pool_type))


@pytest.mark.parametrize("axis,center,scale", [(1, True, True), (3, False, True), (1, True, False)])
def test_batch_norm(axis, center, scale):
    shape = (2, 3, 5, 7)
    A = te.placeholder(shape, name="A")
    params = [te.placeholder((shape[axis],), name=n) for n in ("gamma", "beta", "mean", "var")]
    res = nn.batch_norm(A, *params, axis=axis, epsilon=1e-3, center=center, scale=scale)
    assert res[1] is params[2] and res[2] is params[3]
    rng = np.random.default_rng(2)
    arrays = [rng.uniform(-1, 1, shape).astype("float32")]
    arrays += [rng.uniform(0.5, 1.5, (shape[axis],)).astype("float32") for _ in range(4)]
    check([A, *params], res[0], topi.x86.schedule_batch_norm,
          lambda a, g, b, m, v: testing.batch_norm_python(a, g, b, m, v, axis, 1e-3, center,
                                                          scale), arrays=arrays)


@pytest.mark.parametrize("shape,axis,target", [
    ((3, 37), -1, "llvm"), ((2, 5, 7), [1, 2], "llvm"), ((2, 5, 7), 1, "llvm"),
    ((2, 3, 4), -1, "c"), ((5, 48), -1, "llvm"), ((2, 64), -1, "c"),  # vectorized (rfactor) rows
])
def test_layer_norm(shape, axis, target):
    axes = [a % len(shape) for a in (axis if isinstance(axis, list) else [axis])]
    gshape = tuple(shape[a] for a in axes)
    A = te.placeholder(shape, name="A")
    G = te.placeholder(gshape, name="gamma")
    B = te.placeholder(gshape, name="beta")
    check([A, G, B], nn.layer_norm(A, G, B, axis, 1e-5), topi.x86.schedule_layer_norm,
          lambda a, g, b: testing.layer_norm_python(a, g, b, axis, 1e-5), target=target)


@pytest.mark.parametrize("shape,axis,beta,target", [
    ((3, 40), -1, True, "llvm"), ((2, 5, 64), 2, False, "llvm"), ((2, 3, 16), -1, True, "c"),
    ((3, 37), -1, True, "llvm"), ((2, 5, 8), [1, 2], True, "llvm"),  # the generic compute
])
def test_x86_layer_norm(shape, axis, beta, target):
    """topi.x86.layer_norm (onnxruntime's arithmetic over the last axis; else the generic
    compute) against the float64 reference."""
    axes = [a % len(shape) for a in (axis if isinstance(axis, list) else [axis])]
    gshape = tuple(shape[a] for a in axes)
    A = te.placeholder(shape, name="A")
    G = te.placeholder(gshape, name="gamma")
    B = te.placeholder(gshape, name="beta") if beta else None
    out = topi.x86.layer_norm(A, G, B, axis, 1e-5)
    tags, todo = set(), [out]
    while todo:
        t = todo.pop()
        tags.add(t.op.tag)
        todo.extend(t.op.input_tensors)
    assert ("layer_norm_lanes" in tags) == (len(axes) == 1 and shape[-1] % 8 == 0)
    rng = np.random.default_rng(1)
    arrays = [(rng.standard_normal(shape) * 3 + 1).astype("float32"),
              rng.standard_normal(gshape).astype("float32")]
    if beta:
        arrays.append(rng.standard_normal(gshape).astype("float32"))
    check([A, G, *([B] if beta else [])], out, topi.x86.schedule_layer_norm,
          lambda a, g, *b: testing.layer_norm_python(a, g, b[0] if b else None, axis, 1e-5),
          target=target, arrays=arrays)


@pytest.mark.parametrize("shape,eps,scale", [((4, 33, 256), 1e-12, 3.0), ((7, 768), 1e-5, 0.2),
                                             ((5, 40), 1e-5, 40.0)])
def test_x86_layer_norm_bit_exact_with_onnxruntime(shape, eps, scale):
    """Every float32 output equal to onnxruntime's LayerNormalization (CPU) on random rows."""
    ort = pytest.importorskip("onnxruntime")
    helper = pytest.importorskip("onnx.helper")
    from onnx import TensorProto

    import tvmpy as tvm

    rng = np.random.default_rng(2)
    n = shape[-1]
    x = (rng.standard_normal(shape) * scale + 0.7).astype("float32")
    g, b = (rng.standard_normal(n).astype("float32") for _ in range(2))
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=eps)],
        "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("g", TensorProto.FLOAT, [n], g),
         helper.make_tensor("b", TensorProto.FLOAT, [n], b)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expect = sess.run(None, {"x": x})[0]
    X, G, B = te.placeholder(shape, name="x"), te.placeholder((n,), name="g"), \
        te.placeholder((n,), name="b")
    out = topi.x86.layer_norm(X, G, B, -1, eps)
    f = tvm.build(topi.x86.schedule_layer_norm([out]), [X, G, B, out], "llvm")
    res = tvm.nd.array(np.zeros(shape, "float32"))
    f(tvm.nd.array(x), tvm.nd.array(g), tvm.nd.array(b), res)
    np.testing.assert_array_equal(res.numpy(), expect)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,axis,target", [
    ((3, 37), -1, "llvm"), ((2, 5, 7), 1, "llvm"), ((2, 5, 7), 0, "llvm"), ((13,), 0, "llvm"),
    ((1, 4, 3), -1, "c"), ((3, 2, 64), -1, "llvm"), ((2, 32), -1, "c"),  # vectorized rows
    ((2, 3, 101), -1, "llvm"), ((5, 1499), -1, "llvm"), ((1, 1), -1, "llvm"),  # row tails
    ((7, 1), -1, "llvm"), ((1, 97), -1, "c"),
    ((2, 13, 37), -1, "llvm"), ((11, 50), -1, "llvm"),  # 4 rows per task, the last guarded
])
@pytest.mark.parametrize("x86_form", [False, True])
def test_softmax(log, shape, axis, target, x86_form):
    """The generic computes and x86's (a reciprocal per row, max + log(sum) per row)."""
    X = te.placeholder(shape, name="X")
    fns = (nn.log_softmax_by_row, nn.softmax_by_reciprocal) if x86_form else (
        nn.log_softmax, nn.softmax)
    out = (fns[0] if log else fns[1])(X, axis)
    ref = testing.log_softmax_python if log else testing.softmax_python
    check([X], out, topi.x86.schedule_softmax, lambda x: ref(x, axis), target=target)


def test_softmax_rows_with_a_tail_are_vectorized():
    """A row whose length is not a multiple of the vector width (attention over 1,500 frames)
    is still reduced and exponentiated at vector width, its tail a shorter vector step (the
    scalar passes took ~5 ns per element)."""
    X = te.placeholder((4, 1500), name="X")
    for fn in (nn.softmax, nn.log_softmax):
        out = fn(X)
        text = str(tvm.lower(topi.x86.schedule_softmax([out]), [X, out], simple_mode=True))
        assert "maxelem.rf" in text and "expsum.rf" in text, text
        assert "ramp(" in text
        assert "exp(max(" in text  # exp's argument bounded to the vector exp's fast range
    out = nn.softmax(X)
    text = str(tvm.lower(topi.x86.schedule_softmax([out]), [X, out], simple_mode=True))
    assert "T_softmax_exp[ramp(" in text, text  # the exp pass is a vector pass too


@pytest.mark.parametrize("fill", [-1e4, -np.inf, np.finfo(np.float32).min, -87.2, -88.0])
@pytest.mark.parametrize("fn", ["softmax", "softmax_by_reciprocal", "log_softmax",
                                "log_softmax_by_row"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_masked_softmax(fill, fn, dtype):
    """Masked scores (BERT's -1e4, GPT-2's dtype minimum, -inf) give numpy's softmax: exact
    zeros where the mask is, and run on the vector exp's fast path (the scalar fallback of
    out-of-range lanes made a masked softmax 5x slower per element)."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-3, 3, (5, 3, 97)).astype(dtype)
    x[:, :, ::7] = fill
    x[1, 2, :] = fill
    x[1, 2, 3] = 0.5  # a row with one unmasked score
    X = te.placeholder(x.shape, dtype, name="X")
    out = getattr(nn, fn)(X, -1)
    log = fn.startswith("log_softmax")
    ref = testing.log_softmax_python if log else testing.softmax_python
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        want = ref(x.astype("float64"), -1)
    res = check([X], out, topi.x86.schedule_softmax, lambda a: want.astype(dtype), arrays=[x],
                rtol=1e-5, atol=1e-6 if not log else 1e-4)
    if not log and fill <= -1e4:
        assert (res[:, :, ::7] == 0).all()


def test_softmax_is_stable_for_large_inputs():
    X = te.placeholder((2, 64), name="X")
    for fn, ref in ((nn.softmax, testing.softmax_python),
                    (nn.log_softmax, testing.log_softmax_python)):
        res = check([X], fn(X), topi.x86.schedule_softmax, ref, low=500.0, high=1000.0)
        assert np.isfinite(res).all()


def test_pool_norm_softmax_errors():
    A = te.placeholder((1, 3, 8, 8), name="A")
    with pytest.raises(ValueError, match="pool_type must be 'max' or 'avg'"):
        nn.pool2d(A, 2, 2, 1, 0, "min")
    with pytest.raises(ValueError, match="data must be 4-D"):
        nn.pool2d(te.placeholder((3, 8, 8)), 2, 2, 1, 0, "max")
    with pytest.raises(ValueError, match="window 9 is larger than the padded input 8"):
        nn.pool2d(A, 9, 1, 1, 0, "max")
    with pytest.raises(ValueError, match="layout 'NHWC' is not supported"):
        nn.global_pool(A, "avg", layout="NHWC")
    g = te.placeholder((4,), name="g")
    with pytest.raises(ValueError, match="gamma has 4 elements, data has 3 channels"):
        nn.batch_norm(A, g, g, g, g)
    with pytest.raises(ValueError, match="training=True is not supported"):
        nn.batch_norm(A, g, g, g, g, training=True)
    with pytest.raises(ValueError, match=r"gamma shape \('4',\) != the normalized axes"):
        nn.layer_norm(A, g, None, -1)
    with pytest.raises(ValueError, match="axis 2 is out of range for a 2-D input"):
        nn.softmax(te.placeholder((3, 4)), 2)
    with pytest.raises(ValueError, match="expected a softmax or log_softmax output"):
        topi.x86.schedule_softmax([topi.relu(A)])


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape,output_size", [((2, 3, 7, 10), (3, 4)), ((1, 2, 5, 5), 1),
                                               ((1, 2, 6, 4), (6, 8))])
def test_adaptive_pool(pool_type, shape, output_size):
    A = te.placeholder(shape, name="A")
    check([A], nn.adaptive_pool(A, output_size, pool_type), topi.x86.schedule_adaptive_pool,
          lambda a: testing.adaptive_pool_python(a, output_size, pool_type))


def test_adaptive_pool_reference_windows():
    a = np.arange(5, dtype="float32").reshape(1, 1, 1, 5)
    # 5 -> 3 cells: windows [0, 2), [1, 4), [3, 5) (PyTorch's rule)
    np.testing.assert_allclose(testing.adaptive_pool_python(a, (1, 3), "avg")[0, 0, 0],
                               [0.5, 2.0, 3.5])


@pytest.mark.parametrize("pool_type,ceil_mode,count_include_pad", [
    ("max", False, True), ("avg", True, False), ("avg", False, True)])
def test_pool1d_pool3d(pool_type, ceil_mode, count_include_pad):
    A = te.placeholder((2, 3, 17), name="A")
    out = nn.pool1d(A, 3, 2, 1, (1, 2), pool_type, ceil_mode,
                    count_include_pad=count_include_pad)
    check([A], out, topi.x86.schedule_pool,
          lambda a: testing.pool_nd_python(a, [3], [2], [1], [1], [2], pool_type, ceil_mode,
                                           count_include_pad))
    B = te.placeholder((1, 2, 5, 6, 7), name="B")
    out = nn.pool3d(B, (2, 3, 2), (1, 2, 2), 1, (0, 1, 1, 1, 0, 1), pool_type, ceil_mode,
                    count_include_pad=count_include_pad)
    check([B], out, topi.x86.schedule_pool,
          lambda b: testing.pool_nd_python(b, [2, 3, 2], [1, 2, 2], [1, 1, 1], [0, 1, 1],
                                           [1, 0, 1], pool_type, ceil_mode, count_include_pad))


def test_pool_nd_reference_matches_2d():
    a = np.random.default_rng(5).uniform(-1, 1, (1, 2, 9, 8)).astype("float32")
    for pt, cm, cip in (("max", True, True), ("avg", True, False), ("avg", False, True)):
        np.testing.assert_allclose(
            testing.pool_nd_python(a, [3, 2], [2, 2], [1, 2], [1, 0], [1, 1], pt, cm, cip),
            testing.pool2d_python(a, (3, 2), 2, (1, 2), (1, 0, 1, 1), pt, cm, cip), rtol=1e-6)


@pytest.mark.parametrize("shape,target", [((2, 3, 5, 7), "llvm"), ((1, 4, 9), "llvm"),
                                          ((1, 2, 3, 4), "c")])
def test_instance_norm(shape, target):
    A = te.placeholder(shape, name="A")
    G = te.placeholder((shape[1],), name="gamma")
    B = te.placeholder((shape[1],), name="beta")
    check([A, G, B], nn.instance_norm(A, G, B, 1, None, 1e-5), topi.x86.schedule_instance_norm,
          lambda a, g, b: testing.instance_norm_python(a, g, b, 1e-5), target=target)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 7), 3), ((1, 4, 9), 1), ((1, 4, 3, 2), 4)])
def test_group_norm(shape, groups):
    A = te.placeholder(shape, name="A")
    G = te.placeholder((shape[1],), name="gamma")
    B = te.placeholder((shape[1],), name="beta")
    check([A, G, B], nn.group_norm(A, G, B, groups, 1, None, 1e-5), topi.x86.schedule_group_norm,
          lambda a, g, b: testing.group_norm_python(a, g, b, groups, 1e-5))


def test_instance_group_norm_errors():
    A = te.placeholder((1, 6, 4, 4), name="A")
    g = te.placeholder((5,), name="g")
    with pytest.raises(ValueError, match="gamma has 5 elements, data has 6 channels"):
        nn.instance_norm(A, g, None)
    with pytest.raises(ValueError, match="not divisible by num_groups=4"):
        nn.group_norm(A, te.placeholder((6,)), None, 4)
    with pytest.raises(ValueError, match="at least 3-D"):
        nn.instance_norm(te.placeholder((2, 3)), te.placeholder((3,)), None)


@pytest.mark.parametrize("shape,size,axis", [((2, 7, 5, 6), 3, 1), ((1, 6, 9), 4, 1),
                                             ((3, 11), 5, -1)])
def test_lrn(shape, size, axis):
    A = te.placeholder(shape, name="A")
    check([A], nn.lrn(A, size, axis, 1e-2, 0.75, 1.5), topi.x86.schedule_lrn,
          lambda a: testing.lrn_python(a, size, axis, 1e-2, 0.75, 1.5))


def test_dilate():
    A = te.placeholder((2, 3, 4), name="A")
    out = nn.dilate(A, (1, 2, 3), 0.5)
    check([A], out, topi.x86.schedule_injective,
          lambda a: testing.dilate_python(a, (1, 2, 3), 0.5))
    with pytest.raises(ValueError, match="strides has 2 values"):
        nn.dilate(A, (1, 2))
    with pytest.raises(ValueError, match="lrn: size must be a positive int"):
        nn.lrn(A, 0)


def test_pad():
    A = te.placeholder((2, 3, 4), name="A")
    out = nn.pad(A, [0, 1, 2], [1, 0, 3], pad_value=-2.5)
    check([A], out, topi.x86.schedule_injective,
          lambda a: np.pad(a, ((0, 1), (1, 0), (2, 3)), constant_values=-2.5))
    with pytest.raises(ValueError, match="data is 3-D but pad_before has 2"):
        nn.pad(A, [1, 1])
    with pytest.raises(ValueError, match="padding must be >= 0"):
        nn.pad(A, [0, -1, 0])


@pytest.mark.parametrize("pool_type,ceil_mode,cip", [("max", False, True), ("avg", True, False),
                                                     ("avg", False, True)])
def test_pool2d_nchwc(pool_type, ceil_mode, cip):
    A = te.placeholder((2, 2, 9, 8, 4), name="A")
    out = nn.pool2d(A, 3, 2, 1, (1, 1, 0, 1), pool_type, ceil_mode, "NCHW4c", cip)
    s = lambda outs: topi.x86.schedule_pool(outs, "NCHW4c")  # noqa: E731
    check([A], out, s, lambda a: testing.nchw_to_nchwc(testing.pool2d_python(
        testing.nchwc_to_nchw(a), 3, 2, 1, (1, 1, 0, 1), pool_type, ceil_mode, cip), 4))


@pytest.mark.parametrize("pool_type,ceil_mode", [("max", True), ("avg", False), ("max", False)])
@pytest.mark.parametrize("h,w", [(23, 27), (21, 21), (7, 35), (5, 3)])
def test_pool2d_nchwc_column_steps(pool_type, ceil_mode, h, w):
    """Blocked pools compute several output columns a step (x86 ``_pool_cols``): a width that
    the step divides (10 -> 5), one with a guarded tail (13 -> 7 + 6), one of 17 (6 + 6 + 5),
    a narrow one (all columns at once); a fused consumer on the tile."""
    from tvmpy.topi.x86.pooling import _pool_cols

    assert _pool_cols(10) == 5 and _pool_cols(13) == 7 and _pool_cols(17) == 6
    assert _pool_cols(55) == 5 and _pool_cols(8) == 8 and _pool_cols(1) == 1
    A = te.placeholder((1, 2, h, w, 16), name="A")
    out = topi.relu(nn.pool2d(A, 3, 2, 1, (0, 0, 1, 1) if ceil_mode else (1, 1, 1, 1),
                              pool_type, ceil_mode, "NCHW16c"))
    pad = (0, 0, 1, 1) if ceil_mode else (1, 1, 1, 1)
    s = lambda outs: topi.x86.schedule_pool(outs, "NCHW16c")  # noqa: E731
    check([A], out, s, lambda a: np.maximum(testing.nchw_to_nchwc(testing.pool2d_python(
        testing.nchwc_to_nchw(a), 3, 2, 1, pad, pool_type, ceil_mode, True), 16), 0))


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_global_pool_nchwc(pool_type):
    A = te.placeholder((2, 3, 5, 7, 8), name="A")
    out = nn.global_pool(A, pool_type, "NCHW8c")
    check([A], out, topi.x86.schedule_global_pool, lambda a: testing.nchw_to_nchwc(
        testing.global_pool_python(testing.nchwc_to_nchw(a), pool_type), 8))
    with pytest.raises(ValueError, match="layout 'NHWC' is not supported"):
        nn.global_pool(A, pool_type, "NHWC")
    with pytest.raises(ValueError, match="last axis is 8"):
        nn.pool2d(A, 2, 2, 1, 0, pool_type, layout="NCHW4c")


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 16), (1, 1, 2, 2, 4), (1, 3, 13, 17, 16),
                                   (2, 5, 7, 7, 8), (3, 2, 11, 1, 16), (1, 2, 31, 37, 4)])
def test_global_pool_nchwc_accumulators(pool_type, shape):
    """NCHW{c} global pools reduce the plane into several independent vector accumulators
    (divisible planes, prime planes with a tail, size 1, a fused consumer); equal to numpy,
    a NaN anywhere in a plane reaches its output."""
    c = shape[-1]
    A = te.placeholder(shape, name="A")
    out = topi.nn.relu(nn.global_pool(A, pool_type, f"NCHW{c}c"))
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, shape).astype("float32")
    a[0, 0, shape[2] - 1, shape[3] - 1, 1] = np.nan
    ref = lambda x: np.maximum(testing.nchw_to_nchwc(  # noqa: E731
        testing.global_pool_python(testing.nchwc_to_nchw(x), pool_type), c), 0)
    got = check([A], out, topi.x86.schedule_global_pool, ref, arrays=[a])
    assert np.isnan(got[0, 0, 0, 0, 1])
    check([A], nn.global_pool(A, pool_type, f"NCHW{c}c"), topi.x86.schedule_global_pool,
          lambda x: testing.nchw_to_nchwc(
              testing.global_pool_python(testing.nchwc_to_nchw(x), pool_type), c), seed=5)


def test_global_pool_nchwc_keeps_several_accumulators():
    """The plane's reduction is rfactored into k accumulators (k * c local floats), k from the
    target's vector registers: a divisor of the plane when one fits, else the most."""
    from tvmpy.topi.x86.pooling import accumulators

    avx512 = tvm.target.Target("llvm -mcpu=skylake-avx512")
    avx2 = tvm.target.Target("llvm -mcpu=haswell")
    assert [accumulators(e, avx512) for e in (1, 3, 4, 49, 221, 3136)] == [1, 1, 2, 7, 8, 8]
    assert [accumulators(e, avx2) for e in (49, 221, 3136, 9)] == [4, 4, 4, 3]
    neon = tvm.target.Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")  # 32 registers
    assert [accumulators(e, neon) for e in (49, 221, 9)] == [7, 8, 3]
    A = te.placeholder((1, 4, 14, 14, 16), name="A")
    with avx512:
        out = nn.global_pool(A, "avg", "NCHW16c")
        s = topi.x86.schedule_global_pool([out], "NCHW16c")
    text = str(tvm.lower(s, [A, out], simple_mode=True))
    assert "allocate((112,), 'float32', 'local')" in text  # 7 accumulators of 16 lanes


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("shape", [(1, 3, 17, 17), (2, 2, 31, 29), (1, 1, 64, 64),
                                   (1, 2, 16, 16), (1, 1, 257, 1)])
def test_global_pool_large_planes(pool_type, shape):
    """NCHW planes of 256+ elements: k accumulators of vector lanes, then one vector, then its
    lanes (a plane not a multiple of the lanes, a prime plane, size-1 width); equal to numpy,
    a NaN in a plane's tail reaches its output, a fused consumer too."""
    A = te.placeholder(shape, name="A")
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, shape).astype("float32")
    a[0, 0, -1, -1] = np.nan
    got = check([A], topi.nn.relu(nn.global_pool(A, pool_type)), topi.x86.schedule_global_pool,
                lambda x: np.maximum(testing.global_pool_python(x, pool_type), 0), arrays=[a])
    assert np.isnan(got[0, 0, 0, 0])
    check([A], nn.global_pool(A, pool_type), topi.x86.schedule_global_pool,
          lambda x: testing.global_pool_python(x, pool_type), seed=2)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_global_pool([nn.global_pool(A, pool_type)])
    assert ".rf.rf" in str(tvm.lower(s, [A], simple_mode=True))  # the k-accumulator stage
