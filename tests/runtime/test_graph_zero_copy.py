"""Inputs bound without a copy (GraphExecutor ``run(**inputs)`` / ``infer`` with
``zero_copy_inputs``, and ``set_input_zero_copy``): a suitable numpy array (the input's dtype and
shape, C-contiguous, writable, 64-byte aligned, outside the executor's storage) is read by the
kernels in place, both by the Python loop and by the native runner; anything else is copied
(run/infer) or refused naming why (set_input_zero_copy). Same results as a copy on random inputs,
the caller's array never written, inputs whose storage the plan shares (an output, a reshape)
always copied, symbolic shapes and threads unchanged."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars
from tvmpy.runtime.ndarray import ALIGNMENT, aligned_empty

rng = np.random.default_rng(29)
SHAPE = (2, 3, 13, 13)  # awkward sizes: primes, not multiples of any vector width


def _rand(shape, dtype="float32"):
    """Random values, |x| in [0.25, 2], both signs (never zero)."""
    return (rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dtype)


def _aligned(values):
    a = aligned_empty(values.shape, values.dtype)
    a[...] = values
    return a


def _conv_model():
    x = relay.var("x", shape=SHAPE)
    w = relay.var("w", shape=(5, 3, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, kernel_size=(3, 3)))
    y = relay.sum(y, axis=1, keepdims=True) * relay.sigmoid(y)
    return tvm.IRModule.from_expr(relay.Function(free_vars(y), y)), {"w": _rand((5, 3, 3, 3))}


def _elementwise_model():
    """Elementwise ops of the input's own shape: storage reuse of the input would be tempting."""
    x = relay.var("x", shape=SHAPE)
    y = relay.exp(relay.negative(relay.abs(x)))
    y = relay.nn.relu(y * x + x)
    return tvm.IRModule.from_expr(relay.Function([x], y)), {}


def _build(model):
    mod, params = model()
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(mod, target="llvm", params=params)


@pytest.fixture(scope="module")
def conv_lib():
    return _build(_conv_model)


@pytest.fixture(scope="module")
def elementwise_lib():
    return _build(_elementwise_model)


def _executor(lib, native_after, zero_copy=True):
    """An executor with binding in run(**inputs) / infer turned on (it is opt-in) where the
    graph allows it."""
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.module.native_after = native_after
    if zero_copy and m.module._zc_eids:
        m.module.zero_copy_inputs = True
    return m


def _copied(m, x):
    """The outputs with the input copied (set_input), as before zero-copy binding existed."""
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("native_after", [None, 1])
@pytest.mark.parametrize("which", ["conv", "elementwise"])
def test_bound_input_same_results_as_copied(conv_lib, elementwise_lib, native_after, which):
    lib = conv_lib if which == "conv" else elementwise_lib
    assert not _executor(lib, native_after, zero_copy=False).module.zero_copy_inputs  # opt-in
    m = _executor(lib, native_after)
    ex = m.module
    for _ in range(4):  # several runs: the native runner is built on the way
        x = _aligned(_rand(SHAPE))
        keep = x.copy()
        want = _copied(m, keep.copy())
        got = ex.infer(x=x)[0]
        assert ex._active.patched, "the aligned array was not bound"
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(x, keep)  # the caller's array is never written
        m.run(x=x)
        np.testing.assert_array_equal(m.get_output(0).numpy(), want)
        np.testing.assert_array_equal(m.get_input("x").numpy(), keep)  # the bound array
        np.testing.assert_array_equal(x, keep)
    if native_after is not None:
        assert ex._active.native
    # set_input copies again: the calls point back at the executor's storage
    x = _rand(SHAPE)
    ref = _copied(_executor(lib, None), x)
    np.testing.assert_array_equal(_copied(m, x), ref)
    assert not ex._active.patched and not ex._bound


def test_toggle_and_environment(conv_lib, monkeypatch):
    m = _executor(conv_lib, 1)
    x = _aligned(_rand(SHAPE))
    on = [m.module.infer(x=x)[0] for _ in range(3)]
    m.module.zero_copy_inputs = False
    off = [m.module.infer(x=x)[0] for _ in range(3)]
    assert not m.module._bound and not m.module._active.patched
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setenv("TVMPY_GRAPH_ZERO_COPY", "0")
    assert not _executor(conv_lib, 1, zero_copy=False).module.zero_copy_inputs
    monkeypatch.delenv("TVMPY_GRAPH_ZERO_COPY")
    assert not _executor(conv_lib, 1, zero_copy=False).module.zero_copy_inputs
    monkeypatch.setenv("TVMPY_GRAPH_ZERO_COPY", "1")
    assert _executor(conv_lib, 1, zero_copy=False).module.zero_copy_inputs


def _unsuitable():
    """Arrays of the input's values the kernels cannot read in place: (what, array)."""
    v = _rand(SHAPE)
    raw = aligned_empty((v.nbytes + ALIGNMENT,), np.uint8)
    misaligned = np.ndarray(SHAPE, np.float32, buffer=raw, offset=4)
    misaligned[...] = v
    wide = aligned_empty((2, 3, 13, 26), np.float32)
    wide[..., ::2] = v
    readonly = _aligned(v)
    readonly.flags.writeable = False
    return v, [("not a multiple of", misaligned), ("not C-contiguous", wide[..., ::2]),
               ("read-only", readonly), ("expected dtype", v.astype("float64"))]


