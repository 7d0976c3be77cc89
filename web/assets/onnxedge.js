// onnxedge.js: ONNX inference in the page through Pyodide, with onnxruntime-web's API.
//
//   import * as onnxedge from './onnxedge.js';
//   const session = await onnxedge.InferenceSession.create('models/mlp.oxe',
//                                                          {executionProviders: ['wasm']});
//   const outputs = await session.run({input: new onnxedge.Tensor('float32', data, [1, 784])});
//   outputs.output.data   // Float32Array (or: await outputs.output.getData())
//
// As onnxruntime-web, executionProviders entries this page cannot run (a bundle built without
// WebGPU, a browser without navigator.gpu, an unknown name) are skipped with a console warning:
// `session.skippedProviders` says which and why, `session.partition()` which provider ran each node.
//
// Pyodide starts once, lazily, on the first create(): its location and the wheels to install
// come from `env` (by default from bundle.json beside this file, written by `onnxedge web build`).
// Errors reject with an Error whose message is onnxedge's own (its type in `error.name`).

const TYPED = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array, float16: Uint16Array,
};
// onnxruntime-web provider names -> onnxedge's (onnxedge's own names pass through); 'wasm' is
// the wasm SIMD kernels (then numpy for the rest) when the bundle has them, else numpy alone;
// 'cpu' gets the wasm kernels too, as natively the C engine goes before the CPU provider (unless
// the session option extra: {session: {cpu_engine: "0"}}: numpy alone)
const WASM_EP = "WasmSimdExecutionProvider";
const CPU_EP = "CPUExecutionProvider";
const PROVIDERS = { wasm: [WASM_EP, "CPUExecutionProvider"], cpu: ["CPUExecutionProvider"],
                    webgpu: ["WebGpuExecutionProvider"] };

/** Settings: where Pyodide and the wheels are (null: from bundle.json), log level, timings. */
export const env = {
  bundleURL: new URL("bundle.json", import.meta.url).href,
  runtimeURL: new URL("runtime.py", import.meta.url).href,
  pyodide: { indexURL: null, lock: null },
  wheels: null,
  logLevel: "warning",
  timings: {},
  versions: null,
  pyodideInstance: null,
  manifest: null,
  // called at each start-up step: {step: 'pyodide' | 'wheel' | 'numpy', state: 'start' | 'done'}
  onprogress: null,
  // the wasm SIMD kernels (web/wasm/oxk.js): numThreads as onnxruntime-web's (0: one per core when
  // the page is cross-origin isolated, else 1); script/baseURL null: from bundle.json;
  // after the first session that uses them: threads in use and the runtime's note;
  // timeoutMs: limit on the worker threads' start-up (0: onnxedge.web.init's 10 s)
  wasm: { numThreads: 0, script: null, baseURL: null, threads: null, note: null, timeoutMs: 0 },
};

const now = () => performance.now();
const log = (...args) => { if (env.logLevel === "verbose" || env.logLevel === "info") console.log("[onnxedge]", ...args); };

/** A tensor as onnxruntime-web's: `type` ('float32', 'int64', ...), `data` (a typed array),
 * `dims`, `size`, `location` ('cpu'; 'none' once disposed), `getData()`, `reshape()`, `dispose()`. */
