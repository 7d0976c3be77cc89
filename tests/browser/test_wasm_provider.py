"""The wasm SIMD provider in headless Chromium, through an `onnxedge web build` bundle (default
providers: wasm,cpu) and onnxedge.js: the MLP, the ResNet-18-shaped CNN and the BERT-style
encoder give onnxruntime's outputs (natively computed) with their Conv/Gemm/MatMul/pool and fused
nodes on WasmSimdExecutionProvider, on 1 thread and on 2 (Web Workers; the test server sends
COOP/COEP, so the page is cross-origin isolated). A page served without COOP/COEP runs on one
thread and says why in the console; a node with an attribute the kernels lack stays on the CPU
with the reason.

Tolerance: rtol 1e-4, atol 1e-5, as tests/models holds native onnxedge to (the kernels sum in
another order than onnxruntime's MLAS; the largest differences are printed in the summary).
"""
from __future__ import annotations

import base64
import os
import sys
from typing import Any, Dict, List

import numpy as np
import onnxruntime
import pytest

from bundles import JS_TENSOR_CODEC, assert_page_outputs, encode_array
from conftest import ROOT, SUMMARY
from server import PageServer, local_only_context

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402

MODELS = ("mlp", "resnet18", "bert_encoder")
RTOL, ATOL = 1e-4, 1e-5
WASM = "WasmSimdExecutionProvider"
KERNEL_OPS = {"Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul", "MaxPool",
              "AveragePool", "GlobalAveragePool"}

# a bare page beside the bundle's index.html: onnxedge.js with ?threads=N, no model opened
TEST_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>wasm provider test</title></head><body>
<script type="module">
  import * as onnxedge from "./onnxedge.js";
  onnxedge.env.wasm.numThreads = Number(new URLSearchParams(location.search).get("threads") || 0);
  window.onnxedge = onnxedge;
  window.started = onnxedge.ready().then(() => "ok", (e) => String(e && e.stack || e));