@pytest.mark.parametrize("native_after", [None, 1])
def test_unsuitable_arrays_are_copied(conv_lib, native_after):
    m = _executor(conv_lib, native_after)
    ex = m.module
    v, cases = _unsuitable()
    want = _copied(_executor(conv_lib, None), v)
    for _, arr in cases * 2:
        keep = np.array(arr)
        np.testing.assert_allclose(ex.infer(x=arr)[0], want, rtol=1e-6, atol=1e-6)
        # copied (a converted array, the executor's own, may be bound: no one else has it)
        assert not any(np.shares_memory(b, arr) for b, _ in ex._bound.values())
        np.testing.assert_array_equal(arr, keep)


def test_set_input_zero_copy(conv_lib):
    m = _executor(conv_lib, 1)
    ex = m.module
    v, cases = _unsuitable()
    for why, arr in cases:
        with pytest.raises(ValueError, match=why):
            m.set_input_zero_copy("x", arr)
    with pytest.raises(ValueError, match=r"expected shape \(2, 3, 13, 13\), got \(2, 3, 13, 12\)"):
        m.set_input_zero_copy("x", aligned_empty((2, 3, 13, 12), np.float32))
    with pytest.raises(ValueError, match=r"set_input\('x'\): expected shape"):
        m.run(x=aligned_empty((2, 3, 13, 12), np.float32))  # the error of before
    own = ex.get_input("x")._arr  # the executor's own storage
    with pytest.raises(ValueError, match="executor's own storage"):
        m.set_input_zero_copy("x", own)
    # an NDArray (tvm.nd.array allocates aligned) is bound; later runs read it as it is then
    nd = tvm.nd.array(v)
    m.set_input_zero_copy("x", nd)
    want = _copied(_executor(conv_lib, None), v)
    for _ in range(3):
        m.run()
        np.testing.assert_array_equal(m.get_output(0).numpy(), want)
    v2 = _rand(SHAPE)
    nd.copyfrom(v2)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), _copied(_executor(conv_lib, None), v2))


def test_shared_storage_inputs_always_copied():
    """An input that is an output, or shares its storage with a reshape of it (a __nop), is
    never bound: a run would write into the caller's array, or an output alias it."""
    x = relay.var("x", shape=SHAPE)
    y = relay.var("y", shape=SHAPE)
    out = relay.Tuple([x, relay.reshape(y, (6, 169)), relay.exp(y)])
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x, y], out)), target="llvm")
    m = _executor(lib, 1)
    ex = m.module
    bound_names = {ex._input_names[ex._input_eids.index(e)] for e in ex._zc_eids}
    assert "x" not in bound_names
    for _ in range(3):
        a, b = _aligned(_rand(SHAPE)), _aligned(_rand(SHAPE))
        ka, kb = a.copy(), b.copy()
        got = ex.infer(x=a, y=b)
        np.testing.assert_array_equal(got[0], ka)
        np.testing.assert_array_equal(got[1], kb.reshape(6, 169))
        np.testing.assert_allclose(got[2], np.exp(kb), rtol=1e-6)
        np.testing.assert_array_equal(a, ka)
        np.testing.assert_array_equal(b, kb)
    if "y" in bound_names:  # (its storage its own: bound; the reshape copied it out)
        assert ex._bound
    with pytest.raises(ValueError, match="always copied"):
        m.set_input_zero_copy("x", _aligned(_rand(SHAPE)))


def test_symbolic_shapes_copy():
    x = relay.var("x", shape=(relay.Any(), 7))
    y = relay.exp(relay.negative(relay.abs(x))) * x
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target="llvm")
    m = _executor(lib, 1)
    assert not m.module.zero_copy_inputs
    for n in (1, 5, 1, 11):
        a = _aligned(_rand((n, 7)))
        np.testing.assert_allclose(m.module.infer(x=a)[0], np.exp(-np.abs(a)) * a, rtol=1e-6)
    with pytest.raises(ValueError, match="always copied"):
        m.set_input_zero_copy("x", _aligned(_rand((3, 7))))


def test_threads_infer_bound(conv_lib):
    """infer() from several threads at once with aligned arrays (each bound for its call):
    every thread gets its own input's result."""
    m = _executor(conv_lib, 1)
    xs = [_aligned(_rand(SHAPE)) for _ in range(4)]
    want = [_copied(_executor(conv_lib, None), x.copy()) for x in xs]
    errors: list[BaseException] = []

    def work(k):
        try:
            for _ in range(15):
                np.testing.assert_array_equal(m.module.infer(x=xs[k])[0], want[k])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]



def test_input_a_kernel_writes_is_copied(conv_lib):
    """An input whose kernel's signature says it writes it is never bound (no such kernel is
    generated today: the flag is set by hand on the loaded function)."""
    from tvmpy.runtime.graph_executor.executor import GraphExecutor

    ex = _executor(conv_lib, 1).module
    x_eid = ex._input_eids[ex._input_names.index("x")]
    node = next(n for n in ex._call_nodes if x_eid in n.inputs)
    func = ex.lib.get_function(node.func_name)
    p = next(p for p in func._bufs if p.index == node.inputs.index(x_eid))
    assert not p.written
    p.written = True
    try:
        fresh = GraphExecutor(conv_lib.get_graph_json(), ex.lib)
        assert x_eid not in fresh._zc_eids
        with pytest.raises(ValueError, match="always copied"):
            fresh.set_input_zero_copy("x", _aligned(_rand(SHAPE)))
    finally:
        p.written = False