export class Tensor {
  constructor(typeOrData, dataOrDims, maybeDims) {
    let type, data, dims;
    if (typeof typeOrData === "string") {
      [type, data, dims] = [typeOrData, dataOrDims, maybeDims];
    } else {
      data = typeOrData;
      dims = dataOrDims;
      type = Object.keys(TYPED).find((k) => k !== "bool" && k !== "float16" && data instanceof TYPED[k]);
      if (!type) throw new TypeError("Tensor: cannot tell the type of " + Object.prototype.toString.call(data) + ": give it, e.g. new Tensor('float32', data, dims)");
    }
    const Ctor = TYPED[type];
    if (!Ctor) throw new TypeError("Tensor type '" + type + "' is not supported: expected one of " + Object.keys(TYPED).join(", "));
    if (!(data instanceof Ctor)) {
      if (!Array.isArray(data) && !ArrayBuffer.isView(data)) throw new TypeError("Tensor data must be a typed array or an array, got " + typeof data);
      const list = Array.from(data);
      data = Ctor.from(Ctor === BigInt64Array || Ctor === BigUint64Array ? list.map(BigInt) : list.map(Number));
    }
    dims = dims === undefined || dims === null ? [data.length] : checkDims(dims);
    const size = dims.reduce((a, b) => a * b, 1);
    if (size !== data.length) throw new RangeError("Tensor dims [" + dims + "] hold " + size + " elements, data has " + data.length);
    this.type = type;
    this._data = data;
    this.dims = dims;
    this.size = size;
    this.location = "cpu";
  }

  /** The typed array (a TypeError once the tensor is disposed). */
  get data() {
    if (this.location !== "cpu") throw new TypeError("Tensor: its data was released by dispose()");
    return this._data;
  }

  /** onnxruntime-web's name for `data` on a CPU tensor. */
  get cpuData() { return this.data; }

  /** A Promise of the data (onnxruntime-web's habit for tensors that may live on a device);
   * `releaseData`: dispose of the tensor once the data is handed over. */
  async getData(releaseData = false) {
    const data = this.data;
    if (releaseData) this.dispose();
    return data;
  }

  /** A new Tensor of these dims over the same data (the element count must stay the same). */
  reshape(dims) {
    const shape = checkDims(dims);
    const size = shape.reduce((a, b) => a * b, 1);
    if (size !== this.size) throw new RangeError("Tensor.reshape: dims [" + shape + "] hold " + size + " elements, the tensor has " + this.size);
    return new Tensor(this.type, this.data, shape);
  }

  /** Release the data (onnxruntime-web's dispose): `location` becomes 'none'. */
  dispose() {
    this._data = null;
    this.location = "none";
  }
}

function checkDims(dims) {
  if (dims === null || typeof dims !== "object" || typeof dims.length !== "number") throw new TypeError("Tensor dims must be an array of non-negative integers, got " + dims);
  const out = Array.from(dims, Number);
  const bad = out.find((d) => !Number.isInteger(d) || d < 0);
  if (bad !== undefined) throw new TypeError("Tensor dims [" + out + "]: " + bad + " is not a non-negative integer");
  return out;
}

let pyodidePromise = null;
const calls = new Map();
let nextCall = 1;
globalThis.onnxedgeCalls = calls;   // runtime.py reads each call's arguments from here

function loadScript(url, what = "Pyodide") {
  if (typeof document === "undefined") {   // a Web Worker: classic workers have importScripts
    if (typeof importScripts !== "function") return Promise.reject(new Error("cannot load " + what + " from " + url + ": a module worker has no importScripts (load it before onnxedge.js)"));
    try { importScripts(url); } catch (e) { return Promise.reject(new Error("cannot load " + what + " from " + url + ": " + e.message)); }
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = url;
    s.onload = resolve;
    s.onerror = () => reject(new Error("cannot load " + what + " from " + url));
    document.head.appendChild(s);
  });
}

async function fetchBytes(url, what) {
  let resp;
  try {
    resp = await fetch(url);
  } catch (e) {
    throw new Error(what + " " + url + " cannot be fetched: " + e.message);
  }
  if (!resp.ok) throw new Error(what + " " + url + " cannot be fetched: HTTP " + resp.status);
  return new Uint8Array(await resp.arrayBuffer());
}

let manifestPromise = null;

/** The bundle's manifest (env.bundleURL, bundle.json), fetched once: later calls (the page's
 * and the start-up's) share the same promise. */
