"""A reduced wheel registered in a current Pyodide distribution (web/pyodide_lock.py): the npm
`pyodide` core (Python 3.14, no wheels, numpy not shipped) loads it with
`loadPackage('onnxedge')` in headless Chromium, up to the point where numpy is needed; and the
`.pyc` path of `pyodide py-compile` for a distribution whose Python is the compiler's."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from typing import Any, List

import pytest
from server import local_only_context

import onnxedge
from onnxedge.reduced_build.build import reduce
from onnxedge.web.pyodide_lock import LOCK, cli_python, find_cli, register_wheel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CURRENT_PYODIDE = os.path.join(ROOT, "web", "node_modules", "pyodide")

PAGE_CODE = r"""
import importlib.metadata, importlib.util, json, os, sys
root = None
for entry in sys.path:
    if os.path.isfile(os.path.join(entry, "onnxedge", "__init__.py")):
        root = os.path.join(entry, "onnxedge")
        break
sources = []
for folder, _, names in os.walk(root):
    sources += [os.path.join(folder, n) for n in names if n.endswith(".py")]
for path in sources:   # every module of the wheel is valid Python for this interpreter
    compile(open(path).read(), path, "exec")
spec = importlib.util.spec_from_file_location("oxe_errors", os.path.join(root, "errors.py"))
errors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(errors)
eps = [ep.value for ep in importlib.metadata.entry_points(group="onnxedge.providers")]
try:
    import onnxedge
    missing = None
except ModuleNotFoundError as e:
    missing = [e.name, str(e)]
json.dumps({"python": "%d.%d" % sys.version_info[:2],
            "version": importlib.metadata.version("onnxedge"),
            "requires": importlib.metadata.requires("onnxedge"),
            "modules": len(sources),
            "error_base": errors.NotImplemented.__mro__[1].__name__,
            "providers": eps, "missing": missing})
"""


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def reduced(tmp_path_factory) -> str:
    """The reduced runtime wheel of a small Gemm+Relu+Softmax model."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
    rng = np.random.default_rng(0)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(np.zeros(3, np.float32), "b")])
    d = tmp_path_factory.mktemp("reduced")
    path = str(d / "mlp.onnx")
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return reduce([path], str(d / "out")).wheel


def test_register_compiles_when_the_pythons_match(reduced, tmp_path):
    dist = str(tmp_path / "dist")
    os.makedirs(dist)
    with open(os.path.join(CURRENT_PYODIDE, LOCK)) as f:
        lock = json.load(f)
    lock["info"]["python"] = cli_python(find_cli()) + ".0"   # a distribution of the compiler's Python
    with open(os.path.join(dist, LOCK), "w") as f:
        json.dump(lock, f)
    path, compiled, notes = register_wheel(dist, reduced)
    assert compiled and path == os.path.join(dist, LOCK)
    entry = json.load(open(path))["packages"]["onnxedge"]
    wheel = os.path.join(dist, entry["file_name"])
    assert entry["file_name"].endswith("-none-any.whl") and entry["version"] == onnxedge.__version__
    assert entry["sha256"] == _sha256(wheel) and entry["depends"] == []
    names = zipfile.ZipFile(wheel).namelist()
    assert "onnxedge/session.pyc" in names and not [n for n in names if n.endswith(".py")]
    assert any("dependency numpy left out" in n for n in notes)
    with pytest.raises(onnxedge.NoSuchFile, match="has no pyodide-lock.json"):
        register_wheel(str(tmp_path), reduced)


def test_load_package_in_the_current_pyodide_core(reduced, browser: Any, bundle_server: Any, tmp_path):
    dist = str(tmp_path / "pyodide")
    shutil.copytree(CURRENT_PYODIDE, dist)
    lock_path, compiled, notes = register_wheel(dist, reduced)
    entry = json.load(open(lock_path))["packages"]["onnxedge"]
    assert entry["sha256"] == _sha256(os.path.join(dist, entry["file_name"]))
    assert not compiled and any("not compiled to .pyc: the distribution runs Python 3.14" in n
                                for n in notes), notes
    assert "numpy" not in entry["depends"]   # the core ships no numpy wheel to load
    url = bundle_server.mount("/current-pyodide/", dist)
    with open(os.path.join(dist, "blank.html"), "w") as f:
        f.write("<!doctype html><title>current pyodide</title>")
    blocked: List[str] = []
    context = local_only_context(browser, bundle_server.origin, blocked)
    try:
        page = context.new_page()
        console: List[str] = []
        page.on("console", lambda msg: console.append(msg.text))
        page.goto(url + "blank.html")
        result = page.evaluate(
            """async ([url, code]) => {
                 const { loadPyodide } = await import(url + "pyodide.mjs");
                 const py = await loadPyodide({ indexURL: url });
                 const loaded = await py.loadPackage("onnxedge");
                 return [loaded.map(p => p.name), await py.runPythonAsync(code)];
               }""", [url, PAGE_CODE])
    finally:
        context.close()
    assert not blocked, "the page tried to reach outside localhost: %s" % blocked
    names, info = result[0], json.loads(result[1])
    assert names == ["onnxedge"], (names, console[-10:])
    assert info["python"] == "3.14" and info["version"] == onnxedge.__version__
    assert info["requires"] == ["numpy>=1.17"] and info["error_base"] == "OnnxEdgeError"
    assert info["providers"] == ["onnxedge.providers.cpu:CPUExecutionProvider"]
    assert info["modules"] == len([n for n in zipfile.ZipFile(reduced).namelist() if n.endswith(".py")])
    # the package installs and parses; importing it stops exactly at numpy, which this core lacks
    assert info["missing"][0] == "numpy", info["missing"]
