"""If / Loop bodies partitioned over the C engine and the CPU (onnxedge.subgraph_plans): a branch
chosen at run time runs as engine programs of its own, reading the main graph's weights as
constants; a Loop body's carried values go through the engine; an initializer a feed can
override is not baked in; numpy-only sessions keep the plain CPU runner. Checked against
onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from neon_helpers import ensure_built

ensure_built()

import onnxedge  # noqa: E402
from onnxedge import subgraph_plans  # noqa: E402

ort = pytest.importorskip("onnxruntime")
from onnxedge.edge.neon.provider import engine_name  # noqa: E402
ENGINE = engine_name()   # the C engine's provider on this machine
RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((8, 4)).astype(np.float32)
W2 = RNG.standard_normal((8, 4)).astype(np.float32)


def _vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _if_model(nested=False, w1_is_input=False):
    """y = If(sr > 8000, Relu(x @ W1^T), Sigmoid(x @ W2^T)) (the then branch optionally holding
    a second If on sr > 12000)."""
    then_nodes = [helper.make_node("Gemm", ["x", "W1"], ["t0"], transB=1), helper.make_node("Relu", ["t0"], ["t"])]
    if nested:
        inner_then = helper.make_graph([helper.make_node("Tanh", ["t"], ["u"])], "inner_then", [], [_vi("u")])
        inner_else = helper.make_graph([helper.make_node("Mul", ["t", "t"], ["v"])], "inner_else", [], [_vi("v")])
        then_nodes += [helper.make_node("Greater", ["sr", "thr2"], ["c2"]),
                       helper.make_node("If", ["c2"], ["t2"], then_branch=inner_then, else_branch=inner_else)]
    then_g = helper.make_graph(then_nodes, "then", [], [_vi("t2" if nested else "t")])
    else_g = helper.make_graph([helper.make_node("Gemm", ["x", "W2"], ["e0"], transB=1),
                                helper.make_node("Sigmoid", ["e0"], ["e"])], "else", [], [_vi("e")])
    nodes = [helper.make_node("Greater", ["sr", "thr"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    inputs = [_vi("x", shape=["N", 4]), _vi("sr", TensorProto.INT64, [])]
    if w1_is_input:
        inputs.append(_vi("W1", shape=[8, 4]))
    g = helper.make_graph(nodes, "g", inputs, [_vi("y")], [
        numpy_helper.from_array(W1, "W1"), numpy_helper.from_array(W2, "W2"),
        numpy_helper.from_array(np.array(8000, np.int64), "thr"),
        numpy_helper.from_array(np.array(12000, np.int64), "thr2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _bodies(sess):
    return list(sess._runner_for_subgraphs._children.values())


def _engine_programs(runner):
    plan = runner.plan()
    assert plan is not None
    return [p for st in plan.steps if st.provider == ENGINE and st.programs is not None
            for p in st.programs.programs.values() if p is not None]


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("nested", [False, True])
def test_each_branch_runs_as_engine_programs(nested):
    model = _if_model(nested)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = onnxedge.InferenceSession(model)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for sr in (16000, 8000, 16000, 10000, 8000):
        feeds = {"x": x, "sr": np.array(sr, np.int64)}
        _close(sess.run(None, feeds)[0], ref.run(None, feeds)[0])
    bodies = {b.graph.name: b for b in _bodies(sess)}
    assert set(bodies) == {"then", "else"}
    for body in bodies.values():
        assert _engine_programs(body), [st.programs.refusals for st in body.plan().steps if st.programs]
    if nested:
        inner = list(bodies["then"]._children.values())
        assert {b.graph.name for b in inner} == {"inner_then", "inner_else"}
        assert all(b.plan() is not None for b in inner)


def test_a_weight_a_feed_can_override_is_read_at_run_time():
    model = _if_model(w1_is_input=True)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    sess = onnxedge.InferenceSession(model)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    for w in (W1, -W1):
        feeds = {"x": x, "sr": np.array(16000, np.int64), "W1": w}
        _close(sess.run(None, feeds)[0], ref.run(None, feeds)[0])


def test_loop_body_carries_values_through_the_engine():
    """acc_{i+1} = Tanh(acc_i @ W^T + b) for `trips` iterations; scan output of every acc."""
    w = (RNG.standard_normal((6, 6)) * 0.5).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Gemm", ["acc", "W", "B"], ["g"], transB=1), helper.make_node("Tanh", ["g"], ["acc2"]),
         helper.make_node("Identity", ["cond"], ["cond2"]), helper.make_node("Identity", ["acc2"], ["scan"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("acc", shape=[2, 6])],
        [_vi("cond2", TensorProto.BOOL, []), _vi("acc2", shape=[2, 6]), _vi("scan", shape=[2, 6])])
    g = helper.make_graph([helper.make_node("Loop", ["trips", "", "x"], ["final", "all"], body=body)], "g",
                          [_vi("x", shape=[2, 6]), _vi("trips", TensorProto.INT64, [])], [_vi("final"), _vi("all")],
                          [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feeds = {"x": RNG.standard_normal((2, 6)).astype(np.float32), "trips": np.array(5, np.int64)}
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = onnxedge.InferenceSession(model)
    for _ in range(2):
        for got, ref in zip(sess.run(None, feeds), want):
            _close(got, ref)
    (loop_body,) = _bodies(sess)
    assert _engine_programs(loop_body)


def test_numpy_only_sessions_keep_the_cpu_runner():
    opts = onnxedge.SessionOptions()
    opts.add_session_config_entry("session.cpu_engine", "0")
    sess = onnxedge.InferenceSession(_if_model(), opts)
    assert not isinstance(sess._runner_for_subgraphs, subgraph_plans.PlannedRunner)
    feeds = {"x": np.ones((1, 4), np.float32), "sr": np.array(16000, np.int64)}
    _close(sess.run(None, feeds)[0], np.maximum(np.ones((1, 4), np.float32) @ W1.T, 0))