export function getManifest() {
  if (env.manifest) return Promise.resolve(env.manifest);
  if (!manifestPromise) {
    manifestPromise = (async () => {
      let resp;
      try {
        resp = await fetch(env.bundleURL);
      } catch (e) {
        throw new Error("bundle manifest " + env.bundleURL + " cannot be fetched: " + e.message);
      }
      if (!resp.ok) throw new Error("bundle manifest " + env.bundleURL + ": HTTP " + resp.status + " (set onnxedge.env.pyodide.indexURL and onnxedge.env.wheels instead)");
      env.manifest = await resp.json();
      return env.manifest;
    })();
    manifestPromise.catch(() => { manifestPromise = null; });
  }
  return manifestPromise;
}

// start-up progress for env.onprogress: {step: 'pyodide' | 'wheel' | 'numpy', state: 'start' | 'done'}
function progress(step, state) {
  if (typeof env.onprogress !== "function") return;
  try {
    env.onprogress({ step, state });
  } catch (e) {
    console.warn("[onnxedge] env.onprogress failed:", e);
  }
}

async function resolveEnv() {
  if (env.pyodide.indexURL && env.wheels) return;
  const m = await getManifest();
  env.pyodide.indexURL = env.pyodide.indexURL || new URL(m.pyodide.indexURL, env.bundleURL).href;
  if (env.pyodide.lock === null) env.pyodide.lock = !!m.pyodide.lock;
  env.wheels = env.wheels || m.wheels.map((w) => new URL(w, env.bundleURL).href);
  if (m.wasm && !env.wasm.script) {
    env.wasm.script = new URL(m.wasm.script, env.bundleURL).href;
    env.wasm.baseURL = env.wasm.baseURL || new URL(m.wasm.baseURL, env.bundleURL).href;
  }
}

let wasmPromise = null;

/** Load web/wasm/oxk.js and start its kernels once (env.wasm.numThreads threads) through
 * Python's `onnxedge.web.init`, the path a bare page, a Web Worker or a notebook takes too. */
function ensureWasm() {
  if (!wasmPromise) {
    wasmPromise = (async () => {
      if (!globalThis.onnxedgeWasm) await loadScript(env.wasm.script, "the wasm SIMD kernels");
      const res = await call("init", { threads: env.wasm.numThreads, baseURL: env.wasm.baseURL,
                                       timeoutMs: env.wasm.timeoutMs || 0 });
      const wasm = res.status.wasm || {};
      if (wasm.error) throw new Error(wasm.error);
      env.wasm.threads = wasm.threads;
      env.wasm.note = wasm.note;
      return globalThis.onnxedgeWasm;
    })();
    wasmPromise.catch(() => { wasmPromise = null; });
  }
  return wasmPromise;
}

