"""te.scan (TVM's ScanOp): recurrences over a time axis, their schedules (update stages split,
parallel, vectorized, bound to GPU threads, intermediate stages compute_at inside the scan's
loop), bound inference through the scan, and lowering for llvm, c, opencl (run on PoCL) and
cuda/nvptx (NVRTC / LLVM NVPTX, the kernels run host-emulated). Against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmpy as tvm
from tvmpy import te
from tvmpy.arith import simplify
from tvmpy.tir.expr import is_const_int

RNG = np.random.default_rng(26)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(0.1, 1.0, shape).astype("float32")


def _cumsum(m=None, n=None):
    """TVM's documented cumulative sum over axis 0 (symbolic m, n by default)."""
    m = te.var("m") if m is None else m
    n = te.var("n") if n is None else n
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n), name="s_state")
    s_init = te.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i], name="s_update")
    s_scan = te.scan(s_init, s_update, s_state, inputs=[X])
    return X, s_init, s_update, s_scan


def _run(f, shapes_in, shapes_out, dev=None):
    dev = dev or tvm.cpu(0)
    ins = [_rand(*s) for s in shapes_in]
    outs = [tvm.nd.array(np.zeros(s, "float32"), dev) for s in shapes_out]
    f(*[tvm.nd.array(x, dev) for x in ins], *outs)
    return ins, [o.numpy() for o in outs]


SHAPES = [(1, 1), (2, 1), (1, 7), (7, 13), (31, 97)]


# ---- the scan op -------------------------------------------------------------------------------
def test_scan_op_attributes():
    X, s_init, s_update, s_scan = _cumsum()
    op = s_scan.op
    assert isinstance(op, te.ScanOp) and s_scan.shape == s_update.shape
    assert op.scan_axis.var.name == "scan.idx"
    assert is_const_int(op.scan_axis.dom.min, 1)
    assert is_const_int(simplify(op.scan_axis.dom.extent - (X.shape[0] - 1)), 0)
    assert list(op.init) == [s_init] and list(op.update) == [s_update] and list(op.inputs) == [X]
    assert op.input_tensors == [s_init, s_update]
    assert len(op.spatial_axis_) == 1
    assert tvm.scan is te.scan  # v0.6 spelling


@pytest.mark.parametrize("target", ["llvm", "c", "interp"])
def test_cumsum_symbolic(target):
    X, _, _, s_scan = _cumsum()
    s = te.create_schedule(s_scan.op)
    f = tvm.build(s, [X, s_scan], target)
    for shape in SHAPES:
        (x,), (got,) = _run(f, [shape], [shape])
        tvm.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (11, 17)])
def test_cumsum_static_shapes(shape):
    X, _, _, s_scan = _cumsum(*shape)
    s = te.create_schedule(s_scan.op)
    f = tvm.build(s, [X, s_scan], "llvm")
    (x,), (got,) = _run(f, [shape], [shape])
    tvm.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


def _split_parallel_vectorize(s, s_init, s_update, s_scan):
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=8)
    s[s_update].parallel(xo)
    s[s_update].vectorize(xi)


def _split_unroll_init_too(s, s_init, s_update, s_scan):
    for stage in (s_init, s_update):
        xo, xi = s[stage].split(stage.op.axis[1], nparts=3)
        s[stage].unroll(xi)


def _split_time_axis_of_update(s, s_init, s_update, s_scan):
    # the update's time axis is one step inside the scan's loop: splitting it is harmless
    to, ti = s[s_update].split(s_update.op.axis[0], factor=2)
    s[s_update].reorder(s_update.op.axis[1], to, ti)


@pytest.mark.parametrize("sched", [_split_parallel_vectorize, _split_unroll_init_too,
                                   _split_time_axis_of_update])
@pytest.mark.parametrize("target", ["llvm", "c"])
def test_update_schedules(sched, target):
    X, s_init, s_update, s_scan = _cumsum()
    s = te.create_schedule(s_scan.op)
    sched(s, s_init, s_update, s_scan)
    f = tvm.build(s, [X, s_scan], target)
    for shape in [(1, 1), (3, 5), (13, 37)]:
        (x,), (got,) = _run(f, [shape], [shape])
        tvm.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


# ---- multi-stage update ------------------------------------------------------------------------
def _two_stage():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n), name="s_state")
    s_init = te.compute((1, n), lambda _, i: X[0, i], name="s_init")
    s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 0.5, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    s_scan = te.scan(s_init, s2, s_state, inputs=[X])
    return X, s1, s2, s_scan


