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
    for op in ("MultiHeadAttention", "FusedMatMul", "LayerNormalization"):
        assert op in on_gpu, (op, sess.partition_report())
    # BiasGelu / FastGelu: a Gelu node, or (activation fusion) the epilogue of its MatMul, on the GPU
    acts = {str(n.attributes.get("activation", "")) for n in sess._model.graph.nodes if n.op_type == "FusedMatMul"}
    assert "Gelu" in on_gpu or acts & {"Gelu", "GeluTanh"}, (acts, sess.partition_report())


def _matmul_nbits_model(K: int = 80, N: int = 24, block: int = 32, bits: int = 4,
                        zero_points: bool = True) -> bytes:
    """MatMulNBits with constant 4-bit B (packed zero points, a bias) as MatMulNBitsQuantizer
    writes it, K not a multiple of the block size."""
    rng = np.random.RandomState(1)
    k_blocks = -(-K // block)
    blob = block * bits // 8
    inits = [numpy_helper.from_array(rng.randint(0, 256, (N, k_blocks, blob)).astype(np.uint8), "B"),
             numpy_helper.from_array((rng.rand(N * k_blocks).astype(np.float32) + 0.5) * 0.05, "scales"),
             numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "bias")]
    ins = ["a", "B", "scales", "", "", "bias"]
    if zero_points:
        per_row = -(-k_blocks * bits // 8)
        inits.append(numpy_helper.from_array(rng.randint(0, 256, (N * per_row,)).astype(np.uint8), "zp"))
        ins[3] = "zp"
    node = helper.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=K, N=N,
                            bits=bits, block_size=block)
    graph = helper.make_graph([node], "nbits", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["M", K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", N])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


@pytest.mark.parametrize("zero_points", [True, False])
def test_matmul_nbits_runs_on_webgpu(webgpu, zero_points):
    model = _matmul_nbits_model(zero_points=zero_points)
    sess = onnxedge.InferenceSession(model, providers=webgpu)
    assert [r["provider"] for r in sess.partition_report()] == ["WebGpuExecutionProvider"]
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for rows in (1, 5):     # the dequantized weight is uploaded once and reused
        a = np.random.RandomState(rows).standard_normal((rows, 80)).astype(np.float32)
        want = ref.run(None, {"a": a})[0]
        got = sess.run(None, {"a": a})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
