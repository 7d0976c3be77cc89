"""Reshape chains collapse to one Reshape; a Reshape that changes nothing disappears."""
from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def test_unsqueeze_reshape_flatten_chain_becomes_one_reshape():
    nodes = [helper.make_node("Unsqueeze", ["x", "ax"], ["u"]),
             helper.make_node("Reshape", ["u", "s"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=2),
             helper.make_node("Neg", ["f"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)],
                      {"ax": np.array([0], np.int64), "s": np.array([0, 3, 2, 4], np.int64)})
    model = optimized(data, "basic")
    assert ops(model) == ["Reshape", "Neg"]
    np.testing.assert_array_equal(model.graph.initializers[model.graph.nodes[0].inputs[1]], [3, 8])
    assert_same_outputs(data, model, {"x": rand(2, 3, 4)})


def test_reshape_after_reshape_with_symbolic_dims():
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Reshape", ["a", "s2"], ["y"])]
    data = make_model(nodes, [vi("x", ["n", 6])], [vi("y", None)],
                      {"s1": np.array([-1, 2, 3], np.int64), "s2": np.array([-1, 3], np.int64)})
    model = optimized(data, "basic")
    assert ops(model) == ["Reshape"]
    assert_same_outputs(data, model, {"x": rand(4, 6)})


def test_chain_with_a_shared_intermediate_or_copied_dims_stays():
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]),
             helper.make_node("Reshape", ["a", "s2"], ["y"]),
             helper.make_node("Neg", ["a"], ["z"])]
    data = make_model(nodes, [vi("x", ["n", 6])], [vi("y", None), vi("z", None)],
                      {"s1": np.array([-1, 2, 3], np.int64), "s2": np.array([-1, 3], np.int64)})
    assert ops(optimized(data, "basic")) == ["Reshape", "Reshape", "Neg"]
    zero = [helper.make_node("Reshape", ["x", "s1"], ["a"]), helper.make_node("Reshape", ["a", "s2"], ["y"])]
    data = make_model(zero, [vi("x", ["n", 6])], [vi("y", None)],
                      {"s1": np.array([-1, 2, 3], np.int64), "s2": np.array([0, 6], np.int64)})
    assert ops(optimized(data, "basic")) == ["Reshape", "Reshape"]


def test_reshape_to_the_same_static_shape_is_removed():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3])], {"s": np.array([2, -1], np.int64)})
    model = optimized(data, "basic")
    assert ops(model) == ["Neg"]
    assert_same_outputs(data, model, {"x": rand(2, 3)})
