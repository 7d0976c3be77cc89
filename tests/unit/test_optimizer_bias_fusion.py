"""Bias fusion: Conv/Gemm/MatMul + Add of a constant bias."""
from __future__ import annotations

import numpy as np
from onnx import helper

from optimizer_util import assert_same_outputs, make_model, ops, optimized, rand, vi


def test_conv_add_channel_bias_becomes_conv_b():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"]), helper.make_node("Add", ["bias", "c"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3, 5, 5])], [vi("y", None)],
                      {"w": rand(4, 3, 3, 3), "b": rand(4, seed=1), "bias": rand(1, 4, 1, 1, seed=2)})
    model = optimized(data)
    assert ops(model) == ["Conv"] and len(model.graph.nodes[0].inputs) == 3
    assert_same_outputs(data, model, {"x": rand(2, 3, 5, 5, seed=3)}, rtol=1e-5, atol=1e-5)


def test_gemm_add_row_bias_becomes_gemm_c():
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"], transB=1, alpha=0.5),
             helper.make_node("Add", ["g", "bias"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3])], [vi("y", None)], {"w": rand(4, 3), "bias": rand(1, 4, seed=1)})
    model = optimized(data)
    assert ops(model) == ["Gemm"] and len(model.graph.nodes[0].inputs) == 3
    assert_same_outputs(data, model, {"x": rand(2, 3, seed=3)})


def test_matmul_add_is_gemm_in_2d_and_fused_matmul_otherwise():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["y"])]
    inits = {"w": rand(3, 4), "bias": rand(4, seed=1)}
    data = make_model(nodes, [vi("x", ["n", 3])], [vi("y", None)], inits)
    model = optimized(data)
    assert ops(model) == ["Gemm"]
    assert_same_outputs(data, model, {"x": rand(5, 3, seed=3)})
    data = make_model(nodes, [vi("x", ["b", "s", 3])], [vi("y", None)], inits)
    model = optimized(data)
    assert [(n.domain, n.op_type) for n in model.graph.nodes] == [("com.onnxedge", "FusedMatMul")]
    assert model.opset("com.onnxedge") == 1
    assert_same_outputs(data, model, {"x": rand(2, 5, 3, seed=3)})


def test_bias_that_is_not_per_column_stays():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["y"])]
    data = make_model(nodes, [vi("x", [4, 3])], [vi("y", None)], {"w": rand(3, 4), "bias": rand(4, 1, seed=1)})
    assert ops(optimized(data)) == ["MatMul", "Add"]
    data = make_model(nodes, [vi("x", [4, 3]), vi("bias", [4])], [vi("y", None)], {"w": rand(3, 4)})
    assert ops(optimized(data)) == ["MatMul", "Add"]


def test_integer_matmul_is_left_alone():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["y"])]
    data = make_model(nodes, [vi("x", [2, 3], 6)], [vi("y", None, 6)],
                      {"w": np.ones((3, 4), np.int32), "bias": np.arange(4, dtype=np.int32)})
    assert ops(optimized(data)) == ["MatMul", "Add"]
