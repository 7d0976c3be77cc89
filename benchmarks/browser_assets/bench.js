// The browser benchmark's driver, shared by the engine pages (ort.html, onnxedge.html).
// On load it reads ?model=URL&feeds=URL&budget=MS, opens the model, runs it once (the first
// result: window.bench.state = "first", with the outputs as base64), then times runs (median of
// samples; a sample loops a short model until it lasts >= 5 ms, as performance.now() is coarse
// unless the page is cross-origin isolated) and sets state "done" (or "error").
"use strict";

const now = () => performance.now();
window.bench = { state: "loading" };

function decodeFeeds(json, makeTensor) {
  const TYPED = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array };
  const feeds = {};
  for (const [name, t] of Object.entries(json)) {
    const bytes = Uint8Array.from(atob(t.b64), (c) => c.charCodeAt(0));
    feeds[name] = makeTensor(t.type, new TYPED[t.type](bytes.buffer), t.dims);
  }
  return feeds;
}

function encode(t) {
  const bytes = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return { type: t.type, dims: Array.from(t.dims, Number), b64: btoa(text) };
}

function stats(samples) {
  const s = samples.slice().sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { median_ms: s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2,
           p90_ms: at(0.9), min_ms: s[0], runs: s.length };
}

// engine: {name, start() (load the runtime), create(url) -> session,
//          tensor(type, data, dims), run(session, feeds) -> {name: tensor with type/data/dims},
//          optional ownRunMs(session): the last run's time inside the engine (no JS glue),
//          optional threads(): the threads the engine runs on,
//          optional startBreakdown(session): {step: ms} of the engine's own start-up work}
export async function runBenchmark(engine) {
  const params = new URLSearchParams(location.search);
  const budget = Number(params.get("budget") || 15000);
  const status = (text) => { document.getElementById("status").textContent = text; };
  try {
    const feedsJson = await (await fetch(params.get("feeds"))).json();
    const t0 = now();
    status("starting " + engine.name);
    await engine.start();
    const startMs = now() - t0;
    status("opening " + params.get("model"));
    const session = await engine.create(params.get("model"));
    const createMs = now() - t0 - startMs;
    const feeds = decodeFeeds(feedsJson, engine.tensor);
    const t1 = now();
    const out = await engine.run(session, feeds);
    const firstRunMs = now() - t1;
    const outputs = {};
    for (const [name, t] of Object.entries(out)) outputs[name] = encode(t);
    window.bench = { state: "first", first: { page_to_result_ms: now(), start_ms: startMs,
      create_ms: createMs, first_run_ms: firstRunMs, outputs,
      own: engine.startBreakdown ? engine.startBreakdown(session) : null },
      isolated: self.crossOriginIsolated, threads: engine.threads ? engine.threads() : null };
    status("timing");
    await engine.run(session, feeds);   // warm-up
    let t = now();
    await engine.run(session, feeds);
    const one = now() - t;
    const inner = Math.max(1, Math.ceil(5 / Math.max(one, 0.001)));
    const samples = [];
    const engineSamples = [];   // the engine's own run time, where it reports one
    const begin = now();
    while (samples.length < 30 && (samples.length < 5 || now() - begin < budget)) {
      t = now();
      let own = 0;
      for (let i = 0; i < inner; i++) {
        await engine.run(session, feeds);
        if (engine.ownRunMs) own += engine.ownRunMs(session);
      }
      samples.push((now() - t) / inner);
      if (engine.ownRunMs) engineSamples.push(own / inner);
    }
    window.bench.timing = Object.assign(stats(samples), { inner_loop: inner });
    if (engineSamples.length) window.bench.timing.engine_median_ms = stats(engineSamples).median_ms;
    window.bench.state = "done";
    status("done");
  } catch (e) {
    window.bench = { state: "error", error: String(e && e.stack || e) };
    status("error: " + e);
  }
}
