"""onnxedge in any Pyodide app (issue 20), Python only: a bare page that loads Pyodide 0.17.1 and a
Web Worker doing the same (where JupyterLite kernels live) `micropip.install` the full wheel,
`import onnxedge` without a warning, `await onnxedge.web.init(threads=2, webgpu=True)` starts the
wasm SIMD kernels from the wheel's own module bytes (no URL) and WebGPU, and sessions opened from
fetched `.onnx` bytes give onnxruntime's outputs (computed natively) on CPU (numpy), the wasm
kernels on 1 and 2 threads, and WebGPU. The three benchmark models (mlp, resnet18,
bert_encoder) open from `.onnx` bytes in both. A worker start-up past its time limit
falls back to one thread with the reason; a page that is not cross-origin isolated runs one
thread and init warns why.

Tolerances: rtol 1e-4 / atol 1e-5 for CPU and wasm (as tests/models), 1e-3 / 1e-4 for WebGPU
(as the page's WebGPU model tests: f32 sums in another order on the GPU).
"""
from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any, Dict, List

import numpy as np
import onnxruntime
import pytest

from conftest import ROOT, SUMMARY
from pyodide_contexts import PyContext, install_code, open_context

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402

WASM, CPU, GPU = "WasmSimdExecutionProvider", "CPUExecutionProvider", "WebGpuExecutionProvider"
CONFIGS = {"cpu": ([CPU], 0), "wasm1": ([WASM, CPU], 1), "wasm2": ([WASM, CPU], 2),
           "webgpu": ([GPU, CPU], 0)}
TOL = {"cpu": (1e-4, 1e-5), "wasm1": (1e-4, 1e-5), "wasm2": (1e-4, 1e-5), "webgpu": (1e-3, 1e-4)}

RUN_CODE = """
import io, json, base64, js
import numpy as np
import onnxedge, onnxedge.web
data = np.load(io.BytesIO(await onnxedge.web.fetch_bytes(%(feeds)r)))
feeds = {k: data[k] for k in data.files}
sess = onnxedge.InferenceSession(await onnxedge.web.fetch_bytes(%(model)r), providers=%(providers)r)
if %(threads)d:
    js.onnxedgeWasm.setThreads(%(threads)d)
outs = await sess.run_async(None, feeds)
where = {}
for r in sess.partition_report():
    where[r["provider"]] = where.get(r["provider"], 0) + 1
json.dumps({"providers": sess.get_providers(), "where": where,
            "threads": int(js.onnxedgeWasm.threads or 0),
            "outputs": {o.name: {"dtype": str(v.dtype), "shape": list(v.shape),
                                 "b64": base64.b64encode(np.ascontiguousarray(v).tobytes()).decode()}
                        for o, v in zip(sess.get_outputs(), outs)}})
"""


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: Any, data_dir: str) -> Dict[str, Dict[str, Any]]:
    """The three benchmark models as .onnx and their feeds (.npz) in /data/, with onnxruntime's
    outputs computed natively: {name: {"model", "feeds", "expected"}}."""
    paths = models.build_all(str(tmp_path_factory.mktemp("any-pyodide-models")),
                             ("mlp", "resnet18", "bert_encoder"))
    out = {}
    for name, path in paths.items():
        feeds = models.make_inputs(name)
        with open(path, "rb") as f, open(os.path.join(data_dir, name + ".onnx"), "wb") as g:
            g.write(f.read())
        np.savez(os.path.join(data_dir, name + "_feeds.npz"), **feeds)
        ref = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        expected = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
        out[name] = {"model": "/data/%s.onnx" % name, "feeds": "/data/%s_feeds.npz" % name,
                     "expected": expected, "path": path}
    return out


_CONTEXTS: Dict[str, Any] = {}


