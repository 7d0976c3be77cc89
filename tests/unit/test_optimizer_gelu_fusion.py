"""Gelu fusion from its erf form and its tanh form."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, optimized, rand, vi

C = {"sqrt2": math.sqrt(2.0), "inv_sqrt2": 1 / math.sqrt(2.0), "one": 1.0, "half": 0.5,
     "three": 3.0, "k": 0.044715, "s2pi": math.sqrt(2 / math.pi)}


def _model(nodes, opset=17, **override):
    inits = {k: np.array(override.get(k, v), np.float32) for k, v in C.items()}
    used = {i for n in nodes for i in n.input}
    nodes = [helper.make_node("Relu", ["inp"], ["x"])] + nodes   # x is an intermediate
    return make_model(nodes, [vi("inp", [2, 5])], [vi("y", [2, 5])],
                      {k: v for k, v in inits.items() if k in used}, opset=opset)


def _erf_form(variant):
    head = [helper.make_node("Div", ["x", "sqrt2"], ["s"]) if variant != "mul_scale"
            else helper.make_node("Mul", ["x", "inv_sqrt2"], ["s"]),
            helper.make_node("Erf", ["s"], ["e"]), helper.make_node("Add", ["e", "one"], ["p"])]
    if variant == "half_first":     # (x * 0.5) * (1 + erf)
        return head + [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
    if variant == "half_mid":       # (0.5 * (1 + erf)) * x
        return head + [helper.make_node("Mul", ["half", "p"], ["h"]), helper.make_node("Mul", ["h", "x"], ["y"])]
    return head + [helper.make_node("Mul", ["x", "p"], ["h"]), helper.make_node("Mul", ["h", "half"], ["y"])]


def _tanh_form(cube):
    if cube == "pow":
        nodes = [helper.make_node("Pow", ["x", "three"], ["c"])]
    else:
        nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Mul", ["sq", "x"], ["c"])]
    return nodes + [helper.make_node("Mul", ["k", "c"], ["kc"]), helper.make_node("Add", ["x", "kc"], ["i"]),
                    helper.make_node("Mul", ["i", "s2pi"], ["t_in"]), helper.make_node("Tanh", ["t_in"], ["t"]),
                    helper.make_node("Add", ["t", "one"], ["p"]), helper.make_node("Mul", ["x", "half"], ["h"]),
                    helper.make_node("Mul", ["h", "p"], ["y"])]


def _check(data, domain, approximate):
    model = optimized(data)
    relu, gelu = model.graph.nodes
    assert (gelu.domain, gelu.op_type, gelu.attributes["approximate"]) == (domain, "Gelu", approximate)
    assert gelu.outputs == ["y"] and model.graph.initializers == {}
    assert_same_outputs(data, model, {"inp": rand(2, 5, seed=1) * 3}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("variant", ["plain", "mul_scale", "half_first", "half_mid"])
def test_erf_forms(variant):
    _check(_model(_erf_form(variant)), "com.onnxedge", "none")


@pytest.mark.parametrize("cube", ["pow", "mul"])
def test_tanh_forms(cube):
    _check(_model(_tanh_form(cube)), "com.onnxedge", "tanh")


def test_opset_20_uses_onnx_gelu():
    _check(_model(_erf_form("plain"), opset=20), "", "none")


def test_wrong_constant_is_not_fused():
    data = _model(_erf_form("plain"), half=0.6)
    assert "Gelu" not in [n.op_type for n in optimized(data).graph.nodes]