def _two_stage_ref(x):
    out = x.copy()
    for t in range(1, x.shape[0]):
        out[t] = out[t - 1] * 0.5 + x[t]
    return out


def _at_split(s, s1, s2, s_scan):
    xo, _ = s[s2].split(s2.op.axis[1], factor=4)
    s[s1].compute_at(s[s2], xo)


def _at_scan_axis(s, s1, s2, s_scan):
    s[s1].compute_at(s[s_scan], s_scan.op.scan_axis)


def _inline(s, s1, s2, s_scan):
    s[s1].compute_inline()


def _root(s, s1, s2, s_scan):
    s[s1].compute_root()  # the root of the scan's loop


@pytest.mark.parametrize("sched", [None, _at_split, _at_scan_axis, _inline, _root])
def test_multi_stage(sched):
    X, s1, s2, s_scan = _two_stage()
    s = te.create_schedule(s_scan.op)
    if sched:
        sched(s, s1, s2, s_scan)
    f = tvm.build(s, [X, s_scan], "llvm")
    for shape in [(1, 3), (2, 1), (9, 13)]:
        (x,), (got,) = _run(f, [shape], [shape])
        tvm.testing.assert_allclose(got, _two_stage_ref(x), rtol=1e-5)


def test_multi_stage_intermediate_is_one_step():
    """s1 computed at the scan's loop holds one time step (bound inference fixes its time axis
    to scan.idx), and is allocated inside the loop."""
    X, s1, s2, s_scan = _two_stage()
    s = te.create_schedule(s_scan.op)
    bounds = te.schedule.InferBound(s)
    t = s_scan.op.scan_axis.var
    for stage in (s1, s2):
        r = bounds[stage.op.axis[0]]
        assert is_const_int(r.extent, 1) and r.min is t
    assert is_const_int(bounds[s_scan.op.scan_axis].min, 1)
    text = str(tvm.lower(s, [X, s_scan], simple_mode=True))
    loop = text.index("for scan.idx")
    assert text.index("s1 = allocate((n,)") > loop


def _rnn(gpu: bool):
    """h[t] = tanh(h[t-1] @ W + X[t]): the update's first stage is a reduction."""
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    W = te.placeholder((n, n), name="W")
    h = te.placeholder((m, n), name="h")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    k = te.reduce_axis((0, n), "k")
    mm = te.compute((m, n), lambda t, i: te.sum(h[t - 1, k] * W[k, i], axis=k), name="mm")
    up = te.compute((m, n), lambda t, i: te.tanh(mm[t, i] + X[t, i]), name="up")
    res = te.scan(init, up, h, inputs=[X, W])
    s = te.create_schedule(res.op)
    if gpu:
        _bind(s, init, 8)
        _bind(s, up, 8)
        s[mm].compute_at(s[up], s[up].leaf_iter_vars[-1])  # one per thread: local
    else:
        s[mm].split(k, factor=4)
        xo, _ = s[up].split(up.op.axis[1], factor=4)
        s[mm].compute_at(s[up], xo)
    return s, [X, W, res]


def _rnn_ref(x, w):
    out = x.astype("float64")
    for t in range(1, len(x)):
        out[t] = np.tanh(out[t - 1] @ w + x[t])
    return out


@pytest.mark.parametrize("target", ["llvm", "opencl"])
def test_rnn_reduction_update(target):
    dev = tvm.device(target, 0)
    if target == "opencl":
        assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    s, args = _rnn(target != "llvm")
    f = tvm.build(s, args, target)
    for m, n in [(1, 1), (5, 13), (8, 3)]:
        x = RNG.uniform(-1, 1, (m, n)).astype("float32")
        w = RNG.uniform(-1, 1, (n, n)).astype("float32")
        out = tvm.nd.array(np.zeros((m, n), "float32"), dev)
        f(tvm.nd.array(x, dev), tvm.nd.array(w, dev), out)
        tvm.testing.assert_allclose(out.numpy(), _rnn_ref(x, w), rtol=1e-4, atol=1e-5)