@pytest.fixture(scope="module", params=["page", "worker"])
def ctx(request: Any, browser: Any, page_server: Any, wheel_dir: str, data_dir: str) -> Any:
    """A bare page or a Web Worker with the full wheel installed by micropip and
    `onnxedge.web.init(threads=2, webgpu=True)` done; `ctx.started` holds what they said."""
    kind = request.param
    if kind not in _CONTEXTS:
        c = open_context(browser, page_server.origin, data_dir, kind)
        wheels = [page_server.origin + "/wheels/" + n for n in sorted(os.listdir(wheel_dir))
                  if n.endswith(".whl")]
        c.installed = c.run_json(install_code(wheels), timeout_s=180)
        c.status = c.run_json("import json, onnxedge.web\n"
                              "json.dumps(await onnxedge.web.init(threads=2, webgpu=True))")
        _CONTEXTS[kind] = c
    c = _CONTEXTS[kind]
    yield c
    assert not c.blocked, "the %s tried to reach outside localhost: %s" % (kind, c.blocked)


def _run(c: PyContext, model: Dict[str, Any], providers: List[str], threads: int) -> Dict[str, Any]:
    return c.run_json(RUN_CODE % {"feeds": model["feeds"], "model": model["model"],
                                  "providers": providers, "threads": threads}, timeout_s=300)


def _check(got: Dict[str, Any], expected: Dict[str, np.ndarray], config: str) -> float:
    rtol, atol = TOL[config]
    assert list(got["outputs"]) == list(expected)
    worst = 0.0
    for name, want in expected.items():
        o = got["outputs"][name]
        have = np.frombuffer(base64.b64decode(o["b64"]), np.dtype(o["dtype"])).reshape(o["shape"])
        assert have.dtype == want.dtype and have.shape == want.shape, name
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg="%s %s" % (config, name))
        worst = max(worst, float(np.max(np.abs(have.astype(np.float64) - want))))
    return worst


def _skip_without_webgpu(c: PyContext) -> None:
    gpu = c.status["webgpu"] or {}
    if "error" in gpu:
        pytest.skip("WebGPU in the %s: %s" % (c.kind, gpu["error"]))


def test_import_is_quiet_and_init_starts_the_accelerators(ctx: PyContext) -> None:
    """No warning on import (NEON needs ctypes, absent here: left out quietly); init starts the
    wasm kernels on 2 threads from the wheel's bytes (the context is cross-origin isolated) and
    the providers list shows them."""
    assert ctx.installed["warnings"] == [], ctx.installed["warnings"]
    assert not {"NeonExecutionProvider", "X64ExecutionProvider"} & set(ctx.installed["providers"])
    assert ctx.status["isolated"] is True
    assert ctx.status["wasm"]["threads"] == 2, ctx.status
    assert "2 threads" in ctx.status["wasm"]["note"]
    assert WASM in ctx.status["providers"] and ctx.status["providers"][-1] == CPU
    if "error" not in (ctx.status["webgpu"] or {}):
        assert GPU in ctx.status["providers"]
    SUMMARY.append("%-6s init: %s" % (ctx.kind, json.dumps(ctx.status)))


@pytest.mark.parametrize("config", list(CONFIGS))
def test_mlp_matches_onnxruntime(ctx: PyContext, model_files: Dict[str, Any], config: str) -> None:
    """The MLP from .onnx bytes on CPU, wasm (1 and 2 threads) and WebGPU."""
    providers, threads = CONFIGS[config]
    if config == "webgpu":
        _skip_without_webgpu(ctx)
    got = _run(ctx, model_files["mlp"], providers, threads)
    worst = _check(got, model_files["mlp"]["expected"], config)
    assert got["providers"] == providers
    # the first provider ran nodes; asking for the CPU provider alone gets the page's C engine
    # (the wasm kernels) in front of it, as natively
    assert (WASM if providers == [CPU] else providers[0]) in got["where"], got["where"]
    if threads:
        assert got["threads"] == threads
    SUMMARY.append("%-6s mlp %-6s max |diff| %.2g, nodes %s" % (ctx.kind, config, worst, got["where"]))


