// The bundle's page: pick (or drop) a model, feed it (random tensor, image file, drawing) and
// show outputs, timings and which provider ran each node. State for tests and curious users:
// `window.onnxedgeApp` (session, lastInput, lastOutputs, error) and body[data-state]
// ("loading", "ready", "running", "done", "error"). Opened as file:// the page cannot load
// Pyodide: index.html's inline script says so (and which command serves it) and this module
// (which browsers do not even run there) stops.
import * as onnxedge from "./onnxedge.js";

const $ = (id) => document.getElementById(id);
const app = { manifest: null, session: null, model: null, page: {}, lastInput: null,
              lastOutputs: null, error: null, timings: {}, runs: 0, loaded: false,
              loadLog: [] };   // [step, state, bar value] of the first load
window.onnxedgeApp = app;
window.onnxedge = onnxedge;

function setState(state, text) {
  document.body.dataset.state = state;
  if (text) $("status").textContent = text;
}

function showError(e) {
  failLoading();
  app.error = { name: e.name, message: e.message };
  $("error").hidden = false;
  $("error").textContent = (e.name && e.name !== "Error" ? e.name + ": " : "") + e.message;
  setState("error", "error");
}

// ------------------------------------------------------------------ the first-load progress

const STEPS = ["pyodide", "wheel", "numpy", "model"];

// Mark a start-up step ('pyodide', 'wheel', 'numpy' from onnxedge.env.onprogress; 'model' from
// the first model open) as started, done or failed, and move the bar.
function markStep(step, state) {
  if (app.loaded) return;
  const li = document.querySelector("#load-steps li[data-step='" + step + "']");
  if (!li) return;
  li.className = state === "start" ? "active" : state;
  const done = document.querySelectorAll("#load-steps li.done").length;
  const active = document.querySelectorAll("#load-steps li.active").length;
  $("load-bar").value = Math.min(STEPS.length, done + 0.5 * active);
  $("load-bar").textContent = done + " of " + STEPS.length;
  app.loadLog.push([step, state, $("load-bar").value]);
}

function finishLoading() {
  if (app.loaded) return;
  app.loaded = true;
  $("loading").hidden = true;
}

function failLoading() {
  for (const li of document.querySelectorAll("#load-steps li.active")) li.className = "failed";
}

function clearError() {
  app.error = null;
  $("error").hidden = true;
  $("error").textContent = "";
}

function row(cells, tag = "td") {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement(tag);
    if (c instanceof Node) td.appendChild(c); else td.textContent = c;
    tr.appendChild(td);
  }
  return tr;
}

// a shape as "[batch, 1, 8, 8]" (spaces let a narrow table wrap between dims, never inside one)
function fmtShape(shape) {
  return shape === null || shape === undefined ? "?" : "[" + shape.map((d) => (d === null ? "?" : d)).join(", ") + "]";
}

// wrap a table in a horizontally scrollable box (a wide table scrolls; words never break)
function scrollBox(table) {
  const box = document.createElement("div");
  box.className = "scroll";
  box.appendChild(table);
  return box;
}

function fmtMs(ms) { return ms === undefined || ms === null ? "-" : ms.toFixed(ms < 10 ? 2 : 1) + " ms"; }

function showTimings() {
  const t = $("timings");
  t.replaceChildren();
  const env = onnxedge.env.timings;
  const items = [["Pyodide start", env.pyodideMs], ["install onnxedge wheels", env.wheelsMs],
                 ["load numpy (beside the wheels)", env.numpyMs], ["page load → onnxedge ready", app.timings.readyMs],
                 ["model fetch", app.timings.fetchMs], ["session creation", app.timings.createMs],
                 ["run (in Python)", app.session && app.session.lastRun && app.session.lastRun.runMs],
                 ["run (JS call, copies included)", app.session && app.session.lastRun && app.session.lastRun.totalMs]];
  for (const [name, ms] of items) if (ms !== undefined && ms !== null) t.appendChild(row([name, fmtMs(ms)]));
}

