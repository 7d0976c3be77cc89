"""Pyodide contexts as a user outside onnxedge's page has them: a bare page that loads Pyodide
0.17.1 and micropip, and the same in a classic Web Worker (where JupyterLite kernels live).
Nothing of onnxedge's page or onnxedge.js is loaded: the tests drive them with Python only.

`open_context(browser, server, data_dir, kind)` -> a `PyContext` whose `run(code)` runs Python
(top-level await allowed) in the page or the worker and returns the last expression as a str.
"""
from __future__ import annotations

import json
import os
from typing import Any, List

from server import local_only_context

PAGE_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>bare Pyodide page</title>
<script src="/pyodide/pyodide.js"></script>
<script>
"use strict";
const ready = (async () => {
  const py = await loadPyodide({indexURL: "/pyodide/"});
  await py.loadPackage(["micropip"]);
  return py;
})();
window.runPy = async (code) => String(await (await ready).runPythonAsync(code));
</script></head><body><p>bare page</p></body></html>
"""

WORKER_JS = """"use strict";
importScripts("/pyodide/pyodide.js");
const ready = (async () => {
  const py = await loadPyodide({indexURL: "/pyodide/"});
  await py.loadPackage(["micropip"]);
  return py;
})();
self.onmessage = async (e) => {
  const {id, code} = e.data;
  try {
    const py = await ready;
    self.postMessage({id, ok: true, value: String(await py.runPythonAsync(code))});
  } catch (err) {
    self.postMessage({id, ok: false, value: String(err && err.message || err)});
  }
};
"""

WORKER_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>Pyodide in a Web Worker</title>
<script>
"use strict";
const worker = new Worker("py_worker.js");
const waiting = new Map();
let next = 1;
worker.onmessage = (e) => {
  const {id, ok, value} = e.data;
  const p = waiting.get(id);
  waiting.delete(id);
  ok ? p.resolve(value) : p.reject(new Error(value));
};
worker.onerror = (e) => { for (const p of waiting.values()) p.reject(new Error("worker: " + e.message)); };
window.runPy = (code) => new Promise((resolve, reject) => {
  const id = next++;
  waiting.set(id, {resolve, reject});
  worker.postMessage({id, code});
});
</script></head><body><p>worker host page</p></body></html>
"""

FILES = {"bare.html": PAGE_HTML, "py_worker.js": WORKER_JS, "worker.html": WORKER_HTML}


class PyContext:
    """A bare page or a worker with Pyodide; `run` executes Python there."""

    def __init__(self, page: Any, kind: str, blocked: List[str], console: List[str]):
        self.page = page
        self.kind = kind
        self.blocked = blocked
        self.console = console

    def run(self, code: str, timeout_s: float = 120) -> str:
        """Run Python (top-level await works); the last expression as a str."""
        self.page.set_default_timeout(timeout_s * 1000)
        try:
            return self.page.evaluate("code => window.runPy(code)", code)
        except Exception as e:
            tail = "\n".join(self.console[-20:])
            raise AssertionError("Python in the %s failed: %s\n--- console ---\n%s"
                                 % (self.kind, e, tail)) from None

    def run_json(self, code: str, timeout_s: float = 120) -> Any:
        """Run Python whose last expression is a JSON string; the decoded value."""
        return json.loads(self.run(code, timeout_s))


def open_context(browser: Any, origin: str, data_dir: str, kind: str) -> PyContext:
    """A new browser context on `origin` (served /pyodide/ and /data/ = data_dir) holding a bare
    page ("page") or a page whose Web Worker runs Pyodide ("worker")."""
    for name, text in FILES.items():
        with open(os.path.join(data_dir, name), "w") as f:
            f.write(text)
    blocked: List[str] = []
    console: List[str] = []
    context = local_only_context(browser, origin, blocked)
    page = context.new_page()
    page.on("console", lambda msg: console.append("%s: %s" % (msg.type, msg.text)))
    page.on("pageerror", lambda err: console.append("pageerror: %s" % err))
    page.goto(origin + "/data/" + ("bare.html" if kind == "page" else "worker.html"))
    return PyContext(page, kind, blocked, console)


def install_code(wheel_urls: List[str]) -> str:
    """Python that installs the wheels with micropip and imports onnxedge, recording warnings;
    its value: JSON {"warnings": [...], "providers": [...]}."""
    return """
import json, warnings, micropip
await micropip.install(["numpy"] + %s)   # Pyodide 0.17's micropip: numpy by name
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import onnxedge, onnxedge.web
    providers = onnxedge.get_available_providers()
json.dumps({"warnings": [str(w.message) for w in caught], "providers": providers})
""" % json.dumps(wheel_urls)
