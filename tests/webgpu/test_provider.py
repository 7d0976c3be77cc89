"""The provider's contract: one submit per partition run, intermediates stay on the device,
buffers pooled and pipelines cached across runs, precise fallback reasons, options checked."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import onnxedge
from onnxedge.web.webgpu import device as webgpu_device

from .helpers import model

mk = helper.make_node


def _chain():
    x = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32)
    w = np.random.default_rng(2).standard_normal((96, 80)).astype(np.float32)
    nodes = [mk("MatMul", ["x", "w"], ["a"]), mk("Relu", ["a"], ["b"]),
             mk("Softmax", ["b"], ["y"], axis=-1)]
    return model(nodes, {"x": x}, {"w": w}), x


def test_one_submit_per_run_and_reuse(webgpu):
    m, x = _chain()
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    dev = webgpu_device.default_device()
    sess.run(None, {"x": x})
    before = dict(dev.stats)
    for _ in range(3):
        sess.run(None, {"x": x})
    after = dev.stats
    assert after["submits"] - before["submits"] == 3            # one per run
    assert after["pipelines_compiled"] == before["pipelines_compiled"]   # cached
    assert after["buffers_created"] == before["buffers_created"]         # pooled


def test_only_exported_values_are_read_back(webgpu, executes):
    m, x = _chain()
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    y = sess.run(None, {"x": x})[0]
    assert [reads for _, reads in executes] == [1]   # the graph output only; a, b stay on the GPU
    ref = np.maximum(x @ np.random.default_rng(2).standard_normal((96, 80)).astype(np.float32), 0)
    ref = np.exp(ref - ref.max(-1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_fallback_reasons_name_op_dtype_attribute(webgpu):
    x = np.zeros((2, 3), np.float64)
    nodes = [mk("Relu", ["x"], ["a"]), mk("Cast", ["a"], ["b"], to=1),
             mk("Pad", ["b", "p"], ["c"], mode="wrap"), mk("Det", ["c"], ["y"])]
    m = model(nodes, {"x": x}, {"p": np.array([0, 1, 0, 1], np.int64)}, opset=19)
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    reasons = {r["op_type"]: r["fallback_reasons"].get("WebGpuExecutionProvider")
               for r in sess.partition_report()}
    assert "float64" in reasons["Relu"]
    assert "wrap" in reasons["Pad"]
    assert "no WebGPU kernel for Det" in reasons["Det"]


def test_options_are_checked(webgpu):
    m, _ = _chain()
    with pytest.raises(onnxedge.OnnxEdgeError, match="power_preference=.fast.: expected"):
        onnxedge.InferenceSession(m, providers=[("WebGpuExecutionProvider",
                                                 {"power_preference": "fast"})])
    with pytest.raises(onnxedge.OnnxEdgeError, match="preferred_dtype=.int8.: expected"):
        onnxedge.InferenceSession(m, providers=[("WebGpuExecutionProvider",
                                                 {"preferred_dtype": "int8"})])


def test_float16_storage_when_supported(webgpu):
    m, x = _chain()
    sess = onnxedge.InferenceSession(m, providers=[
        ("WebGpuExecutionProvider", {"preferred_dtype": "float16"}), "CPUExecutionProvider"])
    ref = onnxedge.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    y = sess.run(None, {"x": x})[0]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=2e-2, atol=2e-3)


def test_cli_inspect_lists_partitions_and_fallbacks(webgpu, tmp_path):
    x = np.zeros((2, 3), np.float32)
    nodes = [mk("Relu", ["x"], ["a"]), mk("Det", ["a"], ["b"]), mk("Neg", ["b"], ["y"])]
    path = tmp_path / "m.onnx"
    path.write_bytes(model([mk("Relu", ["x"], ["a"]), mk("Reshape", ["a", "s"], ["r"]),
                            mk("Det", ["r"], ["y"])],
                           {"x": x}, {"s": np.array([1, 3, 2, 1], np.int64)}))
    out = subprocess.run([sys.executable, "-m", "onnxedge.cli", "inspect", str(path), "-v",
                          "--providers", "WebGpuExecutionProvider,CPUExecutionProvider"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "WebGpuExecutionProvider" in out.stdout
    assert "no WebGPU kernel for Det" in out.stdout, out.stdout
    del nodes


def test_runs_from_many_threads_give_the_serial_results(webgpu):
    from concurrent.futures import ThreadPoolExecutor
    m, _ = _chain()
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    xs = [np.random.default_rng(10 + i).standard_normal((64, 96)).astype(np.float32) for i in range(8)]
    serial = [sess.run(None, {"x": x})[0] for x in xs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda x: sess.run(None, {"x": x})[0], xs))
            for g, s in zip(got, serial):
                np.testing.assert_array_equal(g, s)
