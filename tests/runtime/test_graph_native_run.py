"""The graph executor's native runner (runtime/graph_executor/native_run.py): from a plan's
third run on (second here: ``native_after = 1``), its calls run as one JIT-compiled function. Same results as the Python loop
(bit for bit: the same kernels on the same memory), a failing kernel still named, symbolic
shapes (one runner per plan, shape variables passed as integers), the switch
(``TVMPY_GRAPH_NATIVE_RUN``), and the argument constants it bakes in."""

from __future__ import annotations

import ctypes
import json
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars
from tvmpy.runtime.graph_executor import executor as executor_mod
from tvmpy.runtime.graph_executor.native_run import _arg_ir, native_runner, plan_ir

rng = np.random.default_rng(11)


def _rand(shape):
    """Random float32, |x| in [0.25, 2], both signs (never zero)."""
    return (rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype("float32")


C_IN, C_OUT, HW = 3, 5, 13  # awkward sizes: primes, not multiples of any vector width


def _model(batch):
    x = relay.var("x", shape=(batch, C_IN, HW, HW))
    w = relay.var("w", shape=(C_OUT, C_IN, 3, 3))
    b = relay.var("b", shape=(C_OUT,))
    d = relay.var("d", shape=(7, C_OUT * (HW - 2) * (HW - 2)))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, kernel_size=(3, 3)), b))
    y = relay.nn.dense(relay.nn.batch_flatten(y), d)
    y = relay.sigmoid(y) * relay.sum(y, axis=1, keepdims=True)
    return tvm.IRModule.from_expr(relay.Function(free_vars(y), y))


PARAMS = {"w": _rand((C_OUT, C_IN, 3, 3)) / 4, "b": _rand((C_OUT,)),
          "d": _rand((7, C_OUT * (HW - 2) ** 2)) / 16}


def _build(batch):
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(_model(batch), target="llvm", params=PARAMS)


@pytest.fixture(scope="module")
def static_lib():
    return _build(2)


@pytest.fixture(scope="module")
def dynamic_lib():
    return _build(relay.Any())


def _executor(lib, native_after):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.module.native_after = native_after
    return m


def _outputs(m, x):
    m.set_input("x", x)
    m.run()
    return m.get_output(0).numpy()


def test_native_runner_matches_the_python_loop(static_lib):
    native, loop = _executor(static_lib, 1), _executor(static_lib, None)
    xs = [_rand((2, C_IN, HW, HW)) for _ in range(5)]
    for x in xs:
        want = _outputs(loop, x)
        np.testing.assert_array_equal(_outputs(native, x), want)
    plan = native.module._active
    assert plan.native and plan.native.ncalls == len(plan.calls) > 1
    assert loop.module._active.native is None
    # the reference: numpy in float64
    x = xs[-1].astype("float64")
    pad = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))
    conv = np.einsum("nchwij,ocij->nohw", pad, PARAMS["w"].astype("float64"))
    y = np.maximum(conv + PARAMS["b"][None, :, None, None], 0).reshape(2, -1) @ PARAMS["d"].T
    want = 1 / (1 + np.exp(-y)) * y.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(_outputs(native, xs[-1]), want, rtol=1e-4, atol=1e-4)


def test_native_runner_per_plan_with_symbolic_shapes(dynamic_lib, static_lib):
    native, loop = _executor(dynamic_lib, 1), _executor(dynamic_lib, None)
    for batch in (1, 3, 1, 2, 3, 3, 1):  # plans made, reused, each compiled on its second run
        x = _rand((batch, C_IN, HW, HW))
        np.testing.assert_array_equal(_outputs(native, x), _outputs(loop, x))
    plans = native.module._plans
    assert all(p.native for key, p in plans.items() if key != (2,))
    assert len(plans) == 3


def test_default_builds_on_the_third_run(static_lib, monkeypatch):
    monkeypatch.delenv("TVMPY_GRAPH_NATIVE_RUN", raising=False)
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu(0)))
    assert m.module.native_after == 2
    x = _rand((2, C_IN, HW, HW))
    want = _outputs(m, x)
    assert m.module._active.native is None
    _outputs(m, x)
    assert m.module._active.native is None
    np.testing.assert_array_equal(_outputs(m, x), want)
    assert m.module._active.native


def test_native_runner_off(static_lib, monkeypatch):
    monkeypatch.setenv("TVMPY_GRAPH_NATIVE_RUN", "0")
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu(0)))
    assert m.module.native_after is None
    for _ in range(3):
        _outputs(m, _rand((2, C_IN, HW, HW)))
    assert m.module._active.native is None
    monkeypatch.setenv("TVMPY_GRAPH_NATIVE_RUN", "3")
    assert graph_executor.GraphModule(static_lib["default"](tvm.cpu(0))).module.native_after == 3
    monkeypatch.setenv("TVMPY_GRAPH_NATIVE_RUN", "yes")
    with pytest.raises(ValueError, match="TVMPY_GRAPH_NATIVE_RUN must be an integer"):
        executor_mod._native_after()


