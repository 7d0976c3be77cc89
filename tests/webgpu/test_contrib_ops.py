"""onnxruntime's transformer contrib ops on WebGPU: the optimizer maps com.microsoft Attention,
SkipLayerNormalization and BiasGelu / FastGelu onto onnxedge's fused forms, which the WebGPU
provider claims; outputs match onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxedge  # noqa: E402

B, S, N, H = 2, 6, 2, 8
D = N * H


def _bert_block() -> bytes:
    """Attention (1-D mask index) -> SkipLayerNormalization -> MatMul -> BiasGelu / FastGelu."""
    rng = np.random.RandomState(0)

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    inits = {"qkv_w": w(D, 3 * D), "qkv_b": w(3 * D), "gamma": w(D) + 1, "beta": w(D),
             "ff_w": w(D, 2 * D), "ff_b": w(2 * D), "ff2_w": w(2 * D, D), "ff2_b": w(D)}
    ms = "com.microsoft"
    nodes = [
        helper.make_node("Attention", ["x", "qkv_w", "qkv_b", "mask"], ["att"], domain=ms,
                         num_heads=N),
        helper.make_node("SkipLayerNormalization", ["att", "x", "gamma", "beta"], ["ln"],
                         domain=ms, epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "ff_w"], ["ff"]),
        helper.make_node("BiasGelu", ["ff", "ff_b"], ["act"], domain=ms),
        helper.make_node("MatMul", ["act", "ff2_w"], ["ff2"]),
        helper.make_node("FastGelu", ["ff2", "ff2_b"], ["y"], domain=ms),
    ]
    graph = helper.make_graph(
        nodes, "bert_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", D]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", D])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ms, 1)])
    model.ir_version = 8
    return model.SerializeToString()


def test_bert_block_contrib_ops_run_on_webgpu(webgpu):
    blob = _bert_block()
    feeds = {"x": np.random.RandomState(1).standard_normal((B, S, D)).astype(np.float32),
             "mask": np.array([4, 6], dtype=np.int32)}
    expected = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    sess = onnxedge.InferenceSession(blob, providers=webgpu)
    got = sess.run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
    on_gpu = {r["op_type"] for r in sess.partition_report()
              if r["provider"] == "WebGpuExecutionProvider"}
    for op in ("MultiHeadAttention", "FusedMatMul", "LayerNormalization", "Gelu"):
        assert op in on_gpu, (op, sess.partition_report())
