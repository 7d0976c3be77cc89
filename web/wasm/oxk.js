/* oxk.js - onnxedge's wasm SIMD kernel library in the page: loads oxk.wasm (one thread, its own
 * memory) or oxk-mt.wasm (shared memory, one instance per Web Worker), and calls its kernels.
 *
 * A classic script: it defines globalThis.onnxedgeWasm (Python in Pyodide reaches it as
 * `js.onnxedgeWasm`), a Runtime ready after
 *     await onnxedgeWasm.init({baseURL: "wasm/", threads: 0});
 * or, with the modules' bytes instead of a URL (what `await onnxedge.web.init()` does from the
 * files inside the installed wheel; a page, a bare page and a Web Worker alike):
 *     await onnxedgeWasm.init({modules: {"oxk.wasm": u8, "oxk-mt.wasm": u8}, threads: 2});
 * Worker threads must report ready within `timeoutMs` (default 10000), else init falls back to
 * one thread and `note` says why.
 * threads 0 = auto: navigator.hardwareConcurrency when the page is cross-origin isolated (COOP/COEP,
 * so SharedArrayBuffer exists), else 1; a console line says which. Pointers are byte offsets into
 * `memory` (a WebAssembly.Memory that grows: make typed-array views after each allocation, or use
 * f32()/u8()). Plans are C structs (oxk.h's oxk_sgemm_plan, oxk_conv_plan, oxk_pool_plan) written
 * into memory by sgemmPlan()/convPlan()/poolPlan() at the offsets the module's own oxk_layout()
 * states (read at init: layout(), and layoutJSON() for Python; a module whose plan structs differ
 * from the fields written here is refused). programRun() runs a compiled oxk_program; runProgram() runs one
 * that Python described, copying tensors in and out (onnxedge.js's runs without Python). Run functions return the C status (0, or
 * OXK_EARG = -1 / OXK_ENOMEM = -2); when threads > 1 the C thread pool splits each kernel across
 * the workers (blocks of C for GEMM, panels/planes for conv and pools) with results bitwise equal
 * to one thread. See docs/providers/WASM.md.
 */