async function startPyodide() {
  const t = {};
  let t0 = now();
  const start = t0;
  await resolveEnv();
  let indexURL = env.pyodide.indexURL;
  if (!indexURL.endsWith("/")) indexURL += "/";
  const viaLock = (url) => env.pyodide.lock && url.split("/").pop().startsWith("onnxedge-");
  // the runtime and the wheels download while Pyodide starts
  const downloads = Promise.all([fetchBytes(env.runtimeURL, "onnxedge runtime"),
    ...env.wheels.map((url) => (viaLock(url) ? null : fetchBytes(url, "wheel")))]);
  downloads.catch(() => {});
  if (env.wasm.script) {   // the wasm kernels download and compile while Pyodide starts
    const wasmScript = (globalThis.onnxedgeWasm ? Promise.resolve() : loadScript(env.wasm.script, "the wasm SIMD kernels"))
      .then(() => globalThis.onnxedgeWasm.preload({ baseURL: env.wasm.baseURL }));
    wasmScript.catch(() => {});   // ensureWasm loads it again and says why
  }
  progress("pyodide", "start");
  if (typeof globalThis.loadPyodide !== "function") await loadScript(indexURL + "pyodide.js");
  const pyodide = await globalThis.loadPyodide({ indexURL });
  env.pyodideInstance = pyodide;
  t.pyodideMs = now() - t0;
  env.timings = t;
  progress("pyodide", "done");
  log("Pyodide", pyodide.version || "0.17", "ready in", t.pyodideMs.toFixed(0), "ms");
  t0 = now();
  const numpy = pyodide.loadPackage(["numpy"]);   // loads while the wheels install
  numpy.catch(() => {});
  progress("wheel", "start");
  const [runtime, ...wheels] = await downloads;
  let t2 = now();
  pyodide.runPython("0");   // Pyodide's first runPython warms its evaluator up (tens of ms)
  t.pyodideWarmMs = now() - t2;
  t2 = now();
  // compile() straight away: runPython(text) parses the source twice (ast, then compile)
  globalThis.onnxedgeRuntimeSource = new TextDecoder().decode(runtime);
  pyodide.runPython("import js\nexec(compile(js.onnxedgeRuntimeSource, 'onnxedge-runtime.py', 'exec'), globals())");
  delete globalThis.onnxedgeRuntimeSource;
  t.runtimeMs = now() - t2;
  const install = pyodide.globals.get("install_wheel");
  for (let i = 0; i < env.wheels.length; i++) {
    if (wheels[i] === null) {
      await pyodide.loadPackage(["onnxedge"]);   // the wheel is registered in pyodide-lock.json
    } else {
      install(wheels[i], env.wheels[i].split("/").pop());
    }
  }
  if (install.destroy) install.destroy();
  t.installMs = now() - t2;   // onnxedge's own: runtime.py and unpacking the wheels
  t.wheelsMs = now() - t0;
  progress("wheel", "done");
  progress("numpy", "start");
  try {
    await numpy;
    pyodide.runPython("import numpy");
  } catch (e) {
    const lines = String(e.message || e).split("\n").filter((l) => /^\w+(Error|Exception): /.test(l));
    throw new Error("numpy cannot be loaded from this Pyodide distribution (" + indexURL + "): " +
                    "it has no numpy package (a core-only distribution such as npm `pyodide` ships none); " +
                    "add numpy's wheel there or build with --pyodide pointing at a full distribution" +
                    (lines.length ? " [" + lines[lines.length - 1] + "]" : ""));
  }
  t.numpyMs = now() - t0;
  progress("numpy", "done");
  const t3 = now();
  env.versions = JSON.parse(pyodide.runPython("oxe_versions()"));
  t.importMs = now() - t3;   // onnxedge's own: import onnxedge (and the .onnx reader's probe)
  t.totalMs = now() - start;
  env.timings = t;
  log("onnxedge ready", env.versions, t);
  return pyodide;
}

/** Start Pyodide with onnxedge (once; later calls return the same promise). */
export function ready() {
  if (!pyodidePromise) {
    pyodidePromise = startPyodide();
    pyodidePromise.catch(() => { pyodidePromise = null; });
  }
  return pyodidePromise;
}

let callSync = null;

// `sync`: the call never waits inside Python, so it skips runPythonAsync's event-loop round trip
async function call(op, args, sync = false) {
  const pyodide = await ready();
  const id = nextCall++;
  calls.set(id, Object.assign({ op }, args));
  let res;
  try {
    if (sync) {
      callSync = callSync || pyodide.globals.get("oxe_call_sync");
      res = callSync(id);
    } else {
      res = await pyodide.runPythonAsync("await oxe_call(" + id + ")");
    }
  } finally {
    calls.delete(id);
  }
  if (!res.ok) {
    const e = new Error(res.message);
    e.name = res.type;
    throw e;
  }
  return res;
}