</script></body></html>
"""

# the wasm steps' compiled programs and refusals, read from Python inside the page
PROGRAMS_JS = """
async () => {
  const py = await window.onnxedge.getPyodide();
  return JSON.parse(py.runPython(`
import gc, json
from onnxedge.web.wasm import provider as _p
_steps = [o for o in gc.get_objects() if isinstance(o, _p._WasmStep) and o.programs is not None]
json.dumps({"programs": sum(1 for s in _steps for v in s.programs.programs.values() if v),
            "refusals": [r for s in _steps for r in s.programs.refusals.values()]})
`));
}
"""


RUN_JS = """
async ({model, feeds, options, inspect}) => {
  const onnxedge = window.onnxedge;
""" + JS_TENSOR_CODEC + """
  const source = typeof model === "string" ? model : Uint8Array.from(atob(model.b64), (c) => c.charCodeAt(0));
  const session = await onnxedge.InferenceSession.create(source, options);
  const inputs = {};
  for (const [name, t] of Object.entries(feeds)) inputs[name] = decode(t);
  await session.run(inputs);   // the first run of a shape writes its plans
  const out = await session.run(inputs);
  const result = {outputs: {}, names: session.outputNames, runMs: session.lastRun.runMs,
                  providers: session.providers, partition: session.partition(),
                  wasm: {threads: onnxedge.env.wasm.threads, note: onnxedge.env.wasm.note,
                         isolated: self.crossOriginIsolated}};
  for (const name of session.outputNames) result.outputs[name] = encode(out[name]);
  if (inspect) result.programs = await (""" + PROGRAMS_JS + """)();
  await session.release();
  return result;
}
"""

@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Dict[str, str]:
    return models.build_all(str(tmp_path_factory.mktemp("wasm-models")), MODELS)


@pytest.fixture(scope="module")
def wasm_bundle(web_bundle: Any, model_files: Dict[str, str]) -> Any:
    """(dist, base URL) of the bundle of the three models, with the bare test page."""
    dist, url = web_bundle([model_files[m] for m in MODELS], title="onnxedge wasm test")
    with open(os.path.join(dist, "wasm_test.html"), "w") as f:
        f.write(TEST_PAGE)
    return dist, url[:-len("index.html")]


def _start(page: Any) -> Any:
    state = page.evaluate("window.started")
    assert state == "ok", "onnxedge did not start in the page: %s\n%s" % (
        state, "\n".join(getattr(page, "console_lines", [])[-20:]))
    return page


@pytest.fixture(scope="module")
def pages(bundle_page: Any, wasm_bundle: Any) -> Dict[int, Any]:
    """The isolated test page with the kernels on 1 thread and on 2 (opened when first asked)."""
    cache: Dict[int, Any] = {}

    class Pages:
        def __getitem__(self, threads: int) -> Any:
            if threads not in cache:
                page = bundle_page(wasm_bundle[1] + "wasm_test.html?threads=%d" % threads, wait=False)
                cache[threads] = _start(page)
            return cache[threads]

    return Pages()   # type: ignore[return-value]


def _run(page: Any, model: Any, feeds: Dict[str, np.ndarray], inspect: bool = False,
         **options: Any) -> Dict[str, Any]:
    """Create a session in the page, run it twice, return the second run (and with `inspect` the
    wasm steps' programs and refusals, read before the session is released)."""
    options.setdefault("executionProviders", ["wasm"])
    return page.evaluate(RUN_JS, {"model": model, "options": options, "inspect": inspect,
                                  "feeds": {k: encode_array(v) for k, v in feeds.items()}})


def _check(name: str, got: Dict[str, Any], path: str, feeds: Dict[str, np.ndarray]) -> float:
    ref = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    expected = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    return assert_page_outputs(got, expected, RTOL, ATOL, name)


@pytest.mark.parametrize("threads", (1, 2))
@pytest.mark.parametrize("name", MODELS)
def test_models_match_onnxruntime_on_wasm_kernels(pages: Any, model_files: Dict[str, str],
                                                   name: str, threads: int):
    page = pages[threads]
    feeds = models.make_inputs(name)
    got = _run(page, "models/%s.oxe" % name, feeds)
    worst = _check(name, got, model_files[name], feeds)
    assert got["providers"] == [WASM, "CPUExecutionProvider"]
    assert got["wasm"]["threads"] == threads and got["wasm"]["isolated"] is True
    on_kernels = [r for r in got["partition"] if r["opType"] in KERNEL_OPS]
    assert on_kernels and all(r["provider"] == WASM for r in on_kernels), \
        [r for r in on_kernels if r["provider"] != WASM]
    fused = [r["opType"] for r in on_kernels if r["opType"].startswith("Fused")]
    assert fused, "the optimized model has fused nodes on the wasm kernels"
    if threads == 2:
        assert any("onnxedge wasm SIMD kernels: 2 threads (cross-origin isolated)" in line
                   for line in page.console_lines), page.console_lines[-10:]
    SUMMARY.append("model %-13s wasm SIMD, %d thread(s): run %8.1f ms, max |diff| vs onnxruntime %.2g"
                   % (name, threads, got["runMs"], worst))


@pytest.mark.parametrize("name", ("mlp", "resnet18"))
def test_programs_bitwise_equal_on_one_and_two_threads(pages: Any, model_files: Dict[str, str], name: str):
    # the second run of a session goes through the step's compiled program (one oxk_program_run
    # call into wasm): 2 threads (a Web Worker) split its kernels without changing a bit
    feeds = models.make_inputs(name)
    got = [_run(pages[t], "models/%s.oxe" % name, feeds, inspect=True) for t in (1, 2)]
    assert got[0]["outputs"] == got[1]["outputs"]
    _check(name, got[0], model_files[name], feeds)
    steps = {r["provider"] for r in got[0]["partition"]}
    assert steps == {WASM}, "the whole model is one wasm step (one program)"
    for g in got:
        assert g["programs"]["programs"] >= 1 and not g["programs"]["refusals"], g["programs"]


def test_page_without_coop_coep_runs_one_thread_and_says_so(browser: Any, wasm_bundle: Any,
                                                            model_files: Dict[str, str]):
    server = PageServer({"/": wasm_bundle[0]}, isolated=False).start()
    blocked: List[str] = []
    context = local_only_context(browser, server.origin, blocked)
    try:
        page = context.new_page()
        page.console_lines = []
        page.on("console", lambda msg: page.console_lines.append("%s: %s" % (msg.type, msg.text)))
        page.goto(server.origin + "/wasm_test.html?threads=0")
        _start(page)
        feeds = models.make_inputs("mlp")
        got = _run(page, "models/mlp.oxe", feeds)
        _check("mlp", got, model_files["mlp"], feeds)
        assert got["wasm"]["isolated"] is False and got["wasm"]["threads"] == 1
        assert got["providers"] == [WASM, "CPUExecutionProvider"]
        assert any("onnxedge wasm SIMD kernels: 1 thread (page not cross-origin isolated: serve "
                   "with COOP/COEP for threads)" in line for line in page.console_lines), page.console_lines
    finally:
        context.close()
        server.stop()
    assert not blocked, blocked


def _transposed_gemm(tmp: str) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnxedge import model_io
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], "gemm_plain", transB=1),
             helper.make_node("Gemm", ["h", "w2"], ["y"], "gemm_transA", transA=1)]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 3])],
                          [numpy_helper.from_array(rng.standard_normal((6, 8)).astype(np.float32), "w1"),
                           numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b1"),
                           numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w2")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx_path, oxe_path = os.path.join(tmp, "t.onnx"), os.path.join(tmp, "t.oxe")
    onnx.save(m, onnx_path)
    model_io.save(model_io.load(onnx_path), oxe_path)
    with open(oxe_path, "rb") as f:
        return onnx_path, base64.b64encode(f.read()).decode()


def test_unsupported_attribute_falls_back_to_cpu_with_reason(pages: Any, tmp_path: Any):
    onnx_path, oxe_b64 = _transposed_gemm(str(tmp_path))
    feeds = {"x": np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)}
    got = _run(pages[1], {"b64": oxe_b64}, feeds, graphOptimizationLevel="disabled")
    _check("transposed gemm", got, onnx_path, feeds)
    by_node = {r["node"]: r for r in got["partition"]}
    assert by_node["gemm_plain"]["provider"] == WASM
    assert by_node["gemm_transA"]["provider"] == "CPUExecutionProvider"
    assert "transA=1 is not supported" in by_node["gemm_transA"]["reasons"][WASM]


