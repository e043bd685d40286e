"""WebAssembly (``llvm -mtriple=wasm32-unknown-unknown [-mattr=+simd128]``): kernels and whole
models compiled to .wasm, run in-process by the wasmtime wheel (runtime/wasm.py), compared with
the host x86 build and numpy; export_library writes one .wasm that load_module runs; bad input
and failing kernels raise clear errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.autotvm.task import get_config
from tvmpy.autotvm.task import template as autotvm_template
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars
from tvmpy.runtime.wasm import METADATA_SECTION, PARAMS_SECTION, WasmModule, read_custom_sections
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc

ROOT = Path(__file__).resolve().parents[2]
WASM = "llvm -mtriple=wasm32-unknown-unknown"
SIMD = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"
RELAXED = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128,+relaxed-simd"  # fused madd
TARGETS = [WASM, SIMD]
rng = np.random.default_rng(2026)


def _both(s, args, target, name):
    """(wasm module, host module) of the same schedule."""
    return tvm.build(s, args, target=target, name=name), tvm.build(s, args, target="llvm", name=name)


def _run(mod, *arrays):
    outs = [a.copy() for a in arrays]
    mod(*outs)
    return outs


# ---- kernels --------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_elementwise_math_symbolic_length(target):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * 0.5 + te.tanh(A[i]) - te.sqrt(te.abs(A[i])),
                   name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    w, h = _both(s, [A, B], target, "emath")
    assert isinstance(w, WasmModule)
    for size in (1, 7, 1001):
        x = rng.uniform(-3, 3, size).astype("float32")
        want = np.exp(x) * 0.5 + np.tanh(x) - np.sqrt(np.abs(x))
        got = _run(w, x, np.zeros(size, "float32"))[1]
        host = _run(h, x, np.zeros(size, "float32"))[1]
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(got, host, rtol=2e-6, atol=2e-6)
    if target == SIMD:  # the vectorized loop really uses 128-bit SIMD
        assert "<4 x float>" in w.get_source("ll") or "<8 x float>" in w.get_source("ll")


@pytest.mark.parametrize("target", TARGETS)
def test_reductions(target):
    m, n = 37, 53
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    S_ = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="S")
    k2 = te.reduce_axis((0, n), name="k2")
    M = te.compute((m,), lambda i: te.max(A[i, k2], axis=k2), name="M")
    s = te.create_schedule([S_.op, M.op])
    s[S_].parallel(S_.op.axis[0])  # no threads in wasm: runs serially
    w, h = _both(s, [A, S_, M], target, "red")
    x = rng.standard_normal((m, n)).astype("float32")
    got = _run(w, x, np.zeros(m, "float32"), np.zeros(m, "float32"))
    host = _run(h, x, np.zeros(m, "float32"), np.zeros(m, "float32"))
    np.testing.assert_allclose(got[1], x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], x.max(1))
    np.testing.assert_allclose(got[1], host[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", [*TARGETS, RELAXED])
@pytest.mark.parametrize("shape", [(64, 64, 64), (37, 29, 53)])
def test_tiled_vectorized_matmul(target, shape):
    M, N, K = shape
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 16)
    (kk,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kk, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    w, h = _both(s, [A, B, C], target, "mm")
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    got = _run(w, a, b, np.zeros((M, N), "float32"))[2]
    host = _run(h, a, b, np.zeros((M, N), "float32"))[2]
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, host, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint32"])
def test_integer_types_and_scalars(dtype):
    n = 301
    A = te.placeholder((n,), name="A", dtype=dtype)
    c = te.var("c", dtype=dtype)
    acc = "int64" if dtype in ("int64", "uint32") else "int32"
    B = te.compute((n,), lambda i: (A[i].astype(acc) * 3 + c.astype(acc)) >> 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(xi)
    w, h = _both(s, [A, c, B], SIMD, "ints")
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(1 << 30)), min(info.max, 1 << 30)
    x = rng.integers(lo, hi, n, dtype=dtype, endpoint=True)
    cval = int(info.max) if dtype == "uint32" else 5  # > 2**31: passed as a wrapped i32
    out_w = np.zeros(n, acc)
    out_h = np.zeros(n, acc)
    w(x, cval, out_w)
    h(x, cval, out_h)
    np.testing.assert_array_equal(out_w, (x.astype(acc) * 3 + np.array(cval).astype(acc)) >> 1)
    np.testing.assert_array_equal(out_w, out_h)


def test_heap_allocated_intermediate():
    """An intermediate too big for the stack goes through aligned_alloc (32-bit size_t)."""
    n = 40000
    A = te.placeholder((n,), name="A")
    T = te.compute((n,), lambda i: A[i] * A[i], name="T")
    B = te.compute((n,), lambda i: T[n - 1 - i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    w = tvm.build(s, [A, B], target=WASM, name="heap")
    assert "aligned_alloc(i32" in w.get_source("ll")
    x = rng.standard_normal(n).astype("float32")
    got = _run(w, x, np.zeros(n, "float32"))[1]
    np.testing.assert_allclose(got, (x * x)[::-1] + 1.0, rtol=1e-6)


# ---- export / load --------------------------------------------------------------------------------
def _affine(target=SIMD):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return tvm.build(te.create_schedule(B.op), [A, B], target=target, name="affine")


def test_export_library_writes_wasm_and_loads(tmp_path):
    mod = _affine()
    path = tmp_path / "affine.wasm"
    mod.export_library(str(path))
    data = path.read_bytes()
    assert data[:4] == b"\0asm"
    meta = json.loads(bytes(read_custom_sections(data)[METADATA_SECTION]))
    assert [f["name"] for f in meta["functions"]] == ["affine"]
    loaded = tvm.runtime.load_module(str(path))
    assert isinstance(loaded, WasmModule)
    x = rng.standard_normal(13).astype("float32")
    y = tvm.nd.empty((13,), "float32")
    loaded["affine"](tvm.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), x * 2 + 1, rtol=1e-6)
    # any file name (autotvm's builder writes *.so): load_module goes by the magic number
    mod.export_library(str(tmp_path / "affine.so"))
    assert isinstance(tvm.runtime.load_module(str(tmp_path / "affine.so")), WasmModule)


def test_bad_arguments_raise():
    mod = _affine()
    with pytest.raises(ValueError, match="dtype float32"):
        mod(np.zeros(4, "float32"), np.zeros(4, "float64"))
    with pytest.raises(ValueError, match="n=4"):
        mod(np.zeros(4, "float32"), np.zeros(5, "float32"))
    with pytest.raises(TypeError, match="takes 2 argument"):
        mod(np.zeros(4, "float32"))
    with pytest.raises(TypeError, match="NDArray or numpy"):
        mod([1.0, 2.0], np.zeros(2, "float32"))
    with pytest.raises(AttributeError, match="no function 'nope'"):
        mod["nope"]
    # strided / read-only inputs are staged correctly; outputs come back
    x = rng.standard_normal(20).astype("float32")
    x.flags.writeable = False
    y = np.zeros(20, "float32")[::2]
    mod(x[::2], y)
    np.testing.assert_allclose(y, x[::2] * 2 + 1, rtol=1e-6)


def test_failing_assert_and_trap_raise():
    n = te.var("n")
    A2, O2 = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "O")
    i = E.Var("i")
    body = S.For(i, 0, n, S.ForKind.SERIAL, S.BufferStore(O2, A2[i] + E.FloatImm("float32", 1.0), [i]))
    func = PrimFunc([A2.data, O2.data], S.AssertStmt(n <= 10, "n must be at most 10", body),
                    {A2.data: A2, O2.data: O2}, {"global_symbol": "bounded", "tir.lowered": True})
    mod = tvm.build(func, target=WASM)
    out = np.zeros(5, "float32")
    mod(np.ones(5, "float32"), out)
    np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(RuntimeError, match="bounded failed.*n must be at most 10"):
        mod(np.ones(11, "float32"), np.zeros(11, "float32"))
    mod(np.ones(3, "float32"), out[:3])  # the error was consumed: later calls work

    # a gather with an index far outside linear memory: a WebAssembly trap, reported as such
    m = 4
    A = te.placeholder((m,), name="A")
    idx = te.placeholder((m,), name="idx", dtype="int32")
    G = te.compute((m,), lambda j: A[idx[j]], name="G")
    g = tvm.build(te.create_schedule(G.op), [A, idx, G], target=WASM, name="gather")
    a = rng.standard_normal(m).astype("float32")
    ok = np.array([3, 2, 1, 0], "int32")
    got = np.zeros(m, "float32")
    g(a, ok, got)
    np.testing.assert_array_equal(got, a[::-1])
    with pytest.raises(RuntimeError, match="gather: WebAssembly trap"):
        g(a, np.array([0, 1 << 28, 2, 3], "int32"), got)
    g(a, ok, got)  # the instance is still usable
    np.testing.assert_array_equal(got, a[::-1])


# ---- models ---------------------------------------------------------------------------------------
def _dense_layers(sizes):
    """A DQN-style MLP: dense + bias + relu layers, Q-values out."""
    x = relay.var("obs", shape=(1, sizes[0]), dtype="float32")
    h, params = x, {}
    for li, (d_in, d) in enumerate(zip(sizes, sizes[1:])):
        w, b = relay.var(f"w{li}", shape=(d, d_in)), relay.var(f"b{li}", shape=(d,))
        params[f"w{li}"] = (rng.standard_normal((d, d_in)) / np.sqrt(d_in)).astype("float32")
        params[f"b{li}"] = (0.1 * rng.standard_normal(d)).astype("float32")
        h = relay.nn.bias_add(relay.nn.dense(h, w), b)
        if li < len(sizes) - 2:
            h = relay.nn.relu(h)
    return tvm.IRModule.from_expr(relay.Function(free_vars(h), h)), params


def _mlp_numpy(params, x, layers):
    h = x
    for li in range(layers):
        h = h @ params[f"w{li}"].T + params[f"b{li}"]
        if li < layers - 1:
            h = np.maximum(h, 0)
    return h


def _small_cnn():
    x = relay.var("data", shape=(1, 3, 20, 20))
    params = {}

    def conv(h, name, cin, cout):
        w, b = relay.var(name, shape=(cout, cin, 3, 3)), relay.var(name + "_b", shape=(cout,))
        params[name] = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype("float32")
        params[name + "_b"] = (0.1 * rng.standard_normal(cout)).astype("float32")
        return relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(h, w, padding=(1, 1)), b))

    h = relay.nn.max_pool2d(conv(x, "c1", 3, 8), (2, 2), (2, 2))
    h = relay.nn.max_pool2d(conv(h, "c2", 8, 12), (2, 2), (2, 2))
    h = relay.nn.batch_flatten(h)
    params["fc"] = (rng.standard_normal((5, 12 * 5 * 5)) / 17).astype("float32")
    h = relay.nn.dense(h, relay.var("fc", shape=(5, 12 * 5 * 5)))
    return tvm.IRModule.from_expr(relay.Function(free_vars(h), h)), params


def _cnn_numpy(params, x):
    def conv(h, name):
        w, b = params[name], params[name + "_b"]
        hp = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
        H, W = h.shape[2:]
        win = np.lib.stride_tricks.sliding_window_view(hp, (3, 3), axis=(2, 3))[:, :, :H, :W]
        return np.maximum(np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None], 0)

    def pool(h):
        n, c, H, W = h.shape
        return h[:, :, :H // 2 * 2, :W // 2 * 2].reshape(n, c, H // 2, 2, W // 2, 2).max((3, 5))

    h = pool(conv(pool(conv(x, "c1")), "c2"))
    return h.reshape(1, -1) @ params["fc"].T


def _graph_run(lib, inputs):
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(**inputs)
    m.run()
    return m, m.get_output(0).numpy()


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_models_match_host_and_numpy(model, tmp_path):
    if model == "mlp":
        sizes = (24, 64, 64, 6)
        mod, params = _dense_layers(sizes)
        inputs = {"obs": rng.standard_normal((1, sizes[0])).astype("float32")}
        want = _mlp_numpy(params, inputs["obs"], len(sizes) - 1)
    else:
        mod, params = _small_cnn()
        inputs = {"data": rng.standard_normal((1, 3, 20, 20)).astype("float32")}
        want = _cnn_numpy(params, inputs["data"])
    with tvm.transform.PassContext(opt_level=3):
        host = relay.build(mod, target="llvm", params=params)
        wasm = relay.build(mod, target=SIMD, params=params)
    _, host_out = _graph_run(host, inputs)
    path = tmp_path / f"{model}.wasm"
    wasm.export_library(str(path))
    sections = read_custom_sections(path.read_bytes())
    assert PARAMS_SECTION in sections  # one deployable file: code, graph, parameters
    loaded = tvm.runtime.load_module(str(path))
    for lib in (wasm, loaded):
        m, out = _graph_run(lib, inputs)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        np.testing.assert_allclose(out, host_out, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        # the activations live in the module's linear memory: the output is a view of it
        inst = lib.get_lib().instance
        assert inst.offset_of(m.get_output(0).data_ptr, out.nbytes) is not None
    name = next(iter(inputs))
    with pytest.raises(ValueError):
        m.set_input(name, np.zeros((2, 2), "float32"))
    m.set_input(**inputs)  # a second run on new inputs gives new outputs
    x2 = {name: rng.standard_normal(inputs[name].shape).astype("float32")}
    m.set_input(**x2)
    m.run()
    _, host2 = _graph_run(host, x2)
    np.testing.assert_allclose(m.get_output(0).numpy(), host2, rtol=1e-5,
                               atol=1e-5 * np.abs(host2).max())


def test_wasm_loads_with_runtime_only(tmp_path):
    """The .wasm loads and runs in a process with the runtime, numpy and wasmtime only."""
    mod, params = _dense_layers((8, 16, 3))
    with tvm.transform.PassContext(opt_level=3):
        tvm_lib = relay.build(mod, target=WASM, params=params)
    tvm_lib.export_library(str(tmp_path / "net.wasm"))
    x = rng.standard_normal((1, 8)).astype("float32")
    np.savez(tmp_path / "io.npz", x=x, want=_mlp_numpy(params, x, 2))
    code = r"""