// onnxruntime-web's SessionOptions.extra ({session: {cpu_engine: "0"}}) as session config
// entries ({"session.cpu_engine": "0"}): nested keys joined with dots, values as strings
function configEntries(extra, prefix = "", out = {}) {
  if (extra === undefined || extra === null) return out;
  if (typeof extra !== "object") throw new TypeError("SessionOptions.extra" + (prefix ? " key '" + prefix.slice(0, -1) + "'" : "") + ": expected an object, got " + typeof extra);
  for (const [k, v] of Object.entries(extra)) {
    if (v !== null && typeof v === "object") configEntries(v, prefix + k + ".", out);
    else out[prefix + k] = String(v);
  }
  return out;
}

function providerNames(list) {
  const names = [];
  for (const p of list || ["wasm"]) {
    const name = typeof p === "string" ? p : p && p.name;
    if (typeof name !== "string") throw new TypeError("executionProviders: " + JSON.stringify(p) + " is not a provider name");
    const mapped = (PROVIDERS[name.toLowerCase()] || [name]).filter((n) => n !== WASM_EP || env.wasm.script);
    for (const n of mapped) if (!names.includes(n)) names.push(n);
  }
  return names;
}

/** A model ready to run: `InferenceSession.create(urlOrBytes, options)`. */
export class InferenceSession {
  constructor(info) {
    this.id = info.id;
    this.inputMetadata = info.inputs.map((i) => ({ name: i.name, isTensor: true, type: i.type, shape: i.shape }));
    this.outputMetadata = info.outputs.map((o) => ({ name: o.name, isTensor: true, type: o.type, shape: o.shape }));
    this.inputNames = info.inputs.map((i) => i.name);
    this.outputNames = info.outputs.map((o) => o.name);
    this.providers = info.providers;
    this.metadata = info.metadata;
    this.createMs = info.createMs;
    this._sync = !!info.sync;   // no asynchronous step (CPU only): runs skip the event loop
    // programs Python compiled for this session, run straight from JS (signature key -> the
    // description Python published; see _runDirect)
    this._programs = new Map();
    /** Runs that went through Python (the others ran the session's wasm program from JS). */
    this.pythonRuns = 0;
    this.lastRun = null;
    this._partition = info.partition;
    // requested providers this page cannot run, skipped as onnxruntime-web skips unavailable
    // backends: [{name, reason}]
    this.skippedProviders = info.skipped || [];
    for (const s of this.skippedProviders) console.warn("[onnxedge] execution provider " + s.name + " skipped: " + s.reason);
  }

  /** Open a model (.oxe or .onnx bytes; a URL, an ArrayBuffer or a Uint8Array). */
  static async create(model, options = {}) {
    // a model URL downloads while Pyodide starts (the first create usually comes before it)
    const download = typeof model === "string" || model instanceof URL ?
      fetchBytes(new URL(String(model), location.href).href, "model") : null;
    if (download) download.catch(() => {});
    await ready();   // bundle.json says whether the wasm kernels are there
    const providers = providerNames(options.executionProviders);
    const config = configEntries(options.extra);
    const engine = env.wasm.script && providers.includes(CPU_EP) && config["session.cpu_engine"] !== "0";
    const t0 = now();
    if (providers.includes(WASM_EP) || engine) await ensureWasm();
    env.timings.wasmInitMs = (env.timings.wasmInitMs || 0) + now() - t0;   // onnxedge's own
    let bytes;
    if (download) {
      bytes = await download;
    } else if (model instanceof ArrayBuffer) {
      bytes = new Uint8Array(model);
    } else if (ArrayBuffer.isView(model)) {
      bytes = new Uint8Array(model.buffer, model.byteOffset, model.byteLength);
    } else {
      throw new TypeError("InferenceSession.create: expected a URL, an ArrayBuffer or a Uint8Array, got " + typeof model);
    }
    const res = await call("create", { model: bytes, providers: JSON.stringify(providers),
                                       config: JSON.stringify(config),
                                       graphOptimizationLevel: options.graphOptimizationLevel || null });
    return new InferenceSession(res.info);
  }