# ---- several states, longer init, consumers ---------------------------------------------------
def test_two_coupled_states():
    m, n, k = te.var("m"), te.var("n"), te.var("k")
    X = te.placeholder((m, n), name="X")
    a_state = te.placeholder((m, n), name="a_state")
    b_state = te.placeholder((m, k), name="b_state")
    a_init = te.compute((1, n), lambda _, i: X[0, i], name="a_init")
    b_init = te.compute((1, k), lambda _, j: te.const(0.5, "float32"), name="b_init")
    a_up = te.compute((m, n), lambda t, i: a_state[t - 1, i] * 0.5 + b_state[t - 1, 0] + X[t, i],
                      name="a_up")
    b_up = te.compute((m, k), lambda t, j: b_state[t - 1, j] - a_state[t - 1, 0], name="b_up")
    a, b = te.scan([a_init, b_init], [a_up, b_up], [a_state, b_state], inputs=[X])
    assert a.op is b.op and a.value_index == 0 and b.value_index == 1
    s = te.create_schedule(a.op)
    xo, xi = s[a_up].split(a_up.op.axis[1], factor=4)
    s[a_up].vectorize(xi)
    f = tvm.build(s, [X, a, b], "llvm")
    for M, N, K in [(1, 1, 1), (6, 5, 3), (13, 2, 7)]:
        (x,), (ga, gb) = _run(f, [(M, N)], [(M, N), (M, K)])
        ra, rb = np.zeros((M, N), "float32"), np.full((M, K), 0.5, "float32")
        ra[0] = x[0]
        for t in range(1, M):
            ra[t] = ra[t - 1] * 0.5 + rb[t - 1, 0] + x[t]
            rb[t] = rb[t - 1] - ra[t - 1, 0]
        tvm.testing.assert_allclose(ga, ra, rtol=1e-5)
        tvm.testing.assert_allclose(gb, rb, rtol=1e-5)


def test_two_step_init_fibonacci_like():
    """init covers two time steps; the update reads t-1 and t-2: the scan runs from 2."""
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((2, n), lambda t, i: X[t, i], name="init")
    up = te.compute((m, n), lambda t, i: state[t - 1, i] + state[t - 2, i] * 0.5 + X[t, i],
                    name="up")
    res = te.scan(init, up, state)
    assert is_const_int(res.op.scan_axis.dom.min, 2)
    s = te.create_schedule(res.op)
    f = tvm.build(s, [X, res], "llvm")
    for shape in [(2, 3), (3, 1), (10, 7)]:
        (x,), (got,) = _run(f, [shape], [shape])
        ref = x.copy()
        for t in range(2, shape[0]):
            ref[t] = ref[t - 1] + ref[t - 2] * 0.5 + x[t]
        tvm.testing.assert_allclose(got, ref, rtol=1e-5)


def test_scan_feeds_a_later_stage_and_reads_a_computed_input():
    """The scan as an intermediate (its buffer allocated around its init and loop), reading a
    computed tensor that is not an argument."""
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    X = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    up = te.compute((m, n), lambda t, i: te.max(state[t - 1, i], X[t, i]), name="up")
    res = te.scan(init, up, state)
    C = te.compute((m, n), lambda i, j: res[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    f = tvm.build(s, [A, C], "llvm")
    for shape in [(1, 1), (8, 9)]:
        (a,), (got,) = _run(f, [shape], [shape])
        tvm.testing.assert_allclose(got, np.maximum.accumulate(a * 2.0, axis=0) + 1.0, rtol=1e-6)


def test_two_scans_in_sequence():
    """A second scan whose init and update read the first scan's output (a running max of a
    running sum): each scan's loop holds only its own update."""
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    st1 = te.placeholder((m, n), name="st1")
    st2 = te.placeholder((m, n), name="st2")
    r1 = te.scan(te.compute((1, n), lambda _, i: X[0, i], name="i1"),
                 te.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i], name="u1"), st1,
                 name="sum_scan")
    r2 = te.scan(te.compute((1, n), lambda _, i: r1[0, i], name="i2"),
                 te.compute((m, n), lambda t, i: te.max(st2[t - 1, i], r1[t, i]), name="u2"), st2,
                 name="max_scan")
    s = te.create_schedule(r2.op)
    text = str(tvm.lower(s, [X, r2], simple_mode=True))
    assert text.index("for sum_scan.idx") < text.index("for max_scan.idx")
    f = tvm.build(s, [X, r2], "llvm")
    for shape in [(1, 2), (9, 5)]:
        x = RNG.uniform(-1, 1, shape).astype("float32")
        out = tvm.nd.array(np.zeros(shape, "float32"))
        f(tvm.nd.array(x), out)
        want = np.maximum.accumulate(np.cumsum(x, axis=0), axis=0)
        tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)


