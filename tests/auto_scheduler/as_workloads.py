"""Registered workloads of the auto_scheduler tests, each with a numpy (float64) reference,
and ``check_state``: build a state's schedule and compare with the reference."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import auto_scheduler, te, tir

REFS = {}


def _ref(name):
    def deco(f):
        REFS[name] = f
        return f
    return deco


@auto_scheduler.register_workload
def matmul(N, M, K):
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


@_ref("matmul")
def _matmul_ref(a, b):
    return a @ b


@auto_scheduler.register_workload
def matmul_relu(N, M, K):
    A, B, C = matmul(N, M, K)
    D = te.compute((N, M), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return [A, B, D]


@_ref("matmul_relu")
def _matmul_relu_ref(a, b):
    return np.maximum(a @ b, 0)


def _pad(X, p, name="pad"):
    n, c, h, w = (int(d) for d in X.shape)
    return te.compute((n, c, h + 2 * p, w + 2 * p),
                      lambda b, ch, y, x: te.if_then_else(
                          tir.all(y >= p, y < h + p, x >= p, x < w + p),
                          X[b, ch, y - p, x - p], 0.0), name=name)


@auto_scheduler.register_workload
def conv2d_bias_relu(N, H, W, CO, CI, KH, KW, stride, padding):
    X = te.placeholder((N, CI, H, W), name="X")
    Wt = te.placeholder((CO, CI, KH, KW), name="W")
    bias = te.placeholder((CO,), name="bias")
    P = _pad(X, padding)
    OH = (H + 2 * padding - KH) // stride + 1
    OW = (W + 2 * padding - KW) // stride + 1
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    conv = te.compute((N, CO, OH, OW), lambda n, f, y, x: te.sum(
        P[n, rc, y * stride + ry, x * stride + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    add = te.compute((N, CO, OH, OW), lambda n, f, y, x: conv[n, f, y, x] + bias[f], name="bias_add")
    out = te.compute((N, CO, OH, OW), lambda n, f, y, x: te.max(add[n, f, y, x], 0.0), name="relu")
    return [X, Wt, bias, out]


def _conv_ref(x, w, stride, padding):
    n, ci, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, co, oh, ow))
    for y in range(kh):
        for x_ in range(kw):
            patch = xp[:, :, y:y + stride * oh:stride, x_:x_ + stride * ow:stride]
            out += np.einsum("ncyx,fc->nfyx", patch, w[:, :, y, x_])
    return out


@_ref("conv2d_bias_relu")
def _conv2d_bias_relu_ref(x, w, b, *, args):
    stride, padding = args[7], args[8]
    return np.maximum(_conv_ref(x, w, stride, padding) + b[None, :, None, None], 0)


@auto_scheduler.register_workload
def softmax(N, M):
    A = te.placeholder((N, M), name="A")
    k = te.reduce_axis((0, M), name="k")
    mx = te.compute((N,), lambda i: te.max(A[i, k], axis=k), name="max")
    e = te.compute((N, M), lambda i, j: te.exp(A[i, j] - mx[i]), name="exp")
    k2 = te.reduce_axis((0, M), name="k2")
    s = te.compute((N,), lambda i: te.sum(e[i, k2], axis=k2), name="expsum")
    out = te.compute((N, M), lambda i, j: e[i, j] / s[i], name="softmax")
    return [A, out]


@_ref("softmax")
def _softmax_ref(a):
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@auto_scheduler.register_workload
def depthwise_conv(N, C, H, W, K, padding):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((C, K, K), name="W")
    P = _pad(X, padding)
    OH, OW = H + 2 * padding - K + 1, W + 2 * padding - K + 1
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    out = te.compute((N, C, OH, OW), lambda n, c, y, x: te.sum(
        P[n, c, y + ry, x + rx] * Wt[c, ry, rx], axis=[ry, rx]), name="depthwise")
    return [X, Wt, out]


@_ref("depthwise_conv")
def _depthwise_ref(x, w, *, args):
    n, c, h, wd = x.shape
    k, p = args[4], args[5]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = h + 2 * p - k + 1, wd + 2 * p - k + 1
    out = np.zeros((n, c, oh, ow))
    for y in range(k):
        for x_ in range(k):
            out += xp[:, :, y:y + oh, x_:x_ + ow] * w[None, :, y, x_, None, None]
    return out


@auto_scheduler.register_workload
def conv2d_transpose(N, CI, H, W, CO, K, stride):
    """Transposed convolution, no padding: the zero-dilated, (K-1)-padded input convolved
    with the flipped kernel."""
    X = te.placeholder((N, CI, H, W), name="X")
    Wt = te.placeholder((CI, CO, K, K), name="W")
    DH, DW = (H - 1) * stride + 1 + 2 * (K - 1), (W - 1) * stride + 1 + 2 * (K - 1)

    def dil(n, c, y, x):
        yy, xx = y - (K - 1), x - (K - 1)
        cond = tir.all(yy >= 0, xx >= 0, yy % stride == 0, xx % stride == 0,
                       yy // stride < H, xx // stride < W)
        return te.if_then_else(cond, X[n, c, yy // stride, xx // stride], 0.0)

    D = te.compute((N, CI, DH, DW), dil, name="dilate_pad")
    OH, OW = DH - K + 1, DW - K + 1
    rc = te.reduce_axis((0, CI), name="rc")
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    out = te.compute((N, CO, OH, OW), lambda n, f, y, x: te.sum(
        D[n, rc, y + ry, x + rx] * Wt[rc, f, K - 1 - ry, K - 1 - rx], axis=[rc, ry, rx]),
        name="conv_transpose")
    return [X, Wt, out]


@_ref("conv2d_transpose")
def _conv_transpose_ref(x, w, *, args):
    n, ci, h, wd = x.shape
    _, co, k, _ = w.shape
    s = args[6]
    out = np.zeros((n, co, (h - 1) * s + k, (wd - 1) * s + k))
    for y in range(h):
        for x_ in range(wd):
            out[:, :, y * s:y * s + k, x_ * s:x_ * s + k] += np.einsum(
                "nc,cfyx->nfyx", x[:, :, y, x_], w)
    return out


@auto_scheduler.register_workload
def layer_norm(N, M):
    A = te.placeholder((N, M), name="A")
    g = te.placeholder((M,), name="gamma")
    b = te.placeholder((M,), name="beta")
    k = te.reduce_axis((0, M), name="k")
    s = te.compute((N,), lambda i: te.sum(A[i, k], axis=k), name="sum")
    k2 = te.reduce_axis((0, M), name="k2")
    sq = te.compute((N,), lambda i: te.sum(A[i, k2] * A[i, k2], axis=k2), name="sqsum")
    out = te.compute((N, M), lambda i, j: (A[i, j] - s[i] / M) * te.rsqrt(
        sq[i] / M - (s[i] / M) * (s[i] / M) + 1e-5) * g[j] + b[j], name="layer_norm")
    return [A, g, b, out]


@_ref("layer_norm")
def _layer_norm_ref(a, g, b):
    m = a.mean(axis=1, keepdims=True)
    v = (a * a).mean(axis=1, keepdims=True) - m * m
    return (a - m) / np.sqrt(v + 1e-5) * g + b


@auto_scheduler.register_workload
def row_sum(N, M):
    A = te.placeholder((N, M), name="A")
    k = te.reduce_axis((0, M), name="k")
    return [A, te.compute((N,), lambda i: te.sum(A[i, k], axis=k), name="rowsum")]


@_ref("row_sum")
def _row_sum_ref(a):
    return a.sum(axis=1)


@auto_scheduler.register_workload
def pool_mean(N, C, H, W, CB):
    """A global average pool over a blocked (NCHWc) tensor: a reduction whose contiguous
    spatial axis (CB) comes last, then the division."""
    A = te.placeholder((N, C, H, W, CB), name="A")
    ry = te.reduce_axis((0, H), name="ry")
    rx = te.reduce_axis((0, W), name="rx")
    S = te.compute((N, C, CB), lambda n, c, b: te.sum(A[n, c, ry, rx, b], axis=[ry, rx]),
                   name="pool_sum")
    return [A, te.compute((N, C, CB), lambda n, c, b: S[n, c, b] / float(H * W), name="pool_avg")]


@_ref("pool_mean")
def _pool_mean_ref(a):
    return a.mean(axis=(2, 3))


@auto_scheduler.register_workload
def elementwise(N, M):
    A = te.placeholder((N, M), name="A")
    B = te.placeholder((M,), name="B")
    C = te.compute((N, M), lambda i, j: A[i, j] * 2.0 + B[j], name="C")
    D = te.compute((N, M), lambda i, j: te.exp(C[i, j] * 0.1), name="D")
    E = te.compute((N, M), lambda i, j: te.max(D[i, j], 1.0), name="E")
    return [A, B, E]


@_ref("elementwise")
def _elementwise_ref(a, b):
    return np.maximum(np.exp((a * 2 + b) * 0.1), 1.0)


@auto_scheduler.register_workload
def dense_bias_tanh(N, M, K):
    """relay's dense (the weight is [out, in]) with a bias and tanh epilogue."""
    A = te.placeholder((N, K), name="A")
    Wt = te.placeholder((M, K), name="W")
    b = te.placeholder((M,), name="bias")
    k = te.reduce_axis((0, K), name="k")
    D = te.compute((N, M), lambda i, j: te.sum(A[i, k] * Wt[j, k], axis=k), name="dense")
    return [A, Wt, b, te.compute((N, M), lambda i, j: te.tanh(D[i, j] + b[j]), name="out")]