  /** Run: feeds {name: Tensor} -> {name: Tensor} (fetches: output names to return, or all).
   * When the whole session is one wasm step and Python compiled its program for these feeds'
   * names, types and dims (after the first run of that signature), the run stays in JS: the
   * feeds are copied into wasm memory, one oxk_program_run call, the outputs copied out
   * (`lastRun.direct` is true); any other run goes through Python. */
  async run(feeds, fetches) {
    if (!feeds || typeof feeds !== "object") throw new TypeError("run: feeds must be an object {name: Tensor}");
    const meta = { feeds: [], fetches: fetches ? (Array.isArray(fetches) ? fetches : Object.keys(fetches)) : null };
    for (const [name, t] of Object.entries(feeds)) {
      if (!(t instanceof Tensor)) throw new TypeError("input '" + name + "': expected an onnxedge.Tensor");
      meta.feeds.push({ name, type: t.type, dims: t.dims });
    }
    if (this._programs.size) {
      const direct = this._runDirect(feeds, meta);
      if (direct) return direct;
    }
    const buffers = meta.feeds.map(({ name }) => {
      const d = feeds[name].data;
      return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    });
    const t0 = now();
    this.pythonRuns++;
    const res = await call("run", { session: this.id, meta: JSON.stringify(meta), buffers,
                                    direct: this._sync }, this._sync);
    if (res.program) this._programs.set(programKey(res.program.inputs), res.program);
    const outputs = {};
    for (const o of res.outputs) {
      const Ctor = TYPED[o.type];
      if (!Ctor) throw new Error("output '" + o.name + "': type " + o.type + " has no typed array");
      const data = new Ctor(o.bytes.buffer, o.bytes.byteOffset, o.bytes.byteLength / Ctor.BYTES_PER_ELEMENT);
      outputs[o.name] = new Tensor(o.type, data, Array.from(o.dims));
    }
    this.lastRun = Object.assign({ totalMs: now() - t0, direct: false }, res.timings);
    return outputs;
  }

  // The run from JS of a program Python published for these feeds (null: none, or released)
  _runDirect(feeds, meta) {
    const key = programKey(meta.feeds);
    const p = this._programs.get(key);
    if (!p) return null;
    if (!p.valid) {   // Python released it (a new partition, too many signatures)
      this._programs.delete(key);
      return null;
    }
    const names = meta.fetches || this.outputNames;
    const which = [];
    for (const name of names) {
      const j = p.outputs.findIndex((o) => o.name === name);
      if (j < 0) return null;   // Python says why
      which.push(j);
    }
    const t0 = now();
    const data = globalThis.onnxedgeWasm.runProgram(p, p.inputs.map((i) => feeds[i.name].data), which);
    const outputs = {};
    which.forEach((j, k) => { outputs[p.outputs[j].name] = new Tensor("float32", data[k], p.outputs[j].dims.slice()); });
    const ms = now() - t0;
    this.lastRun = { totalMs: ms, runMs: ms, feedMs: 0, fetchMs: 0, direct: true };
    return outputs;
  }

  /** Which provider runs each node, and why the providers before it passed it over:
   * [{node, opType, domain, provider, reasons: {provider: reason}}]. `providers` lists the
   * providers the session has, `skippedProviders` the requested ones it could not use. */
  partition() {
    return this._partition.map((r) => Object.assign({}, r));
  }

  /** Free the session in the page's Python. */
  async release() {
    this._programs.clear();
    await call("release", { session: this.id });
  }
}

// A program's key: its inputs' names, types and dims (sorted by name); `list` holds a program's
// inputs {name, type, dims} or feeds {name, type, dims}
function programKey(list) {
  const rows = list.map((f) => [String(f.name), f.type || "float32", Array.from(f.dims, Number)]);
  return JSON.stringify(rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
}

/** The started Pyodide instance (starts it if needed): for running Python next to onnxedge. */
export async function getPyodide() {
  return ready();
}