function showPartition() {
  const t = $("partition");
  t.replaceChildren();
  if (!app.session) return;
  t.appendChild(row(["node", "op", "provider"], "th"));
  for (const r of app.session.partition()) {
    const tr = row([r.node, (r.domain && r.domain !== "ai.onnx" ? r.domain + "." : "") + r.opType, r.provider]);
    tr.className = "node";
    tr.dataset.provider = r.provider;
    t.appendChild(tr);
  }
}

// ---------------------------------------------------------------- the model's page settings

function pageSettings(session, entry) {
  if (entry && entry.page) return entry.page;
  const raw = session.metadata && session.metadata["onnxedge.page"];
  if (!raw) return {};
  try {
    const page = JSON.parse(raw);
    return page && typeof page === "object" ? page : {};
  } catch (e) {
    return {};
  }
}

function concreteDims(shape) {
  return (shape || [1]).map((d) => (typeof d === "number" && d > 0 ? d : 1));
}

function imageInput() {
  const meta = app.session.inputMetadata;
  const want = app.page.image && app.page.image.input;
  return meta.find((m) => m.name === want) || meta.find((m) => (m.shape || []).length === 4) || null;
}

// --------------------------------------------------------------------------- opening models

// Forget the previous model's view: outputs, model info, partition, timings, inputs, preview.
function clearModelView() {
  app.model = null;
  app.page = {};
  app.lastInput = null;
  app.lastOutputs = null;
  app.timings.fetchMs = app.timings.createMs = undefined;
  $("outputs").replaceChildren();
  $("model-info").replaceChildren();
  showPartition();
  showTimings();
  clearPreview();
  $("random-box").hidden = true;
}

async function openModel(source, entry) {
  clearError();
  setState("loading", "opening " + (entry ? entry.name : "model") + "…");
  $("run").disabled = true;
  try {
    if (app.session) { const old = app.session; app.session = null; await old.release(); }
    clearModelView();
    await onnxedge.ready();
    offerOnnx();
    if (app.timings.readyMs === undefined) app.timings.readyMs = performance.now();
    markStep("model", "start");
    let bytes = source;
    const t1 = performance.now();
    if (typeof source === "string") {
      const resp = await fetch(source);
      if (!resp.ok) throw new Error("model " + source + ": HTTP " + resp.status);
      bytes = new Uint8Array(await resp.arrayBuffer());
    }
    app.timings.fetchMs = performance.now() - t1;
    const t2 = performance.now();
    const provider = $("provider").value || "wasm";
    app.session = await onnxedge.InferenceSession.create(bytes, { executionProviders: [provider] });
    app.timings.createMs = performance.now() - t2;
    app.model = entry ? entry.name : "dropped model";
    app.page = pageSettings(app.session, entry);
    describeModel();
    setMode(app.page.image ? "draw" : "random");
    showPartition();
    showTimings();
    $("run").disabled = false;
    markStep("model", "done");
    finishLoading();
    // the wasm kernels run nodes when asked for, and as the C engine in front of 'cpu'
    const wasmNote = app.session.partition().some((r) => r.provider === "WasmSimdExecutionProvider") && onnxedge.env.wasm.note
      ? "; wasm SIMD kernels: " + onnxedge.env.wasm.note : "";
    const skipped = app.session.skippedProviders.length
      ? "; skipped " + app.session.skippedProviders.map((p) => p.name + " (" + p.reason + ")").join(", ") : "";
    setState("ready", "ready: " + app.model + " (" + app.session.providers.join(", ") + ")" + wasmNote + skipped);
  } catch (e) {
    showError(e);
  }
}

function describeModel() {
  const info = $("model-info");
  info.replaceChildren();
  const t = document.createElement("table");
  t.appendChild(row(["", "name", "type", "shape"], "th"));
  for (const m of app.session.inputMetadata) t.appendChild(row(["input", m.name, m.type, fmtShape(m.shape)]));
  for (const m of app.session.outputMetadata) t.appendChild(row(["output", m.name, m.type, fmtShape(m.shape)]));
  info.appendChild(scrollBox(t));
}