@_ref("dense_bias_tanh")
def _dense_bias_tanh_ref(a, w, b):
    return np.tanh(a @ w.T + b)


@auto_scheduler.register_workload
def batch_matmul(B, N, M, K):
    """relay's batch_matmul (the second operand is [batch, out, in])."""
    X = te.placeholder((B, N, K), name="X")
    Y = te.placeholder((B, M, K), name="Y")
    k = te.reduce_axis((0, K), name="k")
    return [X, Y, te.compute((B, N, M), lambda b, i, j: te.sum(X[b, i, k] * Y[b, j, k], axis=k),
                             name="bmm")]


@_ref("batch_matmul")
def _batch_matmul_ref(x, y):
    return np.einsum("bik,bjk->bij", x, y)


@auto_scheduler.register_workload
def row_max(N, M):
    """A max reduction (its identity is -inf, not 0) then a shift: the first half of a
    numerically stable softmax."""
    A = te.placeholder((N, M), name="A")
    k = te.reduce_axis((0, M), name="k")
    mx = te.compute((N,), lambda i: te.max(A[i, k], axis=k), name="rowmax")
    return [A, te.compute((N, M), lambda i, j: A[i, j] - mx[i], name="shifted")]


@_ref("row_max")
def _row_max_ref(a):
    return a - a.max(axis=1, keepdims=True)