def test_cache_read_into_the_update():
    """TVM's bound test: an input cached per split tile of the update holds the tile."""
    X0 = te.placeholder((te.var("m"), te.var("n")), name="X0")
    m, n = X0.shape
    X = te.compute((m, n), lambda i, j: X0[i, j] + 1.0, name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    up = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="up")
    res = te.scan(init, up, state)
    s = te.create_schedule(res.op)
    XX = s.cache_read(X, "local", up)
    xo, xi = s[up].split(up.op.axis[1], factor=4)
    s[XX].compute_at(s[up], xo)
    bounds = te.schedule.InferBound(s)
    assert is_const_int(bounds[XX.op.axis[1]].extent, 4)
    assert is_const_int(bounds[XX.op.axis[0]].extent, 1)
    f = tvm.build(s, [X0, res], "llvm")
    (x0,), (got,) = _run(f, [(5, 11)], [(5, 11)])
    tvm.testing.assert_allclose(got, np.cumsum(x0 + 1.0, axis=0), rtol=1e-5)


def test_cache_write_of_the_update():
    X, s_init, s_update, s_scan = _cumsum()
    s = te.create_schedule(s_scan.op)
    s.cache_write(s_update, "local")
    f = tvm.build(s, [X, s_scan], "llvm")
    (x,), (got,) = _run(f, [(6, 5)], [(6, 5)])
    tvm.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


def test_state_as_an_argument_is_unused():
    """TVM replaces the state by the scan's output: a state passed as an argument is a
    parameter the function does not read."""
    X, _, _, s_scan = _cumsum()
    state = s_scan.op.state_placeholder[0]
    s = te.create_schedule(s_scan.op)
    f = tvm.build(s, [X, state, s_scan], "llvm")
    (x, _), (got,) = _run(f, [(4, 3), (4, 3)], [(4, 3)])
    tvm.testing.assert_allclose(got, np.cumsum(x, axis=0), rtol=1e-5)


# ---- illegal schedules and bad scans ---------------------------------------------------------
def _illegal():
    X, s1, s2, s_scan = _two_stage()
    C = te.compute(s_scan.shape, lambda i, j: s_scan[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    init = s_scan.op.init[0]
    ax = s_scan.op.scan_axis
    return {
        "split_scan_axis": (lambda: s[s_scan].split(ax, factor=2), "s[update]"),
        "parallel_scan_axis": (lambda: s[s_scan].parallel(ax), "in order"),
        "bind_scan_axis": (lambda: s[s_scan].bind(ax, te.thread_axis("blockIdx.x")), "scan"),
        "update_stage_outside": (lambda: s[s1].compute_at(s[C], C.op.axis[0]),
                                 "inside the scan's loop"),
        "init_inside": (lambda: s[init].compute_at(s[s_scan], ax), "before the scan's loop"),
        "inline_update": (lambda: s[s2].compute_inline(), "update of scan"),
        "inline_init": (lambda: s[init].compute_inline(), "init of scan"),
        "inline_scan": (lambda: s[s_scan].compute_inline(), "is a scan"),
        "scan_at_consumer": (lambda: s[s_scan].compute_at(s[C], C.op.axis[0]), "is a scan"),
        "spatial_axis": (lambda: s[s1].compute_at(s[s_scan], s_scan.op.spatial_axis_[0]),
                         "only loop"),
        "env_threads": (lambda: s[s_scan].env_threads([te.thread_axis("blockIdx.x")]),
                        "persistent"),
        "update_as_arg": (lambda: tvm.lower(s, [X, s2, C]), "pass the scan's output"),
    }


@pytest.mark.parametrize("case", sorted(_illegal()))
def test_illegal_schedules(case):
    fn, msg = _illegal()[case]
    with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        fn()


def test_input_computed_per_step():
    """A stage only the update reads may be computed at the scan's loop (one row per step);
    one the init reads too may not."""
    m, n = te.var("m"), te.var("n")
    A = te.placeholder((m, n), name="A")
    X = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="X")
    state = te.placeholder((m, n), name="state")
    up = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="up")
    res = te.scan(te.compute((1, n), lambda _, i: A[0, i], name="init"), up, state)
    s = te.create_schedule(res.op)
    s[X].compute_at(s[res], res.op.scan_axis)
    assert is_const_int(te.schedule.InferBound(s)[X.op.axis[0]].extent, 1)
    f = tvm.build(s, [A, res], "llvm")
    (a,), (got,) = _run(f, [(6, 7)], [(6, 7)])
    tvm.testing.assert_allclose(got, np.cumsum(np.concatenate([a[:1], a[1:] * 2]), axis=0),
                                rtol=1e-5)
    res2 = te.scan(te.compute((1, n), lambda _, i: X[0, i], name="init2"), up, state)
    s = te.create_schedule(res2.op)
    s[X].compute_at(s[res2], res2.op.scan_axis)
    with pytest.raises(ValueError, match="init2, which reads it, runs outside that loop"):
        tvm.lower(s, [A, res2])


