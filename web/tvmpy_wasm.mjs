// A loader for the .wasm files tvmpy's export_library writes (llvm -mtriple=wasm32-...), for
// node (>= 18) and browsers: no dependencies, only the WebAssembly JS API.
//
//   import { loadTvmpyWasm } from "./tvmpy_wasm.mjs";
//   const mod = await loadTvmpyWasm(bytes);              // ArrayBuffer / Uint8Array / Buffer / URL
//   mod.call("add", a, b, out);                          // a kernel: typed arrays (+ numbers)
//   const g = mod.createGraphExecutor();                 // a relay.build model
//   g.setInput("data", float32Array); g.run(); const y = g.getOutput(0);   // a typed-array copy
//
// The file's layout (tvmpy/runtime/wasm.py): exports memory, aligned_alloc, free,
// __tvmpy_last_error and the kernels (ABI of tvmpy/runtime/abi.py with i32 pointers); custom
// sections "tvmpy.metadata" (JSON) and, for a model, "tvmpy.params" (TVM's param-dict bytes).
// Reading the file (sections, params, the graph's storage plan) is tvmpy_artefact.mjs's, shared
// with the WebGPU path (tvmpy_webgpu.mjs); tvmpy.mjs picks a path (loadModel).

import { ARRAYS, checkInput, planGraph, prod, readArtefact } from "./tvmpy_artefact.mjs";

const ALIGN = 64;

export class TvmpyWasmModule {
  constructor(module, instance, meta, params) {
    this.exports = instance.exports;
    this.meta = meta;
    this.params = params;
    this.lib = meta.type_key === "GraphExecutorFactory" ? meta.imports[0] : meta;
    this.sigs = Object.fromEntries(this.lib.functions.map((f) => [f.name, f]));
    if (this.exports._initialize) this.exports._initialize();
  }

  bytes() { return new Uint8Array(this.exports.memory.buffer); }

  alloc(nbytes) {
    const n = Math.ceil(Math.max(nbytes, 1) / ALIGN) * ALIGN;
    const off = this.exports.aligned_alloc(ALIGN, n);
    if (!off) throw new Error(`WebAssembly module out of memory allocating ${nbytes} bytes`);
    return off;
  }

  lastError() {
    const g = this.exports.__tvmpy_last_error;
    if (!g) return "";
    const cell = new DataView(this.exports.memory.buffer).getUint32(g.value, true);
    if (!cell) return "";
    new DataView(this.exports.memory.buffer).setUint32(g.value, 0, true);
    const mem = this.bytes();
    let end = cell;
    while (mem[end]) end++;
    return new TextDecoder().decode(mem.subarray(cell, end));
  }

  invoke(name, args) {
    let rc;
    try {
      rc = this.exports[name](...args);
    } catch (e) {
      throw new Error(`${name}: WebAssembly trap: ${e.message}`);
    }
    if (rc !== 0) throw new Error(`${name} failed (returned ${rc}): ${this.lastError()}`);
  }

  // A kernel: buffers are typed arrays (copied in, and back out when the kernel writes them);
  // shapes of symbolic dims come from the arrays' lengths (1-D) or {data, shape} objects.
  call(name, ...args) {
    const sig = this.sigs[name];
    if (!sig) throw new Error(`module has no function ${name}`);
    if (args.length !== sig.params.length) {
      throw new Error(`${name} takes ${sig.params.length} arguments, got ${args.length}`);
    }
    const raw = [], copies = [], shapes = [];
    sig.params.forEach((p, i) => {
      if (p.kind !== "buffer") { raw.push(args[i]); shapes.push(null); return; }
      const a = args[i].data ? args[i] : { data: args[i], shape: [args[i].length] };
      if (!(a.data instanceof ARRAYS[p.dtype])) {
        throw new Error(`${name}: argument ${p.name} must be a ${ARRAYS[p.dtype].name} (${p.dtype})`);
      }
      const off = this.alloc(a.data.byteLength);
      this.bytes().set(new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength), off);
      raw.push(off); copies.push([off, a.data, p.written]); shapes.push(a.shape);
    });
    for (const sv of sig.shape_vars) {
      const v = shapes[sv.arg_index][sv.dim];
      raw.push(sv.dtype === "int64" ? BigInt(v) : v);
    }
    try {
      this.invoke(name, raw);
      for (const [off, data, written] of copies) {
        if (written) {
          new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
            .set(this.bytes().subarray(off, off + data.byteLength));
        }
      }
    } finally {
      for (const [off] of copies) this.exports.free(off);
    }
  }

  createGraphExecutor() {
    if (this.meta.type_key !== "GraphExecutorFactory") throw new Error("not a graph module");
    return new GraphExecutor(this, JSON.parse(this.meta.graph_executor.graph_json));
  }
}

// Runs a graph (TVM's graph JSON) with all its storage in the module's linear memory.
export class GraphExecutor {
  constructor(mod, graph) {
    this.mod = mod;
    const plan = planGraph(graph);
    const base = plan.storage.map((n) => mod.alloc(n));
    this.entries = plan.entries.map((e) => ({ ...e, off: base[e.sid] }));
    this.inputs = {};
    for (const [name, e] of Object.entries(plan.inputs)) this.inputs[name] = this.entries[e];
    this.outputs = plan.outputs.map((e) => this.entries[e]);
    this.calls = plan.calls.map(({ node, func, entries }) => {
      const sig = mod.sigs[func];
      if (!sig) throw new Error(`graph node ${node} calls ${func}, which the module lacks`);
      const ents = entries.map((e) => this.entries[e]);
      const args = ents.map((e) => e.off);
      for (const sv of sig.shape_vars) {
        const shape = ents[sv.arg_index].shape;
        const v = sv.source === "stride" ? prod(shape.slice(sv.dim + 1)) : shape[sv.dim];
        args.push(sv.dtype === "int64" ? BigInt(v) : v);
      }
      return [func, args];
    });
    for (const [name, p] of Object.entries(mod.params || {})) {
      if (name in this.inputs) this.mod.bytes().set(p.bytes, this.inputs[name].off);
    }
  }

  // the graph's inputs that are not parameters (which the file sets itself)
  inputNames() { return Object.keys(this.inputs).filter((n) => !(n in (this.mod.params || {}))); }

  setInput(name, data) {
    const e = this.inputs[name];
    if (!e) throw new Error(`no input ${name}; inputs: ${this.inputNames().join(", ")}`);
    checkInput(name, e, data);
    this.mod.bytes().set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), e.off);
  }

  run() {
    for (const [name, args] of this.calls) this.mod.invoke(name, args);
  }

  getOutput(i) {
    const e = this.outputs[i];
    if (!e) throw new Error(`no output ${i}; the model has ${this.outputs.length}`);
    return new ARRAYS[e.dtype](this.mod.bytes().slice(e.off, e.off + e.nbytes).buffer);
  }
}

// bytes: ArrayBuffer / Uint8Array / Buffer, a URL (fetched), or an artefact from readArtefact
export async function loadTvmpyWasm(bytes) {
  const art = bytes && bytes.module instanceof WebAssembly.Module ? bytes : await readArtefact(bytes);
  if (!art.meta) {
    throw new Error("this file has no wasm32 CPU code (a WebGPU build without the CPU fallback)");
  }
  const instance = await WebAssembly.instantiate(art.module, {});
  return new TvmpyWasmModule(art.module, instance, art.meta, art.params);
}
