"""Shape-computing chains inside a WebGPU partition run on the host: one submit per step, no
read-back mid-step, and `run_async` works on a device that only reads back asynchronously
(the browser page's navigator.gpu)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge.web.webgpu import device as webgpu_device

mk = helper.make_node
I64 = TensorProto.INT64


def _shape_chain_model() -> bytes:
    """OCR-classifier style: Reshape(y, Concat(Slice(Cast(Shape(y))), Gather(Shape(y)), -1))
    with every dimension symbolic, so nothing folds at load."""
    nodes = [
        mk("Relu", ["x"], ["r"]),
        mk("Shape", ["r"], ["s"]),
        mk("Cast", ["s"], ["s32"], to=TensorProto.INT32),
        mk("Cast", ["s32"], ["s64"], to=I64),
        mk("Slice", ["s64", "zero", "one"], ["n"]),
        mk("Gather", ["s", "one_s"], ["c"], axis=0),
        mk("Unsqueeze", ["c", "zero"], ["c1"]),
        mk("Concat", ["n", "c1", "minus1"], ["target"], axis=0),
        mk("Reshape", ["r", "target"], ["flat"]),
        mk("Softmax", ["flat"], ["y"], axis=-1),
        mk("Concat", ["target", "target"], ["target2"], axis=0),   # a host value read on the GPU
    ]
    inits = {"zero": np.array([0], np.int64), "one": np.array([1], np.int64),
             "one_s": np.array(1, np.int64), "minus1": np.array([-1], np.int64)}
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "C", "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("target2", I64, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _reference(x: np.ndarray):
    r = np.maximum(x, 0).reshape(x.shape[0], x.shape[1], -1)
    e = np.exp(r - r.max(-1, keepdims=True))
    target = np.array([x.shape[0], x.shape[1], -1], np.int64)
    return e / e.sum(-1, keepdims=True), np.concatenate([target, target])


def test_shape_chain_stays_in_the_step_with_one_submit(webgpu, executes):
    sess = onnxedge.InferenceSession(_shape_chain_model(), providers=webgpu)
    off = [(r["op_type"], r["fallback_reasons"]) for r in sess.partition_report()
           if r["provider"] != "WebGpuExecutionProvider"]
    assert not off, off
    for shape in [(2, 3, 4, 5), (1, 2, 3, 1)]:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        del executes[:]
        y, t2 = sess.run(None, {"x": x})
        assert [reads for _, reads in executes] == [2], executes   # one submit: y, target2
        want_y, want_t2 = _reference(x)
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(t2, want_t2)


class _PageLikeDevice:
    """Stands for the page's device: `execute` (a synchronous read-back) is refused, only
    `execute_async` reads back."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def execute(self, cmds):
        raise AssertionError("a synchronous read-back happened mid-step")

    async def execute_async(self, cmds):
        return self._real.execute(cmds)


def test_run_async_on_a_device_that_reads_back_only_asynchronously(webgpu):
    dev = _PageLikeDevice(webgpu_device.default_device())
    sess = onnxedge.InferenceSession(
        _shape_chain_model(), providers=[("WebGpuExecutionProvider", {"device": dev}),
                                         "CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((3, 2, 4, 4)).astype(np.float32)
    y, t2 = asyncio.run(sess.run_async(None, {"x": x}))
    want_y, want_t2 = _reference(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(t2, want_t2)


def test_a_shape_the_gpu_would_have_to_compute_leaves_the_step(webgpu, executes):
    """A Reshape target made from a float tensor of unknown size cannot be hosted: the Reshape
    is not claimed (its data crosses at the step's edge), with a reason that says so."""
    nodes = [mk("Relu", ["x"], ["r"]), mk("Abs", ["sf"], ["sa"]),
             mk("Cast", ["sa"], ["target"], to=I64), mk("Reshape", ["r", "target"], ["y"])]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["A", "B"]),
                     helper.make_tensor_value_info("sf", TensorProto.FLOAT, ["K"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    sess = onnxedge.InferenceSession(m, providers=webgpu)
    report = {r["op_type"]: r for r in sess.partition_report()}
    assert report["Reshape"]["provider"] in ("CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider")
    assert "on the host" in report["Reshape"]["fallback_reasons"]["WebGpuExecutionProvider"]
    assert report["Relu"]["provider"] == "WebGpuExecutionProvider"
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    y = sess.run(None, {"x": x, "sf": np.array([3.0, -8.0], np.float32)})[0]
    assert len(executes) == 1     # one submit for the GPU step, none mid-step
    np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(3, 8))
