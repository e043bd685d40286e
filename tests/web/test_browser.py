"""The web runtime (web/tvmpy.mjs) and demo page (web/demo/) in a real browser: Debian's
chromium, headless, driven by Playwright (no browser download), WebGPU on Chromium's
software adapter (SwiftShader, --enable-unsafe-webgpu). One browser for the module.

The demo's digits classifier runs on the wasm path (and WebGPU, when this tvmpy builds target
webgpu) and equals onnxruntime; the WebGPU runtime runs a hand-written artefact (WGSL kernels,
launch plans with let/assert/alloc/loop/scalars, a graph with a param) and equals numpy; bad
kernels and inputs fail with messages naming them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tvmpy.runtime.param_dict import save_param_dict
from tvmpy.runtime.wasm import custom_section, strip_custom_sections

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TVMPY_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-unsafe-webgpu"]
HAS_ADAPTER = "async () => !!(navigator.gpu && await navigator.gpu.requestAdapter())"
N = 37  # a prime: not a multiple of the workgroup size

# CI installs playwright and Debian's chromium (.ci/install-cross-tools): there, a missing
# browser or WebGPU adapter is a failure, not a skip
IN_CI = bool(os.environ.get("CI"))


def _missing(what: str, module: bool = False) -> None:
    if IN_CI:
        pytest.fail(f"{what} (CI installs it: .ci/install-cross-tools)", pytrace=False)
    pytest.skip(what, allow_module_level=module)


try:
    from playwright import sync_api
except ImportError:
    _missing("pip install playwright", module=True)
if not Path(CHROMIUM).exists():
    _missing(f"no browser at {CHROMIUM} (apt-get install chromium)", module=True)

WGSL = """
struct U { n: i32, s: f32 }
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> u: U;
@compute @workgroup_size(16)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = i32(g.x);
  if (i < u.n) { c[i] = a[i] * u.s + b[i]; }
}
"""


def _sig(names):
    return {"params": [{"name": n, "kind": "buffer", "dtype": "float32", "shape": ["n"],
                        "written": k == 2} for k, n in enumerate(names)],
            "shape_vars": [{"name": "n", "dtype": "int32"}]}


def _launch(a, b, c, scale):
    return {"launch": "scale_add", "grid": ["g", 1, 1], "block": [16, 1, 1], "shared": 0,
            "args": [{"buf": a}, {"buf": b}, {"buf": c}, {"scalar": "n", "dtype": "int32"},
                     {"scalar": scale, "dtype": "float32"}]}


def webgpu_artefact(wgsl: str = WGSL) -> bytes:
    """A WebGPU artefact (docs/WEB_ARTEFACT.md) written by hand: graph y = f2(f1(x, w), x) with
    f1(A, B) = 2A + B and f2(A, B) = 0.5 (A + B) + A, w a param."""
    let_g = {"let": "g", "value": ["floordiv", ["+", "n", 15], 16]}
    plan = {"functions": [
        {"name": "f1", "signature": _sig("ABC"),
         "steps": [let_g, {"assert": [">", "n", 0], "message": "n must be positive"},
                   _launch("A", "B", "C", {"float": 2.0})]},
        {"name": "f2", "signature": _sig("ABC"),
         "steps": [let_g, {"alloc": "tmp", "dtype": "float32", "lanes": 1, "size": "n"},
                   {"loop": "k", "min": 0, "extent": 2,  # the last trip (k=1) is what stays
                    "body": [_launch("A", "B", "tmp", ["cast", "float32", "k"])]},
                   _launch("tmp", "A", "C", {"float": 0.5})]}],
        "kernels": {"scale_add": ["handle", "handle", "handle", "int32", "float32"]}}
    buf = [{"kind": "buffer", "binding": k, "dtype": "float32",
            "access": "read_write" if k == 2 else "read"} for k in range(3)]
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                       {"op": "null", "name": "w", "inputs": []},
                       {"op": "tvm_op", "name": "n1", "inputs": [[0, 0, 0], [1, 0, 0]],
                        "attrs": {"func_name": "f1", "num_inputs": "2", "num_outputs": "1"}},
                       {"op": "tvm_op", "name": "n2", "inputs": [[2, 0, 0], [0, 0, 0]],
                        "attrs": {"func_name": "f2", "num_inputs": "2", "num_outputs": "1"}}],
             "arg_nodes": [0, 1], "heads": [[3, 0, 0]], "node_row_ptr": [0, 1, 2, 3, 4],
             "attrs": {"shape": ["list_shape", [[N]] * 4], "dltype": ["list_str", ["float32"] * 4],
                       "storage_id": ["list_int", [0, 1, 2, 3]]}}
    program = {"format": "tvmpy-webgpu", "version": 1, "features": [], "limits": {},
               "entry": "f1", "graph": json.dumps(graph), "fallback": False, "plan": plan,
               "kernels": {"scale_add": {
                   "wgsl": wgsl, "entry_point": "main", "workgroup_size": [16, 1, 1],
                   "args": buf + [{"kind": "scalar", "dtype": "int32", "offset": 0},
                                  {"kind": "scalar", "dtype": "float32", "offset": 4}],
                   "uniform": {"binding": 3, "size": 16}}}}
    w = (np.arange(N, dtype="float32") - 5) / 7
    return (b"\0asm\x01\0\0\0" + custom_section("tvmpy.webgpu", json.dumps(program).encode())
            + custom_section("tvmpy.webgpu.params", save_param_dict({"w": w})))


def _expected(x):
    w = (np.arange(N, dtype="float32") - 5) / 7
    t = 2 * x + w
    return 0.5 * (t + x) + t


def _rowmax_kernel_bytes(tmp_path_factory) -> bytes:
    """tvm.build(target="webgpu") of a row max (its init is -inf: a WGSL constant that Chromium's
    compiler rejects when written as a bitcast literal) exported as a web artefact."""
    import tvmpy as tvm
    from tvmpy import te

    A = te.placeholder((N, 53), name="A")
    k = te.reduce_axis((0, 53), name="k")
    B = te.compute((N,), lambda i: te.max(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    path = tmp_path_factory.mktemp("kernel") / "rowmax.wasm"
    tvm.build(s, [A, B], target="webgpu", name="rowmax").export_library(str(path))
    return path.read_bytes()


def _elementwise_kernel_bytes(tmp_path_factory, dtype: str, fn) -> bytes:
    """tvm.build(target="webgpu") of B = fn(A) on N elements of ``dtype``, exported."""
    import tvmpy as tvm
    from tvmpy import te

    A = te.placeholder((N,), name="A", dtype=dtype)
    B = te.compute((N,), lambda i: fn(A[i]), name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    path = tmp_path_factory.mktemp("kernel") / f"{dtype}.wasm"
    tvm.build(s, [A, B], target="webgpu", name="f").export_library(str(path))
    return path.read_bytes()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """web/ staged in a temporary root with the demo built into demo/build: (base URL, manifest)."""
    from tvmpy.cli.serve_demo import build_demo, serve_in_thread

    root = tmp_path_factory.mktemp("web")
    for f in (ROOT / "web").glob("*.mjs"):
        (root / f.name).symlink_to(f)
    (root / "demo").mkdir()
    for f in (ROOT / "web" / "demo").glob("*.*"):
        (root / "demo" / f.name).symlink_to(f)
    manifest = build_demo(root / "demo" / "build")
    (root / "test").mkdir()
    (root / "test" / "index.html").write_text("<!doctype html><link rel=\"icon\" href=\"data:,\"><title>t</title>")
    (root / "test" / "gpu.wasm").write_bytes(webgpu_artefact())
    (root / "test" / "bad.wasm").write_bytes(webgpu_artefact(WGSL.replace("u.s", "u.nope")))
    # the CPU path alone: the demo's file without its WebGPU sections
    cpu_only = strip_custom_sections((root / "demo" / "build" / "digits.wasm").read_bytes(),
                                     prefix="tvmpy.webgpu")
    (root / "test" / "cpu.wasm").write_bytes(cpu_only)
    (root / "test" / "rowmax.wasm").write_bytes(_rowmax_kernel_bytes(tmp_path_factory))
    from tvmpy import tir

    (root / "test" / "int64.wasm").write_bytes(_elementwise_kernel_bytes(
        tmp_path_factory, "int64", lambda a: a * tir.const(3, "int64") - tir.const(1, "int64")))
    (root / "test" / "uint8.wasm").write_bytes(_elementwise_kernel_bytes(
        tmp_path_factory, "uint8", lambda a: a + tir.const(7, "uint8")))
    srv, url = serve_in_thread(root)
    yield url, manifest, root
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page()
    pg.console_lines = []
    pg.on("console", lambda m: pg.console_lines.append(f"{m.type}: {m.text}"))
    pg.on("pageerror", lambda e: pg.console_lines.append(f"pageerror: {e}"))
    yield pg
    pg.close()


def _onnxruntime(manifest, root, images):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(root / "demo" / "build" / "digits.onnx"),
                                providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(None, {"input": im.reshape(1, 1, 8, 8)})[0] for im in images])


def test_demo_page_wasm_and_webgpu_equal_onnxruntime(site, page):
    url, manifest, root = site
    page.goto(f"{url}/demo/")
    page.evaluate("window.tvmpyDemo.ready")
    samples = json.loads((root / "demo" / "build" / "samples.json").read_text())
    images = np.array(samples["images"], "float32")
    want = _onnxruntime(manifest, root, images)
    backends = page.evaluate("Object.keys(window.tvmpyDemo.models)")
    assert "wasm" in backends
    assert manifest["webgpu"], manifest["webgpu_error"]  # this tvmpy builds target webgpu
    if page.evaluate(HAS_ADAPTER):  # then the page must use it
        assert backends == ["wasm", "webgpu"], page.console_lines
    else:
        assert backends == ["wasm"] and "webgpu: unavailable" in page.text_content("#backends")
    for backend in backends:
        got = np.array([page.evaluate("([p, b]) => window.tvmpyDemo.classify(p, b)",
                                      [im.tolist(), backend])["output"] for im in images])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=backend)
    # the trained model is right on most held-out samples, and the page shows top-5 rows
    assert (want.argmax(1) == np.array(samples["labels"])).mean() >= 0.8
    assert page.locator("tr.res").count() == len(backends)
    # "pick an image": a held-out sample as a 160x160 PNG (dark ink on white) reads back as the
    # same 8x8 grey levels and is classified on every backend
    from PIL import Image

    k = 3
    grey = (255 * (1 - images[k].reshape(8, 8) / 16)).round().astype("uint8")
    png = root / "sample.png"
    Image.fromarray(grey).resize((160, 160), Image.NEAREST).save(png)
    page.evaluate("document.querySelectorAll('tr.res').forEach((r) => r.remove())")
    page.set_input_files("#file", str(png))
    page.wait_for_function(f"document.querySelectorAll('tr.res').length == {len(backends)}")
    np.testing.assert_allclose(page.evaluate("Array.from(window.tvmpyDemo.padPixels())"),
                               images[k], atol=1)
    assert not [m for m in page.console_lines if m.startswith(("error", "pageerror"))]


RUN_GPU = """async ([url, x, backend]) => {
  const { loadModel } = await import("/tvmpy.mjs");
  const m = await loadModel(url, { backend });
  m.setInput("x", Float32Array.from(x));
  const ms = await m.run();
  return { backend: m.backend, y: Array.from(await m.getOutput(0)), ms, inputs: m.inputs };
}"""


def test_webgpu_runtime_runs_plans_and_graph(site, page):
    url, _, _ = site
    page.goto(f"{url}/test/")
    has_gpu = page.evaluate(HAS_ADAPTER)
    if not has_gpu:
        _missing("no WebGPU adapter in this headless chromium (see bench/RESULTS.md)")
    x = np.random.default_rng(0).standard_normal(N).astype("float32")
    r = page.evaluate(RUN_GPU, ["/test/gpu.wasm", x.tolist(), "auto"])
    assert r["backend"] == "webgpu"
    assert r["inputs"] == {"x": {"shape": [N], "dtype": "float32"}}  # w is a param
    np.testing.assert_allclose(r["y"], _expected(x), rtol=1e-6, atol=1e-6)


def test_webgpu_kernel_build_runs_in_browser(site, page):
    """A tvm.build(target="webgpu") kernel through loadTvmpyWebGPU(...).call on n-d arrays."""
    url, _, _ = site
    page.goto(f"{url}/test/")
    if not page.evaluate(HAS_ADAPTER):
        _missing("no WebGPU adapter in this headless chromium")
    a = np.random.default_rng(1).standard_normal((N, 53)).astype("float32") - 100
    got = page.evaluate("""async ([a, n]) => {
      const { loadTvmpyWebGPU } = await import("/tvmpy.mjs");
      const m = await loadTvmpyWebGPU("/test/rowmax.wasm");
      const b = new Float32Array(n);
      await m.call("rowmax", { data: Float32Array.from(a), shape: [n, 53] }, b);
      return Array.from(b); }""", [a.ravel().tolist(), N])
    np.testing.assert_array_equal(np.array(got, "float32"), a.max(1))


def test_webgpu_int64_and_packed_uint8_buffers(site, page):
    """int64 buffers (computed in 32 bits: values outside int32 refused) and uint8 buffers
    (packed 4 to a u32 word in the shader; N = 37 is not a multiple of 4) round-trip."""
    url, _, _ = site
    page.goto(f"{url}/test/")
    if not page.evaluate(HAS_ADAPTER):
        _missing("no WebGPU adapter in this headless chromium")
    call = """async ([file, kind, a]) => {
      const { loadTvmpyWebGPU } = await import("/tvmpy.mjs");
      const m = await loadTvmpyWebGPU(file);
      const A = kind === "int64" ? BigInt64Array.from(a.map(BigInt)) : Uint8Array.from(a);
      const B = new A.constructor(A.length);
      await m.call("f", A, B);
      return Array.from(B, Number); }"""
    rng = np.random.default_rng(3)
    a64 = rng.integers(-(2**28), 2**28, N)
    got = page.evaluate(call, ["/test/int64.wasm", "int64", a64.tolist()])
    np.testing.assert_array_equal(got, a64 * 3 - 1)
    a8 = rng.integers(0, 256, N)
    got = page.evaluate(call, ["/test/uint8.wasm", "uint8", a8.tolist()])
    np.testing.assert_array_equal(got, (a8 + 7) % 256)
    msg = _error(page, call, ["/test/int64.wasm", "int64", [2**40] + [0] * (N - 1)])
    assert msg == ("f: argument A: int64 value 1099511627776 is outside the int32 range that "
                   "WebGPU computes in")


def _error(page, script, args):
    return page.evaluate(f"async (a) => {{ try {{ await ({script})(a); return null; }} "
                         "catch (e) { return e.message; } }", args)


def test_errors_name_the_kernel_and_the_input(site, page):
    url, _, _ = site
    page.goto(f"{url}/test/")
    x = [0.0] * N
    if page.evaluate(HAS_ADAPTER):
        msg = _error(page, RUN_GPU, ["/test/bad.wasm", x, "webgpu"])
        assert msg and msg.startswith("WebGPU kernel scale_add failed to compile: line 10:"), msg
        assert "nope" in msg
        msg = _error(page, RUN_GPU, ["/test/gpu.wasm", x[:5], "webgpu"])
        assert msg == f"input x must have shape [{N}] ({N} elements), got 5 elements"
    # the wasm path: a wrong dtype, an unknown input, a file that is not a model
    wasm = """async ([url, kind]) => {
      const { loadModel } = await import("/tvmpy.mjs");
      const m = await loadModel(url, { backend: "wasm" });
      m.setInput(kind === "name" ? "data" : "input", new Int32Array(64)); }"""
    msg = _error(page, wasm, ["/test/cpu.wasm", "dtype"])
    assert msg == "input input must be a Float32Array (float32) of shape [1,1,8,8], got a Int32Array"
    msg = _error(page, wasm, ["/test/cpu.wasm", "name"])
    assert msg == "no input data; inputs: input"
    msg = _error(page, wasm, ["/demo/index.html", "name"])
    assert msg.startswith("not a WebAssembly file")
    # auto on a CPU-only file: the wasm path, with the reason
    r = page.evaluate("""async () => { const { loadModel } = await import("/tvmpy.mjs");
        const m = await loadModel("/test/cpu.wasm"); return [m.backend, m.fallbackReason]; }""")
    assert r == ["wasm", "the file has no WebGPU program (built for a CPU target)"]
    msg = _error(page, RUN_GPU, ["/test/gpu.wasm", x, "cuda"])
    assert msg == 'backend must be "auto", "webgpu" or "wasm", not "cuda"'


def test_serve_demo_command_serves_the_page(site):
    """``tvmpy serve-demo`` prints its URL and serves web/ with the build at /demo/build/, .mjs
    as JavaScript and .wasm as application/wasm (browsers refuse other types for modules)."""
    import subprocess
    import sys
    import urllib.request

    _, _, root = site
    proc = subprocess.Popen([sys.executable, "-m", "tvmpy", "serve-demo", "--port", "0",
                             "--build-dir", str(root / "demo" / "build")],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline()
        assert "serving the tvmpy web demo at http://127.0.0.1:" in line, line
        url = line.split(" at ")[1].split()[0]
        for path, ctype in (("", "text/html"), ("../tvmpy.mjs", "text/javascript"),
                            ("demo.mjs", "text/javascript"), ("build/digits.wasm", "application/wasm"),
                            ("build/manifest.json", "application/json")):
            with urllib.request.urlopen(url + path, timeout=30) as r:
                assert r.status == 200 and r.headers["Content-Type"].startswith(ctype), path
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_node_falls_back_to_wasm_without_webgpu(site, tmp_path):
    """Node has no navigator.gpu: loadModel on the demo's file (WebGPU program + wasm32
    fallback) runs the wasm code, with the reason on stderr."""
    node = shutil.which("node")
    if node is None:
        _missing("node is not installed")
    _, _, root = site
    script = tmp_path / "d.mjs"
    script.write_text(f"""import {{ readFileSync }} from "node:fs";
import {{ loadModel }} from "{(ROOT / 'web' / 'tvmpy.mjs').as_uri()}";
const m = await loadModel(readFileSync("{root / 'demo' / 'build' / 'digits.wasm'}"));
m.setInput("input", new Float32Array(64).fill(3));
await m.run();
console.log(JSON.stringify([m.backend, m.fallbackReason, Array.from(await m.getOutput(0))]));
""")
    import subprocess

    proc = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    backend, reason, y = json.loads(proc.stdout.strip().splitlines()[-1])
    assert backend == "wasm" and reason.startswith("WebGPU is not available here")
    assert "tvmpy: running on the wasm CPU path" in proc.stderr
    assert abs(sum(y) - 1) < 1e-5