// The file picker offers .onnx only when onnxedge in this page can open it (a reduced build
// without an .onnx reader opens .oxe alone).
function offerOnnx() {
  const versions = onnxedge.env.versions;
  const kinds = versions && versions.opensOnnx ? ".oxe,.onnx" : ".oxe";
  $("model-file").accept = kinds;
  $("model-kinds").textContent = kinds.split(",").join(" / ");
}

// ------------------------------------------------------------------------------- the inputs

function setMode(mode) {
  for (const r of document.querySelectorAll("input[name=mode]")) r.checked = r.value === mode;
  $("draw-box").hidden = mode !== "draw";
  $("image-box").hidden = mode !== "image";
  clearPreview();
  describeRandom(mode);
}

// The random mode's box: which inputs get a random tensor (shown in random mode, and in the
// other modes for the inputs the canvas or image does not fill).
function describeRandom(mode) {
  const box = $("random-box");
  const target = app.session && mode !== "random" ? imageInput() : null;
  const inputs = app.session ? app.session.inputMetadata.filter((m) => !target || m.name !== target.name) : [];
  box.hidden = inputs.length === 0;
  const list = $("random-inputs");
  list.replaceChildren();
  for (const m of inputs) {
    const li = document.createElement("li");
    li.textContent = m.name + " " + m.type + " " + fmtShape(concreteDims(m.shape));
    list.appendChild(li);
  }
}

function mode() {
  return document.querySelector("input[name=mode]:checked").value;
}

function randomTensor(m) {
  const dims = concreteDims(m.shape);
  const n = dims.reduce((a, b) => a * b, 1);
  const type = m.type;
  if (type === "float32" || type === "float64") {
    const data = new (type === "float32" ? Float32Array : Float64Array)(n);
    for (let i = 0; i < n; i++) {   // standard normal (Box-Muller)
      data[i] = Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random());
    }
    return new onnxedge.Tensor(type, data, dims);
  }
  const values = Array.from({ length: n }, () => Math.floor(Math.random() * (type === "bool" ? 2 : 10)));
  return new onnxedge.Tensor(type, values, dims);
}

// Pixels of `src` (a canvas) averaged into an H x W grid per channel, as the model's NCHW input.
function pixelsToTensor(src, m, settings) {
  const dims = concreteDims(m.shape);
  const [c, h, w] = [dims[1] || 1, dims[2] || 1, dims[3] || 1];
  const ctx = src.getContext("2d", { willReadFrequently: true });
  const px = ctx.getImageData(0, 0, src.width, src.height).data;
  const [lo, hi] = settings.range || [0, 1];
  const data = new Float32Array(c * h * w);
  for (let y = 0; y < h; y++) {
    const y0 = Math.floor(y * src.height / h), y1 = Math.floor((y + 1) * src.height / h);
    for (let x = 0; x < w; x++) {
      const x0 = Math.floor(x * src.width / w), x1 = Math.floor((x + 1) * src.width / w);
      const sum = [0, 0, 0];
      for (let yy = y0; yy < y1; yy++) {
        for (let xx = x0; xx < x1; xx++) {
          const i = (yy * src.width + xx) * 4;
          sum[0] += px[i]; sum[1] += px[i + 1]; sum[2] += px[i + 2];
        }
      }
      const count = Math.max(1, (y1 - y0) * (x1 - x0));
      for (let ch = 0; ch < c; ch++) {
        let v = c === 1 ? (sum[0] + sum[1] + sum[2]) / (3 * 255 * count) : sum[Math.min(ch, 2)] / (255 * count);
        if (settings.ink) v = 1 - v;
        data[(ch * h + y) * w + x] = lo + v * (hi - lo);
      }
    }
  }
  drawPreview(data, c, h, w, lo, hi);
  return new onnxedge.Tensor("float32", data, [1, c, h, w]);
}

function clearPreview() {
  const p = $("preview");
  p.getContext("2d").clearRect(0, 0, p.width, p.height);
  $("preview-box").hidden = true;
}

