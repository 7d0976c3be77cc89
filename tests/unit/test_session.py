"""InferenceSession: onnxruntime's API, input checking, errors, threads, partition report."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge
from modelgen import single_node_model, tensor_info


def _mlp_bytes(opset: int = 17) -> bytes:
    rng = np.random.RandomState(0)
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 3)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp", [tensor_info("x", TensorProto.FLOAT, ["batch", 4])],
        [tensor_info("y", TensorProto.FLOAT, ["batch", 3]), tensor_info("h2", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tests", doc_string="a tiny mlp")
    model.ir_version = 8
    helper.set_model_props(model, {"author": "onnxedge"})
    return model.SerializeToString(), (w1, b1, w2)


def _reference(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0)
    return h @ w2, h


def test_run_matches_numpy_and_api_shape():
    data, weights = _mlp_bytes()
    sess = onnxedge.InferenceSession(data)
    x = np.random.RandomState(1).standard_normal((5, 4)).astype(np.float32)
    y, h = sess.run(None, {"x": x})
    ry, rh = _reference(x, *weights)
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, rh, rtol=1e-5, atol=1e-6)
    only_y, = sess.run(["y"], {"x": x})
    np.testing.assert_allclose(only_y, ry, rtol=1e-5, atol=1e-6)
    [inp] = sess.get_inputs()
    assert (inp.name, inp.type, inp.shape) == ("x", "tensor(float)", ["batch", 4])
    assert [o.name for o in sess.get_outputs()] == ["y", "h2"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    meta = sess.get_modelmeta()
    assert meta.producer_name == "tests" and meta.description == "a tiny mlp"
    assert meta.custom_metadata_map == {"author": "onnxedge"} and meta.graph_name == "mlp"


def test_matches_onnxruntime_api_names():
    ort = pytest.importorskip("onnxruntime")
    data, _ = _mlp_bytes()
    ours = onnxedge.InferenceSession(data, providers=["CPUExecutionProvider"])
    theirs = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    assert [(a.name, a.type, a.shape) for a in ours.get_inputs()] == \
        [(a.name, a.type, a.shape) for a in theirs.get_inputs()]
    assert [(a.name, a.type) for a in ours.get_outputs()] == \
        [(a.name, a.type) for a in theirs.get_outputs()]
    x = np.ones((2, 4), np.float32)
    for a, b in zip(ours.run(None, {"x": x}), theirs.run(None, {"x": x})):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for attr in ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL"):
        assert int(getattr(onnxedge.GraphOptimizationLevel, attr)) == \
            int(getattr(ort.GraphOptimizationLevel, attr))


def test_loads_from_path(tmp_path):
    data, weights = _mlp_bytes()
    path = tmp_path / "mlp.onnx"
    path.write_bytes(data)
    sess = onnxedge.InferenceSession(str(path))
    x = np.zeros((1, 4), np.float32)
    np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], _reference(x, *weights)[0], atol=1e-6)


@pytest.mark.parametrize("feed, pattern", [
    ({"x": np.zeros((2, 5), np.float32)}, r"input 'x': dimension 1 is 5, the model expects 4"),
    ({"x": np.zeros((2, 4), np.float64)}, r"input 'x': got tensor\(double\), expected tensor\(float\)"),
    ({"x": np.zeros((4,), np.float32)}, r"input 'x': got rank 1 .* expected rank 2"),
    ({"nope": np.zeros((2, 4), np.float32)}, r"'nope' is not an input of this model; its inputs are \['x'\]"),
    ({}, r"missing input\(s\) \['x'\]"),
    ({"x": object()}, r"input 'x': got a object, expected a numpy array"),
])
def test_bad_feeds_raise_invalid_argument(feed, pattern):
    sess = onnxedge.InferenceSession(_mlp_bytes()[0])
    with pytest.raises(onnxedge.InvalidArgument, match=pattern):
        sess.run(None, feed)


def test_bad_output_name_and_feed_type():
    sess = onnxedge.InferenceSession(_mlp_bytes()[0])
    x = np.zeros((1, 4), np.float32)
    with pytest.raises(onnxedge.InvalidArgument, match=r"'z' is not an output of this model"):
        sess.run(["z"], {"x": x})
    with pytest.raises(onnxedge.InvalidArgument, match="input_feed must be a dict"):
        sess.run(None, [x])


def test_unknown_op_is_not_implemented_naming_op_domain_opset():
    data = single_node_model("FancyOp", {"x": np.zeros(2, np.float32)}, ["y"], domain="my.domain")
    with pytest.raises(onnxedge.NotImplemented, match=r"FancyOp.*domain my\.domain.*opset 1"):
        onnxedge.InferenceSession(data)


def test_malformed_models_raise_invalid_graph(tmp_path):
    with pytest.raises(onnxedge.InvalidGraph):
        onnxedge.InferenceSession(b"\x08\x07\x12\xff\xff\xff")
    graph = helper.make_graph([helper.make_node("Relu", ["missing"], ["y"])], "g",
                              [tensor_info("x")], [tensor_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnxedge.InvalidGraph, match="reads 'missing'"):
        onnxedge.InferenceSession(model.SerializeToString())
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [tensor_info("x")], [tensor_info("z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnxedge.InvalidGraph, match="output 'z' .* never produced"):
        onnxedge.InferenceSession(model.SerializeToString())
    with pytest.raises(onnxedge.NoSuchFile):
        onnxedge.InferenceSession(str(tmp_path / "absent.onnx"))


def test_cycle_is_invalid_graph_and_unsorted_nodes_are_sorted():
    nodes = [helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Relu", ["x"], ["a"])]
    graph = helper.make_graph(nodes, "g", [tensor_info("x", shape=[2])], [tensor_info("b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out, = onnxedge.InferenceSession(model.SerializeToString()).run(None, {"x": np.array([-1, 2], np.float32)})
    np.testing.assert_array_equal(out, [0, 2])
    nodes = [helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])]
    graph = helper.make_graph(nodes, "g", [tensor_info("x")], [tensor_info("b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnxedge.InvalidGraph, match="cycle"):
        onnxedge.InferenceSession(model.SerializeToString())


def test_kernel_failure_names_the_node():
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="the_matmul")], "g",
                              [tensor_info("a", shape=None), tensor_info("b", shape=None)], [tensor_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxedge.InferenceSession(model.SerializeToString())
    with pytest.raises(onnxedge.OnnxEdgeError, match="MatMul node 'the_matmul'"):
        sess.run(None, {"a": np.zeros((2, 3), np.float32), "b": np.zeros((4, 5), np.float32)})


def test_outputs_do_not_alias_inputs_or_initializers():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"]),
                               helper.make_node("Identity", ["w"], ["z"])], "g",
                              [tensor_info("x", shape=[2])], [tensor_info("y"), tensor_info("z")],
                              [numpy_helper.from_array(np.ones(2, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxedge.InferenceSession(model.SerializeToString())
    x = np.zeros(2, np.float32)
    y, z = sess.run(None, {"x": x})
    y[0] = 5
    z[0] = 7
    assert x[0] == 0 and y.flags.writeable and z.flags.writeable
    assert sess.run(["z"], {"x": x})[0][0] == 1


def test_run_is_thread_safe():
    data, weights = _mlp_bytes()
    sess = onnxedge.InferenceSession(data)
    rng = np.random.RandomState(3)
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(8)]
    expected = [_reference(x, *weights)[0] for x in xs]
    errors = []

    def work(i):
        try:
            for _ in range(25):
                np.testing.assert_allclose(sess.run(["y"], {"x": xs[i]})[0], expected[i], rtol=1e-5, atol=1e-6)
        except Exception as e:  # collected and re-raised in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_providers_and_options():
    assert onnxedge.get_available_providers()[-1] == "CPUExecutionProvider"
    data, _ = _mlp_bytes()
    with pytest.raises(onnxedge.InvalidArgument, match="provider_options has 2 entries"):
        onnxedge.InferenceSession(data, providers=["CPUExecutionProvider"], provider_options=[{}, {}])
    sess = onnxedge.InferenceSession(data, providers=[("CPUExecutionProvider", {"x": "1"})])
    assert sess.get_provider_options() == {"CPUExecutionProvider": {"x": "1"}}
    opts = onnxedge.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.add_session_config_entry("session.foo", "bar")
    sess = onnxedge.InferenceSession(data, sess_options=opts)
    assert sess.get_session_options().get_session_config_entry("session.foo") == "bar"
    report = sess.partition_report()
    assert [r["op_type"] for r in report] == ["MatMul", "Add", "Relu", "MatMul"]
    # numpy, and the C engine (session.cpu_engine) for what it claims where its library loads
    assert {r["provider"] for r in report} <= {"CPUExecutionProvider", "NeonExecutionProvider", "X64ExecutionProvider"}


def test_intermediates_are_released_after_last_use():
    from onnxedge import executor
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [tensor_info("x", shape=[2])], [tensor_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxedge.InferenceSession(model.SerializeToString())
    free = executor.last_uses(sess.model.graph.nodes, ["y"])
    assert free == [["x"], [], ["a", "b"], ["c"]]
    np.testing.assert_array_equal(sess.run(None, {"x": np.array([-1, 3], np.float32)})[0], [0, 6])


def test_optimized_model_filepath_writes_a_loadable_model(tmp_path):
    data, weights = _mlp_bytes()
    opts = onnxedge.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "out.onnx")
    onnxedge.InferenceSession(data, opts)
    x = np.random.RandomState(2).standard_normal((2, 4)).astype(np.float32)
    again = onnxedge.InferenceSession(str(tmp_path / "out.onnx"))
    np.testing.assert_allclose(again.run(["y"], {"x": x})[0], _reference(x, *weights)[0], rtol=1e-5, atol=1e-6)
    opts.optimized_model_filepath = str(tmp_path / "out.oxe")
    onnxedge.InferenceSession(data, opts)
    with open(str(tmp_path / "out.oxe"), "rb") as f:
        assert f.read(8)[4:8] == b"OXE1"
    again = onnxedge.InferenceSession(str(tmp_path / "out.oxe"))
    np.testing.assert_allclose(again.run(["y"], {"x": x})[0], _reference(x, *weights)[0], rtol=1e-5, atol=1e-6)
    opts.optimized_model_filepath = str(tmp_path / "out.model")   # like ORT: not .oxe -> ONNX
    onnxedge.InferenceSession(data, opts)
    with open(str(tmp_path / "out.model"), "rb") as f:
        assert f.read(8)[4:8] != b"OXE1"
    again = onnxedge.InferenceSession(str(tmp_path / "out.model"))
    np.testing.assert_allclose(again.run(["y"], {"x": x})[0], _reference(x, *weights)[0], rtol=1e-5, atol=1e-6)


def test_newer_ir_and_opset_load_when_every_op_resolves():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [tensor_info("x", shape=[2])], [tensor_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)])
    model.ir_version = 99
    sess = onnxedge.InferenceSession(model.SerializeToString())
    np.testing.assert_array_equal(sess.run(None, {"x": np.array([-1, 1], np.float32)})[0], [0, 1])
    graph = helper.make_graph([helper.make_node("FutureOp", ["x"], ["y"])], "g",
                              [tensor_info("x", shape=[2])], [tensor_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 99)])
    model.ir_version = 99
    with pytest.raises(onnxedge.NotImplemented, match=r"FutureOp \(domain ai.onnx, opset 99\)"):
        onnxedge.InferenceSession(model.SerializeToString())


def test_types_numpy_lacks_name_the_missing_package(monkeypatch):
    from onnxedge import dtypes
    monkeypatch.setattr(dtypes, "_ML_DTYPES", False)
    with pytest.raises(onnxedge.NotImplemented, match=r"BFLOAT16 needs the optional package 'ml_dtypes'"):
        dtypes.to_numpy(dtypes.BFLOAT16)
    assert not dtypes.has_numpy(dtypes.BFLOAT16) and dtypes.has_numpy(dtypes.FLOAT)