(function (global) {
  "use strict";

  const PAGE = 65536;
  const MT_INITIAL_PAGES = 256;      // 16 MiB; oxk-mt.wasm is linked with --initial-memory to match
  const MT_MAXIMUM_PAGES = 32768;    // 2 GiB; oxk-mt.wasm's --max-memory
  const WORKER_STACK = 1 << 20;      // bytes of stack per worker (the main instance has 1 MiB too)
  const MAX_AUTO_THREADS = 16;

  // The plan structs' fields as this runtime names them (camelCase); their offsets, sizes and
  // kinds come from the module's own oxk_layout() table (layout.c), read at init.
  const SGEMM_FIELDS = ["transA", "transB", "N", "K", "alpha", "beta", "packA", "packB", "bias",
                        "biasKind", "act", "p0", "p1"];
  const CONV_FIELDS = ["C", "H", "W", "Cout", "kh", "kw", "group", "sh", "sw", "dh", "dw", "pt", "pl",
                       "pb", "pr", "OH", "OW", "act", "path", "p0", "p1", "weight", "packW", "bias"];
  const POOL_FIELDS = ["H", "W", "kind", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "pb", "pr",
                       "countIncludePad", "OH", "OW"];
  const C_NAME = {biasKind: "bias_kind", countIncludePad: "count_include_pad"};
  const FLOATS = new Set(["alpha", "beta", "p0", "p1"]);
  // oxk_field on wasm32: type, field (pointers), offset, size, kind (ints): 20 bytes
  const FIELD_ROW = 20;

  // The module's layout table: [[struct, field ("" for the struct's own row), offset, size, kind]].
  function readLayout(exports, memory) {
    const countPtr = exports.oxk_malloc(4);
    const rows = [];
    try {
      const base = exports.oxk_layout(countPtr);
      const count = new DataView(memory.buffer).getInt32(countPtr, true);
      const dv = new DataView(memory.buffer);
      const str = (p) => {
        const b = new Uint8Array(memory.buffer, p);
        let s = "";
        for (let i = 0; b[i]; i++) s += String.fromCharCode(b[i]);
        return s;
      };
      for (let i = 0; i < count; i++) {
        const r = base + i * FIELD_ROW;
        rows.push([str(dv.getUint32(r, true)), str(dv.getUint32(r + 4, true)), dv.getInt32(r + 8, true),
                   dv.getInt32(r + 12, true), String.fromCharCode(dv.getInt32(r + 16, true))]);
      }
    } finally {
      exports.oxk_free(countPtr);
    }
    if (!rows.length || rows[0][0] !== "oxk_field" || rows[0][3] !== FIELD_ROW)
      throw new Error("onnxedge wasm: the module's oxk_layout() does not start with a " + FIELD_ROW +
                      "-byte oxk_field row (got " + JSON.stringify(rows[0]) + ")");
    return rows;
  }

  // {struct: {size, fields: {cName: {offset, size, kind}}, order: [cName]}} from the rows, and the
  // plan structs checked against the fields this runtime writes (an Error names struct and field).
  function structTable(rows) {
    const t = {};
    for (const [type, field, offset, size, kind] of rows) {
      if (!field) t[type] = {size, fields: {}, order: []};
      else if (t[type]) { t[type].fields[field] = {offset, size, kind}; t[type].order.push(field); }
    }
    for (const [name, fields] of [["oxk_sgemm_plan", SGEMM_FIELDS], ["oxk_conv_plan", CONV_FIELDS],
                                  ["oxk_pool_plan", POOL_FIELDS]]) {
      const s = t[name];
      if (!s) throw new Error("onnxedge wasm: the module's layout has no struct " + name);
      fields.forEach((f, i) => {
        const c = C_NAME[f] || f, have = s.order[i], fd = s.fields[c];
        const kinds = FLOATS.has(f) ? "f" : "ip";
        if (have !== c || !fd || kinds.indexOf(fd.kind) < 0 || fd.size !== 4)
          throw new Error("onnxedge wasm: layout of " + name + ": field " + i + " is " + JSON.stringify(have) +
                          (fd ? " (kind " + fd.kind + ", " + fd.size + " bytes)" : "") + " in the module but " +
                          JSON.stringify(c) + " (kind " + kinds.split("").join(" or ") + ", 4 bytes) in oxk.js");
      });
      if (s.order.length !== fields.length)
        throw new Error("onnxedge wasm: layout of " + name + ": " + s.order.length + " fields in the module, " +
                        fields.length + " in oxk.js");
    }
    return t;
  }

  const DEFAULTS = {transA: 0, transB: 0, alpha: 1, beta: 0, packA: 0, packB: 0, bias: 0, biasKind: 0,
                    act: 0, p0: 0, p1: 0, group: 1, sh: 1, sw: 1, dh: 1, dw: 1, pt: 0, pl: 0, pb: 0,
                    pr: 0, path: 0, packW: 0, countIncludePad: 0};

  // The body of a worker (runs from a Blob URL, so it shares the page's origin and COEP).
  function workerMain() {
    self.onmessage = (e) => {
      const {module, memory, stackTop, index} = e.data;
      WebAssembly.instantiate(module, {env: {memory}}).then((instance) => {
        instance.exports.__stack_pointer.value = stackTop;
        self.postMessage({ready: index});
        instance.exports.oxk_worker_loop(index);   // never returns
      }, (err) => self.postMessage({error: String(err)}));
    };
  }

  // The fields of a plan description as a plain object: a JS object, a Map, or a Python dict
  // passed from Pyodide (a PyProxy with get()).
  function plain(p, fields) {
    const out = {};
    const get = p && typeof p.get === "function" ? (k) => p.get(k) : (k) => (p ? p[k] : undefined);
    for (const k of fields) {
      const v = get(k);
      if (v !== undefined && v !== null) out[k] = v;
    }
    return out;
  }

  function outSize(size, k, s, d, p0, p1) {
    return Math.floor((size + p0 + p1 - d * (k - 1) - 1) / s) + 1;
  }

  const WORKER_TIMEOUT_MS = 10000;   // worker threads must be ready by then (else: one thread)

  // A module from the bytes in opts.modules[name] (a Uint8Array, an ArrayBuffer or a compiled
  // WebAssembly.Module), else fetched from base + name.
  async function compileModule(opts, base, name) {
    const given = opts.modules ? opts.modules[name] : undefined;
    if (given instanceof WebAssembly.Module) return given;
    if (given) return WebAssembly.compile(given);
    return PRELOADED.get(base + name) || compile(base + name);
  }

  const PRELOADED = new Map();   // URL -> Promise of its compiled module (Runtime.preload)

  // `promise`, or a rejection with `message` after `ms` milliseconds.
  function withTimeout(promise, ms, message) {
    let timer = null;
    const limit = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(message)), ms); });
    return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
  }

  async function compile(url) {
    const resp = await fetch(url);
    if (!resp.ok) throw new Error("onnxedge wasm: fetching " + url + " failed: HTTP " + resp.status);
    if (WebAssembly.compileStreaming && (resp.headers.get("Content-Type") || "").startsWith("application/wasm"))
      return WebAssembly.compileStreaming(resp);
    return WebAssembly.compile(await resp.arrayBuffer());
  }

  class Runtime {
    constructor() {
      /** Threads the kernels run on (0 until init is done). */
      this.threads = 0;
      /** The module's WebAssembly.Memory (shared when threads > 1). */
      this.memory = null;
      /** The instance's raw exports (oxk.h's functions, oxk_malloc, oxk_free). */
      this.exports = null;
      /** Why the runtime runs on this many threads (the console line). */
      this.note = "";
      this.workers = [];
      this._init = null;
      this._rows = null;
      this._structs = null;
    }

    /** Load the module: {baseURL: folder of oxk.wasm/oxk-mt.wasm ("" = the page's), modules:
     * {"oxk.wasm": bytes, "oxk-mt.wasm": bytes} (used instead of fetching), threads: 0 auto,
     * timeoutMs: worker start-up limit}. Resolves to this runtime; a second call returns the first
     * call's promise (a failed one may be retried). */
    init(opts) {
      if (!this._init) {
        this._init = this._load(opts || {}).catch((err) => {
          this._init = null;   // a failed init (e.g. a wrong baseURL) may be retried
          throw err;
        });
      }
      return this._init;
    }

    async _load(opts) {
      let base = opts.baseURL === undefined ? "" : String(opts.baseURL);
      if (base && !base.endsWith("/")) base += "/";
      const isolated = !!global.crossOriginIsolated && typeof SharedArrayBuffer !== "undefined";
      const hc = (global.navigator && navigator.hardwareConcurrency) || 1;
      let threads = opts.threads | 0;
      if (threads <= 0) threads = isolated ? Math.min(hc, MAX_AUTO_THREADS) : 1;
      if (threads > 1 && !isolated) {
        threads = 1;
        this.note = "1 thread (page not cross-origin isolated: serve with COOP/COEP for threads)";
      } else if (threads > 1) {
        this.note = threads + " threads (cross-origin isolated)";
      } else {
        this.note = "1 thread (" + (!isolated ? "page not cross-origin isolated: serve with COOP/COEP for threads"
                    : (opts.threads | 0) > 0 ? "asked for one thread" : "the browser reports one CPU core") + ")";
      }
      if (threads > 1) {
        try {
          await this._loadThreaded(opts, base, threads);
        } catch (err) {   // e.g. a Content-Security-Policy that forbids blob: workers, a timeout
          this.workers.forEach((w) => w.terminate());
          this.workers = [];
          threads = 1;
          this.note = "1 thread (starting the worker threads failed: " + err.message + ")";
        }
      }
      if (threads === 1) {
        const module = await compileModule(opts, base, "oxk.wasm");
        const instance = await WebAssembly.instantiate(module, {});
        this.exports = instance.exports;
        this.memory = instance.exports.memory;
      }
      this._rows = readLayout(this.exports, this.memory);
      this._structs = structTable(this._rows);
      this.threads = this.exports.oxk_set_num_threads(threads);
      console.log("onnxedge wasm SIMD kernels: " + this.note);
      return this;
    }

    async _loadThreaded(opts, base, threads) {
      const module = await compileModule(opts, base, "oxk-mt.wasm");
      const memory = new WebAssembly.Memory({initial: MT_INITIAL_PAGES, maximum: MT_MAXIMUM_PAGES, shared: true});
      const instance = await WebAssembly.instantiate(module, {env: {memory}});
      this.exports = instance.exports;
      this.memory = memory;
      const ms = opts.timeoutMs > 0 ? Number(opts.timeoutMs) : WORKER_TIMEOUT_MS;
      const started = this._startWorkers(module, threads - 1, ms);
      started.catch(() => {});   // after a timeout its late failure is not news
      await withTimeout(started, ms,
                        (threads - 1) + " worker thread(s) did not start within " + ms + " ms");
    }

    async _startWorkers(module, count, ms) {
      const src = "(" + workerMain.toString() + ")()";
      const url = URL.createObjectURL(new Blob([src], {type: "text/javascript"}));
      const ready = [];
      for (let i = 0; i < count; i++) {
        const stack = this.alloc(WORKER_STACK);
        const w = new Worker(url);
        this.workers.push(w);
        ready.push(new Promise((resolve, reject) => {
          w.onmessage = (e) => e.data.error ? reject(new Error("onnxedge wasm worker " + i + ": " + e.data.error))
                                            : resolve();
          w.onerror = (e) => reject(new Error("onnxedge wasm worker " + i + ": " + e.message));
        }));
        w.postMessage({module, memory: this.memory, stackTop: (stack + WORKER_STACK) & ~15, index: i});
      }
      await Promise.all(ready);
      URL.revokeObjectURL(url);
      // "ready" is posted just before a worker enters oxk_worker_loop: wait until all are inside
      const deadline = Date.now() + ms;
      while (this.exports.oxk_workers_started() < count) {
        if (Date.now() > deadline) throw new Error("onnxedge wasm: workers did not enter their loop");
        await new Promise((r) => setTimeout(r, 1));
      }
    }

    /** Start fetching and compiling the module(s) a later init({baseURL}) needs (oxk-mt.wasm
     * too when the context is cross-origin isolated), e.g. while Pyodide starts. */
    preload(opts) {
      let base = opts && opts.baseURL ? String(opts.baseURL) : "";
      if (base && !base.endsWith("/")) base += "/";
      const isolated = !!global.crossOriginIsolated && typeof SharedArrayBuffer !== "undefined";
      for (const name of isolated ? ["oxk.wasm", "oxk-mt.wasm"] : ["oxk.wasm"]) {
        if (!PRELOADED.has(base + name)) {
          const p = compile(base + name);
          p.catch(() => PRELOADED.delete(base + name));   // init fetches again, and says why
          PRELOADED.set(base + name, p);
        }
      }
    }

    /** Change the thread count (1 .. the count init started); returns the count now in use. */
    setThreads(n) { this.threads = this.exports.oxk_set_num_threads(n | 0); return this.threads; }

    /** The vector backend compiled in ("wasm-simd128"). */
    backend() {
      const p = this.exports.oxk_backend();
      const b = new Uint8Array(this.memory.buffer, p, 64);
      let s = "";
      for (let i = 0; b[i]; i++) s += String.fromCharCode(b[i]);
      return s;
    }

    /** `bytes` of wasm memory (16-byte aligned; throws when memory cannot grow). */
    alloc(bytes) {
      const p = this.exports.oxk_malloc(Math.max(0, bytes) >>> 0);
      if (!p) throw new Error("onnxedge wasm: out of memory allocating " + bytes + " bytes");
      return p;
    }

    /** Give back a block from alloc (or a plan, or a packed matrix); 0 is ignored. */
    free(ptr) { if (ptr) this.exports.oxk_free(ptr); }

    /** A fresh Float32Array view of `n` floats at `ptr` (valid until memory grows). */
    f32(ptr, n) { return new Float32Array(this.memory.buffer, ptr, n); }

    /** A fresh Uint8Array view of `nbytes` at `ptr` (valid until memory grows). */
    u8(ptr, nbytes) { return new Uint8Array(this.memory.buffer, ptr, nbytes); }

    /** The module's struct layouts, as oxk_layout() states them: rows [struct, field ("" for the
     * struct's own row), offset, size, kind ('i' int32, 'f' float32, 'p' pointer, 'z' size_t)]. */
    layout() { return this._rows; }

    /** layout() as a JSON string (what Python reads through Pyodide's bridge). */
    layoutJSON() { return JSON.stringify(this._rows); }

    _struct(name, fields, values) {
      const s = this._structs[name];
      const ptr = this.alloc(s.size);
      const dv = new DataView(this.memory.buffer, ptr, s.size);
      for (let i = 0; i < s.size; i++) dv.setUint8(i, 0);
      fields.forEach((f) => {
        let v = values[f];
        if (v === undefined || v === null) v = DEFAULTS[f];
        if (typeof v === "bigint") v = Number(v);
        if (v === undefined) {
          this.free(ptr);
          throw new Error("onnxedge wasm: plan field '" + f + "' is required");
        }
        const fd = s.fields[C_NAME[f] || f];
        if (fd.kind === "f") dv.setFloat32(fd.offset, v, true);
        else if (fd.kind === "p") dv.setUint32(fd.offset, v >>> 0, true);
        else dv.setInt32(fd.offset, v, true);
      });
      return ptr;
    }

    /** An oxk_sgemm_plan: {N, K, transA, transB, alpha, beta, packA, packB, bias, biasKind, act,
     * p0, p1} (pointers as numbers; 0 = none; a JS object, a Map or a Python dict). Free it with
     * free(). */
    sgemmPlan(p) { return this._struct("oxk_sgemm_plan", SGEMM_FIELDS, plain(p, SGEMM_FIELDS)); }

    /** An oxk_conv_plan: {C, H, W, Cout, kh, kw, weight, group, sh, sw, dh, dw, pt, pl, pb, pr, act,
     * p0, p1, path, packW, bias, OH, OW} (OH/OW computed when left out). */
    convPlan(p) {
      const q = Object.assign({}, DEFAULTS, plain(p, CONV_FIELDS));
      if (q.OH === undefined) q.OH = outSize(q.H, q.kh, q.sh, q.dh, q.pt, q.pb);
      if (q.OW === undefined) q.OW = outSize(q.W, q.kw, q.sw, q.dw, q.pl, q.pr);
      return this._struct("oxk_conv_plan", CONV_FIELDS, q);
    }

    /** An oxk_pool_plan: {H, W, kind (0 max, 1 average), kh, kw, sh, sw, dh, dw, pt, pl, pb, pr,
     * countIncludePad, OH, OW} (OH/OW computed, floor mode, when left out). */
    poolPlan(p) {
      const q = Object.assign({}, DEFAULTS, plain(p, POOL_FIELDS));
      if (q.OH === undefined) q.OH = outSize(q.H, q.kh, q.sh, q.dh, q.pt, q.pb);
      if (q.OW === undefined) q.OW = outSize(q.W, q.kw, q.sw, q.dw, q.pl, q.pr);
      return this._struct("oxk_pool_plan", POOL_FIELDS, q);
    }

    _packed(bytes, fn) {
      const ptr = this.alloc(bytes);
      const rc = fn(ptr);
      if (rc !== 0) {
        this.free(ptr);
        throw new Error("onnxedge wasm: packing failed with status " + rc);
      }
      return ptr;
    }

    /** B (K x N, or N x K when transB) packed into panels: a new block for sgemmPlan's packB. */
    packB(transB, N, K, B, ldb) {
      const bytes = this.exports.oxk_pack_b_size(N, K) * 4;
      return this._packed(bytes, (p) => this.exports.oxk_pack_b(transB, N, K, B, ldb, p));
    }

    /** A (M x K, or K x M when transA) packed into panels: a new block for sgemmPlan's packA. */
    packA(transA, M, K, A, lda) {
      const bytes = this.exports.oxk_pack_a_size(M, K) * 4;
      return this._packed(bytes, (p) => this.exports.oxk_pack_a(transA, M, K, A, lda, p));
    }

    /** Conv weights (Cout, Cin/group, kh, kw) packed: a new block for convPlan's packW. */
    convPack(weight, Cout, CinG, kh, kw, group) {
      const bytes = this.exports.oxk_conv_pack_size(Cout, CinG, kh, kw, group) * 4;
      if (!bytes) throw new Error("onnxedge wasm: convPack: Cout " + Cout + " is not a multiple of group " + group);
      return this._packed(bytes, (p) => this.exports.oxk_conv_pack(weight, Cout, CinG, kh, kw, group, p));
    }

    /** C (M x N) = op(A) @ op(B) + epilogue, with the plan's constants; A/B may be 0 when packed. */
    sgemmRun(plan, M, A, B, C) { return this.exports.oxk_sgemm_run(plan, M, A, B, C); }

    /** y (N, Cout, OH, OW) = conv(x (N, C, H, W)) with the plan's weights and epilogue. */
    conv2dRun(plan, N, x, y) { return this.exports.oxk_conv2d_run(plan, N, x, y); }

    /** y (NC, OH, OW) = the plan's pool over NC planes of x (NC, H, W). */
    pool2dRun(plan, NC, x, y) { return this.exports.oxk_pool2d_run(plan, NC, x, y); }

    /** y[NC] = max (kind 0) or mean (kind 1) of each of NC planes of HW values of x. */
    globalPool(x, NC, HW, kind, y) { return this.exports.oxk_global_pool(x, NC, HW, kind, y); }

    /** Run a compiled oxk_program (its struct at `program`): `inputs`/`outputs` point to arrays of
     * pointers, `arena` to the program's scratch bytes; the C status. */
    programRun(program, inputs, outputs, arena) {
      return this.exports.oxk_program_run(program, inputs, outputs, arena);
    }

    /** Run a compiled program as Python described it (onnxedge.web.wasm WasmProgram.describe():
     * {program, ins, outs, arena, inputs: [{ptr, size}], outputs: [{ptr, size}]}): copy `data`
     * (one Float32Array per input, in `inputs` order) into its input blocks, make one
     * oxk_program_run call, and return a copy of each output (Float32Arrays, in `outputs` order;
     * `which`: the indices to read, default all). Throws on a wrong input size or a C error. */
    runProgram(desc, data, which) {
      const ins = desc.inputs;
      if (data.length !== ins.length)
        throw new RangeError("onnxedge wasm: the program reads " + ins.length + " inputs, got " + data.length);
      for (let i = 0; i < ins.length; i++) {
        const d = data[i], itemsize = ins[i].itemsize || 4;
        if (d.length !== ins[i].size || d.BYTES_PER_ELEMENT !== itemsize)
          throw new RangeError("onnxedge wasm: program input " + i + " holds " + ins[i].size + " values of " +
                               itemsize + " bytes, got " + d.length + " of " + d.BYTES_PER_ELEMENT);
        this.u8(ins[i].ptr, d.byteLength).set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
      }
      const rc = this.exports.oxk_program_run(desc.program, desc.ins, desc.outs, desc.arena);
      if (rc !== 0)
        throw new Error("onnxedge wasm: the program failed with status " + rc + (rc === -2 ? " (out of memory)" : ""));
      const outs = desc.outputs;
      return (which || outs.map((_, j) => j)).map((j) => this.f32(outs[j].ptr, outs[j].size).slice());
    }
  }

  const runtime = new Runtime();
  runtime.Runtime = Runtime;   // independent runtimes (tests compare one thread with several)
  runtime.OXK_EARG = -1;
  runtime.OXK_ENOMEM = -2;
  global.onnxedgeWasm = runtime;
})(globalThis);
