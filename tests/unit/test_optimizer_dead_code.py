"""Dead-node elimination and the tidy-up after it (unused initializers, value infos)."""
from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def test_nodes_nothing_reads_are_removed_with_their_weights():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["unused"]),
             helper.make_node("Relu", ["unused"], ["unused2"]),
             helper.make_node("Neg", ["x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [vi("x", [2, 2])], [vi("y", [2, 2])],
                              [helper.make_tensor("w", 1, [2, 2], [1.0, 2.0, 3.0, 4.0])],
                              value_info=[vi("unused", [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    data = model.SerializeToString()
    opt = optimized(data, "basic")
    assert ops(opt) == ["Neg"]
    assert opt.graph.initializers == {} and opt.graph.value_info == {}
    assert_same_outputs(data, opt, {"x": rand(2, 2)})


def test_a_node_with_one_used_output_stays():
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"]), helper.make_node("Neg", ["v"], ["y"])]
    data = make_model(nodes, [vi("x", [5])], [vi("y", [2])], {"k": np.array([2], np.int64)})
    opt = optimized(data, "basic")
    assert ops(opt) == ["TopK", "Neg"]
    assert_same_outputs(data, opt, {"x": rand(5)})
