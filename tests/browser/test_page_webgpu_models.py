"""The benchmark models through WebGPU inside the page (navigator.gpu, SwiftShader adapter in
headless Chromium): outputs match onnxruntime natively, and the heavy nodes run on WebGPU."""
from __future__ import annotations

import base64
import os
import sys
from typing import Any, Dict, List, Optional

import numpy as np
import onnxruntime
import pytest

from conftest import ROOT, TIMINGS

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import models  # noqa: E402

GPU = "WebGpuExecutionProvider"
# every node whose op type names one of these must run on WebGPU (issue #6: Conv, MatMul, Gemm
# and normalizations, fused forms such as FusedConv or SkipLayerNormalization included)
HEAVY = ("Conv", "MatMul", "Gemm", "Normalization")


def _decode(out: Dict[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(out["data"]), out["dtype"]).reshape(out["shape"])


def run_in_page(pyodide_page: Any, name: str, providers: List[str], repeat: int = 0,
                level: Optional[int] = None) -> Dict[str, Any]:
    """Run benchmark model `name` (batch 1) in the page; outputs decoded, plus the reference."""
    proto = models.build(name)
    feeds = models.make_inputs(name)
    model_url = pyodide_page.put_oxe(name, proto)
    feeds_url = pyodide_page.put_arrays(name + "_feeds", feeds)
    got = pyodide_page.run_json("await run_model(%r, %r, %r, %d, %r)"
                                % (model_url, feeds_url, providers, repeat, level))
    got["outputs"] = {k: _decode(v) for k, v in got["outputs"].items()}
    ref = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got["expected"] = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    return got


def check_on_gpu(got: Dict[str, Any]) -> None:
    on_cpu = sorted({op for op, prov in got["partition"]
                     if any(h in op for h in HEAVY) and prov != GPU})
    assert not on_cpu, "heavy nodes fell back to CPU in the page: %s" % on_cpu
    assert got["providers"][0] == GPU
    assert sum(prov == GPU for _, prov in got["partition"]) >= len(got["partition"]) // 2


def check_outputs(got: Dict[str, Any], rtol: float, atol: float) -> None:
    assert set(got["outputs"]) == set(got["expected"])
    for name, want in got["expected"].items():
        np.testing.assert_allclose(got["outputs"][name], want, rtol=rtol, atol=atol, err_msg=name)


def test_mlp_webgpu_in_page_matches_cpu(pyodide_page, js_device):
    got = run_in_page(pyodide_page, "mlp", [GPU, "CPUExecutionProvider"], repeat=10)
    check_on_gpu(got)
    check_outputs(got, rtol=1e-3, atol=1e-4)
    TIMINGS["MLP run, WebGPU in the page (ms, mean of 10)"] = got["run_ms"]
    cpu = run_in_page(pyodide_page, "mlp", ["CPUExecutionProvider"], repeat=20)
    TIMINGS["MLP run, CPU provider via run_async (ms, mean of 20)"] = cpu["run_ms"]
    for name, want in cpu["outputs"].items():
        np.testing.assert_allclose(got["outputs"][name], want, rtol=1e-3, atol=1e-4)


@pytest.mark.slow
def test_resnet18_webgpu_in_page_matches_cpu(pyodide_page, js_device):
    got = run_in_page(pyodide_page, "resnet18", [GPU, "CPUExecutionProvider"])
    check_on_gpu(got)
    check_outputs(got, rtol=1e-3, atol=1e-4)
    TIMINGS["ResNet-18 224x224, .oxe fetch into the page (ms)"] = got["fetch_ms"]
    TIMINGS["ResNet-18 224x224, WebGPU in the page: session (ms)"] = got["create_ms"]
    TIMINGS["ResNet-18 224x224, WebGPU in the page: first run (ms)"] = got["first_ms"]


@pytest.mark.slow
def test_bert_encoder_webgpu_in_page_matches_cpu(pyodide_page, js_device):
    got = run_in_page(pyodide_page, "bert_encoder", [GPU, "CPUExecutionProvider"])
    check_on_gpu(got)
    check_outputs(got, rtol=1e-3, atol=1e-4)
    TIMINGS["BERT encoder, WebGPU in the page: first run (ms)"] = got["first_ms"]


def test_blocking_run_with_webgpu_in_page_names_run_async(pyodide_page, js_device):
    proto = models.build("mlp")
    model_url = pyodide_page.put_oxe("mlp_sync", proto)
    feeds_url = pyodide_page.put_arrays("mlp_sync_feeds", models.make_inputs("mlp"))
    msg = pyodide_page.run(
        "import onnxedge\n"
        "sess = onnxedge.InferenceSession(await fetch_bytes(%r), providers=[%r])\n"
        "try:\n"
        "    sess.run(None, await fetch_npz(%r)); r = 'no error'\n"
        "except onnxedge.EPFail as e:\n"
        "    r = str(e)\n"
        "r" % (model_url, GPU, feeds_url))
    assert "run_async" in msg


def _ocr_classifier_like() -> Any:
    """An OCR direction classifier's shape: Conv features, then a Reshape whose target a
    Shape→Cast→Slice→Concat chain computes (every dim symbolic), a MatMul head and Softmax."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    mk = helper.make_node
    inits = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3,
             "head": rng.standard_normal((8 * 6 * 16, 2)).astype(np.float32) * 0.05,
             "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
             "minus1": np.array([-1], np.int64)}
    nodes = [mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), mk("Relu", ["c"], ["r"]),
             mk("Shape", ["r"], ["s"]), mk("Cast", ["s"], ["s32"], to=TensorProto.INT32),
             mk("Cast", ["s32"], ["s64"], to=TensorProto.INT64),
             mk("Slice", ["s64", "zero", "one"], ["n"]),
             mk("Concat", ["n", "minus1"], ["target"], axis=0),
             mk("Reshape", ["r", "target"], ["flat"]), mk("MatMul", ["flat", "head"], ["logits"]),
             mk("Softmax", ["logits"], ["probs"], axis=-1)]
    g = helper.make_graph(
        nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_shape_computing_chain_runs_through_run_async_in_page(pyodide_page, js_device):
    """Issue #20: no node needs a GPU value on the host mid-step, so run_async works."""
    proto = _ocr_classifier_like()
    feeds = {"x": np.random.default_rng(6).standard_normal((2, 3, 6, 16)).astype(np.float32)}
    got = pyodide_page.run_json("await run_model(%r, %r, %r, %d, %r)" % (
        pyodide_page.put_oxe("ocr_cls", proto), pyodide_page.put_arrays("ocr_cls_feeds", feeds),
        [GPU, "CPUExecutionProvider"], 2, None))
    assert all(prov == GPU for _, prov in got["partition"]), got["partition"]
    want = onnxruntime.InferenceSession(proto.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(_decode(got["outputs"]["probs"]), want, rtol=1e-3, atol=1e-5)
