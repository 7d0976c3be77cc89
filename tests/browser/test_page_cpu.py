"""onnxedge inside Pyodide 0.17.1 in headless Chromium, on the CPU provider."""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import onnxruntime

from conftest import ROOT, TIMINGS

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402


def test_page_runs_python_38_with_numpy_117(pyodide_page):
    info = pyodide_page.run_json(
        "import sys, json, onnxedge, flatbuffers\n"
        "json.dumps([list(sys.version_info[:2]), np.__version__, onnxedge.__file__])")
    assert info[0] == [3, 8] and info[1] == "1.17.5"
    assert "site-packages/onnxedge/" in info[2]


def test_mlp_in_page_cpu_matches_onnxruntime(pyodide_page):
    proto = models.build_mlp()
    feeds = models.make_inputs("mlp")
    expected = onnxruntime.InferenceSession(proto.SerializeToString(),
                                            providers=["CPUExecutionProvider"]).run(None, feeds)
    model_url = pyodide_page.put_oxe("mlp", proto)
    feeds_url = pyodide_page.put_arrays("mlp_feeds", feeds)
    got_url = pyodide_page.run(
        "import onnxedge\n"
        "oxe_bytes = await fetch_bytes(%r)\n"
        "feeds = await fetch_npz(%r)\n"
        "sess = onnxedge.InferenceSession(oxe_bytes, providers=['CPUExecutionProvider'])\n"
        "out = sess.run(None, feeds)\n"
        "t = now_ms(); n = 20\n"
        "for _ in range(n): sess.run(None, feeds)\n"
        "mlp_cpu_ms = (now_ms() - t) / n\n"
        "json.dumps({'shape': list(out[0].shape), 'values': out[0].ravel().tolist(), 'ms': mlp_cpu_ms})"
        % (model_url, feeds_url))
    got = json.loads(got_url)
    TIMINGS["MLP run, CPU provider in the page (ms)"] = got["ms"]
    out = np.array(got["values"], np.float32).reshape(got["shape"])
    np.testing.assert_allclose(out, expected[0], rtol=1e-4, atol=1e-6)


def test_page_opens_oxe_and_onnx_bytes_without_the_onnx_package(pyodide_page):
    """The page has no onnx package: .oxe opens, and so does .onnx (onnxedge's own bounded
    protobuf reader), with the same inputs and outputs."""
    proto = models.build_mlp()
    oxe_url = pyodide_page.put_oxe("mlp_noonnx", proto)
    onnx_url = pyodide_page.put("mlp_noonnx.onnx", proto.SerializeToString())
    got = pyodide_page.run_json(
        "import importlib.util, sys, numpy as np, onnxedge\n"
        "a = onnxedge.InferenceSession(await fetch_bytes(%r))\n"
        "b = onnxedge.InferenceSession(await fetch_bytes(%r))\n"
        "x = np.random.RandomState(0).standard_normal((2, 784)).astype(np.float32)\n"
        "same = bool(np.array_equal(a.run(None, {a.get_inputs()[0].name: x})[0],\n"
        "                           b.run(None, {b.get_inputs()[0].name: x})[0]))\n"
        "json.dumps({'has_onnx': importlib.util.find_spec('onnx') is not None,\n"
        "            'onnx_imported': 'onnx' in sys.modules,\n"
        "            'inputs': [i.name for i in a.get_inputs()],\n"
        "            'inputs_onnx': [i.name for i in b.get_inputs()], 'same': same})"
        % (oxe_url, onnx_url))
    assert not got["has_onnx"] and not got["onnx_imported"]
    assert got["inputs"] == got["inputs_onnx"] == [i.name for i in proto.graph.input]
    assert got["same"]


def test_requests_outside_localhost_are_blocked_and_recorded(pyodide_page):
    result = pyodide_page.run(
        "from js import fetch\n"
        "try:\n"
        "    await fetch('https://cdn.jsdelivr.net/pyodide/v0.17.1/full/pyodide.js'); r = 'fetched'\n"
        "except Exception as e:\n"
        "    r = 'refused'\n"
        "r")
    assert result == "refused"
    assert pyodide_page.blocked == ["https://cdn.jsdelivr.net/pyodide/v0.17.1/full/pyodide.js"]
    pyodide_page.blocked.clear()   # recorded as expected: do not fail this test for it
