"""The bundle's page as a user sees it, at 1280 px and 390 px: screenshots after a drawn digit
(written under pytest's tmp dir) checked for layout (nothing overflows the viewport, no word broken
mid-word), the first-load progress, the console (no 404, no Canvas2D willReadFrequently warning),
one fetch of bundle.json; then the page's states: a failed open clears the previous model's view,
switching models clears the drawn preview, the random mode's box is labelled, raw outputs unless
the metadata says class scores, the picker offers .onnx only when the page opens it, and opened
as file:// the page says which command serves it.
"""
from __future__ import annotations

import base64
import json
import os
import urllib.parse
from typing import Any, Dict, List

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import bundles
from bundles import wait_state
from onnxedge import model_io
from server import local_only_context

WIDTHS = (1280, 390)

# elements (outside a scroll box) whose box leaves the viewport; the page's scroll width
JS_OVERFLOW = """() => {
  const W = document.documentElement.clientWidth;
  const scrolls = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (["auto", "scroll", "hidden"].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (!el.getClientRects().length || scrolls(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.right > W + 1 || r.left < -1)
      out.push(el.tagName + "#" + el.id + "." + el.className + " " + Math.round(r.left) + ".." + Math.round(r.right));
  }
  return {out, scrollWidth: document.documentElement.scrollWidth, width: W};
}"""

# words of visible text whose characters lie on more than one line (a hyphen may end a line),
# and table cells whose computed style lets a word break anywhere
JS_BROKEN_WORDS = """() => {
  const broken = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el || el.closest("script, style") || !el.getClientRects().length) continue;
    const re = /[^\\s\\-\\u2013\\u2014]+/g;
    let m;
    while ((m = re.exec(n.data))) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const tops = new Set(Array.from(r.getClientRects()).filter((q) => q.width > 0)
                                .map((q) => Math.round(q.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  const cells = Array.from(document.querySelectorAll("td, th")).filter((c) => {
    const s = getComputedStyle(c);
    return s.overflowWrap === "anywhere" || s.wordBreak === "break-all" || s.wordBreak === "break-word";
  }).map((c) => c.textContent);
  return {broken, cells};
}"""


