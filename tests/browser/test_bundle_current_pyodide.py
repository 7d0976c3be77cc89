"""`onnxedge web build --pyodide DIR` with a current distribution (npm `pyodide` 314, core only):
the reduced wheel is registered in the copy's pyodide-lock.json and `loadPackage('onnxedge')`
installs it in the page; numpy, which that core lacks, is where it stops, with a clear error."""
from __future__ import annotations

import json
import os
from typing import Any

from bundles import wait_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CURRENT = os.path.join(ROOT, "web", "node_modules", "pyodide")


def test_current_pyodide_loads_onnxedge_from_its_lock_then_needs_numpy(web_bundle: Any,
                                                                        bundle_page: Any,
                                                                        demo_files: Any):
    dist, url = web_bundle([demo_files["mlp"]], pyodide=CURRENT)
    with open(os.path.join(dist, "pyodide", "pyodide-lock.json")) as f:
        lock = json.load(f)
    with open(os.path.join(dist, "bundle.json")) as f:
        manifest = json.load(f)
    entry = lock["packages"]["onnxedge"]
    assert manifest["pyodide"]["lock"] is True
    assert os.path.isfile(os.path.join(dist, "pyodide", entry["file_name"]))
    page = bundle_page(url)
    assert wait_state(page, ("error", "ready")) == "error"
    err = page.evaluate("onnxedgeApp.error.message")
    assert err.startswith("numpy cannot be loaded from this Pyodide distribution")
    found = json.loads(page.evaluate(
        "code => onnxedge.env.pyodideInstance.runPython(code)",
        "import json, sys, importlib.util as u, importlib.metadata as md\n"
        "json.dumps([sys.version_info[:2], u.find_spec('onnxedge') is not None, "
        "any(str(f).endswith('onnxedge/session.py') for f in md.files('onnxedge'))])"))
    assert found == [[3, 14], True, True]
    loaded = page.evaluate("Object.keys(onnxedge.env.pyodideInstance.loadedPackages)")
    assert "onnxedge" in loaded, "onnxedge came through loadPackage (the lock), not an unzip"
