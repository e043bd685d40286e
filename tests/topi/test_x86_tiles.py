"""The x86 register tiles tuned against onnxruntime (bench/ops.py): conv2d_NCHWc with two
channel blocks per tile, the 2-D dot-product dense tile for long K, blocked pooling with inlined
padding, and the strategy choices between them; awkward shapes (primes, odd chunk counts, tails),
fused epilogues, explicit tile overrides, all against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.relay.op.strategy.x86 import DENSE_PACK_MAX_K, DENSE_PACK_MIN_ROWS
from tvmpy.topi import nn, testing
from tvmpy.topi.x86.conv2d_nchwc import _nchwc_tile

from .nn_util import check

# (C, H, W, OC, K, stride, pad, ic_bn, oc_bn): even chunk counts (2-block tiles), odd ones,
# output widths 13/7/5/1 (tails, a tile wider than the row), 1x1 stride 2, 7x7 stride 2 stem
CASES = [
    (6, 11, 13, 16, 3, 1, 1, 3, 4),
    (8, 9, 17, 24, 3, 2, (1, 0, 2, 1), 4, 4),
    (4, 7, 7, 12, 1, 2, 0, 4, 4),
    (3, 19, 19, 32, 7, 2, 3, 3, 16),
    (16, 5, 5, 32, 3, 1, 1, 16, 16),
    (8, 3, 1, 16, 1, 1, 0, 8, 8),
]


def _nchwc(c, h, w, oc, k, stride, pad, icb, ocb, epilogue, **tile):
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    B = te.placeholder((1, oc // ocb, 1, 1, ocb), name="B")
    conv = nn.conv2d_NCHWc(A, W, stride, pad, 1)
    out = epilogue(conv, B)
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (1, c, h, w)).astype("float32")
    wt = rng.uniform(-1, 1, (oc, c, k, k)).astype("float32")
    b = rng.uniform(-1, 1, (1, oc // ocb, 1, 1, ocb)).astype("float32")
    arrays = [testing.nchw_to_nchwc(a, icb), testing.oihw_to_kcrsck(wt, icb, ocb), b]
    return A, W, B, out, arrays, a, wt


def _check_bias_relu(case):
    """The default NCHWc schedule of conv + bias + relu on ``case`` against numpy (NCHWc and
    NCHW references); returns the output tensor."""
    A, W, B, out, arrays, a, wt = _nchwc(*case, lambda c, b: topi.relu(topi.add(c, b)))
    stride, pad = case[5], case[6]
    res = check([A, W, B], out, topi.x86.schedule_conv2d_NCHWc,
                lambda x, y, b: np.maximum(testing.conv2d_NCHWc_python(x, y, stride, pad) + b, 0),
                arrays=arrays)
    ref = np.maximum(testing.conv2d_nchw_python(a, wt, stride, pad)
                     + testing.nchwc_to_nchw(np.broadcast_to(arrays[2], res.shape)), 0)
    np.testing.assert_allclose(testing.nchwc_to_nchw(res), ref, rtol=1e-4, atol=1e-4)
    return out


@pytest.mark.parametrize("case", CASES, ids=[str(c[:6]) for c in CASES])
def test_conv2d_nchwc_bias_relu(case):
    _check_bias_relu(case)


@pytest.mark.parametrize("oc_tile,reg_n", [(1, 8), (2, 3), (3, 5), (4, 16)])
def test_conv2d_nchwc_tile_overrides(oc_tile, reg_n):
    """Tiles that do not divide the chunk count (3 of 4 chunks) or the row (5 of 13)."""
    c, h, w, oc, k, stride, pad, icb, ocb = (8, 6, 13, 16, 3, 1, 1, 4, 4)
    A, W, B, out, arrays, *_ = _nchwc(c, h, w, oc, k, stride, pad, icb, ocb,
                                      lambda cv, b: topi.add(cv, b))
    check([A, W, B], out,
          lambda outs: topi.x86.schedule_conv2d_NCHWc(outs, reg_n=reg_n, oc_tile=oc_tile),
          lambda x, y, b: testing.conv2d_NCHWc_python(x, y, stride, pad) + b, arrays=arrays)


def test_conv2d_nchwc_residual_epilogue():
    c, h, w, oc, k, stride, pad, icb, ocb = (4, 7, 9, 8, 3, 1, 1, 2, 4)
    A = te.placeholder((1, c // icb, h, w, icb), name="A")
    W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
    R = te.placeholder((1, oc // ocb, h, w, ocb), name="R")
    out = topi.relu(topi.add(nn.conv2d_NCHWc(A, W, stride, pad, 1), R))
    check([A, W, R], out, topi.x86.schedule_conv2d_NCHWc,
          lambda x, y, r: np.maximum(testing.conv2d_NCHWc_python(x, y, stride, pad) + r, 0))


def test_nchwc_tile_choice():
    assert _nchwc_tile(4, False) == (2, 8)
    assert _nchwc_tile(9, False) == (3, 7)  # odd chunk count: a divisor, no guarded chunk tile
    assert _nchwc_tile(63, False) == (3, 7)
    assert _nchwc_tile(25, False) == (5, 4)
    assert _nchwc_tile(7, False) == (1, 8)  # no divisor 3 or 5: one chunk
    assert _nchwc_tile(9, False, window=9) == (1, 8)  # a 3x3 window: one chunk
    assert _nchwc_tile(4, True) == (1, 8)  # depthwise: no broadcast to share


@pytest.mark.parametrize("m,k,n", [(34, 600, 13), (7, 512, 1000), (3, 1024, 7), (1, 515, 9),
                                   (17, 256, 24)])
def test_dense_dot_tile(m, k, n):
    """The dot-product schedule (plain dense), rows tiled by 2 when M is even."""
    X = te.placeholder((m, k), name="X")
    Wt = te.placeholder((n, k), name="W")
    B = te.placeholder((n,), name="B")
    out = topi.add(nn.dense(X, Wt), B)
    check([X, Wt, B], out, topi.x86.schedule_dense, testing.dense_python, rtol=1e-4, atol=1e-3)


def test_dense_dot_tile_gelu_epilogue():
    X = te.placeholder((16, 640), name="X")
    Wt = te.placeholder((24, 640), name="W")
    B = te.placeholder((24,), name="B")
    out = topi.gelu(topi.add(nn.dense(X, Wt), B))
    from math import erf, sqrt

    verf = np.vectorize(erf)
    check([X, Wt, B], out, topi.x86.schedule_dense,
          lambda x, w, b: (lambda y: 0.5 * y * (1 + verf(y / sqrt(2))))(testing.dense_python(x, w, b)),
          rtol=1e-4, atol=1e-3)


def test_dense_strategy_choice():
    """dense_pack (in-kernel weight packing) only for enough rows and a short K."""
    from tvmpy import relay
    from tvmpy.relay.backend.lower_call import lower_call_impl
    from tvmpy.relay.type_infer import infer_type

    def impl(m, k):
        x, w = relay.var("x", shape=(m, k)), relay.var("w", shape=(8, k))
        call = infer_type(relay.Function([x, w], relay.nn.dense(x, w))).body
        ins = [te.placeholder((m, k)), te.placeholder((8, k))]
        return lower_call_impl(call, ins, "llvm")[0].name

    assert impl(DENSE_PACK_MIN_ROWS, 256) == "dense_pack.x86"
    assert impl(DENSE_PACK_MIN_ROWS, DENSE_PACK_MAX_K) == "nn.dense.x86"
    assert impl(DENSE_PACK_MIN_ROWS - 1, 256) == "nn.dense.x86"


@pytest.mark.parametrize("h,w,stride,pad", [(11, 13, 2, (1, 1, 1, 1)), (7, 5, 1, (0, 1, 2, 0)),
                                            (2, 3, 2, (1, 1, 1, 1))])
def test_blocked_max_pool_inlined_pad_relu(h, w, stride, pad):
    """Blocked max pool, padding inlined, one task per output row, + a fused epilogue."""
    A = te.placeholder((1, 3, h, w, 4), name="A")
    pool = nn.pool2d(A, 3, stride, 1, pad, "max", layout="NCHW4c")
    out = topi.relu(pool)
    a = np.random.default_rng(5).uniform(-1, 1, (1, 12, h, w)).astype("float32")

    def ref(ab):
        x = testing.nchwc_to_nchw(ab)
        y = testing.pool2d_python(x, 3, stride, 1, pad, "max")
        return np.maximum(testing.nchw_to_nchwc(y, 4), 0)

    check([A], out, lambda outs: topi.x86.schedule_pool(outs, "NCHW4c"), ref,
          arrays=[testing.nchw_to_nchwc(a, 4)])


def test_injective_parallel_earlier_with_vector_math():
    """An erf/exp epilogue below the element threshold still runs in parallel; plain adds of
    the same size stay serial; both match numpy."""
    import tvmpy as tvm
    from tvmpy.topi.x86.injective import PARALLEL_MIN_ELEMENTS, _has_transcendental

    x = te.placeholder((37, PARALLEL_MIN_ELEMENTS // 64 + 3), name="x")
    g, a = topi.exp(topi.add(x, x)), topi.add(x, x)
    assert _has_transcendental(g) and not _has_transcendental(a)
    assert "parallel" in str(tvm.lower(topi.x86.schedule_injective([g]), [x, g]))
    assert "parallel" not in str(tvm.lower(topi.x86.schedule_injective([a]), [x, a]))
    check([x], g, topi.x86.schedule_injective, lambda v: np.exp(v + v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,begin,par", [((1, 8, 66, 67, 16), (0, 0, 1, 1, 0), True),
                                               ((1, 5, 67, 61, 16), (0, 0, 2, 1, 0), True),
                                               ((1, 2, 20, 20, 16), (0, 0, 1, 1, 0), False),
                                               ((2, 7, 13), (1, 0, 2), False)])
def test_data_movement_parallel_threshold(shape, begin, par):
    """A window copy (the strided_slice of a transposed convolution's phase) runs in parallel
    from PARALLEL_MIN_ELEMENTS output elements on a multi-core target, serially below; both
    match numpy (prime and non-divisible extents, so the parallel loop's index math divides)."""
    from tvmpy.topi.x86.injective import PARALLEL_MIN_ELEMENTS, _num_cores

    x = te.placeholder(shape, name="x")
    y = topi.strided_slice(x, list(begin), list(shape))
    size = int(np.prod([int(d) for d in y.shape]))
    assert (size >= PARALLEL_MIN_ELEMENTS) == par
    text = str(tvm.lower(topi.x86.schedule_injective([y]), [x, y]))
    assert ("parallel" in text) == (par and _num_cores() > 1)
    sl = tuple(slice(b, None) for b in begin)
    check([x], y, topi.x86.schedule_injective, lambda v: v[sl])


@pytest.mark.parametrize("h,w,stride,pad,inline", [(13, 7, 2, (1, 1, 1, 1), True),
                                                    (5, 17, 1, (2, 0, 1, 1), True),
                                                    (1, 3, 1, 1, True), (6, 6, 2, 1, False)])
def test_depthwise_nchwc_inlined_pad_bias_clip(h, w, stride, pad, inline):
    """Depthwise NCHWc with the padding inlined into the taps (or a padded copy), + bias and
    relu6 (clip) as AlterOpLayout and FuseOps leave MobileNetV2's groups."""
    c, cb = 12, 4
    A = te.placeholder((1, c // cb, h, w, cb), name="A")
    W = te.placeholder((c // cb, 1, 3, 3, 1, cb), name="W")
    B = te.placeholder((1, c // cb, 1, 1, cb), name="B")
    conv = nn.depthwise_conv2d_NCHWc(A, W, stride, pad, 1)
    out = topi.clip(topi.add(conv, B), 0.0, 6.0)

    def ref(a, wb, b):
        w_nchw = wb.transpose(0, 5, 1, 4, 2, 3).reshape(c, 1, 3, 3)
        y = testing.nchw_to_nchwc(testing.depthwise_conv2d_nchw_python(
            testing.nchwc_to_nchw(a), w_nchw, stride, pad), cb)
        return np.clip(y + b, 0, 6)

    check([A, W, B], out,
          lambda outs: topi.x86.schedule_conv2d_NCHWc(outs, inline_pad=inline), ref,
          low=-3, high=3)


@pytest.mark.parametrize("shape,src,dst", [((1, 3, 19, 37), "NCHW", "NCHW3c"),
                                           ((2, 4, 5, 16), "NCHW", "NCHW2c"),
                                           ((1, 1, 7, 17, 4), "NCHW4c", "NCHW")])
def test_layout_transform_short_inner_axis(shape, src, dst):
    """Injective outputs whose innermost axis is 2-4 long vectorize the axis before it."""
    x = te.placeholder(shape, name="x")
    y = topi.layout_transform(x, src, dst)
    from tvmpy.relay.op.numpy_impl import layout_transform_np

    check([x], y, topi.x86.schedule_injective, lambda v: layout_transform_np(v, src, dst))


def test_broadcast_short_inner_axis_tail():
    """(5, 37, 3) + (37, 1): a 37-long second axis (16-lane tail) and a 3-long inner one."""
    a = te.placeholder((5, 37, 3), name="a")
    b = te.placeholder((37, 1), name="b")
    out = topi.multiply(topi.add(a, b), a)
    check([a, b], out, topi.x86.schedule_injective, lambda u, v: (u + v) * u)


@pytest.mark.parametrize("shape,axis", [((3, 12, 40), -1), ((2, 6, 16), -1), ((5, 7, 33), -1),
                                        ((4, 9, 3), 1)])
def test_softmax_rows_per_task(shape, axis):
    """Softmax with several rows per task (4 or 2 when the kept axis divides; 1 for 7), the
    16-lane rfactor tails (40, 33) and a non-innermost axis."""
    from tvmpy.topi.x86.softmax import _rows_per_task

    x = te.placeholder(shape, name="x")
    out = nn.softmax(x, axis=axis)
    if axis == -1:
        assert _rows_per_task(out, [len(shape) - 1]) == {12: 4, 6: 2, 7: 1}[shape[1]]

    check([x], out, topi.x86.schedule_softmax, lambda v: testing.softmax_python(v, axis), low=-4, high=4, rtol=1e-5, atol=1e-6)


def test_layer_norm_rows_per_task():
    x = te.placeholder((2, 12, 48), name="x")
    g = te.placeholder((48,), name="g")
    b = te.placeholder((48,), name="b")
    out = nn.layer_norm(x, g, b, axis=[-1], epsilon=1e-5)

    check([x, g, b], out, topi.x86.schedule_layer_norm,
          lambda v, gv, bv: testing.layer_norm_python(v, gv, bv, -1, 1e-5), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(17, 37, 48), (16, 1024, 64), (33, 5, 7), (19, 23, 97),
                                   (8, 3, 33), (1, 16, 65)])
def test_dense_prepacked(m, k, n):
    """dense_prepacked (weight packed at compile time; a partial last panel zero-padded, the
    output cropped to ``units``) with schedule_dense_pack vs numpy."""
    nr = topi.x86.panel_width(n)
    npanel = -(-n // nr)
    X = te.placeholder((m, k), name="X")
    P = te.placeholder((npanel, k, nr), name="P")
    out = topi.relu(topi.x86.dense_prepacked(X, P, units=n))
    assert tuple(int(d) for d in out.shape) == (m, n)
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (m, k)).astype("float32")
    w = rng.uniform(-1, 1, (n, k)).astype("float32")
    wp = np.concatenate([w, np.zeros((npanel * nr - n, k), "float32")])
    packed = np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))
    check([X, P], out, topi.x86.schedule_dense_pack, lambda a, p: np.maximum(a @ w.T, 0),
          arrays=[x, packed], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m,k,n", [(1, 512, 1000), (1, 37, 1023), (1, 1, 64), (1, 2, 1),
                                   (1, 3, 5), (2, 13, 1023), (2, 97, 33), (1, 64, 64),
                                   (3, 17, 33), (1, 131, 97)])
def test_dense_prepacked_gemv(m, k, n):
    """Few rows by prepacked panels (the GEMV schedule: K split into interleaved partial sums)
    with a fused bias + relu, vs numpy: K = 1 / 2 / prime, N = 1 / prime / 1000 / 1023."""
    from tvmpy.topi.x86.dense import _default_plan, _find

    nr = topi.x86.panel_width(n)
    npanel = -(-n // nr)
    X = te.placeholder((m, k), name="X")
    P = te.placeholder((npanel, k, nr), name="P")
    B = te.placeholder((n,), name="B")
    out = topi.relu(topi.add(topi.x86.dense_prepacked(X, P, units=n), B))
    plan = _default_plan(_find([out], "test")[1])[0]
    assert plan == ("gemv" if k > 1 and m * -(-nr // 16) <= 4 else "tiled")
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (m, k)).astype("float32")
    w = rng.uniform(-1, 1, (n, k)).astype("float32")
    b = rng.uniform(-1, 1, n).astype("float32")
    wp = np.concatenate([w, np.zeros((npanel * nr - n, k), "float32")])
    packed = np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))
    check([X, P, B], out, topi.x86.schedule_dense_pack,
          lambda a, p, bb: np.maximum(a @ w.T + bb, 0), arrays=[x, packed, b], rtol=1e-4,
          atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(1, 5, 7), (2, 9, 65), (2, 31, 1000)])
def test_matmul_pack_gemv(m, k, n):
    """matmul_pack (B [K, N] packed in the kernel) of one or two rows: the GEMV schedule."""
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    out = topi.x86.matmul_pack(A, B)
    check([A, B], out, topi.x86.schedule_dense_pack, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)


def test_alter_dense_layout_rewrite_and_build():
    """nn.dense with a constant weight -> contrib_dense_pack of the folded packed weight (a
    partial last panel zero-padded, units = N); the rewrite is refused for few rows, N-D
    data."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.op.strategy.x86_alter_op import alter_dense_layout
    from tvmpy.relay.transform import FoldConstant
    from tvmpy.relay.type_infer import infer_type

    def typed(m, k, n, nd=False):
        x = relay.var("x", shape=(2, m, k) if nd else (m, k))
        w = relay.const(np.random.default_rng(0).uniform(-1, 1, (n, k)).astype("float32"))
        return infer_type(relay.Function([x], relay.nn.dense(x, w))).body

    few = alter_dense_layout(typed(2, 8, 32))  # a constant weight: packed for any row count
    assert few.op.name == "nn.contrib_dense_pack"
    assert alter_dense_layout(typed(1, 8, 32)).op.name == "nn.contrib_dense_pack"  # a GEMV

    def typed_var(w):  # few rows, a weight known at run time only
        y = relay.nn.dense(relay.var("x", shape=(15, 8)), w)
        return infer_type(relay.Function(relay.analysis.free_vars(y), y)).body

    assert alter_dense_layout(typed_var(relay.var("w", shape=(32, 8)))) is None
    call = typed_var(relay.transpose(relay.var("b", shape=(8, 32))))
    new = alter_dense_layout(call)  # dense(x, transpose(B)) -> matmul(x, B)
    assert new.op.name == "nn.matmul" and new.args[1] is call.args[1].args[0]
    padded = alter_dense_layout(typed(16, 8, 40))  # 40 % 16: the last panel padded
    assert padded.op.name == "nn.contrib_dense_pack" and padded.attrs.units == 40
    assert alter_dense_layout(typed(16, 8, 32, nd=True)) is None
    m, k, n = 19, 23, 64
    body = typed(m, k, n)
    new = alter_dense_layout(body)
    assert new.op.name == "nn.contrib_dense_pack"
    x = body.args[0]
    bias = np.random.default_rng(1).uniform(-1, 1, n).astype("float32")
    mod = relay.IRModule.from_expr(relay.Function([x], relay.add(new, relay.const(bias))))
    mod = FoldConstant()(mod)
    assert "transpose" not in str(mod)  # packed at compile time
    lib = relay.build(mod, target="llvm")
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    xv = np.random.default_rng(3).uniform(-1, 1, (m, k)).astype("float32")
    g.set_input("x", xv)
    g.run()
    w = body.args[1].data.numpy()
    np.testing.assert_allclose(g.get_output(0).numpy(), xv @ w.T + bias, rtol=1e-4, atol=1e-4)


def test_alter_op_layout_packs_dense_weights():
    """relay.build at opt_level 3: AlterOpLayout calls nn.dense's FTVMAlterOpLayout, the packed
    weight is folded, the result equals numpy; opt_level 2 keeps nn.dense."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.transform import AlterOpLayout, FoldConstant, InferType

    rng = np.random.default_rng(4)
    w1 = rng.uniform(-1, 1, (32, 12)).astype("float32")
    w2 = rng.uniform(-1, 1, (40, 32)).astype("float32")  # 40 % 16: a padded last panel
    x = relay.var("x", shape=(17, 12))
    y = relay.nn.dense(relay.nn.relu(relay.nn.dense(x, relay.const(w1))), relay.const(w2))
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    with tvm.transform.PassContext(opt_level=3), tvm.target.Target("llvm"):
        altered = FoldConstant()(AlterOpLayout()(InferType()(mod)))
    text = str(altered)
    assert text.count("nn.contrib_dense_pack") == 2 and "nn.dense" not in text
    assert "units=40" in text and "nn.pad" not in text  # (padded at compile time)
    xv = rng.uniform(-1, 1, (17, 12)).astype("float32")
    want = np.maximum(xv @ w1.T, 0) @ w2.T
    for level in (2, 3):
        with tvm.transform.PassContext(opt_level=level):
            lib = relay.build(mod, target="llvm")
        g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
        g.set_input("x", xv)
        g.run()
        np.testing.assert_allclose(g.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_dense_prepacked_rejects_units_that_do_not_fit():
    X = te.placeholder((4, 8), name="X")
    P = te.placeholder((2, 8, 16), name="P")
    for bad in (16, 33, 0):  # a whole empty panel, more than the panels hold, nothing
        with pytest.raises(ValueError, match="units"):
            topi.x86.dense_prepacked(X, P, units=bad)


@pytest.mark.parametrize("b,m,k,n", [(3, 19, 23, 37), (2, 8, 5, 97), (1, 16, 64, 31)])
def test_batch_matmul_pack_untransposed_b(b, m, k, n):
    """batch_matmul_pack of B [b, K, N] (packed, last panel zero-padded) + relu vs numpy."""
    A = te.placeholder((b, m, k), name="A")
    B = te.placeholder((b, k, n), name="B")
    out = topi.relu(topi.x86.batch_matmul_pack(A, B, transpose_b=False))
    check([A, B], out, topi.x86.schedule_batch_matmul,
          lambda a, bb: np.maximum(a @ bb, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(17, 37, 41), (16, 64, 64), (5, 9, 1), (33, 130, 97)])
def test_matmul_pack(m, k, n):
    """matmul_pack: A @ B with B [K, N] packed inside the kernel (last panel zero-padded)."""
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    out = topi.relu(topi.x86.matmul_pack(A, B))
    check([A, B], out, topi.x86.schedule_dense_pack, lambda a, b: np.maximum(a @ b, 0),
          rtol=1e-4, atol=1e-4)


def test_matmul_strategy_packs_b():
    """nn.matmul (B [K, N]) takes matmul_pack with enough rows or a partial last panel."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.relay.op.strategy import select_implementation
    from tvmpy.relay.type_infer import infer_type

    def pick(m, n):
        a, b = relay.var("a", shape=(m, 24)), relay.var("b", shape=(24, n))
        call = infer_type(relay.Function([a, b], relay.nn.matmul(a, b))).body
        ins = [te.placeholder((m, 24), name="a"), te.placeholder((24, n), name="b")]
        return select_implementation(call.op, call.attrs, ins, call.checked_type,
                                     tvm.target.Target("llvm")).name

    assert pick(DENSE_PACK_MIN_ROWS, 64) == "matmul_pack.x86"
    assert pick(2, 65) == "matmul_pack.x86"
    assert pick(2, 64) == "nn.matmul.x86"
    assert pick(1, 65) == "nn.matmul.x86"  # (one row: B read in place)


@pytest.mark.parametrize("n,k", [(1000, 37), (1024, 16), (300, 5), (65, 9), (2053, 3),
                                 (4099, 2)])
def test_matmul_one_row(n, k):
    """nn.matmul of one row by B [K, N] (its wide-tile default) vs numpy."""
    A = te.placeholder((1, k), name="A")
    B = te.placeholder((k, n), name="B")
    out = topi.nn.matmul(A, B)
    check([A, B], out, topi.x86.schedule_matmul, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("ic,hw,stride,oc,want", [
    (3, 56, 1, 24, False),    # an RGB image read in place, stride 1, 3136 pixels: a padded copy
    (3, 32, 1, 16, False),    # 1024 pixels: the threshold
    (3, 17, 1, 24, True),     # small map: inline
    (3, 56, 2, 24, True),     # stride 2 (MobileNetV2's stem): inline
    (16, 56, 1, 16, True),    # a whole-vector input block: inline
])
def test_default_inline_pad(ic, hw, stride, oc, want):
    """The default NCHWc schedule's padding choice (default_inline_pad), and the result stays
    right either way (compared with the numpy reference)."""
    from tvmpy.topi.x86.conv2d_nchwc import default_inline_pad, find_nchwc

    rng = np.random.default_rng(ic + hw + stride)
    ic_bn, oc_bn = min(ic, 16), 16 if oc % 16 == 0 else 8 if oc % 8 == 0 else oc
    data = te.placeholder((1, ic, hw, hw), name="data")
    kernel = te.placeholder((oc // oc_bn, ic // ic_bn, 3, 3, ic_bn, oc_bn), name="kernel")
    conv = topi.nn.conv2d_NCHWc(data, kernel, (stride, stride), (1, 1), (1, 1), "NCHW",
                                f"NCHW{oc_bn}c")
    _, c, _, _ = find_nchwc([conv])
    assert default_inline_pad(c, False) == want
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_conv2d_NCHWc([conv])
        f = tvm.build(s, [data, kernel, conv], target="llvm")
    x = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    w = rng.uniform(-1, 1, (oc, ic, 3, 3)).astype("float32")
    wk = w.reshape(oc // oc_bn, oc_bn, ic // ic_bn, ic_bn, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    out = tvm.nd.empty(tuple(int(d) for d in conv.shape), "float32")
    f(tvm.nd.array(x), tvm.nd.array(np.ascontiguousarray(wk)), out)
    from tvmpy.topi.testing import conv2d_nchw_python

    ref = conv2d_nchw_python(x, w, stride, 1)
    got = out.numpy().transpose(0, 1, 4, 2, 3).reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mcpu,lanes,rows", [("x86-64-v4", 16, 8), ("x86-64-v3", 8, 6),
                                             ("x86-64", 4, 6)])
def test_matmul_register_tile_follows_the_target(mcpu, lanes, rows):
    """The packed-panel width (two vectors) and the tile rows come from the target's vector
    registers, not a fixed 32 x 8 (8 rows x 4 ymm accumulators spilled on AVX2); the
    batch_matmul built for the target is right on awkward shapes (tails, primes, 1 row)."""
    from tvmpy.topi.x86 import dense as x86_dense

    with tvm.target.Target(f"llvm -mcpu={mcpu}"):
        assert x86_dense.panel_width(1500) == 2 * lanes
        assert x86_dense.panel_width(lanes + 1) == lanes
        assert x86_dense.tile_rows() == rows
        rng = np.random.default_rng(5)
        for (b, m, k, n) in ((2, 37, 13, 4 * lanes + 5), (1, 1, 7, 97),
                             (3, 19, 64, 4 * lanes + 3)):
            A = te.placeholder((b, m, k), name="A")
            B = te.placeholder((b, n, k), name="B")
            out = x86_dense.batch_matmul_pack(A, B)
            s = x86_dense.schedule_batch_matmul([out])
            text = str(tvm.lower(s, [A, B, out], simple_mode=True))
            assert f"1, {2 * lanes})" in text  # the tile's columns: ramp(_, 1, 2 * lanes)
            if mcpu == "x86-64-v4" and not tvm.target.Target("llvm").has_feature(
                    "avx512f"):
                continue  # (not runnable on this host)
            f = tvm.build(s, [A, B, out], f"llvm -mcpu={mcpu}")
            a = rng.uniform(-1, 1, (b, m, k)).astype("float32")
            bb = rng.uniform(-1, 1, (b, n, k)).astype("float32")
            res = tvm.nd.array(np.zeros((b, m, n), "float32"))
            f(tvm.nd.array(a), tvm.nd.array(bb), res)
            np.testing.assert_allclose(res.numpy(), a @ bb.transpose(0, 2, 1), rtol=1e-5,
                                       atol=1e-5)


@pytest.mark.parametrize("mcpu,rows", [
    ("sapphirerapids", 12),  # AMX: two 512-bit FMA units per core
    ("znver4", 8),           # 512-bit FMAs as two halves: one unit
    ("x86-64-v4", 8),        # AVX-512, unit count unknown: the lower figure
    ("x86-64-v3", 6),        # AVX2: 16 vector registers
])
def test_matmul_tile_rows_follow_the_fma_units(mcpu, rows):
    """The matmul register tile's rows come from the target's features (vector registers,
    512-bit FMA units), never from the shapes. Lowered only (no code for a foreign CPU runs
    here)."""
    from tvmpy.target.cpu_features import fma512_units
    from tvmpy.topi.x86 import dense as x86_dense

    with tvm.target.Target(f"llvm -mcpu={mcpu}") as t:
        assert x86_dense.tile_rows() == rows
        assert (rows == 12) == (fma512_units(t.isa_features) >= 2)
        A = te.placeholder((2, 37, 13), name="A")
        B = te.placeholder((2, 97, 13), name="B")
        out = x86_dense.batch_matmul_pack(A, B)
        text = str(tvm.lower(x86_dense.schedule_batch_matmul([out]), [A, B, out],
                             simple_mode=True))
        assert f"range(0, {rows})" in text  # the register tile's rows (stored back)


@pytest.mark.parametrize("m,k,n", [(1, 7, 3), (13, 97, 61), (37, 1, 33), (12, 4, 32),
                                   (25, 509, 65), (11, 8, 1), (197, 64, 96)])
@pytest.mark.parametrize("mr", [12, 8])
def test_twelve_and_eight_row_tiles_match_numpy(m, k, n, mr):
    """The tiled schedule at 12 rows (the default on two-FMA-unit AVX-512 cores) and at 8, on
    this host: prepacked dense with a bias + relu epilogue and a batched packed product, on
    prime / size-1 / non-divisible M, N, K (row tails shorter than the tile, a zero-padded
    last panel, K = 1 without a reduction loop) vs numpy."""
    from tvmpy.topi.x86 import dense as x86_dense

    rng = np.random.default_rng(m * 1000 + n + k)
    nr = topi.x86.panel_width(n)
    npanel = -(-n // nr)
    X = te.placeholder((m, k), name="X")
    P = te.placeholder((npanel, k, nr), name="P")
    Bi = te.placeholder((n,), name="Bi")
    out = topi.relu(topi.add(topi.x86.dense_prepacked(X, P, units=n), Bi))
    s, full, anchor, _ = x86_dense._find([out], "test")  # (the epilogue inlined)
    x86_dense._schedule_tiled(s, full, anchor, mr=mr)
    x = rng.uniform(-1, 1, (m, k)).astype("float32")
    w = rng.uniform(-1, 1, (n, k)).astype("float32")
    b = rng.uniform(-1, 1, n).astype("float32")
    wp = np.concatenate([w, np.zeros((npanel * nr - n, k), "float32")])
    packed = np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))
    f = tvm.build(s, [X, P, Bi, out], "llvm")
    res = tvm.nd.array(np.zeros((m, n), "float32"))
    f(tvm.nd.array(x), tvm.nd.array(packed), tvm.nd.array(b), res)
    np.testing.assert_allclose(res.numpy(), np.maximum(x @ w.T + b, 0), rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))

    A = te.placeholder((3, m, k), name="A")
    B = te.placeholder((3, n, k), name="B")
    bm = x86_dense.batch_matmul_pack(A, B)
    s, bfull, anchor, _ = x86_dense._find([bm], "test")
    x86_dense._schedule_tiled(s, bfull, anchor, mr=mr)
    a = rng.uniform(-1, 1, (3, m, k)).astype("float32")
    bb = rng.uniform(-1, 1, (3, n, k)).astype("float32")
    f = tvm.build(s, [A, B, bm], "llvm")
    res = tvm.nd.array(np.zeros((3, m, n), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(bb), res)
    np.testing.assert_allclose(res.numpy(), a @ bb.transpose(0, 2, 1), rtol=1e-4,
                               atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("c,hw,k,stride,want", [
    (32, 13, 5, 2, True),     # depthwise: the padding inlined at any window and stride
    (24, 11, 5, 1, True),     # (windows wider than 3 unroll their columns: default_unroll_kw)
    (16, 9, 3, 1, True),
    (16, 15, 7, 2, True),
])
def test_default_inline_pad_depthwise(c, hw, k, stride, want):
    """Depthwise NCHWc: the padding choice by window and stride, and the result vs numpy."""
    from tvmpy.topi.testing import conv2d_nchw_python
    from tvmpy.topi.x86.conv2d_nchwc import default_inline_pad, find_nchwc

    bn, pad = (16 if c % 16 == 0 else 8), k // 2
    data = te.placeholder((1, c // bn, hw, hw, bn), name="data")
    kernel = te.placeholder((c // bn, 1, k, k, 1, bn), name="kernel")
    conv = topi.nn.depthwise_conv2d_NCHWc(data, kernel, (stride, stride), (pad, pad), (1, 1),
                                          f"NCHW{bn}c", f"NCHW{bn}c")
    _, cv, _, dw = find_nchwc([conv])
    assert dw and default_inline_pad(cv, True) == want
    with tvm.target.Target("llvm"):
        f = tvm.build(topi.x86.schedule_conv2d_NCHWc([conv]), [data, kernel, conv], "llvm")
    rng = np.random.default_rng(c + k)
    x = rng.uniform(-1, 1, (1, c, hw, hw)).astype("float32")
    w = rng.uniform(-1, 1, (c, 1, k, k)).astype("float32")
    xa = x.reshape(1, c // bn, bn, hw, hw).transpose(0, 1, 3, 4, 2)
    wk = w.reshape(c // bn, bn, 1, k, k).transpose(0, 2, 3, 4, 1)[:, :, :, :, None, :]
    out = tvm.nd.empty(tuple(int(d) for d in conv.shape), "float32")
    f(tvm.nd.array(np.ascontiguousarray(xa)), tvm.nd.array(np.ascontiguousarray(wk)), out)
    got = out.numpy().transpose(0, 1, 4, 2, 3).reshape(1, c, *out.shape[2:4])
    ref = np.concatenate([conv2d_nchw_python(x[:, i:i + 1], w[i:i + 1], stride, pad)
                          for i in range(c)], axis=1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


# small maps (rows of at most 4 columns): rows stacked into one register tile, weights
# prefetched; prime channel counts, stride 2, asymmetric padding, odd rows, 1-column rows
SMALL_MAPS = [
    (32, 5, 5, 48, 2, 1, 0, 16, 16),  # 4x4 output, 3 chunks: 4 rows x 4 x 1
    (16, 2, 2, 64, 3, 1, 1, 8, 16),  # 2x2 output, 4 chunks: 2 x 2 x 4
    (5, 9, 7, 10, 3, 2, (1, 0, 2, 1), 5, 5),  # 5x3 output, 2 chunks: 5 x 3 x 1
    (7, 3, 3, 14, 3, 1, 1, 7, 7),  # 3x3 output, 2 chunks: 3 x 3 x 1
    (6, 7, 2, 12, 1, 1, 0, 3, 4),  # 7x2 output, 3 chunks: 7 x 2 x 1
    (12, 4, 1, 20, 1, 1, 0, 4, 4),  # a 4x1 column, 5 chunks: 4 x 1 x 1
]


SMALL_MAP_ROWS = [(4, 1), (2, 4), (5, 1), (3, 1), (7, 1), (4, 1)]
"""``(rows, chunks)`` the default tile of each SMALL_MAPS case takes."""


@pytest.mark.parametrize("case,tile", list(zip(SMALL_MAPS, SMALL_MAP_ROWS)),
                         ids=[str(c[:6]) for c in SMALL_MAPS])
def test_conv2d_nchwc_small_map_row_tile(case, tile):
    out = _check_bias_relu(case)
    _, conv, _, depthwise = topi.x86.conv2d_nchwc.find_nchwc([out])
    rows, chunks = topi.x86.conv2d_nchwc.default_row_tile(conv, depthwise)
    assert (rows, chunks) == tile


@pytest.mark.parametrize("reg_h,oc_tile,prefetch", [(2, 1, 0), (2, 2, 64), (3, 1, 4096),
                                                    (1, 2, 256)])
def test_conv2d_nchwc_row_tile_overrides(reg_h, oc_tile, prefetch):
    """Rows that do not divide the map (2 of 5) and prefetches on one-row tiles too."""
    c, h, w, oc, k, stride, pad, icb, ocb = (8, 5, 4, 16, 3, 1, 1, 4, 4)
    A, W, B, out, arrays, *_ = _nchwc(c, h, w, oc, k, stride, pad, icb, ocb,
                                      lambda cv, b: topi.add(cv, b))
    check([A, W, B], out,
          lambda outs: topi.x86.schedule_conv2d_NCHWc(outs, reg_h=reg_h, oc_tile=oc_tile,
                                                      reg_n=4, prefetch=prefetch),
          lambda x, y, b: testing.conv2d_NCHWc_python(x, y, stride, pad) + b, arrays=arrays)


def test_default_row_tile_and_prefetch():
    import tvmpy as tvm
    from tvmpy.topi.x86.conv2d_nchwc import default_row_tile

    def conv(c, h, w, oc, k, icb=16, ocb=16):
        A = te.placeholder((1, c // icb, h, w, icb), name="A")
        W = te.placeholder((oc // ocb, c // icb, k, k, icb, ocb), name="W")
        return A, W, nn.conv2d_NCHWc(A, W, 1, 0, 1)

    assert default_row_tile(conv(64, 5, 5, 512, 2)[2], False) == (4, 1)
    assert default_row_tile(conv(64, 3, 3, 512, 2)[2], False) == (2, 4)
    assert default_row_tile(conv(64, 3, 3, 48, 2)[2], False) == (2, 1)  # 3 chunks: one
    assert default_row_tile(conv(64, 8, 8, 512, 2)[2], False) == (1, 2)  # 7 columns: one row
    A, W, out = conv(32, 5, 5, 32, 2)
    s = topi.x86.schedule_conv2d_NCHWc([out])
    assert "prefetch" in str(tvm.lower(s, [A, W, out]))
    A, W, out = conv(32, 9, 9, 32, 2)
    s = topi.x86.schedule_conv2d_NCHWc([out])
    assert "prefetch" not in str(tvm.lower(s, [A, W, out]))


@pytest.mark.parametrize("k,pad,want", [(1, 0, True), (3, 0, True), (3, 1, True)])
def test_one_row_tile_prefetch_rule(k, pad, want, monkeypatch):
    """One-row tiles (a 7x7 map) prefetch weights of at least half of L2 unless the padding is
    inlined; a padded window with such weights reads a padded copy (``default_inline_pad``),
    so it prefetches too (L2 fixed at 2 MiB, so that the rule does not depend on the host)."""
    import tvmpy as tvm
    from tvmpy.target.cpu_features import CacheSizes
    from tvmpy.topi.x86 import conv2d_nchwc as m

    monkeypatch.setattr(m, "_caches", lambda: CacheSizes(l1d=48 * 1024, l2=2 * 1024 * 1024))
    c = 1024 if k == 1 else 512  # 4 MiB / 9 MiB of weights
    size = 7 + k - 1 - 2 * pad
    A = te.placeholder((1, c // 16, size, size, 16), name="A")
    W = te.placeholder((c // 16, c // 16, k, k, 16, 16), name="W")
    out = nn.conv2d_NCHWc(A, W, 1, pad, 1)
    s = topi.x86.schedule_conv2d_NCHWc([out])
    assert ("prefetch" in str(tvm.lower(s, [A, W, out]))) == want
    small = nn.conv2d_NCHWc(A, te.placeholder((2, c // 16, k, k, 16, 16), name="W2"), 1, pad, 1)
    s = topi.x86.schedule_conv2d_NCHWc([small])
    assert "prefetch" not in str(tvm.lower(s, [A, small.op.input_tensors[1], small]))


def test_target_vector_registers():
    from tvmpy.target import Target

    assert Target("llvm -mcpu=haswell").vector_registers == 16  # AVX2: ymm0-15
    assert not Target("llvm -mcpu=haswell").folds_broadcasts
    assert Target("llvm -mcpu=skylake-avx512").vector_registers == 32  # zmm0-31
    assert Target("llvm -mcpu=skylake-avx512").folds_broadcasts  # {1to16}
    assert Target("llvm -mcpu=skylake-avx512 -mattr=-avx512f").vector_registers == 16
    arm = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")
    assert arm.vector_registers == 32 and not arm.folds_broadcasts


# (C, H, W, OC, K, stride): plain 1x1 and 3x3 layers of ResNet-50 and MobileNet-like shapes,
# odd chunk counts (3, 5, 15 chunks), small maps (rows stacked), a 1-column map
REGISTER_CASES = [(64, 56, 56, 64, 3, 1), (128, 28, 28, 512, 1, 1), (1024, 14, 14, 256, 1, 1),
                  (512, 7, 7, 512, 3, 1), (256, 56, 56, 64, 1, 1), (64, 56, 56, 128, 3, 2),
                  (24, 28, 28, 40, 1, 1), (40, 28, 28, 120, 1, 1), (80, 14, 14, 200, 1, 1),
                  (64, 4, 4, 512, 3, 1), (64, 2, 2, 256, 3, 1), (32, 9, 1, 64, 3, 1)]


def _default_tile(case, target, lanes):
    from tvmpy.topi.x86 import conv2d_nchwc as m

    c, h, w, oc, k, stride = case
    A = te.placeholder((1, c // lanes, h, w, lanes), name="A")
    W = te.placeholder((oc // lanes, c // lanes, k, k, lanes, lanes), name="W")
    conv = nn.conv2d_NCHWc(A, W, stride, k // 2, 1)
    with tvm.target.Target(target):
        rows, oc_tile = m.default_row_tile(conv, False)
        cols = m._default_reg_n(conv, oc_tile, False)
        return rows, oc_tile, cols, m.columns_outer(oc_tile, cols * rows)


@pytest.mark.parametrize("case", REGISTER_CASES, ids=[str(c) for c in REGISTER_CASES])
def test_default_register_tile_fits_the_registers(case):
    """AVX2's 16 registers hold the default tile's accumulators, its weight vectors, a
    broadcast and the spare registers (conv2d_nchwc.max_tile_columns), with the columns outside
    the chunks where all its broadcasts would not fit beside them; AVX-512's tiles (32
    registers, broadcasts folded into the FMAs) are those of the 32-register rule unchanged."""
    from tvmpy.topi.x86.conv2d_nchwc import SPARE_REGISTERS

    rows, oc_tile, cols, outer = _default_tile(case, "llvm -mcpu=haswell", 8)
    acc = rows * cols * oc_tile
    assert acc + oc_tile + 1 + SPARE_REGISTERS <= 16, (rows, oc_tile, cols)
    assert outer == (oc_tile > 1 and acc + rows * cols + 1 + SPARE_REGISTERS > 16)
    rows, oc_tile, cols, outer = _default_tile(case, "llvm -mcpu=skylake-avx512", 16)
    assert rows * cols * oc_tile <= 27 and not outer  # 2 x 9, 3 x 8 (+ 3 weights), 4 x 6 ...


@pytest.mark.parametrize("oc_tile,reg_n,k_block", [(2, 5, 0), (3, 4, 0), (2, 3, 2), (4, 2, 3)])
def test_columns_outer_tile_matches_numpy(oc_tile, reg_n, k_block):
    """The register tile with its columns outside its chunks (AVX2's order, forced here so
    that an AVX-512 host runs it too): tails in both (3 of 4 chunks, 5 columns of 13), and the
    reduction-blocked nest (2 or 3 input chunks a block: the last block a tail)."""
    from tvmpy.topi.x86.conv2d_nchwc import find_nchwc, schedule_nchwc_tile

    c, h, w, oc, k, stride, pad, icb, ocb = (20, 6, 13, 16, 1 if k_block else 3, 1,
                                             0 if k_block else 1, 4, 4)

    def sched(outs):
        s, conv, out, _ = find_nchwc(outs)
        schedule_nchwc_tile(s, conv, out, oc_tile, reg_n, True, unroll_kw=True,
                            tile_oh=2 if k_block else 1, k_block=k_block, cols_outer=True)
        return s

    A, W, B, out, arrays, *_ = _nchwc(c, h, w, oc, k, stride, pad, icb, ocb,
                                      lambda cv, b: topi.relu(topi.add(cv, b)))
    check([A, W, B], out, sched,
          lambda x, y, b: np.maximum(testing.conv2d_NCHWc_python(x, y, stride, pad) + b, 0),
          arrays=arrays)
