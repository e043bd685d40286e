"""The graph executor's native runner (runtime/graph_executor/native_run.py): from a plan's
third run on (second here: ``native_after = 1``), its calls run as one JIT-compiled function. Same results as the Python loop
(bit for bit: the same kernels on the same memory), a failing kernel still named, symbolic
shapes (one runner per plan, shape variables passed as integers), the switch
(``TVMPY_GRAPH_NATIVE_RUN``), the argument words of its table, and the table walker itself on
C functions of every argument count."""

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
from tvmpy.runtime.graph_executor.native_run import (
    MAX_ARGS,
    arg_word,
    native_runner,
    supported,
    table_words,
)

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


def test_table_refuses_what_it_cannot_call():
    py = lambda *a: 0  # noqa: E731  (a Python callable: a GPU launch, a WebAssembly function)
    assert table_words([(py, (1, 2))]) is None
    assert native_runner([]) is None
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(0x1000)
    assert table_words([(f, ())]) is None  # argument count differs
    assert table_words([(f, ("not a pointer",))]) is None
    assert table_words([(f, (None,))]) == [0x1000, 1, 0]
    g = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_float)(0x1000)
    assert table_words([(g, (1.5,))]) is None  # a float travels in another register
    many = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * (MAX_ARGS + 1))(0x1000)
    assert table_words([(many, (0,) * (MAX_ARGS + 1))]) is None


def test_argument_words():
    assert arg_word(ctypes.c_void_p, None) == 0
    assert arg_word(ctypes.c_void_p, 4096) == 4096
    assert arg_word(ctypes.c_void_p, (1 << 64) - 64) == -64  # the same 64 bits
    assert arg_word(ctypes.c_void_p, -1) is None
    assert arg_word(ctypes.c_int32, -7) == -7
    assert arg_word(ctypes.c_int64, 2 ** 40 + 3) == 2 ** 40 + 3
    assert arg_word(ctypes.c_int8, 200) == -56  # C's int8_t value, sign-extended
    assert arg_word(ctypes.c_uint16, -1) == 65535  # zero-extended
    assert arg_word(ctypes.c_uint64, (1 << 64) - 1) == -1
    assert arg_word(ctypes.c_int32, 1.5) is None and arg_word(ctypes.c_int32, True) is None
    assert arg_word(ctypes.c_double, 0.1) is None and arg_word(ctypes.c_bool, 1) is None


@pytest.mark.skipif(not supported(), reason="the native runner is for 64-bit Linux")
@pytest.mark.parametrize("nargs", [0, 1, 3, 6, 7, 9, 17, MAX_ARGS])
def test_walker_passes_every_argument(nargs):
    """C functions of ``nargs`` arguments (past the 6 / 8 argument registers: stack slots) of
    mixed types record what they get; a nonzero return stops the walk at its call."""
    import os
    import shutil
    import subprocess
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")

    types = [("int64_t", ctypes.c_int64), ("int32_t", ctypes.c_int32),
             ("int8_t", ctypes.c_int8), ("uint16_t", ctypes.c_uint16), ("void*", ctypes.c_void_p)]
    params = [types[j % len(types)] for j in range(nargs)]
    body = "".join(f"  out[{j}] = (int64_t)(a{j});\n" if c != "void*" else
                   f"  out[{j}] = (int64_t)(intptr_t)(a{j});\n"
                   for j, (c, _) in enumerate(params))
    sig = ", ".join(f"{c} a{j}" for j, (c, _) in enumerate(params)) or "void"
    src = (f"#include <stdint.h>\nint64_t out[{max(nargs, 1)}];\nint32_t rc = 0;\n"
           f"int32_t f({sig}) {{\n{body}  return rc;\n}}\n")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "f.c"), "w") as fh:
            fh.write(src)
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", os.path.join(d, "f.so"),
                        os.path.join(d, "f.c")], check=True)
        lib = ctypes.CDLL(os.path.join(d, "f.so"))
    f = lib.f
    f.restype = ctypes.c_int32
    f.argtypes = [t for _, t in params]
    vals = []
    for j, (_, t) in enumerate(params):
        vals.append({ctypes.c_int64: -(3 ** 30) - j, ctypes.c_int32: -100000 - j,
                     ctypes.c_int8: -5 - j, ctypes.c_uint16: 60000 + j,
                     ctypes.c_void_p: 0x7F0000001000 + 64 * j}[t])
    want = [arg_word(t, v) for (_, t), v in zip(params, vals)]
    out = (ctypes.c_int64 * max(nargs, 1)).in_dll(lib, "out")
    runner = native_runner([(f, tuple(vals))] * 3)
    assert runner() == 0
    assert list(out)[:nargs] == want
    ctypes.c_int32.in_dll(lib, "rc").value = 9  # every call fails: the first is named
    assert runner() == 1


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