def _identity_model(metadata: Dict[str, str], n: int = 4) -> onnx.ModelProto:
    """y = x, float [1, n] (a Flatten: an op the demo bundle keeps), with these metadata_props."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
    graph = helper.make_graph([helper.make_node("Flatten", ["x"], ["y"], name="same", axis=1)], "same", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    if metadata:
        helper.set_model_props(model, metadata)
    return model


@pytest.fixture(scope="module")
def screens_bundle(web_bundle: Any, demo_files: Dict[str, str]):
    """(dist, url) of a bundle of the demo MLP and digit CNN."""
    return web_bundle([demo_files["mlp"], demo_files["digits"]], title="onnxedge screens")


@pytest.fixture(scope="module")
def open_fresh(browser: Any, bundle_server: Any):
    """Factory: open_fresh(url, width, init_script) -> a new page (own context, local-only,
    init_script run before the page's own) loading url at that viewport width;
    `page.console_lines` and `page.requests` record what it did."""
    contexts: List[Any] = []

    def make(url: str, width: int = 1280, init_script: str = "") -> Any:
        ctx = local_only_context(browser, bundle_server.origin, bundles._BLOCKED)
        contexts.append(ctx)
        if init_script:
            ctx.add_init_script(init_script)
        page = ctx.new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.console_lines = []
        page.requests = []
        page.on("console", lambda msg: page.console_lines.append("%s: %s" % (msg.type, msg.text)))
        page.on("pageerror", lambda err: page.console_lines.append("pageerror: %s" % err))
        page.on("request", lambda req: page.requests.append(req.url))
        page.goto(url)
        return page

    yield make
    for ctx in contexts:
        try:
            ctx.close()
        except Exception:   # Playwright already stopped after the last browser test (closing them)
            pass


def _ready(page: Any) -> None:
    state = wait_state(page, ("ready", "done", "error"), 90)
    assert state == "ready", "the page did not open its model: %s\n%s" % (
        page.evaluate("JSON.stringify(onnxedgeApp.error)"), "\n".join(page.console_lines[-20:]))


def _draw_digit(page: Any, column: float = 0.45) -> None:
    """A vertical stroke (a "1") on the canvas; waits for the run it starts."""
    before = page.evaluate("onnxedgeApp.runs")
    box = page.locator("#canvas").bounding_box()
    x, y0, h = box["x"] + column * box["width"], box["y"], box["height"]
    page.mouse.move(x, y0 + 0.15 * h)
    page.mouse.down()
    for i in range(1, 11):
        page.mouse.move(x, y0 + (0.15 + 0.07 * i) * h)
    page.mouse.up()
    page.wait_for_function("n => onnxedgeApp.runs > n || document.body.dataset.state === 'error'",
                           arg=before, timeout=30000)
    assert page.evaluate("document.body.dataset.state") == "done", page.evaluate(
        "JSON.stringify(onnxedgeApp.error)")


@pytest.mark.parametrize("width", WIDTHS)
def test_page_after_a_drawn_digit(open_fresh: Any, screens_bundle: Any, tmp_path: Any, width: int):
    page = open_fresh(screens_bundle[1] + "?model=digits", width)
    assert page.locator("#loading").is_visible(), "the first load shows its progress"
    assert page.locator("#loading progress#load-bar").count() == 1
    steps = page.locator("#load-steps li").evaluate_all("ls => ls.map(l => l.dataset.step)")
    assert steps == ["pyodide", "wheel", "numpy", "model"]
    _ready(page)
    log = page.evaluate("onnxedgeApp.loadLog")
    assert [(s, st) for s, st, _ in log] == [(s, st) for s in steps for st in ("start", "done")]
    values = [v for _, _, v in log]
    assert values == sorted(values) and values[-1] == 4, "the bar only moves forward, to the end"
    assert page.locator("#loading").is_hidden(), "the progress ends hidden"

    for column in (0.45, 0.5, 0.55):   # several runs: each reads the canvas back
        _draw_digit(page, column)
    assert page.locator("#outputs tr.top-class").count() == 5, "labels: class scores"
    assert page.locator("#preview-box").is_visible()
    assert "8×8" in page.inner_text("#preview-caption")
    shot = tmp_path / ("page-%d.png" % width)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10000

    overflow = page.evaluate(JS_OVERFLOW)
    assert overflow["out"] == [] and overflow["scrollWidth"] <= overflow["width"], overflow
    words = page.evaluate(JS_BROKEN_WORDS)
    assert words == {"broken": [], "cells": []}, words
    for table in ("#partition", "#timings", "#model-info table"):
        assert page.locator(table).evaluate(
            "t => ['auto', 'scroll'].includes(getComputedStyle(t.parentElement).overflowX)"), table

    bad = [line for line in page.console_lines
           if "404" in line or "Failed to load resource" in line or "willReadFrequently" in line]
    assert bad == [], bad
    fetched = page.evaluate("performance.getEntriesByType('resource').map(e => e.name)")
    assert sum(urllib.parse.urlsplit(u).path.endswith("/bundle.json") for u in fetched) == 1, fetched
    assert sum(urllib.parse.urlsplit(u).path.endswith("/bundle.json") for u in page.requests) == 1
    assert not [u for u in page.requests if u.endswith("/favicon.ico")]
    assert page.evaluate("document.querySelector('link[rel=icon]').href").startswith("data:")


@pytest.fixture(scope="module")
def ux_page(open_fresh: Any, screens_bundle: Any) -> Any:
    """A page of the screens bundle on the digit model, ready."""
    page = open_fresh(screens_bundle[1] + "?model=digits")
    _ready(page)
    return page


def _open_file(page: Any, tmp_path: Any, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    page.evaluate("document.body.dataset.state = 'idle'")
    page.set_input_files("#model-file", str(path))
    return wait_state(page, ("ready", "error"))


def test_failed_open_clears_the_previous_view(ux_page: Any, tmp_path: Any):
    page = ux_page
    page.select_option("#model", "digits")
    _ready(page)
    _draw_digit(page)
    assert page.locator("#outputs tr.top-class").count() and page.locator("#partition tr.node").count()
    assert _open_file(page, tmp_path, "notes.oxe", b"not a model, just text\n") == "error"
    assert "text, not a model" in page.inner_text("#error")
    assert page.inner_text("#outputs").strip() == ""
    assert page.inner_text("#model-info").strip() == ""
    assert page.locator("#partition tr").count() == 0
    assert "session creation" not in page.inner_text("#timings")
    assert page.locator("#preview-box").is_hidden()
    assert page.evaluate("[onnxedgeApp.lastOutputs, onnxedgeApp.lastInput, onnxedgeApp.session]") == [None, None, None]
    assert page.is_disabled("#run")


def test_switching_to_the_mlp_clears_the_preview_and_labels_random(ux_page: Any):
    page = ux_page
    page.select_option("#model", "digits")
    _ready(page)
    assert page.locator("#random-box").is_hidden(), "the digit model's one input is the canvas"
    _draw_digit(page)
    assert page.locator("#preview-box").is_visible()
    page.select_option("#model", "mlp")
    _ready(page)
    assert page.is_checked("input[name=mode][value=random]")
    assert page.locator("#preview-box").is_hidden()
    assert page.evaluate("Array.from(document.getElementById('preview').getContext('2d')"
                         ".getImageData(0, 0, 64, 64).data).every(v => v === 0)"), "preview cleared"
    box = page.locator("#random-box")
    assert box.is_visible() and "Random tensors" in box.inner_text()
    assert page.inner_text("#random-inputs").strip() == "input float32 [1, 784]"
    assert page.inner_text("#outputs").strip() == ""


def test_classes_metadata_key_shows_class_scores(ux_page: Any, tmp_path: Any):
    """`classes` in the page metadata: softmaxed percentages of that output; without it, the
    same [1, N] float output shows its raw values."""
    page = ux_page
    for meta, classes in (({"onnxedge.page": json.dumps({"classes": "y"})}, True), ({}, False)):
        raw = _identity_model(meta)
        path = tmp_path / "same.oxe"
        model_io.save(model_io.load(raw.SerializeToString()), str(path))
        assert _open_file(page, tmp_path, "same%d.oxe" % classes, path.read_bytes()) == "ready"
        before = page.evaluate("onnxedgeApp.runs")
        page.click("#run")
        page.wait_for_function("n => onnxedgeApp.runs > n", arg=before, timeout=30000)
        x = np.array(page.evaluate("onnxedgeApp.lastInput.x.data"), np.float64)
        if classes:
            probs = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
            rows = page.locator("#outputs tr.top-class")
            assert rows.count() == 4 and page.locator("#outputs pre.values").count() == 0
            assert int(rows.first.get_attribute("data-index")) == int(np.argmax(x))
            assert float(rows.first.get_attribute("data-prob")) == pytest.approx(probs.max(), rel=1e-5)
        else:
            assert page.locator("#outputs tr.top-class").count() == 0
            shown = [float(v) for v in page.inner_text("#outputs pre.values").split(",")]
            np.testing.assert_allclose(shown, x, rtol=1e-4)


def test_picker_offers_onnx_only_when_the_page_opens_it(ux_page: Any):
    page = ux_page
    onnx_bytes = _identity_model({}).SerializeToString()
    opened = page.evaluate("""async (b64) => {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        try { await (await onnxedge.InferenceSession.create(bytes)).release(); return true; }
        catch (e) { return e.name + ': ' + e.message; }
    }""", base64.b64encode(onnx_bytes).decode())
    accept = page.get_attribute("#model-file", "accept")
    assert page.evaluate("onnxedge.env.versions.opensOnnx") == (opened is True)
    if opened is True:
        assert accept == ".oxe,.onnx" and ".onnx" in page.inner_text("#model-kinds")
    else:
        assert opened.startswith("NotImplemented"), opened
        assert accept == ".oxe" and ".onnx" not in page.inner_text("#model-box label.file")


def test_file_url_says_which_command_serves_it(browser: Any, screens_bundle: Any):
    blocked: List[str] = []
    context = browser.new_context()

    def guard(route: Any) -> None:   # file:// only: the page must not reach any server
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    try:
        page = context.new_page()
        dist = screens_bundle[0]
        page.goto("file://" + os.path.join(dist, "index.html"))
        page.wait_for_function("document.body.dataset.state === 'error'", timeout=10000)
        assert page.locator("#needs-server").is_visible()
        assert page.inner_text("#serve-command").strip() == "onnxedge web serve " + dist
        assert "onnxedge web serve" in page.inner_text("#status")
        assert page.locator("#loading").is_hidden() and page.locator("main").is_hidden()
        assert blocked == []
    finally:
        context.close()


def test_webgpu_bundle_in_a_browser_without_webgpu_runs_on_wasm(open_fresh: Any, web_bundle: Any,
                                                               demo_files: Dict[str, str]):
    """A bundle with WebGPU, a browser without navigator.gpu: onnxruntime-web's
    `['webgpu', 'wasm']` skips WebGPU (saying why) and runs; the page's own session too."""
    _, url = web_bundle([demo_files["mlp"]], providers="webgpu,wasm,cpu")
    page = open_fresh(url, init_script="Object.defineProperty(Navigator.prototype, 'gpu', "
                                       "{get: () => undefined, configurable: true});")
    state = wait_state(page, ("ready", "done", "error"), 90)
    assert state == "ready", page.evaluate("JSON.stringify(onnxedgeApp.error)")
    out = page.evaluate("""async () => {
        const s = await onnxedge.InferenceSession.create('models/mlp.oxe',
                                                         {executionProviders: ['webgpu', 'wasm']});
        const o = await s.run({input: new onnxedge.Tensor('float32', new Float32Array(784), [1, 784])});
        return {providers: s.providers, skipped: s.skippedProviders, dims: o[s.outputNames[0]].dims,
                ran: [...new Set(s.partition().map(r => r.provider))]};
    }""")
    assert out["providers"] == ["WasmSimdExecutionProvider", "CPUExecutionProvider"]
    assert [s["name"] for s in out["skipped"]] == ["WebGpuExecutionProvider"]
    assert "navigator.gpu" in out["skipped"][0]["reason"]
    assert "WebGpuExecutionProvider" not in out["ran"] and out["dims"] == [1, 10]
    assert any("WebGpuExecutionProvider skipped" in line for line in page.console_lines)
