"""Residual fusion: Conv + computed tensor (+ activation) into one FusedConv with input Z."""
from __future__ import annotations

from onnx import helper

from optimizer_util import assert_same_outputs, make_model, optimized, rand, vi


def test_shortcut_add_and_relu_join_the_conv():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "c"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    data = make_model(nodes, [vi("x", [1, 3, 5, 5])], [vi("y", None)], {"w": rand(3, 3, 3, 3)})
    model = optimized(data)
    node, = model.graph.nodes
    assert (node.domain, node.op_type, node.inputs) == ("com.onnxedge", "FusedConv", ["x", "w", "", "x"])
    assert node.attributes["activation"] == "Relu"
    assert_same_outputs(data, model, {"x": rand(1, 3, 5, 5, seed=1)}, rtol=1e-5, atol=1e-5)


def test_broadcast_z_is_added_like_add():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Add", ["c", "z"], ["y"])]
    data = make_model(nodes, [vi("x", [1, 2, 4, 4]), vi("z", [2, 3, 1, 1])], [vi("y", None)],
                      {"w": rand(3, 2, 1, 1), "b": rand(3, seed=2)})
    model = optimized(data)
    assert [n.op_type for n in model.graph.nodes] == ["FusedConv"]
    assert_same_outputs(data, model, {"x": rand(1, 2, 4, 4, seed=1), "z": rand(2, 3, 1, 1, seed=3)},
                        rtol=1e-5, atol=1e-5)


def test_shared_conv_output_stays():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])]
    data = make_model(nodes, [vi("x", [1, 3, 4, 4])], [vi("y", None), vi("c", None)], {"w": rand(3, 3, 1, 1)})
    assert [n.op_type for n in optimized(data).graph.nodes] == ["Conv", "Add"]
