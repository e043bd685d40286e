// The demo page: draw a digit (or pick an image or a held-out sample), run the compiled digits
// classifier on each backend this browser has (wasm CPU, WebGPU), show top-5 and latency.
// window.tvmpyDemo is what tests/web drive: {ready, models, classify(pixels, backend)}.
import { loadModel, readArtefact } from "../tvmpy.mjs";

const SIZE = 8, LEVELS = 16;
const $ = (id) => document.getElementById(id);
const pad = $("pad"), ctx = pad.getContext("2d", { willReadFrequently: true });

function showError(msg) {
  console.error(`tvmpy demo: ${msg}`);
  $("errors").textContent += msg + "\n";
}

function clearPad() { ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, pad.width, pad.height); }

// the pad as the data set's 8x8 grey levels: 0 (white) .. 16 (black ink), area-averaged
function padPixels() {
  const { data } = ctx.getImageData(0, 0, pad.width, pad.height);
  const cell = pad.width / SIZE, out = new Float32Array(SIZE * SIZE);
  for (let y = 0; y < pad.height; y++) {
    for (let x = 0; x < pad.width; x++) {
      const i = 4 * (y * pad.width + x);
      const ink = 1 - (data[i] + data[i + 1] + data[i + 2]) / (3 * 255);
      out[Math.floor(y / cell) * SIZE + Math.floor(x / cell)] += ink;
    }
  }
  return out.map((v) => Math.round((v / (cell * cell)) * LEVELS));
}

function drawPixels(pixels, canvas = pad) {
  const c = canvas.getContext("2d"), cell = canvas.width / SIZE;
  for (let i = 0; i < SIZE * SIZE; i++) {
    const g = Math.round(255 * (1 - pixels[i] / LEVELS));
    c.fillStyle = `rgb(${g},${g},${g})`;
    c.fillRect((i % SIZE) * cell, Math.floor(i / SIZE) * cell, cell, cell);
  }
}

const models = {};
async function classify(pixels, backend) {
  const m = models[backend];
  if (!m) throw new Error(`backend ${backend} is not loaded`);
  m.setInput("input", Float32Array.from(pixels));
  await m.run();
  const output = await m.getOutput(0);
  const t = await m.benchmark({ warmup: 2, repeat: 5, minMs: 5 });
  return { output: Array.from(output), ms: t.median };
}

async function update() {
  const pixels = padPixels();
  for (const row of [...$("results").querySelectorAll("tr.res")]) row.remove();
  for (const backend of Object.keys(models)) {
    try {
      const { output, ms } = await classify(pixels, backend);
      const top = output.map((p, k) => [p, k]).sort((a, b) => b[0] - a[0]).slice(0, 5);
      const tr = document.createElement("tr");
      tr.className = "res";
      tr.innerHTML = `<td>${backend}</td><td>${top.map(([p, k]) => `<b>${k}</b> (${p.toFixed(3)})`).join(", ")}</td><td>${(ms * 1000).toFixed(0)} µs</td>`;
      $("results").appendChild(tr);
    } catch (e) { showError(`${backend}: ${e.message}`); }
  }
}

async function init() {
  const manifest = await (await fetch("build/manifest.json")).json();
  const samples = await (await fetch("build/samples.json")).json();
  $("model").textContent = `${manifest.model}, held-out accuracy ${(100 * manifest.accuracy).toFixed(1)}%; ` +
    "draw a digit (thick strokes fill the pad best), pick an image or click a sample.";
  const art = await readArtefact(`build/${manifest.file}`);  // one file, both paths
  models.wasm = await loadModel(art, { backend: "wasm" });
  const notes = ["wasm: the wasm32 SIMD build"];
  if (manifest.webgpu) {
    try {
      models.webgpu = await loadModel(art, { backend: "webgpu" });
      notes.push("webgpu: the WebGPU build");
    } catch (e) {
      notes.push(`webgpu: unavailable (${e.message})`);
      console.warn(`tvmpy demo: WebGPU unavailable: ${e.message}`);
    }
  } else notes.push(`webgpu: not built (${manifest.webgpu_error})`);
  $("backends").textContent = notes.join("; ");
  samples.images.forEach((img, i) => {
    const c = document.createElement("canvas");
    c.width = c.height = 32;
    c.title = `held-out sample, label ${samples.labels[i]}`;
    drawPixels(img, c);
    c.onclick = () => { drawPixels(img); update(); };
    $("samples").appendChild(c);
  });
  drawPixels(samples.images[0]);
  await update();
  return { manifest, samples };
}

let drawing = false;
const stroke = (e) => {
  const r = pad.getBoundingClientRect();
  ctx.fillStyle = "#000";
  ctx.beginPath();
  ctx.arc(e.clientX - r.left, e.clientY - r.top, 11, 0, 2 * Math.PI);
  ctx.fill();
};
pad.onpointerdown = (e) => { drawing = true; stroke(e); };
pad.onpointermove = (e) => { if (drawing) stroke(e); };
window.onpointerup = () => { if (drawing) { drawing = false; update(); } };
$("clear").onclick = () => clearPad();
$("file").onchange = async (e) => {
  const f = e.target.files[0];
  if (!f) return;
  try {
    const bmp = await createImageBitmap(f);
    clearPad();
    ctx.drawImage(bmp, 0, 0, pad.width, pad.height);
    await update();
  } catch (err) { showError(`cannot read ${f.name}: ${err.message}`); }
};

clearPad();
const ready = init().catch((e) => { showError(e.message); throw e; });
window.tvmpyDemo = { ready, models, classify, padPixels };