@auto_scheduler.register_workload
def gated_matmul(N, M, K, G):
    """A GEMM whose columns are G gates of M units, gate-major (N, G, M), and a consumer that
    reads each unit's gates (constant slices: an RNN cell's epilogue, without the RNN)."""
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, G * M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, G, M), lambda i, g, j: te.sum(A[i, k] * B[k, g * M + j], axis=k), name="C")
    D = te.compute((N, M), lambda i, u: te.max(C[i, 0, u], 0.0) * C[i, G - 1, u] + C[i, G // 2, u],
                   name="D")
    return [A, B, D]


@_ref("gated_matmul")
def _gated_matmul_ref(a, b, *, args):
    n, m, _, g = args
    c = (a @ b).reshape(n, g, m)
    return np.maximum(c[:, 0], 0) * c[:, g - 1] + c[:, g // 2]


@auto_scheduler.register_workload
def gated_matmul_shifted(N, M, K):
    """As gated_matmul (2 gates), the consumer reading the second gate one unit on: not a
    slice (an index with arithmetic), so the slice rule must not fuse it."""
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, 2 * M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, 2, M + 1), lambda i, g, j: te.sum(A[i, k] * B[k, g * M + j % M], axis=k),
                   name="C")
    D = te.compute((N, M), lambda i, u: C[i, 0, u] * C[i, 1, u + 1], name="D")
    return [A, B, D]


@_ref("gated_matmul_shifted")
def _gated_matmul_shifted_ref(a, b, *, args):
    n, m, _ = args
    c = (a @ b).reshape(n, 2, m)
    return c[:, 0] * np.roll(c[:, 1], -1, axis=1)


def make_task(func, args):
    return auto_scheduler.SearchTask(func=func, args=args, target="llvm")


def reference(task, inputs):
    import json

    name, *args = json.loads(task.workload_key)
    f = REFS[name]
    try:
        return f(*inputs, args=args)
    except TypeError:
        return f(*inputs)


def _run_state(task, state, ins):
    sch, args = task.compute_dag.apply_steps_from_state(state)
    f = tvm.build(sch, args, "llvm")
    out = tvm.nd.array(np.zeros([int(d) for d in args[-1].shape], "float32"))
    f(*[tvm.nd.array(x) for x in ins], out)
    return out.numpy()


