"""Reshape targets computed from the input's own shape become constant targets."""
from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def _split_model(source: str):
    n = helper.make_node
    nodes = [n("Shape", [source], ["s"]),
             n("Gather", ["s", "i0"], ["d0"], axis=0), n("Unsqueeze", ["d0", "ax"], ["u0"]),
             n("Slice", ["s", "one", "two"], ["d1"]),
             n("Concat", ["u0", "d1", "heads"], ["target"], axis=0),
             n("Reshape", ["x", "target"], ["y"])]
    inits = {"i0": np.array(0, np.int64), "ax": np.array([0], np.int64), "one": np.array([1], np.int64),
             "two": np.array([2], np.int64), "heads": np.array([2, -1], np.int64)}
    inputs = [vi("x", ["b", "s", 6])] + ([vi("other", ["b", "s", 6])] if source != "x" else [])
    return make_model(nodes, inputs, [vi("y", ["b", "s", 2, 3])], inits)


def test_own_dims_become_copy_entries():
    data = _split_model("x")
    model = optimized(data, "basic")
    assert ops(model) == ["Reshape"]
    np.testing.assert_array_equal(model.graph.initializers[model.graph.nodes[0].inputs[1]], [0, 0, 2, -1])
    assert_same_outputs(data, model, {"x": rand(3, 4, 6)})


def test_dims_of_another_value_are_kept():
    data = _split_model("other")
    model = optimized(data, "basic")
    assert "Shape" in ops(model)
    assert_same_outputs(data, model, {"x": rand(3, 4, 6), "other": rand(3, 4, 6, seed=1)})
