"""The three benchmark models end to end on WebGPU (+ CPU) against onnxruntime, with every Conv,
MatMul, Gemm and normalization node on WebGPU."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import onnxedge

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
models = pytest.importorskip("models")
onnxruntime = pytest.importorskip("onnxruntime")

HEAVY = {"Conv", "MatMul", "Gemm", "BatchNormalization", "LayerNormalization", "FusedConv",
         "FusedGemm", "FusedMatMul", "MultiHeadAttention", "Softmax"}


@pytest.mark.parametrize("name", ["mlp", "bert_encoder", "resnet18"])
def test_model_matches_onnxruntime(webgpu, name):
    m = models.build(name).SerializeToString()
    feeds = models.make_inputs(name, batch=1)
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    report = sess.partition_report()
    off = [(r["node"], r["op_type"], r["fallback_reasons"]) for r in report
           if r["op_type"] in HEAVY and r["provider"] != "WebGpuExecutionProvider"]
    assert not off, off
    assert any(r["provider"] == "WebGpuExecutionProvider" for r in report)
    got = sess.run(None, feeds)
    want = onnxruntime.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4)
