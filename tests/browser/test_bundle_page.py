"""`onnxedge web build` bundles in headless Chromium: the JS API (onnxedge.js) and the page.

One bundle (the demo MLP, the digit CNN and a small int64/bool model) and one page load for the
whole file; outputs are compared with onnxruntime natively (and native onnxedge on the same
`.oxe`), error messages with native onnxedge's own.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxedge
from onnxedge import model_io
from bundles import wait_state



def _ints_model(path: str) -> str:
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.INT64, [2, 3])
    s = helper.make_tensor_value_info("sum", TensorProto.INT64, [2, 3])
    g = helper.make_tensor_value_info("gt", TensorProto.BOOL, [2, 3])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
                               helper.make_node("Greater", ["a", "b"], ["gt"], name="greater")],
                              "ints", [a, b], [s, g])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _dropped_op_model(path: str) -> str:
    """An .oxe (not optimized) whose one op, ReduceL2, the demo bundle's reduced build drops."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("ReduceL2", ["x"], ["y"], name="l2")], "l2", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model_io.save(model_io.load(model.SerializeToString()), path)
    return path


@pytest.fixture(scope="session")
def demo_models(tmp_path_factory: Any, demo_files: Dict[str, str]) -> Dict[str, str]:
    """The demo MLP and digit CNN and a small int64/bool model."""
    tmp = str(tmp_path_factory.mktemp("models"))
    return {"mlp": demo_files["mlp"], "digits": demo_files["digits"],
            "ints": _ints_model(os.path.join(tmp, "ints.onnx")),
            "l2": _dropped_op_model(os.path.join(tmp, "l2.oxe"))}


@pytest.fixture(scope="session")
def demo_bundle(web_bundle: Any, demo_models: Dict[str, str]):
    """(dist, url) of the bundle of mlp, digits and ints."""
    return web_bundle([demo_models[k] for k in ("mlp", "digits", "ints")], title="onnxedge test")


@pytest.fixture(scope="session")
def page(bundle_page: Any, demo_bundle: Any) -> Any:
    """The bundle's page, its first model opened."""
    p = bundle_page(demo_bundle[1])
    state = wait_state(p, ("ready", "done", "error"))
    assert state == "ready", "the page did not open its first model: %s\n%s" % (
        p.evaluate("JSON.stringify(onnxedgeApp.error)"), "\n".join(p.console_lines[-20:]))
    return p


def js(page: Any, body: str, arg: Any = None) -> Any:
    """Run an async JS function body in the page (`arg` in scope, `onnxedge` is the module)."""
    return page.evaluate("async (arg) => { const onnxedge = window.onnxedge; %s }" % body, arg)


def js_error(page: Any, body: str, arg: Any = None) -> Dict[str, str]:
    """{name, message} of the error `body` rejects with (fails when it resolves)."""
    out = js(page, "try { %s; return null; } catch (e) { return {name: e.name, message: e.message}; }"
             % body, arg)
    assert out is not None, "expected the call to reject: %s" % body
    return out