def test_reading_the_state_outside_the_update_is_refused():
    X, _, _, s_scan = _cumsum()
    state = s_scan.op.state_placeholder[0]
    bad = te.compute(state.shape, lambda i, j: state[i, j] + 1.0, name="bad")
    s = te.create_schedule([s_scan.op, bad.op])
    with pytest.raises(ValueError, match="does not feed the scan's update"):
        tvm.lower(s, [X, s_scan, bad])


def test_bad_scans():
    m, n = te.var("m"), te.var("n")
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    up = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="up")
    with pytest.raises(ValueError, match="same length"):
        te.scan([init], [up, up], [state])
    with pytest.raises(TypeError, match="must be a te.placeholder"):
        te.scan(init, up, te.compute((m, n), lambda i, j: X[i, j]))
    with pytest.raises(TypeError, match="one dtype"):
        te.scan(init, up, te.placeholder((m, n), "int32"))
    with pytest.raises(ValueError, match="every dimension but the first"):
        te.scan(init, up, te.placeholder((m, n + 1)))
    with pytest.raises(ValueError, match="time steps"):
        te.scan(init, up, te.placeholder((m + 1, n)))
    with pytest.raises(TypeError, match="te.Tensor"):
        te.scan(init, "up", state)
    with pytest.raises(TypeError, match="name"):
        te.scan(init, up, state, name="")


# ---- GPU targets -------------------------------------------------------------------------------
def _bind(s, stage, factor):
    bx, tx = s[stage].split(stage.op.axis[1], factor=factor)
    s[stage].bind(bx, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


def _gpu_multi_stage():
    """s1 per thread (local) inside the update's kernel; s2 and the init bound."""
    X, s1, s2, s_scan = _two_stage()
    s = te.create_schedule(s_scan.op)
    _bind(s, s_scan.op.init[0], 16)
    _bind(s, s2, 16)
    s[s1].compute_at(s[s2], s[s2].leaf_iter_vars[-1])
    return s, [X, s_scan], _two_stage_ref


def _gpu_cumsum():
    X, s_init, s_update, s_scan = _cumsum()
    s = te.create_schedule(s_scan.op)
    _bind(s, s_init, 16)
    _bind(s, s_update, 16)
    return s, [X, s_scan], lambda x: np.cumsum(x, axis=0)


@pytest.mark.parametrize("make", [_gpu_cumsum, _gpu_multi_stage])
def test_opencl_runs_on_pocl(make):
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    s, args, ref = make()
    f = tvm.build(s, args, "opencl")
    for shape in [(1, 1), (5, 17), (12, 3)]:
        (x,), (got,) = _run(f, [shape], [shape], dev)
        tvm.testing.assert_allclose(got, ref(x), rtol=1e-5)


def test_opencl_scan_exported_and_loaded(tmp_path):
    """The launch plan's host loop survives export_library / load_module."""
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    s, args, ref = _gpu_cumsum()
    path = str(tmp_path / "scan.so")
    tvm.build(s, args, "opencl", name="cumsum").export_library(path)
    f = tvm.runtime.load_module(path)["cumsum"]
    (x,), (got,) = _run(f, [(9, 20)], [(9, 20)], dev)
    tvm.testing.assert_allclose(got, ref(x), rtol=1e-5)


def test_opencl_cross_thread_reduction_per_step():
    """h[t] = h[t-1] * sum_k X[t, k]: each step one block reducing across threads (rfactor)."""
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    m, n = te.var("m"), 37
    X = te.placeholder((m, n), name="X")
    h = te.placeholder((m, 1), name="h")
    init = te.compute((1, 1), lambda _, i: X[0, 0], name="init")
    k = te.reduce_axis((0, n), "k")
    red = te.compute((m, 1), lambda t, i: te.sum(X[t, k] * h[t - 1, i], axis=k), name="red")
    res = te.scan(init, red, h)
    s = te.create_schedule(res.op)
    tx = te.thread_axis("threadIdx.x")
    _, ki = s[red].split(k, factor=16)
    rf = s.rfactor(red, ki)
    s[red].bind(s[red].op.reduce_axis[0], tx)
    s[red].bind(s[red].op.axis[1], te.thread_axis("blockIdx.x"))
    s[rf].compute_at(s[red], s[red].op.reduce_axis[0])
    s[red].set_store_predicate(tx.var.equal(0))
    f = tvm.build(s, [X, res], "opencl")
    for rows in (1, 6):
        x = RNG.uniform(-1, 1, (rows, n)).astype("float32")
        out = tvm.nd.array(np.zeros((rows, 1), "float32"), dev)
        f(tvm.nd.array(x, dev), out)
        want = np.zeros((rows, 1))
        want[0, 0] = x[0, 0]
        for t in range(1, rows):
            want[t, 0] = want[t - 1, 0] * x[t].astype("float64").sum()
        tvm.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-6)


