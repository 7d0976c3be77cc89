"""IOBinding on WebGPU: outputs bound to 'webgpu' stay on the device between runs and feed the
next run in place (a decoder's KV cache), as onnxruntime's `bind_output(name, "cuda")` does."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from onnxedge import OrtValue
from onnxedge.web.webgpu import device as webgpu_device

mk = helper.make_node
D = 8


def _decoder_step_model() -> bytes:
    """One decoder step: present = Concat(past, MatMul(x, W)) along the sequence; y reads the
    whole cache (ReduceMean over it), so the cache must be right at every step."""
    w = np.random.default_rng(3).standard_normal((D, D)).astype(np.float32)
    nodes = [mk("MatMul", ["x", "w"], ["h"]), mk("Unsqueeze", ["h", "one"], ["h1"]),
             mk("Concat", ["past", "h1"], ["present"], axis=1),
             mk("ReduceMean", ["present"], ["m"], axes=[1], keepdims=0),
             mk("Tanh", ["m"], ["y"])]
    g = helper.make_graph(
        nodes, "dec",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, D]),
         helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, "T", D])],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, [1, "T1", D]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, D])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1], np.int64), "one")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _reference_steps(xs):
    w = np.random.default_rng(3).standard_normal((D, D)).astype(np.float64)
    past = np.zeros((1, 1, D))
    ys = []
    for x in xs:
        past = np.concatenate([past, (x.astype(np.float64) @ w)[:, None, :]], axis=1)
        ys.append(np.tanh(past.mean(axis=1)))
    return ys, past


def test_kv_cache_stays_on_the_device_between_runs(webgpu, executes):
    sess = onnxedge.InferenceSession(_decoder_step_model(), providers=webgpu)
    assert all(r["provider"] == "WebGpuExecutionProvider" for r in sess.partition_report())
    xs = [np.random.default_rng(10 + k).standard_normal((1, D)).astype(np.float32)
          for k in range(4)]
    want, want_cache = _reference_steps(xs)
    past = OrtValue.ortvalue_from_numpy(np.zeros((1, 1, D), np.float32), "webgpu", 0)
    assert past.device_name() == "webgpu"
    io = sess.io_binding()
    for k, x in enumerate(xs):
        del executes[:]
        io.bind_cpu_input("x", x)
        io.bind_ortvalue_input("past", past)
        io.bind_output("present", "webgpu")
        io.bind_output("y")
        sess.run_with_iobinding(io)
        present, y = io.get_outputs()
        assert present.device_name() == "webgpu" and y.device_name() == "cpu"
        assert present.shape() == [1, k + 2, D]
        # one submit; only x is uploaded (past is read in place), only y comes back
        assert executes == [(1, 1)], executes
        np.testing.assert_allclose(y.numpy(), want[k], rtol=1e-4, atol=1e-5)
        past = present
    np.testing.assert_allclose(past.numpy(), want_cache, rtol=1e-4, atol=1e-5)
    assert io.copy_outputs_to_cpu()[0].shape == (1, 5, D)


def test_device_values_fed_to_the_cpu_are_read_back_at_the_step_edge(webgpu):
    cpu = onnxedge.InferenceSession(_decoder_step_model(), providers=["CPUExecutionProvider"])
    x = np.ones((1, D), np.float32)
    cache = np.random.default_rng(4).standard_normal((1, 3, D)).astype(np.float32)
    got = cpu.run_with_ort_values(None, {
        "x": OrtValue.ortvalue_from_numpy(x),
        "past": OrtValue.ortvalue_from_numpy(cache, "webgpu")})
    want = cpu.run(None, {"x": x, "past": cache})
    for g, w in zip(got, want):
        assert g.device_name() == "cpu"
        np.testing.assert_array_equal(g.numpy(), w)


def test_device_ortvalue_api(webgpu):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = OrtValue.ortvalue_from_numpy(a, "webgpu", 0)
    assert (v.device_name(), v.shape(), v.data_type(), v.is_tensor()) == \
        ("webgpu", [3, 4], "tensor(float)", True)
    np.testing.assert_array_equal(v.numpy(), a)
    v.update_inplace(a * 2)
    np.testing.assert_array_equal(v.numpy(), a * 2)
    with pytest.raises(onnxedge.InvalidArgument, match="shape"):
        v.update_inplace(np.zeros((4, 3), np.float32))
    with pytest.raises(onnxedge.InvalidArgument, match="host memory"):
        v.data_ptr()
    z = OrtValue.ortvalue_from_shape_and_type([2, 2], np.int64, "webgpu")
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 2), np.int64))
    with pytest.raises(onnxedge.NotImplemented, match="webgpu"):
        OrtValue.ortvalue_from_numpy(a, "cuda")


def test_a_device_value_gives_its_buffer_back_when_it_is_garbage(webgpu):
    dev = webgpu_device.default_device()
    v = OrtValue.ortvalue_from_numpy(np.zeros(12345, np.float32), "webgpu")
    del v
    gc.collect()
    before = dev.stats["buffers_reused"]
    w = OrtValue.ortvalue_from_numpy(np.ones(12345, np.float32), "webgpu")
    assert dev.stats["buffers_reused"] == before + 1
    np.testing.assert_array_equal(w.numpy(), np.ones(12345, np.float32))


def test_output_bound_to_a_device_ortvalue_receives_the_result(webgpu):
    sess = onnxedge.InferenceSession(_decoder_step_model(), providers=webgpu)
    x = np.ones((1, D), np.float32)
    past = np.zeros((1, 2, D), np.float32)
    target = OrtValue.ortvalue_from_shape_and_type([1, 3, D], np.float32, "webgpu")
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    io.bind_cpu_input("past", past)
    io.bind_ortvalue_output("present", target)
    sess.run_with_iobinding(io)
    want = sess.run(["present"], {"x": x, "past": past})[0]
    assert target.device_name() == "webgpu"
    np.testing.assert_allclose(target.numpy(), want, rtol=1e-6)
    wrong = OrtValue.ortvalue_from_shape_and_type([1, 9, D], np.float32, "webgpu")
    io.bind_ortvalue_output("present", wrong)
    with pytest.raises(onnxedge.InvalidArgument, match="present"):
        sess.run_with_iobinding(io)