@pytest.mark.parametrize("name", ["resnet18", "bert_encoder"])
def test_benchmark_models_open_from_onnx_bytes(ctx: PyContext, model_files: Dict[str, Any],
                                               name: str) -> None:
    """ResNet-18 and the BERT-style encoder open from .onnx bytes (no `onnx` package in the
    page or worker) and match onnxruntime on the wasm kernels, 2 threads."""
    got = _run(ctx, model_files[name], [WASM, CPU], 2)
    worst = _check(got, model_files[name]["expected"], "wasm2")
    assert WASM in got["where"], got["where"]
    SUMMARY.append("%-6s %s wasm2 max |diff| %.2g, nodes %s" % (ctx.kind, name, worst, got["where"]))


def test_worker_start_past_time_limit_falls_back_to_one_thread(ctx: PyContext) -> None:
    """A fresh kernel runtime whose worker threads must start within 1 ms: init resolves on one
    thread and its note names the time limit (no hang)."""
    if ctx.kind != "page":
        pytest.skip("one context is enough for the JS time limit")
    got = ctx.run_json("""
import json, js, os
from onnxedge.web import wasm as pkg
from onnxedge.web.page_init import _u8
modules = js.Object.new()
for name in ("oxk.wasm", "oxk-mt.wasm"):
    setattr(modules, name, _u8(js, os.path.join(pkg.LIB_DIR, name)))
opts = js.Object.new()
opts.modules = modules
opts.threads = 2
opts.timeoutMs = 1
rt = js.onnxedgeWasm.Runtime.new()
await rt.init(opts)
json.dumps({"threads": int(rt.threads), "note": str(rt.note)})
""")
    assert got["threads"] == 1, got
    assert "did not start within 1 ms" in got["note"], got


def test_not_isolated_runs_one_thread_with_a_warning(browser: Any, wheel_dir: str, data_dir: str,
                                                    model_files: Dict[str, Any]) -> None:
    """A bare page served without COOP/COEP: init(threads=2) warns that the context is not
    cross-origin isolated and starts the kernels on one thread; a session still runs on them."""
    from onnxedge.web.static_server import PageServer
    from conftest import PYODIDE_DIR
    server = PageServer({"/pyodide/": PYODIDE_DIR, "/wheels/": wheel_dir, "/data/": data_dir},
                        isolated=False).start()
    try:
        c = open_context(browser, server.origin, data_dir, "page")
        wheels = [server.origin + "/wheels/" + n for n in sorted(os.listdir(wheel_dir))
                  if n.endswith(".whl")]
        c.run_json(install_code(wheels), timeout_s=180)
        got = c.run_json("""
import json, warnings, numpy as np, onnxedge, onnxedge.web
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    status = await onnxedge.web.init(threads=2)
sess = onnxedge.InferenceSession(await onnxedge.web.fetch_bytes("/data/mlp.onnx"),
                                 providers=["WasmSimdExecutionProvider", "CPUExecutionProvider"])
y = sess.run(None, {"input": np.ones((1, 784), np.float32)})[0]
y = y.tolist()
json.dumps({"status": status, "warnings": [str(w.message) for w in caught],
            "providers": sess.get_providers(), "y": y})
""")
        assert not c.blocked, c.blocked
    finally:
        server.stop()
    assert got["status"]["isolated"] is False
    assert got["status"]["wasm"]["threads"] == 1, got
    assert any("not cross-origin isolated" in w and "one thread" in w for w in got["warnings"]), got
    assert got["providers"][0] == WASM
    ref = onnxruntime.InferenceSession(model_files["mlp"]["path"], providers=["CPUExecutionProvider"])
    want = ref.run(None, {"input": np.ones((1, 784), np.float32)})[0]
    np.testing.assert_allclose(np.array(got["y"], np.float32), want, rtol=1e-4, atol=1e-5)
