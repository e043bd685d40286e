// A loader for the .wasm files tvmpy's export_library writes (llvm -mtriple=wasm32-...), for
// node (>= 18) and browsers: no dependencies, only the WebAssembly JS API.
//
//   import { loadTvmpyWasm } from "./tvmpy_wasm.mjs";
//   const mod = await loadTvmpyWasm(bytes);              // ArrayBuffer / Uint8Array / Buffer
//   mod.call("add", a, b, out);                          // a kernel: typed arrays (+ numbers)
//   const g = mod.createGraphExecutor();                 // a relay.build model
//   g.setInput("data", float32Array); g.run(); const y = g.getOutput(0);   // a typed-array copy
//
// The file's layout (tvmpy/runtime/wasm.py): exports memory, aligned_alloc, free,
// __tvmpy_last_error and the kernels (ABI of tvmpy/runtime/abi.py with i32 pointers); custom
// sections "tvmpy.metadata" (JSON) and, for a model, "tvmpy.params" (TVM's param-dict bytes).

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, int16: Int16Array,
  int32: Int32Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array,
  bool: Uint8Array, int64: BigInt64Array, uint64: BigUint64Array,
};
const BYTES = { float16: 2, bool: 1 };
const ALIGN = 64;

function dtypeBytes(dtype) {
  if (dtype in BYTES) return BYTES[dtype];
  const bits = parseInt(dtype.replace(/^[a-z]+/, ""), 10);
  if (!(bits > 0)) throw new Error(`unsupported dtype ${dtype}`);
  return bits / 8;
}

const prod = (shape) => shape.reduce((a, b) => a * b, 1);

function customSection(module, name) {
  const found = WebAssembly.Module.customSections(module, name);
  return found.length ? new Uint8Array(found[found.length - 1]) : null;
}

// TVM's NDArray-list format (see tvmpy/runtime/param_dict.py) -> {name: {dtype, shape, bytes}}
function parseParams(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const u64 = () => { const v = Number(view.getBigUint64(pos, true)); pos += 8; return v; };
  const codes = { 0: "int", 1: "uint", 2: "float" };
  if (view.getBigUint64(0, true) !== 0xF7E58D4F05049CB7n) throw new Error("tvmpy.params: bad magic");
  pos = 16;
  const names = [];
  for (let n = u64(), i = 0; i < n; i++) {
    const len = u64();
    names.push(new TextDecoder().decode(bytes.subarray(pos, pos + len)));
    pos += len;
  }
  const out = {};
  for (let n = u64(), i = 0; i < n; i++) {
    pos += 16 + 8; // array magic, reserved, device type + id
    const ndim = view.getInt32(pos, true); pos += 4;
    const code = view.getUint8(pos), bits = view.getUint8(pos + 1); pos += 4;
    const shape = [];
    for (let d = 0; d < ndim; d++) { shape.push(Number(view.getBigInt64(pos, true))); pos += 8; }
    const nbytes = Number(view.getBigInt64(pos, true)); pos += 8;
    const dtype = bits === 1 ? "bool" : `${codes[code]}${bits}`;
    out[names[i]] = { dtype, shape, bytes: bytes.subarray(pos, pos + nbytes) };
    pos += nbytes;
  }
  return out;
}

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
    const rows = graph.node_row_ptr;
    const shapes = graph.attrs.shape[1], dtypes = graph.attrs.dltype[1];
    const nEntries = rows[rows.length - 1];
    const sids = graph.attrs.storage_id ? graph.attrs.storage_id[1] : [...Array(nEntries).keys()];
    const nbytes = shapes.map((s, e) => prod(s) * dtypeBytes(dtypes[e]));
    const size = [];
    sids.forEach((s, e) => { size[s] = Math.max(size[s] || 0, nbytes[e]); });
    const base = size.map((n) => mod.alloc(n));
    this.entries = sids.map((s, e) => ({ off: base[s], shape: shapes[e], dtype: dtypes[e], nbytes: nbytes[e] }));
    this.inputs = {};
    for (const nid of graph.arg_nodes) this.inputs[graph.nodes[nid].name] = this.entries[rows[nid]];
    this.outputs = graph.heads.map(([nid, idx]) => this.entries[rows[nid] + idx]);
    this.calls = [];
    graph.nodes.forEach((node, nid) => {
      if (node.op !== "tvm_op" || node.attrs.func_name === "__nop") return;
      const name = node.attrs.func_name, sig = mod.sigs[name];
      if (!sig) throw new Error(`graph node ${node.name} calls ${name}, which the module lacks`);
      const ents = node.inputs.map(([n, i]) => this.entries[rows[n] + i]);
      for (let k = rows[nid]; k < rows[nid + 1]; k++) ents.push(this.entries[k]);
      const args = ents.map((e) => e.off);
      for (const sv of sig.shape_vars) {
        const shape = ents[sv.arg_index].shape;
        const v = sv.source === "stride" ? prod(shape.slice(sv.dim + 1)) : shape[sv.dim];
        args.push(sv.dtype === "int64" ? BigInt(v) : v);
      }
      this.calls.push([name, args]);
    });
    for (const [name, p] of Object.entries(mod.params || {})) {
      if (name in this.inputs) this.mod.bytes().set(p.bytes, this.inputs[name].off);
    }
  }

  setInput(name, data) {
    const e = this.inputs[name];
    if (!e) throw new Error(`no input ${name}; inputs: ${Object.keys(this.inputs).join(", ")}`);
    if (!(data instanceof ARRAYS[e.dtype]) || data.byteLength !== e.nbytes) {
      throw new Error(`input ${name} must be a ${ARRAYS[e.dtype].name} of shape [${e.shape}]`);
    }
    this.mod.bytes().set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), e.off);
  }

  run() {
    for (const [name, args] of this.calls) this.mod.invoke(name, args);
  }

  getOutput(i) {
    const e = this.outputs[i];
    return new ARRAYS[e.dtype](this.mod.bytes().slice(e.off, e.off + e.nbytes).buffer);
  }
}

export async function loadTvmpyWasm(bytes) {
  const module = await WebAssembly.compile(bytes);
  const metaBytes = customSection(module, "tvmpy.metadata");
  if (!metaBytes) throw new Error("not a tvmpy WebAssembly module (no tvmpy.metadata section)");
  const meta = JSON.parse(new TextDecoder().decode(metaBytes));
  const paramBytes = customSection(module, "tvmpy.params");
  const instance = await WebAssembly.instantiate(module, {});
  return new TvmpyWasmModule(module, instance, meta, paramBytes ? parseParams(paramBytes) : {});
}