def test_failing_kernel_is_named_by_the_native_runner():
    from tvmpy.codegen.abi import signature
    from tvmpy.runtime.module import Module

    n, m_ = 5, 7
    src = r"""
    #include <stdint.h>
    extern const char* __tvmpy_last_error;
    int32_t copy(float* A, float* B) { for (int i = 0; i < 35; ++i) B[i] = A[i] * 2.0f; return 0; }
    int32_t boom(float* A, float* B) {
      if (A[0] > 100.0f) { __tvmpy_last_error = "Assert fail: boom"; return -1; }
      for (int i = 0; i < 35; ++i) B[i] = A[i] + 1.0f;
      return 0;
    }
    """
    A = te.placeholder((n, m_), name="A")
    B = te.compute((n, m_), lambda i, j: A[i, j], name="B")
    sigs = [signature(tvm.lower(te.create_schedule(B.op), [A, B], name=nm))
            for nm in ("copy", "boom")]
    lib = Module.from_c_source(textwrap.dedent(src), sigs)
    nodes = [{"op": "null", "name": "x", "inputs": []}]
    for k, (fn, name) in enumerate([("copy", "double"), ("boom", "explode"), ("copy", "again")]):
        nodes.append({"op": "tvm_op", "name": name, "inputs": [[k, 0, 0]],
                      "attrs": {"func_name": fn, "num_inputs": "1", "num_outputs": "1"}})
    graph = {"nodes": nodes, "arg_nodes": [0], "heads": [[3, 0, 0]],
             "node_row_ptr": [0, 1, 2, 3, 4],
             "attrs": {"dltype": ["list_str", ["float32"] * 4],
                       "shape": ["list_shape", [[n, m_]] * 4]}}
    ex = graph_executor.create(json.dumps(graph), lib)
    ex.module.native_after = 1
    for _ in range(3):
        x = _rand((n, m_))
        ex.set_input("x", x)
        ex.run()
        np.testing.assert_allclose(ex.get_output(0).numpy(), (x * 2 + 1) * 2, rtol=1e-6)
        big = x.copy()
        big[0, 0] = 60.0  # doubled: 120 > 100, the second node fails
        ex.set_input("x", big)
        with pytest.raises(RuntimeError, match=r"graph node 2 \('explode'\): .*boom"):
            ex.run()
    assert ex.module._active.native


def test_plan_ir_refuses_what_it_cannot_call():
    py = lambda *a: 0  # noqa: E731  (a Python callable: a GPU launch, a WebAssembly function)
    assert plan_ir([(py, (1, 2))]) is None
    assert native_runner([]) is None
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(0x1000)
    assert plan_ir([(f, ())]) is None  # argument count differs
    assert plan_ir([(f, ("not a pointer",))]) is None
    assert plan_ir([(f, (None,))]) is not None


def test_argument_constants():
    assert _arg_ir(ctypes.c_void_p, None) == "ptr null"
    assert _arg_ir(ctypes.c_void_p, 4096) == "ptr inttoptr (i64 4096 to ptr)"
    assert _arg_ir(ctypes.c_int32, -7) == "i32 -7"
    assert _arg_ir(ctypes.c_int64, 2 ** 40 + 3) == f"i64 {2 ** 40 + 3}"
    assert _arg_ir(ctypes.c_int8, -3) == "i8 signext -3"
    assert _arg_ir(ctypes.c_uint16, 65535) == "i16 zeroext -1"
    assert _arg_ir(ctypes.c_int32, 1.5) is None and _arg_ir(ctypes.c_int32, True) is None
    assert _arg_ir(ctypes.c_double, 0.1) == "double 0x3FB999999999999A"
    # a float constant is the double equal to the nearest float32
    assert _arg_ir(ctypes.c_float, 0.1) == "float 0x3FB99999A0000000"
    assert _arg_ir(ctypes.c_float, 1e300) is None
    assert _arg_ir(ctypes.c_bool, 1) is None  # not passed natively: the loop runs the plan


def test_runners_built_in_several_threads_at_once(static_lib):
    import threading

    xs = [_rand((2, C_IN, HW, HW)) for _ in range(4)]
    want = [_outputs(_executor(static_lib, None), x) for x in xs]
    errors: list[str] = []

    def work(k):
        m = _executor(static_lib, 1)
        for _ in range(6):
            got = _outputs(m, xs[k])
            if not np.array_equal(got, want[k]):
                errors.append(f"thread {k}: wrong result")
        if not m.module._active.native:
            errors.append(f"thread {k}: no native runner")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
