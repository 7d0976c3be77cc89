"""LayerNormalization fusion from ReduceMean / Sub / Pow / ReduceMean / Add / Sqrt / Div."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, optimized, rand, vi


def _decomposed(square="Pow", axes=(-1,), opset=17, affine=True):
    def rmean(x, y):
        if opset >= 18:
            return helper.make_node("ReduceMean", [x, "axes"], [y])
        return helper.make_node("ReduceMean", [x], [y], axes=list(axes))
    nodes = [rmean("x", "mean"), helper.make_node("Sub", ["x", "mean"], ["d"])]
    nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"]) if square == "Pow"
                 else helper.make_node("Mul", ["d", "d"], ["sq"]))
    nodes += [rmean("sq", "var"), helper.make_node("Add", ["var", "eps"], ["ve"]),
              helper.make_node("Sqrt", ["ve"], ["std"]), helper.make_node("Div", ["d", "std"], ["n"])]
    norm = [8] if len(axes) == 1 else [3, 8]
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "axes": np.array(axes, np.int64)}
    if affine:
        nodes += [helper.make_node("Mul", ["gamma", "n"], ["g"]), helper.make_node("Add", ["g", "beta"], ["y"])]
        inits.update(gamma=1 + rand(*norm, seed=1), beta=rand(*norm, seed=2))
    else:
        nodes[-1].output[0] = "y"
    if opset < 18:
        del inits["axes"]
    return make_model(nodes, [vi("x", [2, 3, 8])], [vi("y", [2, 3, 8])], inits, opset=opset)


@pytest.mark.parametrize("square", ["Pow", "Mul"])
@pytest.mark.parametrize("opset,domain", [(17, ""), (18, ""), (13, "com.onnxedge")])
def test_decomposed_layer_norm_becomes_one_node(square, opset, domain):
    data = _decomposed(square, opset=opset)
    model = optimized(data)
    node, = model.graph.nodes
    assert (node.domain, node.op_type) == (domain, "LayerNormalization")
    assert node.attributes["axis"] == -1 and abs(node.attributes["epsilon"] - 1e-5) < 1e-12
    assert_same_outputs(data, model, {"x": rand(2, 3, 8, seed=4) * 3 + 1}, rtol=1e-4, atol=1e-5)


def test_two_trailing_axes_without_affine():
    data = _decomposed(axes=(-2, -1), affine=False)
    model = optimized(data)
    node, = model.graph.nodes
    assert node.op_type == "LayerNormalization" and node.attributes["axis"] == -2
    assert_same_outputs(data, model, {"x": rand(2, 3, 8, seed=4)}, rtol=1e-4, atol=1e-5)


def test_normalizing_a_leading_axis_is_not_fused():
    data = _decomposed(axes=(1,))
    model = optimized(data)
    assert "LayerNormalization" not in [n.op_type for n in model.graph.nodes]
    assert_same_outputs(data, model, {"x": rand(2, 3, 8, seed=4)}, rtol=1e-4, atol=1e-5)
