"""If with a constant condition: the optimizer inlines the branch it takes (renaming branch-local
values), and the outputs stay onnxruntime's."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxedge

ort = pytest.importorskip("onnxruntime")
mk = helper.make_node


def _branches():
    then_g = helper.make_graph(
        [mk("Add", ["x", "c"], ["t"]), mk("Relu", ["t"], ["out"])], "then", [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([1.5, -2.0, 0.25], np.float32), "c")])
    else_g = helper.make_graph(
        [mk("Mul", ["x", "two"], ["m"]), mk("Neg", ["m"], ["out"])], "else", [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    return then_g, else_g


def _model(cond, cond_is_input=False, then_g=None, else_g=None) -> bytes:
    t, e = _branches()
    # two Ifs with the same branches: their inlined copies must not collide
    nodes = [mk("Sigmoid", ["x"], ["y"]),
             mk("If", ["cond"], ["z"], then_branch=then_g or t, else_branch=else_g or e),
             mk("If", ["cond"], ["z2"], then_branch=then_g or t, else_branch=else_g or e),
             mk("Add", ["z", "y"], ["w0"]), mk("Mul", ["w0", "z2"], ["w"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])]
    inits = []
    if cond_is_input:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    else:
        inits.append(numpy_helper.from_array(np.array(cond), "cond"))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("w", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8).SerializeToString()


X = np.array([-1.0, 0.5, 3.0], np.float32)


def _ops(sess):
    return [r["op_type"] for r in sess.partition_report()]


@pytest.mark.parametrize("cond", [True, False])
def test_constant_condition_inlines_the_branch_it_takes(cond):
    m = _model(cond)
    sess = onnxedge.InferenceSession(m)
    assert "If" not in _ops(sess)
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], want, rtol=1e-6, atol=1e-7)
    so = onnxedge.SessionOptions()
    so.graph_optimization_level = onnxedge.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = onnxedge.InferenceSession(m, so)
    assert "If" in _ops(plain)
    np.testing.assert_array_equal(plain.run(None, {"x": X})[0], sess.run(None, {"x": X})[0])


def test_a_branch_output_that_is_an_outer_value_goes_through_identity():
    then_g = helper.make_graph([], "then", [],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)])
    m = _model(True, then_g=then_g)
    sess = onnxedge.InferenceSession(m)
    assert "If" not in _ops(sess)
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], (X + 1 / (1 + np.exp(-X))) * X,
                               rtol=1e-6)


def test_a_condition_fed_at_run_time_keeps_the_if():
    m = _model(None, cond_is_input=True)
    sess = onnxedge.InferenceSession(m)
    assert "If" in _ops(sess)
    for cond in (True, False):
        feeds = {"x": X, "cond": np.array(cond)}
        want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-6, atol=1e-7)


def test_a_branch_with_subgraphs_of_its_own_is_left_alone():
    inner_t, inner_e = _branches()
    then_g = helper.make_graph(
        [mk("If", ["cond"], ["out"], then_branch=inner_t, else_branch=inner_e)], "then", [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    m = _model(True, then_g=then_g)
    sess = onnxedge.InferenceSession(m)
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], want, rtol=1e-6, atol=1e-7)
