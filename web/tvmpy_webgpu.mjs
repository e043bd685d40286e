// The WebGPU path of tvmpy's web runtime: runs the "tvmpy.webgpu" program of an exported .wasm
// (docs/WEB_ARTEFACT.md) in a browser: one compute pipeline per WGSL kernel, the launch plans
// evaluated once per graph node (shapes are static in a graph), the whole graph one command
// buffer of dispatches. The file is read by tvmpy_artefact.mjs, the loader shared with the wasm
// path.

import { ARRAYS, checkInput, dtypeBytes, planGraph, readArtefact } from "./tvmpy_artefact.mjs";

const BUF = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
const pad4 = (n) => Math.max(16, Math.ceil(n / 4) * 4);  // docs/WEB_ARTEFACT.md: sizes

// A WebGPU device with what the program needs; throws naming the missing feature or limit.
export async function requestDevice(program, adapterOptions = {}) {
  if (typeof navigator === "undefined" || !navigator.gpu) {
    throw new Error("WebGPU is not available here (no navigator.gpu: an old browser, an " +
                    "insecure context, or WebGPU disabled)");
  }
  const adapter = await navigator.gpu.requestAdapter(adapterOptions);
  if (!adapter) throw new Error("WebGPU: no adapter (navigator.gpu.requestAdapter() gave null)");
  const requiredFeatures = [];
  for (const f of program.features || []) {
    if (!adapter.features.has(f)) throw new Error(`WebGPU: the model needs feature ${f}, which this adapter lacks`);
    requiredFeatures.push(f);
  }
  const requiredLimits = {};
  for (const [k, v] of Object.entries(program.limits || {})) {
    if (!(k in adapter.limits)) throw new Error(`WebGPU: unknown limit ${k}`);
    if (adapter.limits[k] < v) {
      throw new Error(`WebGPU: the model needs ${k} >= ${v}, this adapter has ${adapter.limits[k]}`);
    }
    requiredLimits[k] = v;
  }
  const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
  device.addEventListener("uncapturederror", (e) => console.error(`tvmpy WebGPU error: ${e.error.message}`));
  device.lost.then((info) => { if (info.reason !== "destroyed") console.error(`tvmpy WebGPU device lost: ${info.message}`); });
  return device;
}

// ---- launch-plan expressions (gpu_source.py's JSON) -------------------------------------------
const INT_DIV = { floordiv: (a, b) => Math.floor(a / b), truncdiv: (a, b) => Math.trunc(a / b) };
const BINOPS = {
  "+": (a, b) => a + b, "-": (a, b) => a - b, "*": (a, b) => a * b,
  floordiv: INT_DIV.floordiv, truncdiv: INT_DIV.truncdiv,
  floormod: (a, b) => a - Math.floor(a / b) * b, truncmod: (a, b) => a % b,
  min: Math.min, max: Math.max, "==": (a, b) => a === b, "!=": (a, b) => a !== b,
  "<": (a, b) => a < b, "<=": (a, b) => a <= b, ">": (a, b) => a > b, ">=": (a, b) => a >= b,
  and: (a, b) => a && b, or: (a, b) => a || b,
};

export function evalExpr(e, env) {
  if (typeof e === "number" || typeof e === "boolean") return e;
  if (typeof e === "string") {
    if (!(e in env)) throw new Error(`launch plan: unbound name ${e}`);
    return env[e];
  }
  if (!Array.isArray(e)) {
    if (e && "float" in e) return e.float;
    throw new Error(`launch plan: bad expression ${JSON.stringify(e)}`);
  }
  const [op, ...xs] = e;
  if (op === "not") return !evalExpr(xs[0], env);
  if (op === "select") return evalExpr(xs[0], env) ? evalExpr(xs[1], env) : evalExpr(xs[2], env);
  if (op === "cast") {
    const v = Number(evalExpr(xs[1], env));
    return /^(u?int|bool)/.test(xs[0]) ? Math.trunc(v) : v;
  }
  const f = BINOPS[op];
  if (!f) throw new Error(`launch plan: unknown operator ${op}`);
  return f(evalExpr(xs[0], env), evalExpr(xs[1], env));
}