import json, sys
for blocked in ("llvmlite", "onnx", "onnxruntime", "torch", "ziglang"):
    sys.modules[blocked] = None
import numpy as np
import tvmpy.runtime as runtime
from tvmpy.contrib import graph_executor
io = np.load(sys.argv[1] + "/io.npz")
m = graph_executor.GraphModule(runtime.load_module(sys.argv[1] + "/net.wasm")["default"](runtime.cpu(0)))
m.set_input("obs", io["x"]); m.run()
np.testing.assert_allclose(m.get_output(0).numpy(), io["want"], rtol=1e-5, atol=1e-5)
print(json.dumps(sorted(k for k in sys.modules if k.startswith("tvmpy."))))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [k for k in loaded if k.split(".")[1] in ("relay", "codegen", "te", "tir", "topi")]


def test_cli_compile_and_run_wasm(tmp_path):
    """``tvmpy compile m.onnx --target "llvm -mtriple=wasm32..."`` writes m.wasm; ``tvmpy run``
    runs it; the outputs equal the host build's."""
    pytest.importorskip("onnx")
    import onnx

    from tests.e2e.test_cli import _tiny

    onnx.save(_tiny(), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 3, 8, 8)).astype("float32"))
    np.save(tmp_path / "y.npy", rng.standard_normal((1, 5)).astype("float32"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def tvmpy(*args):
        proc = subprocess.run([sys.executable, "-m", "tvmpy", *map(str, args)], capture_output=True,
                              text=True, timeout=300, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "m.wasm" in tvmpy("compile", "m.onnx", "--target", SIMD)
    assert (tmp_path / "m.wasm").read_bytes()[:4] == b"\0asm"
    tvmpy("compile", "m.onnx", "-o", "m.so")
    for lib in ("m.wasm", "m.so"):
        tvmpy("run", lib, "--input", "x=x.npy", "--input", "y=y.npy", "--output", lib + ".npz")
    got = np.load(tmp_path / "m.wasm.npz")["output0"]
    want = np.load(tmp_path / "m.so.npz")["output0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_checked_call_path_and_time_evaluator():
    """Calls also work through wasmtime-py's checked ``Func.__call__`` (used when its unchecked
    entry point is missing), traps included; time_evaluator times a wasm kernel."""
    mod = _affine()
    x = rng.standard_normal(9).astype("float32")
    y = np.zeros(9, "float32")
    f = mod["affine"]
    f._cfunc._unchecked = None
    f(x, y)
    np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
    res = mod.time_evaluator("affine", tvm.cpu(0), number=3, repeat=2)(x, y)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)

    m = 4
    A = te.placeholder((m,), name="A")
    idx = te.placeholder((m,), name="idx", dtype="int32")
    G = te.compute((m,), lambda j: A[idx[j]], name="G")
    g = tvm.build(te.create_schedule(G.op), [A, idx, G], target=WASM, name="gather2")
    g["gather2"]._cfunc._unchecked = None
    with pytest.raises(RuntimeError, match="gather2: WebAssembly trap"):
        g(np.zeros(m, "float32"), np.array([1 << 28, 0, 0, 0], "int32"), np.zeros(m, "float32"))


NODE_DRIVER = r"""
import { loadTvmpyWasm } from "%(loader)s";
import { readFileSync, writeFileSync } from "node:fs";
const [, , dir] = process.argv;
const mod = await loadTvmpyWasm(readFileSync(dir + "/net.wasm"));
const g = mod.createGraphExecutor();
const x = readFileSync(dir + "/x.bin");
g.setInput("data", new Float32Array(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength)));
g.run();
writeFileSync(dir + "/y.bin", Buffer.from(g.getOutput(0).buffer));
const k = await loadTvmpyWasm(readFileSync(dir + "/affine.wasm"));
const a = new Float32Array([1, 2, 3, 4, 5]), b = new Float32Array(5);
k.call("affine", a, b);
writeFileSync(dir + "/b.json", JSON.stringify(Array.from(b)));
try { k.call("affine", new Float64Array(2), b); } catch (e) { console.log("refused:", e.message); }
"""


def test_node_runs_the_same_wasm(tmp_path):
    """web/tvmpy_wasm.mjs runs the exported CNN and a kernel under node; the results equal
    wasmtime's bit for bit. (Node is optional for the issue: without it this test skips.)"""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs)")
    mod, params = _small_cnn()
    with tvm.transform.PassContext(opt_level=3):
        relay.build(mod, target=SIMD, params=params).export_library(str(tmp_path / "net.wasm"))
    _affine().export_library(str(tmp_path / "affine.wasm"))
    x = rng.standard_normal((1, 3, 20, 20)).astype("float32")
    x.tofile(tmp_path / "x.bin")
    driver = tmp_path / "driver.mjs"
    driver.write_text(NODE_DRIVER % {"loader": (ROOT / "web" / "tvmpy_wasm.mjs").as_uri()})
    proc = subprocess.run([node, str(driver), str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused: affine: argument A must be a Float32Array" in proc.stdout
    _, want = _graph_run(tvm.runtime.load_module(str(tmp_path / "net.wasm")), {"data": x})
    got = np.fromfile(tmp_path / "y.bin", "float32").reshape(want.shape)
    np.testing.assert_array_equal(got, want)
    b = json.loads((tmp_path / "b.json").read_text())
    np.testing.assert_allclose(b, np.arange(1, 6) * 2 + 1)


def test_calls_from_several_threads():
    """One module called from 4 threads at once (staged numpy arguments): every result is
    right (calls into one wasmtime store are serialized)."""
    from concurrent.futures import ThreadPoolExecutor

    mod = _affine()

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(50):
            x = r.standard_normal(int(r.integers(1, 300))).astype("float32")
            y = np.zeros_like(x)
            mod(x, y)
            if not np.allclose(y, x * 2 + 1, rtol=1e-6):
                return False
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))


def test_bad_wasm_files_raise(tmp_path):
    good = tmp_path / "a.wasm"
    _affine().export_library(str(good))
    data = good.read_bytes()
    bare = tmp_path / "bare.wasm"
    bare.write_bytes(b"\0asm\x01\0\0\0")
    with pytest.raises(ValueError, match="not a tvmpy one"):
        tvm.runtime.load_module(str(bare))
    cut = tmp_path / "cut.wasm"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match="truncated"):
        tvm.runtime.load_module(str(cut))
    # the metadata names a function the code does not export
    meta = json.loads(bytes(read_custom_sections(data)[METADATA_SECTION]))
    meta["functions"][0]["name"] = "ghost"
    from tvmpy.runtime.wasm import custom_section

    ghost = tmp_path / "ghost.wasm"
    ghost.write_bytes(data + custom_section(METADATA_SECTION, json.dumps(meta).encode()))
    with pytest.raises(RuntimeError, match="ghost.*does not export"):
        tvm.runtime.load_module(str(ghost))["ghost"]


def test_reexport_of_loaded_modules(tmp_path):
    """A loaded .wasm (kernel or model) exports again to an equivalent file, without piling up
    metadata sections."""
    k1 = tmp_path / "k1.wasm"
    _affine().export_library(str(k1))
    k2 = tmp_path / "k2.wasm"
    tvm.runtime.load_module(str(k1)).export_library(str(k2))
    assert k2.read_bytes() == k1.read_bytes()
    mod, params = _dense_layers((6, 5, 2))
    with tvm.transform.PassContext(opt_level=3):
        relay.build(mod, target=WASM, params=params).export_library(str(tmp_path / "n1.wasm"))
    tvm.runtime.load_module(str(tmp_path / "n1.wasm")).export_library(str(tmp_path / "n2.wasm"))
    x = {"obs": rng.standard_normal((1, 6)).astype("float32")}
    _, y = _graph_run(tvm.runtime.load_module(str(tmp_path / "n2.wasm")), x)
    np.testing.assert_allclose(y, _mlp_numpy(params, x["obs"], 2), rtol=1e-5, atol=1e-6)


def test_memory_limits_raise():
    mod = _affine()
    inst = mod.instance
    with pytest.raises(MemoryError, match="32-bit WebAssembly memory"):
        inst.alloc(3 << 30)
    with pytest.raises(IndexError, match="outside WebAssembly memory"):
        inst.view(inst.size - 4, 8)
    base = inst.base
    off = inst.alloc(64 << 20)  # grows linear memory; numpy views stay valid (no move)
    assert inst.base == base and inst.offset_of(base + off, 64 << 20) == off
    inst.free(off)


def test_contrib_emcc_create_tvmjs_wasm(tmp_path):
    """TVM's fcompile for wasm: accepted by export_library; links saved objects directly."""
    from tvmpy.contrib import emcc
    from tvmpy.runtime.wasm import WasmInstance

    mod = _affine()
    mod.export_library(str(tmp_path / "a.wasm"), fcompile=emcc.create_tvmjs_wasm)
    assert isinstance(tvm.runtime.load_module(str(tmp_path / "a.wasm")), WasmModule)
    mod.save(str(tmp_path / "a.o"))
    emcc.create_tvmjs_wasm(str(tmp_path / "b.wasm"), [str(tmp_path / "a.o")])
    inst = WasmInstance((tmp_path / "b.wasm").read_bytes())
    assert inst.export("affine") is not None
    with pytest.raises(ValueError, match="not a wasm32 object"):
        emcc.create_tvmjs_wasm(str(tmp_path / "c.wasm"), [__file__])


@autotvm_template("test_wasm/matmul")
def _wasm_matmul(n, l, m):  # noqa: E741
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    cfg = get_config()
    y, x = s[C].op.axis
    cfg.define_split("tile_x", x, num_outputs=2)
    cfg.define_split("tile_y", y, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, yi, xi)
    s[C].vectorize(xi)
    return s, [A, B, C]


def test_autotvm_tunes_a_wasm_task():
    """AutoTVM's LocalBuilder builds wasm candidates and LocalRunner times them in wasmtime,
    checking each result against the first one's."""
    from tvmpy import autotvm
    from tvmpy.autotvm.measure import LocalBuilder, LocalRunner, measure_option
    from tvmpy.autotvm.task import create

    task = create("test_wasm/matmul", (24, 20, 16), target=SIMD)
    results = []
    autotvm.tuner.RandomTuner(task).tune(
        n_trial=4, measure_option=measure_option(
            builder=LocalBuilder(), runner=LocalRunner(number=2, check_correctness=True)),
        callbacks=[lambda tuner, inputs, res: results.extend(res)])
    assert len(results) == 4
    assert all(r.error_no == 0 and r.costs[0] > 0 for r in results), results


def test_unsupported_wasm_targets_raise():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(ValueError, match="only wasm32"):
        tvm.build(te.create_schedule(B.op), [A, B], target="llvm -mtriple=wasm64-unknown-unknown")