def check_state(task, state, seed=0, rtol=1e-4):
    """Build ``state``'s schedule, run it on random inputs, compare with numpy (float64).

    Where the compute's own float32 arithmetic is ill-conditioned on the drawn inputs (e.g.
    layer_norm's E[x^2] - E[x]^2 on a row whose variance is ~1e-5), the unscheduled compute
    misses the float64 reference too; then the schedule is held to the unscheduled program's
    result instead (a schedule must not change what the compute computes), and the
    unscheduled program to numpy at a tolerance that covers that float32 cancellation."""
    dag = task.compute_dag
    args = dag.apply_steps_from_state(dag.init_state())[1]
    rng = np.random.default_rng(seed)
    ins = [rng.uniform(-1, 1, size=[int(d) for d in t.shape]).astype("float32") for t in args[:-1]]
    got = _run_state(task, state, ins)
    ref = reference(task, [x.astype("float64") for x in ins])
    if np.allclose(got, ref, rtol=rtol, atol=rtol):
        return
    plain = _run_state(task, dag.init_state(), ins)
    if np.allclose(plain, ref, rtol=rtol, atol=rtol):  # the schedule alone is off: a bug
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(got, plain, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(plain, ref, rtol=1e-2, atol=1e-2)


@auto_scheduler.register_workload
def depthwise_nchwc_silu(N, CB, H, W, K, stride, padding, LANES):
    """A depthwise convolution in the blocked layout relay's AlterOpLayout makes (NCHW{c}:
    ``CB`` blocks of ``LANES`` channels), with stride and padding, a per-channel bias and SiLU
    (``y * sigmoid(y)``): the EfficientNet block's fused subgraph."""
    X = te.placeholder((N, CB, H, W, LANES), name="X")
    Wt = te.placeholder((CB, K, K, LANES), name="W")
    B = te.placeholder((CB, LANES), name="B")
    P = te.compute((N, CB, H + 2 * padding, W + 2 * padding, LANES),
                   lambda n, c, y, x, l: te.if_then_else(
                       tir.all(y >= padding, y < H + padding, x >= padding, x < W + padding),
                       X[n, c, y - padding, x - padding, l], 0.0), name="pad")
    OH, OW = (H + 2 * padding - K) // stride + 1, (W + 2 * padding - K) // stride + 1
    ry = te.reduce_axis((0, K), name="ry")
    rx = te.reduce_axis((0, K), name="rx")
    conv = te.compute((N, CB, OH, OW, LANES), lambda n, c, y, x, l: te.sum(
        P[n, c, y * stride + ry, x * stride + rx, l] * Wt[c, ry, rx, l], axis=[ry, rx]),
        name="depthwise")
    add = te.compute(conv.shape, lambda n, c, y, x, l: conv[n, c, y, x, l] + B[c, l], name="add")
    sig = te.compute(conv.shape, lambda *i: tir.sigmoid(add(*i)), name="sigmoid")
    out = te.compute(conv.shape, lambda *i: add(*i) * sig(*i), name="multiply")
    return [X, Wt, B, out]


@_ref("depthwise_nchwc_silu")
def _depthwise_nchwc_silu_ref(x, w, b, *, args):
    k, stride, p = args[4], args[5], args[6]
    n, cb, h, wd, lanes = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p), (0, 0)))
    oh, ow = (h + 2 * p - k) // stride + 1, (wd + 2 * p - k) // stride + 1
    y = np.zeros((n, cb, oh, ow, lanes))
    for r in range(k):
        for s in range(k):
            y += xp[:, :, r:r + stride * (oh - 1) + 1:stride, s:s + stride * (ow - 1) + 1:stride] \
                * w[None, :, r, s, None, None, :]
    y += b[None, :, None, None, :]
    return y / (1 + np.exp(-y))


@auto_scheduler.register_workload
def sigmoid_reread(N, M):
    """``sigmoid`` read twice per element by its consumer (at two offsets): inlining it would
    compute each value twice, so it must stay a stage of its own."""
    A = te.placeholder((N, M + 1), name="A")
    S = te.compute((N, M + 1), lambda i, j: tir.sigmoid(A[i, j]), name="sig")
    out = te.compute((N, M), lambda i, j: S[i, j] * S[i, j + 1], name="out")
    return [A, out]


@_ref("sigmoid_reread")
def _sigmoid_reread_ref(a):
    s = 1 / (1 + np.exp(-a))
    return s[:, :-1] * s[:, 1:]