function drawPreview(data, c, h, w, lo, hi) {
  $("preview-box").hidden = false;
  $("preview-caption").textContent = "what the model sees (" + w + "×" + h + ")";
  const p = $("preview");
  p.width = w; p.height = h;
  const ctx = p.getContext("2d");
  const img = ctx.createImageData(w, h);
  for (let i = 0; i < h * w; i++) {
    for (let ch = 0; ch < 3; ch++) {
      const v = (data[Math.min(ch, c - 1) * h * w + i] - lo) / ((hi - lo) || 1);
      img.data[i * 4 + ch] = 255 * (app.page.image && app.page.image.ink ? 1 - v : v);
    }
    img.data[i * 4 + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

async function imageFileCanvas(file) {
  const url = URL.createObjectURL(file);
  try {
    const img = new Image();
    await new Promise((resolve, reject) => { img.onload = resolve; img.onerror = () => reject(new Error("cannot read image " + file.name)); img.src = url; });
    const cv = document.createElement("canvas");
    cv.width = img.naturalWidth; cv.height = img.naturalHeight;
    cv.getContext("2d", { willReadFrequently: true }).drawImage(img, 0, 0);
    return cv;
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function makeFeeds() {
  const feeds = {};
  const settings = Object.assign({ range: [0, 1], ink: false }, app.page.image || {});
  const target = imageInput();
  for (const m of app.session.inputMetadata) {
    if (target && m.name === target.name && mode() === "draw") {
      feeds[m.name] = pixelsToTensor($("canvas"), m, settings);
    } else if (target && m.name === target.name && mode() === "image") {
      const file = $("image-file").files[0];
      if (!file) throw new Error("choose an image file for input '" + m.name + "'");
      feeds[m.name] = pixelsToTensor(await imageFileCanvas(file), m, settings);
    } else {
      feeds[m.name] = randomTensor(m);
    }
  }
  return feeds;
}

// ------------------------------------------------------------------------------ the outputs

function asNumbers(t) {
  return Array.from(t.data, Number);
}

function probabilities(values) {
  const sum = values.reduce((a, b) => a + b, 0);
  if (values.every((v) => v >= 0 && v <= 1) && Math.abs(sum - 1) < 1e-3) return values;
  const mx = Math.max(...values);
  const e = values.map((v) => Math.exp(v - mx));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

// Whether output `name` holds class scores, as the model's page settings say: `classes` (true:
// every float [1, N] / [N] output; or an output name, or a list of them) or `labels` (one per
// class: the float [1, N] / [N] outputs with that many values). Other outputs show raw values.
function isClassScores(name, t) {
  const vector = t.type.startsWith("float") && t.size > 1 && t.dims.length >= 1 &&
    t.dims.slice(0, -1).every((d) => d === 1);
  if (!vector) return false;
  const classes = app.page.classes;
  if (classes === true) return true;
  if (typeof classes === "string") return classes === name;
  if (Array.isArray(classes)) return classes.includes(name);
  return Array.isArray(app.page.labels) && app.page.labels.length === t.size;
}

function showOutputs(outputs) {
  const box = $("outputs");
  box.replaceChildren();
  const labels = Array.isArray(app.page.labels) ? app.page.labels : null;
  for (const [name, t] of Object.entries(outputs)) {
    const h = document.createElement("h3");
    h.textContent = name + " " + t.type + " " + fmtShape(t.dims);
    box.appendChild(h);
    const values = asNumbers(t);
    if (isClassScores(name, t)) {
      const probs = probabilities(values);
      const order = probs.map((p, i) => [p, i]).sort((a, b) => b[0] - a[0]).slice(0, 5);
      const table = document.createElement("table");
      table.className = "classes";
      for (const [p, i] of order) {
        const bar = document.createElement("span");
        bar.className = "bar";
        bar.style.width = Math.round(p * 150) + "px";
        const tr = row([labels && labels[i] !== undefined ? String(labels[i]) : "class " + i, (100 * p).toFixed(1) + " %", bar]);
        tr.className = "top-class";
        tr.dataset.index = i;
        tr.dataset.prob = p;
        table.appendChild(tr);
      }
      box.appendChild(scrollBox(table));
    } else {
      const pre = document.createElement("pre");
      pre.className = "values";
      pre.textContent = values.slice(0, 32).map((v) => +v.toPrecision(5)).join(", ") + (values.length > 32 ? ", … (" + values.length + " values)" : "");
      box.appendChild(pre);
    }
  }
}

async function runModel() {
  clearError();
  setState("running", "running…");
  try {
    const feeds = await makeFeeds();
    app.lastInput = Object.fromEntries(Object.entries(feeds).map(([k, t]) => [k, { type: t.type, dims: t.dims, data: Array.from(t.data, Number) }]));
    const outputs = await app.session.run(feeds);
    app.lastOutputs = Object.fromEntries(Object.entries(outputs).map(([k, t]) => [k, { type: t.type, dims: t.dims, data: Array.from(t.data, Number) }]));
    app.runs += 1;
    showOutputs(outputs);
    showTimings();
    setState("done", "done: " + app.model);
  } catch (e) {
    showError(e);
  }
}

// ---------------------------------------------------------------------------- the drawing

function setupCanvas() {
  const cv = $("canvas");
  const ctx = cv.getContext("2d", { willReadFrequently: true });   // each run reads it back
  const clear = () => { ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, cv.width, cv.height); };
  clear();
  let last = null;
  const pos = (e) => { const r = cv.getBoundingClientRect(); return [(e.clientX - r.left) * cv.width / r.width, (e.clientY - r.top) * cv.height / r.height]; };
  cv.addEventListener("pointerdown", (e) => { last = pos(e); cv.setPointerCapture(e.pointerId); stroke(last, last); });
  cv.addEventListener("pointermove", (e) => { if (last) { const p = pos(e); stroke(last, p); last = p; } });
  const up = () => { if (last) { last = null; if (app.session && app.page.image && $("run").disabled === false) runModel(); } };
  cv.addEventListener("pointerup", up);
  cv.addEventListener("pointercancel", up);
  function stroke(a, b) {
    ctx.strokeStyle = "#000"; ctx.lineWidth = cv.width / 6; ctx.lineCap = "round";
    ctx.beginPath(); ctx.moveTo(a[0], a[1]); ctx.lineTo(b[0], b[1]); ctx.stroke();
  }
  $("clear").addEventListener("click", clear);
}

// ------------------------------------------------------------------------------ start-up

async function main() {
  if (location.protocol === "file:") return;   // index.html says it needs a server
  onnxedge.env.onprogress = (p) => markStep(p.step, p.state);
  setupCanvas();
  for (const r of document.querySelectorAll("input[name=mode]")) r.addEventListener("change", () => setMode(mode()));
  $("run").addEventListener("click", runModel);
  $("model-file").addEventListener("change", async () => {
    const f = $("model-file").files[0];
    if (f) await openModel(new Uint8Array(await f.arrayBuffer()), null);
  });
  document.addEventListener("dragover", (e) => e.preventDefault());
  document.addEventListener("drop", async (e) => {
    e.preventDefault();
    const f = e.dataTransfer.files[0];
    if (f) await openModel(new Uint8Array(await f.arrayBuffer()), null);
  });
  try {
    app.manifest = await onnxedge.getManifest();   // the one fetch of bundle.json (onnxedge.js reuses it)
  } catch (e) {
    showError(e);
    return;
  }
  document.title = $("title").textContent = app.manifest.title;
  for (const p of app.manifest.providers) {
    const o = document.createElement("option");
    o.value = p; o.textContent = p;
    $("provider").appendChild(o);
  }
  for (const m of app.manifest.models) {
    const o = document.createElement("option");
    o.value = m.name; o.textContent = m.name + " (" + (m.bytes / 1024).toFixed(0) + " KB)";
    $("model").appendChild(o);
  }
  const pick = () => {
    const entry = app.manifest.models.find((m) => m.name === $("model").value);
    if (entry) return openModel(entry.file, entry);
  };
  $("model").addEventListener("change", pick);
  $("provider").addEventListener("change", pick);
  const wanted = new URLSearchParams(location.search).get("model");
  if (wanted && app.manifest.models.some((m) => m.name === wanted)) $("model").value = wanted;
  if (app.manifest.models.length) {
    await pick();
  } else {
    try {
      await onnxedge.ready();
      offerOnnx();
      finishLoading();
      setState("ready", "drop a model file to start");
    } catch (e) {
      showError(e);
    }
  }
}

main();