def _run_emulated_cuda(f, tmp_path, shapes):
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    dm = f.imported_modules[0]
    if "ptx" in dm.binaries and "__global__" not in dm.get_source():
        host = HostKernels.from_nvptx(dm.get_source(), f.plan["kernels"], str(tmp_path))
    else:
        host = HostKernels(dm.get_source(), f.plan["kernels"], str(tmp_path))
    drv = FakeDriver(host.kernels)
    prev = cuda_module.set_driver(drv)
    try:
        return [_run(f, [shape], [shape], tvm.cuda(0)) for shape in shapes], drv
    finally:
        cuda_module.set_driver(prev)


@pytest.mark.parametrize("target", ["cuda", "nvptx"])
def test_cuda_kernel_per_time_step(target, tmp_path):
    """One kernel for the init, one launched from a host loop per time step (scan.idx is a
    kernel argument); NVRTC/ptxas (or LLVM's NVPTX) accept them; run host-emulated."""
    s, args, ref = _gpu_cumsum()
    f = tvm.build(s, args, target)
    dm = f.imported_modules[0]
    if target == "cuda":
        src = dm.get_source()
        assert src.count("__global__") == 2 and "int32_t scan_idx)" in src
        assert dm.binaries["sm_80"].startswith(b"\x7fELF")
    steps = f.plan["functions"][0]["steps"]
    assert [("loop" in st, "launch" in st) for st in steps] == [(False, True), (True, False)]
    assert steps[1]["body"][0]["args"][-1] == {"scalar": "scan_idx", "dtype": "int32"}
    shapes = [(1, 1), (6, 33)]
    runs, drv = _run_emulated_cuda(f, tmp_path, shapes)
    for ((x,), (got,)) in runs:
        tvm.testing.assert_allclose(got, ref(x), rtol=1e-5)
    assert len(drv.launches) == sum(m for m, _ in shapes)  # 1 init + (m - 1) steps each


# ---- property ----------------------------------------------------------------------------------
_BUILT: dict[int, tuple] = {}


def _linear_recurrence(factor: int):
    """out[t] = out[t-1] * c[i] + x[t] with the update split by ``factor`` (built once)."""
    if factor not in _BUILT:
        m, n = te.var("m"), te.var("n")
        X = te.placeholder((m, n), name="X")
        C = te.placeholder((n,), name="C")
        state = te.placeholder((m, n), name="state")
        init = te.compute((1, n), lambda _, i: X[0, i], name="init")
        up = te.compute((m, n), lambda t, i: state[t - 1, i] * C[i] + X[t, i], name="up")
        res = te.scan(init, up, state, inputs=[X, C])
        s = te.create_schedule(res.op)
        xo, xi = s[up].split(up.op.axis[1], factor=factor)
        s[up].vectorize(xi)
        _BUILT[factor] = (tvm.build(s, [X, C, res], "llvm"),)
    return _BUILT[factor][0]


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 12), n=st.integers(1, 40), factor=st.sampled_from([1, 3, 8]),
       seed=st.integers(0, 2**31 - 1))
def test_property_linear_recurrence(m, n, factor, seed):
    f = _linear_recurrence(factor)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (m, n)).astype("float32")
    c = rng.uniform(-1, 1, (n,)).astype("float32")
    out = tvm.nd.array(np.zeros((m, n), "float32"))
    f(tvm.nd.array(x), tvm.nd.array(c), out)
    ref = x.astype("float64").copy()
    for t in range(1, m):
        ref[t] = ref[t - 1] * c + ref[t]
    tvm.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-5)
