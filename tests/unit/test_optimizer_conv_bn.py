"""Conv + BatchNormalization folding."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def _bn_params(c, seed):
    rng = np.random.RandomState(seed)
    return {"scale": rng.uniform(0.5, 1.5, c).astype(np.float32), "shift": rand(c, seed=seed + 1),
            "mean": rand(c, seed=seed + 2), "var": rng.uniform(0.5, 1.5, c).astype(np.float32)}


@pytest.mark.parametrize("group,with_bias", [(1, False), (1, True), (2, False), (4, True)])
def test_batchnorm_folds_into_the_conv(group, with_bias):
    inits = dict(_bn_params(4, 3), w=rand(4, 4 // group, 3, 3, seed=1))
    conv_in = ["x", "w"]
    if with_bias:
        inits["b"] = rand(4, seed=9)
        conv_in.append("b")
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1], group=group),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"],
                              epsilon=1e-3)]
    data = make_model(nodes, [vi("x", [1, 4, 6, 6])], [vi("y", [1, 4, 6, 6])], inits, opset=15)
    model = optimized(data, "extended")
    assert ops(model) == ["Conv"] and len(model.graph.nodes[0].inputs) == 3
    assert set(model.graph.initializers) & {"scale", "shift", "mean", "var"} == set()
    assert_same_outputs(data, model, {"x": rand(1, 4, 6, 6, seed=5)}, rtol=1e-4, atol=1e-5)


def test_basic_level_keeps_the_batchnorm():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"])]
    data = make_model(nodes, [vi("x", [1, 2, 4, 4])], [vi("y", None)],
                      dict(_bn_params(3, 0), w=rand(3, 2, 1, 1)))
    assert ops(optimized(data, "basic")) == ["Conv", "BatchNormalization"]


def test_shared_conv_output_or_non_constant_params_stay():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"]),
             helper.make_node("Neg", ["c"], ["z"])]
    data = make_model(nodes, [vi("x", [1, 2, 4, 4])], [vi("y", None), vi("z", None)],
                      dict(_bn_params(3, 0), w=rand(3, 2, 1, 1)))
    assert ops(optimized(data)) == ["Conv", "BatchNormalization", "Neg"]
    params = _bn_params(3, 0)
    nodes = nodes[:2]
    data = make_model(nodes, [vi("x", [1, 2, 4, 4]), vi("var", [3])], [vi("y", None)],
                      dict({k: v for k, v in params.items() if k != "var"}, w=rand(3, 2, 1, 1)))
    assert ops(optimized(data)) == ["Conv", "BatchNormalization"]
