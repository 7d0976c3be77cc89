"""Identity and Dropout elimination."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def test_identity_between_nodes_is_removed():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["i"]),
             helper.make_node("Neg", ["i"], ["y"])]
    data = make_model(nodes, [vi("x", [4])], [vi("y", [4])])
    model = optimized(data, "basic")
    assert ops(model) == ["Relu", "Neg"] and model.graph.nodes[1].inputs == ["r"]
    assert_same_outputs(data, model, {"x": rand(4)})


def test_identity_to_a_graph_output_renames_its_producer():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    data = make_model(nodes, [vi("x", [4])], [vi("y", [4])])
    model = optimized(data, "basic")
    assert ops(model) == ["Relu"] and model.graph.nodes[0].outputs == ["y"]
    assert [o.name for o in model.graph.outputs] == ["y"]
    assert_same_outputs(data, model, {"x": rand(4)})


def test_identity_of_an_input_to_an_output_stays():
    data = make_model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [4])], [vi("y", [4])])
    assert ops(optimized(data, "basic")) == ["Identity"]


def test_identity_feeding_a_subgraph_is_renamed_inside_it():
    body = helper.make_graph([helper.make_node("Neg", ["i"], ["t"])], "then", [], [vi("t", [2])])
    other = helper.make_graph([helper.make_node("Abs", ["i"], ["e"])], "else", [], [vi("e", [2])])
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=other)]
    data = make_model(nodes, [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    model = optimized(data, "basic")
    assert ops(model) == ["If"]
    assert model.graph.nodes[0].attributes["then_branch"].nodes[0].inputs == ["x"]
    for c in (True, False):
        assert_same_outputs(data, model, {"c": np.array(c), "x": rand(2)})


def test_inference_dropout_is_removed():
    nodes = [helper.make_node("Dropout", ["x", "ratio"], ["d"]), helper.make_node("Neg", ["d"], ["y"])]
    data = make_model(nodes, [vi("x", [3, 4])], [vi("y", [3, 4])],
                      {"ratio": np.array(0.5, np.float32)}, opset=13)
    model = optimized(data, "basic")
    assert ops(model) == ["Neg"] and "ratio" not in model.graph.initializers
    assert_same_outputs(data, model, {"x": rand(3, 4)})


def test_dropout_with_a_used_mask_or_a_training_input_stays():
    used = [helper.make_node("Dropout", ["x"], ["d", "m"]), helper.make_node("Neg", ["d"], ["y"])]
    data = make_model(used, [vi("x", [3])], [vi("y", [3]), vi("m", [3], TensorProto.BOOL)], opset=13)
    assert ops(optimized(data, "basic")) == ["Dropout", "Neg"]
    training = [helper.make_node("Dropout", ["x", "", "t"], ["d"]), helper.make_node("Neg", ["d"], ["y"])]
    data = make_model(training, [vi("x", [3]), vi("t", [], TensorProto.BOOL)], [vi("y", [3])], opset=13)
    assert ops(optimized(data, "basic")) == ["Dropout", "Neg"]
