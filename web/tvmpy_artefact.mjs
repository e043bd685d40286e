// The one home of what every tvmpy web runtime reads from an exported .wasm file: dtypes, custom
// sections, TVM's param-dict bytes and the graph's storage plan. tvmpy_wasm.mjs (the wasm32 CPU
// path) and tvmpy_webgpu.mjs (the WebGPU path) build on it; docs/WEB_ARTEFACT.md and
// tvmpy/runtime/wasm.py describe the file.

export const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, int16: Int16Array,
  int32: Int32Array, uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array,
  bool: Uint8Array, int64: BigInt64Array, uint64: BigUint64Array,
};
const BYTES = { float16: 2, bool: 1 };

export function dtypeBytes(dtype) {
  if (dtype in BYTES) return BYTES[dtype];
  const bits = parseInt(dtype.replace(/^[a-z]+/, ""), 10);
  if (!(bits > 0)) throw new Error(`unsupported dtype ${dtype}`);
  return bits / 8;
}

export const prod = (shape) => shape.reduce((a, b) => a * b, 1);

export function customSection(module, name) {
  const found = WebAssembly.Module.customSections(module, name);
  return found.length ? new Uint8Array(found[found.length - 1]) : null;
}

export const jsonSection = (module, name) => {
  const bytes = customSection(module, name);
  return bytes ? JSON.parse(new TextDecoder().decode(bytes)) : null;
};

// TVM's NDArray-list format (see tvmpy/runtime/param_dict.py) -> {name: {dtype, shape, bytes}}
export function parseParams(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  const u64 = () => { const v = Number(view.getBigUint64(pos, true)); pos += 8; return v; };
  const codes = { 0: "int", 1: "uint", 2: "float" };
  if (view.getBigUint64(0, true) !== 0xF7E58D4F05049CB7n) throw new Error("params: bad magic");
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

// source: ArrayBuffer / typed array / node Buffer, a URL string or URL (fetched), or a Response
export async function artefactBytes(source) {
  if (typeof source === "string" || source instanceof URL) {
    const resp = await fetch(source);
    if (!resp.ok) throw new Error(`fetching ${source}: HTTP ${resp.status} ${resp.statusText}`);
    return new Uint8Array(await resp.arrayBuffer());
  }
  if (typeof Response !== "undefined" && source instanceof Response) {
    return new Uint8Array(await source.arrayBuffer());
  }
  return source;
}

// What an exported file holds: the compiled module (wasm32 code, possibly none), the CPU
// metadata and params (tvmpy.metadata / tvmpy.params) and the WebGPU program (tvmpy.webgpu /
// tvmpy.webgpu.params), each null when absent.
export async function readArtefact(source) {
  const bytes = await artefactBytes(source);
  let module;
  try {
    module = await WebAssembly.compile(bytes);
  } catch (e) {
    throw new Error(`not a WebAssembly file (a tvmpy export_library .wasm): ${e.message}`);
  }
  const params = customSection(module, "tvmpy.params");
  const gpuParams = customSection(module, "tvmpy.webgpu.params");
  const art = {
    module,
    meta: jsonSection(module, "tvmpy.metadata"),
    params: params ? parseParams(params) : {},
    webgpu: jsonSection(module, "tvmpy.webgpu"),
    webgpuParams: gpuParams ? parseParams(gpuParams) : {},
  };
  if (!art.meta && !art.webgpu) {
    throw new Error("not a tvmpy WebAssembly module (no tvmpy.metadata or tvmpy.webgpu section)");
  }
  if (art.webgpu && art.webgpu.format !== "tvmpy-webgpu") {
    throw new Error(`tvmpy.webgpu section has format ${art.webgpu.format}, not tvmpy-webgpu`);
  }
  return art;
}

// The storage plan of TVM's graph JSON, shared by every executor: entries (shape, dtype, nbytes,
// storage id), the size of each storage, the inputs by name, the outputs, and the op calls as
// [func_name, entry indices (inputs then outputs)]. alloc(nbytes, sid) returns each storage.
export function planGraph(graph) {
  const rows = graph.node_row_ptr;
  const shapes = graph.attrs.shape[1], dtypes = graph.attrs.dltype[1];
  const nEntries = rows[rows.length - 1];
  const sids = graph.attrs.storage_id ? graph.attrs.storage_id[1] : [...Array(nEntries).keys()];
  const entries = sids.map((sid, e) => ({
    sid, shape: shapes[e], dtype: dtypes[e], nbytes: prod(shapes[e]) * dtypeBytes(dtypes[e]),
  }));
  const storage = [];
  entries.forEach((e) => { storage[e.sid] = Math.max(storage[e.sid] || 0, e.nbytes); });
  const inputs = {};
  for (const nid of graph.arg_nodes) inputs[graph.nodes[nid].name] = rows[nid];
  const outputs = graph.heads.map(([nid, idx]) => rows[nid] + idx);
  const calls = [];
  graph.nodes.forEach((node, nid) => {
    if (node.op !== "tvm_op" || node.attrs.func_name === "__nop") return;
    const ents = node.inputs.map(([n, i]) => rows[n] + i);
    for (let k = rows[nid]; k < rows[nid + 1]; k++) ents.push(k);
    calls.push({ node: node.name, func: node.attrs.func_name, entries: ents });
  });
  return { entries, storage, inputs, outputs, calls };
}

// The error for an input of the wrong type or size, naming what was expected and given.
export function checkInput(name, entry, data) {
  const want = ARRAYS[entry.dtype];
  if (!(data instanceof want)) {
    const got = data && data.constructor ? data.constructor.name : typeof data;
    throw new Error(`input ${name} must be a ${want.name} (${entry.dtype}) of shape ` +
                    `[${entry.shape}], got a ${got}`);
  }
  if (data.byteLength !== entry.nbytes) {
    throw new Error(`input ${name} must have shape [${entry.shape}] (${prod(entry.shape)} ` +
                    `elements), got ${data.length} elements`);
  }
}
