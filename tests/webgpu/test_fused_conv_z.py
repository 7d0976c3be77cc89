"""FusedConv's Z follows the one contract (onnxedge.fused_ops: added as ai.onnx Add adds): a Z
of the output's shape runs on the GPU, a broadcasting Z of a known other shape stays on CPU
(the WGSL kernel adds Z elementwise) instead of failing at run time."""
from __future__ import annotations

import numpy as np
import onnxedge
from onnx import TensorProto, helper, numpy_helper

WEBGPU = "WebGpuExecutionProvider"


def _session(z_shape):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 1, 1)).astype(np.float32), "w")
    node = helper.make_node("FusedConv", ["x", "w", "", "z"], ["y"], domain="com.onnxedge",
                            activation="Relu")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4]),
                      helper.make_tensor_value_info("z", TensorProto.FLOAT, z_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.onnxedge", 1)])
    return onnxedge.InferenceSession(model.SerializeToString(),
                                     providers=[WEBGPU, "CPUExecutionProvider"]), w


def _expected(x, w, z):
    y = np.einsum("nchw,oc->nohw", x, numpy_helper.to_array(w)[:, :, 0, 0])
    return np.maximum(y + z, 0)


def test_z_of_the_output_shape_runs_on_webgpu(webgpu):
    sess, w = _session([1, 3, 4, 4])
    assert [r["provider"] for r in sess.partition_report()] == [WEBGPU]
    rng = np.random.default_rng(1)
    x, z = rng.standard_normal((1, 2, 4, 4)).astype(np.float32), \
        rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    got = sess.run(None, {"x": x, "z": z})[0]
    np.testing.assert_allclose(got, _expected(x, w, z), rtol=1e-4, atol=1e-4)


def test_broadcasting_z_stays_on_cpu_and_is_added_like_add(webgpu):
    sess, w = _session([2, 3, 1, 1])
    report, = sess.partition_report()
    assert report["provider"] in ("CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider")   # the host
    assert "Z 'z'" in report["fallback_reasons"][WEBGPU]
    rng = np.random.default_rng(2)
    x, z = rng.standard_normal((1, 2, 4, 4)).astype(np.float32), \
        rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
    got = sess.run(None, {"x": x, "z": z})[0]
    assert got.shape == (2, 3, 4, 4)
    np.testing.assert_allclose(got, _expected(x, w, z), rtol=1e-5, atol=1e-5)
