"""Shape-op folding: Shape/Size of statically shaped values become constants."""
from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def test_shape_of_a_static_input_feeds_a_reshape_as_a_constant():
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Size", ["r"], ["n"]),
             helper.make_node("Reshape", ["z", "s"], ["y"]),
             helper.make_node("Cast", ["n"], ["nf"], to=1),
             helper.make_node("Add", ["y", "nf"], ["out"])]
    data = make_model(nodes, [vi("x", [2, 3, 4]), vi("z", [12])], [vi("out", [3, 4])], opset=15)
    model = optimized(data, "basic")
    assert ops(model) == ["Reshape", "Add"]
    shape = model.graph.initializers[model.graph.nodes[0].inputs[1]]
    np.testing.assert_array_equal(shape, [3, 4])
    assert_same_outputs(data, model, {"x": rand(2, 3, 4), "z": rand(12)})


def test_symbolic_dims_are_not_folded():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Reshape", ["z", "s"], ["y"])]
    data = make_model(nodes, [vi("x", ["n", 3]), vi("z", ["m"])], [vi("y", None)])
    assert ops(optimized(data, "basic")) == ["Shape", "Reshape"]


def test_shapes_propagate_through_ops():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Transpose", ["m"], ["t"], perm=[1, 0]),
             helper.make_node("Unsqueeze", ["t", "ax"], ["u"]),
             helper.make_node("Shape", ["u"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=1)]
    data = make_model(nodes, [vi("x", [2, 3])], [vi("y", [3])],
                      {"w": rand(3, 5), "ax": np.array([0], np.int64)})
    model = optimized(data, "basic")
    assert ops(model) == ["Cast"]
    assert_same_outputs(data, model, {"x": rand(2, 3)})


def test_known_dims_of_a_partly_symbolic_shape_are_folded():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
             helper.make_node("Gather", ["s", "j"], ["batch"], axis=0),
             helper.make_node("Concat", ["batch", "d", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["z", "target"], ["y"])]
    data = make_model(nodes, [vi("x", ["n", 2, 6]), vi("z", ["m"])], [vi("y", None)],
                      {"i": np.array([-1], np.int64), "j": np.array([0], np.int64),
                       "rest": np.array([-1], np.int64)})
    model = optimized(data, "basic")
    assert ops(model) == ["Shape", "Gather", "Concat", "Reshape"]
    concat = model.graph.nodes[2]
    np.testing.assert_array_equal(model.graph.initializers[concat.inputs[1]], [6])
    assert_same_outputs(data, model, {"x": rand(3, 2, 6), "z": rand(36)})
