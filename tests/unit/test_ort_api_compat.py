"""onnxruntime scripts run unchanged: profiling (Chrome-trace JSON as onnxruntime writes it),
IOBinding/OrtValue, run_with_ort_values, free-dimension overrides, add_initializer, set_providers,
and NodeArg shapes as onnxruntime reports them — each compared with onnxruntime itself."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge

ort = pytest.importorskip("onnxruntime")


def _mlp(first_dim="batch"):
    rng = np.random.RandomState(0)
    w1 = numpy_helper.from_array(rng.randn(4, 8).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.randn(8, 3).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [first_dim, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [first_dim, 3])], [w1, w2])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _both(model, opts_edge=None, opts_ort=None):
    return (onnxedge.InferenceSession(model, opts_edge, providers=["CPUExecutionProvider"]),
            ort.InferenceSession(model, opts_ort, providers=["CPUExecutionProvider"]))


def test_profiling_writes_onnxruntimes_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = np.ones((2, 4), np.float32)
    so_e, so_o = onnxedge.SessionOptions(), ort.SessionOptions()
    for so in (so_e, so_o):
        so.enable_profiling = True
        so.graph_optimization_level = so.graph_optimization_level.ORT_DISABLE_ALL
    so_e.profile_file_prefix, so_o.profile_file_prefix = "edge_", "ort_"
    edge, ref = _both(_mlp(), so_e, so_o)
    for _ in range(2):
        edge.run(None, {"x": x})
        ref.run(None, {"x": x})
    path_e, path_o = edge.end_profiling(), ref.end_profiling()
    assert os.path.basename(path_e).startswith("edge_") and path_e.endswith(".json")
    events_e, events_o = json.load(open(path_e)), json.load(open(path_o))
    node_e = [e for e in events_e if e["cat"] == "Node"]
    node_o = [e for e in events_o if e["cat"] == "Node" and e["name"].endswith("_kernel_time")]
    # the same event shape and per-node arguments as onnxruntime
    assert set(node_e[0]) == set(node_o[0])
    assert {"op_name", "provider", "input_type_shape", "output_type_shape"} <= set(node_e[0]["args"])
    assert sorted(e["name"] for e in node_e) == sorted(e["name"] for e in node_o)
    mm1 = [e for e in node_e if e["name"] == "mm1_kernel_time"][0]
    assert mm1["args"]["input_type_shape"] == [{"float": [2, 4]}, {"float": [4, 8]}]
    assert mm1["args"]["output_type_shape"] == [{"float": [2, 8]}]
    assert [e["name"] for e in events_e if e["cat"] == "Session"].count("model_run") == 2
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events_e)
    assert edge.end_profiling() == ""          # profiling stopped


def test_io_binding_and_ort_values_match_onnxruntime():
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 7
    edge, ref = _both(_mlp())
    want = ref.run(None, {"x": x})[0]
    for sess in (edge, ref):
        b = sess.io_binding()
        b.bind_cpu_input("x", x)
        b.bind_output("y")
        sess.run_with_iobinding(b)
        np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], want, rtol=1e-5)
        assert b.get_outputs()[0].shape() == [2, 3]
    # a preallocated output is written in place; an input bound by pointer is read from there
    out = onnxedge.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    held = np.ascontiguousarray(x)
    b = edge.io_binding()
    b.bind_input("x", "cpu", 0, np.float32, list(held.shape), held.ctypes.data)
    b.bind_ortvalue_output("y", out)
    edge.run_with_iobinding(b)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)
    assert out.data_type() == "tensor(float)" and out.device_name() == "cpu"
    got = edge.run_with_ort_values(["y"], {"x": onnxedge.OrtValue.ortvalue_from_numpy(x)})
    ref_got = ref.run_with_ort_values(["y"], {"x": ort.OrtValue.ortvalue_from_numpy(x)})
    np.testing.assert_allclose(got[0].numpy(), ref_got[0].numpy(), rtol=1e-5)
    with pytest.raises(onnxedge.NotImplemented, match="host"):
        b.bind_output("y", "cuda")


def test_free_dimension_override_and_add_initializer_as_onnxruntime():
    so_e, so_o = onnxedge.SessionOptions(), ort.SessionOptions()
    w1 = (np.arange(32, dtype=np.float32).reshape(4, 8) - 16) / 9
    held = []   # onnxruntime does not own an added initializer: keep it alive
    for so, mod in ((so_e, onnxedge), (so_o, ort)):
        so.add_free_dimension_override_by_name("batch", 2)
        held.append(mod.OrtValue.ortvalue_from_numpy(w1))
        so.add_initializer("w1", held[-1])
    edge, ref = _both(_mlp(), so_e, so_o)
    assert edge.get_inputs()[0].shape == ref.get_inputs()[0].shape == [2, 4]
    x = np.ones((2, 4), np.float32)
    np.testing.assert_allclose(edge.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-5)
    with pytest.raises(onnxedge.InvalidArgument):
        edge.run(None, {"x": np.ones((3, 4), np.float32)})
    bad = onnxedge.SessionOptions()
    bad.add_free_dimension_override_by_name("nope", 1)
    with pytest.raises(onnxedge.InvalidArgument, match="nope"):
        onnxedge.InferenceSession(_mlp(), bad)


def test_unknown_dims_are_none_as_in_onnxruntime():
    model = _mlp(first_dim=None)
    edge, ref = _both(model)
    assert edge.get_inputs()[0].shape == ref.get_inputs()[0].shape


def test_set_providers_and_fallback_switches():
    edge = onnxedge.InferenceSession(_mlp(), providers=["CPUExecutionProvider"])
    edge.disable_fallback()
    edge.set_providers(["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert edge.get_providers() == ["CPUExecutionProvider"]
    edge.enable_fallback()
    x = np.ones((1, 4), np.float32)
    ref = ort.InferenceSession(_mlp(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(edge.run(None, {"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-5)


def test_profile_command_prints_a_table_and_writes_trace_and_plot(tmp_path, capsys):
    from onnxedge import cli
    path = str(tmp_path / "mlp.onnx")
    with open(path, "wb") as f:
        f.write(_mlp())
    assert cli.main(["profile", path, "--repeat", "3", "-o", str(tmp_path / "prof"),
                     "--optimize", "disable"]) == 0
    out = capsys.readouterr().out
    assert "3 run(s)" in out
    table = [ln.split() for ln in out.splitlines() if ln.strip().startswith(("MatMul", "Relu"))]
    assert {r[0]: int(r[2]) for r in table} == {"MatMul": 6, "Relu": 3}
    traces = [f for f in os.listdir(tmp_path / "prof") if f.endswith(".json")]
    events = json.load(open(tmp_path / "prof" / traces[0]))
    assert sum(e["cat"] == "Node" for e in events) == 12   # the warm-up run too
    pytest.importorskip("matplotlib")
    assert any(f.endswith(".png") for f in os.listdir(tmp_path / "prof"))
