// onnxedge's page loader: Pyodide 0.17.1 (served from localhost), numpy, micropip, then the
// project's wheels installed by URL. Classic script (Pyodide 0.17's pyodide.js is one too);
// load pyodide.js first. Nothing here reaches outside the page's own origin.
"use strict";

(function () {
  const stamp = () => performance.now();

  // Start Pyodide and install `wheels` (absolute or page-relative URLs of pure wheels).
  // `helpers` is the URL of a Python file run in the global namespace once the wheels are in.
  // Resolves to {pyodide, timings}; timings are milliseconds per stage.
  async function startOnnxedge({ indexURL, wheels = [], helpers = null }) {
    const timings = {};
    let t = stamp();
    const pyodide = await globalThis.loadPyodide({ indexURL });
    timings.pyodide_ms = stamp() - t;
    t = stamp();
    await pyodide.loadPackage(["numpy", "micropip"]);
    timings.numpy_ms = stamp() - t;
    t = stamp();
    const urls = wheels.map((w) => new URL(w, location.href).href);
    // a JSON list of strings is a Python list literal
    await pyodide.runPythonAsync("import micropip\nawait micropip.install(" + JSON.stringify(urls) + ")\n");
    timings.wheels_ms = stamp() - t;
    if (helpers) {
      const resp = await fetch(helpers);
      if (!resp.ok) throw new Error("cannot fetch " + helpers + ": HTTP " + resp.status);
      pyodide.runPython(await resp.text());
    }
    return { pyodide, timings };
  }

  // Run Python (top-level await allowed); returns the value of the last expression, which
  // should be a str (JSON) or a number: other values stay Python objects.
  async function runPython(pyodide, code) {
    const result = await pyodide.runPythonAsync(code);
    if (result && typeof result === "object" && typeof result.destroy === "function") {
      const text = String(result);
      result.destroy();
      return text;
    }
    return result;
  }

  globalThis.onnxedgePage = { startOnnxedge, runPython };
})();