const INT32_MIN = -(2 ** 31), INT32_MAX = 2 ** 31 - 1;

// int64 is computed in 32 bits on WebGPU (docs/WEB_ARTEFACT.md): refuse what does not fit
function checkInt64(what, data) {
  if (!(data instanceof BigInt64Array)) return;
  for (const v of data) {
    if (v < BigInt(INT32_MIN) || v > BigInt(INT32_MAX)) {
      throw new Error(`${what}: int64 value ${v} is outside the int32 range that WebGPU computes in`);
    }
  }
}

function writeScalar(view, offset, dtype, v) {
  if (dtype === "int64" && (v < INT32_MIN || v > INT32_MAX)) {
    throw new Error(`int64 scalar ${v} is outside the int32 range that WebGPU computes in`);
  }
  if (dtype === "float32") view.setFloat32(offset, v, true);
  else if (dtype === "uint32") view.setUint32(offset, v, true);
  else view.setInt32(offset, v, true);
}

export class WebGPUModule {
  // device: a GPUDevice (requestDevice); program: the tvmpy.webgpu JSON; params: parsed
  static async create(program, params, device) {
    const m = new WebGPUModule(program, params, device);
    await m.compile();
    return m;
  }

  constructor(program, params, device) {
    this.program = program;
    this.params = params || {};
    this.device = device;
    this.functions = Object.fromEntries(program.plan.functions.map((f) => [f.name, f]));
    this.pipelines = {};
  }

  // One pipeline per kernel; a kernel that fails to compile is named with the compiler's message.
  async compile() {
    const d = this.device;
    await Promise.all(Object.entries(this.program.kernels).map(async ([name, k]) => {
      d.pushErrorScope("validation");
      const shader = d.createShaderModule({ code: k.wgsl, label: name });
      const info = await shader.getCompilationInfo();
      const errs = info.messages.filter((m) => m.type === "error");
      const scopeErr = await d.popErrorScope();
      if (errs.length || scopeErr) {
        const text = errs.map((m) => `line ${m.lineNum}:${m.linePos}: ${m.message}`).join("; ");
        throw new Error(`WebGPU kernel ${name} failed to compile: ${text || scopeErr.message}`);
      }
      try {
        this.pipelines[name] = await d.createComputePipelineAsync({
          label: name, layout: "auto", compute: { module: shader, entryPoint: k.entry_point || "main" },
        });
      } catch (e) {
        throw new Error(`WebGPU kernel ${name}: creating its pipeline failed: ${e.message}`);
      }
    }));
  }

  buffer(nbytes, label) {
    return this.device.createBuffer({ size: pad4(nbytes), usage: BUF(), label });
  }

  // The dispatches of plan function fname on the buffers bufs (one per SIG param, in order) and
  // the arrays' shapes (to bind shape vars); scalars: numbers in bufs. Evaluated once, replayed.
  record(fname, bufs, shapes) {
    const fn = this.functions[fname];
    if (!fn) throw new Error(`the WebGPU program has no function ${fname}`);
    const sig = fn.signature, env = {}, named = {};
    if (bufs.length !== sig.params.length) {
      throw new Error(`${fname} takes ${sig.params.length} arguments, got ${bufs.length}`);
    }
    sig.params.forEach((p, i) => {
      if (p.kind !== "buffer") { env[p.name] = bufs[i]; return; }
      named[p.name] = bufs[i];
      (p.shape || []).forEach((dim, d) => {
        if (typeof dim === "string") env[dim] = shapes[i][d];
        else if (shapes[i] && shapes[i][d] !== dim) {
          throw new Error(`${fname}: argument ${p.name} has shape [${shapes[i]}], expected [${p.shape}]`);
        }
      });
    });
    const out = [];
    const walk = (steps) => {
      for (const s of steps) {
        if ("let" in s) env[s.let] = evalExpr(s.value, env);
        else if ("assert" in s) { if (!evalExpr(s.assert, env)) throw new Error(`${fname}: ${s.message}`); }
        else if ("alloc" in s) {
          const n = evalExpr(s.size, env) * (s.lanes || 1) * dtypeBytes(s.dtype);
          named[s.alloc] = this.buffer(n, `${fname}.${s.alloc}`);
        } else if ("loop" in s) {
          const lo = evalExpr(s.min, env), n = evalExpr(s.extent, env);
          for (let i = lo; i < lo + n; i++) { env[s.loop] = i; walk(s.body); }
        } else if ("launch" in s) {
          const d = this.dispatch(fname, s, env, named);
          if (d) out.push(d);
        } else throw new Error(`${fname}: unknown launch-plan step ${JSON.stringify(s)}`);
      }
    };
    walk(fn.steps);
    return out;
  }

