"""Latency of one model on every path of issue 31: host llvm, wasm SIMD and WebGPU in a real
browser (Debian's chromium, headless; WebGPU on its SwiftShader adapter), WebGPU through wgpu-py
on lavapipe, Vulkan (SPIR-V) on lavapipe, onnxruntime on the host and, when given, onnxruntime-web in the same browser.

Every side's output is compared with onnxruntime's (max |diff| printed); times are medians of
the rounds (host sides: interleaved rounds of run + sync, bench/common.py; browser sides: run
and read the output back, batched, in the page), one thread everywhere (the browser's wasm is
one thread; onnxruntime-web is told numThreads = 1). The software GPUs (SwiftShader, lavapipe) run on the
CPU: their figures say the path works end to end, not how fast a GPU would be.

Reproduce (from the repository root):
    npm install --prefix /tmp/ortweb onnxruntime-web      # optional; never inside the repo
    env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=. .venv/bin/python bench/web_latency.py \
        --models digits,mobilenet_v2 --image 96 \
        --ort-web /tmp/ortweb/node_modules/onnxruntime-web/dist
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ["TVM_NUM_THREADS"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402  (sets the strict-schedule default before tvmpy is imported)
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WASM = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128"
FLAGS = ["--headless", "--no-sandbox", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-unsafe-webgpu"]

PAGE_JS = """async ([x, shape, repeat, ortWeb]) => {
  const { loadModel } = await import("/tvmpy.mjs");
  // ms per call of once() (run + read the output back): the median of `repeat` samples, each
  // the mean of as many back-to-back calls as take 20 ms (performance.now() is coarse, 0.1 ms)
  const timeIt = async (once) => {
    for (let i = 0; i < 3; i++) await once();
    let number = 1;
    for (let t0 = performance.now(); performance.now() - t0 < 20; number++) await once();
    const ts = [];
    for (let i = 0; i < repeat; i++) {
      const t0 = performance.now();
      for (let k = 0; k < number; k++) await once();
      ts.push((performance.now() - t0) / number);
    }
    ts.sort((a, b) => a - b);
    return ts[Math.floor(ts.length / 2)];
  };
  const out = {};
  const data = Float32Array.from(x);
  for (const [name, file, backend] of [["tvmpy wasm SIMD (chromium)", "/m/model.wasm", "wasm"],
                                       ["tvmpy WebGPU (chromium, SwiftShader)", "/m/model.webgpu.wasm", "webgpu"]]) {
    try {
      const m = await loadModel(file, { backend });
      m.setInput("input", data);
      await m.run();
      const y = Array.from(await m.getOutput(0));
      out[name] = { ms: await timeIt(async () => { await m.run(); await m.getOutput(0); }), y };
    } catch (e) { out[name] = { error: e.message }; }
  }
  if (ortWeb) {
    const bytes = new Uint8Array(await (await fetch("/m/model.onnx")).arrayBuffer());
    for (const [ep, bundle] of [["wasm", "ort.wasm.min.mjs"], ["webgpu", "ort.webgpu.min.mjs"]]) {
      const ort = await import(`/ort/${bundle}`);  // each EP from its own bundle
      ort.env.wasm.numThreads = 1;
      ort.env.wasm.wasmPaths = "/ort/";
      const name = `onnxruntime-web ${ort.env.versions ? ort.env.versions.web : ""} ${ep} (chromium)`;
      try {
        const s = await ort.InferenceSession.create(bytes, { executionProviders: [ep] });
        const feeds = { input: new ort.Tensor("float32", data, shape) };
        const once = async () => (await s.run(feeds))[s.outputNames[0]].getData();
        const y = Array.from(await once());
        out[name] = { ms: await timeIt(once), y };
      } catch (e) { out[name] = { error: String(e.message || e) }; }
    }
  }
  return out;
}"""


def onnx_model(name: str, image: int):
    if name == "digits":
        from tvmpy.relay.testing.digits import digits_mlp

        return digits_mlp()[0], (1, 1, 8, 8)
    from tvmpy.relay.testing import onnx_models

    return onnx_models.MODELS[name](image=image), (1, 3, image, image)


def host_sides(model, shape, x, rounds):
    """{side: (median seconds, output)} for onnxruntime, tvmpy llvm, tvmpy webgpu on wgpu-py,
    tvmpy vulkan (SPIR-V through the vulkan binding) — both GPU sides on lavapipe."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    sess = common.ort_session(model, threads=1)
    run_ort, ort_outs = common.ort_bound_runner(sess, {"input": x})
    mod, params = relay.frontend.from_onnx(model, {"input": shape})
    sides, outputs = {"onnxruntime (host)": run_ort}, {}
    for label, target, dev in (("tvmpy llvm (host)", "llvm", tvm.cpu(0)),
                               ("tvmpy WebGPU (wgpu-py, lavapipe)", "webgpu", None),
                               ("tvmpy Vulkan (SPIR-V, lavapipe)", "vulkan", None)):
        try:
            if dev is None:
                dev = tvm.device(target, 0)
            with tvm.transform.PassContext(opt_level=3):
                lib = relay.build(mod, target=target, params=params)
            g = graph_executor.GraphModule(lib["default"](dev))
            g.set_input("input", x)

            def run(g=g, dev=dev):
                g.run()
                dev.sync()

            sides[label] = run
            outputs[label] = g
        except Exception as e:  # noqa: BLE001 - a path that does not build is reported
            print(f"{label}: {type(e).__name__}: {e}")
    samples = common.interleaved_samples(sides, rounds)
    run_ort()
    res = {"onnxruntime (host)": (statistics.median(samples["onnxruntime (host)"]),
                                  ort_outs[0].numpy().copy())}  # a copy: the OrtValue dies
    for label, g in outputs.items():
        g.run()
        res[label] = (statistics.median(samples[label]), g.get_output(0).numpy().copy())
    return res


