"""Activation fusion into com.onnxedge FusedConv / FusedGemm / FusedMatMul."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi

ACTIVATIONS = [("Relu", {}, []), ("LeakyRelu", {"alpha": 0.2}, []), ("Sigmoid", {}, []),
               ("Tanh", {}, []), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
               ("Clip", {}, ["lo", "hi"]), ("Clip", {}, ["", "hi"])]
PRODUCERS = {
    "Conv": (["x4", "w4"], {"pads": [1, 1, 1, 1]}),
    "Gemm": (["x2", "w2", "c2"], {"transB": 1}),
    "MatMul": (["x3", "w3"], {}),
}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
@pytest.mark.parametrize("act,attrs,extra", ACTIVATIONS, ids=[a[0] + str(len([e for e in a[2] if e])) for a in ACTIVATIONS])
def test_activation_fuses(producer, act, attrs, extra):
    ins, pattrs = PRODUCERS[producer]
    nodes = [helper.make_node(producer, ins, ["p"], **pattrs),
             helper.make_node(act, ["p"] + extra, ["y"], **attrs)]
    inits = {"w4": rand(3, 2, 3, 3), "w2": rand(4, 3), "c2": rand(4, seed=1), "w3": rand(3, 4),
             "lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}
    inputs = {"Conv": vi("x4", [1, 2, 5, 5]), "Gemm": vi("x2", [2, 3]), "MatMul": vi("x3", [2, 2, 3])}
    data = make_model(nodes, [inputs[producer]], [vi("y", None)],
                      {k: v for k, v in inits.items() if k in ins + extra})
    model = optimized(data)
    node, = model.graph.nodes
    assert (node.domain, node.op_type, node.attributes["activation"]) == \
        ("com.onnxedge", "Fused" + producer, act)
    x = rand(*[d.dim_value for d in inputs[producer].type.tensor_type.shape.dim], seed=4) * 3
    assert_same_outputs(data, model, {inputs[producer].name: x}, rtol=1e-5, atol=1e-6)


def test_bias_then_activation_give_one_fused_matmul():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 2, 3])], [vi("y", None)], {"w": rand(3, 4), "b": rand(4, seed=2)})
    model = optimized(data)
    assert ops(model) == ["FusedMatMul"] and model.graph.nodes[0].attributes["activation"] == "Relu"
    assert_same_outputs(data, model, {"x": rand(2, 2, 3, seed=3)})


def test_activation_of_a_shared_value_or_a_non_constant_clip_stays():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3])], [vi("y", None), vi("m", None)], {"w": rand(3, 4)})
    assert ops(optimized(data)) == ["MatMul", "Relu"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Clip", ["m", "lo"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3]), vi("lo", [])], [vi("y", None)], {"w": rand(3, 4)})
    assert ops(optimized(data)) == ["MatMul", "Clip"]