  dispatch(fname, s, env, named) {
    const kernel = this.program.kernels[s.launch], pipeline = this.pipelines[s.launch];
    if (!kernel) throw new Error(`${fname} launches ${s.launch}, which the program lacks`);
    const grid = s.grid.map((g) => evalExpr(g, env));
    if (grid.some((g) => g === 0)) return null;
    const max = this.device.limits.maxComputeWorkgroupsPerDimension;
    if (grid.some((g) => g > max)) {
      throw new Error(`kernel ${s.launch}: grid [${grid}] exceeds maxComputeWorkgroupsPerDimension ${max}`);
    }
    const entries = [];
    let uniform = null;
    if (kernel.uniform) uniform = new DataView(new ArrayBuffer(kernel.uniform.size));
    s.args.forEach((a, i) => {
      const spec = kernel.args[i];
      if (spec.kind === "buffer") {
        const buf = named[a.buf];
        if (!buf) throw new Error(`kernel ${s.launch}: no buffer ${a.buf}`);
        entries.push({ binding: spec.binding, resource: { buffer: buf } });
      } else {
        writeScalar(uniform, spec.offset, spec.dtype, evalExpr(a.scalar, env));
      }
    });
    if (uniform) {
      const ub = this.device.createBuffer({
        size: uniform.byteLength, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST,
      });
      this.device.queue.writeBuffer(ub, 0, uniform.buffer);
      entries.push({ binding: kernel.uniform.binding, resource: { buffer: ub } });
    }
    const bindGroup = this.device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0), entries, label: s.launch,
    });
    return { pipeline, bindGroup, grid, kernel: s.launch };
  }

  // dispatches, in order; {copy: [src, dst, nbytes]} items copy a buffer between them
  submit(dispatches) {
    const enc = this.device.createCommandEncoder();
    let pass = null;
    for (const d of dispatches) {
      if (d.copy) {
        if (pass) { pass.end(); pass = null; }
        enc.copyBufferToBuffer(d.copy[0], 0, d.copy[1], 0, pad4(d.copy[2]));
        continue;
      }
      if (!pass) pass = enc.beginComputePass();
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, d.bindGroup);
      pass.dispatchWorkgroups(...d.grid);
    }
    if (pass) pass.end();
    this.device.queue.submit([enc.finish()]);
  }

  async read(buf, nbytes, dtype) {
    const staging = this.device.createBuffer({
      size: pad4(nbytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const enc = this.device.createCommandEncoder();
    enc.copyBufferToBuffer(buf, 0, staging, 0, pad4(nbytes));
    this.device.queue.submit([enc.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    const bytes = staging.getMappedRange().slice(0, nbytes);
    staging.unmap();
    staging.destroy();
    return new ARRAYS[dtype](bytes);
  }

  // the bytes of a typed array (narrow dtypes: packed as they are), padded to 4 bytes
  upload(buf, data) {
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    let padded = bytes;
    if (bytes.byteLength % 4) {
      padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      padded.set(bytes);
    }
    this.device.queue.writeBuffer(buf, 0, padded);
  }

  // A kernel build: call plan function name on typed arrays ({data, shape} for n-d); arrays the
  // kernel writes are copied back. Resolves when the GPU is done.
  async call(name, ...args) {
    const fn = this.functions[name];
    if (!fn) throw new Error(`module has no function ${name}`);
    const sig = fn.signature, bufs = [], shapes = [], back = [];
    sig.params.forEach((p, i) => {
      if (p.kind !== "buffer") { bufs.push(args[i]); shapes.push(null); return; }
      const a = args[i] && args[i].data ? args[i] : { data: args[i], shape: [args[i].length] };
      if (!(a.data instanceof ARRAYS[p.dtype])) {
        throw new Error(`${name}: argument ${p.name} must be a ${ARRAYS[p.dtype].name} (${p.dtype})`);
      }
      checkInt64(`${name}: argument ${p.name}`, a.data);
      const buf = this.buffer(a.data.byteLength, p.name);
      this.upload(buf, a.data);
      bufs.push(buf); shapes.push(a.shape);
      if (p.written) back.push([buf, a.data]);
    });
    this.submit(this.record(name, bufs, shapes));
    for (const [buf, data] of back) data.set(await this.read(buf, data.byteLength, ARRAYS_DTYPE(data)));
    for (const b of bufs) if (b instanceof GPUBuffer) b.destroy();
  }

  createGraphExecutor() {
    if (!this.program.graph) throw new Error("not a graph module (the WebGPU program has no graph)");
    return new WebGPUGraphExecutor(this, JSON.parse(this.program.graph));
  }
}

const ARRAYS_DTYPE = (data) => Object.keys(ARRAYS).find((k) => data instanceof ARRAYS[k]);

// Runs a graph on the GPU: one buffer per storage id, every node's dispatches recorded once.
export class WebGPUGraphExecutor {
  constructor(mod, graph) {
    this.mod = mod;
    const plan = planGraph(graph);
    const bufs = plan.storage.map((n, sid) => mod.buffer(n, `storage${sid}`));
    this.entries = plan.entries.map((e) => ({ ...e, buf: bufs[e.sid] }));
    this.inputs = {};
    for (const [name, e] of Object.entries(plan.inputs)) this.inputs[name] = this.entries[e];
    this.outputs = plan.outputs.map((e) => this.entries[e]);
    this.dispatches = [];
    for (const { node, func, entries } of plan.calls) {
      const ents = entries.map((e) => this.entries[e]);
      if (func === "__copy") { this.dispatches.push({ copy: [ents[0].buf, ents[1].buf, ents[0].nbytes] }); continue; }
      try {
        this.dispatches.push(...mod.record(func, ents.map((e) => e.buf), ents.map((e) => e.shape)));
      } catch (e) {
        throw new Error(`graph node ${node}: ${e.message}`);
      }
    }
    for (const [name, p] of Object.entries(mod.params)) {
      if (name in this.inputs) mod.upload(this.inputs[name].buf, p.bytes);
    }
  }

  // the graph's inputs that are not parameters (which the file sets itself)
  inputNames() { return Object.keys(this.inputs).filter((n) => !(n in (this.mod.params))); }

  setInput(name, data) {
    const e = this.inputs[name];
    if (!e) throw new Error(`no input ${name}; inputs: ${this.inputNames().join(", ")}`);
    checkInput(name, e, data);
    checkInt64(`input ${name}`, data);
    this.mod.upload(e.buf, data);
  }

  // Resolves when the GPU has finished the graph.
  async run() {
    this.mod.submit(this.dispatches);
    await this.mod.device.queue.onSubmittedWorkDone();
  }

  async getOutput(i) {
    const e = this.outputs[i];
    if (!e) throw new Error(`no output ${i}; the model has ${this.outputs.length}`);
    return this.mod.read(e.buf, e.nbytes, e.dtype);
  }
}

// source: bytes, a URL or an artefact from readArtefact
export async function loadTvmpyWebGPU(source, device = null) {
  const art = source && source.module instanceof WebAssembly.Module ? source : await readArtefact(source);
  if (!art.webgpu) throw new Error("this file has no WebGPU program (no tvmpy.webgpu section)");
  return WebGPUModule.create(art.webgpu, art.webgpuParams, device || await requestDevice(art.webgpu));
}