def _ort(path: str, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


# ------------------------------------------------------------------------------ the JS API

def test_create_from_url_and_run_matches_onnxruntime(page: Any, demo_models: Dict[str, str]):
    x = np.random.default_rng(0).standard_normal((3, 784)).astype(np.float32)
    out = js(page, """
        const s = await onnxedge.InferenceSession.create('models/mlp.oxe', {executionProviders: ['wasm']});
        const o = await s.run({input: new onnxedge.Tensor('float32', Float32Array.from(arg), [3, 784])});
        const name = s.outputNames[0];
        const r = {inputs: s.inputNames, outputs: s.outputNames, type: o[name].type,
                   cls: o[name].data.constructor.name, dims: o[name].dims,
                   data: Array.from(o[name].data), providers: s.providers, lastRun: s.lastRun};
        await s.release();
        return r;""", x.ravel().tolist())
    ref = _ort(demo_models["mlp"], {"input": x})
    assert out["inputs"] == ["input"] and out["outputs"] == list(ref)
    assert (out["type"], out["cls"], out["dims"]) == ("float32", "Float32Array", [3, 10])
    np.testing.assert_allclose(np.array(out["data"]).reshape(3, 10), ref["output"], rtol=1e-5, atol=1e-6)
    assert out["providers"] == ["WasmSimdExecutionProvider", "CPUExecutionProvider"]   # 'wasm'
    assert out["lastRun"]["runMs"] > 0


def test_create_from_bytes_int64_and_bool_tensors(page: Any, demo_models: Dict[str, str]):
    a = np.array([[1, -2, 3], [2 ** 40, 5, -6]], np.int64)
    b = np.array([[0, 7, 3], [1, -5, 9]], np.int64)
    out = js(page, """
        const bytes = await (await fetch('models/ints.oxe')).arrayBuffer();
        const s = await onnxedge.InferenceSession.create(new Uint8Array(bytes));
        const t = (v) => new onnxedge.Tensor('int64', BigInt64Array.from(v.map(BigInt)), [2, 3]);
        const o = await s.run({a: t(arg[0]), b: t(arg[1])});
        return {sum: o.sum.data.constructor.name, sumType: o.sum.type,
                sumData: Array.from(o.sum.data, String), gt: o.gt.type,
                gtCls: o.gt.data.constructor.name, gtData: Array.from(o.gt.data),
                meta: s.inputMetadata};""", [[str(v) for v in a.ravel()], [str(v) for v in b.ravel()]])
    ref = _ort(demo_models["ints"], {"a": a, "b": b})
    assert (out["sum"], out["sumType"]) == ("BigInt64Array", "int64")
    assert [int(v) for v in out["sumData"]] == ref["sum"].ravel().tolist()
    assert (out["gt"], out["gtCls"]) == ("bool", "Uint8Array")
    assert out["gtData"] == ref["gt"].astype(int).ravel().tolist()
    assert out["meta"] == [{"name": "a", "isTensor": True, "type": "int64", "shape": [2, 3]},
                           {"name": "b", "isTensor": True, "type": "int64", "shape": [2, 3]}]


def _native_error(path: str, feeds: Dict[str, np.ndarray]) -> str:
    sess = onnxedge.InferenceSession(path)
    with pytest.raises(onnxedge.InvalidArgument) as e:
        sess.run(None, feeds)
    return str(e.value)


@pytest.mark.parametrize("feed,ref", [
    ("'nope': new onnxedge.Tensor('float32', new Float32Array(784), [1, 784])",
     {"nope": np.zeros((1, 784), np.float32)}),
    ("input: new onnxedge.Tensor('float64', new Float64Array(784), [1, 784])",
     {"input": np.zeros((1, 784), np.float64)}),
    ("input: new onnxedge.Tensor('float32', new Float32Array(783), [1, 783])",
     {"input": np.zeros((1, 783), np.float32)}),
], ids=["unknown-input", "wrong-dtype", "wrong-shape"])
def test_bad_input_rejects_with_onnxedge_message(page: Any, demo_bundle: Any, feed: str,
                                                 ref: Dict[str, np.ndarray]):
    err = js_error(page, """
        const s = await onnxedge.InferenceSession.create('models/mlp.oxe');
        await s.run({%s})""" % feed)
    expected = _native_error(os.path.join(demo_bundle[0], "models", "mlp.oxe"), ref)
    assert (err["name"], err["message"]) == ("InvalidArgument", expected)


def test_unknown_provider_is_skipped_and_missing_model_rejects(page: Any):
    """As onnxruntime-web does, a provider the bundle lacks is skipped: the session runs on the
    ones it has (the partition says which: 'cpu' with the wasm kernels in front, as natively)."""
    used = js(page, "const s = await onnxedge.InferenceSession.create('models/mlp.oxe', "
                    "{executionProviders: ['NopeExecutionProvider', 'cpu']}); "
                    "return [s.providers, [...new Set(s.partition().map(r => r.provider))]];")
    assert used == [["CPUExecutionProvider"], ["WasmSimdExecutionProvider"]]
    err = js_error(page, "await onnxedge.InferenceSession.create('models/missing.oxe')")
    assert "models/missing.oxe" in err["message"] and "HTTP 404" in err["message"]
    err = js_error(page, "new onnxedge.Tensor('float32', new Float32Array(3), [2, 2])")
    assert err["name"] == "RangeError" and "[2,2]" in err["message"]


def test_webgpu_then_wasm_runs_without_webgpu_in_the_bundle(page: Any, demo_models: Dict[str, str]):
    """onnxruntime-web's `['webgpu', 'wasm']` on a bundle built without WebGPU: WebGPU is skipped
    (with the reason) and the session runs on the wasm kernels and numpy."""
    x = np.random.default_rng(1).standard_normal((1, 784)).astype(np.float32)
    out = js(page, """
        const s = await onnxedge.InferenceSession.create('models/mlp.oxe',
                                                         {executionProviders: ['webgpu', 'wasm']});
        const o = await s.run({input: new onnxedge.Tensor('float32', Float32Array.from(arg), [1, 784])});
        const r = {providers: s.providers, skipped: s.skippedProviders,
                   ran: [...new Set(s.partition().map(r => r.provider))],
                   data: Array.from(await o.output.getData())};
        await s.release();
        return r;""", x.ravel().tolist())
    assert out["providers"] == ["WasmSimdExecutionProvider", "CPUExecutionProvider"]
    assert [s["name"] for s in out["skipped"]] == ["WebGpuExecutionProvider"]
    assert "built without it" in out["skipped"][0]["reason"]
    assert set(out["ran"]) <= {"WasmSimdExecutionProvider", "CPUExecutionProvider"}
    assert "WasmSimdExecutionProvider" in out["ran"]
    np.testing.assert_allclose(np.array(out["data"]).reshape(1, 10), _ort(demo_models["mlp"], {"input": x})["output"],
                               rtol=1e-5, atol=1e-6)


def test_tensor_has_onnxruntime_web_members(page: Any):
    out = js(page, """
        const t = new onnxedge.Tensor('float32', [1, 2, 3, 4, 5, 6], [2, 3]);
        const r = t.reshape([3, 2]);
        r.data[0] = 10;                                  // shares t's data
        const got = await t.getData();
        const res = {location: t.location, size: t.size, type: t.type, dims: t.dims,
                     rdims: r.dims, rsize: r.size, shared: got[0], same: got === t.data,
                     cpu: t.cpuData === t.data};
        const u = new onnxedge.Tensor('int32', [7, 8], [2]);
        const released = await u.getData(true);
        res.released = [Array.from(released), u.location];
        t.dispose();
        res.disposed = t.location;
        try { t.data; res.after = 'no error'; } catch (e) { res.after = e.name; }
        try { r.reshape([4, 2]); res.bad = 'no error'; } catch (e) { res.bad = e.name + ': ' + e.message; }
        try { r.reshape([-1, 6]); res.neg = 'no error'; } catch (e) { res.neg = e.name; }
        return res;""")
    assert (out["location"], out["size"], out["type"], out["dims"]) == ("cpu", 6, "float32", [2, 3])
    assert (out["rdims"], out["rsize"], out["shared"], out["same"], out["cpu"]) == ([3, 2], 6, 10, True, True)
    assert out["released"] == [[7, 8], "none"]
    assert (out["disposed"], out["after"]) == ("none", "TypeError")
    assert out["bad"].startswith("RangeError") and "[4,2]" in out["bad"] and "6" in out["bad"]
    assert out["neg"] == "TypeError"


# ------------------------------------------------------------------------------ the page

def _wait_runs(page: Any, before: int) -> None:
    page.wait_for_function("n => window.onnxedgeApp.runs > n || document.body.dataset.state === 'error'",
                           arg=before, timeout=30000)
    assert page.evaluate("document.body.dataset.state") == "done", page.evaluate(
        "JSON.stringify(onnxedgeApp.error)")


def test_page_mlp_random_input_outputs_and_partition(page: Any, demo_models: Dict[str, str]):
    page.select_option("#model", "mlp")
    assert wait_state(page, ("ready", "error")) == "ready"
    assert page.is_checked("input[name=mode][value=random]")
    before = page.evaluate("onnxedgeApp.runs")
    page.click("#run")
    _wait_runs(page, before)
    app = page.evaluate("({input: onnxedgeApp.lastInput, outputs: onnxedgeApp.lastOutputs})")
    x = np.array(app["input"]["input"]["data"], np.float32).reshape(app["input"]["input"]["dims"])
    ref = _ort(demo_models["mlp"], {"input": x})["output"]
    got = np.array(app["outputs"]["output"]["data"], np.float32).reshape(ref.shape)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # no labels or `classes` in its metadata: raw values, not class percentages
    assert page.locator("#outputs tr.top-class").count() == 0
    shown = [float(v) for v in page.inner_text("#outputs pre.values").split(",")]
    np.testing.assert_allclose(shown, ref.ravel(), rtol=1e-4, atol=1e-7)
    assert page.locator("#random-box").is_visible() and "input float32 [1, 784]" in \
        page.inner_text("#random-inputs")
    assert page.locator("#preview-box").is_hidden()
    providers = page.locator("#partition tr.node").evaluate_all("rs => rs.map(r => r.dataset.provider)")
    # every node of the MLP (Gemms and the Softmax) is in the wasm provider's program
    assert providers and set(providers) == {"WasmSimdExecutionProvider"}
    timings = page.inner_text("#timings")
    assert "Pyodide start" in timings and "session creation" in timings and "run (in Python)" in timings


def test_page_draw_digit_classifies_like_native(page: Any, demo_bundle: Any, demo_models: Dict[str, str]):
    page.select_option("#model", "digits")
    assert wait_state(page, ("ready", "error")) == "ready"
    assert page.is_checked("input[name=mode][value=draw]"), "the page metadata asks for the canvas"
    before = page.evaluate("onnxedgeApp.runs")
    box = page.locator("#canvas").bounding_box()
    x0, y0, w, h = box["x"], box["y"], box["width"], box["height"]
    page.mouse.move(x0 + 0.4375 * w, y0 + 0.15 * h)   # a "1": a stroke down the 4th column
    page.mouse.down()
    for i in range(1, 11):
        page.mouse.move(x0 + 0.4375 * w, y0 + (0.15 + 0.07 * i) * h)
    page.mouse.up()
    _wait_runs(page, before)
    app = page.evaluate("({input: onnxedgeApp.lastInput, outputs: onnxedgeApp.lastOutputs})")
    img = np.array(app["input"]["image"]["data"], np.float32).reshape(app["input"]["image"]["dims"])
    assert img.shape == (1, 1, 8, 8)
    assert img.max() > 0.5 and img.min() == 0.0, "ink strokes should give values near 1 on 0"
    assert img[0, 0, 2:7, 3:5].mean() > img[0, 0, :, [0, 7]].mean() + 0.3, "the stroke is central"
    got = np.array(app["outputs"]["probabilities"]["data"], np.float32).reshape(1, 10)
    native = onnxedge.InferenceSession(os.path.join(demo_bundle[0], "models", "digits.oxe"))
    np.testing.assert_allclose(got, native.run(None, {"image": img})[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, _ort(demo_models["digits"], {"image": img})["probabilities"],
                               rtol=1e-4, atol=1e-5)
    top = page.locator("#outputs tr.top-class").first
    assert top.inner_text().split("\t")[0].strip() == str(int(got.argmax()))


def _gray_png(img: np.ndarray) -> bytes:
    """An 8-bit grayscale PNG of a uint8 [H, W] array (stdlib only)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    h, w = img.shape
    raw = b"".join(b"\0" + row.tobytes() for row in img.astype(np.uint8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_page_image_file_is_area_averaged_to_the_input(page: Any, demo_bundle: Any, tmp_path: Any):
    page.select_option("#model", "digits")
    assert wait_state(page, ("ready", "error")) == "ready"
    img = np.random.default_rng(5).integers(0, 256, (16, 24)).astype(np.uint8)
    path = tmp_path / "digit.png"
    path.write_bytes(_gray_png(img))
    page.check("input[name=mode][value=image]")
    page.set_input_files("#image-file", str(path))
    before = page.evaluate("onnxedgeApp.runs")
    page.click("#run")
    _wait_runs(page, before)
    fed = np.array(page.evaluate("onnxedgeApp.lastInput.image.data"), np.float32).reshape(8, 8)
    expected = 1.0 - img.reshape(8, 2, 8, 3).mean(axis=(1, 3)) / 255.0   # ink: dark -> 1
    np.testing.assert_allclose(fed, expected, atol=1.5 / 255)
    got = np.array(page.evaluate("onnxedgeApp.lastOutputs.probabilities.data"), np.float32)
    native = onnxedge.InferenceSession(os.path.join(demo_bundle[0], "models", "digits.oxe"))
    np.testing.assert_allclose(got, native.run(None, {"image": fed.reshape(1, 1, 8, 8)})[0].ravel(),
                               rtol=1e-5, atol=1e-6)


def test_page_model_needing_a_dropped_op_shows_the_error(page: Any, demo_bundle: Any,
                                                        demo_models: Dict[str, str]):
    with open(os.path.join(demo_bundle[0], "size_report.json")) as f:
        assert "ReduceL2" not in json.load(f)["ops_kept_list"]
    page.evaluate("document.body.dataset.state = 'idle'")
    page.set_input_files("#model-file", demo_models["l2"])
    assert wait_state(page, ("error", "ready")) == "error"
    text = page.inner_text("#error")
    assert text.startswith("NotImplemented: no kernel for op ReduceL2 (domain ai.onnx, opset 17)")
    assert "onnxedge reduce" in text and "--add-op 'ai.onnx;17;ReduceL2'" in text


def test_page_reports_versions_and_download_sizes(page: Any, demo_bundle: Any):
    env = page.evaluate("({versions: onnxedge.env.versions, timings: onnxedge.env.timings})")
    assert env["versions"]["python"].startswith("3.8") and env["versions"]["numpy"] == "1.17.5"
    with open(os.path.join(demo_bundle[0], "bundle.json")) as f:
        manifest = json.load(f)
    fetched = page.evaluate("performance.getEntriesByType('resource').map(e => e.name.split('/').pop())")
    assert set(manifest["pyodide"]["files"]) <= set(fetched), "every copied Pyodide file is used"
    # .pyc for Python 3.8 (web/pyc.py): ~60% more; the page engine's compiler is ~60 KB of it
    assert manifest["sizes"]["wheel"] < 240000