def browser_sides(model, shape, x, repeat, ort_web):
    from playwright.sync_api import sync_playwright

    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.cli.serve_demo import serve_in_thread

    root = Path(tempfile.mkdtemp(prefix="tvmpy-web-bench-"))
    for f in (ROOT / "web").glob("*.mjs"):
        (root / f.name).symlink_to(f)
    (root / "m").mkdir()
    (root / "index.html").write_text('<!doctype html><link rel="icon" href="data:,">')
    if ort_web:
        (root / "ort").symlink_to(Path(ort_web).resolve())
    (root / "m" / "model.onnx").write_bytes(model.SerializeToString())
    mod, params = relay.frontend.from_onnx(model, {"input": shape})
    for target, file in ((WASM, "model.wasm"), ("webgpu", "model.webgpu.wasm")):
        with tvm.transform.PassContext(opt_level=3):
            relay.build(mod, target=target, params=params).export_library(str(root / "m" / file))
    srv, url = serve_in_thread(root)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS, headless=True)
            page = b.new_page()
            page.on("console", lambda m: m.type == "error" and print("console:", m.text))
            page.goto(url + "/index.html")
            got = page.evaluate(PAGE_JS, [x.ravel().tolist(), list(shape), repeat, bool(ort_web)])
            b.close()
    finally:
        srv.shutdown()
        srv.server_close()
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="digits,mobilenet_v2")
    ap.add_argument("--image", type=int, default=96, help="image size of the CNNs")
    ap.add_argument("--rounds", type=int, default=7, help="host rounds (median)")
    ap.add_argument("--repeat", type=int, default=20, help="browser runs (median)")
    ap.add_argument("--ort-web", default=os.environ.get("TVMPY_ORT_WEB"),
                    help="onnxruntime-web's dist folder (npm install onnxruntime-web)")
    args = ap.parse_args()
    print(f"# {common.machine_description()}; 1 thread everywhere; medians in ms")
    for name in args.models.split(","):
        model, shape = onnx_model(name, args.image)
        x = np.random.default_rng(0).uniform(0, 1, shape).astype("float32")
        if name == "digits":
            x *= 16
        host = host_sides(model, shape, x, args.rounds)
        want = host["onnxruntime (host)"][1]
        rows = [(k, t * 1e3, float(np.abs(y - want).max())) for k, (t, y) in host.items()]
        for k, r in browser_sides(model, shape, x, args.repeat, args.ort_web).items():
            if "error" in r:
                print(f"{name}: {k}: {r['error']}")
                continue
            rows.append((k, r["ms"], float(np.abs(np.array(r["y"]).reshape(want.shape) - want).max())))
        ref = rows[0][1]
        print(f"\n## {name} {list(shape)}")
        print(f"{'side':44} {'ms':>9} {'/ort host':>9} {'max|diff|':>10}")
        for k, ms, diff in rows:
            print(f"{k:44} {ms:9.3f} {ms / ref:9.2f} {diff:10.2e}")
        print(json.dumps({"model": name, "rows": rows}))


if __name__ == "__main__":
    main()
