// tvmpy's web runtime: run a model exported by tvmpy (relay.build + export_library("x.wasm")) in
// a browser (or node, wasm path) on WebGPU, or on the wasm32 CPU code when WebGPU is absent.
// An ES module without dependencies; see web/README.md.
//
//   import { loadModel } from "./tvmpy.mjs";
//   const m = await loadModel("model.wasm");            // backend: "auto" | "webgpu" | "wasm"
//   m.setInput("input", new Float32Array(64));
//   const ms = await m.run();                            // resolves when the outputs are ready
//   const y = await m.getOutput(0);                      // a typed-array copy
//   const t = await m.benchmark({ repeat: 20 });         // {median, min, mean, runs, number} ms

import { readArtefact } from "./tvmpy_artefact.mjs";
import { loadTvmpyWasm } from "./tvmpy_wasm.mjs";
import { WebGPUModule, requestDevice } from "./tvmpy_webgpu.mjs";

export { readArtefact } from "./tvmpy_artefact.mjs";
export { loadTvmpyWasm } from "./tvmpy_wasm.mjs";
export { loadTvmpyWebGPU, requestDevice } from "./tvmpy_webgpu.mjs";

const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

export class Model {
  constructor(executor, backend, fallbackReason = null) {
    this.executor = executor;
    this.backend = backend;              // "webgpu" | "wasm"
    this.fallbackReason = fallbackReason; // why "auto" did not use WebGPU (null if it did)
    this.lastRunMs = null;
    this.inputs = Object.fromEntries(executor.inputNames()   // parameters excluded
      .map((n) => [n, { shape: executor.inputs[n].shape, dtype: executor.inputs[n].dtype }]));
    this.outputs = executor.outputs.map((e) => ({ shape: e.shape, dtype: e.dtype }));
  }

  // data: a typed array of the input's dtype and element count (throws naming what is wrong)
  setInput(name, data) { this.executor.setInput(name, data); }

  // Runs the model; resolves (with the milliseconds it took) when the outputs are ready.
  async run() {
    const t0 = now();
    await this.executor.run();
    this.lastRunMs = now() - t0;
    return this.lastRunMs;
  }

  async getOutput(i = 0) { return this.executor.getOutput(i); }

  // Latency in ms: `repeat` samples after `warmup` runs (the inputs set last). A sample times
  // `number` back-to-back runs (default: as many as take minMs, since browsers coarsen
  // performance.now() to 0.1 ms or more) and gives their mean.
  async benchmark({ warmup = 3, repeat = 20, number = 0, minMs = 10 } = {}) {
    for (let i = 0; i < warmup; i++) await this.run();
    if (!number) {
      const t0 = now();
      for (number = 1; now() - t0 < minMs; number++) await this.executor.run();
    }
    const runs = [];
    for (let i = 0; i < repeat; i++) {
      const t0 = now();
      for (let k = 0; k < number; k++) await this.executor.run();
      runs.push((now() - t0) / number);
    }
    const sorted = [...runs].sort((a, b) => a - b);
    return {
      median: sorted[Math.floor(sorted.length / 2)], min: sorted[0],
      mean: runs.reduce((a, b) => a + b, 0) / runs.length, runs, number,
    };
  }
}

// source: a URL, ArrayBuffer/typed array, Response, or an artefact from readArtefact.
// backend "auto" uses WebGPU when the file has a WebGPU program and the browser a device, else
// the wasm32 CPU code (the reason goes to console.warn and model.fallbackReason).
export async function loadModel(source, { backend = "auto", device = null } = {}) {
  if (!["auto", "webgpu", "wasm"].includes(backend)) {
    throw new Error(`backend must be "auto", "webgpu" or "wasm", not ${JSON.stringify(backend)}`);
  }
  const art = source && source.module instanceof WebAssembly.Module ? source : await readArtefact(source);
  let reason = null;
  if (backend !== "wasm") {
    try {
      if (!art.webgpu) throw new Error("the file has no WebGPU program (built for a CPU target)");
      const mod = await WebGPUModule.create(art.webgpu, art.webgpuParams,
                                            device || await requestDevice(art.webgpu));
      return new Model(mod.createGraphExecutor(), "webgpu");
    } catch (e) {
      if (backend === "webgpu") throw e;
      reason = e.message;
    }
  }
  if (!art.meta) {
    throw new Error(`no usable backend: WebGPU failed (${reason}) and the file has no wasm32 CPU code`);
  }
  if (reason) console.warn(`tvmpy: running on the wasm CPU path: ${reason}`);
  const wasm = await loadTvmpyWasm(art);
  return new Model(wasm.createGraphExecutor(), "wasm", reason);
}