DIRECT_JS = """
async ({model, runs, options}) => {
  const onnxedge = window.onnxedge;
""" + JS_TENSOR_CODEC + """
  const session = await onnxedge.InferenceSession.create(model, options);
  const out = {providers: session.providers, partition: session.partition(), names: session.outputNames,
               runs: []};
  for (const {feeds, fetches} of runs) {
    const inputs = {};
    for (const [name, t] of Object.entries(feeds)) inputs[name] = decode(t);
    const got = await session.run(inputs, fetches || undefined);
    const outputs = {};
    for (const [name, t] of Object.entries(got)) outputs[name] = encode(t);
    out.runs.push({outputs, names: Object.keys(got), direct: session.lastRun.direct,
                   pythonRuns: session.pythonRuns});
  }
  await session.release();
  return out;
}
"""


def _direct_runs(page: Any, runs: List[Any], model: str = "mlp", **options: Any) -> Dict[str, Any]:
    return page.evaluate(DIRECT_JS, {"model": "models/%s.oxe" % model, "options": options, "runs": [
        {"feeds": {k: encode_array(v) for k, v in feeds.items()}, "fetches": fetches}
        for feeds, fetches in runs]})


def test_the_encoder_runs_from_js_on_its_int64_feeds(pages: Any, model_files: Dict[str, str]):
    # input_ids and attention_mask are int64 (BigInt64Array): the mask's Cast runs in wasm, the
    # whole encoder is one program, and its second run copies the int64 feeds in from JS
    feeds = models.make_inputs("bert_encoder")
    assert {v.dtype for v in feeds.values()} == {np.dtype(np.int64)}
    got = _direct_runs(pages[1], [(feeds, None), (feeds, None)], model="bert_encoder",
                       executionProviders=["wasm"])
    assert {r["provider"] for r in got["partition"]} == {WASM}
    runs = got["runs"]
    assert [r["direct"] for r in runs] == [False, True] and runs[1]["pythonRuns"] == 1
    assert runs[0]["outputs"] == runs[1]["outputs"]
    _check("bert_encoder", {"names": runs[1]["names"], "outputs": runs[1]["outputs"]},
           model_files["bert_encoder"], feeds)


def test_cpu_gets_the_engine_and_runs_from_js_once_compiled(pages: Any, model_files: Dict[str, str]):
    # 'cpu' gets the wasm engine in front of numpy, as natively the C engine; the MLP is one wasm
    # step: its first run (Python, node by node: Softmax as a one-instruction program) compiles
    # the program, later runs of that signature run it from JS without Python, bit for bit the
    # first run's; a new shape goes through Python once, then runs from JS too
    ref = onnxruntime.InferenceSession(model_files["mlp"], providers=["CPUExecutionProvider"])
    f1, f3 = models.make_inputs("mlp"), models.make_inputs("mlp", batch=3, seed=1)
    out_name = ref.get_outputs()[0].name
    got = _direct_runs(pages[1], [(f1, None), (f1, None), (f1, [out_name]), (f3, None), (f3, None)],
                       executionProviders=["cpu"])
    assert got["providers"] == ["CPUExecutionProvider"]
    assert {r["provider"] for r in got["partition"]} == {WASM}
    runs = got["runs"]
    assert [r["direct"] for r in runs] == [False, True, True, False, True]
    assert [r["pythonRuns"] for r in runs] == [1, 1, 1, 2, 2]
    assert runs[0]["outputs"] == runs[1]["outputs"] and runs[2]["names"] == [out_name]
    assert runs[2]["outputs"][out_name] == runs[0]["outputs"][out_name]
    assert runs[3]["outputs"] == runs[4]["outputs"]
    for r, feeds in ((runs[1], f1), (runs[4], f3)):
        expected = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
        assert_page_outputs({"names": r["names"], "outputs": r["outputs"]}, expected, RTOL, ATOL, "mlp")
    # session.cpu_engine "0" (onnxruntime-web's SessionOptions.extra): numpy alone, through Python
    got = _direct_runs(pages[1], [(f1, None), (f1, None)], executionProviders=["cpu"],
                       extra={"session": {"cpu_engine": "0"}})
    assert {r["provider"] for r in got["partition"]} == {"CPUExecutionProvider"}
    assert [r["direct"] for r in got["runs"]] == [False, False]
    _check("mlp", {"names": got["names"], "outputs": got["runs"][1]["outputs"]}, model_files["mlp"], f1)
