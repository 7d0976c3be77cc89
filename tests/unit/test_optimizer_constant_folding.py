"""Constant folding: Constant nodes and all-constant deterministic nodes become initializers."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


def test_constant_subexpression_becomes_one_initializer():
    a, b = rand(3, 4, seed=1), rand(3, 4, seed=2)
    nodes = [_const("c", b),
             helper.make_node("Mul", ["a", "c"], ["ac"]),
             helper.make_node("Abs", ["ac"], ["s"]),
             helper.make_node("Transpose", ["a"], ["at"]),
             helper.make_node("MatMul", ["x", "at"], ["m"]),
             helper.make_node("Add", ["m", "s2"], ["y"]),
             helper.make_node("ReduceSum", ["s"], ["s2"], keepdims=0)]
    nodes = nodes[:5] + [nodes[6], nodes[5]]
    data = make_model(nodes, [vi("x", [2, 4])], [vi("y", [2, 3])], {"a": a}, opset=11)
    model = optimized(data, "basic")
    assert ops(model) == ["MatMul", "Add"]
    folded = model.graph.initializers[model.graph.nodes[0].inputs[1]]
    np.testing.assert_array_equal(folded, a.T)
    assert "a" not in model.graph.initializers        # no longer read: dropped
    assert_same_outputs(data, model, {"x": rand(2, 4, seed=3)})


def test_random_ops_and_graph_outputs_are_not_folded():
    nodes = [helper.make_node("RandomUniformLike", ["a"], ["r"]),
             helper.make_node("Add", ["r", "x"], ["y"]),
             helper.make_node("Neg", ["a"], ["z"])]
    data = make_model(nodes, [vi("x", [3])], [vi("y", [3]), vi("z", [3])],
                      {"a": np.ones(3, np.float32)})
    model = optimized(data, "basic")
    assert ops(model) == ["RandomUniformLike", "Add", "Neg"]


def test_huge_results_stay_computed_at_run_time():
    shape = np.array([5000, 1000], np.int64)         # 20 MB of float32 from 16 bytes
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                              value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
             helper.make_node("Add", ["x", "s"], ["y"])]
    data = make_model(nodes, [vi("x", [1])], [vi("y", [1])], {"shape": shape}, opset=11)
    model = optimized(data, "basic")
    assert "ConstantOfShape" in ops(model)
    assert_same_outputs(data, model, {"x": np.zeros(1, np.float32)})


def test_overridable_initializers_are_not_constants():
    nodes = [helper.make_node("Neg", ["w"], ["nw"]), helper.make_node("Add", ["x", "nw"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", [2]), vi("w", [2])], [vi("y", [2])],
                              [numpy_helper.from_array(np.ones(2, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    opt = optimized(model.SerializeToString(), "basic")
    assert ops(opt) == ["Neg", "Add"]


def test_failing_node_is_left_for_run_time():
    nodes = [helper.make_node("Reshape", ["a", "bad"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])]
    data = make_model(nodes, [vi("x", [6])], [vi("y", [6])],
                      {"a": np.ones(6, np.float32), "bad": np.array([4], np.int64)})
    assert ops(optimized(data, "basic")) == ["Reshape", "Add"]


def test_folding_inside_an_if_branch():
    then = helper.make_graph(
        [_const("k", np.float32(2)), helper.make_node("Mul", ["k", "k"], ["k2"]),
         helper.make_node("Mul", ["x", "k2"], ["t"])], "then", [], [vi("t", [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    data = make_model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    model = optimized(data, "basic")
    body = model.graph.nodes[0].attributes["then_branch"]
    assert [n.op_type for n in body.nodes] == ["Mul"]
    for c in (True, False):
        assert_same_outputs(data, model, {"c": np.array(c), "x": rand(2)})
